/* Shared pieces of the typed decoders: field accessors with type checks,
 * metadata, maps of strings and of quantities, dispatch by kind. */
#include "kube/objects.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/rfc3339.h"
#include "util/str.h"

const char *kube_kind_name(kube_kind k)
{
	switch(k) {
	case KUBE_KIND_NODE: return "Node";
	case KUBE_KIND_POD: return "Pod";
	case KUBE_KIND_PODTEMPLATE: return "PodTemplate";
	case KUBE_KIND_PROVREQ: return "ProvisioningRequest";
	case KUBE_KIND_RESOURCEPOOL: return "ResourcePool";
	case KUBE_KIND_CONFIGMAP: return "ConfigMap";
	case KUBE_KIND_LEASE: return "Lease";
	case KUBE_KIND_RESOURCESLICE: return "ResourceSlice";
	case KUBE_KIND_DEVICECLASS: return "DeviceClass";
	case KUBE_KIND_RESOURCECLAIMTEMPLATE: return "ResourceClaimTemplate";
	case KUBE_KIND_RESOURCECLAIM: return "ResourceClaim";
	case KUBE_KIND_PROVCLASS: return "ProvisioningClass";
	}
	return "?";
}

/* Record "Kind ns/name: path: message" in c->err and return code. */
int kube__fail(kube__dctx *c, int code, const char *path, const char *fmt, ...)
{
	char msg[PRD_ERR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if(c->name && c->ns && *c->ns)
		return prd_err_set(c->err, code, "%s %s/%s: %s%s%s", c->kind, c->ns, c->name,
				   path ? path : "", path ? ": " : "", msg);
	if(c->name)
		return prd_err_set(c->err, code, "%s %s: %s%s%s", c->kind, c->name,
				   path ? path : "", path ? ": " : "", msg);
	return prd_err_set(c->err, code, "%s: %s%s%s", c->kind, path ? path : "", path ? ": " : "", msg);
}

static const char *type_name(json_object *v)
{
	return json_type_to_name(json_object_get_type(v));
}

/* Child of o by key, with JSON null treated as absent. */
static json_object *child(json_object *o, const char *key)
{
	json_object *v = NULL;
	if(!o || !json_object_object_get_ex(o, key, &v))
		return NULL;
	return v;
}

static int typed(kube__dctx *c, json_object *o, const char *key, const char *path, json_type t,
		 const char *want, json_object **out)
{
	json_object *v = child(o, key);
	*out = NULL;
	if(!v)
		return PRD_OK;
	if(!json_object_is_type(v, t))
		return kube__fail(c, PRD_EINVAL, path, "%s: expected %s, got %s", key, want, type_name(v));
	*out = v;
	return PRD_OK;
}

int kube__obj(kube__dctx *c, json_object *o, const char *key, const char *path, json_object **out)
{
	return typed(c, o, key, path, json_type_object, "an object", out);
}

int kube__arr(kube__dctx *c, json_object *o, const char *key, const char *path, json_object **out)
{
	return typed(c, o, key, path, json_type_array, "an array", out);
}

int kube__str(kube__dctx *c, json_object *o, const char *key, const char *path, const char **out)
{
	json_object *v;
	int rc = typed(c, o, key, path, json_type_string, "a string", &v);
	*out = v ? json_object_get_string(v) : NULL;
	return rc;
}

int kube__int(kube__dctx *c, json_object *o, const char *key, const char *path, int64_t *out, bool *present)
{
	json_object *v;
	int rc = typed(c, o, key, path, json_type_int, "an integer", &v);
	if(present)
		*present = v != NULL;
	if(v)
		*out = json_object_get_int64(v);
	return rc;
}

int kube__bool(kube__dctx *c, json_object *o, const char *key, const char *path, bool *out)
{
	json_object *v;
	int rc = typed(c, o, key, path, json_type_boolean, "a boolean", &v);
	*out = v ? json_object_get_boolean(v) : false;
	return rc;
}

int kube__time(kube__dctx *c, json_object *o, const char *key, const char *path, int64_t *out)
{
	const char *s;
	prd_err e;
	int rc = kube__str(c, o, key, path, &s);
	*out = 0;
	if(rc || !s)
		return rc;
	prd_err_clear(&e);
	if(rfc3339_parse(s, out, &e))
		return kube__fail(c, PRD_EINVAL, path, "%s: bad timestamp \"%.64s\": %s", key, s, e.msg);
	return PRD_OK;
}

int kube__istr(kube__dctx *c, json_object *o, const char *key, const char *path, const char **out)
{
	const char *s;
	int rc = kube__str(c, o, key, path, &s);
	*out = NULL;
	if(rc || !s)
		return rc;
	*out = kube_intern_getn(c->in, s, (size_t)json_object_get_string_len(o ? child(o, key) : NULL));
	return *out ? PRD_OK : kube__fail(c, PRD_ENOMEM, path, "out of memory");
}

void kube__kvs_free(kube_intern *in, kube_kv *kv, size_t n)
{
	size_t i;
	for(i = 0; i < n; i++) {
		kube_intern_put(in, kv[i].key);
		kube_intern_put(in, kv[i].value);
	}
	free(kv);
}

void kube__res_free(kube_intern *in, kube_res *r, size_t n)
{
	size_t i;
	for(i = 0; i < n; i++)
		kube_intern_put(in, r[i].name);
	free(r);
}

int kube__kvs(kube__dctx *c, json_object *map, const char *path, bool (*keep)(const char *key),
	      kube_kv **out, uint16_t *n)
{
	size_t cnt = 0, len;
	kube_kv *kv;

	*out = NULL;
	*n = 0;
	if(!map)
		return PRD_OK;
	if(!json_object_is_type(map, json_type_object))
		return kube__fail(c, PRD_EINVAL, path, "expected an object, got %s", type_name(map));
	len = (size_t)json_object_object_length(map);
	if(len > UINT16_MAX)
		return kube__fail(c, PRD_EINVAL, path, "%zu entries is too many", len);
	if(!len)
		return PRD_OK;
	kv = calloc(len, sizeof(*kv));
	if(!kv)
		return kube__fail(c, PRD_ENOMEM, path, "out of memory");
	json_object_object_foreach(map, k, v) {
		if(keep && !keep(k))
			continue;
		if(!v || !json_object_is_type(v, json_type_string)) {
			kube__kvs_free(c->in, kv, cnt);
			return kube__fail(c, PRD_EINVAL, path, "%s: expected a string, got %s", k,
					  v ? type_name(v) : "null");
		}
		kv[cnt].key = kube_intern_get(c->in, k);
		kv[cnt].value = kube_intern_getn(c->in, json_object_get_string(v),
						 (size_t)json_object_get_string_len(v));
		if(!kv[cnt].key || !kv[cnt].value) {
			kube_intern_put(c->in, kv[cnt].key);
			kube__kvs_free(c->in, kv, cnt);
			return kube__fail(c, PRD_ENOMEM, path, "out of memory");
		}
		cnt++;
	}
	if(!cnt) {
		free(kv);
		return PRD_OK;
	}
	*out = kv;
	*n = (uint16_t)cnt;
	return PRD_OK;
}

int kube__qty(kube__dctx *c, json_object *v, const char *path, qty *out)
{
	prd_err e;
	const char *s;
	prd_err_clear(&e);
	/* apimachinery accepts a bare JSON number as well as a string. */
	if(json_object_is_type(v, json_type_string))
		s = json_object_get_string(v);
	else if(json_object_is_type(v, json_type_int) || json_object_is_type(v, json_type_double))
		s = json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN);
	else
		return kube__fail(c, PRD_EINVAL, path, "expected a quantity, got %s", v ? type_name(v) : "null");
	if(qty_parse(s, out, &e))
		return kube__fail(c, PRD_EINVAL, path, "bad quantity \"%.64s\": %s", s, e.msg);
	return PRD_OK;
}

