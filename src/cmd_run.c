/* `provreqd run`: the controller against a real kube-apiserver.
 *
 * One worker thread (this one) runs the ProvisioningRequest pass and the
 * ResourcePool sync; the lease helper thread and the HTTP server have their
 * own threads and only touch their own state and the health/metrics
 * registries. The worker wakes when a timer of the controller is due, and
 * at least every resync interval so that changes in the cluster are picked
 * up. */
#include "config.h"
#include "cmd.h"
#include "driver/host.h"
#include "driver/host_kube.h"
#include "driver/loader.h"
#include "kube/api.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/informer.h"
#include "kube/lease.h"
#include "kube/reflector.h"
#include "ops/config.h"
#include "ops/health.h"
#include "ops/http.h"
#include "ops/log.h"
#include "ops/metrics.h"
#include "kube/metrics_authz.h"
#include "sched/priority_cm.h"
#include "pools/pools.h"
#include "provreq/controller.h"
#include "sim/sim.h"
#include "state/state.h"
#include "util/buf.h"
#include "util/hmap.h"
#include "util/str.h"
#include "util/yamljson.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* A pass runs when something changed in the caches (after a short quiet
 * period, so a burst of events makes one pass), when a timer of the
 * controller is due, and at least every resync interval. */
#define RUN_RESYNC_NS CFG_IDLE_HEARTBEAT_NS /* the idle heartbeat check-config knows */
#define RUN_QUIET_NS (100 * PRD_NS_PER_MS)
/* Lists are paged (limit/continue), so the initial list of a large cluster
 * never holds more than one page of JSON in memory. */
#define RUN_LIST_PAGE 500
/* The status writes ending a pass's decisions go out on this many
 * connections at once (paced by --kube-api-qps/--kube-api-burst): one
 * after another, 200 decisions took 1.8 s of round trips. */
#define RUN_STATUS_WRITERS 8
/* Event sender threads (Events are written asynchronously), and how long
 * queued Events may still go out at shutdown. */
#define RUN_EVENT_SENDERS 4
#define RUN_EVENTS_DRAIN_NS (1 * PRD_NS_PER_SEC)
/* After SIGTERM, requests to the apiserver may run this much longer (the
 * lease release among them); the process ends well within 5 s. */
#define RUN_SHUTDOWN_NS (3 * PRD_NS_PER_SEC)

static volatile sig_atomic_t stop_requested;

/* Change notifications from the informer threads to the worker. */
static struct {
	pthread_mutex_t mu;
	bool changed;
} waker = { PTHREAD_MUTEX_INITIALIZER, false };

static void note_change(void *ud)
{
	pool_ctl *pools = ud;
	pthread_mutex_lock(&waker.mu);
	waker.changed = true;
	pthread_mutex_unlock(&waker.mu);
	(void)pools;
}

static bool take_change(void)
{
	bool c;
	pthread_mutex_lock(&waker.mu);
	c = waker.changed;
	waker.changed = false;
	pthread_mutex_unlock(&waker.mu);
	return c;
}

static void h_add(void *ud, const kube_meta *o)
{
	(void)o;
	note_change(ud);
}

static void h_update(void *ud, const kube_meta *a, const kube_meta *b)
{
	(void)a;
	(void)b;
	note_change(ud);
}

static void h_delete(void *ud, const kube_meta *o)
{
	(void)o;
	note_change(ud);
}

/* Node changes also make the pools due for a look. */
static void h_node(void *ud, const kube_meta *o)
{
	(void)o;
	pool_ctl_mark_dirty(ud);
	note_change(NULL);
}

static void h_node_update(void *ud, const kube_meta *a, const kube_meta *b)
{
	(void)a;
	h_node(ud, b);
}

static void on_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
}

/* Sleep until `until_ns` (wall clock), a change in the caches or a stop
 * signal, in short steps so SIGTERM is honoured within a fraction of a
 * second. */
static void sleep_until(const clk *c, int64_t until_ns)
{
	struct timespec quiet = { 0, RUN_QUIET_NS };
	/* A short quiet period first, so a burst of events makes one pass. */
	nanosleep(&quiet, NULL);
	while(!stop_requested) {
		int64_t left = until_ns - clk_wall(c);
		struct timespec ts;
		if(left <= 0 || take_change())
			return;
		if(left > RUN_QUIET_NS)
			left = RUN_QUIET_NS;
		ts.tv_sec = (time_t)(left / PRD_NS_PER_SEC);
		ts.tv_nsec = (long)(left % PRD_NS_PER_SEC);
		nanosleep(&ts, NULL);
	}
}

static int collect_node(void *ud, const kube_meta *obj)
{
	pool_nodelist *nl = ud;
	const kube_node **v = realloc((void *)nl->nodes, (nl->n + 1) * sizeof(*v));
	if(!v)
		return PRD_ENOMEM;
	v[nl->n++] = (const kube_node *)obj;
	nl->nodes = v;
	return 0;
}

/* The nodes of the cache, borrowed: the caller releases the read lock
 * (always, also on failure) and frees only the array. */
static int pool_nodes_from_cache(kube_informer *nodes, pool_nodelist *nl)
{
	kube_informer_rdlock(nodes);
	return kube_informer_foreach(nodes, collect_node, nl);
}

