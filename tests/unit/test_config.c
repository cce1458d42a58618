/* Config: defaults, file values, flags over file, unknown keys with their
 * path, bad values, repeatable flags, validation, YAML round trip and the
 * check-config command's output and exit status. */
#include "testutil.h"
#include "kube/memapi.h"
#include "ops/config.h"
#include "sched/priority_cm.h"
#include "util/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

/* What check-config adds when the fence's margin is not positive. */
#define MARGIN_WHY \
	": the fence's margin (lease duration minus renew deadline) is not positive, so a standby could take " \
	"the lease while the leader still acts"

#define SEC 1000000000LL

static const char *write_tmp(const char *name, const char *text)
{
	static char path[512];
	FILE *f;
	snprintf(path, sizeof(path), "%s/%s", test_tmpdir(), name);
	f = fopen(path, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fputs(text, f);
	fclose(f);
	return path;
}

/* cfg_load with a NULL-terminated argument list. */
static int load(cfg *c, buf *errs, char **argv)
{
	int argc = 0;
	while(argv[argc])
		argc++;
	buf_init(errs);
	return cfg_load(c, argc, argv, errs);
}

#define ARGS(...) ((char *[]){ __VA_ARGS__, NULL })

static void test_defaults(void)
{
	cfg c;
	buf errs;
	CU_ASSERT_EQUAL_FATAL(load(&c, &errs, (char *[]){ NULL }), 0);
	CU_ASSERT_STRING_EQUAL(buf_str(&errs), "");
	CU_ASSERT_STRING_EQUAL(c.kubeconfig, "");
	CU_ASSERT_STRING_EQUAL(c.http_addr, ":8080");
	CU_ASSERT_STRING_EQUAL(c.state_db, "provreqd.db");
	CU_ASSERT_STRING_EQUAL(c.log_format, "text");
	CU_ASSERT_EQUAL(c.v, 2);
	CU_ASSERT_TRUE(c.leader_elect);
	CU_ASSERT_STRING_EQUAL(c.lease_name, "provreqd");
	CU_ASSERT_STRING_EQUAL(c.lease_namespace, "");
	CU_ASSERT_EQUAL(c.lease_duration, 15 * SEC);
	CU_ASSERT_EQUAL(c.lease_renew_deadline, 10 * SEC);
	CU_ASSERT_EQUAL(c.lease_retry_period, 2 * SEC);
	CU_ASSERT_EQUAL(c.booking_ttl, 600 * SEC);
	CU_ASSERT_EQUAL(c.request_backoff_initial, 60 * SEC);
	CU_ASSERT_EQUAL(c.request_backoff_max, 600 * SEC);
	CU_ASSERT_EQUAL(c.group_backoff_initial, 300 * SEC);
	CU_ASSERT_EQUAL(c.group_backoff_max, 1800 * SEC);
	CU_ASSERT_EQUAL(c.group_backoff_reset, 3 * 3600 * SEC);
	CU_ASSERT_EQUAL(c.provision_timeout, 900 * SEC);
	CU_ASSERT_EQUAL(c.missing_template_grace, 300 * SEC);
	CU_ASSERT_EQUAL(c.max_age, 7 * 86400 * SEC);
	CU_ASSERT_EQUAL(c.gc_after, 7 * 86400 * SEC);
	CU_ASSERT_STRING_EQUAL(c.expander, "least-waste");
	CU_ASSERT_EQUAL(c.max_nodes_total, 0);
	CU_ASSERT_EQUAL(c.max_nodes_per_scaleup, 1000);
	CU_ASSERT_EQUAL(c.cloud_drivers.n, 0);
	CU_ASSERT_FALSE(c.pool_include_unready);
	CU_ASSERT_EQUAL(c.health_stale_after, 120 * SEC);
	cfg_free(&c);
	buf_free(&errs);
}

static const char good_file[] =
	"kube:\n"
	"  kubeconfig: /etc/kube.conf\n"
	"cloud:\n"
	"  drivers: [/usr/lib/provreqd/drivers/kwok.so]\n"
	"  config: /etc/provreqd/kwok.yaml\n"
	"http:\n"
	"  addr: \"[::1]:9090\"\n"
	"log: {format: json, level: 3}\n"
	"leaderElection:\n"
	"  enabled: false\n"
	"  leaseDuration: 30s\n"
	"requests:\n"
	"  bookingTTL: 20m\n"
	"  maxAge: 36h\n"
	"backoff:\n"
	"  nodeGroup:\n"
	"    reset: 90m\n"
	"scaleUp:\n"
	"  expander: most-pods,least-waste\n"
	"  maxNodesTotal: 200\n"
	"pools:\n"
	"  includeUnready: true\n";

static void test_file_values(void)
{
	cfg c;
	buf errs;
	const char *f = write_tmp("good.yaml", good_file);
	CU_ASSERT_EQUAL_FATAL(load(&c, &errs, ARGS("--config", (char *)f)), 0);
	CU_ASSERT_STRING_EQUAL(buf_str(&errs), "");
	CU_ASSERT_STRING_EQUAL(c.config_file, f);
	CU_ASSERT_STRING_EQUAL(c.kubeconfig, "/etc/kube.conf");
	CU_ASSERT_EQUAL_FATAL(c.cloud_drivers.n, 1);
	CU_ASSERT_STRING_EQUAL(c.cloud_drivers.v[0], "/usr/lib/provreqd/drivers/kwok.so");
	CU_ASSERT_STRING_EQUAL(c.cloud_config, "/etc/provreqd/kwok.yaml");
	CU_ASSERT_STRING_EQUAL(c.http_addr, "[::1]:9090");
	CU_ASSERT_STRING_EQUAL(c.log_format, "json");
	CU_ASSERT_EQUAL(c.v, 3);
	CU_ASSERT_FALSE(c.leader_elect);
	CU_ASSERT_EQUAL(c.lease_duration, 30 * SEC);
	CU_ASSERT_EQUAL(c.booking_ttl, 1200 * SEC);
	CU_ASSERT_EQUAL(c.max_age, 36 * 3600 * SEC);
	CU_ASSERT_EQUAL(c.group_backoff_reset, 90 * 60 * SEC);
	CU_ASSERT_STRING_EQUAL(c.expander, "most-pods,least-waste");
	CU_ASSERT_EQUAL(c.max_nodes_total, 200);
	CU_ASSERT_TRUE(c.pool_include_unready);
	CU_ASSERT_EQUAL(c.lease_renew_deadline, 10 * SEC); /* untouched: default */
	cfg_free(&c);
	buf_free(&errs);
}

static void test_flags_override_file(void)
{
	cfg c;
	buf errs;
	const char *f = write_tmp("good.yaml", good_file);
	CU_ASSERT_EQUAL_FATAL(load(&c, &errs, ARGS("--v=1", "--config=" "", "--log-format", "text", "-leader-elect",
						   "--booking-ttl=45s", "--config", (char *)f, "--http-addr", ":0",
						   "--pool-include-unready=false", "--max-nodes-total", "7")),
			      0);
	CU_ASSERT_STRING_EQUAL(buf_str(&errs), "");
	CU_ASSERT_EQUAL(c.v, 1);
	CU_ASSERT_STRING_EQUAL(c.log_format, "text");
	CU_ASSERT_TRUE(c.leader_elect);
	CU_ASSERT_EQUAL(c.booking_ttl, 45 * SEC);
	CU_ASSERT_STRING_EQUAL(c.http_addr, ":0");
	CU_ASSERT_FALSE(c.pool_include_unready);
	CU_ASSERT_EQUAL(c.max_nodes_total, 7);
	CU_ASSERT_EQUAL(c.max_age, 36 * 3600 * SEC); /* from the file */
	cfg_free(&c);
	buf_free(&errs);
}

/* cluster-autoscaler's flag names set provreqd's options; errors name the
 * flag as given; every alias stands for an option that exists. */
static void test_cluster_autoscaler_aliases(void)
{
	cfg c;
	buf errs, help;
	size_t i, j;
	CU_ASSERT_EQUAL_FATAL(load(&c, &errs, ARGS("--scale-down-enabled=false", "--scale-down-unneeded-time", "3m",
						   "--max-node-provision-time=20m", "--kube-client-qps", "50",
						   "--kube-client-burst=70", "--address", ":9090",
						   "--initial-node-group-backoff-duration=2m",
						   "--max-node-group-backoff-duration=40m",
						   "--node-group-backoff-reset-timeout=5h",
						   "--leader-elect-lease-duration=20s", "--leader-elect-renew-deadline=12s",
						   "--leader-elect-retry-period=3s", "--leader-elect-resource-name=ca-lease",
						   "--leader-elect-resource-namespace=ops")),
			      0);
	CU_ASSERT_STRING_EQUAL(buf_str(&errs), "");
	CU_ASSERT_FALSE(c.scale_down);
	CU_ASSERT_EQUAL(c.scale_down_idle, 3 * 60 * SEC);
	CU_ASSERT_EQUAL(c.provision_timeout, 20 * 60 * SEC);
	CU_ASSERT_EQUAL(c.kube_api_qps, 50);
	CU_ASSERT_EQUAL(c.kube_api_burst, 70);
	CU_ASSERT_STRING_EQUAL(c.http_addr, ":9090");
	CU_ASSERT_EQUAL(c.group_backoff_initial, 2 * 60 * SEC);
	CU_ASSERT_EQUAL(c.group_backoff_max, 40 * 60 * SEC);
	CU_ASSERT_EQUAL(c.group_backoff_reset, 5 * 3600 * SEC);
	CU_ASSERT_EQUAL(c.lease_duration, 20 * SEC);
	CU_ASSERT_EQUAL(c.lease_renew_deadline, 12 * SEC);
	CU_ASSERT_EQUAL(c.lease_retry_period, 3 * SEC);
	CU_ASSERT_STRING_EQUAL(c.lease_name, "ca-lease");
	CU_ASSERT_STRING_EQUAL(c.lease_namespace, "ops");
	cfg_free(&c);
	buf_free(&errs);

	/* A bad value names the alias the user typed. */
	CU_ASSERT_NOT_EQUAL(load(&c, &errs, ARGS("--max-node-provision-time=1s")), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(buf_str(&errs), "--max-node-provision-time: 1s is out of range"));
	cfg_free(&c);
	buf_free(&errs);
	/* A near miss of an alias is suggested. */
	CU_ASSERT_NOT_EQUAL(load(&c, &errs, ARGS("--scale-down-enable=false")), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(buf_str(&errs), "did you mean --scale-down-enabled?"));
	CU_ASSERT_TRUE(c.usage_error);
	cfg_free(&c);
	buf_free(&errs);

	/* --metrics-access takes the three modes the HTTP server knows. */
	CU_ASSERT_EQUAL(load(&c, &errs, ARGS("--metrics-access=tokenreview")), 0);
	CU_ASSERT_STRING_EQUAL(c.metrics_access, "tokenreview");
	cfg_free(&c);
	buf_free(&errs);
	CU_ASSERT_NOT_EQUAL(load(&c, &errs, ARGS("--metrics-access=secure")), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(buf_str(&errs), "--metrics-access (http.metricsAccess): 'secure' is not open, localhost or tokenreview"));
	cfg_free(&c);
	buf_free(&errs);

	buf_init(&help);
	CU_ASSERT_EQUAL(cfg_help(&help), 0);
	for(i = 0; i < cfg_n_aliases; i++) {
		char want[128];
		bool found = false;
		for(j = 0; j < cfg_n_options; j++)
			found |= strcmp(cfg_options[j].flag, cfg_aliases[i].option) == 0;
		CU_ASSERT_TRUE(found);
		snprintf(want, sizeof(want), "(cluster-autoscaler: --%s)", cfg_aliases[i].flag);
		CU_ASSERT_PTR_NOT_NULL(strstr(buf_str(&help), want));
	}
	buf_free(&help);
}

static void test_repeatable_flag(void)
{
	cfg c;
	buf errs;
	const char *f = write_tmp("good.yaml", good_file);
	CU_ASSERT_EQUAL_FATAL(load(&c, &errs, ARGS("--config", (char *)f, "--cloud-driver", "/a.so",
						   "--cloud-driver=/b.so")), 0);
	CU_ASSERT_EQUAL_FATAL(c.cloud_drivers.n, 2);
	CU_ASSERT_STRING_EQUAL(c.cloud_drivers.v[0], "/a.so");
	CU_ASSERT_STRING_EQUAL(c.cloud_drivers.v[1], "/b.so");
	cfg_free(&c);
	buf_free(&errs);
}

/* --cores-total, --memory-total, --gpu-total: parsed into base units,
 * from flags and from the file; bad values say what is wrong. Catches a
 * configuration that takes GiB as bytes or cores as millicores, or
 * accepts MIN above MAX. */
static void test_cluster_limits(void)
{
	static const char file[] = "scaleUp:\n  coresTotal: \"2:64\"\n  gpuTotal: [\"nvidia.com/gpu:0:8\"]\n";
	const char *f = write_tmp("limits.yaml", file);
	cfg_res_limit *v = NULL;
	size_t n = 0;
	cfg c;
	buf errs, why;
	CU_ASSERT_EQUAL_FATAL(load(&c, &errs, ARGS("--config", (char *)f, "--memory-total", "0:100",
						   "--node-autoprovisioning", "--max-autoprovisioned-groups", "3")), 0);
	CU_ASSERT_TRUE(c.nap);
	CU_ASSERT_EQUAL(c.nap_max_groups, 3);
	buf_init(&why);
	CU_ASSERT_EQUAL_FATAL(cfg_res_limits(&c, &v, &n, &why), 0);
	CU_ASSERT_EQUAL_FATAL(n, 3);
	CU_ASSERT_STRING_EQUAL(v[0].resource, "cpu");
	CU_ASSERT_EQUAL(v[0].min, 2000);
	CU_ASSERT_EQUAL(v[0].max, 64000);
	CU_ASSERT_STRING_EQUAL(v[1].resource, "memory");
	CU_ASSERT_EQUAL(v[1].max, 100LL << 30);
	CU_ASSERT_STRING_EQUAL(v[1].flag, "--memory-total");
	CU_ASSERT_STRING_EQUAL(v[2].resource, "nvidia.com/gpu");
	CU_ASSERT_EQUAL(v[2].max, 8);
	free(v);
	buf_free(&why);
	cfg_free(&c);
	buf_free(&errs);

	CU_ASSERT_NOT_EQUAL(load(&c, &errs, ARGS("--cores-total", "64", "--memory-total", "9:1",
						 "--gpu-total", "gpu:0:1", "--gpu-total", "nvidia.com/gpu:x:1")), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(buf_str(&errs), "--cores-total (scaleUp.coresTotal): '64' is not MIN:MAX"));
	CU_ASSERT_PTR_NOT_NULL(strstr(buf_str(&errs), "'9:1': MIN is above MAX"));
	CU_ASSERT_PTR_NOT_NULL(strstr(buf_str(&errs), "TYPE must be an extended resource name"));
	cfg_free(&c);
	buf_free(&errs);
}

static void test_unknown_keys_with_path(void)
{
	cfg c;
	buf errs;
	char want[2048];
	const char *f = write_tmp("unknown.yaml",
				  "requests:\n"
				  "  bookingTTL2: 5m\n"
				  "leaderElectoin:\n"
				  "  enabled: true\n"
				  "completelyDifferent: 1\n"
				  "backoff:\n"
				  "  nodeGroup:\n"
				  "    rest: 1h\n"
				  "  request: 5\n");
	CU_ASSERT_EQUAL(load(&c, &errs, ARGS("--config", (char *)f)), PRD_EINVAL);
	snprintf(want, sizeof(want),
		 "%s: requests.bookingTTL2: unknown key (did you mean requests.bookingTTL?)\n"
		 "%s: leaderElectoin: unknown key (did you mean leaderElection?)\n"
		 "%s: completelyDifferent: unknown key\n"
		 "%s: backoff.nodeGroup.rest: unknown key (did you mean backoff.nodeGroup.reset?)\n"
		 "%s: backoff.request: want a mapping, got a number\n",
		 f, f, f, f, f);
	CU_ASSERT_STRING_EQUAL(buf_str(&errs), want);
	cfg_free(&c);
	buf_free(&errs);
}

static void test_bad_values(void)
{
	cfg c;
	buf errs;
	char want[2048];
	const char *f = write_tmp("bad.yaml",
				  "leaderElection:\n"
				  "  enabled: yes\n"          /* YAML 1.2: a string */
				  "  leaseDuration: 15\n"
				  "requests:\n"
				  "  bookingTTL: ten minutes\n"
				  "log:\n"
				  "  level: -9\n"
				  "  format: 1\n"
				  "cloud:\n"
				  "  drivers: a.so\n");
	CU_ASSERT_EQUAL(load(&c, &errs, ARGS("--config", (char *)f)), PRD_EINVAL);
	snprintf(want, sizeof(want),
		 "%s: leaderElection.enabled: want true or false, got a string 'yes'\n"
		 "%s: leaderElection.leaseDuration: want a duration such as 10m, got a number "
		 "(add a unit: 500ms, 90s, 10m, 3h, 7d)\n"
		 "%s: requests.bookingTTL: bad duration 'ten minutes' (want e.g. 500ms, 90s, 1m30s, 10m, 3h, 7d)\n"
		 "%s: log.level: -9 is out of range 0..2147483647\n"
		 "%s: log.format: want a string, got a number (quote it)\n"
		 "%s: cloud.drivers: want a list of strings, got a string\n",
		 f, f, f, f, f, f);
	CU_ASSERT_STRING_EQUAL(buf_str(&errs), want);
	cfg_free(&c);
	buf_free(&errs);

	CU_ASSERT_EQUAL(load(&c, &errs, ARGS("--booking-ttl", "10", "--leader-elect=maybe", "--http-addr=8080",
					     "--v", "x", "--lease-duration=0s", "--bookin-ttl=1m", "extra",
					     "--state-db")), PRD_EINVAL);
	CU_ASSERT_STRING_EQUAL(buf_str(&errs),
			       "--booking-ttl: bad duration '10' (want e.g. 500ms, 90s, 1m30s, 10m, 3h, 7d)\n"
			       "--leader-elect: want true or false, got 'maybe'\n"
			       "--v: want an integer, got 'x'\n"
			       "--lease-duration: 0s is out of range 1s..1h\n"
			       "--bookin-ttl: unknown flag (did you mean --booking-ttl?)\n"
			       "extra: unexpected argument\n"
			       "--state-db: needs a value\n"
			       /* a value that parsed is still checked */
			       "--http-addr (http.addr): address '8080': missing ':PORT'\n");
	cfg_free(&c);
	buf_free(&errs);

	/* Parsed fine, refused by validation: every problem at once. */
	CU_ASSERT_EQUAL(load(&c, &errs, ARGS("--http-addr=8080", "--log-format=xml", "--expander=least-waste,cheapest",
					     "--lease-namespace=Kube_System", "--lease-renew-deadline=20s",
					     "--request-backoff-initial=20m", "--cloud-config=/x")), PRD_EINVAL);
	CU_ASSERT_STRING_EQUAL(buf_str(&errs),
			       "--http-addr (http.addr): address '8080': missing ':PORT'\n"
			       "--log-format (log.format): 'xml' is not a log format (want text or json)\n"
			       "--lease-namespace (leaderElection.leaseNamespace): 'Kube_System' is not a valid "
			       "namespace name (lowercase DNS label)\n"
			       "--expander (scaleUp.expander): 'cheapest' is not an expander (want least-waste, "
			       "most-pods, least-nodes, priority, random or price, comma-separated)\n"
			       "--lease-renew-deadline (20s) must be shorter than --lease-duration (15s)" MARGIN_WHY "\n"
			       "--request-backoff-initial (20m) must be at most --request-backoff-max (10m)\n"
			       "--cloud-config is set but no --cloud-driver is loaded\n");
	cfg_free(&c);
	buf_free(&errs);
}

/* Errors of keys and values do not hide the cross-field checks of the
 * values that were taken, and a refused value is not cross-checked in the
 * form of the default it left in place. */
static void test_cross_checks_with_key_errors(void)
{
	cfg c;
	buf errs;
	const char *f = write_tmp("cross.yaml", "requests:\n  bookingTTL2: 20m\n");
	CU_ASSERT_EQUAL(load(&c, &errs, ARGS("--config", (char *)f, "--lease-renew-deadline=20s", "--v=-1")), PRD_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(buf_str(&errs), ": requests.bookingTTL2: unknown key"));
	CU_ASSERT_PTR_NOT_NULL(strstr(buf_str(&errs), "--v: -1 is out of range 0..2147483647\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(buf_str(&errs), "--lease-renew-deadline (20s) must be shorter than --lease-duration (15s)" MARGIN_WHY "\n"));
	cfg_free(&c);
	buf_free(&errs);

	/* leaseDuration was refused: no "shorter than 15s" about the default. */
	f = write_tmp("cross2.yaml", "leaderElection:\n  leaseDuration: 30\n  renewDeadline: 20s\n");
	CU_ASSERT_EQUAL(load(&c, &errs, ARGS("--config", (char *)f, "--log-format=xml")), PRD_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(buf_str(&errs), ": leaderElection.leaseDuration: want a duration"));
	CU_ASSERT_PTR_NOT_NULL(strstr(buf_str(&errs), "--log-format (log.format): 'xml' is not a log format"));
	CU_ASSERT_PTR_NULL(strstr(buf_str(&errs), "must be shorter than"));
	cfg_free(&c);
	buf_free(&errs);

	/* A later flag that fixes a refused value brings its checks back. */
	CU_ASSERT_EQUAL(load(&c, &errs, ARGS("--lease-duration=x", "--lease-duration=5s")), PRD_EINVAL);
	CU_ASSERT_STRING_EQUAL(buf_str(&errs), "--lease-duration: bad duration 'x' (want e.g. 500ms, 90s, 1m30s, 10m, 3h, 7d)\n"
					      "--lease-renew-deadline (10s) must be shorter than --lease-duration (5s)" MARGIN_WHY "\n");
	cfg_free(&c);
	buf_free(&errs);
}

/* /healthz must not fail while provreqd is idle. */
static void test_health_threshold(void)
{
	cfg c;
	buf errs;
	CU_ASSERT_EQUAL(load(&c, &errs, ARGS("--health-stale-after=20s")), PRD_EINVAL);
	CU_ASSERT_STRING_EQUAL(buf_str(&errs),
			       "--health-stale-after (20s) must be at least 1m: an idle provreqd reports to /healthz only "
			       "every 30s, so /healthz would fail (and a liveness probe restart the pod) while nothing is "
			       "wrong\n");
	cfg_free(&c);
	buf_free(&errs);
	CU_ASSERT_EQUAL(load(&c, &errs, ARGS("--health-stale-after=1m")), 0);
	CU_ASSERT_EQUAL(errs.len, 0);
	cfg_free(&c);
	buf_free(&errs);
}

static void test_file_problems(void)
{
	cfg c;
	buf errs;
	const char *f;
	CU_ASSERT_EQUAL(load(&c, &errs, ARGS("--config", "/nonexistent/provreqd.yaml")), PRD_EINVAL);
	CU_ASSERT_EQUAL(strncmp(buf_str(&errs), "/nonexistent/provreqd.yaml: ", 28), 0);
	cfg_free(&c);
	buf_free(&errs);

	f = write_tmp("list.yaml", "- a\n- b\n");
	CU_ASSERT_EQUAL(load(&c, &errs, ARGS("--config", (char *)f)), PRD_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(buf_str(&errs), "the top level must be a mapping, got a list"));
	cfg_free(&c);
	buf_free(&errs);

	f = write_tmp("broken.yaml", "a: [1, 2\n");
	CU_ASSERT_EQUAL(load(&c, &errs, ARGS("--config", (char *)f)), PRD_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(buf_str(&errs), "line "));
	cfg_free(&c);
	buf_free(&errs);

	f = write_tmp("empty.yaml", "# nothing set\n");
	CU_ASSERT_EQUAL(load(&c, &errs, ARGS("--config", (char *)f)), 0);
	cfg_free(&c);
	buf_free(&errs);

	f = write_tmp("dotted.yaml", "requests.bookingTTL: 5m\n");
	CU_ASSERT_EQUAL(load(&c, &errs, ARGS("--config", (char *)f)), PRD_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(buf_str(&errs), "requests.bookingTTL: keys are nested mappings"));
	cfg_free(&c);
	buf_free(&errs);
}

/* Printing the effective configuration and reading it back gives the same
 * configuration, including awkward strings. */
static void test_yaml_round_trip(void)
{
	cfg a, b;
	buf errs, y1, y2;
	CU_ASSERT_EQUAL_FATAL(load(&a, &errs, ARGS("--kubeconfig", "/k \"q\": #x\n", "--cloud-driver", "/a.so",
						   "--cloud-driver", "b: c.so", "--group-backoff-reset=26h",
						   "--pool-debounce=1500ms", "--leader-elect=false", "--v=4")), 0);
	buf_free(&errs);
	buf_init(&y1);
	buf_init(&y2);
	buf_init(&errs);
	CU_ASSERT_EQUAL_FATAL(cfg_to_yaml(&a, &y1), 0);
	CU_ASSERT_EQUAL(cfg_defaults(&b), 0);
	CU_ASSERT_EQUAL(cfg_apply_yaml(&b, "printed", buf_str(&y1), y1.len, &errs), 0);
	CU_ASSERT_STRING_EQUAL(buf_str(&errs), "");
	CU_ASSERT_EQUAL(cfg_to_yaml(&b, &y2), 0);
	CU_ASSERT_STRING_EQUAL(buf_str(&y1), buf_str(&y2));
	CU_ASSERT_STRING_EQUAL(b.kubeconfig, "/k \"q\": #x\n");
	CU_ASSERT_EQUAL_FATAL(b.cloud_drivers.n, 2);
	CU_ASSERT_STRING_EQUAL(b.cloud_drivers.v[1], "b: c.so");
	CU_ASSERT_EQUAL(b.group_backoff_reset, 26 * 3600 * SEC);
	CU_ASSERT_EQUAL(b.pool_debounce, 1500 * 1000000LL);
	CU_ASSERT_FALSE(b.leader_elect);
	CU_ASSERT_PTR_NOT_NULL(strstr(buf_str(&y1), "  reset: 26h\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(buf_str(&y1), "leaderElection:\n"));
	cfg_free(&a);
	cfg_free(&b);
	buf_free(&errs);
	buf_free(&y1);
	buf_free(&y2);
}

static void test_format_duration(void)
{
	char d[32];
	CU_ASSERT_STRING_EQUAL(cfg_format_duration(0, d), "0s");
	CU_ASSERT_STRING_EQUAL(cfg_format_duration(90 * SEC, d), "1m30s");
	CU_ASSERT_STRING_EQUAL(cfg_format_duration(7 * 86400 * SEC, d), "7d");
	CU_ASSERT_STRING_EQUAL(cfg_format_duration(36 * 3600 * SEC, d), "36h");
	CU_ASSERT_STRING_EQUAL(cfg_format_duration(1500 * 1000000LL, d), "1s500ms");
	CU_ASSERT_STRING_EQUAL(cfg_format_duration(3 * 3600 * SEC, d), "3h");
}

static void test_help_and_list(void)
{
	buf h, l;
	size_t i;
	buf_init(&h);
	buf_init(&l);
	CU_ASSERT_EQUAL(cfg_help(&h), 0);
	CU_ASSERT_EQUAL(cfg_list(&l), 0);
	for(i = 0; i < cfg_n_options; i++) {
		char needle[96];
		snprintf(needle, sizeof(needle), "\n  --%s", cfg_options[i].flag);
		CU_ASSERT_TRUE(i == 0 || strstr(buf_str(&h), needle) != NULL);
		snprintf(needle, sizeof(needle), "%s\t", cfg_options[i].flag);
		CU_ASSERT_PTR_NOT_NULL(strstr(buf_str(&l), needle));
	}
	CU_ASSERT_PTR_NOT_NULL(strstr(buf_str(&h), "  --booking-ttl duration\n      how long a Provisioned request "
						   "holds its capacity for its pods [default 10m] (config: requests.bookingTTL)\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(buf_str(&l), "booking-ttl\trequests.bookingTTL\tduration\t10m\n"));
	buf_free(&h);
	buf_free(&l);
}

/* Run the provreqd binary; returns its exit status and output (2>&1,
 * caller frees). */
static int run_provreqd(const char *args, char **out)
{
	const char *bd = getenv("PRD_BUILDDIR");
	char cmd[2048];
	buf b;
	char chunk[4096];
	size_t n;
	FILE *p;
	int st;
	snprintf(cmd, sizeof(cmd), "'%s/provreqd' %s 2>&1", bd ? bd : ".", args);
	p = popen(cmd, "r");
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	buf_init(&b);
	while((n = fread(chunk, 1, sizeof(chunk), p)) > 0)
		buf_append(&b, chunk, n);
	st = pclose(p);
	*out = buf_detach(&b);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_check_config_command(void)
{
	char *out, args[1024];
	const char *f = write_tmp("cc.yaml", "requests:\n  bookingTTL: 20m\nscaleUp:\n  maxNodesTotal: 50\n");
	snprintf(args, sizeof(args), "check-config --config '%s' --max-nodes-total 60", f);
	CU_ASSERT_EQUAL(run_provreqd(args, &out), 0);
	CU_ASSERT_TRUE(strncmp(out, "# provreqd effective configuration", 34) == 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "\n  bookingTTL: 20m\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "\n  maxNodesTotal: 60\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "\n  leaseDuration: 15s\n"));
	free(out);

	f = write_tmp("cc-bad.yaml", "requests:\n  bookingTTL2: 20m\n");
	snprintf(args, sizeof(args), "check-config --config '%s' --v=-7", f);
	CU_ASSERT_EQUAL(run_provreqd(args, &out), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "the configuration is not valid:\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, ": requests.bookingTTL2: unknown key (did you mean requests.bookingTTL?)\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "--v: -7 is out of range 0..2147483647\n"));
	CU_ASSERT_PTR_NULL(strstr(out, "# provreqd effective configuration"));
	free(out);

	/* The files run would open must exist. */
	f = write_tmp("driver.so", "not really a driver, but a readable file\n");
	snprintf(args, sizeof(args), "check-config --cloud-driver '%s' --cloud-config '%s'", f, f);
	CU_ASSERT_EQUAL(run_provreqd(args, &out), 0);
	free(out);
	snprintf(args, sizeof(args),
		 "check-config --cloud-driver '%s' --cloud-driver /nonexistent/kwok.so --cloud-driver '%s' "
		 "--cloud-config /nonexistent/cloud.yaml --health-stale-after 30s",
		 f, test_tmpdir());
	CU_ASSERT_EQUAL(run_provreqd(args, &out), 1);
	CU_ASSERT_PTR_NOT_NULL(
		strstr(out, "--cloud-driver (cloud.drivers): cloud driver /nonexistent/kwok.so: No such file or directory\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, ": not a regular file\n"));
	CU_ASSERT_PTR_NOT_NULL(
		strstr(out, "--cloud-config (cloud.config): /nonexistent/cloud.yaml: No such file or directory\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "--health-stale-after (30s) must be at least 1m"));
	CU_ASSERT_PTR_NULL(strstr(out, "# provreqd effective configuration"));
	free(out);

	CU_ASSERT_EQUAL(run_provreqd("check-config --help", &out), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "Usage: provreqd check-config"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "  --cloud-driver string\n"));
	free(out);

	CU_ASSERT_EQUAL(run_provreqd("check-config --list-metrics", &out), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "provreqd_scaleups_total\n"));
	free(out);
}

/* --expander priority needs a table source, named once; the ConfigMap's
 * namespace follows the Lease's rule; a relative --priority-file in the
 * config file is the file's neighbour. */
static void test_priority_source(void)
{
	cfg c;
	buf errs;
	char ns[254], name[254], args[1024], *out;
	const char *f;

	CU_ASSERT_EQUAL(load(&c, &errs, ARGS("--expander=priority,least-waste")), PRD_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(buf_str(&errs), "--expander (scaleUp.expander): 'priority' needs a priority "
						      "table: name the ConfigMap holding it with --priority-configmap"));
	CU_ASSERT_PTR_NOT_NULL(strstr(buf_str(&errs), "or a file with --priority-file (scaleUp.priorityFile)"));
	cfg_free(&c);
	buf_free(&errs);

	CU_ASSERT_EQUAL(load(&c, &errs, ARGS("--priority-configmap=a", "--priority-file=b")), PRD_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(buf_str(&errs), "are both set"));
	cfg_free(&c);
	buf_free(&errs);

	CU_ASSERT_EQUAL(load(&c, &errs, ARGS("--priority-configmap=Bad_NS/x")), PRD_EINVAL);
	CU_ASSERT_STRING_EQUAL(buf_str(&errs), "--priority-configmap (scaleUp.priorityConfigMap): 'Bad_NS' is not a "
					       "valid namespace name (lowercase DNS label)\n");
	cfg_free(&c);
	buf_free(&errs);

	CU_ASSERT_EQUAL(load(&c, &errs, ARGS("--expander=priority", "--priority-configmap=prio")), 0);
	CU_ASSERT_TRUE(cfg_priority_configmap(&c, "from-pod", ns, name));
	CU_ASSERT_STRING_EQUAL(ns, "from-pod");
	CU_ASSERT_STRING_EQUAL(name, "prio");
	CU_ASSERT_TRUE(cfg_priority_configmap(&c, NULL, ns, name));
	CU_ASSERT_STRING_EQUAL(ns, "kube-system");
	cfg_free(&c);
	buf_free(&errs);
	CU_ASSERT_EQUAL(load(&c, &errs, ARGS("--priority-configmap=prio", "--lease-namespace=ops")), 0);
	CU_ASSERT_TRUE(cfg_priority_configmap(&c, "from-pod", ns, name));
	CU_ASSERT_STRING_EQUAL(ns, "ops");
	cfg_free(&c);
	buf_free(&errs);
	CU_ASSERT_EQUAL(load(&c, &errs, ARGS("--priority-configmap=kube-system/cluster-autoscaler-priority-expander",
					     "--lease-namespace=ops")), 0);
	CU_ASSERT_TRUE(cfg_priority_configmap(&c, NULL, ns, name));
	CU_ASSERT_STRING_EQUAL(ns, "kube-system");
	CU_ASSERT_STRING_EQUAL(name, "cluster-autoscaler-priority-expander");
	cfg_free(&c);
	buf_free(&errs);

	f = write_tmp("prio-rel.yaml", "scaleUp:\n  expander: priority\n  priorityFile: prio-table.yaml\n");
	CU_ASSERT_EQUAL(load(&c, &errs, ARGS("--config", (char *)f)), 0);
	snprintf(args, sizeof(args), "%s/prio-table.yaml", test_tmpdir());
	CU_ASSERT_STRING_EQUAL(c.priority_file, args);
	cfg_free(&c);
	buf_free(&errs);

	/* check-config reads the table. */
	snprintf(args, sizeof(args), "check-config --config '%s'", f);
	write_tmp("prio-table.yaml", "10: [\"(\"]\n");
	CU_ASSERT_EQUAL(run_provreqd(args, &out), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "--priority-file (scaleUp.priorityFile): "));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "prio-table.yaml: priority 10: \"(\" is not a regular expression"));
	free(out);
	write_tmp("prio-table.yaml", "10: [\".*\"]\n");
	CU_ASSERT_EQUAL(run_provreqd(args, &out), 0);
	free(out);
	CU_ASSERT_EQUAL(run_provreqd("check-config --expander priority", &out), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "'priority' needs a priority table"));
	free(out);
}

/* PUT (or POST) a priority ConfigMap with `table` into the store. */
static void put_cm(memapi *m, const char *method, const char *table)
{
	char body[1024], *resp = NULL;
	size_t rlen;
	long st;
	json_object *o = json_object_new_object(), *md = json_object_new_object(), *d = json_object_new_object();
	json_object_object_add(o, "apiVersion", json_object_new_string("v1"));
	json_object_object_add(o, "kind", json_object_new_string("ConfigMap"));
	json_object_object_add(md, "name", json_object_new_string("prio"));
	json_object_object_add(md, "namespace", json_object_new_string("ops"));
	json_object_object_add(o, "metadata", md);
	json_object_object_add(d, "priorities", json_object_new_string(table));
	json_object_object_add(o, "data", d);
	snprintf(body, sizeof(body), "%s", json_object_to_json_string(o));
	json_object_put(o);
	CU_ASSERT_EQUAL(memapi_request(m, method,
				       strcmp(method, "POST") ? "/api/v1/namespaces/ops/configmaps/prio"
							      : "/api/v1/namespaces/ops/configmaps",
				       "application/json", body, strlen(body), &st, &resp, &rlen), 0);
	free(resp);
}

/* run's ConfigMap source: read when due, a new table only when the
 * ConfigMap changed, a bad version keeps the table in use, a deleted one
 * empties it. */
static void test_priority_configmap_reread(void)
{
	memapi *m = NULL;
	kube_api api;
	prio_cm w;
	sched_priorities p;
	int64_t t = 1000;
	char *resp = NULL;
	size_t rlen;
	long st;

	CU_ASSERT_EQUAL_FATAL(memapi_new(NULL, 0, &m), 0);
	api = kube_api_from_memapi(m);
	prio_cm_init(&w, "ops", "prio");
	CU_ASSERT_EQUAL(prio_cm_poll(&w, &api, t, &p), 1); /* missing at start: empty table */
	CU_ASSERT_EQUAL(p.n, 0);
	sched_priorities_free(&p);
	put_cm(m, "POST", "10:\n  - ^a$\n");
	CU_ASSERT_EQUAL(prio_cm_poll(&w, &api, t + 1, &p), 0); /* not due yet */
	t += PRIO_CM_REREAD_NS;
	CU_ASSERT_EQUAL_FATAL(prio_cm_poll(&w, &api, t, &p), 1);
	CU_ASSERT_EQUAL(p.n, 1);
	CU_ASSERT_EQUAL(p.v[0].priority, 10);
	sched_priorities_free(&p);
	t += PRIO_CM_REREAD_NS;
	CU_ASSERT_EQUAL(prio_cm_poll(&w, &api, t, &p), 0); /* unchanged */
	put_cm(m, "PUT", "ten: [a]\n");
	t += PRIO_CM_REREAD_NS;
	CU_ASSERT_EQUAL(prio_cm_poll(&w, &api, t, &p), 0); /* malformed: keep */
	CU_ASSERT_EQUAL(w.problem, PRIO_CM_MALFORMED);
	put_cm(m, "PUT", "20: [a, b]\n5: [c]\n");
	t += PRIO_CM_REREAD_NS;
	CU_ASSERT_EQUAL_FATAL(prio_cm_poll(&w, &api, t, &p), 1);
	CU_ASSERT_EQUAL(p.n, 2);
	CU_ASSERT_EQUAL(p.v[0].priority, 20);
	sched_priorities_free(&p);
	CU_ASSERT_EQUAL(memapi_request(m, "DELETE", "/api/v1/namespaces/ops/configmaps/prio", NULL, NULL, 0, &st,
				       &resp, &rlen), 0);
	free(resp);
	t += PRIO_CM_REREAD_NS;
	CU_ASSERT_EQUAL_FATAL(prio_cm_poll(&w, &api, t, &p), 1); /* gone: empty */
	CU_ASSERT_EQUAL(p.n, 0);
	t += PRIO_CM_REREAD_NS;
	CU_ASSERT_EQUAL(prio_cm_poll(&w, &api, t, &p), 0);
	prio_cm_free(&w);
	memapi_free(m);
}

/* One rule for every command: 2 for a command line that cannot be parsed,
 * the same --v rule in run and simulate, help COMMAND is COMMAND's help,
 * version -o json. */
static void test_commands_agree(void)
{
	static const char *const cmds[] = { "run", "simulate", "check-driver", "check-config", "version", "help" };
	char args[256], *out, *help;
	size_t i;

	for(i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		snprintf(args, sizeof(args), "%s --bogus-flag", cmds[i]);
		CU_ASSERT_EQUAL(run_provreqd(args, &out), 2);
		if(strcmp(cmds[i], "help") != 0 && strcmp(cmds[i], "version") != 0) {
			free(out);
			snprintf(args, sizeof(args), "%s --help", cmds[i]);
			CU_ASSERT_EQUAL(run_provreqd(args, &help), 0);
			snprintf(args, sizeof(args), "help %s", cmds[i]);
			CU_ASSERT_EQUAL(run_provreqd(args, &out), 0);
			CU_ASSERT_STRING_EQUAL(out, help);
			CU_ASSERT_PTR_NOT_NULL(strstr(out, cmds[i]));
			free(help);
		}
		free(out);
	}
	CU_ASSERT_EQUAL(run_provreqd("check-config stray", &out), 2);
	free(out);
	CU_ASSERT_EQUAL(run_provreqd("check-config --state-db", &out), 2);
	free(out);
	CU_ASSERT_EQUAL(run_provreqd("help no-such-command", &out), 2);
	free(out);
	/* A value check-config judges is its verdict, not a usage error. */
	CU_ASSERT_EQUAL(run_provreqd("check-config --v=-9", &out), 1);
	free(out);
	/* --v: one rule (0 and up) in run and simulate. */
	CU_ASSERT_EQUAL(run_provreqd("run --v -9", &out), 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "--v: -9 is out of range 0..2147483647"));
	free(out);
	CU_ASSERT_EQUAL(run_provreqd("simulate --cluster /nonexistent --v -9", &out), 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "--v: want an integer 0..2147483647"));
	free(out);
	/* Any level klog takes; cluster-autoscaler flags provreqd does not
	 * have are accepted with their value and a warning saying why; an
	 * unknown flag is still a usage error. */
	CU_ASSERT_EQUAL(run_provreqd("check-config --v=9 --scan-interval 10s --skip-nodes-with-local-storage "
				     "--scale-down-delay-after-add=10m",
				     &out),
			0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "warning: --scan-interval: a cluster-autoscaler flag provreqd accepts and "
					   "ignores: provreqd runs a pass when the cluster changes"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "warning: --skip-nodes-with-local-storage:"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "warning: --scale-down-delay-after-add:"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "\n  level: 9\n"));
	free(out);
	CU_ASSERT_EQUAL(run_provreqd("check-config --scan-interval", &out), 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "--scan-interval: needs a value"));
	free(out);
	CU_ASSERT_EQUAL(run_provreqd("check-config --scale-down-delay-after-nothing=1m", &out), 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "unknown flag"));
	free(out);
	CU_ASSERT_EQUAL(run_provreqd("simulate --cluster /nonexistent --v info", &out), 2);
	free(out);
	/* version -o json is JSON with the version and the libraries. */
	CU_ASSERT_EQUAL(run_provreqd("version -o json", &out), 0);
	{
		json_object *j = json_tokener_parse(out);
		CU_ASSERT_PTR_NOT_NULL(j);
		CU_ASSERT_PTR_NOT_NULL(json_object_object_get(j, "version"));
		CU_ASSERT_PTR_NOT_NULL(json_object_object_get(json_object_object_get(j, "libraries"), "sqlite"));
		json_object_put(j);
	}
	free(out);
	CU_ASSERT_EQUAL(run_provreqd("version -o xml", &out), 2);
	free(out);
}

