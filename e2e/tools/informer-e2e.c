/* informer-e2e: runs provreqd's reflector + informer caches for Nodes and
 * Pods against a real apiserver and answers questions about them, for the
 * e2e scenarios (e2e/scenarios/20-informer-*.sh).
 *
 * Usage: informer-e2e [--kubeconfig F] [--start-rv RV] CTLDIR NODE_SELECTOR POD_NAMESPACE
 *
 * It caches the Nodes matching NODE_SELECTOR and the Pods of POD_NAMESPACE,
 * creates CTLDIR/ready once both caches have synced, then serves one
 * request at a time: the scenario writes a command into CTLDIR/request
 * (atomically, by rename) and waits for CTLDIR/response:
 *
 *   compare nodes|pods  list the server now (one consistent page)
 *                       and compare name+resourceVersion sets with the
 *                       cache; retried for up to 60 s while objects are
 *                       still changing. A cached object newer than the
 *                       list's copy is not a mismatch (see cmp_obj). Answers "MATCH n=N" or
 *                       "MISMATCH n=N server=M missing=.. extra=.. stale=.. e.g. NAME".
 *   stats nodes|pods    "lists=.. relists=.. watches=.. watch_restarts=..
 *                       watch_errors=.. gone=.. events=.. rejected=.. len=..
 *                       net=.." where net = adds - deletes seen by a handler
 *   decode nodes|pods   list the server as the informers do (pages of 500
 *                       as JSON text) and decode every object both ways,
 *                       straight from the text and through json-c:
 *                       "DECODE n=N direct=D json_c=J differ=X", where
 *                       direct counts objects the text decoder read
 *                       without json-c and differ those where the two
 *                       results were not the same.
 *   quit                answers "BYE" and exits.
 *
 * --start-rv RV makes the first watch of each reflector start at RV
 * instead of the list's resourceVersion (to provoke 410 Gone with a
 * compacted version). */
#include <json-c/json.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kube/client.h"
#include "kube/informer.h"
#include "kube/objects.h"
#include "kube/reflector.h"
#include "ops/log.h"
#include "util/hmap.h"
#include "util/str.h"

#include "../../tests/unit/decode_same.h"

typedef struct cache {
	const char *what;
	kube_kind kind;
	const kube_resource *res;
	const char *ns, *lsel;
	kube_informer *inf;
	kube_listwatch lw;       /* the client's */
	kube_listwatch wrap;     /* with the --start-rv override */
	const char *start_rv;
	atomic_int first_watch_done;
	atomic_long adds, deletes;
} cache;

static kube_client *client;

static int wrap_list(void *ud, kube_item_fn fn, void *fn_ud, char **rv, prd_err *err)
{
	cache *c = ud;
	return c->lw.list(c->lw.ud, fn, fn_ud, rv, err);
}

static int wrap_watch(void *ud, const char *rv, long timeout_s, bool (*cancelled)(void *), void *cancel_ud,
		      kube_event_fn fn, void *fn_ud, prd_err *err)
{
	cache *c = ud;
	if(c->start_rv && !atomic_exchange(&c->first_watch_done, 1))
		rv = c->start_rv;
	return c->lw.watch(c->lw.ud, rv, timeout_s, cancelled, cancel_ud, fn, fn_ud, err);
}

/* The text forms, as `provreqd run` uses them. */
static int wrap_list_text(void *ud, kube_src_fn fn, void *fn_ud, char **rv, prd_err *err)
{
	cache *c = ud;
	return c->lw.list_text(c->lw.ud, fn, fn_ud, rv, err);
}

static int wrap_watch_text(void *ud, const char *rv, long timeout_s, bool (*cancelled)(void *), void *cancel_ud,
			   kube_src_event_fn fn, void *fn_ud, prd_err *err)
{
	cache *c = ud;
	if(c->start_rv && !atomic_exchange(&c->first_watch_done, 1))
		rv = c->start_rv;
	return c->lw.watch_text(c->lw.ud, rv, timeout_s, cancelled, cancel_ud, fn, fn_ud, err);
}

static void on_add(void *ud, const kube_meta *m)
{
	atomic_fetch_add(&((cache *)ud)->adds, 1);
}

static void on_delete(void *ud, const kube_meta *m)
{
	atomic_fetch_add(&((cache *)ud)->deletes, 1);
}

static int start_cache(cache *c, kube_kind kind, kube_intern *in)
{
	kube_informer_opts o;
	kube_handler h = { on_add, NULL, on_delete, c };
	prd_err e;
	int rc;

	memset(&o, 0, sizeof(o));
	c->kind = kind;
	o.kind = kind;
	o.intern = in;
	o.reflector.name = c->what;
	if((rc = kube_listwatch_client(client, c->res, c->ns, c->lsel, NULL, 500, &c->lw)) != 0 ||
	   (rc = kube_informer_new(&o, &c->inf, &e)) != 0) {
		fprintf(stderr, "informer-e2e: %s: %s\n", c->what, prd_strerror(rc));
		return rc;
	}
	c->wrap.list = wrap_list;
	c->wrap.watch = wrap_watch;
	c->wrap.list_text = wrap_list_text;
	c->wrap.watch_text = wrap_watch_text;
	c->wrap.ud = c;
	kube_informer_add_handler(c->inf, &h);
	if((rc = kube_informer_start(c->inf, &c->wrap, &e)) != 0)
		fprintf(stderr, "informer-e2e: %s: %s\n", c->what, e.msg);
	return rc;
}