int kube__res(kube__dctx *c, json_object *map, const char *path, kube_res **out, uint16_t *n)
{
	size_t cnt = 0, len;
	kube_res *r;
	char sub[256];

	*out = NULL;
	*n = 0;
	if(!map)
		return PRD_OK;
	if(!json_object_is_type(map, json_type_object))
		return kube__fail(c, PRD_EINVAL, path, "expected an object, got %s", type_name(map));
	len = (size_t)json_object_object_length(map);
	if(len > UINT16_MAX)
		return kube__fail(c, PRD_EINVAL, path, "%zu entries is too many", len);
	if(!len)
		return PRD_OK;
	r = calloc(len, sizeof(*r));
	if(!r)
		return kube__fail(c, PRD_ENOMEM, path, "out of memory");
	json_object_object_foreach(map, k, v) {
		int rc;
		snprintf(sub, sizeof(sub), "%s.%s", path, k);
		rc = kube__qty(c, v, sub, &r[cnt].q);
		if(rc) {
			kube__res_free(c->in, r, cnt);
			return rc;
		}
		r[cnt].name = kube_intern_get(c->in, k);
		if(!r[cnt].name) {
			kube__res_free(c->in, r, cnt);
			return kube__fail(c, PRD_ENOMEM, path, "out of memory");
		}
		cnt++;
	}
	*out = r;
	*n = (uint16_t)cnt;
	return PRD_OK;
}