/* The fence's margin. The Lease records whole seconds: a duration of
 * 10900ms with a renew deadline of 10500ms was accepted, and written as
 * leaseDurationSeconds 10, so a standby could take over half a second
 * before the leader stopped acting. Broken checks caught: one that
 * accepts a duration that is not whole seconds, one that compares the
 * durations as given rather than as the Lease records them. */
static void test_fence_margin(void)
{
	cfg c;
	buf errs;
	CU_ASSERT_EQUAL(load(&c, &errs, ARGS("--lease-duration=10900ms", "--lease-renew-deadline=10500ms")), PRD_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(buf_str(&errs), "--lease-duration (leaderElection.leaseDuration): must be whole "
							"seconds: the Lease records leaseDurationSeconds, so 10s900ms cannot be "
							"written as it is (use 11s)\n"));
	cfg_free(&c);
	buf_free(&errs);
	/* Whole seconds, and a margin of half a second: accepted. */
	CU_ASSERT_EQUAL(load(&c, &errs, ARGS("--lease-duration=11s", "--lease-renew-deadline=10500ms")), PRD_OK);
	CU_ASSERT_STRING_EQUAL(buf_str(&errs), "");
	cfg_free(&c);
	buf_free(&errs);
	/* No margin. */
	CU_ASSERT_EQUAL(load(&c, &errs, ARGS("--lease-duration=11s", "--lease-renew-deadline=11s")), PRD_EINVAL);
	CU_ASSERT_STRING_EQUAL(buf_str(&errs),
			       "--lease-renew-deadline (11s) must be shorter than --lease-duration (11s)" MARGIN_WHY "\n");
	cfg_free(&c);
	buf_free(&errs);
}

static const test_case cases[] = {
	{ "cluster-wide limits", test_cluster_limits },
	{ "defaults", test_defaults },
	{ "file_values", test_file_values },
	{ "flags_override_file", test_flags_override_file },
	{ "repeatable_flag", test_repeatable_flag },
	{ "unknown_keys_with_path", test_unknown_keys_with_path },
	{ "bad_values", test_bad_values },
	{ "cross_checks_with_key_errors", test_cross_checks_with_key_errors },
	{ "health_threshold", test_health_threshold },
	{ "file_problems", test_file_problems },
	{ "yaml_round_trip", test_yaml_round_trip },
	{ "format_duration", test_format_duration },
	{ "help_and_list", test_help_and_list },
	{ "check_config_command", test_check_config_command },
	{ "priority_source", test_priority_source },
	{ "cluster_autoscaler_aliases", test_cluster_autoscaler_aliases },
	{ "commands_agree", test_commands_agree },
	{ "priority_configmap_reread", test_priority_configmap_reread },
	{ "fence_margin", test_fence_margin },
	{ NULL, NULL }
};

TEST_MAIN("config", cases)
