/* REST verbs on top of the transport in client.c, and the resource
 * descriptors of the kinds the controller uses. */
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "kube/client.h"
#include "kube/client_int.h"
#include "kube/jscan.h"
#include "ops/log.h"
#include "util/buf.h"
#include "util/str.h"

const kube_resource KUBE_NODES = {"", "v1", "nodes", "Node", false};
const kube_resource KUBE_PODS = {"", "v1", "pods", "Pod", true};
const kube_resource KUBE_PODTEMPLATES = {"", "v1", "podtemplates", "PodTemplate", true};
const kube_resource KUBE_RESOURCESLICES = {"resource.k8s.io", "v1", "resourceslices", "ResourceSlice", false};
const kube_resource KUBE_DEVICECLASSES = {"resource.k8s.io", "v1", "deviceclasses", "DeviceClass", false};
const kube_resource KUBE_RESOURCECLAIMTEMPLATES = {"resource.k8s.io", "v1", "resourceclaimtemplates",
						  "ResourceClaimTemplate", true};
const kube_resource KUBE_RESOURCECLAIMS = {"resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", true};
const kube_resource KUBE_EVENTS = {"", "v1", "events", "Event", true};
const kube_resource KUBE_CONFIGMAPS = {"", "v1", "configmaps", "ConfigMap", true};
const kube_resource KUBE_NAMESPACES = {"", "v1", "namespaces", "Namespace", false};
const kube_resource KUBE_LEASES = {"coordination.k8s.io", "v1", "leases", "Lease", true};
const kube_resource KUBE_PROVREQS = {"autoscaling.x-k8s.io", "v1", "provisioningrequests",
				     "ProvisioningRequest", true};
const kube_resource KUBE_RESOURCEPOOLS = {"capsule.clastix.io", "v1beta2", "resourcepools",
					  "ResourcePool", false};

char *kube_path(const kube_resource *r, const char *ns, const char *name, const char *subresource)
{
	buf b;
	buf_init(&b);
	if(!r->group || !*r->group)
		buf_printf(&b, "/api/%s", r->version);
	else
		buf_printf(&b, "/apis/%s/%s", r->group, r->version);
	if(r->namespaced && ns && *ns)
		buf_printf(&b, "/namespaces/%s", ns);
	buf_printf(&b, "/%s", r->resource);
	if(name && *name) {
		buf_append_char(&b, '/');
		kube__query_escape(&b, name);
	}
	if(name && *name && subresource && *subresource)
		buf_printf(&b, "/%s", subresource);
	return buf_detach(&b);
}

static int oom(prd_err *err)
{
	return prd_err_set(err, PRD_ENOMEM, "out of memory");
}

int kube_get(kube_client *c, const kube_resource *r, const char *ns, const char *name,
	     json_object **out, kube_status *st, prd_err *err)
{
	char *p = kube_path(r, ns, name, NULL);
	int rc;
	if(!p)
		return oom(err);
	rc = kube__request_ex(c, "GET", p, NULL, NULL, 0, true, out, st, err);
	free(p);
	return rc;
}

/* The path of one page: limit, continue or resourceVersion, selectors.
 * Caller frees. */
static char *page_path(const char *base, const kube_list_opts *o, const char *cont)
{
	buf q;

	buf_init(&q);
	buf_printf(&q, "%s?limit=%ld", base, o->limit > 0 ? o->limit : 500);
	if(cont) {
		buf_append_str(&q, "&continue=");
		kube__query_escape(&q, cont);
	} else if(o->resource_version && *o->resource_version) {
		/* The apiserver refuses resourceVersion together with continue. */
		buf_append_str(&q, "&resourceVersion=");
		kube__query_escape(&q, o->resource_version);
	}
	if(o->label_selector && *o->label_selector) {
		buf_append_str(&q, "&labelSelector=");
		kube__query_escape(&q, o->label_selector);
	}
	if(o->field_selector && *o->field_selector) {
		buf_append_str(&q, "&fieldSelector=");
		kube__query_escape(&q, o->field_selector);
	}
	return buf_detach(&q);
}

/* What a page gave besides its items. */
typedef struct page_out {
	char **rv;        /* the caller's *resource_version (may be NULL) */
	char *next;       /* the continue token, owned; NULL on the last page */
	bool fetched;     /* the page arrived (an error after it is the caller's) */
} page_out;

/* Replace *dst with a copy of v (NULL copies as NULL, which json-c's
 * path below has always treated as out of memory). */
