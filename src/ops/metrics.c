/* The process-wide metrics registry (counters, gauges, histograms) and its
 * rendering in the Prometheus text format 0.0.4. */
#include "ops/metrics.h"
#include <config.h> /* autoconf's; "config.h" would find ops/config.h */
#include "ops/log.h"
#include "util/hmap.h"
#include "util/str.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One label set of a family. Histogram buckets hold per-bucket (not
 * cumulative) counts; rendering accumulates them. */
typedef struct mchild {
	char **values;
	double value;
	double sum;
	uint64_t count;
	uint64_t *bucket_counts; /* n_buckets entries; the +Inf bucket is `count` */
} mchild;

typedef struct mfamily {
	char *name;
	char *help;
	enum metrics_type type;
	char **labels;
	size_t n_labels;
	double *buckets;
	size_t n_buckets;
	hmap children; /* key: length-prefixed label values → mchild */
	bool warned;
} mfamily;

/* The registry is process-wide by design (CONVENTIONS: one of the two
 * allowed pieces of global mutable state). `mu` guards everything. */
static struct {
	pthread_mutex_t mu;
	mfamily **fams;
	int n;
	int cap;
	bool ready;
} reg = { PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, false };

const double metrics_default_buckets[] = { 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10 };
const size_t metrics_n_default_buckets = sizeof(metrics_default_buckets) / sizeof(metrics_default_buckets[0]);

/* Creation → Provisioned/Failed spans seconds to hours. */
static const double lifetime_buckets[] = { 1, 5, 10, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 86400 };

#define L(...) ((const char *const[]){ __VA_ARGS__, NULL })
#define NB(a) (sizeof(a) / sizeof((a)[0]))

/* The built-in families, indexed by enum metrics_id. docs/metrics.md
 * documents each one; tests/unit/test_docs.sh checks that it does. */
