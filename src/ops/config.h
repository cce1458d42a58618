/* provreqd configuration: one table of options drives the YAML config
 * file, the command-line flags, `--help`, `check-config` output and the
 * docs check.
 *
 * Precedence: built-in default < config file (--config FILE) < flags. A
 * repeatable flag (--cloud-driver) given at least once replaces the file's
 * list. Every problem found is reported, not only the first: each error is
 * one line "WHERE: problem" appended to the caller's `errs` buffer, where
 * WHERE is "FILE: key.path" for the config file and "--flag" for a flag.
 * Unknown keys and flags are errors, with a suggestion when a known one is
 * close ("booking.ttl2: unknown key (did you mean booking.ttl?)").
 *
 * Ownership and threads: a `cfg` is a plain value the caller owns; it
 * owns its strings and is freed with cfg_free(). Nothing here keeps
 * global state; the option table is constant. Not thread-safe per cfg
 * (build it once at start-up, then share it read-only). */
#ifndef PRD_OPS_CONFIG_H
#define PRD_OPS_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ops/reslimit.h"
#include "util/buf.h"

typedef struct cfg_strv {
	char **v;
	size_t n;
} cfg_strv;

/* The effective configuration. Durations are nanoseconds. Strings are
 * never NULL after cfg_load ("" when unset). */
typedef struct cfg {
	char *config_file;              /* --config (flag only) */
	char *kubeconfig;               /* "" = $KUBECONFIG, ~/.kube/config, in-cluster */
	char *context;
	cfg_strv cloud_drivers;         /* paths of driver .so files */
	char *cloud_config;
	char *state_db;
	char *http_addr;
	char *metrics_access;           /* "open" | "localhost" | "tokenreview" */
	char *log_format;               /* "text" | "json" */
	int64_t v;                      /* log level 0 error … 4 trace */
	char *processor_instance;
	bool leader_elect;
	char *lease_name;
	char *lease_namespace;
	int64_t lease_duration;
	int64_t lease_renew_deadline;
	int64_t lease_retry_period;
	int64_t booking_ttl;
	int64_t request_backoff_initial;
	int64_t request_backoff_max;
	int64_t group_backoff_initial;
	int64_t group_backoff_max;
	int64_t group_backoff_reset;
	int64_t provision_timeout;
	bool scale_down;
	bool quota_check;
	int64_t scale_down_idle;
	int64_t missing_template_grace;
	int64_t max_age;
	int64_t gc_after;
	int64_t state_retention;
	char *expander;                 /* comma-separated chain */
	char *priority_configmap;       /* "[NAMESPACE/]NAME" of the priority expander's table */
	char *booking_ledger;           /* "[NAMESPACE/]NAME" of the booking ledger, or "none" */
	char *priority_file;            /* ... or a file holding it (config-file relative) */
	int64_t max_nodes_total;        /* 0 = no limit */
	int64_t max_nodes_per_scaleup;  /* 0 = no limit */
	char *cores_total;              /* "MIN:MAX" cores, "" = no limit */
	char *memory_total;             /* "MIN:MAX" GiB */
	cfg_strv gpu_total;             /* "TYPE:MIN:MAX" each */
	bool nap;                       /* node auto-provisioning */
	int64_t nap_max_groups;
	int64_t pool_debounce;
	bool pool_include_unready;
	int64_t kube_api_qps;            /* client-side rate limit of apiserver requests */
	int64_t kube_api_burst;
	int64_t health_stale_after;
	/* Bit i: the value given for cfg_options[i] was refused, so the field
	 * keeps its earlier value and cfg_validate skips the checks that
	 * involve it (they would report on a value nobody gave). */
	uint64_t refused;
	/* cfg_apply_flags met a command line it cannot parse (an unknown flag,
	 * a flag without its value, a stray argument): a usage error, exit 2,
	 * as opposed to a value that is refused (an invalid configuration). */
	bool usage_error;
	/* Settings given that have no effect, each "--FLAG: why", for the
	 * caller to warn about: cluster-autoscaler flags provreqd accepts and
	 * ignores (cfg_ignored), and (cfg_load) a priority table the expander
	 * chain does not use. */
	cfg_strv ignored;
} cfg;

/* An idle `provreqd run` wakes, and reports to /healthz, at least this
 * often; --health-stale-after must be at least twice as long. */
#define CFG_IDLE_HEARTBEAT_NS (30LL * 1000000000LL)

enum cfg_type {
	CFG_STRING = 0,
	CFG_STRINGS = 1,   /* repeatable flag / YAML list of strings */
	CFG_INT = 2,
	CFG_DURATION = 3,  /* "90s", "1m30s", "10m", "3h", "7d" */
	CFG_BOOL = 4
};