int kube__effect(kube__dctx *c, const char *s, bool allow_all, const char *path, uint8_t *out)
{
	if(!s || !*s) {
		if(allow_all) {
			*out = KUBE_EFFECT_ALL;
			return PRD_OK;
		}
		return kube__fail(c, PRD_EINVAL, path, "effect is required");
	}
	if(strcmp(s, "NoSchedule") == 0)
		*out = KUBE_EFFECT_NO_SCHEDULE;
	else if(strcmp(s, "PreferNoSchedule") == 0)
		*out = KUBE_EFFECT_PREFER_NO_SCHEDULE;
	else if(strcmp(s, "NoExecute") == 0)
		*out = KUBE_EFFECT_NO_EXECUTE;
	else
		return kube__fail(c, PRD_EINVAL, path, "unknown effect \"%.64s\"", s);
	return PRD_OK;
}

int kube_json_meta(json_object *obj, const char **ns, const char **name, const char **rv)
{
	json_object *md = NULL, *v = NULL;
	*ns = "";
	*name = NULL;
	*rv = "";
	if(!obj || !json_object_is_type(obj, json_type_object) ||
	   !json_object_object_get_ex(obj, "metadata", &md) || !json_object_is_type(md, json_type_object))
		return PRD_EINVAL;
	if(!json_object_object_get_ex(md, "name", &v) || !json_object_is_type(v, json_type_string) ||
	   !*json_object_get_string(v))
		return PRD_EINVAL;
	*name = json_object_get_string(v);
	if(json_object_object_get_ex(md, "namespace", &v) && json_object_is_type(v, json_type_string))
		*ns = json_object_get_string(v);
	if(json_object_object_get_ex(md, "resourceVersion", &v) && json_object_is_type(v, json_type_string))
		*rv = json_object_get_string(v);
	return PRD_OK;
}

int kube__meta(kube__dctx *c, json_object *obj, bool namespaced, kube_meta *m)
{
	json_object *md;
	const char *name = NULL, *ns = NULL, *uid = NULL, *rv = NULL;
	size_t ln, lu, lr;
	char *blk;
	int rc;

	if(!obj || !json_object_is_type(obj, json_type_object))
		return kube__fail(c, PRD_EINVAL, NULL, "expected a JSON object, got %s",
				  obj ? type_name(obj) : "null");
	rc = kube__obj(c, obj, "metadata", "", &md);
	if(rc)
		return rc;
	if(!md)
		return kube__fail(c, PRD_EINVAL, "metadata", "missing");
	if((rc = kube__str(c, md, "name", "metadata", &name)) != 0)
		return rc;
	if(!name || !*name)
		return kube__fail(c, PRD_EINVAL, "metadata.name", "missing");
	c->name = name;
	if((rc = kube__str(c, md, "namespace", "metadata", &ns)) != 0)
		return rc;
	if(namespaced && (!ns || !*ns))
		return kube__fail(c, PRD_EINVAL, "metadata.namespace", "missing");
	if(!namespaced)
		ns = "";
	c->ns = ns;
	if((rc = kube__str(c, md, "uid", "metadata", &uid)) != 0 ||
	   (rc = kube__str(c, md, "resourceVersion", "metadata", &rv)) != 0 ||
	   (rc = kube__time(c, md, "creationTimestamp", "metadata", &m->created_ns)) != 0 ||
	   (rc = kube__time(c, md, "deletionTimestamp", "metadata", &m->deleted_ns)) != 0 ||
	   (rc = kube__int(c, md, "generation", "metadata", &m->generation, NULL)) != 0)
		return rc;
	if(!uid)
		uid = "";
	if(!rv)
		rv = "";
	ln = strlen(name) + 1;
	lu = strlen(uid) + 1;
	lr = strlen(rv) + 1;
	blk = malloc(ln + lu + lr);
	if(!blk)
		return kube__fail(c, PRD_ENOMEM, NULL, "out of memory");
	memcpy(blk, name, ln);
	memcpy(blk + ln, uid, lu);
	memcpy(blk + ln + lu, rv, lr);
	m->ns = kube_intern_get(c->in, ns);
	if(!m->ns) {
		free(blk);
		return kube__fail(c, PRD_ENOMEM, NULL, "out of memory");
	}
	m->name = blk;
	m->uid = blk + ln;
	m->rv = blk + ln + lu;
	return PRD_OK;
}

void kube__meta_free(kube_intern *in, kube_meta *m)
{
	kube_intern_put(in, m->ns);
	free((char *)(uintptr_t)m->name);
}

kube_meta *kube_obj_clone(kube_intern *in, const kube_meta *obj)
{
	if(!obj || obj->kind != KUBE_KIND_PROVREQ)
		return NULL;
	return kube__clone_provreq(in, obj);
}