static const metrics_desc builtin[M_BUILTIN_COUNT] = {
	[M_BUILD_INFO] = { "provreqd_build_info", "Always 1; the version label names the running build.",
			   METRICS_GAUGE, L("version"), NULL, 0 },
	[M_REQUESTS] = { "provreqd_provisioning_requests",
			 "ProvisioningRequests currently known, by class and the condition they are in "
			 "(Pending, Accepted, Provisioned, Failed, BookingExpired, CapacityRevoked).",
			 METRICS_GAUGE, L("class", "condition"), NULL, 0 },
	[M_RECONCILE_DURATION] = { "provreqd_reconcile_duration_seconds",
				   "Time one controller pass over every request took, by controller.",
				   METRICS_HISTOGRAM, L("controller"), NULL, 0 },
	[M_RECONCILE_ERRORS] = { "provreqd_reconcile_errors_total",
				 "Controller passes that failed or stopped acting, by controller and reason; the next pass retries.",
				 METRICS_COUNTER, L("controller", "reason"), NULL, 0 },
	[M_TIME_TO_PROVISIONED] = { "provreqd_request_time_to_provisioned_seconds",
				    "Time from a request's creation to Provisioned=True, by class.",
				    METRICS_HISTOGRAM, L("class"), lifetime_buckets, NB(lifetime_buckets) },
	[M_TIME_TO_FAILED] = { "provreqd_request_time_to_failed_seconds",
			       "Time from a request's creation to Failed=True, by class and reason.",
			       METRICS_HISTOGRAM, L("class", "reason"), lifetime_buckets, NB(lifetime_buckets) },
	[M_SCALEUPS] = { "provreqd_scaleups_total",
			 "Node-group scale-ups by node group and result (attempted, succeeded, rolled_back).",
			 METRICS_COUNTER, L("node_group", "result"), NULL, 0 },
	[M_NODEGROUP_SIZE] = { "provreqd_node_group_size",
			       "Nodes the cloud driver reports in the node group.",
			       METRICS_GAUGE, L("node_group"), NULL, 0 },
	[M_NODEGROUP_TARGET] = { "provreqd_node_group_target_size",
				 "Target size of the node group.",
				 METRICS_GAUGE, L("node_group"), NULL, 0 },
	[M_NODEGROUP_MIN] = { "provreqd_node_group_min_size", "Minimum size of the node group.",
			      METRICS_GAUGE, L("node_group"), NULL, 0 },
	[M_NODEGROUP_MAX] = { "provreqd_node_group_max_size", "Maximum size of the node group.",
			      METRICS_GAUGE, L("node_group"), NULL, 0 },
	[M_NODEGROUP_BACKOFF] = { "provreqd_node_group_backoff",
				  "1 while the node group is backed off after a failed scale-up, else 0.",
				  METRICS_GAUGE, L("node_group"), NULL, 0 },
	[M_BOOKINGS] = { "provreqd_bookings_held",
			 "Provisioned requests whose capacity is currently booked, by class.",
			 METRICS_GAUGE, L("class"), NULL, 0 },
	[M_WATCH_RESTARTS] = { "provreqd_watch_restarts_total",
			       "Watches that ended and were restarted, by resource.",
			       METRICS_COUNTER, L("resource"), NULL, 0 },
	[M_RELISTS] = { "provreqd_relists_total",
			"Full lists made because a watch could not resume (410 Gone or an error), by resource.",
			METRICS_COUNTER, L("resource"), NULL, 0 },
	[M_API_REQUESTS] = { "provreqd_api_requests_total",
			     "Kubernetes API requests by verb and HTTP status code (0 = no response).",
			     METRICS_COUNTER, L("verb", "code"), NULL, 0 },
	[M_API_LATENCY] = { "provreqd_api_request_duration_seconds",
			    "Kubernetes API request latency by verb (watches excluded).",
			    METRICS_HISTOGRAM, L("verb"), NULL, 0 },
	[M_API_CONNECTIONS] = { "provreqd_api_connections_total",
				"Connections opened to the Kubernetes API server (each a TCP and, for https, a TLS "
				"handshake); requests reuse them, so this grows with watches and parallel writers, not "
				"with requests.",
				METRICS_COUNTER, NULL, NULL, 0 },
	[M_POOL_NODES] = { "provreqd_pool_nodes_selected",
			   "Nodes the ResourcePool's populate-from-nodes selector picks and that count.",
			   METRICS_GAUGE, L("pool"), NULL, 0 },
	[M_POOL_POPULATED] = { "provreqd_pool_populated_amount",
			       "Amount written to the pool's spec.quota.hard for a resource key "
			       "(cores for cpu, bytes for memory, a count otherwise).",
			       METRICS_GAUGE, L("pool", "resource"), NULL, 0 },
	[M_POOL_CLAMPED] = { "provreqd_pool_clamped",
			     "1 when the populated amount was raised to the pool's used amount, else 0.",
			     METRICS_GAUGE, L("pool", "resource"), NULL, 0 },
	[M_POOL_UPDATES] = { "provreqd_pool_updates_total",
			     "ResourcePool quota updates by pool and result (written, unchanged, invalid, conflict, error).",
			     METRICS_COUNTER, L("pool", "result"), NULL, 0 },
	[M_LEADER] = { "provreqd_leader", "1 while this replica holds the leader lease, else 0.",
		       METRICS_GAUGE, NULL, NULL, 0 },
	[M_LEADER_TRANSITIONS] = { "provreqd_leader_transitions_total",
				   "Leadership changes seen by this replica (acquired, lost).",
				   METRICS_COUNTER, L("event"), NULL, 0 },
	[M_LEADER_ACQUIRE_WAIT] = { "provreqd_leader_acquire_wait_seconds",
				    "Time this replica waited as a candidate before it last acquired the "
				    "lease (the failover time when it took over from a failed leader).",
				    METRICS_GAUGE, NULL, NULL, 0 },
	[M_STATE_ERRORS] = { "provreqd_state_store_errors_total",
			     "State store (SQLite) operations that failed, by operation.",
			     METRICS_COUNTER, L("op"), NULL, 0 },
	[M_UNOWNED] = { "provreqd_unowned_requests_total",
			"ProvisioningRequests seen whose class no module or driver here serves (each counted once).",
			METRICS_COUNTER, NULL, NULL, 0 },
	[M_SCALE_DOWNS] = { "provreqd_scale_downs_total",
			    "Idle nodes that provreqd added for a request and removed after its booking ended, by node group.",
			    METRICS_COUNTER, L("node_group"), NULL, 0 },
	[M_API_BOOKINGS] = { "provreqd_bookings_from_api",
			     "Bookings the last pass that placed pods counted from the requests' statuses alone: "
			     "other shards' (and this shard's that its state store lacks).",
			     METRICS_GAUGE, NULL, NULL, 0 },
	[M_LEDGER_WRITES] = { "provreqd_booking_ledger_writes_total",
			       "Writes of the booking ledger (operator.md, \"The booking ledger\"): booked (new bookings "
			       "recorded before their statuses), released (ended ones removed), conflict (another instance "
			       "wrote it since this pass read it: the pass's new bookings are decided again), error.",
			       METRICS_COUNTER, L("outcome"), NULL, 0 },
	[M_LEDGER_OBJECTS] = { "provreqd_booking_ledger_objects",
				"ConfigMaps the booking ledger spans, as this instance last read or wrote it: the head "
				"and the overflow objects it names (operator.md, \"The booking ledger\").",
				METRICS_GAUGE, NULL, NULL, 0 },
	[M_LEDGER_BYTES] = { "provreqd_booking_ledger_bytes",
			      "Bytes of entries in the booking ledger, as this instance last read or wrote it (a "
			      "ConfigMap holds at most 1 MiB; the ledger spills into overflow objects).",
			      METRICS_GAUGE, NULL, NULL, 0 },
	[M_SHARD_ORDER] = { "provreqd_placed_for_other_shards_total",
			    "Older requests of other shards, about to be decided there, whose pods were placed before "
			    "one of this shard's (so of two racing requests the older gets the room).",
			    METRICS_COUNTER, NULL, NULL, 0 },
	[M_PROCESS_CPU] = { "process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
			    METRICS_COUNTER, NULL, NULL, 0 },
	[M_PROCESS_START] = { "process_start_time_seconds",
			      "Start time of the process since unix epoch in seconds.",
			      METRICS_GAUGE, NULL, NULL, 0 },
	[M_PROCESS_RSS] = { "process_resident_memory_bytes", "Resident memory size in bytes.",
			    METRICS_GAUGE, NULL, NULL, 0 },
	[M_PROCESS_VMEM] = { "process_virtual_memory_bytes", "Virtual memory size in bytes.",
			     METRICS_GAUGE, NULL, NULL, 0 },
	[M_PROCESS_FDS] = { "process_open_fds", "Number of open file descriptors.",
			    METRICS_GAUGE, NULL, NULL, 0 },
	[M_PROCESS_MAX_FDS] = { "process_max_fds", "Maximum number of open file descriptors.",
				METRICS_GAUGE, NULL, NULL, 0 },
	[M_PCLASSES] = { "provreqd_provisioning_classes",
			 "ProvisioningClass objects, by whether requests can use them (usable=false: malformed, or "
			 "naming a class nobody here serves; each has a Warning Event).",
			 METRICS_GAUGE, L("usable"), NULL, 0 },
	[M_PLAN_REFUSED] = { "provreqd_plan_records_refused_total",
			     "Scale-up plan records in requests' statuses that provreqd did not believe, by reason: "
			     "missing (no seal), wrong (a sealed field was changed), other_key (sealed with another "
			     "plan key), no_key (this replica has no plan key), ownership (an ownership rule weaker than "
			     "the group's driver offers), implausible (a field the cloud or the limits contradict). "
			     "Each is also a Warning Event ScaleUpPlanRefused on the request.",
			     METRICS_COUNTER, L("reason"), NULL, 0 },
	[M_PLAN_KEY] = { "provreqd_plan_key_loaded",
			 "1 when this replica holds the plan key (the Secret provreqd-plan-key in its namespace) and so "
			 "seals the scale-up plans it writes and can adopt another replica's; 0 while it cannot read or "
			 "create it (it then runs its own plans only).",
			 METRICS_GAUGE, NULL, NULL, 0 },
	[M_STATE_ROWS] = { "provreqd_state_rows",
			   "Rows in each table of the state store (bounded: rows of vanished requests and old "
			   "closed plans are pruned).",
			   METRICS_GAUGE, L("table"), NULL, 0 },
	[M_FOREIGN_INSTANCES] = { "provreqd_node_group_foreign_instances",
				  "Instances that appeared in a node group while a provreqd plan on it was open and are not "
				  "the plan's: another actor (cluster-autoscaler, a MachineHealthCheck, another shard) is "
				  "scaling the group. provreqd leaves them alone.",
				  METRICS_GAUGE, L("node_group"), NULL, 0 },
	[M_PLAN_CONFLICTS] = { "provreqd_scaleup_conflicts_total",
			       "Scale-up calls that met another actor: the target moved since the plan was made "
			       "(target_moved; the conditional call did nothing and the request plans again), or a "
			       "repeated call made more of a plan's instances than it asked for (duplicate_instances; "
			       "deleted), or a call landed after its plan was rolled back (late_call; deleted).",
			       METRICS_COUNTER, L("node_group", "cause"), NULL, 0 },
};

