/* provreqd's configuration: one option table behind the YAML config file,
 * the flags, --help, check-config and the docs check; validation of values. */
#include "ops/config.h"
#include "ops/config_int.h"
#include "ops/http.h"
#include "util/err.h"
#include "util/str.h"
#include "util/yamljson.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SEC PRD_NS_PER_SEC
#define MIN (60 * SEC)
#define HOUR (60 * MIN)
#define DAY (24 * HOUR)
#define O(f) offsetof(cfg, f)

static int check_log_format(const cfg *c, buf *why);
static int check_http_addr(const cfg *c, buf *why);
static int check_metrics_access(const cfg *c, buf *why);
static int check_expander(const cfg *c, buf *why);
static int check_priority_configmap(const cfg *c, buf *why);
static int check_lease_name(const cfg *c, buf *why);
static int check_booking_ledger(const cfg *c, buf *why);
static int check_lease_namespace(const cfg *c, buf *why);
static int check_lease_duration(const cfg *c, buf *why);
static int check_nonempty_state_db(const cfg *c, buf *why);

/* The option table. Rows sharing a key prefix stay together: cfg_to_yaml
 * nests by walking the rows in order. docs/config.md documents every row;
 * tests/unit/test_docs.sh checks that it does. */
const cfg_option cfg_options[] = {
	{ "config", NULL, CFG_STRING, O(config_file), "",
	  "YAML config file; flags given as well override its values", 0, 0, NULL },
	{ "kubeconfig", "kube.kubeconfig", CFG_STRING, O(kubeconfig), "",
	  "kubeconfig file; empty = $KUBECONFIG (a :-separated list), else ~/.kube/config, "
	  "else the in-cluster service account", 0, 0, NULL },
	{ "context", "kube.context", CFG_STRING, O(context), "",
	  "kubeconfig context to use; empty = the current context", 0, 0, NULL },
	{ "cloud-driver", "cloud.drivers", CFG_STRINGS, O(cloud_drivers), "",
	  "node-group driver .so to load (repeatable); none = check-capacity only", 0, 0, NULL },
	{ "cloud-config", "cloud.config", CFG_STRING, O(cloud_config), "",
	  "configuration file handed to the cloud drivers", 0, 0, NULL },
	{ "state-db", "state.db", CFG_STRING, O(state_db), "provreqd.db",
	  "SQLite state database (created 0600; schema migrated on open)", 0, 0, check_nonempty_state_db },
	{ "state-retention", "state.retention", CFG_DURATION, O(state_retention), "24h",
	  "closed scale-up plans stay in the state store this long, then are pruned", MIN, 365 * DAY, NULL },
	{ "http-addr", "http.addr", CFG_STRING, O(http_addr), ":8080",
	  "address of the /metrics, /healthz and /readyz endpoint: HOST:PORT, :PORT or [IPV6]:PORT", 0, 0,
	  check_http_addr },
	{ "metrics-access", "http.metricsAccess", CFG_STRING, O(metrics_access), "open",
	  "who may read /metrics (/healthz and /readyz stay open): open (whoever reaches --http-addr), localhost "
	  "(loopback connections only), tokenreview (a bearer token the apiserver authenticates and authorizes "
	  "for get on the /metrics URL: TokenReview + SubjectAccessReview)", 0, 0, check_metrics_access },
	{ "health-stale-after", "http.healthStaleAfter", CFG_DURATION, O(health_stale_after), "2m",
	  "/healthz fails when the worker loop has not reported for this long", SEC, DAY, NULL },
	{ "log-format", "log.format", CFG_STRING, O(log_format), "text",
	  "log line format: text (key=value) or json", 0, 0, check_log_format },
	{ "v", "log.level", CFG_INT, O(v), "2",
	  "log level, any level as klog takes it: 0 error, 1 warn, 2 info, 3 debug, 4 and above trace", 0,
	  2147483647, NULL },
	{ "leader-elect", "leaderElection.enabled", CFG_BOOL, O(leader_elect), "true",
	  "take a coordination.k8s.io Lease before acting (required with more than one replica)", 0, 0, NULL },
	{ "lease-name", "leaderElection.leaseName", CFG_STRING, O(lease_name), "provreqd",
	  "name of the leader-election Lease", 0, 0, check_lease_name },
	{ "lease-namespace", "leaderElection.leaseNamespace", CFG_STRING, O(lease_namespace), "",
	  "namespace of the leader-election Lease and of the plan key's Secret provreqd-plan-key; empty = "
	  "$POD_NAMESPACE, else kube-system", 0, 0,
	  check_lease_namespace },
	{ "booking-ledger", "leaderElection.bookingLedger", CFG_STRING, O(booking_ledger), "provreqd-bookings",
	  "[NAMESPACE/]NAME of the ConfigMap every replica and shard changes (conditionally) before it writes a "
	  "booking, so no two book the same room (operator.md, \"The booking ledger\"); no namespace = the "
	  "Lease's; used with --leader-elect or --processor-instance; none = off", 0, 0, check_booking_ledger },
	{ "lease-duration", "leaderElection.leaseDuration", CFG_DURATION, O(lease_duration), "15s",
	  "how long a Lease is valid after its last renewal (whole seconds: the Lease records "
	  "leaseDurationSeconds); a standby takes over after it", SEC, HOUR, check_lease_duration },
	{ "lease-renew-deadline", "leaderElection.renewDeadline", CFG_DURATION, O(lease_renew_deadline), "10s",
	  "the leader stops acting when it could not renew for this long", SEC, HOUR, NULL },
	{ "lease-retry-period", "leaderElection.retryPeriod", CFG_DURATION, O(lease_retry_period), "2s",
	  "interval between tries to acquire or renew the Lease", 100 * PRD_NS_PER_MS, HOUR, NULL },
	{ "processor-instance", "requests.processorInstance", CFG_STRING, O(processor_instance), "",
	  "handle only requests whose processorInstance parameter equals this; empty = requests without one",
	  0, 0, NULL },
	{ "booking-ttl", "requests.bookingTTL", CFG_DURATION, O(booking_ttl), "10m",
	  "how long a Provisioned request holds its capacity for its pods", SEC, 7 * DAY, NULL },
	{ "provision-timeout", "requests.provisionTimeout", CFG_DURATION, O(provision_timeout), "15m",
	  "new nodes of a scale-up must be Ready within this, else the scale-up is rolled back", MIN, DAY, NULL },
	{ "missing-template-grace", "requests.missingTemplateGrace", CFG_DURATION, O(missing_template_grace), "5m",
	  "how long a request waits for its PodTemplates before it fails (FailedToCreatePods)", 0, DAY, NULL },
	{ "max-age", "requests.maxAge", CFG_DURATION, O(max_age), "7d",
	  "requests not Provisioned this long after creation fail with reason Expired", MIN, 365 * DAY, NULL },
	{ "gc-after", "requests.gcAfter", CFG_DURATION, O(gc_after), "7d",
	  "terminal requests are deleted this long after their last transition", MIN, 365 * DAY, NULL },
	{ "quota-check", "requests.quotaCheck", CFG_BOOL, O(quota_check), "true",
	  "before booking or scaling up, check that the namespace's ResourceQuotas (Capsule pool claims among "
	  "them) admit all of a request's pods, else Provisioned=False/QuotaExceeded; false when Kueue's "
	  "ClusterQueues already decide quota", 0, 0, NULL },
	{ "request-backoff-initial", "backoff.request.initial", CFG_DURATION, O(request_backoff_initial), "1m",
	  "first retry delay of a request that could not be satisfied (doubles each time)", SEC, DAY, NULL },
	{ "request-backoff-max", "backoff.request.max", CFG_DURATION, O(request_backoff_max), "10m",
	  "longest retry delay of a request", SEC, DAY, NULL },
	{ "group-backoff-initial", "backoff.nodeGroup.initial", CFG_DURATION, O(group_backoff_initial), "5m",
	  "first back-off of a node group after a failed scale-up (doubles each time)", SEC, DAY, NULL },
	{ "group-backoff-max", "backoff.nodeGroup.max", CFG_DURATION, O(group_backoff_max), "30m",
	  "longest back-off of a node group", SEC, DAY, NULL },
	{ "group-backoff-reset", "backoff.nodeGroup.reset", CFG_DURATION, O(group_backoff_reset), "3h",
	  "a node group's back-off starts over after this long without a failure", SEC, 30 * DAY, NULL },
	{ "expander", "scaleUp.expander", CFG_STRING, O(expander), "least-waste",
	  "node-group choice, a comma-separated chain of least-waste, most-pods, least-nodes, priority, random, "
	  "price (the cheapest auto-provisioned shape)",
	  0, 0, check_expander },
	{ "priority-configmap", "scaleUp.priorityConfigMap", CFG_STRING, O(priority_configmap), "",
	  "[NAMESPACE/]NAME of the ConfigMap holding the priority expander's table (data key priorities: "
	  "cluster-autoscaler-priority-expander's format), re-read every 10s; no namespace = the "
	  "Lease's (--lease-namespace, else $POD_NAMESPACE, else kube-system)", 0, 0, check_priority_configmap },
	{ "priority-file", "scaleUp.priorityFile", CFG_STRING, O(priority_file), "",
	  "file holding the priority expander's table instead (that ConfigMap, or its priorities map), "
	  "read at start; a relative path in the config file is relative to the file's directory",
	  0, 0, NULL },
	{ "max-nodes-total", "scaleUp.maxNodesTotal", CFG_INT, O(max_nodes_total), "0",
	  "cluster-wide node limit for scale-ups; 0 = no limit", 0, 1000000, NULL },
	{ "cores-total", "scaleUp.coresTotal", CFG_STRING, O(cores_total), "",
	  "MIN:MAX cores of every node of the cluster together; a scale-up past MAX is refused, scale-down "
	  "keeps at least MIN; empty = no limit", 0, 0, cfg__check_cores_total },
	{ "memory-total", "scaleUp.memoryTotal", CFG_STRING, O(memory_total), "",
	  "MIN:MAX GiB of memory of every node of the cluster together, as --cores-total; empty = no limit",
	  0, 0, cfg__check_memory_total },
	{ "gpu-total", "scaleUp.gpuTotal", CFG_STRINGS, O(gpu_total), "",
	  "TYPE:MIN:MAX devices of the extended resource TYPE (nvidia.com/gpu, ...) of every node together, "
	  "as --cores-total (repeatable)", 0, 0, cfg__check_gpu_total },
	{ "max-nodes-per-scaleup", "scaleUp.maxNodesPerScaleUp", CFG_INT, O(max_nodes_per_scaleup), "1000",
	  "most nodes one request may add; 0 = no limit", 0, 1000000, NULL },
	{ "node-autoprovisioning", "autoProvisioning.enabled", CFG_BOOL, O(nap), "false",
	  "when no node group can provide a request's pods, create a group of a machine shape a driver offers "
	  "(ABI 1.5), as part of the request's atomic plan", 0, 0, NULL },
	{ "max-autoprovisioned-groups", "autoProvisioning.maxGroups", CFG_INT, O(nap_max_groups), "15",
	  "most node groups auto-provisioning keeps at once", 0, 10000, NULL },
	{ "scale-down", "scaleDown.enabled", CFG_BOOL, O(scale_down), "true",
	  "remove nodes provreqd added once they stay empty after the booking they were made for ended; "
	  "false when cluster-autoscaler scales down", 0, 0, NULL },
	{ "scale-down-idle", "scaleDown.idleTime", CFG_DURATION, O(scale_down_idle), "10m",
	  "how long such a node must stay empty before it is cordoned and removed", 0, DAY, NULL },
	{ "pool-debounce", "pools.debounce", CFG_DURATION, O(pool_debounce), "5s",
	  "wait this long after a node change before recomputing ResourcePool quotas", 0, HOUR, NULL },
	{ "pool-include-unready", "pools.includeUnready", CFG_BOOL, O(pool_include_unready), "false",
	  "count NotReady and unschedulable nodes in ResourcePool quotas", 0, 0, NULL },
	{ "kube-api-qps", "apiserver.qps", CFG_INT, O(kube_api_qps), "200",
	  "apiserver requests per second (client-side token bucket); Events have a bucket of their own of the "
	  "same size, so a burst of Events never delays status writes", 1, 100000, NULL },
	{ "kube-api-burst", "apiserver.burst", CFG_INT, O(kube_api_burst), "300",
	  "apiserver requests allowed at once above --kube-api-qps", 1, 100000, NULL },
};
const size_t cfg_n_options = sizeof(cfg_options) / sizeof(cfg_options[0]);