/* Watch restarts and relists since the last call, into the counters. */
static void export_informer_stats(kube_informer *const *inf, const kube_resource *const *res,
				  kube_reflector_stats *last)
{
	size_t i;
	for(i = 0; i < 4; i++) {
		kube_reflector_stats st;
		if(!inf[i])
			continue;
		kube_informer_get_stats(inf[i], &st);
		if(st.watch_restarts > last[i].watch_restarts)
			metrics_counter_add(M_WATCH_RESTARTS, METRICS_L(res[i]->resource),
					    (double)(st.watch_restarts - last[i].watch_restarts));
		if(st.relists > last[i].relists)
			metrics_counter_add(M_RELISTS, METRICS_L(res[i]->resource), (double)(st.relists - last[i].relists));
		last[i] = st;
	}
}

/* Every apiserver request, into the API metrics. A watch (verb WATCH) is
 * counted but not timed: the client reports it when the stream ends, with
 * no latency, and the stream's life is not a request latency. */
static void observe_api(void *ud, const char *verb, const char *resource, long code, int64_t latency_ns)
{
	char cb[16];
	(void)ud;
	(void)resource;
	snprintf(cb, sizeof(cb), "%ld", code);
	metrics_counter_add(M_API_REQUESTS, METRICS_L(verb, cb), 1);
	if(strcmp(verb, "WATCH") != 0)
		metrics_observe(M_API_LATENCY, METRICS_L(verb), (double)latency_ns / (double)PRD_NS_PER_SEC);
}

/* Monotonic time since this replica started waiting for the lease (at
 * start, and again whenever it loses it): the failover time it reports. */
static int64_t waiting_since;

/* The controller's fence: the lease is ours with a margin right now (see
 * kube_lease_valid), asked before every cloud call and API write. */
static bool lease_fence(void *ud)
{
	return kube_lease_valid(ud);
}

/* The same for drivers (prd_cloud_host.may_act). */
static int lease_fence_int(void *ud)
{
	return kube_lease_valid(ud) ? 1 : 0;
}

/* Before the lease exists, no driver acts. */
static int no_lease_yet(void *ud)
{
	(void)ud;
	return 0;
}

static void on_leading(void *ud)
{
	double waited = (double)(clk_mono(clk_real()) - waiting_since) / (double)PRD_NS_PER_SEC;
	(void)ud;
	metrics_counter_add(M_LEADER_TRANSITIONS, METRICS_L("acquired"), 1);
	metrics_gauge_set(M_LEADER_ACQUIRE_WAIT, NULL, waited);
	metrics_gauge_set(M_LEADER, NULL, 1);
	log_info("became leader", "waited_ms", LOGI((long long)(waited * 1000)));
	/* Start now, not at the worker's next resync (the worker takes the
	 * new term: kube_lease_new_term). */
	note_change(NULL);
}

static void on_not_leading(void *ud)
{
	(void)ud;
	waiting_since = clk_mono(clk_real());
	metrics_counter_add(M_LEADER_TRANSITIONS, METRICS_L("lost"), 1);
	metrics_gauge_set(M_LEADER, NULL, 0);
	log_warn("stopped leading: no more writes until the lease is held again");
}

/* The holder the lease thread saw last, for /readyz on a replica that
 * stands by. */
static pthread_mutex_t holder_mu = PTHREAD_MUTEX_INITIALIZER;
static char holder_seen[256];

static void on_new_holder(void *ud, const char *identity)
{
	(void)ud;
	pthread_mutex_lock(&holder_mu);
	snprintf(holder_seen, sizeof(holder_seen), "%s", identity ? identity : "");
	pthread_mutex_unlock(&holder_mu);
}

/* The lease cannot be used (or can again): readiness says why. Runs on the
 * lease thread; health_* is safe from any thread. */
static void on_lease_problem(void *ud, const char *cause)
{
	char reason[PRD_ERR_MSG_MAX + 64];
	if(cause)
		snprintf(reason, sizeof(reason), "cannot take the leader-election lease: %s", cause);
	health_set_flag(ud, "leader-election", cause == NULL, cause ? reason : NULL);
}

/* Leader election: identity $POD_NAME (else host_pid), namespace
 * --lease-namespace, else $POD_NAMESPACE, else kube-system. */
static int start_lease(const cfg *c, kube_client *client, health *hl, kube_lease **out, prd_err *e)
{
	kube_lease_opts lo;
	char hostname[128] = "provreqd", identity[200];
	const char *pod = getenv("POD_NAME"), *pod_ns = getenv("POD_NAMESPACE");

	if(pod && pod[0]) {
		snprintf(identity, sizeof(identity), "%s", pod);
	} else {
		gethostname(hostname, sizeof(hostname) - 1);
		snprintf(identity, sizeof(identity), "%s_%ld", hostname, (long)getpid());
	}
	memset(&lo, 0, sizeof(lo));
	lo.namespace_ = c->lease_namespace && c->lease_namespace[0] ? c->lease_namespace
			: pod_ns && pod_ns[0]                          ? pod_ns
									: "kube-system";
	lo.name = c->lease_name;
	lo.identity = identity;
	lo.lease_duration_ns = c->lease_duration;
	lo.renew_deadline_ns = c->lease_renew_deadline;
	lo.retry_period_ns = c->lease_retry_period;
	lo.on_started = on_leading;
	lo.on_stopped = on_not_leading;
	lo.on_problem = on_lease_problem;
	lo.on_new_leader = on_new_holder;
	lo.ud = hl;
	health_add_flag(hl, "leader-election", true, NULL);
	waiting_since = clk_mono(clk_real());
	if(kube_lease_new(client, &lo, out, e) || kube_lease_start(*out, e))
		return e->code ? e->code : PRD_EINTERNAL;
	log_info("leader election started", "lease", c->lease_name, "namespace", lo.namespace_, "identity",
		 identity);
	return 0;
}

