/* Reflector: keeps a store in step with one apiserver collection by list
 * and watch on a thread of its own, as client-go's Reflector does. */
#include "kube/reflector.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kube/objects.h"
#include "ops/log.h"
#include "util/str.h"

/* What the item/event callbacks return to end a list or watch because the
 * reflector is stopping (positive, so it never collides with PRD_E*). */
#define STOPPING 1

struct kube_reflector {
	kube_listwatch lw;
	kube_store_ops store;
	void *store_ud;
	kube_reflector_opts o;
	char *name;

	pthread_t thread;
	bool started, joined;
	atomic_bool stop;
	pthread_mutex_t mu;    /* guards rv (for readers on other threads) and the wait */
	pthread_cond_t cv;
	char *rv;              /* written by the reflector thread only */

	int64_t backoff;
	unsigned seed;
	uint64_t watch_events; /* events in the current watch (thread-local use) */
	int store_rc;          /* a store failure that ended the current watch */

	struct {
		atomic_uint_least64_t lists, relists, list_errors, watches, watch_restarts, watch_errors, gone,
			events, bookmarks, rejected;
	} st;
};

int kube_reflector_new(const kube_listwatch *lw, const kube_store_ops *store, void *store_ud,
		       const kube_reflector_opts *opts, kube_reflector **out, prd_err *err)
{
	kube_reflector *r;
	pthread_condattr_t ca;

	*out = NULL;
	if(!lw || !lw->list || !lw->watch || !store || !store->list_begin || !store->list_item || !store->list_end ||
	   !store->event)
		return prd_err_set(err, PRD_EINVAL, "reflector: listwatch and store functions are required");
	r = calloc(1, sizeof(*r));
	if(!r)
		return prd_err_set(err, PRD_ENOMEM, "reflector: out of memory");
	r->lw = *lw;
	r->store = *store;
	r->store_ud = store_ud;
	if(opts)
		r->o = *opts;
	if(!r->o.clock)
		r->o.clock = clk_real();
	if(r->o.min_watch_timeout_s <= 0)
		r->o.min_watch_timeout_s = 300;
	if(r->o.max_watch_timeout_s < r->o.min_watch_timeout_s)
		r->o.max_watch_timeout_s = r->o.min_watch_timeout_s < 600 ? 600 : r->o.min_watch_timeout_s;
	if(r->o.backoff_initial_ns <= 0)
		r->o.backoff_initial_ns = 800 * PRD_NS_PER_MS;
	if(r->o.backoff_max_ns < r->o.backoff_initial_ns)
		r->o.backoff_max_ns = 30 * PRD_NS_PER_SEC;
	if(r->o.healthy_watch_ns <= 0)
		r->o.healthy_watch_ns = 60 * PRD_NS_PER_SEC;
	r->seed = r->o.seed ? r->o.seed : (unsigned)clk_mono(clk_real());
	r->name = str_dup(opts && opts->name ? opts->name : "objects");
	r->o.name = r->name;
	atomic_init(&r->stop, false);
	if(!r->name || pthread_mutex_init(&r->mu, NULL)) {
		free(r->name);
		free(r);
		return prd_err_set(err, PRD_ENOMEM, "reflector: out of memory");
	}
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&r->cv, &ca);
	pthread_condattr_destroy(&ca);
	*out = r;
	return PRD_OK;
}

static bool stopping(kube_reflector *r)
{
	return atomic_load(&r->stop);
}

static bool cancelled_cb(void *ud)
{
	return stopping(ud);
}

/* Wait out the current backoff (interrupted by stop) and double it. */
static void backoff_wait(kube_reflector *r)
{
	int64_t d = r->backoff;
	r->backoff = d * 2 > r->o.backoff_max_ns ? r->o.backoff_max_ns : d * 2;
	if(stopping(r))
		return;
	if(r->o.sleep) {
		r->o.sleep(r->o.sleep_ud, d);
		return;
	}
	{
		struct timespec ts;
		int64_t t;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		t = (int64_t)ts.tv_nsec + d % PRD_NS_PER_SEC;
		ts.tv_sec += (time_t)(d / PRD_NS_PER_SEC + t / PRD_NS_PER_SEC);
		ts.tv_nsec = (long)(t % PRD_NS_PER_SEC);
		pthread_mutex_lock(&r->mu);
		while(!stopping(r) && pthread_cond_timedwait(&r->cv, &r->mu, &ts) == 0)
			;
		pthread_mutex_unlock(&r->mu);
	}
}

