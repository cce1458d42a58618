/* Internal to src/sched: the snapshot's layout, shared by snapshot.c,
 * place.c and estimator.c. Not for other modules. */
#ifndef PRD_SCHED_SCHED_INT_H
#define PRD_SCHED_SCHED_INT_H

#include "sched/sched.h"
#include "util/hmap.h"

/* Bump allocator for everything the snapshot copies (names, labels,
 * selectors). Freed as a whole with the snapshot. */
typedef struct sched__chunk {
	struct sched__chunk *next;
	size_t used, cap;
	max_align_t data[];
} sched__chunk;

typedef struct sched__arena {
	sched__chunk *head;
} sched__arena;

void *sched__arena_alloc(sched__arena *a, size_t n);
char *sched__arena_str(sched__arena *a, const char *s);
/* Deep copies into the arena; NULL on allocation failure (or NULL input
 * for the selector). */
sched_label *sched__copy_labels(sched__arena *a, const sched_label *l, size_t n);
sched_label_selector *sched__copy_selector(sched__arena *a, const sched_label_selector *s);
sched_pod_term *sched__copy_terms(sched__arena *a, const sched_pod_term *t, size_t n);
sched_host_port *sched__copy_ports(sched__arena *a, const sched_host_port *p, size_t n);

/* A node's DRA devices and who holds each. */
typedef struct sched__ndev {
	const sched_device *devs;         /* arena; shared by the estimator's
	                                     fresh copies of a template */
	size_t n;
	int32_t holder[];                 /* per device: SCHED__FREE,
	                                     SCHED__HOLD_CLAIM, group + 1 or
	                                     -(booking + 2) */
} sched__ndev;

/* Counts are 32-bit and grouped so that the device pointer costs no size:
 * the node array is what placement walks. */
typedef struct sched__node {
	const char *name;
	const sched_label *labels;
	const sched_taint *taints;
	uint32_t n_labels;
	uint32_t n_taints;
	bool unschedulable;
	int32_t zone;                     /* index into zones, -1 = no zone label */
	sched__ndev *dev;                 /* NULL without devices (malloc'd) */
	int64_t alloc[SCHED_RES_MAX];
	int64_t used[SCHED_RES_MAX];      /* pods + bookings, saturating */
	sched_host_port *ports;           /* in use on the node (malloc'd) */
	size_t n_ports, cap_ports;
} sched__node;

#define SCHED__FREE 0
#define SCHED__HOLD_CLAIM (-1)
#define SCHED__HOLD_BOOKING(b) (-(int32_t)(b) - 2)

typedef struct sched__gent {
	uint32_t node;
	int64_t count;
} sched__gent;

/* Identical pods: one entry per (namespace, labels) for plain running
 * pods, one per placement for simulated podSets and for pods carrying
 * anti-affinity terms. `ents` lists where they run. */
typedef struct sched__group {
	const char *ns;
	const sched_label *labels;
	size_t n_labels;
	int64_t req[SCHED_RES_MAX];       /* per pod, pods slot included */
	const sched_host_port *ports;
	size_t n_ports;
	const sched_pod_term *anti;
	size_t n_anti;
	sched__gent *ents;
	size_t n_ents, cap_ents;
	char *key;                        /* dedupe key when interned, else NULL */
	int64_t total;
} sched__group;

typedef struct sched__booking {
	const char *uid;
	uint32_t node;
	bool active;
	int64_t res[SCHED_RES_MAX];
} sched__booking;

enum {
	SCHED__U_NODE,       /* a node was appended */
	SCHED__U_GROUP,      /* a group was appended */
	SCHED__U_PODS,       /* count pods of group a added to node b */
	SCHED__U_BOOK,       /* booking a appended */
	SCHED__U_UNBOOK,     /* booking a deactivated */
	SCHED__U_DEV         /* device b of node a changed holder (was count) */
};