/* Wait for the first list of every informer, beating the liveness clock
 * and giving up at once on SIGTERM/SIGINT. false = stop asked. */
static bool wait_caches(kube_informer *const *inf, const kube_kind *kinds, size_t n, health *hl)
{
	size_t i;
	uint64_t said = 0;
	for(i = 0; i < n;) {
		struct timespec step = { 0, RUN_QUIET_NS };
		kube_reflector_stats st;
		if(stop_requested)
			return false;
		health_beat(hl);
		if(!inf[i] || kube_informer_has_synced(inf[i])) {
			i++;
			said = 0;
			continue;
		}
		/* Lists that keep failing (an apiserver that cannot be reached
		 * or refuses): readiness says which and how often, not only
		 * that the caches still list. */
		kube_informer_get_stats(inf[i], &st);
		if(st.list_errors > said) {
			char why[200];
			said = st.list_errors;
			snprintf(why, sizeof(why),
				 "the informer caches are still listing: listing %ss failed (attempts so far: %llu; the log says why)",
				 kube_kind_name(kinds[i]), (unsigned long long)said);
			health_set_flag(hl, "caches-synced", false, why);
		}
		nanosleep(&step, NULL);
	}
	return true;
}

/* The informers, in this order: the controller and the pool sync find
 * them by index (0 = nodes). From RUN_FIRST_DRA on, resource.k8s.io/v1
 * (DRA): started only when the cluster serves it and lets us list it.
 * Last (RUN_PCLASS), provreqd.io/v1alpha1 ProvisioningClasses: started
 * only when the CRD is installed and readable. */
#define RUN_NINF 9
#define RUN_FIRST_DRA 4
#define RUN_PCLASS 8
static const kube_resource run_pclasses = { "provreqd.io", "v1alpha1", "provisioningclasses", "ProvisioningClass",
					    false };
static const kube_kind inf_kinds[RUN_NINF] = { KUBE_KIND_NODE, KUBE_KIND_POD, KUBE_KIND_PODTEMPLATE,
					       KUBE_KIND_PROVREQ, KUBE_KIND_RESOURCESLICE, KUBE_KIND_DEVICECLASS,
					       KUBE_KIND_RESOURCECLAIMTEMPLATE, KUBE_KIND_RESOURCECLAIM,
					       KUBE_KIND_PROVCLASS };
static const kube_resource *const inf_res[RUN_NINF] = { &KUBE_NODES, &KUBE_PODS, &KUBE_PODTEMPLATES,
							&KUBE_PROVREQS, &KUBE_RESOURCESLICES, &KUBE_DEVICECLASSES,
							&KUBE_RESOURCECLAIMTEMPLATES, &KUBE_RESOURCECLAIMS, &run_pclasses };

/* What run_setup() creates and run_teardown() frees. It lives on
 * cmd_run's stack for the whole run and must not move: the drivers keep a
 * pointer to `host`, the pool sync to `api`, the controller to `drivers`
 * and to strings of `c`. Every pointer is NULL until created. */
typedef struct run_ctx {
	cfg c;
	char ledger[510];        /* the booking ledger "NAMESPACE/NAME" (pr_config.booking_ledger) */
	const clk *clock;
	kube_config *kc;
	kube_client *client;
	kube_api api;
	kube_client *ev_client;   /* Events: a rate budget of their own */
	kube_api ev_api;
	state_db *db;
	char *cloud_cfg;
	cfg_res_limit *res_limits;  /* --cores-total, --memory-total, --gpu-total */
	cloud_drivers drivers;
	cloud_host_impl host;
	health *hl;
	http_server *http;
	kube_lease *lease;
	kube_lease_follow term;    /* the term the controller acts in (kube_lease_new_term) */
	pr_ctl *ctl;
	bool prio_from_cm;        /* the priority table comes from prio_cm */
	prio_cm prio_cm;
	pool_ctl *pools;
	hmap pool_children;
	kube_intern *intern;
	kube_informer *inf[RUN_NINF];
	kube_listwatch lw[RUN_NINF];
	bool lw_made[RUN_NINF];
	kube_reflector_stats last_stats[RUN_NINF];
	bool plan_key_ok;         /* the plan key is loaded (load_plan_key) */
	int64_t plan_key_next;    /* when to try again (wall ns) */
} run_ctx;

/* --help, the configuration, logging, metrics and signal handlers. true
 * to go on; false to end at once with *exit_code (then nothing needs
 * freeing). */
