/* Reflector + informer cache against a scripted fake list-watch: pages,
 * events, bookmarks, 410s (HTTP and in-stream), disconnects and backoff,
 * all on a fake clock and a recorded sleep, so nothing here is timed. */
#include "testutil.h"
#include "kube/informer.h"
#include "kube/reflector.h"
#include "ops/log.h"
#include "util/clock.h"
#include "util/err.h"

#include <json-c/json.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ fake server */

#define MAX_OBJS 64
#define MAX_SESS 32
#define MAX_EVS 16
#define MAX_LOG 256

struct fake;

typedef struct fev {
	const char *type;  /* ADDED, MODIFIED, DELETED, BOOKMARK, ERROR */
	char *json;
} fev;

typedef struct fsess {
	fev ev[MAX_EVS];
	int nev;
	int end_rc;            /* what the watch returns after the events */
	int64_t advance_ns;    /* fake time the watch lasts */
	void (*mutate)(struct fake *f); /* server changes while it runs */
} fsess;

typedef struct fake {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	clk clock;             /* touched only on the reflector thread */

	char *objs[MAX_OBJS];  /* the server's current list */
	int nobjs;
	char list_rv[16];
	int page;
	int list_fail[8];      /* rc of list calls 0..7 (0 = succeed) */
	int lists;

	fsess sess[MAX_SESS];
	int nsess, next_sess;
	char watch_rv[MAX_SESS][16];
	long watch_timeout[MAX_SESS];
	bool idle;             /* script exhausted; the watch is parked */

	int64_t sleeps[MAX_LOG];
	int nsleeps;

	/* Called between list items (on the reflector thread). */
	void (*mid_list)(struct fake *f);
	kube_informer *inf;
	int mid_list_checks;
} fake;

static void fake_init(fake *f)
{
	memset(f, 0, sizeof(*f));
	pthread_mutex_init(&f->mu, NULL);
	pthread_cond_init(&f->cv, NULL);
	clk_fake_init(&f->clock, 1700000000LL * PRD_NS_PER_SEC);
	f->page = 2;
	strcpy(f->list_rv, "10");
}

static void fake_free(fake *f)
{
	int i, j;
	for(i = 0; i < f->nobjs; i++)
		free(f->objs[i]);
	for(i = 0; i < f->nsess; i++)
		for(j = 0; j < f->sess[i].nev; j++)
			free(f->sess[i].ev[j].json);
	pthread_cond_destroy(&f->cv);
	pthread_mutex_destroy(&f->mu);
}

static char *pod_json(const char *ns, const char *name, const char *rv, const char *node, const char *consume)
{
	char buf[1024];
	snprintf(buf, sizeof(buf),
		 "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"%s\",\"namespace\":\"%s\","
		 "\"resourceVersion\":\"%s\",\"uid\":\"u-%s\",\"labels\":{\"app\":\"web\"}%s%s%s},"
		 "\"spec\":{%s%s%s\"containers\":[{\"name\":\"c\",\"resources\":{\"requests\":{\"cpu\":\"100m\"}}}]},"
		 "\"status\":{\"phase\":\"Running\"}}",
		 name, ns, rv, name, consume ? ",\"annotations\":{\"autoscaling.x-k8s.io/consume-provisioning-request\":\"" : "",
		 consume ? consume : "", consume ? "\"}" : "", node ? "\"nodeName\":\"" : "", node ? node : "",
		 node ? "\"," : "");
	return strdup(buf);
}

static void set_obj(fake *f, int i, char *json)
{
	free(f->objs[i]);
	f->objs[i] = json;
	if(i >= f->nobjs)
		f->nobjs = i + 1;
}

static void add_ev(fsess *s, const char *type, char *json)
{
	s->ev[s->nev].type = type;
	s->ev[s->nev].json = json;
	s->nev++;
}

static char *bookmark(const char *rv)
{
	char buf[128];
	snprintf(buf, sizeof(buf), "{\"kind\":\"Pod\",\"metadata\":{\"resourceVersion\":\"%s\"}}", rv);
	return strdup(buf);
}

static int f_list(void *ud, kube_item_fn fn, void *fn_ud, char **rv, prd_err *err)
{
	fake *f = ud;
	int i, n, rc = 0;
	char *snap[MAX_OBJS];

	pthread_mutex_lock(&f->mu);
	i = f->lists++;
	if(i < 8 && f->list_fail[i]) {
		pthread_mutex_unlock(&f->mu);
		return prd_err_set(err, f->list_fail[i], "fake list failure %d", i);
	}
	n = f->nobjs;
	for(i = 0; i < n; i++)
		snap[i] = f->objs[i] ? strdup(f->objs[i]) : NULL;
	*rv = strdup(f->list_rv);
	pthread_mutex_unlock(&f->mu);

	/* Pages, parsed as the client does: one JSON document per page. */
	for(i = 0; i < n && !rc; i += f->page) {
		json_object *page = json_object_new_array();
		int j;
		for(j = i; j < n && j < i + f->page; j++)
			if(snap[j])
				json_object_array_add(page, json_tokener_parse(snap[j]));
		for(j = 0; j < (int)json_object_array_length(page) && !rc; j++) {
			rc = fn(fn_ud, json_object_array_get_idx(page, (size_t)j));
			if(f->mid_list)
				f->mid_list(f);
		}
		json_object_put(page);
	}
	for(i = 0; i < n; i++)
		free(snap[i]);
	if(rc) {
		free(*rv);
		*rv = NULL;
	}
	return rc;
}

