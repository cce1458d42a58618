/* Kubernetes label selectors (k8s.io/apimachinery/pkg/labels and
 * metav1.LabelSelectorAsSelector).
 *
 * A sel is an immutable list of requirements, sorted by key, that must all
 * hold. It comes from the string syntax
 *
 *     a=b,c!=d,e in (x,y),f notin (z),g,!h,i==j,k>5,l<10
 *
 * (white space allowed around tokens; "" selects everything) or from a
 * LabelSelector object ({"matchLabels": {...}, "matchExpressions": [...]};
 * {} selects everything, a NULL object selects nothing, as in Kubernetes).
 *
 * Ownership: sel_parse, sel_from_json, sel_everything and sel_nothing hand
 * a new sel to the caller, who releases it with sel_free(). Every other
 * function borrows its arguments and keeps no pointer to them. A sel is
 * never modified after construction, so it can be shared read-only between
 * threads. */
#ifndef PRD_KUBE_SELECTOR_H
#define PRD_KUBE_SELECTOR_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>

#include "util/err.h"

typedef enum sel_op {
	SEL_EXISTS,          /* "key" */
	SEL_DOES_NOT_EXIST,  /* "!key" */
	SEL_EQUALS,          /* "key=v" */
	SEL_DOUBLE_EQUALS,   /* "key==v" (same meaning as =, kept for printing) */
	SEL_NOT_EQUALS,      /* "key!=v": true when the label is absent */
	SEL_IN,              /* "key in (a,b)" */
	SEL_NOT_IN,          /* "key notin (a,b)": true when the label is absent */
	SEL_GT,              /* "key>5": label present and an integer above 5 */
	SEL_LT               /* "key<5" */
} sel_op;

typedef struct sel sel;

/* One label, for matching against labels not held in JSON. */
typedef struct sel_label {
	const char *key;
	const char *value;
} sel_label;

/* Parse the string syntax. On failure returns PRD_EINVAL with
 * "offset N: found 'x', expected: ..." (or the reason a key or value is
 * invalid) in err, or PRD_ENOMEM; *out is then NULL. */
int sel_parse(const char *s, sel **out, prd_err *err);

/* Build from a metav1.LabelSelector JSON object (borrowed). NULL gives a
 * selector that matches nothing; {} or one with empty matchLabels and
 * matchExpressions gives one that matches everything. Operators are In,
 * NotIn, Exists and DoesNotExist. PRD_EINVAL with a message for a malformed
 * object, an unknown operator, or an invalid key or value. */
int sel_from_json(const json_object *label_selector, sel **out, prd_err *err);

/* Selectors that match everything / nothing (NULL on allocation failure). */
sel *sel_everything(void);
sel *sel_nothing(void);

void sel_free(sel *s);

/* Do the labels satisfy every requirement? Labels are a JSON object of
 * string values (members whose value is not a string count as absent; a
 * NULL object has no labels), or an array of n key/value pairs (the first
 * pair with a key wins). */
bool sel_matches_json(const sel *s, const json_object *labels);
bool sel_matches_pairs(const sel *s, const sel_label *labels, size_t n);

/* Canonical string, as Kubernetes prints it: requirements sorted by key,
 * set values sorted. The caller frees it with free(); NULL on allocation
 * failure. A selector that matches nothing prints as "" (as in Kubernetes,
 * so that string does not parse back to the same selector). */
char *sel_to_string(const sel *s);

bool sel_is_everything(const sel *s);  /* no requirements */
bool sel_is_nothing(const sel *s);

/* Same requirements (keys, operators and values, in order)? */
bool sel_equal(const sel *a, const sel *b);

/* Read access to the requirements, for code that reasons about them (the
 * scheduler). i < sel_count(s). The strings belong to s. */
size_t sel_count(const sel *s);
const char *sel_req_key(const sel *s, size_t i);
sel_op sel_req_op(const sel *s, size_t i);
size_t sel_req_nvalues(const sel *s, size_t i);
const char *sel_req_value(const sel *s, size_t i, size_t j);

/* Kubernetes label key and value rules: a key is an optional DNS-1123
 * subdomain prefix (at most 253 characters) and '/', then a name of at most
 * 63 characters from [A-Za-z0-9._-] that starts and ends with an
 * alphanumeric; a value is empty or follows the name rule. Return 0 or
 * PRD_EINVAL with the reason in err. */
int sel_validate_key(const char *key, prd_err *err);
int sel_validate_value(const char *value, prd_err *err);

#endif