static void child_free(void *p)
{
	mchild *c = p;
	size_t i;
	if(!c)
		return;
	for(i = 0; c->values && c->values[i]; i++)
		free(c->values[i]);
	free(c->values);
	free(c->bucket_counts);
	free(c);
}

static void family_free(mfamily *f)
{
	size_t i;
	if(!f)
		return;
	hmap_free(&f->children);
	for(i = 0; i < f->n_labels; i++)
		free(f->labels[i]);
	free(f->labels);
	free(f->buckets);
	free(f->name);
	free(f->help);
	free(f);
}

static bool valid_name(const char *s, bool colon)
{
	size_t i;
	if(!s || !*s)
		return false;
	for(i = 0; s[i]; i++) {
		char c = s[i];
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
			  (colon && c == ':') || (i > 0 && c >= '0' && c <= '9');
		if(!ok)
			return false;
	}
	return true;
}

static size_t count_strv(const char *const *v)
{
	size_t n = 0;
	while(v && v[n])
		n++;
	return n;
}

/* Key of a label set in a family's child map: each value prefixed by its
 * length, so no value can forge a separator. Caller frees. */
static char *child_key(const char *const *values, size_t n)
{
	buf b;
	size_t i;
	buf_init(&b);
	buf_append_char(&b, '#');
	for(i = 0; i < n; i++)
		buf_printf(&b, "%zu:%s", strlen(values[i]), values[i]);
	return buf_detach(&b);
}