/* Same meaning, same value syntax (durations take the same units; booleans
 * true/false) as cluster-autoscaler's flags of these names. Flags whose
 * names are already the same (--kubeconfig, --cloud-config, --expander,
 * --max-nodes-total, --leader-elect, --v, ...) need no alias. */
const cfg_alias cfg_aliases[] = {
	{ "scale-down-enabled", "scale-down" },
	{ "node-autoprovisioning-enabled", "node-autoprovisioning" },
	{ "max-autoprovisioned-node-group-count", "max-autoprovisioned-groups" },
	{ "scale-down-unneeded-time", "scale-down-idle" },
	{ "max-node-provision-time", "provision-timeout" },
	{ "kube-client-qps", "kube-api-qps" },
	{ "kube-client-burst", "kube-api-burst" },
	{ "address", "http-addr" },
	{ "initial-node-group-backoff-duration", "group-backoff-initial" },
	{ "max-node-group-backoff-duration", "group-backoff-max" },
	{ "node-group-backoff-reset-timeout", "group-backoff-reset" },
	{ "leader-elect-lease-duration", "lease-duration" },
	{ "leader-elect-renew-deadline", "lease-renew-deadline" },
	{ "leader-elect-retry-period", "lease-retry-period" },
	{ "leader-elect-resource-name", "lease-name" },
	{ "leader-elect-resource-namespace", "lease-namespace" },
};
const size_t cfg_n_aliases = sizeof(cfg_aliases) / sizeof(cfg_aliases[0]);