static int f_watch(void *ud, const char *rv, long timeout_s, bool (*cancelled)(void *), void *cancel_ud,
		   kube_event_fn fn, void *fn_ud, prd_err *err)
{
	fake *f = ud;
	fsess *s;
	int i, rc = 0;

	pthread_mutex_lock(&f->mu);
	if(f->next_sess >= f->nsess) {
		/* Script over: park like an idle watch until cancelled. */
		f->idle = true;
		pthread_cond_broadcast(&f->cv);
		while(!cancelled(cancel_ud)) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 5 * PRD_NS_PER_MS;
			if(ts.tv_nsec >= PRD_NS_PER_SEC) {
				ts.tv_sec++;
				ts.tv_nsec -= PRD_NS_PER_SEC;
			}
			pthread_cond_timedwait(&f->cv, &f->mu, &ts);
		}
		pthread_mutex_unlock(&f->mu);
		return 0;
	}
	i = f->next_sess++;
	snprintf(f->watch_rv[i], sizeof(f->watch_rv[i]), "%s", rv);
	f->watch_timeout[i] = timeout_s;
	s = &f->sess[i];
	pthread_mutex_unlock(&f->mu);

	for(i = 0; i < s->nev && !rc; i++) {
		json_object *o = json_tokener_parse(s->ev[i].json);
		rc = fn(fn_ud, s->ev[i].type, o);
		json_object_put(o);
	}
	clk_fake_advance(&f->clock, s->advance_ns);
	if(s->mutate) {
		pthread_mutex_lock(&f->mu);
		s->mutate(f);
		pthread_mutex_unlock(&f->mu);
	}
	if(rc)
		return rc;
	if(s->end_rc)
		return prd_err_set(err, s->end_rc, "fake watch ends with %s", prd_strerror(s->end_rc));
	return 0;
}

/* The text forms of the fake (kube_listwatch list_text/watch_text): the
 * same script, each object handed over as its JSON text, as the client's
 * listwatch does. The tests run both ways (text_mode). */
static bool text_mode;

static int f_list_text(void *ud, kube_src_fn fn, void *fn_ud, char **rv, prd_err *err)
{
	fake *f = ud;
	int i, n, rc = 0;
	char *snap[MAX_OBJS];

	pthread_mutex_lock(&f->mu);
	i = f->lists++;
	if(i < 8 && f->list_fail[i]) {
		pthread_mutex_unlock(&f->mu);
		return prd_err_set(err, f->list_fail[i], "fake list failure %d", i);
	}
	n = f->nobjs;
	for(i = 0; i < n; i++)
		snap[i] = f->objs[i] ? strdup(f->objs[i]) : NULL;
	*rv = strdup(f->list_rv);
	pthread_mutex_unlock(&f->mu);
	for(i = 0; i < n && !rc; i++) {
		kube_item_src src = { snap[i], snap[i] ? strlen(snap[i]) : 0, 30, NULL };
		if(!snap[i])
			continue;
		rc = fn(fn_ud, &src);
		if(f->mid_list && (i + 1) % f->page == 0)
			f->mid_list(f);
	}
	for(i = 0; i < n; i++)
		free(snap[i]);
	if(rc) {
		free(*rv);
		*rv = NULL;
	}
	return rc;
}

/* Text events go through the tree fake's script with an adapter. */
typedef struct text_ev {
	kube_src_event_fn fn;
	void *ud;
} text_ev;

static int tree_to_text(void *ud, const char *type, json_object *obj)
{
	text_ev *t = ud;
	const char *json = json_object_to_json_string_ext(obj, JSON_C_TO_STRING_PLAIN);
	kube_item_src src = { json, strlen(json), 30, NULL };
	return t->fn(t->ud, type, &src);
}

static int f_watch(void *ud, const char *rv, long timeout_s, bool (*cancelled)(void *), void *cancel_ud,
		   kube_event_fn fn, void *fn_ud, prd_err *err);

static int f_watch_text(void *ud, const char *rv, long timeout_s, bool (*cancelled)(void *), void *cancel_ud,
			kube_src_event_fn fn, void *fn_ud, prd_err *err)
{
	text_ev t = { fn, fn_ud };
	return f_watch(ud, rv, timeout_s, cancelled, cancel_ud, tree_to_text, &t, err);
}

static void f_sleep(void *ud, int64_t ns)
{
	fake *f = ud;
	pthread_mutex_lock(&f->mu);
	if(f->nsleeps < MAX_LOG)
		f->sleeps[f->nsleeps++] = ns;
	pthread_mutex_unlock(&f->mu);
}

static void wait_idle(fake *f)
{
	pthread_mutex_lock(&f->mu);
	while(!f->idle)
		pthread_cond_wait(&f->cv, &f->mu);
	pthread_mutex_unlock(&f->mu);
}

/* ------------------------------------------------------------ handler log */

typedef struct hlog {
	char lines[MAX_LOG][96];
	int n;
} hlog;

static void h_add(void *ud, const kube_meta *m)
{
	hlog *l = ud;
	snprintf(l->lines[l->n++ % MAX_LOG], 96, "add %s/%s %s", m->ns, m->name, m->rv);
}

static void h_update(void *ud, const kube_meta *o, const kube_meta *m)
{
	hlog *l = ud;
	snprintf(l->lines[l->n++ % MAX_LOG], 96, "update %s/%s %s>%s", m->ns, m->name, o->rv, m->rv);
}

static void h_delete(void *ud, const kube_meta *o)
{
	hlog *l = ud;
	snprintf(l->lines[l->n++ % MAX_LOG], 96, "delete %s/%s %s", o->ns, o->name, o->rv);
}

static bool log_has(const hlog *l, const char *line)
{
	int i;
	for(i = 0; i < l->n && i < MAX_LOG; i++)
		if(strcmp(l->lines[i], line) == 0)
			return true;
	return false;
}

/* ------------------------------------------------------------ harness */

typedef struct harness {
	fake f;
	hlog log;
	kube_intern *in;
	kube_informer *inf;
	kube_listwatch lw;
} harness;