int kube_decode(kube_kind kind, json_object *obj, kube_intern *in, kube_meta **out, prd_err *err)
{
	kube__dctx c;
	c.in = in;
	c.err = err;
	c.kind = kube_kind_name(kind);
	c.ns = NULL;
	c.name = NULL;
	*out = NULL;
	switch(kind) {
	case KUBE_KIND_NODE: return kube__decode_node(&c, obj, out);
	case KUBE_KIND_POD: return kube__decode_pod(&c, obj, out);
	case KUBE_KIND_PODTEMPLATE: return kube__decode_podtemplate(&c, obj, out);
	case KUBE_KIND_PROVREQ: return kube__decode_provreq(&c, obj, out);
	case KUBE_KIND_RESOURCEPOOL: return kube__decode_resourcepool(&c, obj, out);
	case KUBE_KIND_CONFIGMAP: return kube__decode_configmap(&c, obj, out);
	case KUBE_KIND_LEASE: return kube__decode_lease(&c, obj, out);
	case KUBE_KIND_RESOURCESLICE:
	case KUBE_KIND_DEVICECLASS:
	case KUBE_KIND_RESOURCECLAIMTEMPLATE:
	case KUBE_KIND_RESOURCECLAIM:
		return kube__decode_draobj(&c, kind, obj, out);
	case KUBE_KIND_PROVCLASS: return kube__decode_provclass(&c, obj, out);
	}
	return prd_err_set(err, PRD_EINVAL, "unknown object kind %d", (int)kind);
}

void kube_obj_free(kube_intern *in, kube_meta *obj)
{
	if(!obj)
		return;
	switch((kube_kind)obj->kind) {
	case KUBE_KIND_NODE: kube__free_node(in, obj); break;
	case KUBE_KIND_POD: kube__free_pod(in, obj); break;
	case KUBE_KIND_PODTEMPLATE: kube__free_podtemplate(in, obj); break;
	case KUBE_KIND_PROVREQ: kube__free_provreq(in, obj); break;
	case KUBE_KIND_RESOURCEPOOL: kube__free_resourcepool(in, obj); break;
	case KUBE_KIND_CONFIGMAP: kube__free_configmap(in, obj); break;
	case KUBE_KIND_LEASE: kube__free_lease(in, obj); break;
	case KUBE_KIND_RESOURCESLICE:
	case KUBE_KIND_DEVICECLASS:
	case KUBE_KIND_RESOURCECLAIMTEMPLATE:
	case KUBE_KIND_RESOURCECLAIM:
		kube__free_draobj(in, obj);
		break;
	case KUBE_KIND_PROVCLASS: kube__free_provclass(in, obj); break;
	}
}

bool kube_meta_key(const kube_meta *m, char *buf, size_t n)
{
	int w;
	if(m->ns && *m->ns)
		w = snprintf(buf, n, "%s/%s", m->ns, m->name);
	else
		w = snprintf(buf, n, "%s", m->name);
	return w >= 0 && (size_t)w < n;
}

#define AS(fn, type, k) \
	const type *fn(const kube_meta *m) { return m && m->kind == (k) ? (const type *)m : NULL; }
AS(kube_as_node, kube_node, KUBE_KIND_NODE)
AS(kube_as_pod, kube_pod, KUBE_KIND_POD)
AS(kube_as_podtemplate, kube_podtemplate, KUBE_KIND_PODTEMPLATE)
AS(kube_as_provreq, kube_provreq, KUBE_KIND_PROVREQ)
AS(kube_as_resourcepool, kube_resourcepool, KUBE_KIND_RESOURCEPOOL)
AS(kube_as_configmap, kube_configmap, KUBE_KIND_CONFIGMAP)
AS(kube_as_lease, kube_lease, KUBE_KIND_LEASE)
AS(kube_as_provclass, kube_provclass, KUBE_KIND_PROVCLASS)

const kube_draobj *kube_as_draobj(const kube_meta *m)
{
	if(!m || (m->kind != KUBE_KIND_RESOURCESLICE && m->kind != KUBE_KIND_DEVICECLASS &&
		  m->kind != KUBE_KIND_RESOURCECLAIMTEMPLATE && m->kind != KUBE_KIND_RESOURCECLAIM))
		return NULL;
	return (const kube_draobj *)m;
}
#undef AS

const char *kube_kv_get(const kube_kv *kv, size_t n, const char *key)
{
	size_t i;
	for(i = 0; i < n; i++)
		if(strcmp(kv[i].key, key) == 0)
			return kv[i].value;
	return NULL;
}

const qty *kube_res_get(const kube_res *r, size_t n, const char *name)
{
	size_t i;
	for(i = 0; i < n; i++)
		if(strcmp(r[i].name, name) == 0)
			return &r[i].q;
	return NULL;
}

const kube_condition *kube_provreq_condition(const kube_provreq *pr, const char *type)
{
	size_t i;
	for(i = 0; i < pr->nconditions; i++)
		if(strcmp(pr->conditions[i].type, type) == 0)
			return &pr->conditions[i];
	return NULL;
}
