/* The booking ledger: one ConfigMap that every instance (replicas and
 * shards) changes with a resourceVersion precondition before it writes a
 * booking into a request's status (docs/operator.md, "The booking
 * ledger").
 *
 * Why: a request's status is the record of its booking, and every
 * instance reads the others' from there (shards.c). But bookings of
 * different requests live in different objects, so no precondition of the
 * apiserver could refuse a status write that was decided on a view that
 * no longer held: an instance paused between its fence check and its
 * write (a stall longer than the lease, inside that one call) landed its
 * booking after another instance, which could not see it, had booked the
 * same room. The ledger is the one object both decisions touch:
 *
 *   - a pass that places anything reads it (one GET) and counts every live
 *     entry it holds as booked, whatever the request's status shows yet;
 *   - before a status that books (or holds room for a plan) is written,
 *     the entries of that pass's bookings go into the ledger with a PUT
 *     conditional on the version the pass read. If anyone changed it
 *     meanwhile, the PUT is refused, and those status writes are not sent:
 *     their requests are decided again on the next pass, which reads the
 *     ledger anew. A late PUT meets the same precondition.
 *
 * So of two decisions made on one version of the ledger, one lands and the
 * other is refused, however long either took. An entry is the booking's
 * room per node (what the local store books) and when it ends; entries go
 * when the status that ends the booking is written, or when they expire.
 * Only the room is recorded: DRA devices are counted anew on the node, as
 * for bookings read from statuses.
 *
 * An entry also goes when its request is deleted: at once when the
 * instance that booked it sees the deletion (its own rows go then), and
 * by anyone once the request has been absent from its cache for longer
 * than PR_LEDGER_GONE_GRACE_NS after the entry was written (the writer
 * may be gone; a request just created may not have reached this cache
 * yet, which the grace covers).
 *
 * Entries: data key = the request's uid; value = JSON
 * {"request":"ns/name","at":"<unix ns>","until":"<unix ns>","nodes":{"<node>":{<resources>}}}
 * where <resources> is the local store's resources JSON for that node and
 * "at" when it was written.
 *
 * Layout. A ConfigMap holds at most 1 MiB of data, about 10,000
 * node-bookings; one object for all of them held every booking of every
 * instance once they passed it. So the ledger is a head (the ConfigMap
 * named above, the one every decision writes conditionally) and overflow
 * objects it names under PR_LEDGER_OBJECTS_KEY: ConfigMaps created
 * immutable, with generated names, that hold whole entries and are never
 * changed. A write lays the entries out again (pr_ledger_layout): overflow
 * objects whose entries are unchanged stay; the others' remaining entries,
 * the new ones and the head's go to the head while they fit in
 * l->inline_max, else into new overflow objects of up to l->obj_max. The
 * new objects are created first, then the head is written with the same
 * precondition as ever, then the replaced objects are deleted. So the
 * head's version still decides everything: a write refused on it leaves
 * only objects nothing names (deleted at once, or on a new term), and a
 * reader that finds a named object gone read a head that has moved since
 * (it reads again). A reader fetches an overflow object once (they never
 * change); a pass that books reads the head and what is new.
 *
 * A ledger of one object (under l->inline_max of entries) is the format
 * that came before, and an old ledger is read as a head with no overflow
 * objects: it is carried on as it is and spills when it grows. One entry
 * must fit one object: a booking whose entry is over l->obj_max is refused
 * before it is made (pr__ledger_entry_bytes, host.c), with a condition. */
#include "classes/vocab.h"
#include "ops/log.h"
#include "ops/metrics.h"
#include "provreq/ctl_int.h"
#include "provreq/ledger_layout.h"
#include "util/assert.h"
#include "util/buf.h"
#include "util/str.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PR_LEDGER_GONE_GRACE_NS (5 * PRD_NS_PER_SEC)
/* The head's data key naming its overflow objects, comma-separated (not a
 * uid, so no entry; a version that knew no overflow kept it untouched). */
#define PR_LEDGER_OBJECTS_KEY "provreqd.io.objects"
/* The label on overflow objects: the head's name. */
#define PR_LEDGER_LABEL "provreqd.io/booking-ledger"
/* Reads that met a named overflow object gone before one gives up. */
#define PR_LEDGER_READ_TRIES 4

void pr__ledger_init(pr_ctl *c, const char *where, size_t obj_max)
{
	pr_ledger *l = &c->ledger;
	const char *slash = where ? strchr(where, '/') : NULL;
	memset(l, 0, sizeof(*l));
	hmap_init(&l->uids, NULL);
	hmap_init(&l->gone, NULL);
	hmap_init(&l->where, NULL);
	hmap_init(&l->cache, pr__put_json);
	l->obj_max = obj_max ? obj_max : PR_LEDGER_OBJECT_MAX;
	/* The head is written by every pass that books: keep it small. */
	l->inline_max = l->obj_max / 8;
	if(!slash || slash == where || !slash[1])
		return;
	snprintf(l->ns, sizeof(l->ns), "%.*s", (int)(slash - where), where);
	snprintf(l->name, sizeof(l->name), "%s", slash + 1);
	l->on = true;
}