static void start(harness *h, kube_kind kind)
{
	kube_informer_opts o;
	kube_handler hd = { h_add, h_update, h_delete, &h->log };
	log_setup(PRD_LOG_ERROR, PRD_LOG_TEXT, NULL);
	memset(&o, 0, sizeof(o));
	h->in = kube_intern_new();
	o.kind = kind;
	o.intern = h->in;
	o.reflector.clock = &h->f.clock;
	o.reflector.sleep = f_sleep;
	o.reflector.sleep_ud = &h->f;
	o.reflector.seed = 42;
	CU_ASSERT_EQUAL_FATAL(kube_informer_new(&o, &h->inf, NULL), 0);
	CU_ASSERT_EQUAL(kube_informer_add_handler(h->inf, &hd), 0);
	h->f.inf = h->inf;
	h->lw.list = f_list;
	h->lw.watch = f_watch;
	h->lw.list_text = text_mode ? f_list_text : NULL;
	h->lw.watch_text = text_mode ? f_watch_text : NULL;
	h->lw.ud = &h->f;
	CU_ASSERT_EQUAL_FATAL(kube_informer_start(h->inf, &h->lw, NULL), 0);
	/* Registering after start is refused. */
	CU_ASSERT_EQUAL(kube_informer_add_handler(h->inf, &hd), PRD_EINVAL);
}

static void finish(harness *h)
{
	kube_informer_free(h->inf);
	CU_ASSERT_EQUAL(kube_intern_count(h->in), 0);
	kube_intern_free(h->in);
	fake_free(&h->f);
}

static const char *rv_of(kube_informer *inf, const char *ns, const char *name, char *buf)
{
	const kube_meta *m;
	kube_informer_rdlock(inf);
	m = kube_informer_get(inf, ns, name);
	snprintf(buf, 16, "%s", m ? m->rv : "-");
	kube_informer_rdunlock(inf);
	return buf;
}

static int count_cb(void *ud, const kube_meta *m)
{
	(*(int *)ud)++;
	return 0;
}

typedef struct on_node {
	const char *node;
	int n;
} on_node;

static int on_node_cb(void *ud, const kube_meta *m)
{
	on_node *o = ud;
	const kube_pod *p = (const kube_pod *)m;
	if(p->node_name && strcmp(p->node_name, o->node) == 0)
		o->n++;
	return 0;
}

/* How many cached pods are bound to `node` (under the read lock). */
static int pods_on(kube_informer *inf, const char *node)
{
	on_node o = { node, 0 };
	kube_informer_foreach(inf, on_node_cb, &o);
	return o.n;
}

/* ------------------------------------------------------------ tests */

static void test_list_then_watch(void)
{
	harness h;
	fsess *s;
	char b[16];
	kube_reflector_stats st;
	int n = 0;

	memset(&h, 0, sizeof(h));
	fake_init(&h.f);
	set_obj(&h.f, 0, pod_json("default", "p1", "5", "node-a", "req1"));
	set_obj(&h.f, 1, pod_json("default", "p2", "6", "node-a", NULL));
	set_obj(&h.f, 2, pod_json("other", "p3", "7", "node-b", "req1"));
	s = &h.f.sess[h.f.nsess++];
	add_ev(s, "ADDED", pod_json("default", "p4", "11", "node-b", "req1"));
	add_ev(s, "MODIFIED", pod_json("default", "p1", "12", "node-b", NULL));
	add_ev(s, "DELETED", pod_json("default", "p2", "13", "node-a", NULL));
	/* A replay of a version the cache holds changes nothing. */
	add_ev(s, "MODIFIED", pod_json("default", "p4", "11", "node-b", "req1"));
	add_ev(s, "BOOKMARK", bookmark("20"));
	s->end_rc = 0; /* the server closes the watch */
	start(&h, KUBE_KIND_POD);
	CU_ASSERT_TRUE(kube_informer_wait_synced(h.inf));
	wait_idle(&h.f);

	CU_ASSERT_EQUAL(h.log.n, 6);
	CU_ASSERT_TRUE(log_has(&h.log, "add default/p1 5"));
	CU_ASSERT_TRUE(log_has(&h.log, "add default/p2 6"));
	CU_ASSERT_TRUE(log_has(&h.log, "add other/p3 7"));
	/* Watch events arrive in order after the list. */
	CU_ASSERT_STRING_EQUAL(h.log.lines[3], "add default/p4 11");
	CU_ASSERT_STRING_EQUAL(h.log.lines[4], "update default/p1 5>12");
	CU_ASSERT_STRING_EQUAL(h.log.lines[5], "delete default/p2 6");

	/* The first watch starts at the list's version, the next one at the
	 * bookmark's. Timeouts are in [5, 10] minutes. */
	CU_ASSERT_STRING_EQUAL(h.f.watch_rv[0], "10");
	CU_ASSERT_STRING_EQUAL(h.f.watch_rv[1], "");
	CU_ASSERT_TRUE(h.f.watch_timeout[0] >= 300 && h.f.watch_timeout[0] <= 600);
	/* A healthy watch that the server closed is resumed at once. */
	CU_ASSERT_EQUAL(h.f.nsleeps, 0);

	kube_informer_rdlock(h.inf);
	CU_ASSERT_EQUAL(kube_informer_len(h.inf), 3);
	CU_ASSERT_PTR_NULL(kube_informer_get(h.inf, "default", "p2"));
	CU_ASSERT_PTR_NULL(kube_informer_get(h.inf, "other", "p1"));
	/* The cache holds the latest version of each pod: p1 moved to
	 * node-b, p2 (on node-a) is gone. */
	CU_ASSERT_EQUAL(pods_on(h.inf, "node-a"), 0);
	CU_ASSERT_EQUAL(pods_on(h.inf, "node-b"), 3);
	CU_ASSERT_EQUAL(kube_informer_foreach(h.inf, count_cb, &n), 0);
	CU_ASSERT_EQUAL(n, 3);
	kube_informer_rdunlock(h.inf);
	CU_ASSERT_STRING_EQUAL(rv_of(h.inf, "default", "p1", b), "12");

	kube_informer_get_stats(h.inf, &st);
	CU_ASSERT_EQUAL(st.lists, 1);
	CU_ASSERT_EQUAL(st.relists, 0);
	CU_ASSERT_EQUAL(st.events, 4);
	CU_ASSERT_EQUAL(st.bookmarks, 1);
	CU_ASSERT_EQUAL(st.watches, 2);
	CU_ASSERT_EQUAL(st.watch_restarts, 1);
	finish(&h);
}

