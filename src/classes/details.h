/* provisioningClassDetails values of any length.
 *
 * The CRD caps each value at 32,768 bytes (and the map at 64 keys). A value
 * longer than PR_DETAIL_CHUNK is stored under `key` and `key.2`, `key.3`,
 * ... up to PR_DETAIL_MAX_CHUNKS pieces, so a plan or a booking of a
 * thousand nodes with long names still fits the API. Writing a value
 * removes the pieces an older, longer value left behind. */
#ifndef PRD_CLASSES_DETAILS_H
#define PRD_CLASSES_DETAILS_H

#include <json-c/json.h>
#include <stddef.h>

#include "kube/objects.h"
#include "util/err.h"

#define PR_DETAIL_CHUNK 32000
#define PR_DETAIL_MAX_CHUNKS 16

/* Put `value` (NULL: remove the key) into `patch`, a JSON object of
 * provisioningClassDetails for a merge patch (a removed key is null).
 * PRD_ERANGE when the value needs more than PR_DETAIL_MAX_CHUNKS pieces
 * (nothing is put then). */
int pr_details_put(json_object *patch, const char *key, const char *value, prd_err *err);

/* The value of `key` on the request, its pieces joined; NULL when absent
 * or when a piece is missing. Caller frees. */
char *pr_details_get(const kube_provreq *pr, const char *key);

/* A time of provisioningClassDetails: written as RFC 3339 with
 * microseconds (rfc3339_format_micro); read from that, or from the whole
 * number of nanoseconds since the epoch that earlier builds wrote, so a
 * status written by an older leader still counts. false when neither. */
bool pr_details_time(const char *text, int64_t *ns);

/* Does the request's status show a scale-up plan that has not ended
 * (phase planned, increasing, waiting-for-nodes or rolling-back)? */
bool pr_details_plan_open(const kube_provreq *pr);

#endif