static void objs_clear(pr_ledger *l)
{
	size_t i;
	for(i = 0; i < l->nobjs; i++) {
		free(l->objs[i].name);
		json_object_put(l->objs[i].data);
	}
	free(l->objs);
	l->objs = NULL;
	l->nobjs = 0;
	hmap_free(&l->where);
	hmap_init(&l->where, NULL);
}

void pr__ledger_free(pr_ctl *c)
{
	pr_ledger *l = &c->ledger;
	hmap_free(&l->uids);
	hmap_free(&l->gone);
	objs_clear(l);
	hmap_free(&l->where);
	hmap_free(&l->cache);
	json_object_put(l->data);
	free(l->rv);
	l->data = NULL;
	l->rv = NULL;
}

static void path_of(const pr_ledger *l, char *path, size_t len, bool item)
{
	if(item)
		snprintf(path, len, "/api/v1/namespaces/%s/configmaps/%s", l->ns, l->name);
	else
		snprintf(path, len, "/api/v1/namespaces/%s/configmaps", l->ns);
}

/* An overflow object's data: from the cache, else fetched (and cached).
 * PRD_ENOTFOUND: it is gone (the head named it in a version since
 * replaced). */
static int obj_data(pr_ctl *c, const char *name, json_object **out, prd_err *err)
{
	pr_ledger *l = &c->ledger;
	json_object *o = NULL, *d;
	char path[600];
	int rc;
	if((*out = hmap_get(&l->cache, name)))
		return 0;
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s/configmaps/%s", l->ns, name);
	if((rc = kube_api_call(&c->api, "GET", path, NULL, NULL, &o, NULL, err))) {
		json_object_put(o);
		return rc;
	}
	c->stats.ledger_objects_read++;
	d = json_object_object_get(o, "data");
	d = d && json_object_is_type(d, json_type_object) ? json_object_get(d) : json_object_new_object();
	json_object_put(o);
	if(!d || hmap_put(&l->cache, name, d)) {
		json_object_put(d);
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	}
	*out = d;
	return 0;
}

/* The cache keeps only the objects the head names now. (An object is
 * known by its name: one deleted and a new one given the same generated
 * name while this instance still named the old in its cache would be
 * taken for the old. The apiserver's generated names have five random
 * characters, 27^5 of them, and a name leaves the cache with the first
 * read of a head that no longer names it.) */
static void cache_trim(pr_ledger *l)
{
	hmap keep;
	size_t i;
	hmap_init(&keep, pr__put_json);
	for(i = 0; i < l->nobjs; i++)
		if(hmap_put(&keep, l->objs[i].name, json_object_get(l->objs[i].data)))
			return; /* (out of memory: the old cache stays, correct if larger) */
	hmap_free(&l->cache);
	l->cache = keep;
}

static void ledger_sizes(pr_ctl *c, size_t bytes)
{
	c->stats.ledger_objects = 1 + c->ledger.nobjs;
	c->stats.ledger_bytes = bytes;
	metrics_gauge_set(M_LEDGER_OBJECTS, NULL, (double)c->stats.ledger_objects);
	metrics_gauge_set(M_LEDGER_BYTES, NULL, (double)bytes);
}

/* The ledger's entries (the head's, then each overflow object's) into
 * l->data, with l->objs and l->where. PRD_ENOTFOUND: a named object is
 * gone (read the head again). */
