/* Status writes of the requests a pass decided, and provreqd's finalizer
 * on a request (pr__hold), which is ordered with them.
 *
 * A decision ends with one merge patch of the request's status subresource,
 * with the version it was based on as a precondition. A write in the middle
 * of a decision (a class recording its scale-up plan before it calls the
 * cloud) goes out at once: pr__write_status. The write that ends a decision
 * is deferred to the end of the pass, and the deferred writes of a pass go
 * out on up to cfg.status_writers connections at once (the client's QPS
 * limiter still paces them). Against a real apiserver a write is a round
 * trip of several milliseconds, so 200 decisions written one after another
 * took seconds; the decisions themselves take microseconds each.
 *
 * Deferring changes nothing the pass relies on: each request is decided
 * once per pass, a later decision of the pass already saw an earlier one's
 * bookings before its write (as when writes went out in line), and a write
 * that fails leaves what a failed in-line write left (a booking released
 * before the request's next decision, a retry pass). Outcomes are handled
 * on the worker thread in decision order. */
#include "classes/details.h"
#include "classes/plan_seal.h"
#include "classes/vocab.h"
#include "ops/log.h"
#include "provreq/ctl_int.h"
#include "util/assert.h"
#include "util/buf.h"
#include "util/str.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One deferred write. `pr` is borrowed from the pass's world, which lives
 * until the flush at the end of the pass. */
struct pr_status_write {
	const kube_provreq *pr;
	char *rv;                 /* the version the patch is based on (owned) */
	json_object *patch;       /* shares nothing with other objects (threads) */
	bool release;             /* remove the finalizer once written */
	bool books;               /* it records a booking (ledger_flush) */
	bool held;                /* not sent: the booking ledger refused its booking */
	bool fenced;              /* not sent: the fence closed before it went */
	int rc;
	prd_err err;
	json_object *answer;
};

static void status_path(const kube_provreq *pr, char *path, size_t len)
{
	snprintf(path, len, "/apis/autoscaling.x-k8s.io/v1/namespaces/%s/provisioningrequests/%s/status",
		 pr->meta.ns, pr->meta.name);
}

/* The merge patch of x's conditions and the controller's details. With
 * `own`, a deep copy that another thread may serialize and free. */
static json_object *status_patch(pr_class_ctx *x, bool own)
{
	pr_ctl *c = x->c;
	json_object *patch = json_object_new_object(), *md = json_object_new_object(), *st = json_object_new_object();
	json_object *conds = own ? NULL : json_object_get(x->conds->list), *details = NULL;
	bool have_details = c->details && json_object_object_length(c->details);
	json_object_object_add(md, "resourceVersion", json_object_new_string(x->rv));
	json_object_object_add(patch, "metadata", md);
	json_object_object_add(patch, "status", st);
	if(own && json_object_deep_copy(x->conds->list, &conds, NULL)) {
		json_object_put(patch);
		return NULL;
	}
	json_object_object_add(st, "conditions", conds);
	if(have_details && !own)
		details = json_object_get(c->details);
	else if(have_details && json_object_deep_copy(c->details, &details, NULL)) {
		json_object_put(patch);
		return NULL;
	}
	if(details)
		json_object_object_add(st, "provisioningClassDetails", details);
	return patch;
}

/* Would merging `details` change the request's provisioningClassDetails?
 * (A class may set the same values on every decision; writing them again
 * is a wasted round trip.) */
static bool details_change(const kube_provreq *pr, json_object *details)
{
	if(!details)
		return false;
	json_object_object_foreach(details, key, val)
	{
		const char *have = NULL;
		size_t i;
		for(i = 0; i < pr->nclass_details && !have; i++)
			if(pr->class_details[i].key && !strcmp(pr->class_details[i].key, key))
				have = pr->class_details[i].value ? pr->class_details[i].value : "";
		if(!val ? have != NULL : !have || !json_object_is_type(val, json_type_string) ||
						 strcmp(have, json_object_get_string(val)))
			return true;
	}
	return false;
}

/* The value the API holds for details key `key` once the patch `top`
 * lands on `sent` (what this decision wrote) over `pr`: the top-most
 * layer that sets the key gives it whole (a write sets every piece of a
 * value: pr_details_put). Caller frees; NULL when absent, and *oom set
 * when memory ran out. */
