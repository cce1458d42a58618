/* The helpers every part of the controller uses (ctl_int.h): fencing
 * (pr__may_act), the time of the next pass (pr__wake_at), and forgetting
 * what vanished (pr__forget_vanished). They read and write pr_ctl's fields
 * and nothing else. */
#include "provreq/ctl_int.h"
#include "ops/log.h"
#include "ops/metrics.h"
#include "util/str.h"

#include <stdlib.h>

bool pr__may_act(pr_ctl *c)
{
	if(c->fenced)
		return false;
	if(c->may_act && !c->may_act(c->may_act_ud)) {
		c->fenced = true;
		if(!c->fenced_out[0])
			str_copy(c->fenced_out, sizeof(c->fenced_out),
				 "the leader-election lease is not held with a margin (not renewed within the renew "
				 "deadline, or taken by another replica): nothing is written");
		log_warn("leadership may have been lost; this pass stops acting");
		metrics_counter_add(M_RECONCILE_ERRORS, METRICS_L("provreq", "fenced"), 1);
		return false;
	}
	return true;
}

void pr__wake_at(pr_ctl *c, int64_t t)
{
	if(c->deciding && t < c->req_wake)
		c->req_wake = t;
	if(t > c->now && t < c->next_wake)
		c->next_wake = t;
}

/* Remove the keys of `m` that are not in `live`. */
void pr__forget_vanished(hmap *m, const hmap *live)
{
	hmap_iter it;
	const char *k;
	char **drop = NULL;
	size_t n = 0, cap = 0, i;
	hmap_iter_init(&it, m);
	while(hmap_iter_next(&it, &k, NULL)) {
		if(hmap_has(live, k))
			continue;
		if(n == cap) {
			char **v = realloc(drop, (cap = cap ? cap * 2 : 16) * sizeof(*v));
			if(!v)
				break;
			drop = v;
		}
		if(!(drop[n] = str_dup(k)))
			break;
		n++;
	}
	for(i = 0; i < n; i++) {
		hmap_del(m, drop[i]);
		free(drop[i]);
	}
	free(drop);
}