static int assemble(pr_ctl *c, json_object *head, prd_err *err)
{
	pr_ledger *l = &c->ledger;
	json_object *names = NULL;
	const char *p;
	size_t bytes = 0;
	int rc = 0;
	objs_clear(l);
	json_object_put(l->data);
	if(!(l->data = json_object_new_object()))
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	if(head) {
		json_object_object_foreach(head, uid, val)
		{
			if(!strcmp(uid, PR_LEDGER_OBJECTS_KEY)) {
				names = val;
				continue;
			}
			json_object_object_add(l->data, uid, json_object_get(val));
			bytes += pr__ledger_entry_size(uid, val);
		}
	}
	for(p = names ? json_object_get_string(names) : NULL; p && *p && !rc;) {
		size_t len = strcspn(p, ",");
		char name[254];
		json_object *d = NULL;
		pr_ledger_obj *v;
		if(len && len < sizeof(name)) {
			memcpy(name, p, len);
			name[len] = 0;
			if(!(rc = obj_data(c, name, &d, err))) {
				if(!(v = realloc(l->objs, (l->nobjs + 1) * sizeof(*v))))
					return prd_err_set(err, PRD_ENOMEM, "out of memory");
				l->objs = v;
				v = &l->objs[l->nobjs];
				v->name = str_dup(name);
				v->data = json_object_get(d);
				v->bytes = 0;
				if(!v->name) {
					json_object_put(d);
					return prd_err_set(err, PRD_ENOMEM, "out of memory");
				}
				l->nobjs++;
				json_object_object_foreach(d, uid, val)
				{
					/* One entry per request: the head's (or the
					 * first object's) stands. */
					v->bytes += pr__ledger_entry_size(uid, val);
					if(json_object_object_get_ex(l->data, uid, NULL))
						continue;
					json_object_object_add(l->data, uid, json_object_get(val));
					hmap_put(&l->where, uid, (void *)(uintptr_t)l->nobjs);
					bytes += pr__ledger_entry_size(uid, val);
				}
			}
		}
		p += len;
		p += *p == ',';
	}
	if(rc)
		return rc;
	cache_trim(l);
	ledger_sizes(c, bytes);
	return 0;
}

int pr__ledger_read(pr_ctl *c, prd_err *err)
{
	pr_ledger *l = &c->ledger;
	json_object *o = NULL, *data;
	const char *rv;
	char path[600];
	int rc, tries;
	hmap_free(&l->uids);
	hmap_init(&l->uids, NULL);
	l->read_pass = c->stats.passes + 1;
	path_of(l, path, sizeof(path), true);
	for(tries = 0;; tries++) {
		o = NULL;
		rc = kube_api_call(&c->api, "GET", path, NULL, NULL, &o, NULL, err);
		free(l->rv);
		l->rv = NULL;
		l->exists = false;
		if(rc == PRD_ENOTFOUND) {
			json_object_put(o);
			return assemble(c, NULL, err);
		}
		if(rc) {
			json_object_put(o);
			l->read_pass = 0;
			return rc;
		}
		c->stats.ledger_objects_read++;
		rv = json_object_get_string(json_object_object_get(json_object_object_get(o, "metadata"), "resourceVersion"));
		data = json_object_object_get(o, "data");
		if(!rv || !(l->rv = str_dup(rv))) {
			json_object_put(o);
			l->read_pass = 0;
			return prd_err_set(err, PRD_EINVAL, "the booking ledger %s/%s has no resourceVersion", l->ns,
					   l->name);
		}
		l->exists = true;
		rc = assemble(c, data && json_object_is_type(data, json_type_object) ? data : NULL, err);
		json_object_put(o);
		if(rc != PRD_ENOTFOUND || tries + 1 >= PR_LEDGER_READ_TRIES)
			break;
	}
	if(rc)
		l->read_pass = 0;
	return rc;
}

/* An entry's parts; false when it is not one provreqd wrote. */
static bool entry_parts(const char *text, json_object **out, int64_t *until, json_object **nodes, int64_t *at)
{
	json_object *e = text ? json_tokener_parse(text) : NULL, *u, *n, *a;
	if(!e || !json_object_is_type(e, json_type_object) || !json_object_object_get_ex(e, "until", &u) ||
	   !json_object_object_get_ex(e, "nodes", &n) || !json_object_is_type(n, json_type_object) ||
	   str_to_int64(json_object_get_string(u), until)) {
		json_object_put(e);
		return false;
	}
	if(at && (!json_object_object_get_ex(e, "at", &a) || str_to_int64(json_object_get_string(a), at)))
		*at = 0;
	*out = e;
	*nodes = n;
	return true;
}

static int row_cmp(const void *key, const void *row)
{
	return strcmp(key, ((const state_booking *)row)->request_uid);
}

void pr__ledger_gone(pr_ctl *c, const char *uid)
{
	if(c->ledger.on && c->ledger.data && json_object_object_get_ex(c->ledger.data, uid, NULL))
		hmap_put(&c->ledger.gone, uid, NULL);
}

/* One entry's nodes as booking rows, appended to *v (*nv of *cap). */
static int append_rows(const char *uid, json_object *nodes, int64_t until, state_booking **v, size_t *nv, size_t *cap)
{
	json_object_object_foreach(nodes, node, res)
	{
		state_booking *b;
		if(*nv == *cap) {
			state_booking *w = realloc(*v, (*cap = *cap ? *cap * 2 : 16) * sizeof(*w));
			if(!w)
				return PRD_ENOMEM;
			*v = w;
		}
		b = &(*v)[(*nv)++];
		memset(b, 0, sizeof(*b));
		b->request_uid = str_dup(uid);
		b->node_name = str_dup(node);
		b->resources_json = str_dup(json_object_to_json_string_ext(res, JSON_C_TO_STRING_PLAIN));
		b->expires_ns = until;
		if(!b->request_uid || !b->node_name || !b->resources_json)
			return PRD_ENOMEM;
	}
	return 0;
}

