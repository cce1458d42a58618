/* Expanders: pick one node-group option among those that fit every pod.
 *
 * A chain such as "priority,least-waste,random" applies each strategy in
 * turn to the options the previous ones kept; a strategy that keeps
 * exactly one decides, one that keeps none is skipped (as upstream
 * cluster-autoscaler does). Whatever ties remain after the chain go to the
 * earliest option in the caller's order, so the answer is deterministic.
 *
 * Strategies:
 *  least-waste  lowest (unused cpu share + unused memory share) of the new
 *               nodes (the default)
 *  most-pods    most pods placed
 *  least-nodes  fewest new nodes
 *  priority     highest priority whose regular expression (POSIX extended,
 *               unanchored like Go's MatchString) matches the group id;
 *               groups matching nothing are dropped. With an empty table
 *               (none given yet, as when the ConfigMap holding it is
 *               missing) it keeps nothing, so it is skipped like
 *               cluster-autoscaler skips it when its ConfigMap cannot be
 *               read: refusing "priority" without a table source is the
 *               configuration's job (ops/config.c).
 *  random       one of the remaining options, from a seeded generator
 *  price        cheapest new nodes (node count x the price an hour), among
 *               options whose cloud gives a price (auto-provisioned
 *               shapes); options without one are dropped, and when none
 *               has a price the strategy is skipped */
#ifndef PRD_SCHED_EXPANDER_H
#define PRD_SCHED_EXPANDER_H

#include "sched/sched.h"

typedef struct sched_option {
	const char *group_id;
	bool fits_all;            /* options that do not are never chosen */
	int64_t node_count;       /* new nodes */
	int64_t pods;             /* pods the option places */
	int64_t node_cpu;         /* template allocatable, millicores */
	int64_t node_memory;      /* template allocatable, bytes */
	int64_t req_cpu;          /* sum of the placed pods' requests */
	int64_t req_memory;
	/* The price of one new node an hour, in millionths of the cloud's
	 * unit, when the cloud says (has_price): the price expander keeps
	 * the cheapest options (node_count x price) among those with one. */
	bool has_price;
	int64_t price_micros;
} sched_option;

typedef struct sched_priority {
	int64_t priority;
	const char *const *regexes;
	size_t n_regexes;
} sched_priority;

typedef struct sched_expander sched_expander;

/* Build an expander from a chain ("least-waste" when NULL or empty). The
 * priority table (may be empty) is compiled and copied (borrowed for the
 * call only). PRD_EINVAL for unknown names or bad regular expressions.
 * Free with sched_expander_free(). */
int sched_expander_new(const char *chain, const sched_priority *prio, size_t n_prio,
		       uint64_t seed, sched_expander **out, prd_err *e);
void sched_expander_free(sched_expander *x);

/* Replace the priority table (compiled and copied; `prio` is borrowed for
 * the call). On error the old table stays. Not thread-safe: call from the
 * thread that calls sched_expander_choose. */
int sched_expander_set_priorities(sched_expander *x, const sched_priority *prio, size_t n_prio,
				  prd_err *e);

/* Does the chain name "priority"? */
bool sched_expander_uses_priority(const sched_expander *x);

/* Choose; *best gets the index into opts. PRD_ENOTFOUND when no option
 * fits all pods, PRD_EINVAL on bad input (negative figures, NULL ids). */
int sched_expander_choose(sched_expander *x, const sched_option *opts, size_t n, size_t *best,
			  prd_err *e);

#endif