const cfg_ignored_flag cfg_ignored[] = {
	{ "scan-interval", false, "provreqd runs a pass when the cluster changes, not on an interval" },
	{ "cloud-provider", false, "provreqd's node groups come from its --cloud-driver modules" },
	{ "scale-down-delay-after-add", false,
	  "provreqd scales down only its own nodes, once idle for --scale-down-idle after their booking ended" },
	{ "scale-down-delay-after-delete", false, "as --scale-down-delay-after-add" },
	{ "scale-down-delay-after-failure", false, "as --scale-down-delay-after-add" },
	{ "scale-down-utilization-threshold", false, "provreqd removes only empty nodes it added" },
	{ "skip-nodes-with-local-storage", true, "provreqd removes only empty nodes it added" },
	{ "skip-nodes-with-system-pods", true, "provreqd removes only empty nodes it added" },
	{ "balance-similar-node-groups", true, "an atomic scale-up takes one plan's groups as the expander picks" },
	{ "max-graceful-termination-sec", false, "provreqd evicts nothing: it removes only empty nodes" },
	{ "enable-provisioning-requests", true, "provreqd always serves ProvisioningRequests" },
	{ "logtostderr", true, "provreqd always logs to stderr (--log-format)" },
	{ "stderrthreshold", false, "provreqd always logs to stderr at --v's level" },
	{ "nodes", false,
	  "provreqd's node groups and their sizes come from its driver's configuration (docs/drivers.md), "
	  "not from this flag: check them with provreqd check-driver" },
	{ "node-group-auto-discovery", false,
	  "provreqd's driver finds its node groups (clusterapi: namespace, clusterName and labels in the cloud "
	  "config; docs/drivers.md), not this flag: check them with provreqd check-driver" },
};
const size_t cfg_n_ignored = sizeof(cfg_ignored) / sizeof(cfg_ignored[0]);

/* A cluster-autoscaler flag provreqd ignores, or NULL. */
static const cfg_ignored_flag *by_ignored(const char *name, size_t len)
{
	size_t i;
	for(i = 0; i < cfg_n_ignored; i++)
		if(strlen(cfg_ignored[i].flag) == len && strncmp(cfg_ignored[i].flag, name, len) == 0)
			return &cfg_ignored[i];
	return NULL;
}
_Static_assert(sizeof(cfg_options) / sizeof(cfg_options[0]) <= 64, "cfg.refused has one bit per option");

#define REFUSE(c, o) ((c)->refused |= (uint64_t)1 << ((o) - cfg_options))
#define REFUSED(c, o) (((c)->refused >> ((o) - cfg_options)) & 1)

static const char *const type_names[] = { "string", "strings", "int", "duration", "bool" };

const char *cfg_type_name(enum cfg_type t)
{
	return (unsigned)t < sizeof(type_names) / sizeof(type_names[0]) ? type_names[t] : "?";
}

#define FIELD(c, o, T) ((T *)((char *)(c) + (o)->offset))
#define CFIELD(c, o, T) ((const T *)((const char *)(c) + (o)->offset))

static void strv_clear(cfg_strv *v)
{
	size_t i;
	for(i = 0; i < v->n; i++)
		free(v->v[i]);
	free(v->v);
	v->v = NULL;
	v->n = 0;
}

static int strv_push(cfg_strv *v, const char *s)
{
	char *d = str_dup(s);
	char **nv;
	if(!d)
		return PRD_ENOMEM;
	nv = realloc(v->v, (v->n + 1) * sizeof(char *));
	if(!nv) {
		free(d);
		return PRD_ENOMEM;
	}
	v->v = nv;
	v->v[v->n++] = d;
	return PRD_OK;
}

void cfg_free(cfg *c)
{
	size_t i;
	if(!c)
		return;
	strv_clear(&c->ignored);
	for(i = 0; i < cfg_n_options; i++) {
		const cfg_option *o = &cfg_options[i];
		if(o->type == CFG_STRING) {
			free(*FIELD(c, o, char *));
			*FIELD(c, o, char *) = NULL;
		} else if(o->type == CFG_STRINGS) {
			strv_clear(FIELD(c, o, cfg_strv));
		}
	}
}

const char *cfg_format_duration(int64_t ns, char out[32])
{
	static const struct { const char *u; int64_t ns; } units[] = {
		{ "d", DAY }, { "h", HOUR }, { "m", MIN }, { "s", SEC },
		{ "ms", PRD_NS_PER_MS }, { "us", 1000 }, { "ns", 1 },
	};
	size_t i, len = 0;
	out[0] = '\0';
	if(ns <= 0) {
		snprintf(out, 32, "%s", ns == 0 ? "0s" : "-");
		return out;
	}
	/* Whole days only when nothing smaller remains ("7d", but "36h"). */
	for(i = ns % DAY == 0 ? 0 : 1; i < sizeof(units) / sizeof(units[0]) && ns; i++) {
		if(ns >= units[i].ns) {
			len += (size_t)snprintf(out + len, 32 - len, "%lld%s", (long long)(ns / units[i].ns), units[i].u);
			ns %= units[i].ns;
		}
	}
	return out;
}

static const cfg_option *by_flag(const char *name, size_t len)
{
	size_t i;
	for(i = 0; i < cfg_n_options; i++)
		if(strlen(cfg_options[i].flag) == len && strncmp(cfg_options[i].flag, name, len) == 0)
			return &cfg_options[i];
	return NULL;
}

/* The option an alias stands for; *alias (if given) gets the alias's name. */
static const cfg_option *by_alias(const char *name, size_t len, const char **alias)
{
	size_t i;
	for(i = 0; i < cfg_n_aliases; i++)
		if(strlen(cfg_aliases[i].flag) == len && strncmp(cfg_aliases[i].flag, name, len) == 0) {
			if(alias)
				*alias = cfg_aliases[i].flag;
			return by_flag(cfg_aliases[i].option, strlen(cfg_aliases[i].option));
		}
	return NULL;
}

static const cfg_option *by_key(const char *key)
{
	size_t i;
	for(i = 0; i < cfg_n_options; i++)
		if(cfg_options[i].key && strcmp(cfg_options[i].key, key) == 0)
			return &cfg_options[i];
	return NULL;
}

/* Is `path` a section (a proper prefix, at a dot, of some option key)? */
static bool is_section(const char *path)
{
	size_t i, n = strlen(path);
	for(i = 0; i < cfg_n_options; i++) {
		const char *k = cfg_options[i].key;
		if(k && strncmp(k, path, n) == 0 && k[n] == '.')
			return true;
	}
	return false;
}

/* Set a scalar option from text (flag syntax). On a bad value appends the
 * problem (without the "where" prefix) to `why`. */