int pr__ledger_entry_rows(pr_ctl *c, const char *uid, state_booking **out, size_t *n)
{
	json_object *val, *e = NULL, *nodes;
	int64_t until = 0;
	size_t cap = 0;
	int rc = 0;
	*out = NULL;
	*n = 0;
	if(!c->ledger.data || !json_object_object_get_ex(c->ledger.data, uid, &val) ||
	   !json_object_is_type(val, json_type_string) ||
	   !entry_parts(json_object_get_string(val), &e, &until, &nodes, NULL))
		return 0;
	if(until > c->now && (rc = append_rows(uid, nodes, until, out, n, &cap))) {
		state_booking_list_free(*out, *n);
		*out = NULL;
		*n = 0;
	}
	json_object_put(e);
	return rc;
}

int pr__ledger_rows(pr_ctl *c, const state_booking *own, size_t nown, const hmap *live, state_booking **out,
		    size_t *n)
{
	pr_ledger *l = &c->ledger;
	state_booking *v = NULL;
	size_t nv = 0, cap = 0;
	*out = NULL;
	*n = 0;
	/* bsearch below: the store lists its rows by request uid. */
	for(size_t i = 1; PRD_ASSERTS_ON && i < nown; i++)
		PRD_ASSERT(strcmp(own[i - 1].request_uid, own[i].request_uid) <= 0);
	if(!l->data)
		return 0;
	json_object_object_foreach(l->data, uid, val)
	{
		json_object *e, *nodes;
		int64_t until, at = 0;
		if(!json_object_is_type(val, json_type_string) ||
		   !entry_parts(json_object_get_string(val), &e, &until, &nodes, &at))
			continue;
		/* Its request was deleted: free now (and dropped with the next
		 * write). */
		if(hmap_has(&l->gone, uid) ||
		   (live && !hmap_has(live, uid) && at + PR_LEDGER_GONE_GRACE_NS < c->now)) {
			hmap_put(&l->gone, uid, NULL);
			json_object_put(e);
			continue;
		}
		/* Own rows in the local store are this instance's freshest word
		 * on its booking (a replaced one included). */
		if(until <= c->now || (nown && bsearch(uid, own, nown, sizeof(*own), row_cmp))) {
			json_object_put(e);
			continue;
		}
		if(hmap_put(&l->uids, uid, NULL) || append_rows(uid, nodes, until, &v, &nv, &cap)) {
			json_object_put(e);
			goto oom;
		}
		json_object_put(e);
	}
	*out = v;
	*n = nv;
	return 0;
oom:
	state_booking_list_free(v, nv);
	return PRD_ENOMEM;
}

bool pr__ledger_lists(const pr_ctl *c, const char *uid)
{
	return c->ledger.data && json_object_object_get_ex(c->ledger.data, uid, NULL);
}

bool pr__ledger_has(const pr_ctl *c, const char *uid)
{
	return c->ledger.on && hmap_has(&c->ledger.uids, uid);
}

/* The entry of a request's booking as the local store has it; NULL when
 * it holds nothing there. */
static char *entry_of(pr_ctl *c, const pr_ledger_change *ch)
{
	state_booking *b = NULL;
	size_t nb = 0, i;
	int64_t until = 0;
	json_object *e, *nodes;
	char *out = NULL, u[32];
	if(!c->db || state_booking_list_request(c->db, ch->uid, &b, &nb, NULL) || !nb) {
		state_booking_list_free(b, nb);
		return NULL;
	}
	e = json_object_new_object();
	nodes = json_object_new_object();
	for(i = 0; i < nb; i++) {
		json_object *r = json_tokener_parse(b[i].resources_json);
		if(b[i].expires_ns > until)
			until = b[i].expires_ns;
		if(r)
			json_object_object_add(nodes, b[i].node_name, r);
	}
	snprintf(u, sizeof(u), "%lld", (long long)until);
	json_object_object_add(e, "request", json_object_new_string(ch->key));
	{
		char at[32];
		snprintf(at, sizeof(at), "%lld", (long long)c->now);
		json_object_object_add(e, "at", json_object_new_string(at));
	}
	json_object_object_add(e, "until", json_object_new_string(u));
	json_object_object_add(e, "nodes", nodes);
	if(until > c->now)
		out = str_dup(json_object_to_json_string_ext(e, JSON_C_TO_STRING_PLAIN));
	json_object_put(e);
	state_booking_list_free(b, nb);
	return out;
}