static bool run_start(run_ctx *r, int argc, char **argv, int *exit_code)
{
	buf errs;
	int fmt = PRD_LOG_TEXT, i;
	struct sigaction sa;

	buf_init(&errs);
	for(i = 1; i < argc; i++) {
		if(!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs("Usage: provreqd run [--config FILE] [flags]\n\n"
			      "Serve ProvisioningRequests and populate ResourcePools against the cluster of\n"
			      "--kubeconfig (or the in-cluster service account). Flags override the config\n"
			      "file; `provreqd check-config` validates both. Exit status: 0 after a clean\n"
			      "shutdown, 1 a fatal error, 2 a usage or configuration error.\n\nFlags:\n", stdout);
			if(cfg_help(&errs) == 0)
				fputs(buf_str(&errs), stdout);
			buf_free(&errs);
			*exit_code = 0;
			return false;
		}
	}
	if(cfg_load(&r->c, argc - 1, argv + 1, &errs)) {
		fprintf(stderr, "provreqd run: %s", buf_str(&errs));
		buf_free(&errs);
		cfg_free(&r->c);
		*exit_code = 2;
		return false;
	}
	buf_free(&errs);
	log_parse_format(r->c.log_format, &fmt);
	log_setup((int)r->c.v, fmt, stderr);
	for(size_t k = 0; k < r->c.ignored.n; k++)
		log_warn("flag ignored", "flag", r->c.ignored.v[k]);
	if(metrics_init()) {
		fprintf(stderr, "provreqd run: out of memory\n");
		cfg_free(&r->c);
		*exit_code = 1;
		return false;
	}

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	return true;
}

static void observe_connections(void *ud, long n)
{
	(void)ud;
	metrics_counter_add(M_API_CONNECTIONS, NULL, (double)n);
}

/* The driver's configuration, a relative templateDir in it made relative
 * to the file's directory (as simulate and check-driver take it). *out:
 * caller frees. */
static int read_cloud_config(const char *path, char **out, prd_err *e)
{
	char *text = NULL;
	size_t len;
	int rc = yj_read_file(path, 16u << 20, &text, &len, e);
	if(!rc)
		rc = sim_cloud_config_resolve(path, text, out, e);
	free(text);
	return rc;
}

/* The apiserver client, the state store and the cloud drivers. */
static int setup_backends(run_ctx *r, prd_err *e)
{
	const cfg *c = &r->c;
	kube_client_opts copts;
	state_config sc;
	size_t i;

	memset(&copts, 0, sizeof(copts));
	copts.observe = observe_api;
	copts.connected = observe_connections;
	copts.qps = (double)c->kube_api_qps;
	copts.burst = (int)c->kube_api_burst;
	if(kube_config_auto(c->kubeconfig && c->kubeconfig[0] ? c->kubeconfig : NULL, c->context, &r->kc, e) ||
	   kube_client_new(r->kc, &copts, &r->client, e) || kube_client_new(r->kc, &copts, &r->ev_client, e)) {
		log_error("cannot reach the cluster", "error", e->msg);
		return 1;
	}
	r->api = kube_api_from_client(r->client);
	r->ev_api = kube_api_from_client(r->ev_client);
	state_config_default(&sc);
	sc.request_backoff_initial_ns = c->request_backoff_initial;
	sc.request_backoff_max_ns = c->request_backoff_max;
	sc.group_backoff_initial_ns = c->group_backoff_initial;
	sc.group_backoff_max_ns = c->group_backoff_max;
	sc.group_backoff_reset_ns = c->group_backoff_reset;
	if(state_open(c->state_db, r->clock, &sc, &r->db, e)) {
		log_error("cannot open the state store", "error", e->msg);
		return 1;
	}
	if(c->cloud_config && c->cloud_config[0] && read_cloud_config(c->cloud_config, &r->cloud_cfg, e)) {
		log_error("cannot read --cloud-config", "error", e->msg);
		return 1;
	}
	cloud_host_init(&r->host, "driver", r->clock, cloud_host_kube_request, r->client);
	/* Leader-elected, a driver may change nothing before the lease is
	 * held (its init's discovery included): setup_controllers replaces
	 * this fence with the lease's. */
	if(c->leader_elect)
		cloud_host_set_fence(&r->host, no_lease_yet, NULL);
	for(i = 0; i < c->cloud_drivers.n; i++) {
		if(cloud_drivers_load(&r->drivers, c->cloud_drivers.v[i], &r->host.host, r->cloud_cfg, NULL, e)) {
			log_error("cannot load cloud driver", "error", e->msg);
			return 1;
		}
		log_info("cloud driver loaded", "path", c->cloud_drivers.v[i], "name",
			 r->drivers.v[r->drivers.n - 1]->api->name);
	}
	return 0;
}

/* The metrics/health endpoint, /metrics guarded as --metrics-access says
 * (tokenreview asks the apiserver through the controller's client). */
static int start_http(run_ctx *r, prd_err *e)
{
	http_opts o = { HTTP_ACCESS_OPEN, metrics_authz_kube, r->client };

	if(http_access_parse(r->c.metrics_access, &o.metrics_access))
		return prd_err_set(e, PRD_EINVAL, "--metrics-access: '%s' is not open, localhost or tokenreview",
				   r->c.metrics_access);
	return http_start_opts(r->c.http_addr, r->hl, &o, &r->http, e);
}

