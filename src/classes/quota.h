/* Would a namespace's ResourceQuotas admit a request's pods?
 *
 * Before provreqd books or buys capacity for a request, it checks that the
 * pods, all of them, would be admitted by the ResourceQuotas of their
 * namespace: for every quota whose scopes select the pods and every key of
 * it that a pod's compute requests count against (pods, cpu, memory,
 * ephemeral-storage and their requests.* forms, requests.<extended> and
 * hugepages), what the pods ask must fit in hard − used − what other
 * requests of the namespace hold (booked but not yet consumed). A Capsule
 * ResourcePool provisions its bound claims as the ResourceQuota
 * capsule-pool-<pool> of each namespace, so pool claims are checked here
 * too and the message names the pool.
 *
 * Not checked: limits.* keys (the simulation reads requests, not limits),
 * object counts other than pods, storage; scopes other than Terminating,
 * NotTerminating, BestEffort, NotBestEffort and PriorityClass make a quota
 * not apply (they select no pods of a template: CrossNamespacePodAffinity
 * is the exception, and it is reported as not checked).
 *
 * Nothing here reads the API: the caller passes the quotas as listed. */
#ifndef PRD_CLASSES_QUOTA_H
#define PRD_CLASSES_QUOTA_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sched/sched.h"

/* Pods of one template: what each requests, the template's pod spec (for
 * the scopes; may be NULL) and how many. */
typedef struct pr_quota_pods {
	const sched_pod_spec *pod;
	const json_object *spec;
	int64_t count;
} pr_quota_pods;

/* Check the pods `ask` against the quotas (the `items` of a
 * ResourceQuotaList), with `held` already taken from them. Returns 0 when
 * every quota admits them, 1 when one does not (msg names the quota, the
 * key, what is asked and what is free), PRD_EINVAL for a quota whose
 * values do not parse (msg says which; the caller treats it as not
 * admitting: provreqd cannot tell). */
int pr_quota_check(const json_object *quotas, const pr_quota_pods *ask, size_t nask, const pr_quota_pods *held,
		   size_t nheld, char *msg, size_t len);

/* Does the quota's scope select pods of this template's pod spec? */
bool pr_quota_applies(const json_object *quota, const json_object *pod_spec);

/* How much of quota key `key` one pod takes (cpu in millicores, the rest in
 * base units); false when the key is not one the check counts pods
 * against. */
bool pr_quota_per_pod(const char *key, const sched_pod_spec *pod, int64_t *out);

#endif