size_t pr__ledger_entry_bytes(pr_ctl *c, const char *uid, const char *key)
{
	pr_ledger_change ch;
	char *entry;
	size_t n;
	if(!c->ledger.on)
		return 0;
	memset(&ch, 0, sizeof(ch));
	ch.uid = uid;
	ch.key = key;
	ch.add = true;
	if(!(entry = entry_of(c, &ch)))
		return 0;
	n = strlen(uid) + strlen(entry);
	free(entry);
	return n;
}

/* Two entries that differ in when they were written only. */
static bool same_entry(const char *a, const char *b)
{
	json_object *x = json_tokener_parse(a), *y = json_tokener_parse(b);
	bool same;
	if(x)
		json_object_object_del(x, "at");
	if(y)
		json_object_object_del(y, "at");
	same = x && y && json_object_equal(x, y);
	json_object_put(x);
	json_object_put(y);
	return same;
}

/* Delete an overflow object (best effort: one left is deleted on a new
 * term, ledger_sweep). */
static void obj_delete(pr_ctl *c, const char *name)
{
	pr_ledger *l = &c->ledger;
	char path[600];
	prd_err e;
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s/configmaps/%s", l->ns, name);
	if(kube_api_call(&c->api, "DELETE", path, NULL, NULL, NULL, NULL, &e) && e.code != PRD_ENOTFOUND)
		log_warn("cannot delete an object of the booking ledger no longer in use; it is deleted on the next "
			 "leader term",
			 "configmap", name, "namespace", l->ns, "error", e.msg);
}

/* Create an overflow object holding `data` (borrowed); *name (caller
 * frees) is the name the apiserver gave it. */
static int obj_create(pr_ctl *c, json_object *data, char **name, prd_err *err)
{
	pr_ledger *l = &c->ledger;
	json_object *body = json_object_new_object(), *md = json_object_new_object(), *answer = NULL;
	json_object *labels = json_object_new_object();
	char path[600], gen[300];
	int rc, tries = 0;
	snprintf(gen, sizeof(gen), "%.240s-", l->name);
	json_object_object_add(md, "generateName", json_object_new_string(gen));
	json_object_object_add(md, "namespace", json_object_new_string(l->ns));
	json_object_object_add(labels, "app.kubernetes.io/managed-by", json_object_new_string("provreqd"));
	json_object_object_add(labels, PR_LEDGER_LABEL, json_object_new_string(l->name));
	json_object_object_add(md, "labels", labels);
	json_object_object_add(body, "apiVersion", json_object_new_string("v1"));
	json_object_object_add(body, "kind", json_object_new_string("ConfigMap"));
	json_object_object_add(body, "metadata", md);
	json_object_object_add(body, "immutable", json_object_new_boolean(1));
	json_object_object_add(body, "data", json_object_get(data));
	path_of(l, path, sizeof(path), false);
	/* A generated name may be taken (the apiserver says AlreadyExists):
	 * another is generated. */
	for(;;) {
		rc = kube_api_call(&c->api, "POST", path, NULL, body, &answer, NULL, err);
		if(rc != PRD_EEXIST || ++tries >= 3)
			break;
		json_object_put(answer);
		answer = NULL;
	}
	json_object_put(body);
	*name = rc ? NULL
		   : str_dup(json_object_get_string(
			     json_object_object_get(json_object_object_get(answer, "metadata"), "name")));
	json_object_put(answer);
	if(!rc && !*name)
		rc = prd_err_set(err, PRD_ENOMEM, "out of memory");
	return rc;
}

/* Write `data` (taken): the new overflow objects its layout needs, then
 * the head (PUT, POST when absent) with the version read as the
 * precondition, then delete the objects it no longer names. `term` (NULL
 * none) is noted on the head, which makes the write a change even when the
 * data is not. On success the ledger is `data` at the new version. */
/* The head ConfigMap to write: `data` (a reference is taken), the version
 * last read as the precondition, and the leader term when there is one. */
static json_object *head_body(const pr_ledger *l, json_object *data, const char *term)
{
	json_object *body = json_object_new_object(), *md = json_object_new_object(),
		    *labels = json_object_new_object();
	json_object_object_add(md, "name", json_object_new_string(l->name));
	json_object_object_add(md, "namespace", json_object_new_string(l->ns));
	if(l->exists)
		json_object_object_add(md, "resourceVersion", json_object_new_string(l->rv));
	json_object_object_add(labels, "app.kubernetes.io/managed-by", json_object_new_string("provreqd"));
	json_object_object_add(md, "labels", labels);
	if(term) {
		json_object *ann = json_object_new_object();
		json_object_object_add(ann, "provreqd.io/leader-term", json_object_new_string(term));
		json_object_object_add(md, "annotations", ann);
	}
	json_object_object_add(body, "apiVersion", json_object_new_string("v1"));
	json_object_object_add(body, "kind", json_object_new_string("ConfigMap"));
	json_object_object_add(body, "metadata", md);
	json_object_object_add(body, "data", json_object_get(data));
	return body;
}