/* Health flags, the metrics/health endpoint and leader election. */
static int setup_health(run_ctx *r, prd_err *e)
{
	const cfg *c = &r->c;

	if(health_new(r->clock, c->health_stale_after, &r->hl)) {
		log_error("out of memory");
		return 1;
	}
	health_add_flag(r->hl, "state-store", true, NULL);
	health_add_flag(r->hl, "leader", !c->leader_elect, c->leader_elect ? "standing by for the lease" : NULL);
	health_add_flag(r->hl, "first-pass", false, "the first controller pass has not finished");
	health_add_flag(r->hl, "fence", true, NULL);
	if(c->http_addr && c->http_addr[0] && start_http(r, e)) {
		log_error("cannot serve metrics and health", "error", e->msg);
		return 1;
	}
	if(c->leader_elect && start_lease(c, r->client, r->hl, &r->lease, e)) {
		log_error("cannot start leader election", "error", e->msg);
		return 1;
	}
	return 0;
}

/* The priority expander's table: from --priority-file once (a bad file
 * stops the start), or from --priority-configmap, re-read before passes
 * (run_priorities). */
static int setup_priorities(run_ctx *r, prd_err *e)
{
	char ns[254], name[254];
	sched_priorities p;

	if(r->c.priority_file[0]) {
		int rc = sched_priorities_read_file(r->c.priority_file, &p, e);
		if(!rc) {
			rc = pr_ctl_set_priorities(r->ctl, p.v, p.n, e);
			if(!rc)
				log_info("priority expander table loaded", "file", r->c.priority_file, "priorities",
					 LOGI(p.n));
			sched_priorities_free(&p);
		}
		if(rc) {
			log_error("cannot use --priority-file", "error", e->msg);
			return 1;
		}
	}
	if(cfg_priority_configmap(&r->c, getenv("POD_NAMESPACE"), ns, name)) {
		prio_cm_init(&r->prio_cm, ns, name);
		r->prio_from_cm = true;
		log_info("priority expander table from a ConfigMap, re-read every 10s", "namespace", ns, "name", name);
	}
	return 0;
}

/* A new table from the ConfigMap, when it changed. */
static void run_priorities(run_ctx *r)
{
	sched_priorities p;
	prd_err e;

	if(!r->prio_from_cm || prio_cm_poll(&r->prio_cm, &r->api, clk_mono(r->clock), &p) != 1)
		return;
	if(pr_ctl_set_priorities(r->ctl, p.v, p.n, &e))
		log_error("cannot use the priority expander table", "error", e.msg);
	sched_priorities_free(&p);
}

/* Does some loaded driver auto-provision node groups? */
static bool nap_capable(const cloud_drivers *d)
{
	size_t i;
	for(i = 0; i < d->n; i++)
		if(cloud_driver_naps(d->v[i]->api))
			return true;
	return false;
}

/* The controller found a term of this election recorded above its own
 * while it holds the lease (a recreated Lease): raise the Lease's count
 * (pr_ctl_set_term_raise). The controller acts in the raised term from its
 * next pass; run_iteration knows it set it. */
static int raise_term(void *ud, int64_t transitions, prd_err *err)
{
	run_ctx *r = ud;
	return kube_lease_follow_raise(r->lease, &r->term, transitions, err);
}

/* The ProvisioningRequest controller and the ResourcePool sync. */
static int setup_controllers(run_ctx *r, prd_err *e)
{
	const cfg *c = &r->c;
	pr_config pc;
	pool_opts po;

	pr_config_default(&pc);
	pc.booking_ttl_ns = c->booking_ttl;
	pc.provision_timeout_ns = c->provision_timeout;
	pc.template_grace_ns = c->missing_template_grace;
	pc.max_age_ns = c->max_age;
	pc.gc_after_ns = c->gc_after;
	pc.state_retention_ns = c->state_retention;
	pc.processor_instance = c->processor_instance && c->processor_instance[0] ? c->processor_instance : NULL;
	pc.expander = c->expander;
	pc.max_nodes_total = c->max_nodes_total;
	pc.max_nodes_per_scaleup = c->max_nodes_per_scaleup;
	pc.scale_down = c->scale_down;
	pc.quota_check = c->quota_check;
	pc.scale_down_idle_ns = c->scale_down_idle;
	pc.status_writers = RUN_STATUS_WRITERS;
	pc.nap = c->nap;
	pc.nap_max_groups = c->nap_max_groups;
	{
		buf why;
		size_t n = 0;
		buf_init(&why);
		/* (check-config and cfg_load validated them already.) */
		if(cfg_res_limits(c, &r->res_limits, &n, &why)) {
			prd_err_set(e, PRD_EINVAL, "cluster-wide limits: %s", why.len ? buf_str(&why) : "out of memory");
			buf_free(&why);
			log_error("cannot start the controller", "error", e->msg);
			return 1;
		}
		buf_free(&why);
		pc.res_limits = r->res_limits;
		pc.nres_limits = n;
	}
	if(pc.nap && !nap_capable(&r->drivers))
		log_warn("--node-autoprovisioning is on, but no loaded driver offers machine shapes (ABI 1.5): no "
			 "node group will be created");
	if(cfg_booking_ledger(c, getenv("POD_NAMESPACE"), r->ledger)) {
		pc.booking_ledger = r->ledger;
		log_info("booking ledger", "configmap", r->ledger);
	}
	if(pr_ctl_new(&pc, r->clock, &r->api, r->db, &r->drivers, &r->ctl, e) ||
	   pr_ctl_use_event_api(r->ctl, &r->ev_api, RUN_EVENT_SENDERS, e)) {
		log_error("cannot start the controller", "error", e->msg);
		return 1;
	}
	/* Fencing for real: no cloud call, status or object write unless the
	 * lease is ours with a margin at that moment, whatever the pass
	 * thought at its start. */
	if(r->lease) {
		pr_ctl_set_fence(r->ctl, lease_fence, r->lease);
		cloud_host_set_fence(&r->host, lease_fence_int, r->lease);
		pr_ctl_set_term_raise(r->ctl, raise_term, r);
	}
	if(setup_priorities(r, e))
		return 1;
	memset(&po, 0, sizeof(po));
	po.api = &r->api;
	po.clock = r->clock;
	/* pool_opts reads 0 as "the default"; --pool-debounce=0s means no wait. */
	po.debounce_ns = c->pool_debounce > 0 ? c->pool_debounce : 1;
	po.resync_ns = RUN_RESYNC_NS; /* pools are not watched */
	po.filter.include_not_ready = c->pool_include_unready;
	po.filter.include_unschedulable = c->pool_include_unready;
	po.metrics = pool_metrics_registry(&r->pool_children);
	if(pool_ctl_new(&po, &r->pools, e)) {
		log_error("cannot start pool population", "error", e->msg);
		return 1;
	}
	return 0;
}