/* Build a family from its description, or fail with a message. Runs
 * without the lock; the caller inserts the result. */
static int family_new(const metrics_desc *d, mfamily **out, prd_err *err)
{
	mfamily *f;
	const double *bk = d->buckets;
	size_t nb = d->n_buckets, i;

	*out = NULL;
	if(!valid_name(d->name, true))
		return prd_err_set(err, PRD_EINVAL, "metric name '%s' is not valid", d->name ? d->name : "");
	if(d->type != METRICS_COUNTER && d->type != METRICS_GAUGE && d->type != METRICS_HISTOGRAM)
		return prd_err_set(err, PRD_EINVAL, "metric %s: unknown type %d", d->name, (int)d->type);
	for(i = 0; d->labels && d->labels[i]; i++) {
		if(!valid_name(d->labels[i], false) || str_starts_with(d->labels[i], "__"))
			return prd_err_set(err, PRD_EINVAL, "metric %s: label name '%s' is not valid", d->name,
					   d->labels[i]);
		if(d->type == METRICS_HISTOGRAM && strcmp(d->labels[i], "le") == 0)
			return prd_err_set(err, PRD_EINVAL, "metric %s: a histogram cannot have a label 'le'", d->name);
	}
	if(d->type == METRICS_HISTOGRAM) {
		if(!bk) {
			bk = metrics_default_buckets;
			nb = metrics_n_default_buckets;
		}
		for(i = 0; i < nb; i++) {
			if(!isfinite(bk[i]) || (i > 0 && !(bk[i] > bk[i - 1])))
				return prd_err_set(err, PRD_EINVAL,
						   "metric %s: buckets must be finite and strictly increasing",
						   d->name);
		}
	} else {
		nb = 0;
	}

	f = calloc(1, sizeof(*f));
	if(!f)
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	hmap_init(&f->children, child_free);
	f->type = d->type;
	f->name = str_dup(d->name);
	f->help = str_dup(d->help ? d->help : "");
	f->n_labels = count_strv(d->labels);
	f->labels = calloc(f->n_labels + 1, sizeof(char *));
	f->n_buckets = nb;
	f->buckets = nb ? malloc(nb * sizeof(double)) : NULL;
	if(!f->name || !f->help || !f->labels || (nb && !f->buckets))
		goto nomem;
	for(i = 0; i < f->n_labels; i++)
		if(!(f->labels[i] = str_dup(d->labels[i])))
			goto nomem;
	if(nb)
		memcpy(f->buckets, bk, nb * sizeof(double));
	*out = f;
	return PRD_OK;
nomem:
	family_free(f);
	return prd_err_set(err, PRD_ENOMEM, "out of memory");
}