/* The head write was refused (rc): the next pass that places reads the
 * ledger anew; a conflict is counted and said. */
static void head_refused(pr_ctl *c, int rc, const prd_err *err)
{
	pr_ledger *l = &c->ledger;
	l->read_pass = 0;
	if(rc == PRD_ECONFLICT)
		l->conflict_pass = c->stats.passes + 1;
	c->stats.ledger_conflicts += rc == PRD_ECONFLICT;
	metrics_counter_add(M_LEDGER_WRITES, METRICS_L(rc == PRD_ECONFLICT ? "conflict" : "error"), 1);
	if(rc == PRD_ECONFLICT)
		log_info("the booking ledger changed since this pass read it; its new bookings are decided again",
			 "ledger", l->name, "namespace", l->ns);
	else
		log_error("cannot write the booking ledger; its new bookings are decided again", "ledger", l->name,
			  "namespace", l->ns, "error", err->msg);
}

/* After the head was written: the objects it no longer names go, the new
 * ones (made[], taken) are known and cached. */
static void objs_written(pr_ctl *c, const pr_ledger_layout *y, char **made, size_t nmade)
{
	pr_ledger *l = &c->ledger;
	pr_ledger_obj *v = calloc(l->nobjs + nmade + 1, sizeof(*v));
	size_t i, nv = 0, bytes = y->head_bytes;
	for(i = 0; i < l->nobjs; i++) {
		if(!y->keep[i]) {
			if(pr__may_act(c))
				obj_delete(c, l->objs[i].name);
			continue;
		}
		if(v) {
			v[nv].name = str_dup(l->objs[i].name);
			v[nv].data = json_object_get(l->objs[i].data);
			v[nv++].bytes = l->objs[i].bytes;
		}
	}
	for(i = 0; v && i < nmade; i++) {
		v[nv].name = made[i];
		made[i] = NULL;
		v[nv].data = json_object_get(y->fresh[i]);
		v[nv++].bytes = y->fresh_bytes[i];
	}
	objs_clear(l);
	l->objs = v;
	l->nobjs = v ? nv : 0;
	for(i = 0; i < l->nobjs; i++) {
		json_object_object_foreach(l->objs[i].data, uid, val)
		{
			(void)val;
			hmap_put(&l->where, uid, (void *)(uintptr_t)(i + 1));
		}
		bytes += l->objs[i].bytes;
		if(!hmap_has(&l->cache, l->objs[i].name))
			hmap_put(&l->cache, l->objs[i].name, json_object_get(l->objs[i].data));
	}
	cache_trim(l);
	ledger_sizes(c, bytes);
	if(!v) {
		/* (Out of memory: read everything again.) */
		l->read_pass = 0;
		hmap_free(&l->cache);
		hmap_init(&l->cache, pr__put_json);
	}
}

static int ledger_put(pr_ctl *c, json_object *data, const char *term, prd_err *err)
{
	pr_ledger *l = &c->ledger;
	json_object *body = NULL, *answer = NULL;
	pr_ledger_layout y;
	char path[600], **made = NULL;
	const char *rv;
	size_t i, nmade = 0, sent = 0;
	buf names;
	int rc = 0;
	buf_init(&names);
	if(!pr__may_act(c)) {
		json_object_put(data);
		return prd_err_set(err, PRD_EAGAIN, "fenced: this replica may no longer hold the lease");
	}
	if(pr__ledger_layout_of(l, data, &y) || (y.nfresh && !(made = calloc(y.nfresh, sizeof(*made))))) {
		rc = prd_err_set(err, PRD_ENOMEM, "out of memory");
		goto fail;
	}
	for(i = 0; i < l->nobjs; i++)
		if(y.keep[i])
			buf_printf(&names, "%s%s", names.len ? "," : "", l->objs[i].name);
	for(i = 0; i < y.nfresh && !rc; i++) {
		if((rc = obj_create(c, y.fresh[i], &made[i], err)))
			break;
		nmade++;
		sent += y.fresh_bytes[i];
		buf_printf(&names, "%s%s", names.len ? "," : "", made[i]);
	}
	if(rc)
		goto fail;
	if(names.failed) {
		rc = prd_err_set(err, PRD_ENOMEM, "out of memory");
		goto fail;
	}
	if(names.len)
		json_object_object_add(y.head, PR_LEDGER_OBJECTS_KEY, json_object_new_string(names.data));
	body = head_body(l, y.head, term);
	if(!pr__may_act(c)) {
		rc = prd_err_set(err, PRD_EAGAIN, "fenced: this replica may no longer hold the lease");
		goto fail;
	}
	path_of(l, path, sizeof(path), l->exists);
	rc = kube_api_call(&c->api, l->exists ? "PUT" : "POST", path, NULL, body, &answer, NULL, err);
	if(rc == PRD_EEXIST)
		rc = PRD_ECONFLICT;
	if(rc) {
		head_refused(c, rc, err);
		goto fail;
	}
	rv = json_object_get_string(json_object_object_get(json_object_object_get(answer, "metadata"), "resourceVersion"));
	free(l->rv);
	l->rv = rv ? str_dup(rv) : NULL;
	l->exists = l->rv != NULL;
	if(!l->exists)
		l->read_pass = 0;
	c->stats.ledger_objects_written += 1 + nmade;
	c->stats.ledger_bytes_written += sent + y.head_bytes;
	objs_written(c, &y, made, nmade);
	json_object_put(l->data);
	l->data = data;
	json_object_put(answer);
	json_object_put(body);
	buf_free(&names);
	pr__ledger_layout_free(&y);
	for(i = 0; i < nmade; i++)
		free(made[i]);
	free(made);
	return 0;
fail:
	/* Nothing names the objects made for this write. */
	for(i = 0; i < nmade; i++) {
		obj_delete(c, made[i]);
		free(made[i]);
	}
	free(made);
	json_object_put(answer);
	json_object_put(body);
	json_object_put(data);
	buf_free(&names);
	pr__ledger_layout_free(&y);
	return rc;
}