/* Informers: the controller reads the cluster from their caches, and
 * their events wake the worker. */
/* Can the DRA kinds be listed? A cluster without resource.k8s.io/v1, or
 * RBAC without it, runs without DRA: pods with resourceClaims are then
 * refused with a condition saying so. */
static bool dra_readable(run_ctx *r)
{
	static const char *const paths[] = { "/apis/resource.k8s.io/v1/resourceslices?limit=1",
					     "/apis/resource.k8s.io/v1/deviceclasses?limit=1",
					     "/apis/resource.k8s.io/v1/resourceclaimtemplates?limit=1",
					     "/apis/resource.k8s.io/v1/resourceclaims?limit=1" };
	size_t i;
	for(i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		json_object *o = NULL;
		prd_err pe;
		if(kube_api_call(&r->api, "GET", paths[i], NULL, NULL, &o, NULL, &pe)) {
			log_warn("Dynamic Resource Allocation is not simulated: resource.k8s.io/v1 cannot be listed",
				 "error", pe.msg);
			return false;
		}
		json_object_put(o);
	}
	return true;
}

/* Can ProvisioningClasses be listed? Without the CRD (or the RBAC to read
 * it) requests naming one are left alone, like any class not served. */
static bool pclasses_readable(run_ctx *r)
{
	json_object *o = NULL;
	prd_err pe;
	if(kube_api_call(&r->api, "GET", "/apis/provreqd.io/v1alpha1/provisioningclasses?limit=1", NULL, NULL, &o, NULL,
			 &pe)) {
		log_warn("ProvisioningClasses are not served: provreqd.io/v1alpha1 provisioningclasses cannot be listed "
			 "(kubectl apply -f crd/provisioningclasses.yaml)",
			 "error", pe.msg);
		return false;
	}
	json_object_put(o);
	return true;
}

/* Start informers [from, to). */
static int start_informers(run_ctx *r, size_t from, size_t to, prd_err *e)
{
	size_t i;
	for(i = from; i < to; i++) {
		kube_informer_opts io;
		kube_handler h;
		memset(&io, 0, sizeof(io));
		io.kind = inf_kinds[i];
		io.intern = r->intern;
		io.reflector.name = inf_res[i]->resource;
		memset(&h, 0, sizeof(h));
		if(inf_kinds[i] == KUBE_KIND_NODE) {
			h.on_add = h_node;
			h.on_update = h_node_update;
			h.on_delete = h_node;
			h.ud = r->pools;
		} else {
			h.on_add = h_add;
			h.on_update = h_update;
			h.on_delete = h_delete;
		}
		if(kube_informer_new(&io, &r->inf[i], e) || kube_informer_add_handler(r->inf[i], &h) ||
		   kube_listwatch_client(r->client, inf_res[i], NULL, NULL, NULL, RUN_LIST_PAGE, &r->lw[i])) {
			log_error("cannot set up the informers", "resource", inf_res[i]->resource, "error", e->msg);
			return 1;
		}
		r->lw_made[i] = true;
		if(kube_informer_start(r->inf[i], &r->lw[i], e)) {
			log_error("cannot start an informer", "resource", inf_res[i]->resource, "error", e->msg);
			return 1;
		}
	}
	return 0;
}

/* The core informers; the DRA ones start once those synced (run_loop):
 * whether the cluster serves resource.k8s.io/v1 is asked of an apiserver
 * known to answer, and a SIGTERM while it does not is honoured at once. */
static int setup_informers(run_ctx *r, prd_err *e)
{
	r->intern = kube_intern_new();
	if(!r->intern) {
		log_error("out of memory");
		return 1;
	}
	memset(r->last_stats, 0, sizeof(r->last_stats));
	return start_informers(r, 0, RUN_FIRST_DRA, e);
}

