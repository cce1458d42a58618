/* The in-memory Kubernetes API: kube-apiserver's REST behaviour (verbs,
 * resourceVersions, selectors, subresources, watches) for simulate and tests. */
#include "kube/memapi.h"
#include "kube/jscan.h"
#include "kube/reflector.h"
#include "kube/selector.h"
#include "util/buf.h"
#include "util/hmap.h"
#include "util/rfc3339.h"
#include "util/str.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct mem_kind {
	kube_resource r;
	bool status;      /* has a status subresource */
	bool generation;  /* bumps metadata.generation on spec changes */
	int store;        /* index of the object store (versions share one) */
	bool scale;       /* has a scale subresource on spec.replicas */
} mem_kind;

/* Kinds provreqd uses. ProvisioningRequest v1beta1 shares v1's store, as
 * both versions of a CRD are views of the same objects. */
static const mem_kind kinds[] = {
	{ { "", "v1", "nodes", "Node", false }, true, false, 0, false },
	{ { "", "v1", "pods", "Pod", true }, true, false, 1, false },
	{ { "", "v1", "podtemplates", "PodTemplate", true }, false, false, 2, false },
	{ { "", "v1", "events", "Event", true }, false, false, 3, false },
	{ { "", "v1", "configmaps", "ConfigMap", true }, false, false, 4, false },
	{ { "", "v1", "namespaces", "Namespace", false }, true, false, 5, false },
	{ { "coordination.k8s.io", "v1", "leases", "Lease", true }, false, false, 6, false },
	{ { "autoscaling.x-k8s.io", "v1", "provisioningrequests", "ProvisioningRequest", true }, true, true, 7, false },
	{ { "autoscaling.x-k8s.io", "v1beta1", "provisioningrequests", "ProvisioningRequest", true }, true, true, 7, false },
	{ { "capsule.clastix.io", "v1beta2", "resourcepools", "ResourcePool", false }, true, true, 8, false },
	{ { "events.k8s.io", "v1", "events", "Event", true }, false, false, 3, false },
	{ { "resource.k8s.io", "v1", "resourceslices", "ResourceSlice", false }, false, false, 9, false },
	{ { "resource.k8s.io", "v1", "deviceclasses", "DeviceClass", false }, false, false, 10, false },
	{ { "resource.k8s.io", "v1", "resourceclaimtemplates", "ResourceClaimTemplate", true }, false, false, 11, false },
	{ { "resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", true }, true, false, 12, false },
	{ { "provreqd.io", "v1alpha1", "provisioningclasses", "ProvisioningClass", false }, false, true, 13, false },
	{ { "", "v1", "resourcequotas", "ResourceQuota", true }, false, false, 14, false },
	{ { "", "v1", "secrets", "Secret", true }, false, false, 15, false },
};
#define NBUILTIN (sizeof(kinds) / sizeof(kinds[0]))
#define NBUILTIN_STORES 16
#define MAX_KINDS 64

typedef struct mem_event {
	uint64_t rv;
	int store;
	char type[12];
	json_object *obj;  /* the object after (for DELETED: as it was at) the change */
} mem_event;

typedef struct mem_fault {
	char *method;
	char *prefix;
	long status;
	int count;
	struct mem_fault *next;
} mem_fault;

typedef struct mem_lw {
	struct memapi *m;
	const kube_resource *r;
	struct mem_lw *next_owned;
} mem_lw;

struct memapi {
	pthread_mutex_t mu;
	mem_lw *lws;           /* listwatches handed out, freed with the store */
	const clk *clock;
	mem_kind kinds[MAX_KINDS];
	size_t nkinds;
	hmap stores[MAX_KINDS]; /* "ns/name" → json_object (owned) */
	int nstores;
	/* Each store's keys in order, for lists (NULL: not made since the
	 * store last changed; the keys point into the store). A client pages
	 * through a list of 600,000 pods in 120 requests: sorting every key
	 * for each page made the in-memory server's list quadratic. */
	const char **sorted[MAX_KINDS];
	size_t nsorted[MAX_KINDS];
	uint64_t rv;
	mem_event *log;        /* ring buffer of the last log_cap events */
	size_t log_cap, log_len, log_head;
	uint64_t compacted_rv; /* watches from before this get 410 */
	uint64_t seq;          /* uids and generated names */
	mem_fault *faults;
	atomic_uint_least64_t lw_server_ns; /* see memapi_listwatch_server_ns */
};

/* One parsed request path. */
typedef struct mem_req {
	const mem_kind *kind;
	char ns[254];
	char name[254];
	char sub[32];
	/* query */
	char *label_selector;
	char *field_selector;
	long limit;
	char *cont;
	bool watch;
	char *rv;
	char *uid_pre;  /* not from the query: DeleteOptions preconditions */
} mem_req;

static void put_obj(void *p)
{
	json_object_put(p);
}

int memapi_new(const clk *clock, size_t log_cap, memapi **out)
{
	memapi *m = calloc(1, sizeof(*m));
	int i;
	if(!m)
		return PRD_ENOMEM;
	m->log_cap = log_cap ? log_cap : 100000;
	m->log = calloc(m->log_cap, sizeof(*m->log));
	if(!m->log) {
		free(m);
		return PRD_ENOMEM;
	}
	pthread_mutex_init(&m->mu, NULL);
	m->clock = clock ? clock : clk_real();
	memcpy(m->kinds, kinds, sizeof(kinds));
	m->nkinds = NBUILTIN;
	m->nstores = NBUILTIN_STORES;
	for(i = 0; i < MAX_KINDS; i++)
		hmap_init(&m->stores[i], put_obj);
	m->rv = 1;
	*out = m;
	return 0;
}

void memapi_free(memapi *m)
{
	size_t i;
	mem_fault *f, *n;
	if(!m)
		return;
	for(i = 0; i < MAX_KINDS; i++) {
		hmap_free(&m->stores[i]);
		free(m->sorted[i]);
	}
	for(i = 0; i < m->log_len; i++)
		json_object_put(m->log[(m->log_head + i) % m->log_cap].obj);
	free(m->log);
	for(f = m->faults; f; f = n) {
		n = f->next;
		free(f->method);
		free(f->prefix);
		free(f);
	}
	while(m->lws) {
		mem_lw *next = m->lws->next_owned;
		free(m->lws);
		m->lws = next;
	}
	pthread_mutex_destroy(&m->mu);
	free(m);
}

static void api_version_of(const kube_resource *r, char *out, size_t n)
{
	if(r->group[0])
		snprintf(out, n, "%s/%s", r->group, r->version);
	else
		snprintf(out, n, "%s", r->version);
}

/* Kinds are only added before use (memapi_add_kind's contract), so
 * reading the table needs no lock. */
const kube_resource *memapi_resource_for_kind(const memapi *m, const char *api_version, const char *kind)
{
	size_t i;
	char av[128];
	if(!api_version || !kind)
		return NULL;
	for(i = 0; i < m->nkinds; i++) {
		api_version_of(&m->kinds[i].r, av, sizeof(av));
		if(strcmp(av, api_version) == 0 && strcmp(m->kinds[i].r.kind, kind) == 0)
			return &m->kinds[i].r;
	}
	return NULL;
}

static const mem_kind *kind_for(const memapi *m, const char *group, const char *version, const char *resource)
{
	size_t i;
	for(i = 0; i < m->nkinds; i++)
		if(!strcmp(m->kinds[i].r.group, group) && !strcmp(m->kinds[i].r.version, version) &&
		   !strcmp(m->kinds[i].r.resource, resource))
			return &m->kinds[i];
	return NULL;
}

static const mem_kind *kind_for_resource(const memapi *m, const kube_resource *r)
{
	return kind_for(m, r->group, r->version, r->resource);
}

