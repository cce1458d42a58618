/* The reconciler's metrics hooks wired to the process registry
 * (ops/metrics.h): provreqd_pool_nodes_selected, _populated_amount,
 * _clamped and _updates_total. */
#include "pools/pools.h"
#include "ops/metrics.h"
#include "util/str.h"

#include <stdlib.h>
#include <string.h>

static void g_nodes(void *ud, const char *pool, size_t n)
{
	(void)ud;
	metrics_gauge_set(M_POOL_NODES, METRICS_L(pool), (double)n);
}

/* Remember which (pool, key) children exist, so forget can remove them. */
static void g_populated(void *ud, const char *pool, const char *key, double amount, bool clamped)
{
	hmap *seen = ud;
	char *k = str_printf("%s\n%s", pool, key);

	metrics_gauge_set(M_POOL_POPULATED, METRICS_L(pool, key), amount);
	metrics_gauge_set(M_POOL_CLAMPED, METRICS_L(pool, key), clamped ? 1 : 0);
	if(k && !hmap_has(seen, k))
		hmap_put(seen, k, NULL);
	free(k);
}

static void g_update(void *ud, const char *pool, const char *result)
{
	(void)ud;
	metrics_counter_add(M_POOL_UPDATES, METRICS_L(pool, result), 1);
}

static void g_forget(void *ud, const char *pool)
{
	hmap *seen = ud;
	size_t n = strlen(pool), i, ngone = 0;
	char **gone = malloc((hmap_len(seen) + 1) * sizeof(*gone));
	hmap_iter it;
	const char *k;
	void *v;

	metrics_remove(M_POOL_NODES, METRICS_L(pool));
	if(!gone)
		return;
	hmap_iter_init(&it, seen);
	while(hmap_iter_next(&it, &k, &v))
		if(!strncmp(k, pool, n) && k[n] == '\n')
			gone[ngone++] = str_dup(k);
	for(i = 0; i < ngone; i++) {
		if(gone[i]) {
			const char *key = gone[i] + n + 1;
			metrics_remove(M_POOL_POPULATED, METRICS_L(pool, key));
			metrics_remove(M_POOL_CLAMPED, METRICS_L(pool, key));
			hmap_del(seen, gone[i]);
		}
		free(gone[i]);
	}
	free(gone);
}

pool_metrics_ops pool_metrics_registry(hmap *children)
{
	pool_metrics_ops o = { g_nodes, g_populated, g_update, g_forget, children };
	return o;
}
