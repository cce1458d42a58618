/* --metrics-access=tokenreview: a scraper's bearer token checked with a
 * TokenReview and a SubjectAccessReview for `get` on /metrics. */
#include "kube/metrics_authz.h"
#include "ops/log.h"

#include <string.h>

/* The TokenReview: 0 with *user (a new reference to status.user) when
 * the token authenticates, PRD_EINVAL when it does not, another code when
 * the apiserver could not be asked. */
static int review_token(kube_client *c, const char *token, json_object **user, buf *why)
{
	json_object *req = json_object_new_object(), *spec = json_object_new_object(), *ans = NULL, *st, *v;
	const char *body;
	prd_err e;
	int rc;

	*user = NULL;
	json_object_object_add(req, "apiVersion", json_object_new_string("authentication.k8s.io/v1"));
	json_object_object_add(req, "kind", json_object_new_string("TokenReview"));
	json_object_object_add(spec, "token", json_object_new_string(token));
	json_object_object_add(req, "spec", spec);
	body = json_object_to_json_string_ext(req, JSON_C_TO_STRING_PLAIN);
	rc = kube_request(c, "POST", "/apis/authentication.k8s.io/v1/tokenreviews", "application/json", body,
			  strlen(body), &ans, NULL, &e);
	json_object_put(req);
	if(rc) {
		buf_printf(why, "cannot review the token: %s", e.msg);
		return PRD_EIO; /* provreqd could not ask (its RBAC, the network): undecided */
	}
	if(json_object_object_get_ex(ans, "status", &st) && json_object_object_get_ex(st, "authenticated", &v) &&
	   json_object_get_boolean(v) && json_object_object_get_ex(st, "user", &v) &&
	   json_object_is_type(v, json_type_object)) {
		*user = json_object_get(v);
	} else {
		buf_append_str(why, "unauthorized: the token does not authenticate");
		if(json_object_object_get_ex(ans, "status", &st) && json_object_object_get_ex(st, "error", &v))
			buf_printf(why, " (%s)", json_object_get_string(v));
		rc = PRD_EINVAL;
	}
	json_object_put(ans);
	return rc;
}

/* Copy key k of user into spec when present. */
static void copy_key(json_object *user, const char *k, json_object *spec, const char *as)
{
	json_object *v;
	if(json_object_object_get_ex(user, k, &v))
		json_object_object_add(spec, as, json_object_get(v));
}

int metrics_authz_kube(void *ud, const char *token, const char *path, buf *why)
{
	kube_client *c = ud;
	json_object *user = NULL, *req, *spec, *nra, *ans = NULL, *st, *v;
	const char *body, *name;
	prd_err e;
	int rc;

	if((rc = review_token(c, token, &user, why)))
		return rc;
	req = json_object_new_object();
	spec = json_object_new_object();
	nra = json_object_new_object();
	json_object_object_add(req, "apiVersion", json_object_new_string("authorization.k8s.io/v1"));
	json_object_object_add(req, "kind", json_object_new_string("SubjectAccessReview"));
	copy_key(user, "username", spec, "user");
	copy_key(user, "uid", spec, "uid");
	copy_key(user, "groups", spec, "groups");
	copy_key(user, "extra", spec, "extra");
	json_object_object_add(nra, "path", json_object_new_string(path));
	json_object_object_add(nra, "verb", json_object_new_string("get"));
	json_object_object_add(spec, "nonResourceAttributes", nra);
	json_object_object_add(req, "spec", spec);
	body = json_object_to_json_string_ext(req, JSON_C_TO_STRING_PLAIN);
	rc = kube_request(c, "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", "application/json",
			  body, strlen(body), &ans, NULL, &e);
	json_object_put(req);
	name = json_object_object_get_ex(user, "username", &v) ? json_object_get_string(v) : "?";
	if(rc) {
		buf_printf(why, "cannot review access of %s: %s", name, e.msg);
		rc = PRD_EIO;
	} else if(json_object_object_get_ex(ans, "status", &st) && json_object_object_get_ex(st, "allowed", &v) &&
		  json_object_get_boolean(v)) {
		rc = PRD_OK;
	} else {
		buf_printf(why, "forbidden: user \"%s\" may not get %s", name, path);
		rc = PRD_EPERM;
	}
	if(rc && rc != PRD_EPERM)
		log_warn("metrics access review failed", "error", buf_str(why));
	json_object_put(ans);
	json_object_put(user);
	return rc;
}