/* Insert a built family; the caller holds the lock. */
static int family_insert_locked(mfamily *f, int *id, prd_err *err)
{
	int i;
	for(i = 0; i < reg.n; i++)
		if(strcmp(reg.fams[i]->name, f->name) == 0)
			return prd_err_set(err, PRD_EEXIST, "metric %s is already registered", f->name);
	if(reg.n == reg.cap) {
		int ncap = reg.cap ? reg.cap * 2 : 32;
		mfamily **nf = realloc(reg.fams, (size_t)ncap * sizeof(*nf));
		if(!nf)
			return prd_err_set(err, PRD_ENOMEM, "out of memory");
		reg.fams = nf;
		reg.cap = ncap;
	}
	reg.fams[reg.n] = f;
	if(id)
		*id = reg.n;
	reg.n++;
	return PRD_OK;
}

static void shutdown_locked(void)
{
	int i;
	for(i = 0; i < reg.n; i++)
		family_free(reg.fams[i]);
	free(reg.fams);
	reg.fams = NULL;
	reg.n = reg.cap = 0;
	reg.ready = false;
}

static mchild *child_get_locked(mfamily *f, const char *const *labels, bool create);

int metrics_init(void)
{
	int rc = PRD_OK, i;
	pthread_mutex_lock(&reg.mu);
	if(reg.ready)
		goto done;
	for(i = 0; i < M_BUILTIN_COUNT && rc == PRD_OK; i++) {
		mfamily *f = NULL;
		rc = family_new(&builtin[i], &f, NULL);
		if(rc == PRD_OK && (rc = family_insert_locked(f, NULL, NULL)) != PRD_OK)
			family_free(f);
	}
	if(rc == PRD_OK) {
		reg.ready = true;
		/* Families without labels have exactly one child: create it so it
		 * is exported (as 0) before the first update. */
		for(i = 0; i < reg.n && rc == PRD_OK; i++)
			if(reg.fams[i]->n_labels == 0 && !child_get_locked(reg.fams[i], NULL, true))
				rc = PRD_ENOMEM;
		if(rc == PRD_OK) {
			mchild *c = child_get_locked(reg.fams[M_BUILD_INFO], L(PACKAGE_VERSION), true);
			if(c)
				c->value = 1;
			else
				rc = PRD_ENOMEM;
		}
	}
	if(rc != PRD_OK)
		shutdown_locked();
done:
	pthread_mutex_unlock(&reg.mu);
	return rc;
}

void metrics_shutdown(void)
{
	pthread_mutex_lock(&reg.mu);
	shutdown_locked();
	pthread_mutex_unlock(&reg.mu);
}

int metrics_register(const metrics_desc *d, int *id, prd_err *err)
{
	mfamily *f = NULL;
	int rc = family_new(d, &f, err);
	if(rc != PRD_OK)
		return rc;
	pthread_mutex_lock(&reg.mu);
	if(!reg.ready)
		rc = prd_err_set(err, PRD_EINVAL, "metrics registry is not initialised");
	else
		rc = family_insert_locked(f, id, err);
	if(rc != PRD_OK)
		family_free(f);
	else if(f->n_labels == 0)
		child_get_locked(f, NULL, true); /* on failure it appears on first update */
	pthread_mutex_unlock(&reg.mu);
	return rc;
}