static int set_rv(char **dst, const char *v, prd_err *err)
{
	if(!dst)
		return 0;
	free(*dst);
	*dst = str_dup(v);
	return *dst ? 0 : oom(err);
}

/* A page parsed whole by json-c: items as trees. */
static int page_tree(json_object *page, const char *base, kube_src_fn fn, void *ud, page_out *po, prd_err *err)
{
	json_object *items, *meta, *v;
	const char *next = NULL;
	int rc;

	if(!page || !json_object_object_get_ex(page, "items", &items) ||
	   !(json_object_is_type(items, json_type_array) || json_object_is_type(items, json_type_null)))
		return prd_err_set(err, PRD_EINVAL, "LIST %s: answer has no items", base);
	for(size_t i = 0; items && i < json_object_array_length(items); i++) {
		kube_item_src src = { NULL, 0, 0, json_object_array_get_idx(items, i) };
		if((rc = fn(ud, &src)) != 0)
			return rc;
	}
	if(json_object_object_get_ex(page, "metadata", &meta)) {
		if(json_object_object_get_ex(meta, "continue", &v))
			next = json_object_get_string(v);
		if(json_object_object_get_ex(meta, "resourceVersion", &v) && (rc = set_rv(po->rv, json_object_get_string(v), err)))
			return rc;
	}
	if(next && *next && !(po->next = str_dup(next)))
		return oom(err);
	return 0;
}

/* A page as text: items handed over as their JSON text when the page is
 * plain JSON (jscan.h), else parsed by json-c as before. */
static int page_text(const buf *body, const char *path, const char *base, kube_src_fn fn, void *ud, page_out *po,
		     prd_err *err)
{
	kube_page pg;
	json_tokener *tok;
	json_object *page;
	enum json_tokener_error je;
	int rc = kube__page_scan(body->data ? body->data : "", body->len, KUBE_JSON_MAX_DEPTH, &pg);

	if(rc == PRD_ENOMEM) {
		kube__page_free(&pg);
		return oom(err);
	}
	if(rc == 0) {
		for(size_t i = 0; i < pg.nitems && !rc; i++) {
			/* An item sits two containers deep in its page. */
			kube_item_src src = { pg.items[i].s, pg.items[i].len, KUBE_JSON_MAX_DEPTH - 2, NULL };
			rc = fn(ud, &src);
		}
		if(!rc && pg.rv)
			rc = set_rv(po->rv, pg.rv, err);
		if(!rc && pg.cont && *pg.cont) {
			po->next = pg.cont;
			pg.cont = NULL;
		}
		kube__page_free(&pg);
		return rc;
	}
	kube__page_free(&pg);
	log_debug("list page is not plain JSON, parsing it with json-c", "path", path);
	if(!(tok = json_tokener_new_ex(KUBE_JSON_MAX_DEPTH)))
		return oom(err);
	page = body->len ? json_tokener_parse_ex(tok, body->data, (int)body->len) : NULL;
	je = json_tokener_get_error(tok);
	json_tokener_free(tok);
	if(body->len && (!page || je != json_tokener_success)) {
		json_object_put(page);
		return prd_err_set(err, PRD_EINVAL, "GET %s: answer is not JSON (%s)", path, json_tokener_error_desc(je));
	}
	rc = page_tree(page, base, fn, ud, po, err);
	json_object_put(page);
	return rc;
}

/* One page, fetched and delivered. */
static int list_one(kube_client *c, const char *base, const kube_list_opts *o, const char *cont, bool text,
		    kube_src_fn fn, void *ud, page_out *po, kube_status *st, prd_err *err)
{
	char *path = page_path(base, o, cont);
	json_object *page = NULL;
	buf body;
	int rc;

	if(!path)
		return oom(err);
	if(text) {
		buf_init(&body);
		rc = kube__request_raw(c, path, &body, st, err);
		po->fetched = rc == 0;
		if(!rc)
			rc = page_text(&body, path, base, fn, ud, po, err);
		buf_free(&body);
	} else {
		rc = kube__request_ex(c, "GET", path, NULL, NULL, 0, true, &page, st, err);
		po->fetched = rc == 0;
		if(!rc)
			rc = page_tree(page, base, fn, ud, po, err);
		json_object_put(page);
	}
	free(path);
	return rc;
}

/* Every page, following continue tokens; an expired token starts over
 * once. `restart_ud` is what the caller's restart callback gets. */