static char *merged_detail(const kube_provreq *pr, json_object *sent, json_object *top, const char *key, bool *oom)
{
	json_object *layers[2] = { top, sent }, *v;
	size_t l, i;
	char k[300];
	buf b;
	for(l = 0; l < 2; l++) {
		if(!layers[l] || !json_object_object_get_ex(layers[l], key, &v))
			continue;
		if(!v || !json_object_is_type(v, json_type_string))
			return NULL;
		buf_init(&b);
		buf_append_str(&b, json_object_get_string(v));
		for(i = 1; i < PR_DETAIL_MAX_CHUNKS && (size_t)json_object_get_string_len(v) == PR_DETAIL_CHUNK; i++) {
			snprintf(k, sizeof(k), "%s.%zu", key, i + 1);
			if(!json_object_object_get_ex(layers[l], k, &v) || !v || !json_object_is_type(v, json_type_string))
				break;
			buf_append_str(&b, json_object_get_string(v));
		}
		if(b.failed)
			*oom = true;
		return buf_detach(&b);
	}
	return pr_details_get(pr, key);
}

/* A write that changes the scale-up plan record in the status carries its
 * seal anew (classes/plan_seal.h), worked out over the record as the API
 * will hold it; without the plan key (or a plan) the write removes the
 * seal, so no stale seal ever vouches for a changed record. A write that
 * leaves the record alone leaves the seal too.
 *
 * A field this decision does not write is taken from the status as read,
 * and sealed only when the status's own record verified: else a write of
 * the phase or the term would vouch for fields someone else changed (an
 * "instances before" emptied) and another replica would adopt them. Such
 * a record is written without a seal: no replica adopts it, the one that
 * runs the plan carries it on from its store. */
static void seal_details(pr_class_ctx *x)
{
	pr_ctl *c = x->c;
	char *vals[PR_PLAN_SEAL_NFIELDS], seal[PR_PLAN_SEAL_MAX], why[300];
	bool touched = false, oom = false, inherits = false, base_ok = true, ok;
	size_t i;
	if(!c->details || !x->pr)
		return;
	{
		json_object_object_foreach(c->details, key, val)
		{
			(void)val;
			touched = touched || pr_plan_seal_covers(key);
		}
	}
	if(!touched)
		return;
	for(i = 0; i < PR_PLAN_SEAL_NFIELDS; i++) {
		const char *f = pr_plan_seal_fields[i];
		vals[i] = merged_detail(x->pr, x->sent, c->details, f, &oom);
		if(vals[i] && !json_object_object_get_ex(c->details, f, NULL) &&
		   !(x->sent && json_object_object_get_ex(x->sent, f, NULL)))
			inherits = true;
	}
	/* vals[0] is the plan id a seal needs, and the seal is not a field
	 * of what it seals. */
	PRD_ASSERT(!strcmp(pr_plan_seal_fields[0], PR_DETAIL_PLAN) && !pr_plan_seal_covers(PR_DETAIL_PLAN_SEAL));
	if(inherits && c->plan_key_set)
		base_ok = pr_plan_seal_verify(c->plan_key, x->pr, why, sizeof(why)) == PR_SEAL_OK;
	ok = !oom && vals[0] && c->plan_key_set && base_ok &&
	     pr_plan_seal(c->plan_key, x->pr->meta.uid, (const char *const *)vals, seal);
	json_object_object_add(c->details, PR_DETAIL_PLAN_SEAL, ok ? json_object_new_string(seal) : NULL);
	if(!ok && vals[0])
		log_warn("a scale-up plan is written without its seal: no other replica will adopt it",
			 "request", x->pr->meta.name, "namespace", x->pr->meta.ns, "cause",
			 !c->plan_key_set ? "no plan key"
			 : !base_ok	  ? "the plan record in the status is not as provreqd sealed it"
					  : "out of memory");
	for(i = 0; i < PR_PLAN_SEAL_NFIELDS; i++)
		free(vals[i]);
}

/* What a write that landed sent goes under what the next write of the
 * decision seals over (x->sent). */
static void remember_sent(pr_class_ctx *x)
{
	json_object *d = x->c->details;
	if(!d || !(x->sent || (x->sent = json_object_new_object())))
		return;
	{
		json_object_object_foreach(d, key, val)
			json_object_object_add(x->sent, key, json_object_get(val));
	}
}