/* Find (or with `create`, add) the child for `labels`. NULL when the label
 * count is wrong or memory ran out. Caller holds the lock. */
static mchild *child_get_locked(mfamily *f, const char *const *labels, bool create)
{
	size_t n = count_strv(labels), i;
	char *key;
	mchild *c;

	if(n != f->n_labels)
		return NULL;
	key = child_key(labels, n);
	if(!key)
		return NULL;
	c = hmap_get(&f->children, key);
	if(c || !create)
		goto done;
	c = calloc(1, sizeof(*c));
	if(!c)
		goto done;
	c->values = calloc(n + 1, sizeof(char *));
	if(f->n_buckets)
		c->bucket_counts = calloc(f->n_buckets, sizeof(uint64_t));
	if(!c->values || (f->n_buckets && !c->bucket_counts))
		goto fail;
	for(i = 0; i < n; i++)
		if(!(c->values[i] = str_dup(labels[i])))
			goto fail;
	if(hmap_put(&f->children, key, c) != PRD_OK)
		goto fail;
	goto done;
fail:
	child_free(c);
	c = NULL;
done:
	free(key);
	return c;
}

static const char *const type_names[] = { "counter", "gauge", "histogram" };

/* Look up the family for an update of kind `want` and its child; logs a
 * misuse once per family. Caller holds the lock. */
static mchild *lookup_locked(int id, enum metrics_type want, const char *const *labels, const char *op)
{
	mfamily *f;
	mchild *c;
	if(!reg.ready || id < 0 || id >= reg.n)
		return NULL;
	f = reg.fams[id];
	if(f->type != want) {
		if(!f->warned)
			log_warn("metric update of the wrong kind dropped", "metric", f->name, "type",
				 type_names[f->type], "op", op);
		f->warned = true;
		return NULL;
	}
	c = child_get_locked(f, labels, true);
	if(!c && count_strv(labels) != f->n_labels) {
		if(!f->warned)
			log_warn("metric update with the wrong number of labels dropped", "metric", f->name,
				 "want", LOGI(f->n_labels), "got", LOGI(count_strv(labels)));
		f->warned = true;
	}
	return c;
}

void metrics_counter_add(int id, const char *const *labels, double v)
{
	mchild *c;
	pthread_mutex_lock(&reg.mu);
	if(!(v >= 0)) {
		if(reg.ready && id >= 0 && id < reg.n && !reg.fams[id]->warned) {
			log_warn("negative counter increment dropped", "metric", reg.fams[id]->name);
			reg.fams[id]->warned = true;
		}
	} else if((c = lookup_locked(id, METRICS_COUNTER, labels, "counter_add"))) {
		c->value += v;
	}
	pthread_mutex_unlock(&reg.mu);
}

void metrics_counter_raise(int id, const char *const *labels, double v)
{
	mchild *c;
	pthread_mutex_lock(&reg.mu);
	if((c = lookup_locked(id, METRICS_COUNTER, labels, "counter_raise")) && v > c->value)
		c->value = v;
	pthread_mutex_unlock(&reg.mu);
}

void metrics_gauge_set(int id, const char *const *labels, double v)
{
	mchild *c;
	pthread_mutex_lock(&reg.mu);
	if((c = lookup_locked(id, METRICS_GAUGE, labels, "gauge_set")))
		c->value = v;
	pthread_mutex_unlock(&reg.mu);
}

void metrics_gauge_add(int id, const char *const *labels, double v)
{
	mchild *c;
	pthread_mutex_lock(&reg.mu);
	if((c = lookup_locked(id, METRICS_GAUGE, labels, "gauge_add")))
		c->value += v;
	pthread_mutex_unlock(&reg.mu);
}

