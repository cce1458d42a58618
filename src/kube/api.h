/* kube_api: the one seam between controller code and "the API server".
 *
 * Controller code (ProvisioningRequests, pool population, status writes,
 * events) talks to kube-apiserver through a kube_api: a request function
 * and its context. `provreqd run` backs it with the real REST client
 * (kube_api_from_client), `provreqd simulate` and integration tests with the
 * in-memory store (kube_api_from_memapi). The function has the same shape as
 * the driver host's kube_request, so drivers ride the same seam. */
#ifndef PRD_KUBE_API_H
#define PRD_KUBE_API_H

#include <json-c/json.h>
#include <stddef.h>

#include "kube/client.h"
#include "kube/memapi.h"
#include "util/err.h"

/* Send one request. On return *status is the HTTP status (0 if there was
 * no answer) and *resp (malloc'ed, caller frees; may be NULL) the body.
 * Returns 0 for 2xx, else a PRD_E* code: ENOTFOUND 404, EEXIST 409
 * AlreadyExists, ECONFLICT 409 Conflict, EGONE 410, EPERM 401/403, EINVAL
 * 400/422, EAGAIN 429/5xx, EIO/ETIMEDOUT for transport failures. */
typedef int (*kube_api_fn)(void *ud, const char *method, const char *path, const char *content_type,
			   const char *body, size_t body_len, long *status, char **resp, size_t *resp_len);

typedef struct kube_api {
	kube_api_fn request;
	void *ud;
} kube_api;

kube_api kube_api_from_memapi(memapi *m);
/* Over the REST client (borrowed; must outlive the kube_api). A failure's
 * body is the apiserver's Status (reason, message, code), rebuilt from the
 * client's decoding when the answer had none. */
kube_api kube_api_from_client(kube_client *c);

/* Call with a JSON body (may be NULL) and parse the answer into *out
 * (caller puts; out may be NULL). A failure's message names the verb, the
 * path and the apiserver's Status message; *http_status (optional) gets
 * the status. */
int kube_api_call(const kube_api *api, const char *method, const char *path, const char *content_type,
		  json_object *body, json_object **out, long *http_status, prd_err *err);

#endif
