/* pools-e2e: drive the ResourcePool population reconciler against a real
 * apiserver, for the e2e scenarios (e2e/scenarios/40-pools-*.sh).
 *
 * Usage: pools-e2e [--kubeconfig F] [--debounce-ms N] sync
 *        pools-e2e [--kubeconfig F] [--debounce-ms N] run IDLE_S MAX_S
 *
 * sync  one pass over every ResourcePool with the current nodes.
 * run   poll nodes and pools every 100 ms; a change of any node's or pool's
 *       resourceVersion marks the reconciler dirty (what informer handlers
 *       do in the daemon) and it syncs when its debounce allows. Ends once
 *       nothing changed for IDLE_S seconds and nothing is pending, or after
 *       MAX_S seconds.
 *
 * Prints one line of counters at the end:
 *   syncs=N writes=N conflicts=N errors=N invalid=N clamped=N events=N patches=N
 * followed by `patches POOL N` for every pool that was PATCHed (PATCH
 * requests counted at the kube_api seam). Exit 0, or 1 on an error. */
#include "kube/api.h"
#include "kube/client.h"
#include "kube/config.h"
#include "ops/log.h"
#include "pools/pools.h"
#include "util/hmap.h"
#include "util/str.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define POOLS_PATH "/apis/capsule.clastix.io/v1beta2/resourcepools"

typedef struct counting {
	kube_api inner;
	unsigned long patches;
	hmap per_pool;   /* name → (void *)(uintptr_t)count */
} counting;

static int counting_request(void *ud, const char *method, const char *path, const char *content_type,
			    const char *body, size_t body_len, long *status, char **resp, size_t *resp_len)
{
	counting *c = ud;
	if(!strcmp(method, "PATCH") && str_starts_with(path, POOLS_PATH "/")) {
		const char *name = path + strlen(POOLS_PATH) + 1;
		c->patches++;
		hmap_put(&c->per_pool, name, (void *)((uintptr_t)hmap_get(&c->per_pool, name) + 1));
	}
	return c->inner.request(c->inner.ud, method, path, content_type, body, body_len, status, resp, resp_len);
}