/* Overflow objects no head names (a write refused after it made them, or
 * cut off before it deleted those it replaced): listed before the head is
 * written, deleted once it is, when the written head does not name them.
 * An object listed was created before that write, so the write that made
 * it read an older head than the one written: its head write is refused
 * (or landed before, and then the head read names it). */
static int ledger_list_objects(pr_ctl *c, char ***out, size_t *n)
{
	pr_ledger *l = &c->ledger;
	json_object *o = NULL, *items;
	char path[700];
	prd_err e;
	size_t i, len;
	*out = NULL;
	*n = 0;
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s/configmaps?labelSelector=provreqd.io%%2Fbooking-ledger%%3D%s",
		 l->ns, l->name);
	if(kube_api_call(&c->api, "GET", path, NULL, NULL, &o, NULL, &e)) {
		json_object_put(o);
		return e.code;
	}
	items = json_object_object_get(o, "items");
	len = items && json_object_is_type(items, json_type_array) ? json_object_array_length(items) : 0;
	if(len && !(*out = calloc(len, sizeof(**out)))) {
		json_object_put(o);
		return PRD_ENOMEM;
	}
	for(i = 0; i < len; i++) {
		const char *name = json_object_get_string(json_object_object_get(
			json_object_object_get(json_object_array_get_idx(items, i), "metadata"), "name"));
		if(name && strcmp(name, l->name) && ((*out)[*n] = str_dup(name)))
			(*n)++;
	}
	json_object_put(o);
	return 0;
}

static void ledger_sweep(pr_ctl *c, char **listed, size_t n)
{
	pr_ledger *l = &c->ledger;
	size_t i, k, swept = 0;
	for(i = 0; i < n; i++) {
		bool named = false;
		for(k = 0; k < l->nobjs && !named; k++)
			named = !strcmp(l->objs[k].name, listed[i]);
		if(!named && pr__may_act(c)) {
			obj_delete(c, listed[i]);
			swept++;
		}
	}
	if(swept)
		log_info("booking ledger: objects no head names deleted", "ledger", l->name, "namespace", l->ns,
			 "objects", LOGI(swept));
}

int pr__ledger_fence(pr_ctl *c, prd_err *err)
{
	pr_ledger *l = &c->ledger;
	json_object *data = NULL;
	char **listed = NULL;
	size_t nlisted = 0, i;
	int rc, tries;
	if(!l->on)
		return 0;
	for(tries = 0; tries < 2; tries++) {
		/* (Listed before the read and the write: see ledger_sweep.) */
		for(i = 0; i < nlisted; i++)
			free(listed[i]);
		free(listed);
		if(ledger_list_objects(c, &listed, &nlisted)) {
			listed = NULL;
			nlisted = 0;
		}
		if((rc = pr__ledger_read(c, err)))
			break;
		if(json_object_deep_copy(l->data, &data, NULL)) {
			rc = prd_err_set(err, PRD_ENOMEM, "out of memory");
			break;
		}
		rc = ledger_put(c, data, c->term[0] ? c->term : "-", err);
		data = NULL;
		if(rc != PRD_ECONFLICT)
			break;
	}
	if(rc == 0) {
		metrics_counter_add(M_LEDGER_WRITES, METRICS_L("term"), 1);
		ledger_sweep(c, listed, nlisted);
	}
	for(i = 0; i < nlisted; i++)
		free(listed[i]);
	free(listed);
	return rc;
}