static int list_all(kube_client *c, const kube_resource *r, const char *ns, const kube_list_opts *o, bool text,
		    kube_src_fn fn, void *ud, void *restart_ud, char **resource_version, kube_status *st, prd_err *err)
{
	static const kube_list_opts none = {0};
	char *base = kube_path(r, ns, NULL, NULL), *cont = NULL;
	bool restarted = false;
	int rc = 0;

	if(resource_version)
		*resource_version = NULL;
	if(!o)
		o = &none;
	if(!base)
		return oom(err);
	for(;;) {
		page_out po = { resource_version, NULL, false };
		rc = list_one(c, base, o, cont, text, fn, ud, &po, st, err);
		if(rc == PRD_EGONE && !po.fetched && cont && !restarted) {
			/* The continue token outlived etcd's compaction window. */
			log_info("list continue token expired, listing again", "resource", r->resource);
			restarted = true;
			free(cont);
			cont = NULL;
			free(po.next);
			if(o->restart)
				o->restart(restart_ud);
			continue;
		}
		free(cont);
		cont = po.next;
		if(rc || !cont)
			break;
	}
	if(rc && resource_version) {
		free(*resource_version);
		*resource_version = NULL;
	}
	free(cont);
	free(base);
	return rc;
}

typedef struct tree_fn {
	kube_item_fn fn;
	void *ud;
} tree_fn;

static int tree_adapter(void *ud, const kube_item_src *src)
{
	tree_fn *t = ud;
	return t->fn(t->ud, src->obj);
}

int kube_list(kube_client *c, const kube_resource *r, const char *ns, const kube_list_opts *o,
	      kube_item_fn fn, void *ud, char **resource_version, kube_status *st, prd_err *err)
{
	tree_fn t = { fn, ud };
	return list_all(c, r, ns, o, false, tree_adapter, &t, ud, resource_version, st, err);
}

int kube_list_text(kube_client *c, const kube_resource *r, const char *ns, const kube_list_opts *o,
		   kube_src_fn fn, void *ud, char **resource_version, kube_status *st, prd_err *err)
{
	return list_all(c, r, ns, o, true, fn, ud, ud, resource_version, st, err);
}

/* Path plus "?fieldManager=..." (and extra query text). Caller frees. */
static char *path_fm(kube_client *c, const kube_resource *r, const char *ns, const char *name,
		     const char *sub, const char *extra)
{
	char *p = kube_path(r, ns, name, sub);
	buf b;
	if(!p)
		return NULL;
	buf_init(&b);
	buf_printf(&b, "%s?fieldManager=", p);
	kube__query_escape(&b, kube__field_manager(c));
	if(extra)
		buf_append_str(&b, extra);
	free(p);
	return buf_detach(&b);
}

static int send_obj(kube_client *c, const char *method, const char *path, json_object *obj,
		    bool idempotent, json_object **out, kube_status *st, prd_err *err)
{
	const char *body = json_object_to_json_string_ext(obj, JSON_C_TO_STRING_PLAIN);
	if(!body)
		return oom(err);
	return kube__request_ex(c, method, path, "application/json", body, strlen(body), idempotent, out,
				st, err);
}

int kube_create(kube_client *c, const kube_resource *r, const char *ns, json_object *obj,
		json_object **out, kube_status *st, prd_err *err)
{
	char *p = path_fm(c, r, ns, NULL, NULL, NULL);
	int rc;
	if(!p)
		return oom(err);
	rc = send_obj(c, "POST", p, obj, false, out, st, err);
	free(p);
	return rc;
}

int kube_update(kube_client *c, const kube_resource *r, const char *ns, const char *name,
		const char *subresource, json_object *obj, json_object **out, kube_status *st,
		prd_err *err)
{
	char *p = path_fm(c, r, ns, name, subresource, NULL);
	json_object *meta, *rv;
	bool idem;
	int rc;

	if(!p)
		return oom(err);
	/* With a resourceVersion a repeated PUT can only fail with Conflict,
	 * never apply twice. */
	idem = json_object_object_get_ex(obj, "metadata", &meta) &&
	       json_object_object_get_ex(meta, "resourceVersion", &rv) &&
	       json_object_get_string_len(rv) > 0;
	rc = send_obj(c, "PUT", p, obj, idem, out, st, err);
	free(p);
	return rc;
}

