/* The driver host's request functions over a real apiserver (kube_client)
 * or the in-memory API, with HTTP statuses mapped to PRD_CLOUD_E* codes. */
#include "driver/host_kube.h"
#include "kube/client.h"
#include "kube/memapi.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The PRD_CLOUD_E* code for an HTTP status (and, when there was none, the
 * client's PRD_E* code). */
static int cloud_code(long http, int prd_rc)
{
	if(http == 404)
		return PRD_CLOUD_ENOTFOUND;
	if(http == 400 || http == 422)
		return PRD_CLOUD_EINVAL;
	if(http == 429 || http >= 500)
		return PRD_CLOUD_EAGAIN;
	if(http)
		return PRD_CLOUD_EIO;
	switch(prd_rc) {
	case PRD_ENOMEM:
		return PRD_CLOUD_ENOMEM;
	case PRD_EINVAL:
		return PRD_CLOUD_EINVAL;
	case PRD_ENOTFOUND:
		return PRD_CLOUD_ENOTFOUND;
	case PRD_EAGAIN:
	case PRD_ETIMEDOUT:
		return PRD_CLOUD_EAGAIN;
	default:
		return PRD_CLOUD_EIO;
	}
}

static void set_err(prd_cloud_error *err, int code, const char *msg)
{
	if(!err)
		return;
	err->code = code;
	snprintf(err->message, sizeof(err->message), "%s", msg);
}

int cloud_host_kube_request(void *ud, const char *method, const char *path, const char *content_type,
			    const char *body, size_t body_len, long *http_status, char **resp_body,
			    size_t *resp_len, prd_cloud_error *err)
{
	kube_client *c = ud;
	kube_status st;
	prd_err e = {0};
	int rc;

	memset(&st, 0, sizeof(st));
	*http_status = 0;
	/* The answer's bytes as the apiserver sent them (a driver parses what
	 * it reads; most calls read nothing). */
	rc = kube_request_bytes(c, method, path, content_type, body, body_len, resp_body, resp_len, &st, &e);
	*http_status = st.http_code ? st.http_code : (rc ? 0 : 200);
	if(rc) {
		int code = cloud_code(st.http_code, rc);
		set_err(err, code, e.msg[0] ? e.msg : prd_strerror(rc));
		return code;
	}
	if(!*resp_body && !(*resp_body = calloc(1, 1))) {
		set_err(err, PRD_CLOUD_ENOMEM, "out of memory");
		return PRD_CLOUD_ENOMEM;
	}
	return 0;
}

int cloud_host_memapi_request(void *ud, const char *method, const char *path, const char *content_type,
			      const char *body, size_t body_len, long *http_status, char **resp_body,
			      size_t *resp_len, prd_cloud_error *err)
{
	memapi *m = ud;
	char *resp = NULL;
	size_t len = 0;
	long status = 0;
	int rc;

	*resp_body = NULL;
	*resp_len = 0;
	rc = memapi_request(m, method, path, content_type, body, body_len, &status, &resp, &len);
	*http_status = status;
	if(rc || status < 200 || status > 299) {
		/* The answer is a Status object: its message is the error. */
		json_object *st = resp ? json_tokener_parse(resp) : NULL;
		json_object *msg = NULL;
		char text[PRD_CLOUD_MSG_MAX];
		int code = cloud_code(status, rc);
		json_object_object_get_ex(st, "message", &msg);
		snprintf(text, sizeof(text), "%ld %s", status,
			 msg ? json_object_get_string(msg) : prd_strerror(rc ? rc : PRD_EIO));
		json_object_put(st);
		free(resp);
		set_err(err, code, text);
		return code;
	}
	*resp_body = resp;
	*resp_len = len;
	return 0;
}
