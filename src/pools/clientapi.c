/* A kube_api request function over the REST client, so the pool
 * reconciler (written against kube_api) runs against a real apiserver.
 * kube/api.h names a kube_api_from_client that does not exist yet; this
 * adapter lives here until it does, and is what the e2e driver uses. */
#include "pools/pools.h"
#include "pools/clientapi.h"
#include "util/str.h"

#include <stdlib.h>
#include <string.h>

/* kube_request parses the answer; kube_api hands out raw bytes, so print
 * the JSON back. A failure is answered with a Status object carrying the
 * reason and message, which kube_api_call puts into its error text. */
static int client_request(void *ud, const char *method, const char *path, const char *content_type,
			  const char *body, size_t body_len, long *status, char **resp, size_t *resp_len)
{
	kube_status st;
	json_object *out = NULL;
	prd_err e;
	const char *text = NULL;
	int rc;

	memset(&st, 0, sizeof(st));
	*resp = NULL;
	*resp_len = 0;
	rc = kube_request(ud, method, path, content_type, body, body_len, &out, &st, &e);
	*status = st.http_code ? st.http_code : (rc ? 0 : 200);
	if(rc) {
		json_object_put(out);
		out = json_object_new_object();
		if(out) {
			json_object_object_add(out, "kind", json_object_new_string("Status"));
			json_object_object_add(out, "status", json_object_new_string("Failure"));
			json_object_object_add(out, "reason",
					       json_object_new_string(st.reason[0] ? st.reason : prd_strerror(rc)));
			json_object_object_add(out, "message",
					       json_object_new_string(st.message[0] ? st.message : e.msg));
			json_object_object_add(out, "code", json_object_new_int64(st.http_code));
		}
	}
	if(out)
		text = json_object_to_json_string_ext(out, JSON_C_TO_STRING_PLAIN);
	if(text && !(*resp = str_dup(text))) {
		json_object_put(out);
		return rc ? rc : PRD_ENOMEM;
	}
	if(*resp)
		*resp_len = strlen(*resp);
	json_object_put(out);
	return rc;
}

kube_api pool_api_from_client(kube_client *c)
{
	kube_api a = { client_request, c };
	return a;
}