static int set_text(cfg *c, const cfg_option *o, const char *text, buf *why)
{
	int64_t n;
	bool b;
	char d1[32], d2[32], d3[32];
	int rc;

	switch(o->type) {
	case CFG_STRING: {
		char *s = str_dup(text);
		if(!s)
			return PRD_ENOMEM;
		free(*FIELD(c, o, char *));
		*FIELD(c, o, char *) = s;
		return PRD_OK;
	}
	case CFG_STRINGS:
		return strv_push(FIELD(c, o, cfg_strv), text);
	case CFG_BOOL:
		if(str_to_bool(text, &b) != PRD_OK) {
			buf_printf(why, "want true or false, got '%s'", text);
			return PRD_EINVAL;
		}
		*FIELD(c, o, bool) = b;
		return PRD_OK;
	case CFG_INT:
		rc = str_to_int64(text, &n);
		if(rc == PRD_ERANGE) {
			buf_printf(why, "'%s' is too %s (the range is %lld..%lld)", text, text[0] == '-' ? "small" : "large",
				   (long long)o->min, (long long)o->max);
			return PRD_EINVAL;
		}
		if(rc != PRD_OK) {
			buf_printf(why, "want an integer, got '%s'", text);
			return PRD_EINVAL;
		}
		if(n < o->min || n > o->max) {
			buf_printf(why, "%lld is out of range %lld..%lld", (long long)n, (long long)o->min,
				   (long long)o->max);
			return PRD_EINVAL;
		}
		*FIELD(c, o, int64_t) = n;
		return PRD_OK;
	case CFG_DURATION:
		rc = str_parse_duration(text, &n);
		if(rc == PRD_ERANGE) {
			buf_printf(why, "'%s' is too long (at most %s)", text, cfg_format_duration(o->max, d3));
			return PRD_EINVAL;
		}
		if(rc != PRD_OK) {
			buf_printf(why, "bad duration '%s' (want e.g. 500ms, 90s, 1m30s, 10m, 3h, 7d)", text);
			return PRD_EINVAL;
		}
		if(n < o->min || n > o->max) {
			buf_printf(why, "%s is out of range %s..%s", cfg_format_duration(n, d1),
				   cfg_format_duration(o->min, d2), cfg_format_duration(o->max, d3));
			return PRD_EINVAL;
		}
		*FIELD(c, o, int64_t) = n;
		return PRD_OK;
	}
	return PRD_EINTERNAL;
}

int cfg_defaults(cfg *c)
{
	size_t i;
	int rc = PRD_OK;
	buf why;
	memset(c, 0, sizeof(*c));
	buf_init(&why);
	for(i = 0; i < cfg_n_options && rc == PRD_OK; i++) {
		const cfg_option *o = &cfg_options[i];
		if(o->type == CFG_STRINGS)
			continue; /* lists default to empty */
		rc = set_text(c, o, o->def, &why);
	}
	buf_free(&why);
	return rc == PRD_EINVAL ? PRD_EINTERNAL : rc;
}

/* Append "WHERE: problem\n" to errs. */
static void add_err(buf *errs, const char *where1, const char *where2, const char *problem)
{
	if(where2)
		buf_printf(errs, "%s: %s: %s\n", where1, where2, problem);
	else
		buf_printf(errs, "%s: %s\n", where1, problem);
}

static const char *json_kind(json_object *v)
{
	switch(json_object_get_type(v)) {
	case json_type_null: return "null";
	case json_type_boolean: return "a boolean";
	case json_type_double: return "a number";
	case json_type_int: return "a number";
	case json_type_object: return "a mapping";
	case json_type_array: return "a list";
	case json_type_string: return "a string";
	}
	return "a value";
}

/* Apply one config-file value. Returns 0, PRD_EINVAL (error appended) or
 * PRD_ENOMEM. */
static int apply_json(cfg *c, const cfg_option *o, json_object *v, const char *file, const char *path, buf *errs)
{
	buf why;
	int rc = PRD_OK;
	enum json_type t = json_object_get_type(v);
	size_t i;

	if(t == json_type_null)
		return PRD_OK; /* "key:" with no value keeps the default */
	buf_init(&why);
	switch(o->type) {
	case CFG_STRING:
		if(t != json_type_string) {
			buf_printf(&why, "want a string, got %s (quote it)", json_kind(v));
			rc = PRD_EINVAL;
		} else {
			rc = set_text(c, o, json_object_get_string(v), &why);
		}
		break;
	case CFG_STRINGS:
		if(t != json_type_array) {
			buf_printf(&why, "want a list of strings, got %s", json_kind(v));
			rc = PRD_EINVAL;
			break;
		}
		strv_clear(FIELD(c, o, cfg_strv));
		for(i = 0; i < json_object_array_length(v) && rc == PRD_OK; i++) {
			json_object *e = json_object_array_get_idx(v, i);
			if(json_object_get_type(e) != json_type_string) {
				buf_printf(&why, "item %zu: want a string, got %s", i, json_kind(e));
				rc = PRD_EINVAL;
			} else {
				rc = strv_push(FIELD(c, o, cfg_strv), json_object_get_string(e));
			}
		}
		break;
	case CFG_BOOL:
		if(t != json_type_boolean) {
			buf_printf(&why, "want true or false, got %s%s%s%s", json_kind(v),
				   t == json_type_string ? " '" : "", t == json_type_string ? json_object_get_string(v) : "",
				   t == json_type_string ? "'" : "");
			rc = PRD_EINVAL;
		} else {
			*FIELD(c, o, bool) = json_object_get_boolean(v);
		}
		break;
	case CFG_INT:
		if(t != json_type_int) {
			buf_printf(&why, "want an integer, got %s", json_kind(v));
			rc = PRD_EINVAL;
		} else {
			char tmp[32];
			snprintf(tmp, sizeof(tmp), "%lld", (long long)json_object_get_int64(v));
			rc = set_text(c, o, tmp, &why);
		}
		break;
	case CFG_DURATION:
		if(t != json_type_string) {
			buf_printf(&why, "want a duration such as 10m, got %s (add a unit: 500ms, 90s, 10m, 3h, 7d)",
				   json_kind(v));
			rc = PRD_EINVAL;
		} else {
			rc = set_text(c, o, json_object_get_string(v), &why);
		}
		break;
	}
	if(rc == PRD_EINVAL) {
		add_err(errs, file, path, buf_str(&why));
		REFUSE(c, o);
	}
	buf_free(&why);
	return rc;
}

/* Append " (did you mean X?)" when an option key or section path is close
 * to the unknown `path`. */