static bool nothing_to_write(const pr_class_ctx *x)
{
	return x->dropped || (!x->conds->changed && !details_change(x->pr, x->c->details));
}

/* What a write's outcome means for the controller (either path). On
 * success *new_rv (optional) gets the version it made when that differs
 * from `based_on` (borrowed from `answer`). */
static int status_outcome(pr_ctl *c, const kube_provreq *pr, const char *based_on, int rc, json_object *answer,
			  const prd_err *err, const char **new_rv)
{
	const char *rv;
	if(new_rv)
		*new_rv = NULL;
	if(rc == PRD_ENOTFOUND) {
		/* Deleted meanwhile: the informer will say so; nothing to retry. */
		log_debug("request vanished before its status was written", "request", pr->meta.name, "namespace",
			  pr->meta.ns);
		return rc;
	}
	if(rc) {
		/* Retry: soon after a conflict (someone else wrote; decide on
		 * what they wrote), after 5 s for anything else. The deferred
		 * write's request was decided already: its retry time goes to
		 * what the pass-skipping remembers of it too. */
		int64_t t = c->now + (rc == PRD_ECONFLICT ? 1 : 5 * PRD_NS_PER_SEC);
		if(rc == PRD_ECONFLICT) {
			c->stats.status_conflicts++;
			log_info("status changed under us; retrying on the next pass", "request", pr->meta.name,
				 "namespace", pr->meta.ns);
		} else {
			log_error("cannot write request status", "request", pr->meta.name, "namespace", pr->meta.ns,
				  "error", err->msg);
		}
		pr__wake_at(c, t);
		pr__dirty_wake(c, pr, t);
		return rc;
	}
	c->stats.status_writes++;
	rv = json_object_get_string(json_object_object_get(json_object_object_get(answer, "metadata"),
							   "resourceVersion"));
	/* Only a write that made a new version can be waited for: a cache that
	 * still shows the version the write was based on has not seen it. */
	if(rv && strcmp(rv, based_on)) {
		char *seen = str_dup(pr->meta.rv);
		if(seen && hmap_put(&c->written, pr->meta.uid, seen))
			free(seen);
		if(new_rv)
			*new_rv = rv;
	}
	return 0;
}

/* A write that books and is known never to land (refused with 409, held
 * back by the ledger, or not sent: fenced) leaves the rows it was to show
 * in the store; they go now, so the next pass decides the request again
 * at once (as decide.c would for a request that shows neither a booking
 * nor a plan in flight). Rows of a write whose fate is unknown (a timeout, a 5xx) stay:
 * the write may still land, and decide.c releases them only after a
 * status write of its own shuts it out (leftover_fenced). */
static void drop_unwritten(pr_ctl *c, const kube_provreq *pr, json_object *patch)
{
	bool books = false;
	/* (A plan's end is not dropped: the store writes it again from its
	 * rows, finish_recorded.) */
	if(c->db && patch && !pr_details_plan_open(pr) && pr__ledger_change_of(patch, false, &books) && books)
		state_booking_delete_request(c->db, pr->meta.uid, NULL, NULL);
}

/* The conditions a write that landed changed, logged as the request's
 * news: a condition decided but not written (the pass was fenced, the
 * write refused) is not news, and is decided again. */
static void log_written(pr_ctl *c, const kube_provreq *pr, json_object *patch)
{
	char key[600];
	json_object *conds = json_object_object_get(json_object_object_get(patch, "status"), "conditions");
	size_t i, k, n = json_object_is_type(conds, json_type_array) ? json_object_array_length(conds) : 0;
	for(i = 0; i < n; i++) {
		json_object *o = json_object_array_get_idx(conds, i);
		const char *type = json_object_get_string(json_object_object_get(o, "type"));
		const char *status = json_object_get_string(json_object_object_get(o, "status"));
		const char *reason = json_object_get_string(json_object_object_get(o, "reason"));
		const kube_condition *was = NULL;
		if(!type || !status)
			continue;
		for(k = 0; k < pr->nconditions && !was; k++)
			if(str_eq(pr->conditions[k].type, type))
				was = &pr->conditions[k];
		if(was && str_eq(was->status, status) && str_eq(was->reason ? was->reason : "", reason ? reason : ""))
			continue;
		/* (A request written twice in a pass carries the same news.) */
		snprintf(key, sizeof(key), "%s/%s/%s/%s", pr->meta.uid ? pr->meta.uid : pr->meta.name, type, status,
			 reason ? reason : "");
		if(hmap_has(&c->conds_logged, key) || hmap_put(&c->conds_logged, key, NULL))
			continue;
		log_info("request condition", "namespace", pr->meta.ns, "request", pr->meta.name, "class",
			 pr->named_class ? pr->named_class : pr->class_name, "served_as", pr->class_name,
			 "condition", type, "status", status, "reason", reason ? reason : "", "message",
			 json_object_get_string(json_object_object_get(o, "message")));
	}
}