static void set_rv(kube_reflector *r, const char *rv)
{
	char *n;
	if(!rv || !*rv || (r->rv && strcmp(r->rv, rv) == 0))
		return;
	n = str_dup(rv);
	if(!n)
		return; /* keep the older version: a relist at worst */
	pthread_mutex_lock(&r->mu);
	free(r->rv);
	r->rv = n;
	pthread_mutex_unlock(&r->mu);
}

static int list_item_cb(void *ud, json_object *item)
{
	kube_reflector *r = ud;
	int rc;
	if(stopping(r))
		return STOPPING;
	rc = r->store.list_item(r->store_ud, item);
	if(rc == PRD_EINVAL) {
		atomic_fetch_add(&r->st.rejected, 1);
		return PRD_OK;
	}
	return rc;
}

static int list_item_src_cb(void *ud, const kube_item_src *item)
{
	kube_reflector *r = ud;
	int rc;
	if(stopping(r))
		return STOPPING;
	rc = r->store.list_item_src(r->store_ud, item);
	if(rc == PRD_EINVAL) {
		atomic_fetch_add(&r->st.rejected, 1);
		return PRD_OK;
	}
	return rc;
}

/* Objects go as text when both ends can. */
static bool use_text(const kube_reflector *r)
{
	return r->lw.list_text && r->lw.watch_text && r->store.list_item_src && r->store.event_src;
}

static int do_list(kube_reflector *r, bool first)
{
	prd_err err;
	char *rv = NULL;
	int rc;

	prd_err_clear(&err);
	rc = r->store.list_begin(r->store_ud);
	if(rc)
		return rc;
	if(use_text(r))
		rc = r->lw.list_text(r->lw.ud, list_item_src_cb, r, &rv, &err);
	else
		rc = r->lw.list(r->lw.ud, list_item_cb, r, &rv, &err);
	if(rc) {
		r->store.list_end(r->store_ud, false, NULL);
		free(rv);
		if(rc != STOPPING && !stopping(r))
			log_warn("reflector list failed", "resource", r->name, "error", err.msg[0] ? err.msg : prd_strerror(rc));
		return rc;
	}
	rc = r->store.list_end(r->store_ud, true, rv ? rv : "");
	if(!rc) {
		set_rv(r, rv);
		atomic_fetch_add(&r->st.lists, 1);
		if(!first)
			atomic_fetch_add(&r->st.relists, 1);
		log_debug("reflector listed", "resource", r->name, "resourceVersion", rv ? rv : "");
	}
	free(rv);
	return rc;
}

/* The `code` of an in-stream ERROR event's Status object, or 0. */
static long status_code(json_object *obj)
{
	json_object *c = NULL;
	if(obj && json_object_object_get_ex(obj, "code", &c) && json_object_is_type(c, json_type_int))
		return (long)json_object_get_int64(c);
	return 0;
}

/* The resourceVersion of a bookmark's object (NULL if none). */
static const char *bookmark_rv(json_object *obj)
{
	json_object *md = NULL, *v = NULL;
	if(obj && json_object_object_get_ex(obj, "metadata", &md) &&
	   json_object_object_get_ex(md, "resourceVersion", &v) && json_object_is_type(v, json_type_string))
		return json_object_get_string(v);
	return NULL;
}

/* One event, whichever form its object came in: `obj` (a tree) or `src`
 * (text, with `rv` already read from it). */
static int event_any(kube_reflector *r, const char *type, json_object *obj, const kube_item_src *src,
		     const char *src_rv)
{
	const char *ns, *name, *rv = NULL;
	kube_event_type t;
	int rc;

	if(stopping(r))
		return STOPPING;
	if(strcmp(type, "BOOKMARK") == 0) {
		set_rv(r, src ? src_rv : bookmark_rv(obj));
		atomic_fetch_add(&r->st.bookmarks, 1);
		r->watch_events++;
		return PRD_OK;
	}
	if(strcmp(type, "ERROR") == 0)
		return status_code(obj) == 410 ? PRD_EGONE : PRD_EIO;
	if(strcmp(type, "ADDED") == 0)
		t = KUBE_EV_ADDED;
	else if(strcmp(type, "MODIFIED") == 0)
		t = KUBE_EV_MODIFIED;
	else if(strcmp(type, "DELETED") == 0)
		t = KUBE_EV_DELETED;
	else {
		log_warn("reflector: unknown watch event type", "resource", r->name, "type", type);
		return PRD_OK;
	}
	if(src) {
		rv = src_rv;
		rc = r->store.event_src(r->store_ud, t, src);
	} else {
		kube_json_meta(obj, &ns, &name, &rv);
		rc = r->store.event(r->store_ud, t, obj);
	}
	r->watch_events++;
	if(rc == PRD_EINVAL) {
		atomic_fetch_add(&r->st.rejected, 1);
	} else if(rc) {
		r->store_rc = rc;
		return rc;
	} else {
		atomic_fetch_add(&r->st.events, 1);
	}
	set_rv(r, rv);
	return PRD_OK;
}