static int collect_item(void *ud, json_object *item)
{
	const char *ns, *name, *rv;
	char *v;
	if(kube_json_meta(item, &ns, &name, &rv))
		return 0;
	v = str_dup(rv);
	return v ? hmap_put(ud, name, v) : PRD_ENOMEM;
}

typedef struct cmp {
	hmap *server;
	long missing_on_server, stale, seen, ahead;
	char example[256];
} cmp;

static int cmp_obj(void *ud, const kube_meta *m)
{
	cmp *c = ud;
	const char *rv = hmap_get(c->server, m->name);
	c->seen++;
	if(!rv) {
		c->missing_on_server++;
		if(!c->example[0])
			snprintf(c->example, sizeof(c->example), "extra:%s@%s", m->name, m->rv);
	} else if(strcmp(rv, m->rv) != 0) {
		/* resourceVersions are etcd revisions here, so they order. A cache
		 * behind the server lost an update: that is a failure. A cache
		 * ahead of the list has every update and more; loaded CI runs
		 * showed lists from kube-apiserver that stayed behind its own
		 * watch for a few nodes (not explained yet), so that is counted
		 * and reported, not failed. */
		if(strtoull(m->rv, NULL, 10) > strtoull(rv, NULL, 10)) {
			c->ahead++;
		} else {
			c->stale++;
			if(!c->example[0])
				snprintf(c->example, sizeof(c->example), "stale:%s cache@%s server@%s", m->name, m->rv,
					 rv);
		}
	}
	return 0;
}

static void compare(cache *c, char *out, size_t n)
{
	int attempt;
	for(attempt = 0; attempt < 60; attempt++) {
		hmap server;
		kube_list_opts lo;
		cmp k;
		prd_err e;
		size_t len;
		int rc;

		memset(&k, 0, sizeof(k));
		memset(&lo, 0, sizeof(lo));
		lo.label_selector = c->lsel;
		/* One page, one consistent read. Paginated lists (limit 500) kept
		 * showing older versions of a few nodes than the cache for a whole
		 * minute in a loaded CI run; the cause is not pinned down. */
		lo.limit = 100000;
		hmap_init(&server, free);
		rc = kube_list(client, c->res, c->ns, &lo, collect_item, &server, NULL, NULL, &e);
		if(rc) {
			snprintf(out, n, "ERROR list: %s", e.msg);
			hmap_free(&server);
			sleep(1);
			continue;
		}
		k.server = &server;
		kube_informer_rdlock(c->inf);
		kube_informer_foreach(c->inf, cmp_obj, &k);
		len = kube_informer_len(c->inf);
		kube_informer_rdunlock(c->inf);
		if(!k.missing_on_server && !k.stale && len == hmap_len(&server)) {
			snprintf(out, n, "MATCH n=%zu", len);
			if(k.ahead)
				fprintf(stderr, "informer-e2e: %ld objects in the cache are newer than the list\n", k.ahead);
			hmap_free(&server);
			return;
		}
		snprintf(out, n, "MISMATCH n=%zu server=%zu missing=%ld extra=%ld stale=%ld e.g. %s", len,
			 hmap_len(&server), (long)hmap_len(&server) - (k.seen - k.missing_on_server),
			 k.missing_on_server, k.stale, k.example[0] ? k.example : "missing-in-cache");
		hmap_free(&server);
		sleep(1);
	}
}

typedef struct dcount {
	kube_kind kind;
	kube_intern *in;
	long n, direct, json_c, differ;
} dcount;

static int decode_item(void *ud, const kube_item_src *src)
{
	dcount *d = ud;
	kube_meta *m = NULL;
	d->n++;
	if(!src->json) {
		d->json_c++;
		return 0;
	}
	if(kube__decode_text_direct(d->kind, src->json, src->len, src->max_depth, d->in, &m) == 0)
		d->direct++;
	else
		d->json_c++;
	kube_obj_free(d->in, m);
	if(ds_check(d->kind, src->json, src->len, src->max_depth, d->in, NULL)) {
		if(!d->differ)
			fprintf(stderr, "informer-e2e: the decoders differ on %.*s\n", (int)(src->len > 4000 ? 4000 : src->len),
				src->json);
		d->differ++;
	}
	return 0;
}