/* Checks, from inside the relist, that readers still see the old contents
 * in full: the swap is atomic. */
static void mid_relist_check(fake *f)
{
	const kube_meta *b;
	if(f->lists < 2)
		return;
	kube_informer_rdlock(f->inf);
	b = kube_informer_get(f->inf, "ns", "b");
	if(kube_informer_len(f->inf) == 4 && b && strcmp(b->rv, "2") == 0)
		f->mid_list_checks++;
	kube_informer_rdunlock(f->inf);
}

/* While the watch ran: b deleted, c changed, e added (d came by event). */
static void server_moves_on(fake *f)
{
	free(f->objs[1]);
	f->objs[1] = NULL;
	free(f->objs[2]);
	f->objs[2] = pod_json("ns", "c", "9", "n2", NULL);
	set_obj(f, 3, pod_json("ns", "d", "4", "n1", NULL));
	set_obj(f, 4, pod_json("ns", "e", "10", "n2", NULL));
	strcpy(f->list_rv, "30");
}

static char *gone_status(void)
{
	return strdup("{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"Expired\",\"code\":410}");
}

static void run_gone(bool in_stream)
{
	harness h;
	fsess *s;
	char b[16];
	kube_reflector_stats st;

	memset(&h, 0, sizeof(h));
	fake_init(&h.f);
	h.f.mid_list = mid_relist_check;
	set_obj(&h.f, 0, pod_json("ns", "a", "1", "n1", NULL));
	set_obj(&h.f, 1, pod_json("ns", "b", "2", "n1", NULL));
	set_obj(&h.f, 2, pod_json("ns", "c", "3", "n1", NULL));
	s = &h.f.sess[h.f.nsess++];
	add_ev(s, "ADDED", pod_json("ns", "d", "4", "n1", NULL));
	s->mutate = server_moves_on;
	if(in_stream)
		add_ev(s, "ERROR", gone_status());
	else
		s->end_rc = PRD_EGONE;
	start(&h, KUBE_KIND_POD);
	CU_ASSERT_TRUE(kube_informer_wait_synced(h.inf));
	wait_idle(&h.f);

	CU_ASSERT_EQUAL(h.f.lists, 2);
	CU_ASSERT_TRUE(h.f.mid_list_checks > 0);
	CU_ASSERT_EQUAL(h.log.n, 7);
	CU_ASSERT_STRING_EQUAL(h.log.lines[3], "add ns/d 4");
	/* The relist's diff: no event for a or d, which did not change. */
	CU_ASSERT_TRUE(log_has(&h.log, "update ns/c 3>9"));
	CU_ASSERT_TRUE(log_has(&h.log, "add ns/e 10"));
	CU_ASSERT_TRUE(log_has(&h.log, "delete ns/b 2"));
	CU_ASSERT_STRING_EQUAL(rv_of(h.inf, "ns", "c", b), "9");
	CU_ASSERT_STRING_EQUAL(rv_of(h.inf, "ns", "b", b), "-");
	/* The watch after the relist starts from the new list's version. */
	CU_ASSERT_STRING_EQUAL(h.f.watch_rv[0], "10");
	CU_ASSERT_EQUAL(h.f.nsess, 1);
	kube_informer_rdlock(h.inf);
	CU_ASSERT_EQUAL(kube_informer_len(h.inf), 4);
	CU_ASSERT_EQUAL(pods_on(h.inf, "n1"), 2);
	CU_ASSERT_EQUAL(pods_on(h.inf, "n2"), 2);
	kube_informer_rdunlock(h.inf);
	kube_informer_get_stats(h.inf, &st);
	CU_ASSERT_EQUAL(st.gone, 1);
	CU_ASSERT_EQUAL(st.relists, 1);
	CU_ASSERT_EQUAL(st.lists, 2);
	/* The 410 came on a watch that delivered an event: healthy, so the
	 * relist happened without a wait. */
	CU_ASSERT_EQUAL(h.f.nsleeps, 0);
	finish(&h);
}

static void test_gone_http(void)
{
	run_gone(false);
}

static void test_gone_in_stream(void)
{
	run_gone(true);
}

/* An unchanged object survives a relist as the very same object: note
 * its address before the relist (on the reflector thread, under the read
 * lock). */
static const kube_meta *saved_obj;

static void keep_same(fake *f)
{
	kube_informer_rdlock(f->inf);
	saved_obj = kube_informer_get(f->inf, "ns", "a");
	kube_informer_rdunlock(f->inf);
	strcpy(f->list_rv, "50");
}

static void test_relist_keeps_unchanged(void)
{
	harness h;
	fsess *s;
	const kube_meta *after;

	memset(&h, 0, sizeof(h));
	fake_init(&h.f);
	set_obj(&h.f, 0, pod_json("ns", "a", "1", "n1", NULL));
	s = &h.f.sess[h.f.nsess++];
	s->mutate = keep_same;
	s->end_rc = PRD_EGONE;
	start(&h, KUBE_KIND_POD);
	wait_idle(&h.f);
	kube_informer_rdlock(h.inf);
	after = kube_informer_get(h.inf, "ns", "a");
	CU_ASSERT_PTR_NOT_NULL(after);
	CU_ASSERT_PTR_EQUAL(after, saved_obj);
	kube_informer_rdunlock(h.inf);
	/* One add from the first list, nothing from the relist. */
	CU_ASSERT_EQUAL(h.log.n, 1);
	CU_ASSERT_EQUAL(h.f.lists, 2);
	/* The 410 came on an unhealthy watch (no event, no time): backoff. */
	CU_ASSERT_EQUAL(h.f.nsleeps, 1);
	finish(&h);
}

