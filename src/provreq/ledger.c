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
 * "at" when it was written. */
#include "classes/vocab.h"
#include "ops/log.h"
#include "ops/metrics.h"
#include "provreq/ctl_int.h"
#include "util/str.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PR_LEDGER_GONE_GRACE_NS (5 * PRD_NS_PER_SEC)

void pr__ledger_init(pr_ctl *c, const char *where)
{
	pr_ledger *l = &c->ledger;
	const char *slash = where ? strchr(where, '/') : NULL;
	memset(l, 0, sizeof(*l));
	hmap_init(&l->uids, NULL);
	hmap_init(&l->gone, NULL);
	if(!slash || slash == where || !slash[1])
		return;
	snprintf(l->ns, sizeof(l->ns), "%.*s", (int)(slash - where), where);
	snprintf(l->name, sizeof(l->name), "%s", slash + 1);
	l->on = true;
}

void pr__ledger_free(pr_ctl *c)
{
	pr_ledger *l = &c->ledger;
	hmap_free(&l->uids);
	hmap_free(&l->gone);
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

int pr__ledger_read(pr_ctl *c, prd_err *err)
{
	pr_ledger *l = &c->ledger;
	json_object *o = NULL, *data;
	const char *rv;
	char path[600];
	int rc;
	hmap_free(&l->uids);
	hmap_init(&l->uids, NULL);
	l->read_pass = c->stats.passes + 1;
	path_of(l, path, sizeof(path), true);
	rc = kube_api_call(&c->api, "GET", path, NULL, NULL, &o, NULL, err);
	json_object_put(l->data);
	free(l->rv);
	l->data = NULL;
	l->rv = NULL;
	l->exists = false;
	if(rc == PRD_ENOTFOUND) {
		json_object_put(o);
		l->data = json_object_new_object();
		return l->data ? 0 : prd_err_set(err, PRD_ENOMEM, "out of memory");
	}
	if(rc) {
		json_object_put(o);
		l->read_pass = 0;
		return rc;
	}
	rv = json_object_get_string(json_object_object_get(json_object_object_get(o, "metadata"), "resourceVersion"));
	data = json_object_object_get(o, "data");
	if(!rv || !(l->rv = str_dup(rv))) {
		json_object_put(o);
		l->read_pass = 0;
		return prd_err_set(err, PRD_EINVAL, "the booking ledger %s/%s has no resourceVersion", l->ns, l->name);
	}
	l->exists = true;
	l->data = data && json_object_is_type(data, json_type_object) ? json_object_get(data) : json_object_new_object();
	json_object_put(o);
	return l->data ? 0 : prd_err_set(err, PRD_ENOMEM, "out of memory");
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

/* PUT (POST when absent) `data` (taken) with the version read as the
 * precondition; `term` (NULL none) is noted on the object, which makes the
 * write a change even when the data is not. On success the ledger is
 * `data` at the new version. */
static int ledger_put(pr_ctl *c, json_object *data, const char *term, prd_err *err)
{
	pr_ledger *l = &c->ledger;
	json_object *body = json_object_new_object(), *md = json_object_new_object(), *answer = NULL;
	json_object *labels = json_object_new_object();
	char path[600];
	const char *rv;
	int rc;
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
	if(!pr__may_act(c)) {
		json_object_put(body);
		json_object_put(data);
		return prd_err_set(err, PRD_EAGAIN, "fenced: this replica may no longer hold the lease");
	}
	path_of(l, path, sizeof(path), l->exists);
	rc = kube_api_call(&c->api, l->exists ? "PUT" : "POST", path, NULL, body, &answer, NULL, err);
	json_object_put(body);
	if(rc == PRD_EEXIST)
		rc = PRD_ECONFLICT;
	if(rc) {
		json_object_put(answer);
		json_object_put(data);
		/* Read anew by the next pass that places. */
		l->read_pass = 0;
		if(rc == PRD_ECONFLICT)
			l->conflict_pass = c->stats.passes + 1;
		c->stats.ledger_conflicts += rc == PRD_ECONFLICT;
		metrics_counter_add(M_LEDGER_WRITES, METRICS_L(rc == PRD_ECONFLICT ? "conflict" : "error"), 1);
		if(rc == PRD_ECONFLICT)
			log_info("the booking ledger changed since this pass read it; its new bookings are decided again",
				 "ledger", l->name, "namespace", l->ns);
		else
			log_error("cannot write the booking ledger; its new bookings are decided again", "ledger",
				  l->name, "namespace", l->ns, "error", err->msg);
		return rc;
	}
	rv = json_object_get_string(json_object_object_get(json_object_object_get(answer, "metadata"), "resourceVersion"));
	free(l->rv);
	l->rv = rv ? str_dup(rv) : NULL;
	l->exists = l->rv != NULL;
	json_object_put(l->data);
	l->data = data;
	json_object_put(answer);
	if(!l->exists)
		l->read_pass = 0;
	return 0;
}

int pr__ledger_fence(pr_ctl *c, prd_err *err)
{
	pr_ledger *l = &c->ledger;
	json_object *data = NULL;
	int rc, tries;
	if(!l->on)
		return 0;
	for(tries = 0; tries < 2; tries++) {
		if((rc = pr__ledger_read(c, err)))
			return rc;
		if(json_object_deep_copy(l->data, &data, NULL))
			return prd_err_set(err, PRD_ENOMEM, "out of memory");
		rc = ledger_put(c, data, c->term[0] ? c->term : "-", err);
		data = NULL;
		if(rc != PRD_ECONFLICT)
			break;
	}
	if(rc == 0)
		metrics_counter_add(M_LEDGER_WRITES, METRICS_L("term"), 1);
	return rc;
}

int pr__ledger_commit(pr_ctl *c, const pr_ledger_change *ch, size_t n, prd_err *err)
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