static void suggest_key(const char *path, buf *msg)
{
	const char *cands[128];
	char *owned[128];
	size_t n = 0, no = 0, i;
	const char *pick;
	for(i = 0; i < cfg_n_options && n < 120; i++) {
		const char *k = cfg_options[i].key, *dot;
		if(!k)
			continue;
		cands[n++] = k;
		/* sections: every prefix ending before a dot */
		for(dot = strchr(k, '.'); dot && n < 127 && no < 127; dot = strchr(dot + 1, '.')) {
			char *s = str_ndup(k, (size_t)(dot - k));
			if(s) {
				owned[no++] = s;
				cands[n++] = s;
			}
		}
	}
	pick = str_closest(path, cands, n);
	if(pick)
		buf_printf(msg, " (did you mean %s?)", pick);
	for(i = 0; i < no; i++)
		free(owned[i]);
}

/* Walk a mapping of the config file: options are applied, sections
 * recursed into, everything else reported with its full path. */
static int walk(cfg *c, const char *file, json_object *obj, const char *prefix, buf *errs)
{
	int rc = PRD_OK, r;
	json_object_object_foreach(obj, k, v) {
		char *path = prefix ? str_printf("%s.%s", prefix, k) : str_dup(k);
		const cfg_option *o;
		if(!path)
			return PRD_ENOMEM;
		if(strchr(k, '.') || !*k) {
			add_err(errs, file, path, "keys are nested mappings, not dotted names");
			r = PRD_EINVAL;
		} else if((o = by_key(path))) {
			r = apply_json(c, o, v, file, path, errs);
		} else if(is_section(path)) {
			if(json_object_get_type(v) == json_type_null) {
				r = PRD_OK;
			} else if(json_object_get_type(v) != json_type_object) {
				buf m;
				buf_init(&m);
				buf_printf(&m, "want a mapping, got %s", json_kind(v));
				add_err(errs, file, path, buf_str(&m));
				buf_free(&m);
				r = PRD_EINVAL;
			} else {
				r = walk(c, file, v, path, errs);
			}
		} else {
			buf m;
			buf_init(&m);
			buf_append_str(&m, "unknown key");
			suggest_key(path, &m);
			add_err(errs, file, path, buf_str(&m));
			buf_free(&m);
			r = PRD_EINVAL;
		}
		free(path);
		if(r == PRD_ENOMEM)
			return r;
		if(r != PRD_OK)
			rc = r;
	}
	return rc;
}

int cfg_apply_yaml(cfg *c, const char *name, const char *data, size_t len, buf *errs)
{
	json_object *docs = NULL, *doc;
	prd_err e;
	int rc;

	rc = yj_parse_all(data, len, &docs, &e);
	if(rc != PRD_OK) {
		add_err(errs, name, NULL, e.msg);
		return rc == PRD_ENOMEM ? rc : PRD_EINVAL;
	}
	if(json_object_array_length(docs) == 0) {
		json_object_put(docs);
		return PRD_OK; /* an empty file changes nothing */
	}
	if(json_object_array_length(docs) > 1) {
		add_err(errs, name, NULL, "more than one YAML document");
		json_object_put(docs);
		return PRD_EINVAL;
	}
	doc = json_object_array_get_idx(docs, 0);
	if(json_object_get_type(doc) == json_type_null) {
		rc = PRD_OK;
	} else if(json_object_get_type(doc) != json_type_object) {
		buf m;
		buf_init(&m);
		buf_printf(&m, "the top level must be a mapping, got %s", json_kind(doc));
		add_err(errs, name, NULL, buf_str(&m));
		buf_free(&m);
		rc = PRD_EINVAL;
	} else {
		rc = walk(c, name, doc, NULL, errs);
	}
	json_object_put(docs);
	return rc;
}

int cfg_apply_file(cfg *c, const char *path, buf *errs)
{
	char *data = NULL;
	size_t len = 0;
	prd_err e;
	int rc = yj_read_file(path, 4 << 20, &data, &len, &e);
	if(rc != PRD_OK) {
		add_err(errs, path, NULL, e.msg);
		return rc == PRD_ENOMEM ? rc : PRD_EINVAL;
	}
	{
		const char *before = c->priority_file, *slash = strrchr(path, '/');
		rc = cfg_apply_yaml(c, path, data, len, errs);
		/* A path in the file is relative to the file, wherever it is run from. */
		if(c->priority_file != before && c->priority_file[0] && c->priority_file[0] != '/' && slash) {
			char *abs = str_printf("%.*s/%s", (int)(slash - path), path, c->priority_file);
			if(!abs)
				rc = PRD_ENOMEM;
			else {
				free(c->priority_file);
				c->priority_file = abs;
			}
		}
	}
	free(data);
	return rc;
}

static void suggest_flag(const char *name, size_t len, buf *msg)
{
	const char *cands[128];
	size_t i, n = 0;
	char *w = str_ndup(name, len);
	const char *pick;
	if(!w)
		return;
	for(i = 0; i < cfg_n_options && n < 128; i++)
		cands[n++] = cfg_options[i].flag;
	for(i = 0; i < cfg_n_aliases && n < 128; i++)
		cands[n++] = cfg_aliases[i].flag;
	pick = str_closest(w, cands, n);
	if(pick)
		buf_printf(msg, " (did you mean --%s?)", pick);
	free(w);
}

int cfg_apply_flags(cfg *c, int argc, char *const *argv, buf *errs)
{
	bool seen[sizeof(cfg_options) / sizeof(cfg_options[0])] = { false };
	int i, rc = PRD_OK;

	for(i = 0; i < argc; i++) {
		const char *a = argv[i], *name, *eq, *val = NULL, *typed = NULL;
		const cfg_option *o;
		size_t nlen;
		const cfg_ignored_flag *ig;
		buf why;
		int r;

		if(strcmp(a, "--") == 0) {
			for(i++; i < argc; i++) {
				buf_printf(errs, "%s: unexpected argument\n", argv[i]);
				rc = PRD_EINVAL;
				c->usage_error = true;
			}
			break;
		}
		if(a[0] != '-' || a[1] == '\0') {
			buf_printf(errs, "%s: unexpected argument\n", a);
			rc = PRD_EINVAL;
			c->usage_error = true;
			continue;
		}
		name = a + (a[1] == '-' ? 2 : 1);
		eq = strchr(name, '=');
		nlen = eq ? (size_t)(eq - name) : strlen(name);
		o = by_flag(name, nlen);
		if(!o)
			o = by_alias(name, nlen, &typed);
		ig = o ? NULL : by_ignored(name, nlen);
		if(ig) {
			buf m;
			if(!eq && !ig->boolean && i + 1 < argc)
				i++; /* its value */
			else if(!eq && !ig->boolean) {
				buf_printf(errs, "--%s: needs a value\n", ig->flag);
				rc = PRD_EINVAL;
				c->usage_error = true;
				continue;
			}
			buf_init(&m);
			buf_printf(&m, "--%s: a cluster-autoscaler flag provreqd accepts and ignores: %s", ig->flag, ig->why);
			r = buf_str(&m)[0] ? strv_push(&c->ignored, buf_str(&m)) : PRD_ENOMEM;
			buf_free(&m);
			if(r)
				return r;
			continue;
		}
		if(!o) {
			buf m;
			buf_init(&m);
			buf_printf(&m, "--%.*s: unknown flag", (int)nlen, name);
			suggest_flag(name, nlen, &m);
			buf_printf(errs, "%s\n", buf_str(&m));
			buf_free(&m);
			rc = PRD_EINVAL;
			c->usage_error = true;
			continue;
		}
		if(eq)
			val = eq + 1;
		else if(o->type == CFG_BOOL)
			val = "true";
		else if(i + 1 < argc)
			val = argv[++i];
		if(!typed)
			typed = o->flag; /* errors name the flag as it was given */
		if(!val) {
			buf_printf(errs, "--%s: needs a value\n", typed);
			rc = PRD_EINVAL;
			c->usage_error = true;
			continue;
		}
		if(o->type == CFG_STRINGS && !seen[o - cfg_options])
			strv_clear(FIELD(c, o, cfg_strv)); /* flags replace the file's list */
		seen[o - cfg_options] = true;
		buf_init(&why);
		r = set_text(c, o, val, &why);
		if(r == PRD_EINVAL) {
			buf_printf(errs, "--%s: %s\n", typed, buf_str(&why));
			REFUSE(c, o);
		} else if(r == PRD_OK) {
			c->refused &= ~((uint64_t)1 << (o - cfg_options)); /* a later flag fixed it */
		}
		buf_free(&why);
		if(r == PRD_ENOMEM)
			return r;
		if(r != PRD_OK)
			rc = r;
	}
	return rc;
}