static void test_backoff(void)
{
	harness h;
	int i;
	/* The last four waits: a watch healthy by an event resets (800 ms),
	 * the next failure doubles (1.6 s), a watch healthy by a minute open
	 * resets (800 ms), and a short clean close without events counts as
	 * a failure (1.6 s). */
	static const int64_t tail[] = { 800, 1600, 800, 1600 };
	fsess *s;

	memset(&h, 0, sizeof(h));
	fake_init(&h.f);
	set_obj(&h.f, 0, pod_json("ns", "a", "1", "n1", NULL));
	h.f.list_fail[0] = PRD_EIO;
	h.f.list_fail[1] = PRD_EAGAIN;
	for(i = 0; i < 8; i++)
		h.f.sess[h.f.nsess++].end_rc = PRD_EIO;
	s = &h.f.sess[h.f.nsess++];
	add_ev(s, "BOOKMARK", bookmark("15"));
	s->end_rc = PRD_EIO;
	h.f.sess[h.f.nsess++].end_rc = PRD_EIO;
	s = &h.f.sess[h.f.nsess++];
	s->advance_ns = 61 * PRD_NS_PER_SEC;
	s->end_rc = PRD_EIO;
	h.f.sess[h.f.nsess++].end_rc = 0;
	start(&h, KUBE_KIND_POD);
	wait_idle(&h.f);
	/* Two failed lists: 800 ms, 1.6 s; then the watch failures go on
	 * doubling from 3.2 s (one backoff for the whole list-watch). */
	CU_ASSERT_EQUAL_FATAL(h.f.nsleeps, 2 + 12);
	CU_ASSERT_EQUAL(h.f.sleeps[0], 800 * PRD_NS_PER_MS);
	CU_ASSERT_EQUAL(h.f.sleeps[1], 1600 * PRD_NS_PER_MS);
	/* After the lists, the sequence continues from 3.2 s. */
	CU_ASSERT_EQUAL(h.f.sleeps[2], 3200 * PRD_NS_PER_MS);
	CU_ASSERT_EQUAL(h.f.sleeps[3], 6400 * PRD_NS_PER_MS);
	CU_ASSERT_EQUAL(h.f.sleeps[4], 12800 * PRD_NS_PER_MS);
	CU_ASSERT_EQUAL(h.f.sleeps[5], 25600 * PRD_NS_PER_MS);
	for(i = 6; i < 10; i++)
		CU_ASSERT_EQUAL(h.f.sleeps[i], 30 * PRD_NS_PER_SEC);
	for(i = 10; i < 14; i++)
		CU_ASSERT_EQUAL(h.f.sleeps[i], tail[i - 10] * PRD_NS_PER_MS);
	/* Watches resumed from the list's version, and from the bookmark. */
	CU_ASSERT_STRING_EQUAL(h.f.watch_rv[0], "10");
	CU_ASSERT_STRING_EQUAL(h.f.watch_rv[9], "15");
	{
		kube_reflector_stats st;
		kube_informer_get_stats(h.inf, &st);
		CU_ASSERT_EQUAL(st.list_errors, 2);
		CU_ASSERT_EQUAL(st.lists, 1);
		CU_ASSERT_EQUAL(st.watch_errors, 11);
		CU_ASSERT_EQUAL(st.relists, 0);
	}
	finish(&h);
}

static void test_malformed_skipped(void)
{
	harness h;
	fsess *s;
	char b[16];
	kube_reflector_stats st;

	memset(&h, 0, sizeof(h));
	fake_init(&h.f);
	set_obj(&h.f, 0, pod_json("ns", "good", "1", "n1", NULL));
	set_obj(&h.f, 1, strdup("{\"metadata\":{\"name\":\"bad\",\"namespace\":\"ns\",\"resourceVersion\":\"2\"},"
				"\"spec\":{\"containers\":[{\"resources\":{\"requests\":{\"cpu\":\"lots\"}}}]}}"));
	set_obj(&h.f, 2, strdup("{\"metadata\":{\"namespace\":\"ns\"}}"));
	set_obj(&h.f, 3, pod_json("ns", "good2", "3", "n1", NULL));
	s = &h.f.sess[h.f.nsess++];
	add_ev(s, "ADDED", strdup("{\"metadata\":{\"name\":\"x\",\"namespace\":\"ns\",\"resourceVersion\":\"12\"},"
				  "\"spec\":{\"nodeName\":5}}"));
	add_ev(s, "MODIFIED", pod_json("ns", "good", "13", "n2", NULL));
	h.f.nsess++; /* an empty session records where the next watch starts */
	start(&h, KUBE_KIND_POD);
	wait_idle(&h.f);
	kube_informer_get_stats(h.inf, &st);
	CU_ASSERT_EQUAL(st.rejected, 3);
	CU_ASSERT_EQUAL(st.events, 1);
	CU_ASSERT_STRING_EQUAL(rv_of(h.inf, "ns", "good", b), "13");
	CU_ASSERT_STRING_EQUAL(rv_of(h.inf, "ns", "good2", b), "3");
	CU_ASSERT_STRING_EQUAL(rv_of(h.inf, "ns", "bad", b), "-");
	CU_ASSERT_STRING_EQUAL(rv_of(h.inf, "ns", "x", b), "-");
	/* The stream went on past the rejected object. */
	CU_ASSERT_STRING_EQUAL(h.f.watch_rv[1], "13");
	finish(&h);
}

static char *node_json(const char *name, const char *rv, const char *group)
{
	char buf[512];
	snprintf(buf, sizeof(buf),
		 "{\"kind\":\"Node\",\"metadata\":{\"name\":\"%s\",\"resourceVersion\":\"%s\","
		 "\"labels\":{\"provreqd.io/node-group\":\"%s\"}},\"status\":{\"allocatable\":{\"cpu\":\"4\"}}}",
		 name, rv, group);
	return strdup(buf);
}