void metrics_observe(int id, const char *const *labels, double v)
{
	mchild *c;
	size_t i;
	pthread_mutex_lock(&reg.mu);
	if(!isnan(v) && (c = lookup_locked(id, METRICS_HISTOGRAM, labels, "observe"))) {
		mfamily *f = reg.fams[id];
		for(i = 0; i < f->n_buckets; i++) {
			if(v <= f->buckets[i]) {
				c->bucket_counts[i]++;
				break;
			}
		}
		c->count++;
		c->sum += v;
	}
	pthread_mutex_unlock(&reg.mu);
}

void metrics_remove(int id, const char *const *labels)
{
	char *key;
	pthread_mutex_lock(&reg.mu);
	if(reg.ready && id >= 0 && id < reg.n && count_strv(labels) == reg.fams[id]->n_labels &&
	   (key = child_key(labels, reg.fams[id]->n_labels))) {
		hmap_del(&reg.fams[id]->children, key);
		free(key);
	}
	pthread_mutex_unlock(&reg.mu);
}

void metrics_remove_where(int id, size_t label, const char *value)
{
	hmap_iter it;
	const char *key;
	void *v;
	char **drop = NULL;
	size_t n = 0, cap = 0, i;
	pthread_mutex_lock(&reg.mu);
	if(reg.ready && id >= 0 && id < reg.n && label < reg.fams[id]->n_labels && value) {
		hmap_iter_init(&it, &reg.fams[id]->children);
		while(hmap_iter_next(&it, &key, &v)) {
			mchild *ch = v;
			if(strcmp(ch->values[label], value))
				continue;
			if(n == cap) {
				size_t nc = cap ? cap * 2 : 8;
				char **nv = realloc(drop, nc * sizeof(*nv));
				if(!nv)
					break;
				drop = nv;
				cap = nc;
			}
			if(!(drop[n] = str_dup(key)))
				break;
			n++;
		}
		for(i = 0; i < n; i++)
			hmap_del(&reg.fams[id]->children, drop[i]);
	}
	pthread_mutex_unlock(&reg.mu);
	for(i = 0; i < n; i++)
		free(drop[i]);
	free(drop);
}

bool metrics_get(int id, const char *const *labels, double *value)
{
	mchild *c = NULL;
	pthread_mutex_lock(&reg.mu);
	if(reg.ready && id >= 0 && id < reg.n) {
		c = child_get_locked(reg.fams[id], labels, false);
		if(c)
			*value = reg.fams[id]->type == METRICS_HISTOGRAM ? (double)c->count : c->value;
	}
	pthread_mutex_unlock(&reg.mu);
	return c != NULL;
}

const char *metrics_name(int id)
{
	const char *n = NULL;
	pthread_mutex_lock(&reg.mu);
	if(reg.ready && id >= 0 && id < reg.n)
		n = reg.fams[id]->name;
	pthread_mutex_unlock(&reg.mu);
	return n;
}

int metrics_describe(int id, enum metrics_type *type, const char *const **labels)
{
	int rc = PRD_ENOTFOUND;
	pthread_mutex_lock(&reg.mu);
	if(reg.ready && id >= 0 && id < reg.n) {
		if(type)
			*type = reg.fams[id]->type;
		if(labels)
			*labels = (const char *const *)reg.fams[id]->labels;
		rc = PRD_OK;
	}
	pthread_mutex_unlock(&reg.mu);
	return rc;
}

const char *metrics_type_name(enum metrics_type t)
{
	return (unsigned)t < sizeof(type_names) / sizeof(type_names[0]) ? type_names[t] : "?";
}

int metrics_count(void)
{
	int n;
	pthread_mutex_lock(&reg.mu);
	n = reg.n;
	pthread_mutex_unlock(&reg.mu);
	return n;
}

/* A sample value the way the Go client prints it: the shortest decimal
 * that reads back as the same double, and +Inf/-Inf/NaN. */
static void append_double(buf *b, double v)
{
	char tmp[40];
	int prec;
	if(isnan(v)) {
		buf_append_str(b, "NaN");
		return;
	}
	if(isinf(v)) {
		buf_append_str(b, v > 0 ? "+Inf" : "-Inf");
		return;
	}
	for(prec = 15; prec <= 17; prec++) {
		snprintf(tmp, sizeof(tmp), "%.*g", prec, v);
		if(strtod(tmp, NULL) == v)
			break;
	}
	buf_append_str(b, tmp);
}

