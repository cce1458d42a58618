/* core/v1 Event recorder: aggregation of repeats and a per-object spam
 * filter, both kept in bounded in-memory maps. */
#include "kube/events.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ops/log.h"
#include "util/hmap.h"
#include "util/rfc3339.h"
#include "util/str.h"

#define EVENT_MESSAGE_MAX 1024

typedef struct agg_entry {
	char *ns;          /* namespace of the Event object */
	char *name;        /* name of the Event object */
	long count;
	int64_t first_wall;
	int64_t last_mono;
} agg_entry;

typedef struct spam_entry {
	double tokens;
	int64_t last_mono;
} spam_entry;

/* A map that forgets its oldest insertions beyond `cap` entries. */
typedef struct bounded_map {
	hmap m;
	char **ring;       /* insertion order of live keys */
	size_t cap, head, len;
} bounded_map;

struct kube_recorder {
	kube_api api;
	unsigned long seq;        /* makes Event names unique; under mu */
	kube_recorder_opts o;
	char *component;
	char *instance;
	pthread_mutex_t mu;
	bounded_map agg;
	bounded_map spam;
	kube_recorder_stats stats;
	/* Asynchronous mode: one queue per sender, all under qmu. `queued`
	 * counts Events queued or being written. */
	struct ev_sender *snd;
	unsigned nsnd;
	pthread_mutex_t qmu;
	pthread_cond_t work, idle;
	size_t queued;
	bool stopping;
};

/* An Event stamped at record time, waiting for its sender (owned copies). */
typedef struct ev_job {
	struct ev_job *next;
	kube_object_ref obj;
	char *type, *reason, *msg, *ts;
	int64_t now_mono, now_wall;
} ev_job;

typedef struct ev_sender {
	kube_recorder *r;
	pthread_t tid;
	bool started;
	ev_job *head, *tail;
} ev_sender;

static void agg_free(void *p)
{
	agg_entry *e = p;
	if(e) {
		free(e->ns);
		free(e->name);
		free(e);
	}
}

static int bmap_init(bounded_map *b, size_t cap, void (*free_value)(void *))
{
	hmap_init(&b->m, free_value);
	b->ring = calloc(cap, sizeof(char *));
	b->cap = cap;
	b->head = b->len = 0;
	return b->ring ? 0 : PRD_ENOMEM;
}

static void bmap_free(bounded_map *b)
{
	for(size_t i = 0; b->ring && i < b->cap; i++)
		free(b->ring[i]);
	free(b->ring);
	hmap_free(&b->m);
}

/* Insert a new key (the caller checked it is absent), evicting the oldest
 * entry when full. On failure the value is destroyed. */
static int bmap_insert(bounded_map *b, const char *key, void *value)
{
	char *k = str_dup(key);
	size_t slot;
	int rc;

	if(!k) {
		if(b->m.free_value)
			b->m.free_value(value);
		return PRD_ENOMEM;
	}
	if(b->len == b->cap) {
		hmap_del(&b->m, b->ring[b->head]);
		free(b->ring[b->head]);
		b->ring[b->head] = NULL;
		b->head = (b->head + 1) % b->cap;
		b->len--;
	}
	rc = hmap_put(&b->m, key, value);
	if(rc) {
		free(k);
		if(b->m.free_value)
			b->m.free_value(value);
		return rc;
	}
	slot = (b->head + b->len) % b->cap;
	b->ring[slot] = k;
	b->len++;
	return 0;
}

static int start_senders(kube_recorder *r, prd_err *err);
static void job_free(ev_job *j);