/* Entry n of a list of ledger changes: request pr's booking added (or
 * removed), its key "ns/name" in keys[n]. */
static void ledger_change_set(pr_ledger_change *ch, char (*keys)[600], size_t n, const kube_provreq *pr, bool add)
{
	snprintf(keys[n], sizeof(keys[n]), "%s/%s", pr->meta.ns, pr->meta.name);
	ch[n].uid = pr->meta.uid;
	ch[n].key = keys[n];
	ch[n].add = add;
}

/* The booking changes of the pass's deferred writes into the ledger; when
 * it refuses them, the writes that book are held back (their requests
 * are decided again on the next pass, on the ledger read anew). */
static void ledger_flush(pr_ctl *c)
{
	pr_ledger_change *ch = NULL;
	char (*keys)[600] = NULL;
	size_t n = 0, i, k;
	bool adds = false;
	prd_err e;
	int rc;
	if(!c->ledger.on)
		return;
	rc = (ch = calloc(c->nwrites, sizeof(*ch))) && (keys = calloc(c->nwrites, sizeof(*keys)))
		     ? 0
		     : prd_err_set(&e, PRD_ENOMEM, "out of memory");
	for(i = 0; i < c->nwrites; i++) {
		struct pr_status_write *w = &c->writes[i];
		if(!pr__ledger_change_of(w->patch, false, &w->books))
			continue;
		adds |= w->books;
		if(!rc)
			ledger_change_set(ch, keys, n++, w->pr, w->books);
	}
	if(!rc && n)
		rc = pr__ledger_commit(c, ch, n, &e);
	/* A booking too large for the ledger is not written (host.c refuses
	 * those before they are made); the others go on. */
	for(i = 0, k = 0; !rc && i < c->nwrites; i++) {
		struct pr_status_write *w = &c->writes[i];
		bool books;
		if(!pr__ledger_change_of(w->patch, false, &books))
			continue;
		if(ch[k++].too_large) {
			w->held = true;
			w->rc = PRD_ERANGE;
			prd_err_set(&w->err, w->rc, "the booking is too large for one object of the booking ledger");
		}
	}
	for(i = 0; rc && adds && i < c->nwrites; i++)
		if(c->writes[i].books) {
			c->writes[i].held = true;
			c->writes[i].rc = rc == PRD_ENOMEM ? rc : PRD_ECONFLICT;
			prd_err_set(&c->writes[i].err, c->writes[i].rc, "%s",
				    rc == PRD_ENOMEM ? "out of memory" : "the booking ledger changed since this pass read it");
		}
	free(ch);
	free(keys);
}

/* The same for one write that goes out at once; non-zero: it must not
 * be sent. The bookings this pass decided before it and deferred go into
 * the ledger with it: the write was decided on a snapshot that counted
 * them, and once it lands it must not outlive them. Else a crash before
 * the end of the pass left this write (a plan's hold of room beside a
 * request just booked on a plan's new Nodes) in the API and lost the
 * booking it made room for; another shard, taking the Nodes for booked
 * by the hold and so not the open plan's, booked them too (DST mixed seed
 * 7401). (The end of the pass commits them again: unchanged, no write.) */