int kube_delete(kube_client *c, const kube_resource *r, const char *ns, const char *name,
		const kube_delete_opts *o, kube_status *st, prd_err *err)
{
	char *p = kube_path(r, ns, name, NULL);
	json_object *d = json_object_new_object();
	bool pre = false;
	int rc;

	if(!p || !d) {
		rc = oom(err);
		goto done;
	}
	json_object_object_add(d, "kind", json_object_new_string("DeleteOptions"));
	json_object_object_add(d, "apiVersion", json_object_new_string("v1"));
	if(o) {
		if((o->uid && *o->uid) || (o->resource_version && *o->resource_version)) {
			json_object *pc = json_object_new_object();
			if(o->uid && *o->uid)
				json_object_object_add(pc, "uid", json_object_new_string(o->uid));
			if(o->resource_version && *o->resource_version)
				json_object_object_add(pc, "resourceVersion",
						       json_object_new_string(o->resource_version));
			json_object_object_add(d, "preconditions", pc);
			pre = true;
		}
		if(o->propagation && *o->propagation)
			json_object_object_add(d, "propagationPolicy", json_object_new_string(o->propagation));
		if(o->grace_period_s >= 0)
			json_object_object_add(d, "gracePeriodSeconds", json_object_new_int64(o->grace_period_s));
	}
	rc = send_obj(c, "DELETE", p, d, pre, NULL, st, err);
done:
	json_object_put(d);
	free(p);
	return rc;
}

int kube_patch(kube_client *c, const kube_resource *r, const char *ns, const char *name,
	       const char *subresource, kube_patch_type type, const char *patch, bool force,
	       json_object **out, kube_status *st, prd_err *err)
{
	const char *ct;
	char *p, *fixed = NULL;
	int rc;

	switch(type) {
	case KUBE_PATCH_MERGE: ct = "application/merge-patch+json"; break;
	case KUBE_PATCH_JSON: ct = "application/json-patch+json"; break;
	case KUBE_PATCH_STRATEGIC: ct = "application/strategic-merge-patch+json"; break;
	case KUBE_PATCH_APPLY: ct = "application/apply-patch+yaml"; break;
	default: return prd_err_set(err, PRD_EINVAL, "unknown patch type %d", (int)type);
	}
	p = path_fm(c, r, ns, name, subresource, type == KUBE_PATCH_APPLY && force ? "&force=true" : NULL);
	if(!p)
		return oom(err);
	if(type == KUBE_PATCH_APPLY && strstr(patch, "\\/")) {
		/* json-c writes "/" as "\/", which JSON allows but YAML's
		 * double-quoted strings do not: the apiserver reads an apply
		 * patch as YAML and would refuse it. Re-serialise without. */
		json_object *j = json_tokener_parse(patch);
		if(j) {
			const char *s = json_object_to_json_string_ext(
				j, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
			fixed = s ? str_dup(s) : NULL;
			json_object_put(j);
			if(!fixed) {
				free(p);
				return oom(err);
			}
			patch = fixed;
		}
	}
	/* Server-side apply states the whole intent, so repeating it is safe;
	 * other patches may be relative (JSON patch "add" to a list). */
	rc = kube__request_ex(c, "PATCH", p, ct, patch, strlen(patch), type == KUBE_PATCH_APPLY, out, st,
			      err);
	free(fixed);
	free(p);
	return rc;
}

int kube_get_scale(kube_client *c, const kube_resource *r, const char *ns, const char *name,
		   int32_t *replicas, kube_status *st, prd_err *err)
{
	char *p = kube_path(r, ns, name, "scale");
	json_object *o = NULL, *spec, *v;
	int rc;

	if(!p)
		return oom(err);
	rc = kube__request_ex(c, "GET", p, NULL, NULL, 0, true, &o, st, err);
	if(!rc) {
		if(o && json_object_object_get_ex(o, "spec", &spec) &&
		   json_object_object_get_ex(spec, "replicas", &v) && json_object_is_type(v, json_type_int))
			*replicas = (int32_t)json_object_get_int(v);
		else
			*replicas = 0; /* omitted replicas means zero */
	}
	json_object_put(o);
	free(p);
	return rc;
}

int kube_set_scale(kube_client *c, const kube_resource *r, const char *ns, const char *name,
		   int32_t replicas, kube_status *st, prd_err *err)
{
	char *p = kube_path(r, ns, name, "scale");
	char body[64];
	int rc;

	if(!p)
		return oom(err);
	snprintf(body, sizeof(body), "{\"spec\":{\"replicas\":%d}}", (int)replicas);
	/* Setting an absolute value is idempotent. */
	rc = kube__request_ex(c, "PATCH", p, "application/merge-patch+json", body, strlen(body), true,
			      NULL, st, err);
	free(p);
	return rc;
}