/* A fingerprint of a LIST: names and resourceVersions of every item. */
static uint64_t fingerprint(const kube_api *api, const char *path, int *rc, prd_err *err)
{
	json_object *list = NULL, *items = NULL;
	uint64_t h = 1469598103934665603ULL;
	size_t i, n;

	*rc = kube_api_call(api, "GET", path, NULL, NULL, &list, NULL, err);
	if(*rc)
		return 0;
	json_object_object_get_ex(list, "items", &items);
	n = json_object_is_type(items, json_type_array) ? json_object_array_length(items) : 0;
	for(i = 0; i < n; i++) {
		const char *ns, *name, *rv;
		if(kube_json_meta(json_object_array_get_idx(items, i), &ns, &name, &rv))
			continue;
		h = h * 31 + str_hash(name, strlen(name));
		h = h * 31 + str_hash(rv, strlen(rv));
	}
	json_object_put(list);
	return h ^ n;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

static int sync_once(pool_ctl *ctl, const kube_api *api, prd_err *err)
{
	pool_nodelist nl;
	int rc = pool_nodelist_load(api, &nl, err);
	if(!rc)
		rc = pool_ctl_sync(ctl, nl.nodes, nl.n, err);
	pool_nodelist_free(&nl);
	return rc;
}

int main(int argc, char **argv)
{
	const char *kubeconfig = NULL, *cmd;
	long debounce_ms = 2000;
	kube_config *cfg = NULL;
	kube_client *client = NULL;
	kube_client_opts copts = { 0 };
	counting cnt = { 0 };
	kube_api api;
	pool_opts po = { 0 };
	pool_ctl *ctl = NULL;
	pool_ctl_stats st;
	prd_err err = { 0 };
	int i = 1, rc = 0;

	log_setup(PRD_LOG_WARN, PRD_LOG_TEXT, NULL);
	for(; i < argc && !strncmp(argv[i], "--", 2); i += 2) {
		if(i + 1 >= argc)
			break;
		if(!strcmp(argv[i], "--kubeconfig"))
			kubeconfig = argv[i + 1];
		else if(!strcmp(argv[i], "--debounce-ms"))
			debounce_ms = atol(argv[i + 1]) > 0 ? atol(argv[i + 1]) : 2000;
		else
			break;
	}
	if(i >= argc) {
		fprintf(stderr, "usage: pools-e2e [--kubeconfig F] [--debounce-ms N] sync | run IDLE_S MAX_S\n");
		return 2;
	}
	cmd = argv[i];
	if((rc = kube_config_load(kubeconfig, NULL, &cfg, &err)) ||
	   (rc = kube_client_new(cfg, &copts, &client, &err))) {
		fprintf(stderr, "pools-e2e: %s\n", err.msg);
		kube_config_free(cfg);
		return 1;
	}
	cnt.inner = kube_api_from_client(client);
	hmap_init(&cnt.per_pool, NULL);
	api.request = counting_request;
	api.ud = &cnt;
	po.api = &api;
	po.debounce_ns = debounce_ms * PRD_NS_PER_MS;
	if((rc = pool_ctl_new(&po, &ctl, &err)))
		goto out;

	if(!strcmp(cmd, "sync")) {
		rc = sync_once(ctl, &api, &err);
	} else if(!strcmp(cmd, "run") && i + 2 < argc) {
		int64_t idle_ns = atol(argv[i + 1]) * PRD_NS_PER_SEC, max_ns = atol(argv[i + 2]) * PRD_NS_PER_SEC;
		int64_t start = clk_mono(clk_real()), last_change = start;
		uint64_t prev_nodes = 0, prev_pools = 0;
		bool first = true;
		for(;;) {
			int64_t now = clk_mono(clk_real()), wait;
			int r1, r2;
			uint64_t fn = fingerprint(&api, "/api/v1/nodes", &r1, &err);
			uint64_t fp = r1 ? 0 : fingerprint(&api, POOLS_PATH, &r2, &err);
			if(r1 || r2) {
				rc = r1 ? r1 : r2;
				break;
			}
			if(first || fn != prev_nodes || fp != prev_pools) {
				pool_ctl_mark_dirty(ctl);
				last_change = now;
			}
			first = false;
			prev_nodes = fn;
			prev_pools = fp;
			if(pool_ctl_due(ctl, &wait) && (rc = sync_once(ctl, &api, &err)))
				break;
			/* Our own writes change the pools' resourceVersions: take the
			 * fingerprint again so they do not count as outside changes. */
			if(!pool_ctl_due(ctl, &wait) && wait < 0) {
				prev_pools = fingerprint(&api, POOLS_PATH, &r2, &err);
				if(r2) {
					rc = r2;
					break;
				}
				if(now - last_change >= idle_ns)
					break;
			}
			if(now - start >= max_ns)
				break;
			sleep_ms(100);
		}
	} else {
		fprintf(stderr, "pools-e2e: unknown command %s\n", cmd);
		rc = PRD_EINVAL;
	}
out:
	if(ctl) {
		hmap_iter it;
		const char *k;
		void *v;
		pool_ctl_get_stats(ctl, &st);
		printf("syncs=%lu writes=%lu conflicts=%lu errors=%lu invalid=%lu clamped=%lu events=%lu patches=%lu\n",
		       st.syncs, st.writes, st.conflicts, st.errors, st.invalid, st.clamped, st.events, cnt.patches);
		hmap_iter_init(&it, &cnt.per_pool);
		while(hmap_iter_next(&it, &k, &v))
			printf("patches %s %lu\n", k, (unsigned long)(uintptr_t)v);
		if(st.errors)
			rc = rc ? rc : PRD_EIO;
	}
	if(rc)
		fprintf(stderr, "pools-e2e: %s\n", err.msg[0] ? err.msg : prd_strerror(rc));
	pool_ctl_free(ctl);
	hmap_free(&cnt.per_pool);
	kube_client_free(client);
	kube_config_free(cfg);
	return rc ? 1 : 0;
}