static int check_log_format(const cfg *c, buf *why)
{
	if(strcmp(c->log_format, "text") == 0 || strcmp(c->log_format, "json") == 0)
		return PRD_OK;
	buf_printf(why, "'%s' is not a log format (want text or json)", c->log_format);
	return PRD_EINVAL;
}

static int check_http_addr(const cfg *c, buf *why)
{
	char host[256];
	int port;
	prd_err e;
	if(http_parse_addr(c->http_addr, host, sizeof(host), &port, &e) == PRD_OK)
		return PRD_OK;
	buf_append_str(why, e.msg);
	return PRD_EINVAL;
}

static int check_metrics_access(const cfg *c, buf *why)
{
	enum http_access a;
	if(http_access_parse(c->metrics_access, &a) == PRD_OK)
		return PRD_OK;
	buf_printf(why, "'%s' is not open, localhost or tokenreview", c->metrics_access);
	return PRD_EINVAL;
}

static const char *const expanders[] = { "least-waste", "most-pods", "least-nodes", "priority", "random", "price" };

int cfg_check_expander(const char *chain, buf *why)
{
	const char *p = chain;
	int rc = PRD_OK;
	if(!*p) {
		buf_append_str(why, "empty (want least-waste, most-pods, least-nodes, priority, random or price)");
		return PRD_EINVAL;
	}
	while(*p && rc == PRD_OK) {
		size_t n = strcspn(p, ","), i;
		bool ok = false;
		for(i = 0; i < sizeof(expanders) / sizeof(expanders[0]); i++)
			if(strlen(expanders[i]) == n && strncmp(expanders[i], p, n) == 0)
				ok = true;
		if(!ok) {
			buf_printf(why, "'%.*s' is not an expander (want least-waste, most-pods, least-nodes, "
				   "priority, random or price, comma-separated)", (int)n, p);
			rc = PRD_EINVAL;
		}
		p += n;
		if(*p == ',')
			p++;
	}
	return rc;
}

static int check_expander(const cfg *c, buf *why)
{
	return cfg_check_expander(c->expander, why);
}

/* "[NAMESPACE/]NAME" of a ConfigMap. */
static int check_configmap_ref(const char *v, buf *why)
{
	const char *slash = strchr(v, '/');
	char ns[254];
	if(slash && ((size_t)(slash - v) >= sizeof(ns) || slash == v)) {
		buf_printf(why, "'%s' is not NAMESPACE/NAME", v);
		return PRD_EINVAL;
	}
	if(slash) {
		snprintf(ns, sizeof(ns), "%.*s", (int)(slash - v), v);
		if(!str_is_dns_label(ns)) {
			buf_printf(why, "'%s' is not a valid namespace name (lowercase DNS label)", ns);
			return PRD_EINVAL;
		}
	}
	if(!str_is_dns_subdomain(slash ? slash + 1 : v)) {
		buf_printf(why, "'%s' is not a valid ConfigMap name (lowercase DNS subdomain)", slash ? slash + 1 : v);
		return PRD_EINVAL;
	}
	return PRD_OK;
}

static int check_priority_configmap(const cfg *c, buf *why)
{
	return *c->priority_configmap ? check_configmap_ref(c->priority_configmap, why) : PRD_OK;
}

static int check_booking_ledger(const cfg *c, buf *why)
{
	if(!*c->booking_ledger) {
		buf_printf(why, "empty: give a ConfigMap name, or none");
		return PRD_EINVAL;
	}
	return strcmp(c->booking_ledger, "none") ? check_configmap_ref(c->booking_ledger, why) : PRD_OK;
}

bool cfg_booking_ledger(const cfg *c, const char *pod_namespace, char out[510])
{
	const char *v = c->booking_ledger;
	bool several = c->leader_elect || (c->processor_instance && c->processor_instance[0]);
	if(!several || !v || !*v || !strcmp(v, "none"))
		return false;
	if(strchr(v, '/'))
		snprintf(out, 510, "%s", v);
	else
		snprintf(out, 510, "%s/%s",
			 c->lease_namespace && c->lease_namespace[0] ? c->lease_namespace
			 : pod_namespace && pod_namespace[0]          ? pod_namespace
									: "kube-system",
			 v);
	return true;
}

bool cfg_priority_configmap(const cfg *c, const char *pod_namespace, char ns[254], char name[254])
{
	const char *v = c->priority_configmap, *slash;
	if(!v || !*v)
		return false;
	slash = strchr(v, '/');
	if(slash) {
		snprintf(ns, 254, "%.*s", (int)(slash - v), v);
		snprintf(name, 254, "%s", slash + 1);
	} else {
		snprintf(ns, 254, "%s", c->lease_namespace && c->lease_namespace[0] ? c->lease_namespace
					: pod_namespace && pod_namespace[0]   ? pod_namespace
									       : "kube-system");
		snprintf(name, 254, "%s", v);
	}
	return true;
}

bool cfg_chain_has_priority(const char *chain)
{
	while(chain && *chain) {
		size_t n = strcspn(chain, ",");
		if(n == 8 && strncmp(chain, "priority", 8) == 0)
			return true;
		chain += n + (chain[n] == ',');
	}
	return false;
}

