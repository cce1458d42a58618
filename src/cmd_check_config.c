/* provreqd check-config: load the config file and flags exactly as `run`
 * does, check that the driver and cloud-config files it would open exist
 * (and that the --priority-file parses), report every problem (exit 1; 2
 * when the command line itself cannot be parsed: an unknown flag, a flag
 * without its value, a stray argument) or print the effective
 * configuration as YAML (exit 0).
 *
 * A few flags are meant for tooling rather than people and are left out of
 * the help: --list-options prints the option table (flag, key, type,
 * default; tab-separated), --list-ignored the cluster-autoscaler flags
 * accepted and ignored (flag, why), --list-aliases cluster-autoscaler's flag names
 * provreqd accepts (alias, option; tab-separated), --list-metrics the names of the metric
 * families provreqd registers and --list-metric-labels each family's name,
 * type and label names (tab-separated; labels comma-separated, "-" for
 * none). tests/unit/test_docs.sh checks the docs against each. */
#include "cmd.h"
#include "driver/loader.h"
#include "ops/config.h"
#include "ops/metrics.h"
#include "sched/priorities.h"
#include "util/err.h"

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
	"Usage: provreqd check-config [--config FILE] [FLAGS]\n"
	"\n"
	"Validate a config file and flags the way 'provreqd run' reads them and\n"
	"print the effective configuration as YAML. Flags override the file.\n"
	"Exit status: 0 valid, 1 invalid, 2 usage error.\n"
	"\n"
	"Flags (each also a config file key; durations take units: 500ms, 90s,\n"
	"10m, 3h, 7d):\n";

static int print_buf(buf *b, FILE *f, int rc)
{
	if(b->failed) {
		fputs("provreqd: out of memory\n", stderr);
		rc = 1;
	} else {
		fputs(buf_str(b), f);
	}
	buf_free(b);
	return rc;
}

static int list_metrics(bool labels)
{
	int i, n;
	if(metrics_init() != 0) {
		fputs("provreqd: out of memory\n", stderr);
		return 1;
	}
	n = metrics_count();
	for(i = 0; i < n; i++) {
		enum metrics_type t;
		const char *const *l = NULL;
		size_t k;
		if(!labels) {
			printf("%s\n", metrics_name(i));
			continue;
		}
		if(metrics_describe(i, &t, &l) != 0)
			continue;
		printf("%s\t%s\t", metrics_name(i), metrics_type_name(t));
		for(k = 0; l && l[k]; k++)
			printf("%s%s", k ? "," : "", l[k]);
		printf("%s\n", k ? "" : "-");
	}
	metrics_shutdown();
	return 0;
}

/* The files `run` would open at start-up: each --cloud-driver and the
 * --cloud-config must be readable regular files, or `run` would stop
 * there. Problems are appended to errs; 0 or PRD_EINVAL. */
static int check_file(const char *flag, const char *key, const char *path, buf *errs)
{
	struct stat st;
	if(stat(path, &st) != 0) {
		buf_printf(errs, "--%s (%s): %s: %s\n", flag, key, path, strerror(errno));
		return PRD_EINVAL;
	}
	if(!S_ISREG(st.st_mode)) {
		buf_printf(errs, "--%s (%s): %s: not a regular file\n", flag, key, path);
		return PRD_EINVAL;
	}
	if(access(path, R_OK) != 0) {
		buf_printf(errs, "--%s (%s): %s: %s\n", flag, key, path, strerror(errno));
		return PRD_EINVAL;
	}
	return PRD_OK;
}

static int check_files(const cfg *c, buf *errs)
{
	int rc = PRD_OK;
	size_t i;
	for(i = 0; i < c->cloud_drivers.n; i++) {
		/* The loader's own checks, so what passes here loads in `run`. */
		prd_err e;
		if(cloud_driver_check_file(c->cloud_drivers.v[i], &e) != 0) {
			buf_printf(errs, "--cloud-driver (cloud.drivers): %s\n", e.msg);
			rc = PRD_EINVAL;
		}
	}
	if(c->cloud_config && *c->cloud_config &&
	   check_file("cloud-config", "cloud.config", c->cloud_config, errs) != PRD_OK)
		rc = PRD_EINVAL;
	if(c->priority_file && *c->priority_file) {
		sched_priorities p;
		prd_err e;
		if(check_file("priority-file", "scaleUp.priorityFile", c->priority_file, errs) != PRD_OK) {
			rc = PRD_EINVAL;
		} else if(sched_priorities_read_file(c->priority_file, &p, &e) != 0) {
			buf_printf(errs, "--priority-file (scaleUp.priorityFile): %s\n", e.msg);
			rc = PRD_EINVAL;
		} else {
			sched_priorities_free(&p);
		}
	}
	return rc;
}

int cmd_check_config(int argc, char **argv)
{
	buf out, errs;
	cfg c;
	int i, rc;
	bool bad_usage;

	/* argv[0] is the command name. */
	for(i = 1; i < argc; i++) {
		const char *a = argv[i];
		if(strcmp(a, "--") == 0)
			break;
		if(strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0 || strcmp(a, "-help") == 0) {
			buf_init(&out);
			buf_append_str(&out, usage);
			cfg_help(&out);
			return print_buf(&out, stdout, 0);
		}
		if(strcmp(a, "--list-options") == 0) {
			buf_init(&out);
			cfg_list(&out);
			return print_buf(&out, stdout, 0);
		}
		if(strcmp(a, "--list-aliases") == 0) {
			buf_init(&out);
			cfg_list_aliases(&out);
			return print_buf(&out, stdout, 0);
		}
		if(strcmp(a, "--list-ignored") == 0) {
			buf_init(&out);
			for(size_t k = 0; k < cfg_n_ignored; k++)
				buf_printf(&out, "%s\t%s\n", cfg_ignored[k].flag, cfg_ignored[k].why);
			return print_buf(&out, stdout, 0);
		}
		if(strcmp(a, "--list-metrics") == 0)
			return list_metrics(false);
		if(strcmp(a, "--list-metric-labels") == 0)
			return list_metrics(true);
	}

	buf_init(&errs);
	buf_init(&out);
	rc = cfg_load(&c, argc - 1, argv + 1, &errs);
	if(rc != PRD_ENOMEM && check_files(&c, &errs) != PRD_OK && rc == 0)
		rc = PRD_EINVAL;
	if(rc == 0)
		rc = cfg_to_yaml(&c, &out);
	bad_usage = c.usage_error;
	for(size_t k = 0; k < c.ignored.n; k++)
		fprintf(stderr, "provreqd check-config: warning: %s\n", c.ignored.v[k]);
	cfg_free(&c);
	if(rc != 0) {
		buf_free(&out);
		if(errs.failed || !errs.len) {
			fprintf(stderr, "provreqd check-config: %s\n", errs.failed ? "out of memory" : "invalid configuration");
			buf_free(&errs);
			return 1;
		}
		/* Every problem is still listed; the status says which kind won. */
		if(bad_usage)
			fputs("provreqd check-config: usage error (see provreqd check-config --help):\n", stderr);
		else
			fputs("provreqd check-config: the configuration is not valid:\n", stderr);
		return print_buf(&errs, stderr, bad_usage ? 2 : 1);
	}
	buf_free(&errs);
	fputs("# provreqd effective configuration (defaults < config file < flags)\n", stdout);
	return print_buf(&out, stdout, 0);
}
