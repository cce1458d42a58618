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
	if(resp && rlen) {
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
	free(resp);
	if(out)
		*out = o;
	else
		json_object_put(o);
	return 0;
}