int pr__ledger_commit(pr_ctl *c, pr_ledger_change *ch, size_t n, prd_err *err)
{
	pr_ledger *l = &c->ledger;
	json_object *data = NULL;
	bool changed = false, adds = false;
	size_t i;
	int rc;
	if(!l->on || (!n && !hmap_len(&l->gone)))
		return 0;
	/* Once a write of this pass was refused, every booking the pass
	 * decided was decided on a version that no longer holds: none is
	 * recorded (their statuses are not written; the next pass decides
	 * them again on the ledger read anew). Removals go on. */
	if(l->conflict_pass == c->stats.passes + 1)
		for(i = 0; i < n; i++)
			if(ch[i].add) {
				c->stats.ledger_conflicts++;
				metrics_counter_add(M_LEDGER_WRITES, METRICS_L("conflict"), 1);
				return prd_err_set(err, PRD_ECONFLICT,
						   "the booking ledger changed since this pass read it");
			}
	/* A pass that placed nothing has not read it: removals are safe on
	 * any version, and a booking made without placing (rare) is checked
	 * against the version read now. */
	if(l->read_pass != c->stats.passes + 1 && (rc = pr__ledger_read(c, err)))
		return rc;
	if(json_object_deep_copy(l->data, &data, NULL))
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	/* Expired entries go with every write. */
	{
		char **drop = NULL;
		size_t nd = 0, k;
		json_object_object_foreach(data, uid, val)
		{
			json_object *e, *nodes;
			int64_t until = 0;
			bool mine = json_object_is_type(val, json_type_string) &&
				    entry_parts(json_object_get_string(val), &e, &until, &nodes, NULL);
			char **w;
			if(mine)
				json_object_put(e);
			if(!mine || (until > c->now && !hmap_has(&l->gone, uid)))
				continue;
			if(!(w = realloc(drop, (nd + 1) * sizeof(*w))))
				break;
			drop = w;
			if(!(drop[nd] = str_dup(uid)))
				break;
			nd++;
		}
		for(k = 0; k < nd; k++) {
			json_object_object_del(data, drop[k]);
			free(drop[k]);
		}
		changed |= nd > 0;
		free(drop);
	}
	for(i = 0; i < n; i++) {
		char *entry = ch[i].add ? entry_of(c, &ch[i]) : NULL;
		/* One entry must fit one object (host.c refuses such a
		 * booking before it is made; this is the backstop): not
		 * recorded, and its status is not written. */
		if(entry && strlen(ch[i].uid) + strlen(entry) > l->obj_max) {
			log_error("a booking is too large for one object of the booking ledger; not recorded", "request",
				  ch[i].key, "bytes", LOGI((long long)strlen(entry)));
			ch[i].too_large = true;
			free(entry);
			continue;
		}
		if(entry) {
			json_object *have = json_object_object_get(data, ch[i].uid);
			if(!have || !same_entry(json_object_get_string(have), entry)) {
				json_object_object_add(data, ch[i].uid, json_object_new_string(entry));
				changed = adds = true;
			}
			free(entry);
		} else if(json_object_object_get_ex(data, ch[i].uid, NULL)) {
			json_object_object_del(data, ch[i].uid);
			changed = true;
		}
	}
	if(!changed) {
		json_object_put(data);
		return 0;
	}
	if((rc = ledger_put(c, data, NULL, err)))
		return rc;
	hmap_free(&l->gone);
	hmap_init(&l->gone, NULL);
	c->stats.ledger_writes++;
	metrics_counter_add(M_LEDGER_WRITES, METRICS_L(adds ? "booked" : "released"), 1);
	return 0;
}

/* Does a status patch change the request's booking? *add: it records one
 * (else it removes it). */
bool pr__ledger_change_of(json_object *patch_or_details, bool is_details, bool *add)
{
	json_object *d = patch_or_details, *v;
	if(!is_details)
		d = json_object_object_get(json_object_object_get(patch_or_details, "status"), "provisioningClassDetails");
	if(!d || !json_object_object_get_ex(d, PR_DETAIL_BOOKING, &v))
		return false;
	*add = v && json_object_is_type(v, json_type_string) && json_object_get_string_len(v) > 0;
	return true;
}

void pr__ledger_tidy(pr_ctl *c)
{
	prd_err e;
	if(!c->ledger.on || !hmap_len(&c->ledger.gone) || c->fenced)
		return;
	if(pr__ledger_commit(c, NULL, 0, &e) == 0)
		log_debug("booking ledger: entries of deleted requests removed");
}