int memapi_add_kind(memapi *m, const kube_resource *r, unsigned flags)
{
	size_t i;
	mem_kind *k;
	if(kind_for_resource(m, r))
		return PRD_EEXIST;
	if(m->nkinds == MAX_KINDS || m->nstores == MAX_KINDS)
		return PRD_ERANGE;
	k = &m->kinds[m->nkinds];
	k->r = *r;
	k->status = flags & MEMAPI_STATUS;
	k->generation = flags & MEMAPI_GENERATION;
	k->scale = flags & MEMAPI_SCALE;
	/* Another version of an already known group/resource shares its store. */
	k->store = m->nstores;
	for(i = 0; i < m->nkinds; i++) {
		if(!strcmp(m->kinds[i].r.group, r->group) && !strcmp(m->kinds[i].r.resource, r->resource)) {
			k->store = m->kinds[i].store;
			break;
		}
	}
	if(k->store == m->nstores)
		m->nstores++;
	m->nkinds++;
	return 0;
}

/* ---- Status answers ---------------------------------------------------- */

static const char *reason_for(long code)
{
	switch(code) {
	case 400: return "BadRequest";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "NotFound";
	case 405: return "MethodNotAllowed";
	case 409: return "Conflict";
	case 410: return "Expired";
	case 415: return "UnsupportedMediaType";
	case 422: return "Invalid";
	case 429: return "TooManyRequests";
	case 500: return "InternalError";
	case 503: return "ServiceUnavailable";
	case 504: return "Timeout";
	default: return "Unknown";
	}
}

static int code_for(long status, const char *reason)
{
	if(status >= 200 && status < 300)
		return 0;
	switch(status) {
	case 404: return PRD_ENOTFOUND;
	case 409: return reason && !strcmp(reason, "AlreadyExists") ? PRD_EEXIST : PRD_ECONFLICT;
	case 410: return PRD_EGONE;
	case 401:
	case 403: return PRD_EPERM;
	case 400:
	case 422: return PRD_EINVAL;
	case 415:
	case 405: return PRD_EUNSUPPORTED;
	case 429: return PRD_EAGAIN;
	default: return status >= 500 ? PRD_EAGAIN : PRD_EINTERNAL;
	}
}

/* Build a Status object answer; returns the PRD_E* code. */
static int status_answer(long code, const char *reason, const char *message, long *status, char **resp,
			 size_t *resp_len)
{
	json_object *o = json_object_new_object();
	const char *s;
	if(!reason)
		reason = reason_for(code);
	json_object_object_add(o, "kind", json_object_new_string("Status"));
	json_object_object_add(o, "apiVersion", json_object_new_string("v1"));
	json_object_object_add(o, "metadata", json_object_new_object());
	json_object_object_add(o, "status", json_object_new_string("Failure"));
	json_object_object_add(o, "message", json_object_new_string(message));
	json_object_object_add(o, "reason", json_object_new_string(reason));
	json_object_object_add(o, "code", json_object_new_int((int)code));
	s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
	*resp = str_dup(s);
	*resp_len = *resp ? strlen(*resp) : 0;
	*status = code;
	json_object_put(o);
	return code_for(code, reason);
}

static int ok_answer(long code, json_object *o, long *status, char **resp, size_t *resp_len)
{
	const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
	*resp = str_dup(s);
	if(!*resp)
		return PRD_ENOMEM;
	*resp_len = strlen(*resp);
	*status = code;
	return 0;
}

/* ---- paths and queries ------------------------------------------------- */

static int hexval(char c)
{
	if(c >= '0' && c <= '9') return c - '0';
	if(c >= 'a' && c <= 'f') return c - 'a' + 10;
	if(c >= 'A' && c <= 'F') return c - 'A' + 10;
	return -1;
}

/* Percent-decode (and '+' → ' ') n bytes of s. Caller frees. */
static char *url_decode(const char *s, size_t n)
{
	char *o = malloc(n + 1), *p = o;
	size_t i;
	if(!o)
		return NULL;
	for(i = 0; i < n; i++) {
		if(s[i] == '%' && i + 2 < n && hexval(s[i + 1]) >= 0 && hexval(s[i + 2]) >= 0) {
			*p++ = (char)(hexval(s[i + 1]) * 16 + hexval(s[i + 2]));
			i += 2;
		} else if(s[i] == '+') {
			*p++ = ' ';
		} else {
			*p++ = s[i];
		}
	}
	*p = '\0';
	return o;
}

static void req_clear(mem_req *q)
{
	free(q->label_selector);
	free(q->field_selector);
	free(q->cont);
	free(q->rv);
	free(q->uid_pre);
	memset(q, 0, sizeof(*q));
}

static int parse_query(mem_req *q, const char *qs)
{
	while(qs && *qs) {
		const char *amp = strchr(qs, '&'), *eq;
		size_t len = amp ? (size_t)(amp - qs) : strlen(qs);
		char *val = NULL;
		eq = memchr(qs, '=', len);
		if(eq) {
			val = url_decode(eq + 1, len - (size_t)(eq + 1 - qs));
			if(!val)
				return PRD_ENOMEM;
		}
#define KEY(k) ((size_t)((eq ? eq : qs + len) - qs) == strlen(k) && !strncmp(qs, k, strlen(k)))
		if(KEY("labelSelector")) {
			free(q->label_selector);
			q->label_selector = val;
			val = NULL;
		} else if(KEY("fieldSelector")) {
			free(q->field_selector);
			q->field_selector = val;
			val = NULL;
		} else if(KEY("continue")) {
			free(q->cont);
			q->cont = val;
			val = NULL;
		} else if(KEY("resourceVersion")) {
			free(q->rv);
			q->rv = val;
			val = NULL;
		} else if(KEY("limit") && val) {
			int64_t v;
			if(str_to_int64(val, &v) == 0 && v > 0)
				q->limit = (long)v;
		} else if(KEY("watch") && val) {
			q->watch = !strcmp(val, "true") || !strcmp(val, "1");
		}
#undef KEY
		free(val);
		qs = amp ? amp + 1 : NULL;
	}
	return 0;
}

/* Split "/api/v1/namespaces/ns/pods/name/status?x=y" into q. */
static int parse_path(const memapi *m, const char *path, mem_req *q)
{
	char pbuf[1024], *seg[10], *save = NULL, *t, *qs;
	const char *group = "", *version;
	int n = 0, i = 0;

	if(strlen(path) >= sizeof(pbuf))
		return PRD_EINVAL;
	memcpy(pbuf, path, strlen(path) + 1);
	qs = strchr(pbuf, '?');
	if(qs)
		*qs++ = '\0';
	for(t = strtok_r(pbuf, "/", &save); t && n < 10; t = strtok_r(NULL, "/", &save))
		seg[n++] = t;
	if(t)
		return PRD_EINVAL;
	if(n >= 2 && !strcmp(seg[0], "api")) {
		version = seg[1];
		i = 2;
	} else if(n >= 3 && !strcmp(seg[0], "apis")) {
		group = seg[1];
		version = seg[2];
		i = 3;
	} else {
		return PRD_ENOTFOUND;
	}
	if(n - i >= 3 && !strcmp(seg[i], "namespaces")) {
		snprintf(q->ns, sizeof(q->ns), "%s", seg[i + 1]);
		i += 2;
	}
	if(i >= n)
		return PRD_ENOTFOUND;
	q->kind = kind_for(m, group, version, seg[i]);
	if(!q->kind)
		return PRD_ENOTFOUND;
	if(i + 1 < n)
		snprintf(q->name, sizeof(q->name), "%s", seg[i + 1]);
	if(i + 2 < n)
		snprintf(q->sub, sizeof(q->sub), "%s", seg[i + 2]);
	if(i + 3 < n)
		return PRD_ENOTFOUND;
	return parse_query(q, qs);
}