static const char *group_of(kube_informer *inf, const char *name)
{
	const kube_node *nd = (const kube_node *)kube_informer_get(inf, NULL, name);
	return nd ? kube_kv_get(nd->labels, nd->nlabels, "provreqd.io/node-group") : NULL;
}

static void test_nodes_cluster_scoped(void)
{
	harness h;
	fsess *s;
	const char *g;

	memset(&h, 0, sizeof(h));
	fake_init(&h.f);
	set_obj(&h.f, 0, node_json("n1", "1", "gpu"));
	set_obj(&h.f, 1, node_json("n2", "2", "gpu"));
	set_obj(&h.f, 2, node_json("n3", "3", "cpu"));
	s = &h.f.sess[h.f.nsess++];
	add_ev(s, "MODIFIED", node_json("n2", "14", "cpu"));
	start(&h, KUBE_KIND_NODE);
	wait_idle(&h.f);

	kube_informer_rdlock(h.inf);
	CU_ASSERT_EQUAL(kube_informer_len(h.inf), 3);
	/* Cluster-scoped: any namespace argument means none. */
	CU_ASSERT_PTR_NOT_NULL(kube_informer_get(h.inf, NULL, "n1"));
	CU_ASSERT_PTR_NOT_NULL(kube_informer_get(h.inf, "whatever", "n1"));
	/* The update replaced n2 with its new labels. */
	g = group_of(h.inf, "n2");
	CU_ASSERT_TRUE(g && strcmp(g, "cpu") == 0);
	g = group_of(h.inf, "n1");
	CU_ASSERT_TRUE(g && strcmp(g, "gpu") == 0);
	kube_informer_rdunlock(h.inf);

	/* Three adds and one update; a cluster-scoped object has no
	 * namespace. */
	CU_ASSERT_EQUAL(h.log.n, 4);
	CU_ASSERT_TRUE(log_has(&h.log, "add /n1 1"));
	CU_ASSERT_TRUE(log_has(&h.log, "add /n2 2"));
	CU_ASSERT_TRUE(log_has(&h.log, "add /n3 3"));
	CU_ASSERT_STRING_EQUAL(h.log.lines[3], "update /n2 2>14");
	finish(&h);
}

static void test_stop_promptly(void)
{
	harness h;
	kube_informer_opts o;

	/* A watch parked forever and a backoff of an hour (really slept):
	 * stop must end both without waiting them out. */
	memset(&h, 0, sizeof(h));
	fake_init(&h.f);
	h.f.sess[h.f.nsess++].end_rc = PRD_EIO;
	memset(&o, 0, sizeof(o));
	h.in = kube_intern_new();
	o.kind = KUBE_KIND_POD;
	o.intern = h.in;
	o.reflector.backoff_initial_ns = 3600 * PRD_NS_PER_SEC;
	o.reflector.backoff_max_ns = 3600 * PRD_NS_PER_SEC;
	o.reflector.clock = &h.f.clock;
	CU_ASSERT_EQUAL_FATAL(kube_informer_new(&o, &h.inf, NULL), 0);
	h.lw.list = f_list;
	h.lw.watch = f_watch;
	h.lw.ud = &h.f;
	CU_ASSERT_EQUAL_FATAL(kube_informer_start(h.inf, &h.lw, NULL), 0);
	CU_ASSERT_TRUE(kube_informer_wait_synced(h.inf));
	kube_informer_stop(h.inf);
	kube_informer_stop(h.inf);
	/* The cache stays readable after stop. */
	CU_ASSERT_TRUE(kube_informer_has_synced(h.inf));
	finish(&h);

	/* Stop while the watch is parked. */
	memset(&h, 0, sizeof(h));
	fake_init(&h.f);
	start(&h, KUBE_KIND_POD);
	wait_idle(&h.f);
	kube_informer_stop(h.inf);
	finish(&h);
}

/* Driving the store directly, as the benchmark and the in-memory API do,
 * including an aborted list that must leave the cache untouched. */
static void test_store_direct(void)
{
	kube_intern *in = kube_intern_new();
	kube_informer_opts o;
	kube_informer *inf;
	const kube_store_ops *ops = kube_informer_store_ops();
	json_object *p1, *p2;
	char *t1 = pod_json("ns", "p1", "1", "n", NULL), *t2 = pod_json("ns", "p2", "2", "n", NULL);

	memset(&o, 0, sizeof(o));
	o.kind = KUBE_KIND_POD;
	o.intern = in;
	CU_ASSERT_EQUAL_FATAL(kube_informer_new(&o, &inf, NULL), 0);
	p1 = json_tokener_parse(t1);
	p2 = json_tokener_parse(t2);
	CU_ASSERT_EQUAL(ops->list_begin(inf), 0);
	CU_ASSERT_EQUAL(ops->list_item(inf, p1), 0);
	CU_ASSERT_EQUAL(ops->list_end(inf, true, "5"), 0);
	CU_ASSERT_TRUE(kube_informer_has_synced(inf));
	CU_ASSERT_EQUAL(ops->list_begin(inf), 0);
	CU_ASSERT_EQUAL(ops->list_item(inf, p2), 0);
	CU_ASSERT_EQUAL(ops->list_end(inf, false, NULL), 0);
	kube_informer_rdlock(inf);
	CU_ASSERT_EQUAL(kube_informer_len(inf), 1);
	CU_ASSERT_PTR_NOT_NULL(kube_informer_get(inf, "ns", "p1"));
	kube_informer_rdunlock(inf);
	/* The same name twice in one list: the later one wins. */
	CU_ASSERT_EQUAL(ops->list_begin(inf), 0);
	CU_ASSERT_EQUAL(ops->list_item(inf, p2), 0);
	CU_ASSERT_EQUAL(ops->list_item(inf, p2), 0);
	CU_ASSERT_EQUAL(ops->list_end(inf, true, "6"), 0);
	CU_ASSERT_EQUAL(kube_informer_len(inf), 1);
	CU_ASSERT_EQUAL(pods_on(inf, "n"), 1);
	CU_ASSERT_EQUAL(ops->event(inf, KUBE_EV_DELETED, p2), 0);
	CU_ASSERT_EQUAL(ops->event(inf, KUBE_EV_DELETED, p2), 0);
	CU_ASSERT_EQUAL(kube_informer_len(inf), 0);
	CU_ASSERT_EQUAL(pods_on(inf, "n"), 0);
	json_object_put(p1);
	json_object_put(p2);
	free(t1);
	free(t2);
	kube_informer_free(inf);
	CU_ASSERT_EQUAL(kube_intern_count(in), 0);
	kube_intern_free(in);
}