static int ledger_now(pr_class_ctx *x, prd_err *err)
{
	pr_ctl *c = x->c;
	pr_ledger_change *ch;
	char (*keys)[600];
	size_t n = 0, i;
	bool add;
	int rc;
	if(!c->ledger.on || !c->details || !pr__ledger_change_of(c->details, true, &add))
		return 0;
	ch = calloc(c->nwrites + 1, sizeof(*ch));
	keys = calloc(c->nwrites + 1, sizeof(*keys));
	if(!ch || !keys) {
		free(ch);
		free(keys);
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	}
	for(i = 0; add && i < c->nwrites; i++) {
		struct pr_status_write *w = &c->writes[i];
		bool books = false;
		if(pr__ledger_change_of(w->patch, false, &books) && books && strcmp(w->pr->meta.uid, x->pr->meta.uid))
			ledger_change_set(ch, keys, n++, w->pr, true);
	}
	ledger_change_set(ch, keys, n++, x->pr, add);
	rc = pr__ledger_commit(c, ch, n, err);
	if(!rc && ch[n - 1].too_large)
		rc = prd_err_set(err, PRD_ERANGE, "the booking is too large for one object of the booking ledger");
	free(ch);
	free(keys);
	return add ? rc : 0;
}

int pr__write_status(pr_class_ctx *x, prd_err *err)
{
	pr_ctl *c = x->c;
	json_object *patch, *answer = NULL;
	const char *new_rv;
	char path[700];
	int rc;
	seal_details(x);
	if(nothing_to_write(x))
		return 0;
	if(!pr__may_act(c))
		return prd_err_set(err, PRD_EAGAIN, "fenced: this replica may no longer hold the lease");
	if((rc = ledger_now(x, err))) {
		pr__wake_at(c, c->now + PRD_NS_PER_SEC);
		pr__dirty_wake(c, x->pr, c->now + PRD_NS_PER_SEC);
		return rc;
	}
	patch = status_patch(x, false);
	status_path(x->pr, path, sizeof(path));
	rc = kube_api_call(&c->api, "PATCH", path, "application/merge-patch+json", patch, &answer, NULL, err);
	if(rc == 0)
		log_written(c, x->pr, patch);
	else if(rc == PRD_ECONFLICT)
		drop_unwritten(c, x->pr, patch);
	json_object_put(patch);
	rc = status_outcome(c, x->pr, x->rv, rc, answer, err, &new_rv);
	if(rc == PRD_ENOTFOUND)
		x->dropped = true;
	if(new_rv) {
		char *next = str_dup(new_rv);
		if(next) {
			free(x->rv_owned);
			x->rv = x->rv_owned = next;
		}
	}
	json_object_put(answer);
	if(rc == 0) {
		/* What was written is written: the next write sends only news. */
		x->conds->changed = false;
		remember_sent(x);
		json_object_put(c->details);
		c->details = json_object_new_object();
	}
	return rc;
}

/* Write now what cannot wait or be copied; else queue it. */
void pr__status_defer(pr_class_ctx *x)
{
	pr_ctl *c = x->c;
	struct pr_status_write *v, *w;
	prd_err e;
	seal_details(x);
	if(nothing_to_write(x)) {
		if(x->release && !x->dropped)
			goto in_line;
		return;
	}
	v = realloc(c->writes, (c->nwrites + 1) * sizeof(*v));
	if(!v)
		goto in_line;
	c->writes = v;
	w = &v[c->nwrites];
	memset(w, 0, sizeof(*w));
	w->pr = x->pr;
	w->release = x->release;
	w->rv = str_dup(x->rv);
	w->patch = w->rv ? status_patch(x, true) : NULL;
	if(!w->patch) {
		free(w->rv);
		goto in_line;
	}
	c->nwrites++;
	return;
in_line:
	if(pr__write_status(x, &e) == 0 && x->release && pr__hold(c, x->pr, false, &e) && e.code != PRD_ENOTFOUND)
		log_warn("cannot remove provreqd's finalizer; it is removed when the request is deleted", "request",
			 x->pr->meta.name, "error", e.msg);
}

/* Add or remove provreqd's finalizer: read the object fresh (its current
 * finalizers), write the whole list back with its resourceVersion as a
 * precondition. */
