/* ProvisioningClass (provreqd.io/v1alpha1, cluster-scoped): a class an
 * administrator offers, in the manner of a StorageClass. It names a class
 * provreqd serves (spec.provisioningClassName: built-in or a driver's),
 * gives default parameters (spec.parameters), may fix some of them
 * (spec.fixedParameters: the request cannot override those) and may limit
 * which namespaces use it (spec.allowedNamespaces, a label selector over
 * the Namespace's labels).
 *
 * This file reads and checks the object and merges parameters; it knows
 * nothing of the controller (src/provreq/pclass_use.c applies it to the
 * requests of a pass). */
#ifndef PRD_CLASSES_PCLASS_H
#define PRD_CLASSES_PCLASS_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>

#include "kube/objects.h"
#include "kube/selector.h"
#include "classes/vocab.h"
#include "util/arena.h"
#include "util/err.h"

#define PR_PCLASS_GROUP "provreqd.io"
#define PR_PCLASS_VERSION "v1alpha1"
#define PR_PCLASS_API_VERSION "provreqd.io/v1alpha1"
#define PR_PCLASS_KIND "ProvisioningClass"
#define PR_PCLASS_PATH "/apis/provreqd.io/v1alpha1/provisioningclasses"

/* The reasons (PR_R_PCLASS_INVALID, PR_R_NS_NOT_ALLOWED) and details keys
 * (PR_DETAIL_PCLASS, PR_DETAIL_EFFECTIVE_PARAMS) are in vocab.h. */

/* The same bounds the ProvisioningRequest CRD puts on spec.parameters. */
#define PR_PCLASS_MAX_PARAMS 100
#define PR_PCLASS_MAX_VALUE 255

typedef struct pr_pclass {
	char *name;
	char *uid;
	char *rv;
	char *target;          /* spec.provisioningClassName; NULL when `error` is set */
	char *description;     /* spec.description, or NULL */
	kube_kv *params;       /* spec.parameters, sorted by key (strings owned) */
	size_t nparams;
	char **fixed;          /* spec.fixedParameters */
	size_t nfixed;
	sel *allowed;          /* spec.allowedNamespaces; NULL: every namespace */
	char *allowed_text;    /* ... as a selector string, for messages */
	/* Why the object cannot be used (set by pr_pclass_parse for a
	 * malformed spec, or by its user for a parameter whose value the
	 * controller refuses), or NULL. */
	char *error;
} pr_pclass;

/* Read `o` into `out`. A malformed spec is not an error of the call: it
 * returns 0 with out->error saying what is wrong (the object is then
 * unusable and requests that name it are refused with that message). The
 * only error is PRD_ENOMEM. Clear with pr_pclass_clear() either way. */
int pr_pclass_parse(const kube_provclass *o, pr_pclass *out, prd_err *err);
void pr_pclass_clear(pr_pclass *p);
/* Mark the object unusable with a message (formatted; the first reason
 * given wins). */
void pr_pclass_refuse(pr_pclass *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The parameters a request of this class runs with: the class's, then the
 * request's own over them except where the class fixes the key. Sorted by
 * key; the array and its strings live in `ar` (the values are borrowed
 * from both sides, which must outlive the arena's use). PRD_ENOMEM or 0. */
int pr_pclass_merge(const pr_pclass *p, const kube_kv *req, size_t nreq, arena *ar, kube_kv **out, size_t *nout);

/* Does the class let a namespace with these labels (a JSON object, NULL
 * for none) use it? */
bool pr_pclass_allows(const pr_pclass *p, const json_object *ns_labels);

/* The parameters as a JSON object's text, keys in order. Caller frees;
 * NULL when out of memory. */
char *pr_pclass_params_json(const kube_kv *kv, size_t n);

#endif