static int event_cb(void *ud, const char *type, json_object *obj)
{
	return event_any(ud, type, obj, NULL, NULL);
}

static int event_src_cb(void *ud, const char *type, const kube_item_src *src)
{
	kube_text_id id;
	json_tokener *tok;
	json_object *obj;
	int rc;

	if(src->obj)
		return event_any(ud, type, src->obj, NULL, NULL);
	if(kube_text_id_scan(src->json, src->len, src->max_depth, &id) == 0)
		return event_any(ud, type, NULL, src, id.rv);
	/* Text the scan leaves to json-c: the tree path decides. */
	if(!(tok = json_tokener_new_ex(src->max_depth)))
		return PRD_ENOMEM;
	obj = json_tokener_parse_ex(tok, src->json, (int)src->len);
	json_tokener_free(tok);
	rc = event_any(ud, type, obj, NULL, NULL);
	json_object_put(obj);
	return rc;
}

static void *reflector_main(void *p)
{
	kube_reflector *r = p;
	bool need_list = true, first = true;
	int rc;

	r->backoff = r->o.backoff_initial_ns;
	while(!stopping(r)) {
		int64_t start;
		long span, timeout;
		bool healthy;
		prd_err err;
		char *rv;

		if(need_list) {
			rc = do_list(r, first);
			if(stopping(r))
				break;
			if(rc) {
				atomic_fetch_add(&r->st.list_errors, 1);
				backoff_wait(r);
				continue;
			}
			first = false;
			need_list = false;
		}

		span = r->o.max_watch_timeout_s - r->o.min_watch_timeout_s + 1;
		timeout = r->o.min_watch_timeout_s + (long)((unsigned long)rand_r(&r->seed) % (unsigned long)span);
		r->watch_events = 0;
		r->store_rc = 0;
		prd_err_clear(&err);
		start = clk_mono(r->o.clock);
		if(atomic_fetch_add(&r->st.watches, 1) > 0)
			atomic_fetch_add(&r->st.watch_restarts, 1);
		rv = kube_reflector_resource_version(r);
		if(use_text(r))
			rc = r->lw.watch_text(r->lw.ud, rv ? rv : "", timeout, cancelled_cb, r, event_src_cb, r, &err);
		else
			rc = r->lw.watch(r->lw.ud, rv ? rv : "", timeout, cancelled_cb, r, event_cb, r, &err);
		free(rv);
		if(stopping(r))
			break;
		healthy = r->watch_events > 0 || clk_mono(r->o.clock) - start >= r->o.healthy_watch_ns;
		if(healthy)
			r->backoff = r->o.backoff_initial_ns;
		if(rc == PRD_EGONE) {
			atomic_fetch_add(&r->st.gone, 1);
			log_info("reflector: resourceVersion too old, relisting", "resource", r->name);
			need_list = true;
			if(!healthy)
				backoff_wait(r);
			continue;
		}
		if(r->store_rc) {
			/* The store lost an event: only a relist makes it whole. */
			log_warn("reflector: store failed, relisting", "resource", r->name, "error",
				 prd_strerror(r->store_rc));
			need_list = true;
			backoff_wait(r);
			continue;
		}
		if(rc == PRD_OK && healthy)
			continue;
		if(rc) {
			atomic_fetch_add(&r->st.watch_errors, 1);
			log_warn("reflector watch failed", "resource", r->name, "error",
				 err.msg[0] ? err.msg : prd_strerror(rc));
		}
		backoff_wait(r);
	}
	return NULL;
}

int kube_reflector_start(kube_reflector *r, prd_err *err)
{
	if(r->started)
		return prd_err_set(err, PRD_EINVAL, "reflector %s: already started", r->name);
	if(pthread_create(&r->thread, NULL, reflector_main, r))
		return prd_err_set(err, PRD_EIO, "reflector %s: cannot start a thread", r->name);
	r->started = true;
	return PRD_OK;
}

void kube_reflector_stop(kube_reflector *r)
{
	if(!r)
		return;
	pthread_mutex_lock(&r->mu);
	atomic_store(&r->stop, true);
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
	if(r->started && !r->joined) {
		pthread_join(r->thread, NULL);
		r->joined = true;
	}
}