int kube_recorder_new(const kube_api *api, const kube_recorder_opts *o, kube_recorder **out, prd_err *err)
{
	kube_recorder *r = calloc(1, sizeof(*r));
	char host[256];

	*out = NULL;
	if(!r)
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	r->api = *api;
	if(o)
		r->o = *o;
	if(!r->o.clock)
		r->o.clock = clk_real();
	if(r->o.aggregate_window_ns <= 0)
		r->o.aggregate_window_ns = 10 * 60 * PRD_NS_PER_SEC;
	if(r->o.spam_burst <= 0)
		r->o.spam_burst = 25;
	if(r->o.spam_refill_ns <= 0)
		r->o.spam_refill_ns = 5 * 60 * PRD_NS_PER_SEC;
	if(r->o.cache_size == 0)
		r->o.cache_size = 4096;
	if(gethostname(host, sizeof(host)) != 0)
		str_copy(host, sizeof(host), "unknown");
	host[sizeof(host) - 1] = '\0';
	r->component = str_dup(r->o.component ? r->o.component : "provreqd");
	r->instance = str_dup(r->o.instance ? r->o.instance : host);
	r->o.component = r->o.instance = NULL;
	pthread_mutex_init(&r->mu, NULL);
	pthread_mutex_init(&r->qmu, NULL);
	pthread_cond_init(&r->work, NULL);
	pthread_cond_init(&r->idle, NULL);
	if(!r->component || !r->instance || bmap_init(&r->agg, r->o.cache_size, agg_free) ||
	   bmap_init(&r->spam, r->o.cache_size, free)) {
		kube_recorder_free(r);
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	}
	if(r->o.senders && start_senders(r, err)) {
		kube_recorder_free(r);
		return err->code;
	}
	*out = r;
	return 0;
}

void kube_recorder_flush(kube_recorder *r)
{
	pthread_mutex_lock(&r->qmu);
	while(r->queued)
		pthread_cond_wait(&r->idle, &r->qmu);
	pthread_mutex_unlock(&r->qmu);
}

void kube_recorder_free(kube_recorder *r)
{
	unsigned i;
	if(!r)
		return;
	pthread_mutex_lock(&r->qmu);
	r->stopping = true;
	pthread_cond_broadcast(&r->work);
	pthread_mutex_unlock(&r->qmu);
	for(i = 0; i < r->nsnd; i++)
		if(r->snd[i].started)
			pthread_join(r->snd[i].tid, NULL);
	for(i = 0; i < r->nsnd; i++)
		while(r->snd[i].head) {
			ev_job *j = r->snd[i].head;
			r->snd[i].head = j->next;
			job_free(j);
		}
	free(r->snd);
	pthread_cond_destroy(&r->work);
	pthread_cond_destroy(&r->idle);
	pthread_mutex_destroy(&r->qmu);
	bmap_free(&r->agg);
	bmap_free(&r->spam);
	pthread_mutex_destroy(&r->mu);
	free(r->component);
	free(r->instance);
	free(r);
}

void kube_recorder_get_stats(kube_recorder *r, kube_recorder_stats *out)
{
	pthread_mutex_lock(&r->mu);
	*out = r->stats;
	pthread_mutex_unlock(&r->mu);
}

static const char *nz(const char *s)
{
	return s ? s : "";
}

void kube_events_ref_from(json_object *obj, const kube_resource *res, kube_object_ref *out)
{
	json_object *meta = NULL, *v;
	memset(out, 0, sizeof(*out));
	if(json_object_object_get_ex(obj, "kind", &v))
		out->kind = json_object_get_string(v);
	if(json_object_object_get_ex(obj, "apiVersion", &v))
		out->api_version = json_object_get_string(v);
	if(!out->kind && res)
		out->kind = res->kind;
	if(json_object_object_get_ex(obj, "metadata", &meta)) {
		if(json_object_object_get_ex(meta, "namespace", &v))
			out->namespace_ = json_object_get_string(v);
		if(json_object_object_get_ex(meta, "name", &v))
			out->name = json_object_get_string(v);
		if(json_object_object_get_ex(meta, "uid", &v))
			out->uid = json_object_get_string(v);
		if(json_object_object_get_ex(meta, "resourceVersion", &v))
			out->resource_version = json_object_get_string(v);
	}
}

