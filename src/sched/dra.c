/* Dynamic Resource Allocation in the simulation: which devices of a node
 * a pod's device requests would get.
 *
 * Allocation is greedy: request after request (in the pod's order), the
 * first free devices, in the node's device order, that every selector of
 * the request accepts. The Kubernetes allocator backtracks when a later
 * request cannot be met; greedy may then say "no" where it says "yes"
 * (only when one pod has several requests whose selectors overlap), never
 * the other way round. Identical pods are allocated one after another, so
 * "how many copies fit" is the number of greedy rounds that succeed. */
#include "sched/sched_int.h"
#include "sched/cel.h"

#include <stdlib.h>
#include <string.h>

sched_device *sched__copy_devices(sched__arena *a, const sched_device *d, size_t n)
{
	sched_device *out = sched__arena_alloc(a, (n ? n : 1) * sizeof(*out));
	size_t i, k;
	if(!out)
		return NULL;
	for(i = 0; i < n; i++) {
		sched_dev_attr *at = sched__arena_alloc(a, (d[i].n_attrs ? d[i].n_attrs : 1) * sizeof(*at));
		sched_dev_cap *cp = sched__arena_alloc(a, (d[i].n_caps ? d[i].n_caps : 1) * sizeof(*cp));
		out[i] = d[i];
		out[i].driver = sched__arena_str(a, d[i].driver);
		out[i].pool = sched__arena_str(a, d[i].pool);
		out[i].name = sched__arena_str(a, d[i].name);
		if(!at || !cp || !out[i].driver || !out[i].pool || !out[i].name)
			return NULL;
		for(k = 0; k < d[i].n_attrs; k++) {
			at[k] = d[i].attrs[k];
			at[k].name = sched__arena_str(a, d[i].attrs[k].name);
			if(!at[k].name || (d[i].attrs[k].s && !(at[k].s = sched__arena_str(a, d[i].attrs[k].s))))
				return NULL;
		}
		for(k = 0; k < d[i].n_caps; k++) {
			cp[k] = d[i].caps[k];
			if(!(cp[k].name = sched__arena_str(a, d[i].caps[k].name)))
				return NULL;
		}
		out[i].attrs = at;
		out[i].caps = cp;
	}
	return out;
}

/* m[r * nd + d]: request r may take device d (every selector true).
 * PRD_EINVAL when a selector fails to evaluate on a device. */
static int match_matrix(const sched_device *devs, size_t nd, const sched_pod_spec *pod, uint8_t *m)
{
	size_t r, d, k;
	for(r = 0; r < pod->n_dev_requests; r++) {
		const sched_dev_request *q = &pod->dev_requests[r];
		for(d = 0; d < nd; d++) {
			int ok = 1;
			for(k = 0; k < q->n_selectors && ok == 1; k++)
				ok = sched_cel_eval(q->selectors[k], &devs[d], NULL);
			if(ok < 0)
				return PRD_EINVAL;
			m[r * nd + d] = (uint8_t)ok;
		}
	}
	return 0;
}

/* One copy's devices out of `avail` (cleared as taken), appended to
 * pick[*np]. false when a request cannot be met (avail is then partly
 * cleared: the caller stops). */
static bool alloc_copy(const uint8_t *m, size_t nd, const sched_pod_spec *pod, uint8_t *avail,
		       const int32_t *holder, uint32_t *pick, size_t *np)
{
	size_t r, d;
	for(r = 0; r < pod->n_dev_requests; r++) {
		const sched_dev_request *q = &pod->dev_requests[r];
		const uint8_t *row = m + r * nd;
		int64_t got = 0;
		if(q->all) {
			/* Every matching device, none of them held by anyone. */
			for(d = 0; d < nd; d++) {
				if(!row[d])
					continue;
				if(!avail[d] || (holder && holder[d] != SCHED__FREE))
					return false;
			}
		}
		for(d = 0; d < nd && (q->all || got < q->count); d++) {
			if(!row[d] || !avail[d])
				continue;
			avail[d] = 0;
			if(pick)
				pick[(*np)++] = (uint32_t)d;
			got++;
		}
		if(got == 0 || (!q->all && got < q->count))
			return false;
	}
	return true;
}

int sched__dra_fit(const sched_device *devs, size_t nd, const int32_t *holder,
		   const sched_pod_spec *pod, int64_t limit, int64_t *fit, uint32_t **picks,
		   size_t *n_picks)
{
	uint8_t *m = NULL, *avail = NULL;
	uint32_t *pick = NULL;
	size_t d, np = 0, mark;
	int64_t k = 0;
	int rc = 0;

	*fit = 0;
	if(picks)
		*picks = NULL;
	if(n_picks)
		*n_picks = 0;
	if(!pod->n_dev_requests) {
		*fit = limit;
		return 0;
	}
	if(!nd || limit <= 0)
		return 0;
	if(limit > (int64_t)nd)
		limit = (int64_t)nd; /* every copy takes at least one device */
	m = malloc(pod->n_dev_requests * nd);
	avail = malloc(nd);
	if(picks)
		pick = malloc(nd * sizeof(*pick)); /* copies never share a device */
	if(!m || !avail || (picks && !pick)) {
		rc = PRD_ENOMEM;
		goto done;
	}
	if(match_matrix(devs, nd, pod, m))
		goto done; /* an evaluation error: no copy fits here */
	for(d = 0; d < nd; d++)
		avail[d] = !holder || holder[d] == SCHED__FREE;
	for(k = 0; k < limit; k++) {
		mark = np;
		if(!alloc_copy(m, nd, pod, avail, holder, pick, &np)) {
			np = mark;
			break;
		}
	}
	*fit = k;
done:
	free(m);
	free(avail);
	if(picks && !rc) {
		*picks = pick;
		*n_picks = np;
	} else {
		free(pick);
	}
	return rc;
}

int sched__dra_take(sched_snapshot *s, size_t ni, const sched_pod_spec *pod, int64_t count,
		    int32_t holder)
{
	const sched__ndev *v = s->nodes[ni].dev;
	uint32_t *pick = NULL;
	size_t np = 0, i;
	int64_t fit = 0;
	int rc = 0;

	if(!pod->n_dev_requests || count <= 0)
		return 0;
	if(v)
		rc = sched__dra_fit(v->devs, v->n, v->holder, pod, count, &fit, &pick, &np);
	if(!rc && fit < count)
		rc = PRD_EINTERNAL; /* placement counted devices that are not there */
	for(i = 0; !rc && i < np; i++)
		rc = sched__dev_hold(s, ni, pick[i], holder);
	free(pick);
	return rc;
}
