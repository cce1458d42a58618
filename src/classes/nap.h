/* Node auto-provisioning inside the atomic class (classes/nap.c).
 *
 * When no node group can provide a request's pods, alone or split, the
 * drivers that auto-provision (ABI 1.5) offer machine shapes; each shape
 * becomes a candidate group (the shape's node with the labels and taints
 * the pods select and tolerate) that the expander chain weighs like any
 * other. The chosen one enters the request's plan as a group that does
 * not exist yet: it is recorded in the state store with the plan, created
 * right before its increase (at_increase), and deleted once empty when
 * the plan rolled back or after the scale-down idle time.
 *
 * Cluster-wide limits (--cores-total, --memory-total, --gpu-total) are
 * checked for every plan, auto-provisioned or not, before any cloud call. */
#ifndef PRD_CLASSES_NAP_H
#define PRD_CLASSES_NAP_H

#include "classes/atomic_int.h"

/* What a plan creates (pr_class_group.nap_new); lives in the pass arena. */
typedef struct nap_new {
	state_db *db;
	const char *shape;
	const char *zone;            /* NULL: none */
	prd_cloud_label *labels;
	size_t nlabels;
	prd_cloud_taint *taints;
	size_t ntaints;
	int32_t max_size;
	bool has_price;
	int64_t price_micros;
	const char *plan_id;         /* set by nap_record */
	const char *owner;           /* ... the plan's owner token */
} nap_new;

/* Candidate new groups for `rest` (podSets of a request, the pods that do
 * not fit existing nodes), one per usable shape of every driver that
 * auto-provisions, in the pass arena, into *out / *n (none when
 * auto-provisioning is off, or its group limit is reached). `why` gets
 * the reasons shapes were left out. */
void nap_candidates(const pr_class_host *h, const char *req_uid, const sched_podset *rest, size_t nsets,
		    pr_class_group **out, size_t *n, char *why, size_t len);

/* Is the plan `ch` within every cluster-wide limit, counting every node
 * of the cluster and (count_coming) what open plans still add? false with
 * msg naming the limit, the current total and what the plan needs. */
bool nap_within_limits(const pr_class_host *h, const at_choice *ch, bool count_coming, char *msg, size_t len);

/* Write-ahead: record that plan `plan_id` creates group g (g->nap_new),
 * before the plan's cloud calls. */
int nap_record(const pr_class_host *h, pr_class_group *g, const char *plan_id, prd_err *e);

/* The records of the groups plan `p`'s parts create, as the status keeps
 * them (PR_DETAIL_NAP_SPEC): a JSON text the caller frees, or NULL when
 * the plan creates no group. */
char *nap_spec_of(const at_choice *ch, size_t nparts);
/* A new leader takes up the records of the groups the plan in `pr`'s
 * status creates (PR_DETAIL_NAP_SPEC) into its store, for each group whose
 * owner token is the plan's (`plan` "uid/ns") and that the store does not
 * record: nap_pending_group then finds them. false with `why` when a
 * record is not one provreqd wrote. */
bool nap_adopt_specs(const pr_class_host *h, const kube_provreq *pr, const char *plan, char *why, size_t len);

/* The cloud call that creates g when it is a group a plan is to create
 * (nothing otherwise): at_increase's first step. 0, or a PRD_CLOUD_E*
 * code with *de filled; a refusal backs the shape off. */
int nap_create(pr_class_group *g, prd_cloud_error *de);

/* A plan on auto-provisioned group `id` failed: back its shape off as a
 * refused creation does, so the next attempt is not a new group of the
 * same shape under a new id, pass after pass (a Node the apiserver
 * refuses fails every group of the shape alike). Nothing when the store
 * does not record `id` as auto-provisioned. */
void nap_fail_shape(const pr_class_host *h, const char *id, const char *cause);

/* The store records group `id` as auto-provisioned (made, or to be made,
 * by a plan). */
bool nap_group_recorded(const pr_class_host *h, const char *id);

/* A group the store records as one a plan creates, which the cloud does
 * not list (not yet created, or listed late): a group of the pass with
 * nap_new set, or NULL when there is no such record. */
pr_class_group *nap_pending_group(const pr_class_host *h, const char *id);

/* "new node group ID of shape S in zone Z" (or the group id) into out. */
const char *nap_words(const pr_class_group *g, char *out, size_t len);

/* After the requests: delete empty auto-provisioned groups whose plan was
 * rolled back, or that stayed empty for the scale-down idle time; forget
 * the records of groups that are gone. */
void nap_sweep(const pr_class_host *h, const kube_provreq *const *prs, size_t nprs);

/* The backoff key of a shape (state store group backoff). */
void nap_shape_key(const char *driver, const char *shape, char *out, size_t len);

#endif