/* One row of the option table. */
typedef struct cfg_option {
	const char *flag;      /* flag name without dashes */
	const char *key;       /* dotted path in the config file; NULL = flag only */
	enum cfg_type type;
	size_t offset;         /* of the field in struct cfg */
	const char *def;       /* default, in flag syntax */
	const char *help;
	int64_t min, max;      /* CFG_INT and CFG_DURATION bounds (inclusive) */
	/* Extra check of the parsed value (NULL = none): 0 or PRD_EINVAL with
	 * the problem appended to `why`. */
	int (*check)(const struct cfg *c, buf *why);
} cfg_option;

extern const cfg_option cfg_options[];
extern const size_t cfg_n_options;

/* cluster-autoscaler's flag names for settings provreqd has under another
 * name (--scale-down-enabled for --scale-down, ...): accepted as flags,
 * shown in --help beside the option, documented in docs/config.md. */
typedef struct cfg_alias {
	const char *flag;      /* cluster-autoscaler's name */
	const char *option;    /* the flag of the cfg_options row it sets */
} cfg_alias;

extern const cfg_alias cfg_aliases[];
extern const size_t cfg_n_aliases;

/* cluster-autoscaler flags for behaviour provreqd does not have, accepted
 * (with their value) and ignored, so a command line moved over keeps
 * starting; each goes to cfg.ignored with the reason. `boolean`: given
 * without a value it takes none (--flag alone means true). */
typedef struct cfg_ignored_flag {
	const char *flag;
	bool boolean;
	const char *why;
} cfg_ignored_flag;

extern const cfg_ignored_flag cfg_ignored[];
extern const size_t cfg_n_ignored;

/* The type's name as printed in help and docs ("duration", …). */
const char *cfg_type_name(enum cfg_type t);

/* Fill `c` with the defaults. 0 or PRD_ENOMEM. Call cfg_free even on
 * failure. */
int cfg_defaults(cfg *c);
void cfg_free(cfg *c);

/* Apply a config file's values on top of `c`. A missing or unreadable file,
 * malformed YAML, unknown keys and bad values append errors. 0 or
 * PRD_EINVAL (or PRD_ENOMEM). */
int cfg_apply_file(cfg *c, const char *path, buf *errs);
/* The same for YAML text already in memory; `name` labels the errors. */
int cfg_apply_yaml(cfg *c, const char *name, const char *data, size_t len, buf *errs);

/* Apply flags (argv[0..argc), no program or command name). Accepts
 * "--flag=value", "--flag value", a single dash for either, "--flag" for
 * bools and "--" to end flags. Positional arguments are errors. */
int cfg_apply_flags(cfg *c, int argc, char *const *argv, buf *errs);

/* The priority ConfigMap's namespace and name (`priority_configmap`,
 * "[NAMESPACE/]NAME"; without a namespace the lease namespace rule:
 * --lease-namespace, else `pod_namespace` when non-empty, else
 * kube-system). ns and name need 254 bytes each. false when unset. */
bool cfg_priority_configmap(const cfg *c, const char *pod_namespace, char ns[254], char name[254]);
/* The booking ledger's "NAMESPACE/NAME" (no namespace: the Lease's), when
 * one is used: leader election or a processor instance, and not "none". */
bool cfg_booking_ledger(const cfg *c, const char *pod_namespace, char out[510]);

/* The limits the configuration sets: *out (caller frees) and *n. 0,
 * PRD_EINVAL (with why) or PRD_ENOMEM. */
int cfg_res_limits(const cfg *c, cfg_res_limit **out, size_t *n, buf *why);

/* An expander chain ("least-waste", "priority,least-waste"): 0, or
 * PRD_EINVAL with the unknown name and the valid ones in why. */
int cfg_check_expander(const char *chain, buf *why);
/* Does the chain name the priority expander (which needs a table)? */
bool cfg_chain_has_priority(const char *chain);

/* Check the values together (ranges, enums, addresses, ordering of lease
 * and backoff durations). */
int cfg_validate(const cfg *c, buf *errs);

/* Everything at once: defaults, the --config file named in argv (if any),
 * flags, validation. On failure `errs` holds every problem; `c` must still
 * be freed. */
int cfg_load(cfg *c, int argc, char *const *argv, buf *errs);

/* The configuration as a YAML config file that cfg_apply_file reads back
 * to the same values (every option, nested by key path). */
int cfg_to_yaml(const cfg *c, buf *out);

/* Flag help for `--help`: one entry per option with type, default, config
 * key and help text. */
int cfg_help(buf *out);

/* One line per option, tab-separated: flag, key (or "-"), type, default
 * (for the docs check and `check-config --list-options`). */
int cfg_list(buf *out);
/* One line per alias: "ALIAS<TAB>OPTION" (`check-config --list-aliases`). */
int cfg_list_aliases(buf *out);

/* Format a duration the way the config accepts it ("1m30s", "7d", "0s").
 * `out` needs 32 bytes. */
const char *cfg_format_duration(int64_t ns, char out[32]);

#endif