/* ---- object helpers ---------------------------------------------------- */

static json_object *meta_of(json_object *o)
{
	json_object *m;
	if(!json_object_object_get_ex(o, "metadata", &m) || !json_object_is_type(m, json_type_object)) {
		m = json_object_new_object();
		json_object_object_add(o, "metadata", m);
	}
	return m;
}

static const char *get_str(json_object *o, const char *k)
{
	json_object *v;
	if(!o || !json_object_object_get_ex(o, k, &v) || !json_object_is_type(v, json_type_string))
		return NULL;
	return json_object_get_string(v);
}

static void set_str(json_object *o, const char *k, const char *v)
{
	json_object_object_add(o, k, json_object_new_string(v));
}

static void store_key(char *out, size_t n, const char *ns, const char *name)
{
	snprintf(out, n, "%s/%s", ns ? ns : "", name);
}

/* Append an event to the ring; takes a reference to obj. */
static void log_event(memapi *m, int store, const char *type, json_object *obj)
{
	mem_event *e;
	size_t idx;
	/* Every change of a store is logged: its order is made again. */
	free(m->sorted[store]);
	m->sorted[store] = NULL;
	if(m->log_len == m->log_cap) {
		e = &m->log[m->log_head];
		json_object_put(e->obj);
		m->compacted_rv = e->rv;
		m->log_head = (m->log_head + 1) % m->log_cap;
		m->log_len--;
	}
	idx = (m->log_head + m->log_len) % m->log_cap;
	e = &m->log[idx];
	e->rv = m->rv;
	e->store = store;
	snprintf(e->type, sizeof(e->type), "%s", type);
	/* A deep copy: later changes to the stored object must not alter what
	 * this event showed. */
	e->obj = NULL;
	json_object_deep_copy(obj, &e->obj, NULL);
	m->log_len++;
}

static void stamp_rv(memapi *m, json_object *o)
{
	char b[32];
	m->rv++;
	snprintf(b, sizeof(b), "%llu", (unsigned long long)m->rv);
	set_str(meta_of(o), "resourceVersion", b);
}

static bool json_equal(json_object *a, json_object *b)
{
	if(!a || !b)
		return a == b;
	return json_object_equal(a, b) != 0;
}

/* RFC 7386 JSON merge patch of `patch` into `target` (modified in place). */
static void merge_patch(json_object *target, json_object *patch)
{
	json_object_object_foreach(patch, k, v) {
		json_object *cur;
		if(!v) {
			json_object_object_del(target, k);
		} else if(json_object_is_type(v, json_type_object) &&
			  json_object_object_get_ex(target, k, &cur) && json_object_is_type(cur, json_type_object)) {
			merge_patch(cur, v);
		} else if(json_object_is_type(v, json_type_object)) {
			json_object *fresh = json_object_new_object();
			merge_patch(fresh, v);
			json_object_object_add(target, k, fresh);
		} else {
			json_object_object_add(target, k, json_object_get(v));
		}
	}
}

/* ---- verbs ------------------------------------------------------------- */

static bool fault_hit(memapi *m, const char *method, const char *path, long *status)
{
	mem_fault *f;
	for(f = m->faults; f; f = f->next) {
		if(f->count > 0 && (!f->method || !strcmp(f->method, method)) && str_starts_with(path, f->prefix)) {
			f->count--;
			*status = f->status;
			return true;
		}
	}
	return false;
}

/* 422 Invalid as kube-apiserver words it: `Kind "name" is invalid: why`. */
static int invalid(const mem_req *q, const char *name, const char *why, long *status, char **resp, size_t *resp_len)
{
	char msg[900];
	snprintf(msg, sizeof(msg), "%s \"%.200s\" is invalid: %s", q->kind->r.kind, name, why);
	return status_answer(422, "Invalid", msg, status, resp, resp_len);
}

/* The apiserver's ConfigMap validation: the values of data and binaryData
 * (as stored, binaryData decoded) may total at most 1 MiB (ValidateConfigMap,
 * core.MaxSecretSize); a larger object is refused with 422. Base64 text is
 * counted at 3/4 of its length. */
#define MEM_CONFIGMAP_MAX 1048576
static bool configmap_too_long(const mem_req *q, json_object *obj)
{
	json_object *d;
	size_t total = 0;
	if(strcmp(q->kind->r.kind, "ConfigMap"))
		return false;
	if(json_object_object_get_ex(obj, "data", &d) && json_object_is_type(d, json_type_object)) {
		json_object_object_foreach(d, k, v)
		{
			(void)k;
			total += (size_t)json_object_get_string_len(v);
		}
	}
	if(json_object_object_get_ex(obj, "binaryData", &d) && json_object_is_type(d, json_type_object)) {
		json_object_object_foreach(d, k, v)
		{
			(void)k;
			total += (size_t)json_object_get_string_len(v) / 4 * 3;
		}
	}
	return total > MEM_CONFIGMAP_MAX;
}

static int configmap_too_long_answer(long *status, char **resp, size_t *resp_len)
{
	return status_answer(422, "Invalid", "ConfigMap is invalid: []: Too long: must have at most 1048576 bytes",
			     status, resp, resp_len);
}

/* Create: `obj` is borrowed (and filled in); the store keeps its own
 * reference. */
static int do_create(memapi *m, mem_req *q, json_object *obj, long *status, char **resp, size_t *resp_len)
{
	json_object *md = meta_of(obj);
	const char *name = get_str(md, "name"), *gen = get_str(md, "generateName");
	char key[600], genbuf[300], ts[RFC3339_MAX], uid[64], av[128];
	hmap *st = &m->stores[q->kind->store];

	if(q->name[0])
		return status_answer(405, NULL, "create takes a collection path", status, resp, resp_len);
	if(!name && gen) {
		snprintf(genbuf, sizeof(genbuf), "%s%05llx", gen, (unsigned long long)(++m->seq * 2654435761u) & 0xfffffULL);
		set_str(md, "name", genbuf);
		name = get_str(md, "name");
	}
	if(!name || !name[0])
		return status_answer(422, NULL, "metadata.name: Required value: name or generateName is required",
				     status, resp, resp_len);
	if(q->kind->r.namespaced) {
		const char *ons = get_str(md, "namespace");
		if(!q->ns[0])
			return status_answer(404, NULL, "the namespace of the object must be given in the path",
					     status, resp, resp_len);
		if(ons && strcmp(ons, q->ns))
			return status_answer(400, NULL,
					     "the namespace of the provided object does not match the namespace sent on the request",
					     status, resp, resp_len);
		set_str(md, "namespace", q->ns);
	}
	if(configmap_too_long(q, obj))
		return configmap_too_long_answer(status, resp, resp_len);
	store_key(key, sizeof(key), q->kind->r.namespaced ? q->ns : NULL, name);
	{
		char why[600];
		if(memapi__validate(q->kind->r.kind, obj, false, why, sizeof(why)))
			return invalid(q, name, why, status, resp, resp_len);
	}
	if(hmap_has(st, key)) {
		char msg[700];
		snprintf(msg, sizeof(msg), "%s \"%s\" already exists", q->kind->r.resource, name);
		return status_answer(409, "AlreadyExists", msg, status, resp, resp_len);
	}
	api_version_of(&q->kind->r, av, sizeof(av));
	set_str(obj, "apiVersion", av);
	set_str(obj, "kind", q->kind->r.kind);
	snprintf(uid, sizeof(uid), "00000000-0000-4000-8000-%012llx", (unsigned long long)++m->seq);
	set_str(md, "uid", uid);
	rfc3339_format(clk_wall(m->clock), ts, sizeof(ts));
	if(!get_str(md, "creationTimestamp"))
		set_str(md, "creationTimestamp", ts);
	if(q->kind->generation)
		json_object_object_add(md, "generation", json_object_new_int64(1));
	json_object_object_del(md, "generateName");
	stamp_rv(m, obj);
	if(hmap_put(st, key, json_object_get(obj))) {
		json_object_put(obj); /* the reference hmap_put did not take */
		return status_answer(500, NULL, "out of memory", status, resp, resp_len);
	}
	log_event(m, q->kind->store, "ADDED", obj);
	return ok_answer(201, obj, status, resp, resp_len);
}