/* Escape for HELP text (\\ and \n) or, with `quote`, a label value (also
 * \"). */
static void append_escaped(buf *b, const char *s, bool quote)
{
	for(; *s; s++) {
		if(*s == '\\')
			buf_append_str(b, "\\\\");
		else if(*s == '\n')
			buf_append_str(b, "\\n");
		else if(quote && *s == '"')
			buf_append_str(b, "\\\"");
		else
			buf_append_char(b, *s);
	}
}

/* `{a="x",b="y"}` plus an optional trailing `le`; nothing when empty. */
static void append_labels(buf *b, const mfamily *f, const mchild *c, const char *le)
{
	size_t i;
	if(f->n_labels == 0 && !le)
		return;
	buf_append_char(b, '{');
	for(i = 0; i < f->n_labels; i++) {
		if(i)
			buf_append_char(b, ',');
		buf_printf(b, "%s=\"", f->labels[i]);
		append_escaped(b, c->values[i], true);
		buf_append_char(b, '"');
	}
	if(le)
		buf_printf(b, "%sle=\"%s\"", f->n_labels ? "," : "", le);
	buf_append_char(b, '}');
}

static int cmp_child(const void *a, const void *b)
{
	const mchild *x = *(const mchild *const *)a, *y = *(const mchild *const *)b;
	size_t i;
	for(i = 0; x->values[i] && y->values[i]; i++) {
		int c = strcmp(x->values[i], y->values[i]);
		if(c)
			return c;
	}
	return 0;
}

static void render_child(buf *b, const mfamily *f, const mchild *c)
{
	size_t i;
	if(f->type != METRICS_HISTOGRAM) {
		buf_append_str(b, f->name);
		append_labels(b, f, c, NULL);
		buf_append_char(b, ' ');
		append_double(b, c->value);
		buf_append_char(b, '\n');
		return;
	}
	uint64_t cum = 0;
	for(i = 0; i < f->n_buckets; i++) {
		buf le;
		cum += c->bucket_counts[i];
		buf_init(&le);
		append_double(&le, f->buckets[i]);
		buf_printf(b, "%s_bucket", f->name);
		append_labels(b, f, c, buf_str(&le));
		buf_printf(b, " %llu\n", (unsigned long long)cum);
		if(le.failed)
			b->failed = le.failed;
		buf_free(&le);
	}
	buf_printf(b, "%s_bucket", f->name);
	append_labels(b, f, c, "+Inf");
	buf_printf(b, " %llu\n", (unsigned long long)c->count);
	buf_printf(b, "%s_sum", f->name);
	append_labels(b, f, c, NULL);
	buf_append_char(b, ' ');
	append_double(b, c->sum);
	buf_append_char(b, '\n');
	buf_printf(b, "%s_count", f->name);
	append_labels(b, f, c, NULL);
	buf_printf(b, " %llu\n", (unsigned long long)c->count);
}

int metrics_render(buf *out)
{
	int i, rc = PRD_OK;
	pthread_mutex_lock(&reg.mu);
	for(i = 0; i < reg.n && rc == PRD_OK; i++) {
		mfamily *f = reg.fams[i];
		size_t n = hmap_len(&f->children), k = 0;
		mchild **kids = NULL;
		hmap_iter it;
		const char *key;
		void *val;

		buf_printf(out, "# HELP %s ", f->name);
		append_escaped(out, f->help, false);
		buf_printf(out, "\n# TYPE %s %s\n", f->name, type_names[f->type]);
		if(n == 0)
			continue;
		kids = malloc(n * sizeof(*kids));
		if(!kids) {
			rc = PRD_ENOMEM;
			break;
		}
		hmap_iter_init(&it, &f->children);
		while(hmap_iter_next(&it, &key, &val))
			kids[k++] = val;
		qsort(kids, n, sizeof(*kids), cmp_child);
		for(k = 0; k < n; k++)
			render_child(out, f, kids[k]);
		free(kids);
	}
	pthread_mutex_unlock(&reg.mu);
	if(rc == PRD_OK && out->failed)
		rc = out->failed;
	return rc;
}