/* Cut at `max` bytes without splitting a UTF-8 sequence. */
static void utf8_cut(char *s, size_t max)
{
	size_t n = strlen(s);
	if(n <= max)
		return;
	n = max;
	while(n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
		n--;
	s[n] = '\0';
}

/* Take a token from the object's bucket. Lock held. */
static bool spam_allow(kube_recorder *r, const char *objkey, int64_t now)
{
	spam_entry *e = hmap_get(&r->spam.m, objkey);
	if(!e) {
		e = calloc(1, sizeof(*e));
		if(!e)
			return true; /* out of memory: do not lose the event for it */
		e->tokens = r->o.spam_burst;
		e->last_mono = now;
		if(bmap_insert(&r->spam, objkey, e))
			return true;
	}
	e->tokens += (double)(now - e->last_mono) / (double)r->o.spam_refill_ns;
	if(e->tokens > r->o.spam_burst)
		e->tokens = r->o.spam_burst;
	e->last_mono = now;
	if(e->tokens < 1.0)
		return false;
	e->tokens -= 1.0;
	return true;
}

static json_object *event_body(kube_recorder *r, const kube_object_ref *obj, const char *ns,
			       const char *name, const char *type, const char *reason, const char *msg,
			       const char *ts)
{
	json_object *ev = json_object_new_object(), *meta, *inv, *src;
	if(!ev)
		return NULL;
	meta = json_object_new_object();
	inv = json_object_new_object();
	src = json_object_new_object();
	json_object_object_add(ev, "apiVersion", json_object_new_string("v1"));
	json_object_object_add(ev, "kind", json_object_new_string("Event"));
	json_object_object_add(ev, "metadata", meta);
	json_object_object_add(meta, "name", json_object_new_string(name));
	json_object_object_add(meta, "namespace", json_object_new_string(ns));
	json_object_object_add(ev, "involvedObject", inv);
	json_object_object_add(inv, "kind", json_object_new_string(nz(obj->kind)));
	if(obj->api_version)
		json_object_object_add(inv, "apiVersion", json_object_new_string(obj->api_version));
	if(obj->namespace_)
		json_object_object_add(inv, "namespace", json_object_new_string(obj->namespace_));
	json_object_object_add(inv, "name", json_object_new_string(nz(obj->name)));
	if(obj->uid)
		json_object_object_add(inv, "uid", json_object_new_string(obj->uid));
	if(obj->resource_version)
		json_object_object_add(inv, "resourceVersion", json_object_new_string(obj->resource_version));
	json_object_object_add(ev, "reason", json_object_new_string(reason));
	json_object_object_add(ev, "message", json_object_new_string(msg));
	json_object_object_add(ev, "type", json_object_new_string(type));
	json_object_object_add(ev, "source", src);
	json_object_object_add(src, "component", json_object_new_string(r->component));
	json_object_object_add(src, "host", json_object_new_string(r->instance));
	json_object_object_add(ev, "firstTimestamp", json_object_new_string(ts));
	json_object_object_add(ev, "lastTimestamp", json_object_new_string(ts));
	json_object_object_add(ev, "count", json_object_new_int(1));
	json_object_object_add(ev, "reportingComponent", json_object_new_string(r->component));
	json_object_object_add(ev, "reportingInstance", json_object_new_string(r->instance));
	return ev;
}

/* PATCH count and lastTimestamp of the Event we wrote earlier. */
static int bump(kube_recorder *r, const char *ns, const char *name, long count, const char *ts,
		prd_err *err)
{
	char body[256];
	json_object *patch;
	char *path = kube_path(&KUBE_EVENTS, ns, name, NULL);
	int rc;
	snprintf(body, sizeof(body), "{\"count\":%ld,\"lastTimestamp\":\"%s\"}", count, ts);
	patch = json_tokener_parse(body);
	rc = path && patch ? kube_api_call(&r->api, "PATCH", path, "application/merge-patch+json", patch, NULL,
					   NULL, err)
			   : prd_err_set(err, PRD_ENOMEM, "out of memory");
	json_object_put(patch);
	free(path);
	return rc;
}

/* One Event being recorded: who it is about, what it says, and when. */
typedef struct ev_rec {
	const kube_object_ref *obj;
	const char *ns;           /* namespace of the Event object */
	const char *type, *reason;
	const char *msg, *ts;
	const char *aggkey;       /* key of the aggregation map */
	int64_t now_mono, now_wall;
} ev_rec;

/* The same Event within the aggregation window: bump the one we wrote.
 * Returns true when that settled it (bumped, or failed and logged), false
 * when a fresh Event must be written (the old one is gone). */
static bool ev_bump(kube_recorder *r, const ev_rec *v, const char *agg_ns, const char *agg_name, long count,
		    prd_err *err)
{
	int rc = bump(r, agg_ns, agg_name, count, v->ts, err);

	if(rc == 0) {
		pthread_mutex_lock(&r->mu);
		agg_entry *e = hmap_get(&r->agg.m, v->aggkey);
		if(e && e->count < count) {
			e->count = count;
			e->last_mono = v->now_mono;
		}
		r->stats.aggregated++;
		pthread_mutex_unlock(&r->mu);
		return true;
	}
	if(rc != PRD_ENOTFOUND) {
		log_warn("event not recorded", "kind", v->obj->kind, "name", v->obj->name, "reason", v->reason,
			 "error", err->msg);
		pthread_mutex_lock(&r->mu);
		r->stats.failed++;
		pthread_mutex_unlock(&r->mu);
		return true;
	}
	/* The Event was deleted (TTL): write a fresh one. */
	return false;
}

/* Remember a written Event for aggregation. Lock held. */
static void ev_remember(kube_recorder *r, const ev_rec *v, const char *evname)
{
	agg_entry *e = calloc(1, sizeof(*e));

	if(!e)
		return;
	e->ns = str_dup(v->ns);
	e->name = str_dup(evname);
	e->count = 1;
	e->first_wall = v->now_wall;
	e->last_mono = v->now_mono;
	if(!e->ns || !e->name)
		agg_free(e);
	else if(hmap_has(&r->agg.m, v->aggkey))
		hmap_put(&r->agg.m, v->aggkey, e); /* replaces an expired entry */
	else
		bmap_insert(&r->agg, v->aggkey, e);
}

/* POST a new Event and remember it for aggregation. */
static void ev_create(kube_recorder *r, const ev_rec *v, prd_err *err)
{
	const kube_object_ref *obj = v->obj;
	char evname[320];
	unsigned long seq;
	json_object *ev;
	int rc;

	/* Time plus a sequence number: two Events in the same nanosecond (a
	 * fake clock, a coarse one) still get different names. */
	pthread_mutex_lock(&r->mu);
	seq = ++r->seq;
	pthread_mutex_unlock(&r->mu);
	snprintf(evname, sizeof(evname), "%.240s.%llx%04x", nz(obj->name), (unsigned long long)v->now_wall,
		 (unsigned)(seq & 0xffff));
	ev = event_body(r, obj, v->ns, evname, v->type, v->reason, v->msg, v->ts);
	{
		char *path = kube_path(&KUBE_EVENTS, v->ns, NULL, NULL);
		rc = ev && path ? kube_api_call(&r->api, "POST", path, NULL, ev, NULL, NULL, err) : PRD_ENOMEM;
		free(path);
	}
	pthread_mutex_lock(&r->mu);
	if(rc == 0) {
		r->stats.created++;
		ev_remember(r, v, evname);
	} else {
		r->stats.failed++;
	}
	pthread_mutex_unlock(&r->mu);
	if(rc)
		log_warn("event not recorded", "kind", obj->kind, "name", obj->name, "reason", v->reason,
			 "error", rc == PRD_ENOMEM ? "out of memory" : err->msg);
	else
		log_debug("event recorded", "kind", obj->kind, "namespace", obj->namespace_, "name", obj->name,
			  "type", v->type, "reason", v->reason);
	json_object_put(ev);
}

/* Everything after the stamping: spam filter, aggregation, the write. */
static void record(kube_recorder *r, const kube_object_ref *obj, const char *type, const char *reason,
		   const char *msg, const char *ts, int64_t now_mono, int64_t now_wall)
{
	char *objkey = NULL, *aggkey = NULL, *agg_ns = NULL, *agg_name = NULL;
	ev_rec v = {.obj = obj, .type = type, .reason = reason, .msg = msg, .ts = ts};
	long count = 0;
	prd_err err = {0};

	v.ns = obj->namespace_ && *obj->namespace_ ? obj->namespace_ : "default";
	v.now_mono = now_mono;
	v.now_wall = now_wall;
	objkey = str_printf("%s\x1f%s\x1f%s\x1f%s", nz(obj->kind), nz(obj->namespace_), nz(obj->name),
			    nz(obj->uid));
	aggkey = objkey ? str_printf("%s\x1f%s\x1f%s\x1f%s", objkey, type, reason, msg) : NULL;
	if(!aggkey) {
		log_warn("event not recorded: out of memory", "reason", reason);
		goto done;
	}
	v.aggkey = aggkey;

	pthread_mutex_lock(&r->mu);
	if(!spam_allow(r, objkey, v.now_mono)) {
		r->stats.dropped++;
		pthread_mutex_unlock(&r->mu);
		log_debug("event dropped by the spam filter", "kind", obj->kind, "namespace", obj->namespace_,
			  "name", obj->name, "reason", reason);
		goto done;
	}
	{
		agg_entry *e = hmap_get(&r->agg.m, aggkey);
		if(e && v.now_mono - e->last_mono <= r->o.aggregate_window_ns) {
			agg_ns = str_dup(e->ns);
			agg_name = str_dup(e->name);
			count = e->count + 1;
		}
	}
	pthread_mutex_unlock(&r->mu);

	if(!(agg_ns && agg_name && ev_bump(r, &v, agg_ns, agg_name, count, &err)))
		ev_create(r, &v, &err);
done:
	free(objkey);
	free(aggkey);
	free(agg_ns);
	free(agg_name);
}

static void job_free(ev_job *j)
{
	free((char *)j->obj.kind);
	free((char *)j->obj.api_version);
	free((char *)j->obj.namespace_);
	free((char *)j->obj.name);
	free((char *)j->obj.uid);
	free((char *)j->obj.resource_version);
	free(j->type);
	free(j->reason);
	free(j->msg);
	free(j->ts);
	free(j);
}

/* NULL stays NULL; false only when a copy could not be made. */
static bool dup_opt(const char **dst, const char *src)
{
	*dst = src ? str_dup(src) : NULL;
	return !src || *dst;
}

static ev_job *job_new(const kube_object_ref *obj, const char *type, const char *reason, const char *msg,
		       const char *ts)
{
	ev_job *j = calloc(1, sizeof(*j));
	bool ok;
	if(!j)
		return NULL;
	ok = dup_opt(&j->obj.kind, obj->kind) && dup_opt(&j->obj.api_version, obj->api_version) &&
	     dup_opt(&j->obj.namespace_, obj->namespace_) && dup_opt(&j->obj.name, obj->name) &&
	     dup_opt(&j->obj.uid, obj->uid) && dup_opt(&j->obj.resource_version, obj->resource_version);
	j->type = str_dup(type);
	j->reason = str_dup(reason);
	j->msg = str_dup(msg);
	j->ts = str_dup(ts);
	if(!ok || !j->type || !j->reason || !j->msg || !j->ts) {
		job_free(j);
		return NULL;
	}
	return j;
}

static void *sender_main(void *ud)
{
	ev_sender *s = ud;
	kube_recorder *r = s->r;
	pthread_mutex_lock(&r->qmu);
	for(;;) {
		ev_job *j;
		while(!s->head && !r->stopping)
			pthread_cond_wait(&r->work, &r->qmu);
		if(!s->head)
			break;
		j = s->head;
		s->head = j->next;
		if(!s->head)
			s->tail = NULL;
		pthread_mutex_unlock(&r->qmu);
		record(r, &j->obj, j->type, j->reason, j->msg, j->ts, j->now_mono, j->now_wall);
		job_free(j);
		pthread_mutex_lock(&r->qmu);
		if(--r->queued == 0)
			pthread_cond_broadcast(&r->idle);
	}
	pthread_mutex_unlock(&r->qmu);
	return NULL;
}

static int start_senders(kube_recorder *r, prd_err *err)
{
	unsigned i;
	if(r->o.senders > 16)
		r->o.senders = 16;
	if(r->o.queue_max == 0)
		r->o.queue_max = 4096;
	r->snd = calloc(r->o.senders, sizeof(*r->snd));
	if(!r->snd)
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	r->nsnd = r->o.senders;
	for(i = 0; i < r->nsnd; i++) {
		r->snd[i].r = r;
		if(pthread_create(&r->snd[i].tid, NULL, sender_main, &r->snd[i]))
			return prd_err_set(err, PRD_ENOMEM, "cannot start an event sender thread");
		r->snd[i].started = true;
	}
	return 0;
}

/* Queue a stamped Event on its object's sender; false when it was dropped. */
static bool enqueue(kube_recorder *r, const kube_object_ref *obj, const char *type, const char *reason,
		    const char *msg, const char *ts, int64_t now_mono, int64_t now_wall)
{
	uint64_t h = 1469598103934665603ull;
	const char *k[3] = { obj->kind, obj->namespace_, obj->name };
	ev_sender *s;
	ev_job *j;
	size_t i;
	for(i = 0; i < 3; i++)
		for(const char *p = nz(k[i]); *p; p++)
			h = (h ^ (unsigned char)*p) * 1099511628211ull;
	pthread_mutex_lock(&r->qmu);
	if(r->queued >= r->o.queue_max || r->stopping) {
		pthread_mutex_unlock(&r->qmu);
		return false;
	}
	pthread_mutex_unlock(&r->qmu);
	j = job_new(obj, type, reason, msg, ts);
	if(!j)
		return false;
	j->now_mono = now_mono;
	j->now_wall = now_wall;
	s = &r->snd[h % r->nsnd];
	pthread_mutex_lock(&r->qmu);
	if(s->tail)
		s->tail->next = j;
	else
		s->head = j;
	s->tail = j;
	r->queued++;
	pthread_cond_broadcast(&r->work);
	pthread_mutex_unlock(&r->qmu);
	return true;
}

void kube_recorder_event(kube_recorder *r, const kube_object_ref *obj, const char *type,
			 const char *reason, const char *fmt, ...)
{
	char msg[EVENT_MESSAGE_MAX + 8], ts[RFC3339_MAX];
	int64_t now_mono, now_wall;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	utf8_cut(msg, EVENT_MESSAGE_MAX);
	now_mono = clk_mono(r->o.clock);
	now_wall = clk_wall(r->o.clock);
	rfc3339_format(now_wall, ts, sizeof(ts));
	if(!r->nsnd) {
		record(r, obj, type, reason, msg, ts, now_mono, now_wall);
		return;
	}
	if(!enqueue(r, obj, type, reason, msg, ts, now_mono, now_wall)) {
		pthread_mutex_lock(&r->mu);
		r->stats.queue_full++;
		pthread_mutex_unlock(&r->mu);
		log_warn("event not recorded: the send queue is full", "kind", obj->kind, "name", obj->name,
			 "reason", reason);
	}
}
