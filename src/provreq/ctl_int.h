/* Internals of the ProvisioningRequest controller shared by its files:
 * controller.c (reading the cluster, status, bookings, the pass) and the
 * provisioning classes in src/classes/ (check-capacity, atomic scale-up).
 * Everything here runs on the controller's worker thread. */
#ifndef PRD_PROVREQ_CTL_INT_H
#define PRD_PROVREQ_CTL_INT_H

#include <json-c/json.h>
#include <stdint.h>

#include "driver/loader.h"
#include "kube/events.h"
#include "kube/objects.h"
#include "provreq/controller.h"
#include "provreq/request.h"
#include "sched/expander.h"
#include "sched/place.h"
#include "util/arena.h"
#include "util/hmap.h"

/* One node group of a loaded driver, as seen this pass. */
typedef struct pr_group {
	cloud_driver *drv;
	char *id;
	int32_t min, max, target;
	bool has_tmpl;
	sched_node_spec tmpl;     /* arrays in the pass arena */
	json_object *tmpl_json;   /* keeps the template's strings alive */
	bool backed_off;
	int64_t backoff_until;
	bool busy;                /* an open intent already targets it */
} pr_group;

/* Everything read at the start of a pass. */
typedef struct pr_world {
	kube_intern *in;
	kube_meta **objs;         /* every decoded object, for freeing */
	size_t nobjs, capobjs;
	/* The cluster as read at the start of the pass. nodes and pods are
	 * valid only while the world is being built (in informer mode they
	 * live in the caches, whose locks are released before any request is
	 * decided); everything below them is owned by the world. */
	kube_node **nodes;
	size_t nnodes;
	kube_pod **pods;
	size_t npods;
	kube_provreq **prs;       /* owned: decoded, or cloned from the cache */
	size_t nprs;
	hmap nodes_by_name;       /* name → PR_NODE_USABLE or PR_NODE_PRESENT */
	hmap tpls;                /* "ns/name" → PodTemplate `template` JSON (owned) */
	hmap consumers;           /* "ns/name" of a request → scheduled consumer pods */
	pr_group *groups;
	size_t ngroups;
	arena ar;
	sched_snapshot *snap;
	int64_t ready_nodes;
	const pr_informers *inf;  /* non-NULL: prs are clones made with inf->intern */
} pr_world;

/* Values of pr_world.nodes_by_name. */
#define PR_NODE_PRESENT ((void *)(uintptr_t)1)
#define PR_NODE_USABLE ((void *)(uintptr_t)2)

struct pr_ctl {
	pr_config cfg;
	const clk *clock;
	kube_api api;
	state_db *db;
	cloud_drivers *drivers;
	sched_expander *expander;
	kube_recorder *recorder;
	bool use_inf;
	pr_informers inf;
	/* uid → the resourceVersion a successful status write was based on. A
	 * cache that still shows that version has not seen our write yet, so
	 * the request is skipped rather than decided twice. */
	hmap written;
	/* provisioningClassDetails to write with the current request's status
	 * (set while deciding one request, consumed by its status write). */
	json_object *details;
	int64_t sizes_exported;   /* when node-group sizes were last listed */
	pr_stats stats;
	int64_t now;
	int64_t next_wake;
	pr_fence_fn may_act;      /* NULL: always allowed */
	void *may_act_ud;
	bool fenced;              /* may_act said no during this pass */
	bool need_rebuild;        /* rebuild the local store from the API first */
};

/* Fencing: may the controller call the cloud or write status now? Once it
 * says no, the rest of the pass acts on nothing. */
bool pr__may_act(pr_ctl *c);

/* Ask for another pass by wall time t (the earliest request wins). */
void pr__wake_at(pr_ctl *c, int64_t t);
pr_group *pr__find_group(pr_world *w, const char *id);
/* Set a condition and, on a transition, record an Event and metrics. */
void pr__set_cond(pr_ctl *c, const kube_provreq *pr, pr_conds *conds, const char *type, const char *status,
		  const char *reason, const char *msg);
/* A negative answer: retry after the request's backoff, or fail for good
 * with noRetry. */
void pr__not_provisioned(pr_ctl *c, const kube_provreq *pr, const pr_params *pp, pr_conds *conds,
			 const char *reason, const char *msg);
/* Record bookings for a placement (per node, the placed pods' requests). */
int pr__book_placement(pr_ctl *c, pr_world *w, const kube_provreq *pr, const sched_podset *sets, size_t n,
		       const sched_place_result *res, prd_err *err);
/* Names of the group's instances right now, into `names` (value: error
 * class + 1); *errored (optional) counts instances with an error. */
int pr__group_instances(pr_group *g, hmap *names, size_t *errored, prd_err *err);

/* src/classes/check_capacity.c */
void pr__check_capacity(pr_ctl *c, pr_world *w, const kube_provreq *pr, const pr_params *pp,
			sched_podset *sets, pr_conds *conds);

/* src/classes/atomic.c */
void pr__start_scale_up(pr_ctl *c, pr_world *w, const kube_provreq *pr, const pr_params *pp,
			sched_podset *sets, pr_conds *conds);
void pr__progress_intent(pr_ctl *c, pr_world *w, const state_intent *in, const kube_provreq *pr,
			 const pr_params *pp, sched_podset *sets, pr_conds *conds);
void pr__roll_back(pr_ctl *c, pr_world *w, const state_intent *in, const char *cause);
void pr__adopt_plan(pr_ctl *c, const kube_provreq *pr);

#endif