typedef struct sched__undo {
	uint8_t kind;
	bool appended;       /* PODS: a new group entry was appended */
	uint32_t a, b;
	int64_t count;
} sched__undo;

struct sched_snapshot {
	sched__arena arena;
	const char *res_names[SCHED_RES_MAX];
	size_t n_res;
	sched__node *nodes;
	size_t n_nodes, cap_nodes;
	hmap node_by_name;                /* name -> (idx + 1) */
	const char **zones;
	size_t n_zones, cap_zones;
	hmap zone_by_name;                /* zone -> (idx + 1) */
	sched__group *groups;
	size_t n_groups, cap_groups;
	hmap group_by_key;                /* key -> (idx + 1) */
	/* Booking uids, one arena copy each: the arena is not given back when
	 * a fork is reverted, and a kept snapshot is booked in a fork on every
	 * pass. */
	hmap uids;                        /* uid -> its copy */
	size_t n_anti_groups;             /* groups with anti-affinity terms */
	sched__booking *bookings;
	size_t n_bookings, cap_bookings;
	sched__undo *undo;
	size_t n_undo, cap_undo;
	size_t marks[SCHED_FORK_MAX];
	int depth;
};

/* Resource id of `name`, or -1 when the snapshot has never seen it. */
int sched__res_find(const sched_snapshot *s, const char *name);
/* Map a request list onto a vector (pods slot set to 1). *impossible is set
 * when a positive request names a resource no node has. */
void sched__req_vector(const sched_snapshot *s, const sched_res *req, size_t n,
		       int64_t out[SCHED_RES_MAX], bool *impossible);
/* A new group holding pods like `pod` with per-pod vector `req` (not
 * interned); its index goes to *gi. */
int sched__group_new(sched_snapshot *s, const sched_pod_spec *pod,
		     const int64_t req[SCHED_RES_MAX], size_t *gi);
/* Record `count` pods of group gi on node ni (resources, ports, entry). */
int sched__group_place(sched_snapshot *s, size_t gi, size_t ni, int64_t count);
/* Add a node sharing already-copied labels/taints (the estimator's fresh
 * template nodes). */
int sched__node_add_copied(sched_snapshot *s, const sched__node *proto, const char *name,
			   size_t *idx);
/* Remove the most recently added node, which must hold no pods or
 * bookings, and drop its undo record (the estimator trims unused fresh
 * nodes with it). */
void sched__node_pop(sched_snapshot *s);

/* Set the holder of device di of node ni, recording the old one. */
int sched__dev_hold(sched_snapshot *s, size_t ni, size_t di, int32_t holder);

/* DRA (dra.c). How many copies of `pod`'s device requests the devices can
 * serve, at most `limit`, given who holds them (NULL: all free). With
 * `picks` non-NULL, *picks gets (caller frees) the device indices chosen,
 * copy after copy, request after request. A selector that fails to
 * evaluate on a device makes the node serve none (the allocator aborts). */
int sched__dra_fit(const sched_device *devs, size_t nd, const int32_t *holder,
		   const sched_pod_spec *pod, int64_t limit, int64_t *fit, uint32_t **picks,
		   size_t *n_picks);
/* Allocate the devices of `count` copies of `pod` on node ni to `holder`. */
int sched__dra_take(sched_snapshot *s, size_t ni, const sched_pod_spec *pod, int64_t count,
		    int32_t holder);
/* Deep copy of a device list into the arena; NULL when out of memory. */
sched_device *sched__copy_devices(sched__arena *a, const sched_device *d, size_t n);

static inline int64_t sched__sat_add(int64_t a, int64_t b)
{
	int64_t r;
	if(__builtin_add_overflow(a, b, &r))
		return b > 0 ? INT64_MAX : INT64_MIN;
	return r;
}

static inline int64_t sched__sat_mul(int64_t a, int64_t b)
{
	int64_t r;
	if(__builtin_mul_overflow(a, b, &r))
		return INT64_MAX;
	return r;
}

#endif