static kube_item_src text_src(const char *json)
{
	kube_item_src s = { json, strlen(json), 30, NULL };
	return s;
}

/* The store fed JSON text (kube_item_src), as the client's and the
 * in-memory API's listwatches feed it: same cache as with trees,
 * unchanged objects carried over on a relist, replayed events no-ops,
 * malformed objects rejected, text the scanner leaves to json-c still
 * taken. */
static void test_store_text(void)
{
	kube_intern *in = kube_intern_new();
	kube_informer_opts o;
	kube_informer *inf;
	const kube_store_ops *ops = kube_informer_store_ops();
	char *t1 = pod_json("ns", "p1", "1", "n", NULL), *t2 = pod_json("ns", "p2", "2", "n", NULL);
	char *t2b = pod_json("ns", "p2", "3", "m", NULL);
	const char *bad = "{\"metadata\":{\"name\":\"nons\"}}";
	const char *odd = "{\"metadata\":{\"name\":\"p3\",\"namespace\":\"ns\",\"resourceVersion\":\"4\",},}";
	kube_item_src s1 = text_src(t1), s2 = text_src(t2), s2b = text_src(t2b), sb = text_src(bad), so = text_src(odd);
	const kube_meta *m1, *m2;

	memset(&o, 0, sizeof(o));
	o.kind = KUBE_KIND_POD;
	o.intern = in;
	CU_ASSERT_EQUAL_FATAL(kube_informer_new(&o, &inf, NULL), 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ops->list_item_src);
	CU_ASSERT_EQUAL(ops->list_begin(inf), 0);
	CU_ASSERT_EQUAL(ops->list_item_src(inf, &s1), 0);
	CU_ASSERT_EQUAL(ops->list_item_src(inf, &sb), PRD_EINVAL);
	CU_ASSERT_EQUAL(ops->list_end(inf, true, "5"), 0);
	CU_ASSERT_EQUAL(kube_informer_len(inf), 1);
	m1 = kube_informer_get(inf, "ns", "p1");
	CU_ASSERT_PTR_NOT_NULL_FATAL(m1);
	CU_ASSERT_EQUAL(kube_as_pod(m1)->nrequests, 1);
	/* Relist: p1 unchanged is the same object; p2 is new. */
	CU_ASSERT_EQUAL(ops->list_begin(inf), 0);
	CU_ASSERT_EQUAL(ops->list_item_src(inf, &s1), 0);
	CU_ASSERT_EQUAL(ops->list_item_src(inf, &s2), 0);
	CU_ASSERT_EQUAL(ops->list_item_src(inf, &sb), PRD_EINVAL);
	CU_ASSERT_EQUAL(ops->list_end(inf, true, "6"), 0);
	CU_ASSERT_EQUAL(kube_informer_len(inf), 2);
	CU_ASSERT_PTR_EQUAL(kube_informer_get(inf, "ns", "p1"), m1);
	m2 = kube_informer_get(inf, "ns", "p2");
	/* A replayed event changes nothing; a newer one replaces. */
	CU_ASSERT_EQUAL(ops->event_src(inf, KUBE_EV_MODIFIED, &s2), 0);
	CU_ASSERT_PTR_EQUAL(kube_informer_get(inf, "ns", "p2"), m2);
	CU_ASSERT_EQUAL(ops->event_src(inf, KUBE_EV_MODIFIED, &s2b), 0);
	CU_ASSERT_STRING_EQUAL(kube_informer_get(inf, "ns", "p2")->rv, "3");
	CU_ASSERT_EQUAL(pods_on(inf, "m"), 1);
	CU_ASSERT_EQUAL(ops->event_src(inf, KUBE_EV_ADDED, &sb), PRD_EINVAL);
	/* Trailing commas: json-c's to read, and it does. */
	CU_ASSERT_EQUAL(ops->event_src(inf, KUBE_EV_ADDED, &so), 0);
	CU_ASSERT_PTR_NOT_NULL(kube_informer_get(inf, "ns", "p3"));
	CU_ASSERT_EQUAL(ops->event_src(inf, KUBE_EV_DELETED, &s1), 0);
	CU_ASSERT_EQUAL(ops->event_src(inf, KUBE_EV_DELETED, &so), 0);
	CU_ASSERT_EQUAL(kube_informer_len(inf), 1);
	free(t1);
	free(t2);
	free(t2b);
	kube_informer_free(inf);
	CU_ASSERT_EQUAL(kube_intern_count(in), 0);
	kube_intern_free(in);
}

/* The same scenarios with objects handed over as text. */
#define TEXT_TOO(name) \
	static void name##_text(void) \
	{ \
		text_mode = true; \
		name(); \
		text_mode = false; \
	}
TEXT_TOO(test_list_then_watch)
TEXT_TOO(test_gone_in_stream)
TEXT_TOO(test_relist_keeps_unchanged)
TEXT_TOO(test_malformed_skipped)
TEXT_TOO(test_nodes_cluster_scoped)

typedef struct seen_keys {
	char v[64][32];
	int n;
} seen_keys;

static int note_key(void *ud, const char *ns, const char *name)
{
	seen_keys *s = ud;
	if(s->n < 64)
		snprintf(s->v[s->n++], sizeof(s->v[0]), "%s/%s", ns, name);
	return 0;
}