static int not_found(const mem_req *q, long *status, char **resp, size_t *resp_len)
{
	char msg[700];
	snprintf(msg, sizeof(msg), "%s \"%s\" not found", q->kind->r.resource, q->name);
	return status_answer(404, NULL, msg, status, resp, resp_len);
}

/* Replace `cur` (the stored object) by `next` following the rules of the
 * main resource or the status subresource, then store and log it. Takes
 * ownership of next. */
static bool has_finalizers(json_object *o)
{
	json_object *f = json_object_object_get(meta_of(o), "finalizers");
	return f && json_object_is_type(f, json_type_array) && json_object_array_length(f) > 0;
}

static int commit_update(memapi *m, mem_req *q, json_object *cur, json_object *next, long *status, char **resp,
			 size_t *resp_len)
{
	char key[600];
	json_object *nmd = meta_of(next), *cmd = meta_of(cur), *v;
	bool status_sub = !strcmp(q->sub, "status");
	const char *keep[] = { "uid", "creationTimestamp", "namespace", "name", "generation", "deletionTimestamp",
			       NULL };
	int i;

	/* Fields the server owns. */
	for(i = 0; keep[i]; i++) {
		if(json_object_object_get_ex(cmd, keep[i], &v))
			json_object_object_add(nmd, keep[i], json_object_get(v));
		else
			json_object_object_del(nmd, keep[i]);
	}
	set_str(next, "apiVersion", get_str(cur, "apiVersion"));
	set_str(next, "kind", get_str(cur, "kind"));
	if(q->kind->status) {
		if(status_sub) {
			/* Through /status only status changes. */
			json_object *st = NULL;
			json_object_object_get_ex(next, "status", &st);
			json_object_get(st);
			json_object_put(next);
			next = NULL;
			json_object_deep_copy(cur, &next, NULL);
			if(st)
				json_object_object_add(next, "status", st);
			else
				json_object_object_del(next, "status");
			nmd = meta_of(next);
		} else {
			json_object *st;
			if(json_object_object_get_ex(cur, "status", &st))
				json_object_object_add(next, "status", json_object_get(st));
			else
				json_object_object_del(next, "status");
		}
	}
	if(q->kind->generation && !status_sub) {
		json_object *os = NULL, *ns = NULL;
		json_object_object_get_ex(cur, "spec", &os);
		json_object_object_get_ex(next, "spec", &ns);
		if(!json_equal(os, ns))
			json_object_object_add(nmd, "generation",
					       json_object_new_int64(json_object_get_int64(json_object_object_get(cmd, "generation")) + 1));
	}
	{
		char why[600];
		if(memapi__validate(q->kind->r.kind, next, status_sub, why, sizeof(why))) {
			json_object_put(next);
			return invalid(q, q->name, why, status, resp, resp_len);
		}
	}
	/* No-op writes keep the resourceVersion and emit no event, as the
	 * apiserver does. */
	json_object_object_add(nmd, "resourceVersion", json_object_get(json_object_object_get(cmd, "resourceVersion")));
	if(json_equal(cur, next)) {
		int rc = ok_answer(200, next, status, resp, resp_len);
		json_object_put(next);
		return rc;
	}
	if(configmap_too_long(q, next)) {
		json_object_put(next);
		return configmap_too_long_answer(status, resp, resp_len);
	}
	stamp_rv(m, next);
	store_key(key, sizeof(key), q->kind->r.namespaced ? q->ns : NULL, q->name);
	/* The last finalizer of an object being deleted is gone: the
	 * apiserver removes the object. */
	if(json_object_object_get(nmd, "deletionTimestamp") && !has_finalizers(next)) {
		int rc;
		hmap_del(&m->stores[q->kind->store], key);
		log_event(m, q->kind->store, "DELETED", next);
		rc = ok_answer(200, next, status, resp, resp_len);
		json_object_put(next);
		return rc;
	}
	hmap_put(&m->stores[q->kind->store], key, next);
	log_event(m, q->kind->store, "MODIFIED", next);
	return ok_answer(200, next, status, resp, resp_len);
}

static int do_update(memapi *m, mem_req *q, json_object *obj, long *status, char **resp, size_t *resp_len)
{
	char key[600];
	json_object *cur;
	const char *want_rv, *have_rv, *bname;
	store_key(key, sizeof(key), q->kind->r.namespaced ? q->ns : NULL, q->name);
	cur = hmap_get(&m->stores[q->kind->store], key);
	if(!cur)
		return not_found(q, status, resp, resp_len);
	bname = get_str(meta_of(obj), "name");
	if(bname && strcmp(bname, q->name))
		return status_answer(400, NULL, "the name of the object does not match the name on the URL",
				     status, resp, resp_len);
	want_rv = get_str(meta_of(obj), "resourceVersion");
	have_rv = get_str(meta_of(cur), "resourceVersion");
	if(want_rv && want_rv[0] && strcmp(want_rv, have_rv)) {
		char msg[900];
		snprintf(msg, sizeof(msg),
			 "Operation cannot be fulfilled on %s \"%s\": the object has been modified; "
			 "please apply your changes to the latest version and try again",
			 q->kind->r.resource, q->name);
		return status_answer(409, "Conflict", msg, status, resp, resp_len);
	}
	return commit_update(m, q, cur, json_object_get(obj), status, resp, resp_len);
}

static int do_patch(memapi *m, mem_req *q, const char *ctype, json_object *patch, long *status, char **resp,
		    size_t *resp_len)
{
	char key[600];
	json_object *cur, *next = NULL;
	const char *want_rv;
	store_key(key, sizeof(key), q->kind->r.namespaced ? q->ns : NULL, q->name);
	if(ctype && str_starts_with(ctype, "application/json-patch+json"))
		return status_answer(415, NULL, "the in-memory API does not implement JSON patch",
				     status, resp, resp_len);
	if(!json_object_is_type(patch, json_type_object))
		return status_answer(400, NULL, "patch must be a JSON object", status, resp, resp_len);
	cur = hmap_get(&m->stores[q->kind->store], key);
	if(!cur) {
		/* Server-side apply creates what does not exist. */
		if(ctype && str_starts_with(ctype, "application/apply-patch")) {
			mem_req cq = *q;
			cq.name[0] = '\0';
			return do_create(m, &cq, patch, status, resp, resp_len);
		}
		return not_found(q, status, resp, resp_len);
	}
	want_rv = get_str(json_object_object_get(patch, "metadata"), "resourceVersion");
	if(want_rv && strcmp(want_rv, get_str(meta_of(cur), "resourceVersion"))) {
		char msg[700];
		snprintf(msg, sizeof(msg), "Operation cannot be fulfilled on %s \"%s\": the object has been modified",
			 q->kind->r.resource, q->name);
		return status_answer(409, "Conflict", msg, status, resp, resp_len);
	}
	json_object_deep_copy(cur, &next, NULL);
	if(!next)
		return status_answer(500, NULL, "out of memory", status, resp, resp_len);
	merge_patch(next, patch);
	return commit_update(m, q, cur, next, status, resp, resp_len);
}