static void decode_both(cache *c, char *out, size_t n)
{
	kube_list_opts lo;
	dcount d;
	prd_err e;
	int rc;

	memset(&lo, 0, sizeof(lo));
	memset(&d, 0, sizeof(d));
	lo.label_selector = c->lsel;
	lo.limit = 500;
	d.kind = c->kind;
	d.in = kube_intern_new();
	rc = d.in ? kube_list_text(client, c->res, c->ns, &lo, decode_item, &d, NULL, NULL, &e) : PRD_ENOMEM;
	if(rc)
		snprintf(out, n, "ERROR list: %s", rc == PRD_ENOMEM ? "out of memory" : e.msg);
	else
		snprintf(out, n, "DECODE n=%ld direct=%ld json_c=%ld differ=%ld", d.n, d.direct, d.json_c, d.differ);
	kube_intern_free(d.in);
}

static void stats(cache *c, char *out, size_t n)
{
	kube_reflector_stats s;
	size_t len;
	kube_informer_get_stats(c->inf, &s);
	kube_informer_rdlock(c->inf);
	len = kube_informer_len(c->inf);
	kube_informer_rdunlock(c->inf);
	snprintf(out, n,
		 "lists=%llu relists=%llu watches=%llu watch_restarts=%llu watch_errors=%llu gone=%llu events=%llu "
		 "rejected=%llu len=%zu net=%ld",
		 (unsigned long long)s.lists, (unsigned long long)s.relists, (unsigned long long)s.watches,
		 (unsigned long long)s.watch_restarts, (unsigned long long)s.watch_errors, (unsigned long long)s.gone,
		 (unsigned long long)s.events, (unsigned long long)s.rejected, len,
		 atomic_load(&c->adds) - atomic_load(&c->deletes));
}

static int write_file(const char *dir, const char *name, const char *text)
{
	char tmp[1024], path[1024];
	FILE *f;
	snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", dir, name);
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(tmp, "w");
	if(!f)
		return -1;
	fprintf(f, "%s\n", text);
	fclose(f);
	return rename(tmp, path);
}

int main(int argc, char **argv)
{
	const char *kubeconfig = NULL, *start_rv = NULL, *dir, *sel, *ns;
	kube_config *cfg = NULL;
	kube_client_opts o;
	kube_intern *in;
	cache nodes, pods;
	prd_err e;
	char req[1024], out[1024];
	int i = 1;

	while(i + 1 < argc && argv[i][0] == '-') {
		if(strcmp(argv[i], "--kubeconfig") == 0)
			kubeconfig = argv[i + 1];
		else if(strcmp(argv[i], "--start-rv") == 0)
			start_rv = argv[i + 1];
		else
			break;
		i += 2;
	}
	if(argc - i != 3) {
		fprintf(stderr, "usage: informer-e2e [--kubeconfig F] [--start-rv RV] CTLDIR NODE_SELECTOR POD_NAMESPACE\n");
		return 2;
	}
	dir = argv[i];
	sel = argv[i + 1];
	ns = argv[i + 2];
	log_setup(PRD_LOG_INFO, PRD_LOG_TEXT, NULL);
	memset(&o, 0, sizeof(o));
	if(kube_config_auto(kubeconfig, NULL, &cfg, &e) || kube_client_new(cfg, &o, &client, &e)) {
		fprintf(stderr, "informer-e2e: %s\n", e.msg);
		return 1;
	}
	in = kube_intern_new();
	memset(&nodes, 0, sizeof(nodes));
	memset(&pods, 0, sizeof(pods));
	nodes.what = "nodes";
	nodes.res = &KUBE_NODES;
	nodes.lsel = sel;
	nodes.start_rv = start_rv;
	pods.what = "pods";
	pods.res = &KUBE_PODS;
	pods.ns = ns;
	pods.start_rv = start_rv;
	if(start_cache(&nodes, KUBE_KIND_NODE, in) || start_cache(&pods, KUBE_KIND_POD, in))
		return 1;
	if(!kube_informer_wait_synced(nodes.inf) || !kube_informer_wait_synced(pods.inf))
		return 1;
	write_file(dir, "ready", "ready");

	for(;;) {
		char path[1024];
		FILE *f;
		cache *c;
		snprintf(path, sizeof(path), "%s/request", dir);
		f = fopen(path, "r");
		if(!f) {
			struct timespec ts = { 0, 100 * 1000 * 1000 };
			nanosleep(&ts, NULL);
			continue;
		}
		req[0] = '\0';
		if(!fgets(req, sizeof(req), f))
			req[0] = '\0';
		fclose(f);
		unlink(path);
		str_trim(req);
		c = strstr(req, "pods") ? &pods : &nodes;
		if(str_starts_with(req, "compare"))
			compare(c, out, sizeof(out));
		else if(str_starts_with(req, "stats"))
			stats(c, out, sizeof(out));
		else if(str_starts_with(req, "decode"))
			decode_both(c, out, sizeof(out));
		else if(strcmp(req, "quit") == 0)
			break;
		else
			snprintf(out, sizeof(out), "ERROR unknown command '%.200s'", req);
		write_file(dir, "response", out);
	}
	kube_informer_free(pods.inf);
	kube_informer_free(nodes.inf);
	kube_listwatch_client_free(&pods.lw);
	kube_listwatch_client_free(&nodes.lw);
	kube_intern_free(in);
	kube_client_free(client);
	kube_config_free(cfg);
	write_file(dir, "response", "BYE");
	return 0;
}