/* "priority" in the chain needs a table, from exactly one source. */
static int check_priority_source(const cfg *c, buf *errs)
{
	const cfg_option *x = by_flag("expander", 8), *m = by_flag("priority-configmap", 18),
			 *f = by_flag("priority-file", 13);
	bool wants = cfg_chain_has_priority(c->expander);
	if(REFUSED(c, x) || REFUSED(c, m) || REFUSED(c, f))
		return PRD_OK;
	if(*c->priority_configmap && *c->priority_file) {
		buf_append_str(errs, "--priority-configmap (scaleUp.priorityConfigMap) and --priority-file "
				     "(scaleUp.priorityFile) are both set: name one source of the priority table\n");
		return PRD_EINVAL;
	}
	if(wants && !*c->priority_configmap && !*c->priority_file) {
		buf_append_str(errs, "--expander (scaleUp.expander): 'priority' needs a priority table: name the "
				     "ConfigMap holding it with --priority-configmap [NAMESPACE/]NAME "
				     "(scaleUp.priorityConfigMap; data key 'priorities', the "
				     "cluster-autoscaler-priority-expander format; docs/config.md), "
				     "or a file with --priority-file (scaleUp.priorityFile)\n");
		return PRD_EINVAL;
	}
	return PRD_OK;
}

static int check_lease_name(const cfg *c, buf *why)
{
	if(str_is_dns_subdomain(c->lease_name))
		return PRD_OK;
	buf_printf(why, "'%s' is not a valid object name (lowercase DNS subdomain)", c->lease_name);
	return PRD_EINVAL;
}

/* The Lease records whole seconds (leaseDurationSeconds), and the fence's
 * margin is counted from what it records: 10900ms would be written as 10
 * or 11 s, not what was asked. Refused rather than rounded, so that the
 * margin check-config reports is the one that holds. */
static int check_lease_duration(const cfg *c, buf *why)
{
	char d[32];
	if(c->lease_duration % SEC == 0)
		return PRD_OK;
	buf_printf(why,
		   "must be whole seconds: the Lease records leaseDurationSeconds, so %s cannot be written as it is "
		   "(use %llds)",
		   cfg_format_duration(c->lease_duration, d), (long long)((c->lease_duration + SEC - 1) / SEC));
	return PRD_EINVAL;
}

/* The fence's margin (operator.md, "Leader election and fencing"): a
 * leader acts until its renew deadline after its last renewal; a standby
 * takes over a lease duration (as the Lease records it) after it saw
 * that renewal. The difference must be positive, else both act at once. */
static int check_fence_margin(const cfg *c, buf *errs)
{
	const cfg_option *a = by_flag("lease-renew-deadline", 20), *b = by_flag("lease-duration", 14);
	int64_t written = (c->lease_duration + SEC - 1) / SEC * SEC;
	char d1[32], d2[32];
	if(REFUSED(c, a) || REFUSED(c, b) || written - c->lease_renew_deadline > 0)
		return PRD_OK;
	buf_printf(errs,
		   "--lease-renew-deadline (%s) must be shorter than --lease-duration (%s): the fence's margin "
		   "(lease duration minus renew deadline) is not positive, so a standby could take the lease while "
		   "the leader still acts\n",
		   cfg_format_duration(c->lease_renew_deadline, d1), cfg_format_duration(written, d2));
	return PRD_EINVAL;
}

static int check_lease_namespace(const cfg *c, buf *why)
{
	if(!c->lease_namespace || !c->lease_namespace[0] || str_is_dns_label(c->lease_namespace))
		return PRD_OK;
	buf_printf(why, "'%s' is not a valid namespace name (lowercase DNS label)", c->lease_namespace);
	return PRD_EINVAL;
}

static int check_nonempty_state_db(const cfg *c, buf *why)
{
	if(*c->state_db)
		return PRD_OK;
	buf_append_str(why, "must not be empty (use :memory: for a throw-away store)");
	return PRD_EINVAL;
}

/* "A (value) must be shorter than B (value)" for two duration flags. */
static int ordered(const cfg *c, const char *shorter, const char *longer, bool strict, buf *errs)
{
	const cfg_option *a = by_flag(shorter, strlen(shorter)), *b = by_flag(longer, strlen(longer));
	int64_t va = *CFIELD(c, a, int64_t), vb = *CFIELD(c, b, int64_t);
	char da[32], db[32];
	if(REFUSED(c, a) || REFUSED(c, b) || (strict ? va < vb : va <= vb))
		return PRD_OK;
	buf_printf(errs, "--%s (%s) must be %s --%s (%s)\n", shorter, cfg_format_duration(va, da),
		   strict ? "shorter than" : "at most", longer, cfg_format_duration(vb, db));
	return PRD_EINVAL;
}

int cfg_validate(const cfg *c, buf *errs)
{
	size_t i;
	int rc = PRD_OK;
	for(i = 0; i < cfg_n_options; i++) {
		const cfg_option *o = &cfg_options[i];
		buf why;
		if(!o->check || REFUSED(c, o))
			continue;
		buf_init(&why);
		if(o->check(c, &why) != PRD_OK) {
			if(o->key)
				buf_printf(errs, "--%s (%s): %s\n", o->flag, o->key, buf_str(&why));
			else
				buf_printf(errs, "--%s: %s\n", o->flag, buf_str(&why));
			rc = PRD_EINVAL;
		}
		buf_free(&why);
	}
	if(check_fence_margin(c, errs) != PRD_OK)
		rc = PRD_EINVAL;
	if(ordered(c, "lease-retry-period", "lease-renew-deadline", true, errs) != PRD_OK)
		rc = PRD_EINVAL;
	if(ordered(c, "request-backoff-initial", "request-backoff-max", false, errs) != PRD_OK)
		rc = PRD_EINVAL;
	if(ordered(c, "group-backoff-initial", "group-backoff-max", false, errs) != PRD_OK)
		rc = PRD_EINVAL;
	if(!REFUSED(c, by_flag("health-stale-after", 18)) && c->health_stale_after < 2 * CFG_IDLE_HEARTBEAT_NS) {
		char d1[32], d2[32], d3[32];
		buf_printf(errs,
			   "--health-stale-after (%s) must be at least %s: an idle provreqd reports to /healthz "
			   "only every %s, so /healthz would fail (and a liveness probe restart the pod) while "
			   "nothing is wrong\n",
			   cfg_format_duration(c->health_stale_after, d1), cfg_format_duration(2 * CFG_IDLE_HEARTBEAT_NS, d2),
			   cfg_format_duration(CFG_IDLE_HEARTBEAT_NS, d3));
		rc = PRD_EINVAL;
	}
	if(check_priority_source(c, errs) != PRD_OK)
		rc = PRD_EINVAL;
	if(*c->cloud_config && c->cloud_drivers.n == 0 && !REFUSED(c, by_flag("cloud-driver", 12))) {
		buf_append_str(errs, "--cloud-config is set but no --cloud-driver is loaded\n");
		rc = PRD_EINVAL;
	}
	if(errs->failed)
		return PRD_ENOMEM;
	return rc;
}

/* The value of --config in argv, honouring "--config=F", "--config F" and
 * a single dash; the last one wins. NULL when absent. */
