/* Internals of the atomic class's plans, shared by the files that hold
 * them (see atomic_int.h for what the rest of the class calls), lowest
 * first: atomic_plan_intents.c (the open intents a pass reads, kept across
 * passes, and the module's slots), atomic_plan_views.c (which instances
 * are a plan's), atomic_plan_cloud.c (the cloud calls and the sweep of
 * late ones), atomic_plan_adopt.c (the plan in the request's status, and
 * adopting it from there) and atomic_plan_rollback.c (the steps of a
 * rollback). nap.c sits between the intents and the rest: it reads the
 * open intents, and the files above it create, adopt and look up the
 * groups it records. */
#ifndef PRD_CLASSES_ATOMIC_PLAN_INT_H
#define PRD_CLASSES_ATOMIC_PLAN_INT_H

#include "classes/atomic_int.h"
#include "util/hmap.h"

/* The "known before" text begins with how the plan tells its instances
 * from the rest of the group (at_own), so a plan keeps its rule whatever
 * driver version later reads it: */
#define KNOWN_PREFIX "h1:"      /* AT_OWN_DIFF: new since the plan began */
#define KNOWN_PREFIX_TIME "t1:" /* AT_OWN_TIME: created after the plan began */
#define KNOWN_PREFIX_MARK "m1:" /* AT_OWN_MARK: carries the plan's owner token */
#define PREFIX_LEN 3
#define HASH_CHARS 8

/* One reading of the store's open intents. */
typedef struct at_list {
	struct at_list *next;
	state_intent *v;
	size_t n;
} at_list;

/* The module's kept slot (pr_class_host.kept): `cur` is what the store
 * held at intent version `version`, kept across passes while that version
 * does not move; NULL once the module wrote an intent. A reading replaced
 * stays in `retired` until a later pass starts (pr_class_host.pass_data
 * tells a new pass), since callers of the pass that replaced it may still
 * be walking it. */
typedef struct at_memo {
	at_list *cur;
	uint64_t version;
	at_list *retired;
	hmap progress_at;  /* plan id -> when its progress detail last changed (int64_t *) */
	hmap taken_at;     /* plan id -> when its ready nodes were first found taken (int64_t *) */
	hmap kviews;       /* plan id -> at_kview (see view_of) */
	int64_t swept_at;  /* when at_sweep_late last looked */
	hmap refused_at;   /* request uid -> when a plan record in its status was last refused (int64_t *) */
} at_memo;

/* The module's pass slot (pr_class_host.pass_data): what one pass works
 * out and may ask for again. */
typedef struct at_pass {
	hmap views; /* plan id -> at_view_memo (arena) */
	hmap nap;   /* group id -> a group a plan creates (arena; at_find_group) */
	bool version_seen; /* the store's intent version was compared this pass */
} at_pass;

/* What a plan's view was worked out from, kept across passes (in the
 * module's kept slot, by plan id): the group's instances as listed then,
 * which of them are the plan's, and whether each one's Node was Ready as
 * of node generation `nodes_gen`. A later pass whose listing names the same
 * instances in the same order looks again only at the instances that
 * changed and at those whose Node changed since (h->nodes_changed_since),
 * instead of asking the node table about every instance. */
enum {
	AT_KNOWN,   /* in the group before the plan began (or another plan's) */
	AT_MEMBER,  /* the plan's, up to its delta */
	AT_EXTRA,   /* (DIFF, TIME) new beyond the plan's size: not the plan's */
	AT_SURPLUS, /* (MARK) the plan's token beyond its delta: a repeated call's, to delete */
	AT_FOREIGN  /* (MARK, TIME) appeared since the plan began, not the plan's */
};

typedef struct at_kinst {
	char *id, *node;
	char *owner;    /* the owner token the cloud reports, or NULL */
	int32_t state, errclass;
	uint8_t kind;   /* AT_KNOWN, AT_MEMBER, AT_EXTRA */
	bool ready;     /* a member whose Node was Ready */
	bool dirty;     /* (during an update) its Node changed */
} at_kinst;

typedef struct at_kview {
	uint64_t nodes_gen;
	int64_t delta;
	at_own own;
	char token[AT_OWNER_MAX];
	char *known;    /* the intent's known_before */
	hmap known_set; /* decoded */
	size_t proven;  /* (TIME) instances the driver marked with the plan's token */
	at_kinst *v;
	size_t n;
	hmap by_node;   /* node name -> index + 1 */
} at_kview;

/* The module's kept slot, made on first use (NULL when out of memory or
 * the host keeps nothing); its first call in a pass makes the pass slot. */
at_memo *at__memo_of(const pr_class_host *h);
/* The pass's slot, made on its first call in a pass (NULL when out of
 * memory). */
at_pass *at__pass_of(const pr_class_host *h);
/* The pass's groups a plan creates, by id (at_find_group keeps them);
 * NULL when out of memory. */
hmap *at__pass_nap(const pr_class_host *h);
/* After an intent write: the next at_open_intents reads the store again. */
void at__written(const pr_class_host *h);
/* Frees a kept view (an at_kview *; NULL is fine). */
void at__kview_free(void *p);
/* Works out the kept view of plan `in` anew from g's listing: the caller
 * frees it with at__kview_free. NULL when out of memory. */
at_kview *at__kview_build(const pr_class_host *h, const pr_class_group *g, const state_intent *in);

#endif