static int do_delete(memapi *m, mem_req *q, json_object *opts, long *status, char **resp, size_t *resp_len)
{
	char key[600];
	json_object *cur, *pre = NULL;
	const char *uid, *rv;
	store_key(key, sizeof(key), q->kind->r.namespaced ? q->ns : NULL, q->name);
	cur = hmap_get(&m->stores[q->kind->store], key);
	if(!cur)
		return not_found(q, status, resp, resp_len);
	if(opts)
		json_object_object_get_ex(opts, "preconditions", &pre);
	uid = get_str(pre, "uid");
	rv = get_str(pre, "resourceVersion");
	if((uid && strcmp(uid, get_str(meta_of(cur), "uid"))) ||
	   (rv && strcmp(rv, get_str(meta_of(cur), "resourceVersion")))) {
		char msg[700];
		snprintf(msg, sizeof(msg), "Precondition failed: %s for %s \"%s\" does not match",
			 uid ? "UID" : "ResourceVersion", q->kind->r.resource, q->name);
		return status_answer(409, "Conflict", msg, status, resp, resp_len);
	}
	if(has_finalizers(cur)) {
		/* Finalizers hold the object: it is only marked, as the
		 * apiserver does, until the last one is removed. */
		json_object *next = NULL;
		char ts[RFC3339_MAX];
		if(json_object_object_get(meta_of(cur), "deletionTimestamp"))
			return ok_answer(200, cur, status, resp, resp_len);
		json_object_deep_copy(cur, &next, NULL);
		if(!next)
			return status_answer(500, NULL, "out of memory", status, resp, resp_len);
		rfc3339_format(clk_wall(m->clock), ts, sizeof(ts));
		json_object_object_add(meta_of(next), "deletionTimestamp", json_object_new_string(ts));
		stamp_rv(m, next);
		hmap_put(&m->stores[q->kind->store], key, next);
		log_event(m, q->kind->store, "MODIFIED", next);
		return ok_answer(200, next, status, resp, resp_len);
	}
	json_object_get(cur);
	hmap_del(&m->stores[q->kind->store], key);
	stamp_rv(m, cur);
	log_event(m, q->kind->store, "DELETED", cur);
	{
		int rc = ok_answer(200, cur, status, resp, resp_len);
		json_object_put(cur);
		return rc;
	}
}

/* The scale subresource: an autoscaling/v1 Scale view of spec.replicas. */
static int do_scale(memapi *m, mem_req *q, const char *method, json_object *body, long *status, char **resp,
		    size_t *resp_len)
{
	char key[600];
	json_object *cur, *sc, *md, *spec, *st, *v;
	int64_t replicas = 0;
	int rc;
	store_key(key, sizeof(key), q->kind->r.namespaced ? q->ns : NULL, q->name);
	cur = hmap_get(&m->stores[q->kind->store], key);
	if(!cur)
		return not_found(q, status, resp, resp_len);
	if(strcmp(method, "GET")) {
		json_object *next = NULL, *want;
		const char *want_rv;
		if(strcmp(method, "PUT") && strcmp(method, "PATCH"))
			return status_answer(405, NULL, "method not allowed on scale", status, resp, resp_len);
		/* A Scale carries its object's resourceVersion: a write that
		 * sends one is refused once the object moved on. */
		want_rv = body ? get_str(json_object_object_get(body, "metadata"), "resourceVersion") : NULL;
		if(want_rv && want_rv[0] && strcmp(want_rv, get_str(meta_of(cur), "resourceVersion"))) {
			char msg[700];
			snprintf(msg, sizeof(msg),
				 "Operation cannot be fulfilled on %s.scale \"%s\": the object has been modified; "
				 "please apply your changes to the latest version and try again",
				 q->kind->r.resource, q->name);
			return status_answer(409, "Conflict", msg, status, resp, resp_len);
		}
		want = body ? json_object_object_get(json_object_object_get(body, "spec"), "replicas") : NULL;
		if(!want || !json_object_is_type(want, json_type_int) || json_object_get_int64(want) < 0)
			return status_answer(422, NULL, "spec.replicas: Invalid value: must be a non-negative integer",
					     status, resp, resp_len);
		json_object_deep_copy(cur, &next, NULL);
		if(!next)
			return status_answer(500, NULL, "out of memory", status, resp, resp_len);
		spec = json_object_object_get(next, "spec");
		if(!spec) {
			spec = json_object_new_object();
			json_object_object_add(next, "spec", spec);
		}
		json_object_object_add(spec, "replicas", json_object_new_int64(json_object_get_int64(want)));
		{
			mem_req mq = *q;
			mq.sub[0] = '\0';
			rc = commit_update(m, &mq, cur, next, status, resp, resp_len);
		}
		if(rc)
			return rc;
		free(*resp);
		*resp = NULL;
		cur = hmap_get(&m->stores[q->kind->store], key);
	}
	if(json_object_object_get_ex(json_object_object_get(cur, "spec"), "replicas", &v))
		replicas = json_object_get_int64(v);
	sc = json_object_new_object();
	set_str(sc, "apiVersion", "autoscaling/v1");
	set_str(sc, "kind", "Scale");
	md = json_object_new_object();
	set_str(md, "name", q->name);
	if(q->kind->r.namespaced)
		set_str(md, "namespace", q->ns);
	set_str(md, "resourceVersion", get_str(meta_of(cur), "resourceVersion"));
	set_str(md, "uid", get_str(meta_of(cur), "uid"));
	json_object_object_add(sc, "metadata", md);
	spec = json_object_new_object();
	json_object_object_add(spec, "replicas", json_object_new_int64(replicas));
	json_object_object_add(sc, "spec", spec);
	st = json_object_new_object();
	v = json_object_object_get(json_object_object_get(cur, "status"), "replicas");
	json_object_object_add(st, "replicas", json_object_new_int64(v ? json_object_get_int64(v) : 0));
	json_object_object_add(sc, "status", st);
	rc = ok_answer(200, sc, status, resp, resp_len);
	json_object_put(sc);
	return rc;
}

typedef struct field_sel {
	char *field;
	char *value;
	bool neg;
} field_sel;

/* Does obj satisfy "a=b,c!=d" on metadata.name, metadata.namespace,
 * spec.nodeName, status.phase? Unknown fields fail the whole list as the
 * apiserver does (checked by the caller through `bad`). */