static const char *find_config_flag(int argc, char *const *argv)
{
	const char *found = NULL;
	int i;
	for(i = 0; i < argc; i++) {
		const char *a = argv[i], *n;
		if(strcmp(a, "--") == 0)
			break;
		if(a[0] != '-')
			continue;
		n = a + (a[1] == '-' ? 2 : 1);
		if(strncmp(n, "config=", 7) == 0)
			found = n + 7;
		else if(strcmp(n, "config") == 0 && i + 1 < argc)
			found = argv[++i];
	}
	return found;
}

/* A priority table given while the expander chain does not use it would
 * be silently ignored: a note for the caller to warn with. */
static int note_unused_priority_table(cfg *c)
{
	buf m;
	int r;
	if((!*c->priority_file && !*c->priority_configmap) || cfg_chain_has_priority(c->expander))
		return PRD_OK;
	buf_init(&m);
	buf_printf(&m, "--%s: given, but --expander (%s) does not name 'priority': the table is not used",
		   *c->priority_file ? "priority-file" : "priority-configmap", c->expander);
	r = buf_str(&m)[0] ? strv_push(&c->ignored, buf_str(&m)) : PRD_ENOMEM;
	buf_free(&m);
	return r;
}

int cfg_load(cfg *c, int argc, char *const *argv, buf *errs)
{
	int rc = cfg_defaults(c), r;
	const char *file = find_config_flag(argc, argv);
	if(rc != PRD_OK)
		return rc;
	if(file && *file) {
		r = cfg_apply_file(c, file, errs);
		if(r == PRD_ENOMEM)
			return r;
		if(r != PRD_OK)
			rc = r;
	}
	r = cfg_apply_flags(c, argc, argv, errs);
	if(r == PRD_ENOMEM)
		return r;
	if(r != PRD_OK)
		rc = r;
	/* Checks of the values that were taken, also when others were refused
	 * (unknown keys, bad values): every problem is reported at once.
	 * Checks involving a refused value are skipped (c->refused). */
	r = cfg_validate(c, errs);
	if(r == PRD_ENOMEM)
		return r;
	if(r != PRD_OK)
		rc = r;
	if(rc == PRD_OK && (r = note_unused_priority_table(c)) != PRD_OK)
		return r;
	return rc;
}

/* A YAML scalar for a string: always double-quoted, JSON escapes (valid
 * YAML), so no value can change the document's structure. */
static void yaml_string(buf *out, const char *s)
{
	json_object *j = json_object_new_string(s);
	if(!j) {
		out->failed = PRD_ENOMEM;
		return;
	}
	buf_append_str(out, json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(j);
}

static void value_text(const cfg *c, const cfg_option *o, buf *out)
{
	char d[32];
	size_t i;
	switch(o->type) {
	case CFG_STRING:
		yaml_string(out, *CFIELD(c, o, char *));
		break;
	case CFG_STRINGS: {
		const cfg_strv *v = CFIELD(c, o, cfg_strv);
		if(v->n == 0)
			buf_append_str(out, "[]");
		for(i = 0; i < v->n; i++) {
			if(i)
				buf_append_str(out, ", ");
			else
				buf_append_str(out, "[");
			yaml_string(out, v->v[i]);
			if(i + 1 == v->n)
				buf_append_str(out, "]");
		}
		break;
	}
	case CFG_INT:
		buf_printf(out, "%lld", (long long)*CFIELD(c, o, int64_t));
		break;
	case CFG_DURATION:
		buf_append_str(out, cfg_format_duration(*CFIELD(c, o, int64_t), d));
		break;
	case CFG_BOOL:
		buf_append_str(out, *CFIELD(c, o, bool) ? "true" : "false");
		break;
	}
}

int cfg_to_yaml(const cfg *c, buf *out)
{
	const char *prev = NULL;
	size_t i;
	for(i = 0; i < cfg_n_options; i++) {
		const cfg_option *o = &cfg_options[i];
		const char *k = o->key, *seg, *pseg;
		int depth = 0;
		if(!k)
			continue;
		/* Skip the sections this key shares with the previous one. */
		seg = k;
		pseg = prev;
		while(pseg) {
			size_t a = strcspn(seg, "."), b = strcspn(pseg, ".");
			if(a != b || strncmp(seg, pseg, a) != 0 || !seg[a] || !pseg[b])
				break;
			seg += a + 1;
			pseg += b + 1;
			depth++;
		}
		/* Open the remaining sections, then the key itself. */
		while(strchr(seg, '.')) {
			size_t a = strcspn(seg, ".");
			buf_printf(out, "%*s%.*s:\n", depth * 2, "", (int)a, seg);
			seg += a + 1;
			depth++;
		}
		buf_printf(out, "%*s# %s (--%s)\n", depth * 2, "", o->help, o->flag);
		buf_printf(out, "%*s%s: ", depth * 2, "", seg);
		value_text(c, o, out);
		buf_append_char(out, '\n');
		prev = k;
	}
	return out->failed ? out->failed : PRD_OK;
}

int cfg_help(buf *out)
{
	size_t i;
	for(i = 0; i < cfg_n_options; i++) {
		const cfg_option *o = &cfg_options[i];
		char meta[32];
		if(o->type == CFG_BOOL)
			meta[0] = '\0';
		else
			snprintf(meta, sizeof(meta), " %s", o->type == CFG_STRINGS ? "string" : cfg_type_name(o->type));
		buf_printf(out, "  --%s%s\n      %s", o->flag, meta, o->help);
		if(o->type == CFG_STRINGS)
			buf_append_str(out, " [repeatable]");
		else if(*o->def)
			buf_printf(out, " [default %s]", o->def);
		if(o->key)
			buf_printf(out, " (config: %s)", o->key);
		for(size_t j = 0; j < cfg_n_aliases; j++)
			if(strcmp(cfg_aliases[j].option, o->flag) == 0)
				buf_printf(out, " (cluster-autoscaler: --%s)", cfg_aliases[j].flag);
		buf_append_char(out, '\n');
	}
	buf_append_str(out, "  cluster-autoscaler flags accepted and ignored, with a warning:\n     ");
	for(i = 0; i < cfg_n_ignored; i++)
		buf_printf(out, " --%s%s", cfg_ignored[i].flag, i + 1 < cfg_n_ignored ? "," : "\n");
	return out->failed ? out->failed : PRD_OK;
}

int cfg_list_aliases(buf *out)
{
	size_t i;
	for(i = 0; i < cfg_n_aliases; i++)
		buf_printf(out, "%s\t%s\n", cfg_aliases[i].flag, cfg_aliases[i].option);
	return out->failed ? out->failed : PRD_OK;
}

int cfg_list(buf *out)
{
	size_t i;
	for(i = 0; i < cfg_n_options; i++) {
		const cfg_option *o = &cfg_options[i];
		buf_printf(out, "%s\t%s\t%s\t%s\n", o->flag, o->key ? o->key : "-", cfg_type_name(o->type),
			   o->type == CFG_STRINGS ? "[]" : *o->def ? o->def : "\"\"");
	}
	return out->failed ? out->failed : PRD_OK;
}
