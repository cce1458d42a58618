/* ProvisioningRequest semantics that do not need the cluster: parameters,
 * terminal states, ordering, and the condition list with Kubernetes'
 * lastTransitionTime rules. (Class names and what a class does are the
 * class modules', src/classes/class.h.) */
#ifndef PRD_PROVREQ_REQUEST_H
#define PRD_PROVREQ_REQUEST_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>

#include "kube/objects.h"
#include "util/err.h"

#include "classes/vocab.h"

typedef struct pr_params {
	bool has_valid_until;
	int64_t valid_until_s;        /* ValidUntilSeconds: window from creation */
	bool no_retry;                /* noRetry: "true" */
	const char *processor;        /* processorInstance (borrowed) or NULL */
} pr_params;

/* Parse the parameters map. Bad values (ValidUntilSeconds not a positive
 * integer, noRetry not true/false) are PRD_EINVAL with a message naming the
 * parameter; the caller fails the request with reason InvalidRequest. */
int pr_params_parse(const kube_provreq *pr, pr_params *out, prd_err *err);
/* One parameter into *out, by the same rules (unknown keys are left to
 * their class: 0). The kubectl plugin checks --param with it. */
int pr_param_parse(const char *key, const char *value, pr_params *out, prd_err *err);

/* The condition of a type, or NULL. */
const kube_condition *pr_cond(const kube_provreq *pr, const char *type);
/* True when the condition exists with status "True". */
bool pr_cond_true(const kube_provreq *pr, const char *type);
/* Terminal: Failed, BookingExpired or CapacityRevoked is True. */
bool pr_is_terminal(const kube_provreq *pr);

/* Deterministic processing order: oldest creationTimestamp first, then
 * name, then namespace (qsort comparator over `const kube_provreq *`). */
int pr_order_cmp(const void *a, const void *b);

/* A condition list being edited: starts as a copy of the object's list and
 * is written back whole. Types it does not touch keep every field, so
 * conditions written by other controllers survive. */
typedef struct pr_conds {
	json_object *list;   /* array of metav1.Condition (owned) */
	bool changed;
} pr_conds;

int pr_conds_init(pr_conds *c, const kube_provreq *pr, prd_err *err);
void pr_conds_free(pr_conds *c);
/* Set a condition. lastTransitionTime moves only when the status changes;
 * reason, message and observedGeneration are updated in place. */
int pr_conds_set(pr_conds *c, const char *type, const char *status, const char *reason, const char *message,
		 int64_t now_ns, int64_t generation);
/* status of the edited list for a type, or NULL. */
const char *pr_conds_status(const pr_conds *c, const char *type);
const char *pr_conds_reason(const pr_conds *c, const char *type);

#endif