/* The change journal: the keys changed since a generation, oldest first;
 * PRD_ERANGE after a relist, for a generation from the future, and for
 * one older than the journal keeps. */
static void test_changes_journal(void)
{
	kube_intern *in = kube_intern_new();
	kube_informer_opts o;
	kube_informer *inf;
	const kube_store_ops *ops = kube_informer_store_ops();
	char *t[3] = { pod_json("ns", "a", "1", "n", NULL), pod_json("ns", "b", "2", "n", NULL),
		       pod_json("ns", "a", "3", "m", NULL) };
	json_object *p[3];
	uint64_t g0, g1;
	seen_keys s;
	int i;

	memset(&o, 0, sizeof(o));
	o.kind = KUBE_KIND_POD;
	o.intern = in;
	CU_ASSERT_EQUAL_FATAL(kube_informer_new(&o, &inf, NULL), 0);
	for(i = 0; i < 3; i++)
		p[i] = json_tokener_parse(t[i]);
	CU_ASSERT_EQUAL(ops->list_begin(inf), 0);
	CU_ASSERT_EQUAL(ops->list_end(inf, true, "1"), 0);
	g0 = kube_informer_generation(inf);
	CU_ASSERT_EQUAL(ops->event(inf, KUBE_EV_ADDED, p[0]), 0);
	CU_ASSERT_EQUAL(ops->event(inf, KUBE_EV_ADDED, p[1]), 0);
	g1 = kube_informer_generation(inf);
	CU_ASSERT_EQUAL(ops->event(inf, KUBE_EV_MODIFIED, p[2]), 0);
	CU_ASSERT_EQUAL(ops->event(inf, KUBE_EV_DELETED, p[1]), 0);
	memset(&s, 0, sizeof(s));
	CU_ASSERT_EQUAL(kube_informer_changes(inf, g0, note_key, &s), 0);
	CU_ASSERT_EQUAL(s.n, 4);
	CU_ASSERT_STRING_EQUAL(s.v[0], "ns/a");
	CU_ASSERT_STRING_EQUAL(s.v[1], "ns/b");
	CU_ASSERT_STRING_EQUAL(s.v[2], "ns/a");
	CU_ASSERT_STRING_EQUAL(s.v[3], "ns/b");
	memset(&s, 0, sizeof(s));
	CU_ASSERT_EQUAL(kube_informer_changes(inf, g1, note_key, &s), 0);
	CU_ASSERT_EQUAL(s.n, 2);
	memset(&s, 0, sizeof(s));
	CU_ASSERT_EQUAL(kube_informer_changes(inf, kube_informer_generation(inf), note_key, &s), 0);
	CU_ASSERT_EQUAL(s.n, 0);
	CU_ASSERT_EQUAL(kube_informer_changes(inf, kube_informer_generation(inf) + 1, note_key, &s), PRD_ERANGE);
	/* A replayed event changes nothing and is not a change. */
	g1 = kube_informer_generation(inf);
	CU_ASSERT_EQUAL(ops->event(inf, KUBE_EV_MODIFIED, p[2]), 0);
	CU_ASSERT_EQUAL(kube_informer_changes(inf, g1, note_key, &s), 0);
	CU_ASSERT_EQUAL(s.n, 0);
	/* A relist: what changed is not journaled. */
	CU_ASSERT_EQUAL(ops->list_begin(inf), 0);
	CU_ASSERT_EQUAL(ops->list_item(inf, p[1]), 0);
	CU_ASSERT_EQUAL(ops->list_end(inf, true, "4"), 0);
	CU_ASSERT_EQUAL(kube_informer_changes(inf, g1, note_key, &s), PRD_ERANGE);
	CU_ASSERT_EQUAL(kube_informer_changes(inf, kube_informer_generation(inf), note_key, &s), 0);
	/* More changes than the journal keeps: the oldest fall out. */
	g0 = kube_informer_generation(inf);
	for(i = 0; i < 20000; i++) {
		char rv[16], *js;
		json_object *po;
		snprintf(rv, sizeof(rv), "%d", 10 + i);
		js = pod_json("ns", "b", rv, "n", NULL);
		po = json_tokener_parse(js);
		CU_ASSERT_EQUAL(ops->event(inf, KUBE_EV_MODIFIED, po), 0);
		json_object_put(po);
		free(js);
	}
	CU_ASSERT_EQUAL(kube_informer_changes(inf, g0, note_key, &s), PRD_ERANGE);
	memset(&s, 0, sizeof(s));
	CU_ASSERT_EQUAL(kube_informer_changes(inf, kube_informer_generation(inf) - 3, note_key, &s), 0);
	CU_ASSERT_EQUAL(s.n, 3);
	for(i = 0; i < 3; i++) {
		json_object_put(p[i]);
		free(t[i]);
	}
	kube_informer_free(inf);
	CU_ASSERT_EQUAL(kube_intern_count(in), 0);
	kube_intern_free(in);
}

static const test_case cases[] = {
	{ "list_then_watch", test_list_then_watch },
	{ "gone_http", test_gone_http },
	{ "gone_in_stream", test_gone_in_stream },
	{ "relist_keeps_unchanged", test_relist_keeps_unchanged },
	{ "backoff", test_backoff },
	{ "malformed_skipped", test_malformed_skipped },
	{ "nodes_cluster_scoped", test_nodes_cluster_scoped },
	{ "stop_promptly", test_stop_promptly },
	{ "store_direct", test_store_direct },
	{ "store_text", test_store_text },
	{ "list_then_watch (text)", test_list_then_watch_text },
	{ "gone_in_stream (text)", test_gone_in_stream_text },
	{ "relist_keeps_unchanged (text)", test_relist_keeps_unchanged_text },
	{ "malformed_skipped (text)", test_malformed_skipped_text },
	{ "nodes_cluster_scoped (text)", test_nodes_cluster_scoped_text },
	{ "changes_journal", test_changes_journal },
	{ NULL, NULL }
};

TEST_MAIN("kube_informer", cases)