static bool field_match(json_object *obj, const char *fs, bool *bad)
{
	char fbuf[512], *save = NULL, *t;
	if(!fs || !*fs)
		return true;
	snprintf(fbuf, sizeof(fbuf), "%s", fs);
	for(t = strtok_r(fbuf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		char *op = strstr(t, "!="), *val;
		const char *have = NULL;
		bool neg = op != NULL;
		if(!op)
			op = strchr(t, '=');
		if(!op) {
			*bad = true;
			return false;
		}
		*op = '\0';
		val = op + (neg ? 2 : (op[1] == '=' ? 2 : 1));
		if(!strcmp(t, "metadata.name"))
			have = get_str(json_object_object_get(obj, "metadata"), "name");
		else if(!strcmp(t, "metadata.namespace"))
			have = get_str(json_object_object_get(obj, "metadata"), "namespace");
		else if(!strcmp(t, "spec.nodeName"))
			have = get_str(json_object_object_get(obj, "spec"), "nodeName");
		else if(!strcmp(t, "status.phase"))
			have = get_str(json_object_object_get(obj, "status"), "phase");
		else {
			*bad = true;
			return false;
		}
		if(!have)
			have = "";
		if((strcmp(have, val) == 0) == neg)
			return false;
	}
	return true;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int do_list(memapi *m, mem_req *q, long *status, char **resp, size_t *resp_len)
{
	hmap *st = &m->stores[q->kind->store];
	hmap_iter it;
	const char *k;
	void *v;
	const char **keys;
	size_t n = 0, i, first, emitted = 0;
	sel *ls = NULL;
	prd_err e;
	json_object *list, *items, *md;
	char av[128], kind[96], rvb[32];
	bool bad = false;
	int rc;

	if(q->label_selector && sel_parse(q->label_selector, &ls, &e)) {
		char msg[700];
		snprintf(msg, sizeof(msg), "unable to parse requirement: %s", e.msg);
		return status_answer(400, NULL, msg, status, resp, resp_len);
	}
	if(!(keys = m->sorted[q->kind->store])) {
		keys = malloc((hmap_len(st) + 1) * sizeof(*keys));
		if(!keys) {
			sel_free(ls);
			return status_answer(500, NULL, "out of memory", status, resp, resp_len);
		}
		hmap_iter_init(&it, st);
		while(hmap_iter_next(&it, &k, &v))
			keys[n++] = k;
		qsort(keys, n, sizeof(*keys), cmp_str);
		m->sorted[q->kind->store] = keys;
		m->nsorted[q->kind->store] = n;
	}
	n = m->nsorted[q->kind->store];
	/* A continued list starts after its token's key. */
	first = 0;
	if(q->cont) {
		size_t hi = n;
		while(first < hi) {
			size_t mid = first + (hi - first) / 2;
			if(strcmp(keys[mid], q->cont) <= 0)
				first = mid + 1;
			else
				hi = mid;
		}
	}
	list = json_object_new_object();
	items = json_object_new_array();
	api_version_of(&q->kind->r, av, sizeof(av));
	snprintf(kind, sizeof(kind), "%sList", q->kind->r.kind);
	set_str(list, "apiVersion", av);
	set_str(list, "kind", kind);
	md = json_object_new_object();
	snprintf(rvb, sizeof(rvb), "%llu", (unsigned long long)m->rv);
	set_str(md, "resourceVersion", rvb);
	for(i = first; i < n; i++) {
		json_object *o = hmap_get(st, keys[i]);
		json_object *labels = json_object_object_get(json_object_object_get(o, "metadata"), "labels");
		if(q->ns[0] && !str_starts_with(keys[i], q->ns))
			continue;
		if(q->ns[0] && keys[i][strlen(q->ns)] != '/')
			continue;
		if(ls && !sel_matches_json(ls, labels))
			continue;
		if(!field_match(o, q->field_selector, &bad)) {
			if(bad)
				break;
			continue;
		}
		if(q->limit && emitted == (size_t)q->limit) {
			/* More remain: hand out a continue token (the last key). */
			set_str(md, "continue", keys[i - 1 < n ? i - 1 : 0]);
			break;
		}
		json_object_array_add(items, json_object_get(o));
		emitted++;
	}
	sel_free(ls);
	if(bad) {
		json_object_put(items);
		json_object_put(md);
		json_object_put(list);
		return status_answer(400, NULL, "field label not supported", status, resp, resp_len);
	}
	json_object_object_add(list, "metadata", md);
	json_object_object_add(list, "items", items);
	rc = ok_answer(200, list, status, resp, resp_len);
	json_object_put(list);
	return rc;
}

int memapi_request(memapi *m, const char *method, const char *path, const char *content_type,
		   const char *body, size_t body_len, long *status, char **resp, size_t *resp_len)
{
	mem_req q;
	json_object *obj = NULL;
	int rc;
	long fstatus;

	*resp = NULL;
	*resp_len = 0;
	*status = 0;
	memset(&q, 0, sizeof(q));
	pthread_mutex_lock(&m->mu);
	if(fault_hit(m, method, path, &fstatus)) {
		rc = status_answer(fstatus, NULL, "injected fault", status, resp, resp_len);
		goto done;
	}
	rc = parse_path(m, path, &q);
	if(rc) {
		char msg[300];
		snprintf(msg, sizeof(msg), "the server could not find the requested resource (%.200s)", path);
		rc = status_answer(404, NULL, msg, status, resp, resp_len);
		goto done;
	}
	if(q.sub[0] && strcmp(q.sub, "status") && !(q.kind->scale && !strcmp(q.sub, "scale"))) {
		rc = status_answer(404, NULL, "subresource not supported by the in-memory API", status, resp, resp_len);
		goto done;
	}
	if(!strcmp(q.sub, "status") && !q.kind->status) {
		rc = status_answer(404, NULL, "this kind has no status subresource", status, resp, resp_len);
		goto done;
	}
	if(body && body_len) {
		json_tokener *tok = json_tokener_new();
		obj = json_tokener_parse_ex(tok, body, (int)body_len);
		if(!obj || json_tokener_get_error(tok) != json_tokener_success) {
			json_tokener_free(tok);
			json_object_put(obj);
			obj = NULL;
			rc = status_answer(400, NULL, "the request body is not valid JSON", status, resp, resp_len);
			goto done;
		}
		json_tokener_free(tok);
	}
	if(!strcmp(q.sub, "scale")) {
		rc = do_scale(m, &q, method, obj, status, resp, resp_len);
	} else if(!strcmp(method, "GET")) {
		if(q.watch) {
			rc = status_answer(405, NULL, "use memapi_events_since for watches", status, resp, resp_len);
		} else if(q.name[0]) {
			char key[600];
			json_object *cur;
			store_key(key, sizeof(key), q.kind->r.namespaced ? q.ns : NULL, q.name);
			cur = hmap_get(&m->stores[q.kind->store], key);
			rc = cur ? ok_answer(200, cur, status, resp, resp_len) : not_found(&q, status, resp, resp_len);
		} else {
			rc = do_list(m, &q, status, resp, resp_len);
		}
	} else if(!strcmp(method, "POST")) {
		if(!obj || !json_object_is_type(obj, json_type_object))
			rc = status_answer(400, NULL, "create needs an object body", status, resp, resp_len);
		else
			rc = do_create(m, &q, obj, status, resp, resp_len);
	} else if(!strcmp(method, "PUT")) {
		if(!obj || !json_object_is_type(obj, json_type_object) || !q.name[0])
			rc = status_answer(400, NULL, "update needs an object body and a name", status, resp, resp_len);
		else
			rc = do_update(m, &q, obj, status, resp, resp_len);
	} else if(!strcmp(method, "PATCH")) {
		if(!obj || !q.name[0])
			rc = status_answer(400, NULL, "patch needs a body and a name", status, resp, resp_len);
		else
			rc = do_patch(m, &q, content_type, obj, status, resp, resp_len);
	} else if(!strcmp(method, "DELETE")) {
		if(!q.name[0])
			rc = status_answer(405, NULL, "deleting collections is not supported", status, resp, resp_len);
		else
			rc = do_delete(m, &q, obj, status, resp, resp_len);
	} else {
		rc = status_answer(405, NULL, "method not allowed", status, resp, resp_len);
	}
done:
	pthread_mutex_unlock(&m->mu);
	json_object_put(obj);
	req_clear(&q);
	return rc;
}

static int64_t thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (int64_t)ts.tv_sec * PRD_NS_PER_SEC + ts.tv_nsec;
}

/* Events after since_rv for one kind, copied under the lock so they can
 * be delivered outside it (callbacks may call back into the store): a
 * reference to each object, or (text) its JSON text printed under the
 * lock, as an apiserver writes a watch. */
typedef struct due {
	json_object **objs;
	char **texts;
	char (*types)[12];
	size_t n;
} due;

static void due_free(due *d)
{
	size_t i;
	for(i = 0; i < d->n; i++) {
		if(d->objs)
			json_object_put(d->objs[i]);
		if(d->texts)
			free(d->texts[i]);
	}
	free(d->objs);
	free(d->texts);
	free(d->types);
}

static int collect_due_locked(memapi *m, const mem_kind *k, const char *ns, uint64_t since_rv, bool text, due *d,
			      uint64_t *last_rv);

static int collect_due(memapi *m, const mem_kind *k, const char *ns, uint64_t since_rv, bool text, due *d,
		       uint64_t *last_rv)
{
	int64_t t0 = thread_cpu_ns();
	int rc = collect_due_locked(m, k, ns, since_rv, text, d, last_rv);
	atomic_fetch_add(&m->lw_server_ns, (uint64_t)(thread_cpu_ns() - t0));
	return rc;
}

static int collect_due_locked(memapi *m, const mem_kind *k, const char *ns, uint64_t since_rv, bool text, due *d,
			      uint64_t *last_rv)
{
	size_t i;
	memset(d, 0, sizeof(*d));
	pthread_mutex_lock(&m->mu);
	if(since_rv < m->compacted_rv) {
		pthread_mutex_unlock(&m->mu);
		return PRD_EGONE;
	}
	if(text)
		d->texts = calloc(m->log_len + 1, sizeof(*d->texts));
	else
		d->objs = calloc(m->log_len + 1, sizeof(*d->objs));
	d->types = calloc(m->log_len + 1, sizeof(*d->types));
	if((!d->objs && !d->texts) || !d->types) {
		pthread_mutex_unlock(&m->mu);
		due_free(d);
		return PRD_ENOMEM;
	}
	for(i = 0; i < m->log_len; i++) {
		mem_event *e = &m->log[(m->log_head + i) % m->log_cap];
		const char *ons;
		if(e->rv <= since_rv || e->store != k->store)
			continue;
		ons = get_str(json_object_object_get(e->obj, "metadata"), "namespace");
		if(ns && (!ons || strcmp(ns, ons)))
			continue;
		if(text && !(d->texts[d->n] = str_dup(json_object_to_json_string_ext(e->obj, JSON_C_TO_STRING_PLAIN)))) {
			pthread_mutex_unlock(&m->mu);
			due_free(d);
			return PRD_ENOMEM;
		}
		if(!text)
			d->objs[d->n] = json_object_get(e->obj);
		memcpy(d->types[d->n], e->type, sizeof(d->types[d->n]));
		d->n++;
	}
	if(last_rv)
		*last_rv = m->rv;
	pthread_mutex_unlock(&m->mu);
	return 0;
}

int memapi_events_since(memapi *m, const kube_resource *r, const char *ns, uint64_t since_rv,
			kube_event_fn fn, void *ud, uint64_t *last_rv)
{
	const mem_kind *k = kind_for_resource(m, r);
	due d;
	size_t i;
	int rc;

	if(!k)
		return PRD_ENOTFOUND;
	if((rc = collect_due(m, k, ns, since_rv, false, &d, last_rv)) != 0)
		return rc;
	for(i = 0; i < d.n && !rc; i++)
		rc = fn(ud, d.types[i], d.objs[i]);
	due_free(&d);
	return rc;
}

int memapi_events_since_text(memapi *m, const kube_resource *r, const char *ns, uint64_t since_rv,
			     kube_src_event_fn fn, void *ud, uint64_t *last_rv)
{
	const mem_kind *k = kind_for_resource(m, r);
	due d;
	size_t i;
	int rc;

	if(!k)
		return PRD_ENOTFOUND;
	if((rc = collect_due(m, k, ns, since_rv, true, &d, last_rv)) != 0)
		return rc;
	for(i = 0; i < d.n && !rc; i++) {
		/* The store took the object through json-c's default depth. */
		kube_item_src src = { d.texts[i], strlen(d.texts[i]), JSON_TOKENER_DEFAULT_DEPTH, NULL };
		rc = fn(ud, d.types[i], &src);
	}
	due_free(&d);
	return rc;
}

uint64_t memapi_resource_version(memapi *m)
{
	uint64_t rv;
	pthread_mutex_lock(&m->mu);
	rv = m->rv;
	pthread_mutex_unlock(&m->mu);
	return rv;
}

void memapi_compact(memapi *m)
{
	pthread_mutex_lock(&m->mu);
	while(m->log_len) {
		mem_event *e = &m->log[m->log_head];
		json_object_put(e->obj);
		e->obj = NULL;
		m->log_head = (m->log_head + 1) % m->log_cap;
		m->log_len--;
	}
	m->compacted_rv = m->rv;
	pthread_mutex_unlock(&m->mu);
}

void memapi_inject_fault(memapi *m, const char *method, const char *path_prefix, long http_status, int count)
{
	mem_fault *f = calloc(1, sizeof(*f));
	if(!f)
		return;
	f->method = str_dup(method);
	f->prefix = str_dup(path_prefix ? path_prefix : "");
	f->status = http_status;
	f->count = count;
	pthread_mutex_lock(&m->mu);
	f->next = m->faults;
	m->faults = f;
	pthread_mutex_unlock(&m->mu);
}

int memapi_load(memapi *m, json_object *objs, prd_err *err)
{
	size_t i;
	for(i = 0; i < json_object_array_length(objs); i++) {
		json_object *o = json_object_array_get_idx(objs, i);
		const kube_resource *r = memapi_resource_for_kind(m, get_str(o, "apiVersion"), get_str(o, "kind"));
		const char *name = get_str(json_object_object_get(o, "metadata"), "name");
		const char *ns = get_str(json_object_object_get(o, "metadata"), "namespace");
		char *path, *resp = NULL;
		const char *body;
		size_t rl;
		long status;
		int rc;

		if(!r)
			return prd_err_set(err, PRD_EINVAL, "object %zu (%s %s): unknown apiVersion/kind \"%s/%s\"", i,
					   get_str(o, "kind") ? get_str(o, "kind") : "?", name ? name : "?",
					   get_str(o, "apiVersion") ? get_str(o, "apiVersion") : "",
					   get_str(o, "kind") ? get_str(o, "kind") : "");
		if(r->namespaced && !ns)
			ns = "default";
		path = kube_path(r, r->namespaced ? ns : NULL, NULL, NULL);
		if(!path)
			return prd_err_set(err, PRD_ENOMEM, "out of memory");
		body = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
		rc = memapi_request(m, "POST", path, "application/json", body, strlen(body), &status, &resp, &rl);
		free(path);
		if(rc) {
			json_object *st = resp ? json_tokener_parse(resp) : NULL;
			prd_err_set(err, rc, "%s %s/%s: %s", r->kind, ns ? ns : "", name ? name : "?",
				    st ? get_str(st, "message") : "create failed");
			json_object_put(st);
			free(resp);
			return rc;
		}
		/* Objects loaded from files keep their status (kubectl get -o
		 * yaml output has it); create ignores nothing here, but a
		 * status subresource kind gets it written through /status. */
		free(resp);
	}
	return 0;
}

/* ---- listwatch --------------------------------------------------------- */

/* memapi_request for a listwatch, its CPU time counted as the server's. */
static int lw_request(memapi *m, const char *path, long *status, char **resp, size_t *len)
{
	int64_t t0 = thread_cpu_ns();
	int rc = memapi_request(m, "GET", path, NULL, NULL, 0, status, resp, len);
	atomic_fetch_add(&m->lw_server_ns, (uint64_t)(thread_cpu_ns() - t0));
	return rc;
}

uint64_t memapi_listwatch_server_ns(memapi *m)
{
	return atomic_load(&m->lw_server_ns);
}

/* Lists in pages of MEM_LW_PAGE, as a client pages through a real
 * apiserver: only one page's JSON is in memory at a time (the pages are
 * larger than a client's 500: this store sorts every key for each page,
 * which a real apiserver does not). The list's
 * resourceVersion is the first page's (events after it are replayed by the
 * watch, which the informer takes as no-ops where it has them). */
#define MEM_LW_PAGE 5000
static int mem_lw_list(void *ud, kube_item_fn fn, void *fn_ud, char **rv, prd_err *err)
{
	mem_lw *lw = ud;
	char *base = kube_path(lw->r, NULL, NULL, NULL), *cont = NULL;
	int rc = 0;
	if(!base)
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	if(rv)
		*rv = NULL;
	do {
		char *resp = NULL, *path;
		json_object *list = NULL, *items, *md;
		const char *next;
		size_t i, len;
		long status;
		path = cont ? str_printf("%s?limit=%d&continue=%s", base, MEM_LW_PAGE, cont)
			    : str_printf("%s?limit=%d", base, MEM_LW_PAGE);
		if(!path) {
			rc = prd_err_set(err, PRD_ENOMEM, "out of memory");
			break;
		}
		rc = lw_request(lw->m, path, &status, &resp, &len);
		free(path);
		if(!rc)
			list = json_tokener_parse(resp);
		free(resp);
		if(rc || !list) {
			json_object_put(list);
			rc = prd_err_set(err, rc ? rc : PRD_EINVAL, "in-memory list of %s failed", lw->r->resource);
			break;
		}
		items = json_object_object_get(list, "items");
		for(i = 0; !rc && items && i < json_object_array_length(items); i++)
			rc = fn(fn_ud, json_object_array_get_idx(items, i));
		md = json_object_object_get(list, "metadata");
		if(!rc && rv && !*rv) {
			*rv = str_dup(get_str(md, "resourceVersion"));
			if(!*rv)
				rc = prd_err_set(err, PRD_ENOMEM, "out of memory");
		}
		next = get_str(md, "continue");
		free(cont);
		cont = !rc && next && *next ? str_dup(next) : NULL;
		json_object_put(list);
	} while(!rc && cont);
	free(cont);
	free(base);
	if(rc && rv) {
		free(*rv);
		*rv = NULL;
	}
	return rc;
}

/* mem_lw_list with the items as text (kube_list_text's contract): each
 * page is the JSON text memapi_request answers, split by the scanner;
 * json-c parses a page only when the scanner leaves it to json-c. */
static int mem_lw_page_text(mem_lw *lw, const char *resp, size_t len, kube_src_fn fn, void *fn_ud, char **rv,
			    char **next, prd_err *err)
{
	kube_page pg;
	size_t i;
	int rc = kube__page_scan(resp, len, JSON_TOKENER_DEFAULT_DEPTH, &pg);

	*next = NULL;
	if(rc == KUBE_JS_BAIL) {
		json_object *list = json_tokener_parse(resp), *items, *md;
		const char *cont;
		kube__page_free(&pg);
		if(!list)
			return prd_err_set(err, PRD_EINVAL, "in-memory list of %s failed", lw->r->resource);
		items = json_object_object_get(list, "items");
		rc = 0;
		for(i = 0; !rc && items && i < json_object_array_length(items); i++) {
			kube_item_src src = { NULL, 0, 0, json_object_array_get_idx(items, i) };
			rc = fn(fn_ud, &src);
		}
		md = json_object_object_get(list, "metadata");
		cont = get_str(md, "continue");
		if(!rc && rv && !*rv && !(*rv = str_dup(get_str(md, "resourceVersion"))))
			rc = prd_err_set(err, PRD_ENOMEM, "out of memory");
		if(!rc && cont && *cont && !(*next = str_dup(cont)))
			rc = prd_err_set(err, PRD_ENOMEM, "out of memory");
		json_object_put(list);
		return rc;
	}
	for(i = 0; !rc && i < pg.nitems; i++) {
		kube_item_src src = { pg.items[i].s, pg.items[i].len, JSON_TOKENER_DEFAULT_DEPTH - 2, NULL };
		rc = fn(fn_ud, &src);
	}
	if(!rc && rv && !*rv && !(*rv = str_dup(pg.rv)))
		rc = prd_err_set(err, PRD_ENOMEM, "out of memory");
	if(!rc && pg.cont && *pg.cont) {
		*next = pg.cont;
		pg.cont = NULL;
	}
	kube__page_free(&pg);
	return rc;
}

static int mem_lw_list_text(void *ud, kube_src_fn fn, void *fn_ud, char **rv, prd_err *err)
{
	mem_lw *lw = ud;
	char *base = kube_path(lw->r, NULL, NULL, NULL), *cont = NULL;
	int rc = 0;
	if(!base)
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	if(rv)
		*rv = NULL;
	do {
		char *resp = NULL, *path, *next = NULL;
		size_t len = 0;
		long status;
		path = cont ? str_printf("%s?limit=%d&continue=%s", base, MEM_LW_PAGE, cont)
			    : str_printf("%s?limit=%d", base, MEM_LW_PAGE);
		if(!path) {
			rc = prd_err_set(err, PRD_ENOMEM, "out of memory");
			break;
		}
		rc = lw_request(lw->m, path, &status, &resp, &len);
		free(path);
		if(rc)
			rc = prd_err_set(err, rc, "in-memory list of %s failed", lw->r->resource);
		else
			rc = mem_lw_page_text(lw, resp, len, fn, fn_ud, rv, &next, err);
		free(resp);
		free(cont);
		cont = next;
	} while(!rc && cont);
	free(cont);
	free(base);
	if(rc && rv) {
		free(*rv);
		*rv = NULL;
	}
	return rc;
}

static int mem_lw_watch_text(void *ud, const char *rv, long timeout_s, bool (*cancelled)(void *), void *cancel_ud,
			     kube_src_event_fn fn, void *fn_ud, prd_err *err)
{
	mem_lw *lw = ud;
	uint64_t since = strtoull(rv ? rv : "0", NULL, 10), last = since;
	int64_t deadline = clk_mono(clk_real()) + (timeout_s > 0 ? timeout_s : 300) * PRD_NS_PER_SEC;
	while(clk_mono(clk_real()) < deadline) {
		struct timespec ts = { 0, 5 * 1000 * 1000 };
		int rc = memapi_events_since_text(lw->m, lw->r, NULL, since, fn, fn_ud, &last);
		if(rc == PRD_EGONE)
			return prd_err_set(err, PRD_EGONE, "too old resource version: %llu", (unsigned long long)since);
		if(rc)
			return rc;
		since = last;
		if(cancelled && cancelled(cancel_ud))
			return 0;
		nanosleep(&ts, NULL);
	}
	return 0;
}

static int mem_lw_watch(void *ud, const char *rv, long timeout_s, bool (*cancelled)(void *), void *cancel_ud,
			kube_event_fn fn, void *fn_ud, prd_err *err)
{
	mem_lw *lw = ud;
	uint64_t since = strtoull(rv ? rv : "0", NULL, 10), last = since;
	int64_t deadline = clk_mono(clk_real()) + (timeout_s > 0 ? timeout_s : 300) * PRD_NS_PER_SEC;
	while(clk_mono(clk_real()) < deadline) {
		struct timespec ts = { 0, 5 * 1000 * 1000 };
		int rc = memapi_events_since(lw->m, lw->r, NULL, since, fn, fn_ud, &last);
		if(rc == PRD_EGONE)
			return prd_err_set(err, PRD_EGONE, "too old resource version: %llu", (unsigned long long)since);
		if(rc)
			return rc;
		since = last;
		if(cancelled && cancelled(cancel_ud))
			return 0;
		nanosleep(&ts, NULL);
	}
	return 0;
}

void memapi_listwatch(memapi *m, const kube_resource *r, kube_listwatch *out)
{
	/* One small allocation per listwatch, owned by the store (freed with
	 * it), so callers need no free function. */
	mem_lw *lw = calloc(1, sizeof(*lw));
	memset(out, 0, sizeof(*out));
	if(!lw)
		return;
	lw->m = m;
	lw->r = r;
	pthread_mutex_lock(&m->mu);
	lw->next_owned = m->lws;
	m->lws = lw;
	pthread_mutex_unlock(&m->mu);
	out->list = mem_lw_list;
	out->watch = mem_lw_watch;
	out->list_text = mem_lw_list_text;
	out->watch_text = mem_lw_watch_text;
	out->ud = lw;
}