/* Everything the worker needs, in dependency order. 0, or 1 after logging
 * why; run_teardown() frees what was made either way. */
static int run_setup(run_ctx *r)
{
	prd_err e;
	int rc = setup_backends(r, &e);

	if(!rc)
		rc = setup_health(r, &e);
	if(!rc)
		rc = setup_controllers(r, &e);
	if(!rc)
		rc = setup_informers(r, &e);
	return rc;
}

/* Sync the pools when due; lowers *wake to when they are due next. */
static void run_pools(run_ctx *r, int64_t now, int64_t *wake, prd_err *e)
{
	int64_t pool_wait = -1;

	/* Pools are debounced by pool_ctl; node events mark them dirty.
	 * Pools themselves are not watched (the CRD may be absent): each
	 * sync lists them, and one is due at least every RUN_RESYNC_NS, so a
	 * new or edited pool is found by then. */
	if(pool_ctl_due(r->pools, &pool_wait)) {
		pool_nodelist nl;
		memset(&nl, 0, sizeof(nl));
		if(pool_nodes_from_cache(r->inf[0], &nl) == 0)
			pool_ctl_sync(r->pools, nl.nodes, nl.n, e);
		kube_informer_rdunlock(r->inf[0]);
		free(nl.nodes);
	}
	if(pool_wait > 0 && now + pool_wait < *wake)
		*wake = now + pool_wait;
}

/* The plan key (pr_plan_key_load) from the Secret provreqd-plan-key in
 * provreqd's own namespace (the lease's): read, or created when missing.
 * Until it is had, plans run from the local store only and nothing is
 * adopted from a status; it is tried again every 30 s, never fatal. */
static void load_plan_key(run_ctx *r, int64_t now)
{
	const char *pod_ns = getenv("POD_NAMESPACE");
	const char *ns = r->c.lease_namespace && r->c.lease_namespace[0] ? r->c.lease_namespace
			 : pod_ns && pod_ns[0]                              ? pod_ns
									    : "kube-system";
	uint8_t key[32];
	bool created = false;
	prd_err e;
	if(r->plan_key_ok || now < r->plan_key_next)
		return;
	if(pr_plan_key_load(&r->api, ns, key, &created, &e)) {
		metrics_gauge_set(M_PLAN_KEY, NULL, 0);
		log_warn("cannot read or create the plan key: scale-up plans run from this replica's store only and no "
			 "plan is adopted from a request's status; retrying in 30s",
			 "secret", PR_PLAN_KEY_SECRET, "namespace", ns, "error", e.msg);
		r->plan_key_next = now + 30 * PRD_NS_PER_SEC;
		return;
	}
	if(created)
		log_info("created the plan key", "secret", PR_PLAN_KEY_SECRET, "namespace", ns);
	pr_ctl_set_plan_key(r->ctl, key, sizeof(key));
	memset(key, 0, sizeof(key));
	r->plan_key_ok = true;
}

/* One turn of the worker: a pass when leading, then sleep until the next
 * timer, a change or the resync interval. */
static void run_iteration(run_ctx *r)
{
	int64_t wake = INT64_MAX, now = clk_wall(r->clock);
	bool leading = !r->c.leader_elect || kube_lease_valid(r->lease);
	char why[700];
	prd_err e;

	if(leading && r->lease) {
		char id[256], term[300], key[64];
		int64_t transitions = 0;
		/* A new term: taken now, or the Lease's count changed under
		 * this holder (the Lease was deleted and this replica made it
		 * again). The local store may be stale (another replica led
		 * meanwhile); the API says what is true. */
		if(kube_lease_new_term(r->lease, &r->term, key, id, sizeof(id), &transitions)) {
			snprintf(term, sizeof(term), "%s#%lld", id, (long long)transitions);
			pr_ctl_set_term(r->ctl, key, id, transitions);
			pr_ctl_rebuild_from_api(r->ctl);
			log_info("leader term begins: the local store is rebuilt from the API and node groups are "
				 "fenced before acting",
				 "term", term, "fence_key", key);
		}
	}

	health_beat(r->hl);
	/* A standby is ready (a rollout must not wait for it) and says it
	 * stands by; a holder whose lease lapsed (not renewed within the
	 * renew deadline) cannot act: not ready, with the cause. */
	if(leading || !r->lease) {
		health_set_flag(r->hl, "leader", true, NULL);
		health_set_note(r->hl, "leader", NULL);
	} else if(kube_lease_is_leader(r->lease)) {
		health_set_flag(r->hl, "leader", false,
				"the lease was not renewed within the renew deadline: this replica acts on nothing");
	} else {
		pthread_mutex_lock(&holder_mu);
		if(holder_seen[0])
			snprintf(why, sizeof(why), "standing by: the lease is held by %s", holder_seen);
		else
			snprintf(why, sizeof(why), "standing by for the lease");
		pthread_mutex_unlock(&holder_mu);
		health_set_flag(r->hl, "leader", true, NULL);
		health_set_note(r->hl, "leader", why);
	}
	metrics_gauge_set(M_LEADER, NULL, leading ? 1 : 0);
	if(leading) {
		load_plan_key(r, now);
		run_priorities(r);
		if(pr_ctl_pass(r->ctl, &wake, &e)) {
			log_error("controller pass failed; retrying", "error", e.msg);
			wake = now + 5 * PRD_NS_PER_SEC;
		} else {
			health_set_flag(r->hl, "first-pass", true, NULL);
		}
		if(pr_ctl_fenced_out(r->ctl, why, sizeof(why)))
			health_set_flag(r->hl, "fence", false, why);
		else
			health_set_flag(r->hl, "fence", true, NULL);
		run_pools(r, now, &wake, &e);
	} else {
		health_set_flag(r->hl, "first-pass", true, NULL);
		health_set_flag(r->hl, "fence", true, NULL);
	}
	export_informer_stats(r->inf, inf_res, r->last_stats);
	if(wake > now + RUN_RESYNC_NS)
		wake = now + RUN_RESYNC_NS;
	sleep_until(r->clock, wake);
}

