/* kube_api: the request seam between controller code and the API server,
 * backed by the REST client or by the in-memory API. */
#include "kube/api.h"
#include "util/str.h"

#include <stdlib.h>
#include <string.h>

static int memapi_fn(void *ud, const char *method, const char *path, const char *content_type, const char *body,
		     size_t body_len, long *status, char **resp, size_t *resp_len)
{
	return memapi_request(ud, method, path, content_type, body, body_len, status, resp, resp_len);
}

kube_api kube_api_from_memapi(memapi *m)
{
	kube_api a = { memapi_fn, m };
	return a;
}

/* A 2xx answer's bytes are handed over as the apiserver sent them. A
 * failure is answered with a Status object carrying the reason and
 * message that kube_api_call puts into its error text (the client has
 * decoded the apiserver's Status, or there was no answer). */
static int client_fn(void *ud, const char *method, const char *path, const char *content_type, const char *body,
		     size_t body_len, long *status, char **resp, size_t *resp_len)
{
	kube_status st;
	json_object *out;
	prd_err e;
	const char *text = NULL;
	int rc;

	memset(&st, 0, sizeof(st));
	prd_err_clear(&e);
	rc = kube_request_bytes(ud, method, path, content_type, body, body_len, resp, resp_len, &st, &e);
	*status = st.http_code ? st.http_code : (rc ? 0 : 200);
	if(!rc)
		return 0;
	out = json_object_new_object();
	if(out) {
		json_object_object_add(out, "kind", json_object_new_string("Status"));
		json_object_object_add(out, "status", json_object_new_string("Failure"));
		json_object_object_add(out, "reason", json_object_new_string(st.reason[0] ? st.reason : prd_strerror(rc)));
		json_object_object_add(out, "message", json_object_new_string(st.message[0] ? st.message : e.msg));
		json_object_object_add(out, "code", json_object_new_int64(st.http_code));
		text = json_object_to_json_string_ext(out, JSON_C_TO_STRING_PLAIN);
	}
	if(text && (*resp = str_dup(text)))
		*resp_len = strlen(*resp);
	json_object_put(out);
	return rc;
}

kube_api kube_api_from_client(kube_client *c)
{
	kube_api a = { client_fn, c };
	return a;
}

int kube_api_call(const kube_api *api, const char *method, const char *path, const char *content_type,
		  json_object *body, json_object **out, long *http_status, prd_err *err)
{
	const char *text = body ? json_object_to_json_string_ext(body, JSON_C_TO_STRING_PLAIN) : NULL;
	char *resp = NULL;
	size_t rlen = 0;
	long status = 0;
	json_object *o = NULL;
	int rc;

	if(out)
		*out = NULL;
	if(!content_type && body)
		content_type = "application/json";
	rc = api->request(api->ud, method, path, content_type, text, text ? strlen(text) : 0, &status, &resp,
			  &rlen);
	if(http_status)
		*http_status = status;
	/* The answer is read only when wanted, or for a failure's text. */
	if(resp && rlen && (out || rc)) {
		json_tokener *tok = json_tokener_new();
		if(tok) {
			o = json_tokener_parse_ex(tok, resp, (int)rlen);
			if(json_tokener_get_error(tok) != json_tokener_success) {
				json_object_put(o);
				o = NULL;
			}
			json_tokener_free(tok);
		}
	}
	if(rc) {
		json_object *msg = NULL, *reason = NULL;
		if(o) {
			json_object_object_get_ex(o, "message", &msg);
			json_object_object_get_ex(o, "reason", &reason);
		}
		prd_err_set(err, rc, "%s %s: %ld %s: %s", method, path, status,
			    reason ? json_object_get_string(reason) : prd_strerror(rc),
			    msg ? json_object_get_string(msg) : (resp && rlen ? "(no Status in answer)" : "no answer"));
		json_object_put(o);
		free(resp);
		return rc;
	}
	if(out && resp && rlen && !o) {
		free(resp);
		return prd_err_set(err, PRD_EINVAL, "%s %s: %ld: the answer is not JSON", method, path, status);
	}
	free(resp);
	if(out)
		*out = o;
	return 0;
}