void kube_reflector_free(kube_reflector *r)
{
	if(!r)
		return;
	kube_reflector_stop(r);
	pthread_cond_destroy(&r->cv);
	pthread_mutex_destroy(&r->mu);
	free(r->rv);
	free(r->name);
	free(r);
}

void kube_reflector_get_stats(kube_reflector *r, kube_reflector_stats *s)
{
	s->lists = atomic_load(&r->st.lists);
	s->relists = atomic_load(&r->st.relists);
	s->list_errors = atomic_load(&r->st.list_errors);
	s->watches = atomic_load(&r->st.watches);
	s->watch_restarts = atomic_load(&r->st.watch_restarts);
	s->watch_errors = atomic_load(&r->st.watch_errors);
	s->gone = atomic_load(&r->st.gone);
	s->events = atomic_load(&r->st.events);
	s->bookmarks = atomic_load(&r->st.bookmarks);
	s->rejected = atomic_load(&r->st.rejected);
}

char *kube_reflector_resource_version(kube_reflector *r)
{
	char *v;
	pthread_mutex_lock(&r->mu);
	v = r->rv ? str_dup(r->rv) : NULL;
	pthread_mutex_unlock(&r->mu);
	return v;
}

/* ------------------------------------------------ listwatch over a client */

typedef struct lw_client {
	kube_client *c;
	const kube_resource *r;
	const char *ns, *lsel, *fsel;
	long page;
} lw_client;

/* The list and watch options of a client listwatch (tree and text forms
 * alike). */
static kube_list_opts lwc_list_opts(const lw_client *l)
{
	kube_list_opts o;
	memset(&o, 0, sizeof(o));
	o.label_selector = l->lsel;
	o.field_selector = l->fsel;
	o.limit = l->page;
	return o;
}

static kube_watch_opts lwc_watch_opts(const lw_client *l, const char *rv, long timeout_s, bool (*cancelled)(void *),
				      void *cancel_ud)
{
	kube_watch_opts o;
	memset(&o, 0, sizeof(o));
	o.label_selector = l->lsel;
	o.field_selector = l->fsel;
	o.resource_version = rv;
	o.timeout_s = timeout_s;
	o.bookmarks = true;
	o.cancelled = cancelled;
	o.cancel_ud = cancel_ud;
	return o;
}

static int lwc_list(void *ud, kube_item_fn fn, void *fn_ud, char **rv, prd_err *err)
{
	lw_client *l = ud;
	kube_list_opts o = lwc_list_opts(l);
	return kube_list(l->c, l->r, l->ns, &o, fn, fn_ud, rv, NULL, err);
}

static int lwc_watch(void *ud, const char *rv, long timeout_s, bool (*cancelled)(void *), void *cancel_ud,
		     kube_event_fn fn, void *fn_ud, prd_err *err)
{
	lw_client *l = ud;
	kube_watch_opts o = lwc_watch_opts(l, rv, timeout_s, cancelled, cancel_ud);
	return kube_watch(l->c, l->r, l->ns, &o, fn, fn_ud, NULL, err);
}

static int lwc_list_text(void *ud, kube_src_fn fn, void *fn_ud, char **rv, prd_err *err)
{
	lw_client *l = ud;
	kube_list_opts o = lwc_list_opts(l);
	return kube_list_text(l->c, l->r, l->ns, &o, fn, fn_ud, rv, NULL, err);
}

static int lwc_watch_text(void *ud, const char *rv, long timeout_s, bool (*cancelled)(void *), void *cancel_ud,
			  kube_src_event_fn fn, void *fn_ud, prd_err *err)
{
	lw_client *l = ud;
	kube_watch_opts o = lwc_watch_opts(l, rv, timeout_s, cancelled, cancel_ud);
	return kube_watch_text(l->c, l->r, l->ns, &o, fn, fn_ud, NULL, err);
}

int kube_listwatch_client(kube_client *c, const kube_resource *r, const char *ns, const char *label_selector,
			  const char *field_selector, long page_size, kube_listwatch *out)
{
	lw_client *l = calloc(1, sizeof(*l));
	memset(out, 0, sizeof(*out));
	if(!l)
		return PRD_ENOMEM;
	l->c = c;
	l->r = r;
	l->ns = ns;
	l->lsel = label_selector;
	l->fsel = field_selector;
	l->page = page_size;
	out->list = lwc_list;
	out->watch = lwc_watch;
	out->list_text = lwc_list_text;
	out->watch_text = lwc_watch_text;
	out->ud = l;
	return PRD_OK;
}

void kube_listwatch_client_free(kube_listwatch *lw)
{
	if(!lw)
		return;
	free(lw->ud);
	lw->ud = NULL;
}