int pr__hold(pr_ctl *c, const kube_provreq *pr, bool on, prd_err *err)
{
	char path[700];
	json_object *o = NULL, *fin, *list, *patch, *md;
	size_t i, n;
	bool have = false;
	int rc;
	snprintf(path, sizeof(path), "/apis/autoscaling.x-k8s.io/v1/namespaces/%s/provisioningrequests/%s", pr->meta.ns,
		 pr->meta.name);
	if(!pr__may_act(c))
		return prd_err_set(err, PRD_EAGAIN, "fenced: this replica may no longer hold the lease");
	rc = kube_api_call(&c->api, "GET", path, NULL, NULL, &o, NULL, err);
	if(rc)
		return rc;
	md = json_object_object_get(o, "metadata");
	fin = json_object_object_get(md, "finalizers");
	n = fin && json_object_is_type(fin, json_type_array) ? json_object_array_length(fin) : 0;
	list = json_object_new_array();
	for(i = 0; i < n; i++) {
		const char *f = json_object_get_string(json_object_array_get_idx(fin, i));
		if(f && !strcmp(f, PR_FINALIZER)) {
			have = true;
			if(!on)
				continue;
		}
		json_object_array_add(list, json_object_new_string(f ? f : ""));
	}
	if(have == on) {
		json_object_put(list);
		json_object_put(o);
		return 0;
	}
	if(on)
		json_object_array_add(list, json_object_new_string(PR_FINALIZER));
	patch = json_object_new_object();
	md = json_object_new_object();
	json_object_object_add(md, "resourceVersion",
			       json_object_get(json_object_object_get(json_object_object_get(o, "metadata"), "resourceVersion")));
	json_object_object_add(md, "finalizers", list);
	json_object_object_add(patch, "metadata", md);
	rc = kube_api_call(&c->api, "PATCH", path, "application/merge-patch+json", patch, NULL, NULL, err);
	json_object_put(patch);
	json_object_put(o);
	return rc == PRD_ENOTFOUND && !on ? 0 : rc;
}

static void send_one(void *ud, size_t i)
{
	pr_ctl *c = ud;
	struct pr_status_write *w = &c->writes[i];
	char path[700];
	if(w->held)
		return;
	/* Asked before each write, not once for the batch: eight writers
	 * send hundreds of writes, for longer than the fence's margin when
	 * the apiserver is slow. Once it closes, nothing more goes (the new
	 * leader decides these requests again). c->may_act is safe from any
	 * thread; pr__may_act (which notes the pass fenced) is not. */
	if(c->may_act && !c->may_act(c->may_act_ud)) {
		w->fenced = true;
		w->rc = PRD_EAGAIN;
		prd_err_set(&w->err, PRD_EAGAIN, "fenced: this replica may no longer hold the lease");
		return;
	}
	status_path(w->pr, path, sizeof(path));
	w->rc = kube_api_call(&c->api, "PATCH", path, "application/merge-patch+json", w->patch, &w->answer, NULL,
			      &w->err);
}

void pr__status_flush(pr_ctl *c)
{
	size_t i;
	bool sent;
	if(!c->nwrites)
		return;
	/* Fenced: the lease may be another replica's; write nothing (the new
	 * leader decides these requests again). */
	sent = pr__may_act(c);
	if(sent)
		ledger_flush(c);
	if(sent)
		pr__parallel(c->cfg.status_writers ? c->cfg.status_writers : 1, c->nwrites, send_one, c);
	for(i = 0; sent && i < c->nwrites; i++)
		if(c->writes[i].fenced) {
			/* The fence closed during the flush: this pass is fenced,
			 * and the writes not sent are decided again. */
			(void)pr__may_act(c);
			c->fenced = true;
			break;
		}
	for(i = 0; i < c->nwrites; i++) {
		struct pr_status_write *w = &c->writes[i];
		prd_err e;
		int rc = sent && !w->fenced ? status_outcome(c, w->pr, w->rv, w->rc, w->answer, &w->err, NULL)
					    : PRD_EAGAIN;
		if(rc == 0)
			log_written(c, w->pr, w->patch);
		else if(!sent || w->fenced || rc == PRD_ECONFLICT)
			drop_unwritten(c, w->pr, w->patch);
		if(rc == 0 && w->release && pr__hold(c, w->pr, false, &e) && e.code != PRD_ENOTFOUND)
			log_warn("cannot remove provreqd's finalizer; it is removed when the request is deleted",
				 "request", w->pr->meta.name, "error", e.msg);
		json_object_put(w->patch);
		json_object_put(w->answer);
		free(w->rv);
	}
	c->nwrites = 0;
}

void pr__status_discard(pr_ctl *c)
{
	size_t i;
	for(i = 0; i < c->nwrites; i++) {
		json_object_put(c->writes[i].patch);
		json_object_put(c->writes[i].answer);
		free(c->writes[i].rv);
	}
	free(c->writes);
	c->writes = NULL;
	c->nwrites = 0;
}