/* Wait for the caches, then work until SIGTERM/SIGINT. */
static void run_loop(run_ctx *r)
{
	pr_informers pi;

	memset(&pi, 0, sizeof(pi));
	health_add_flag(r->hl, "caches-synced", false, "the informer caches are still listing");
	if(!wait_caches(r->inf, inf_kinds, RUN_FIRST_DRA, r->hl)) {
		log_info("shutting down before the caches synced");
		return;
	}
	{
		prd_err e;
		if(!stop_requested && dra_readable(r) && start_informers(r, RUN_FIRST_DRA, RUN_PCLASS, &e))
			return;
		if(!stop_requested && pclasses_readable(r) && start_informers(r, RUN_PCLASS, RUN_NINF, &e))
			return;
	}
	if(!wait_caches(r->inf, inf_kinds, RUN_NINF, r->hl)) {
		log_info("shutting down before the caches synced");
		return;
	}
	health_set_flag(r->hl, "caches-synced", true, NULL);
	pi.intern = r->intern;
	pi.nodes = r->inf[0];
	pi.pods = r->inf[1];
	pi.podtemplates = r->inf[2];
	pi.provreqs = r->inf[3];
	pi.resourceslices = r->inf[4];
	pi.deviceclasses = r->inf[5];
	pi.claimtemplates = r->inf[6];
	pi.claims = r->inf[7];
	pi.provclasses = r->inf[RUN_PCLASS];
	pr_ctl_use_informers(r->ctl, &pi);
	log_info("provreqd running", "version", PACKAGE_VERSION, "server", r->kc->server, "drivers",
		 LOGI(r->drivers.n), "leader_elect", r->c.leader_elect ? "true" : "false");
	while(!stop_requested)
		run_iteration(r);
	log_info("shutting down: releasing the lease and closing the state store");
}

/* Free what run_setup() made, also after it failed part way. */
static void run_teardown(run_ctx *r)
{
	size_t i;

	/* Whatever the apiserver does now, the process ends within seconds:
	 * the lease is released first (the worker no longer writes), with a
	 * few seconds for that; then whatever the informers still have in
	 * flight is aborted at once, and nothing is retried. */
	if(r->client)
		kube_client_set_deadline(r->client, clk_mono(clk_real()) + RUN_SHUTDOWN_NS);
	if(r->lease)
		kube_lease_stop(r->lease);
	if(r->client)
		kube_client_set_deadline(r->client, clk_mono(clk_real()));
	/* Events still queued get a second to go out (the recorder sends
	 * its queue when the controller is freed below). */
	if(r->ev_client)
		kube_client_set_deadline(r->ev_client, clk_mono(clk_real()) + RUN_EVENTS_DRAIN_NS);
	for(i = 0; i < RUN_NINF; i++) {
		if(r->inf[i])
			kube_informer_stop(r->inf[i]);
	}
	/* The controller keeps copies of cached objects: freed before the
	 * informers and their string table. */
	pr_ctl_free(r->ctl);
	r->ctl = NULL;
	for(i = 0; i < RUN_NINF; i++) {
		kube_informer_free(r->inf[i]);
		if(r->lw_made[i])
			kube_listwatch_client_free(&r->lw[i]);
	}
	if(r->intern)
		kube_intern_free(r->intern);
	pool_ctl_free(r->pools);
	if(r->prio_from_cm)
		prio_cm_free(&r->prio_cm);
	hmap_free(&r->pool_children);
	kube_lease_free(r->lease);
	if(r->http)
		http_stop(r->http);
	health_free(r->hl);
	cloud_drivers_free(&r->drivers);
	state_close(r->db);
	kube_client_free(r->client);
	kube_client_free(r->ev_client);
	kube_config_free(r->kc);
	free(r->cloud_cfg);
	free(r->res_limits);
	cfg_free(&r->c);
	metrics_shutdown();
}

int cmd_run(int argc, char **argv)
{
	run_ctx r;
	int rc = 1;

	memset(&r, 0, sizeof(r));
	r.term = (kube_lease_follow)KUBE_LEASE_FOLLOW_INIT;
	hmap_init(&r.pool_children, NULL);
	cloud_drivers_init(&r.drivers);
	r.clock = clk_real();
	if(!run_start(&r, argc, argv, &rc))
		return rc;
	if(run_setup(&r) == 0) {
		run_loop(&r);
		rc = 0;
	}
	run_teardown(&r);
	return rc;
}
