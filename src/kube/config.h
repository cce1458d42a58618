/* Where the apiserver is and how to authenticate to it: kubeconfig files
 * (with $KUBECONFIG lists, contexts, exec credential plugins) and the
 * in-cluster service account.
 *
 * A kube_config is immutable after loading except for credentials that
 * rotate (exec plugin output, token files); kube_config_credentials()
 * refreshes those and is safe to call from several threads. */
#ifndef PRD_KUBE_CONFIG_H
#define PRD_KUBE_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/clock.h"
#include "util/err.h"

typedef struct kube_exec_config {
	char *api_version;     /* client.authentication.k8s.io/v1 (v1beta1 accepted) */
	char *command;         /* run directly with execvp, never through a shell */
	char **args;           /* NULL-terminated */
	char **env;            /* NULL-terminated "NAME=value" added to the environment */
	char *install_hint;
	bool provide_cluster_info; /* put spec.cluster into KUBERNETES_EXEC_INFO */
	long timeout_ms;       /* kill the plugin after this long (default 60000) */
} kube_exec_config;

typedef struct kube_config {
	char *server;          /* "https://host:port", no trailing slash */
	char *context;         /* context name used (NULL in-cluster) */
	char *namespace_;      /* the context's namespace or "default" */
	/* TLS */
	char *ca_pem;          /* CA bundle in PEM, in memory (NULL = system store) */
	size_t ca_len;
	bool insecure;         /* insecure-skip-tls-verify */
	char *tls_server_name;
	char *client_cert_pem; /* client certificate and key, in memory only */
	size_t client_cert_len;
	char *client_key_pem;
	size_t client_key_len;
	/* Credentials (at most one family applies) */
	char *token;           /* static bearer token */
	char *token_file;      /* re-read when it changes (service-account rotation) */
	char *username;        /* basic auth */
	char *password;
	kube_exec_config *exec;
	/* Impersonation (kubectl --as/--as-group): sent as Impersonate-User
	 * and one Impersonate-Group header per group. */
	char *impersonate_user;
	char **impersonate_groups; /* NULL-terminated, or NULL */
	/* private: rotating credential cache, guarded by an internal lock */
	struct kube_cred_cache *cred;
} kube_config;

/* Credentials to put on one request, valid now. Strings are owned by the
 * struct; free with kube_credentials_clear(). */
typedef struct kube_credentials {
	char *bearer;          /* "Authorization: Bearer" token or NULL */
	char *client_cert_pem; /* from an exec plugin, else NULL (use the config's) */
	size_t client_cert_len;
	char *client_key_pem;
	size_t client_key_len;
} kube_credentials;

/* Load a kubeconfig. `path` may be NULL (then $KUBECONFIG, a ':'-separated
 * list merged with first-wins semantics, else ~/.kube/config); `context`
 * NULL means current-context. Relative file references resolve against the
 * directory of the file that names them. Caller frees with
 * kube_config_free(). Errors name the file and the field. */
int kube_config_load(const char *path, const char *context, kube_config **out, prd_err *err);

/* What kubectl's global flags change in the loaded configuration. Every
 * field is optional (NULL/false = keep the kubeconfig's value):
 *   context   --context: the context instead of current-context
 *   cluster   --cluster: the kubeconfig cluster entry instead of the context's
 *   user      --user: the kubeconfig user entry instead of the context's
 *   server    --server: the apiserver URL (tls-server-name is dropped)
 *   token     --token: the bearer token; replaces the user's token, token
 *             file, basic auth and exec plugin (client certificates stay)
 *   insecure_skip_tls_verify  no server certificate check (the CA is dropped)
 *   impersonate_user / impersonate_groups (NULL-terminated)  --as/--as-group
 * With `server` set and no kubeconfig file found, the configuration is built
 * from these fields alone (namespace "default"), as kubectl does. */
typedef struct kube_config_overrides {
	const char *context;
	const char *cluster;
	const char *user;
	const char *server;
	const char *token;
	bool insecure_skip_tls_verify;
	const char *impersonate_user;
	const char *const *impersonate_groups;
} kube_config_overrides;

/* kube_config_load and kube_config_auto with overrides (`ov` may be NULL). */
int kube_config_load_with(const char *path, const kube_config_overrides *ov, kube_config **out, prd_err *err);
int kube_config_auto_with(const char *path, const kube_config_overrides *ov, kube_config **out, prd_err *err);

/* In-cluster config from KUBERNETES_SERVICE_HOST/PORT and the mounted
 * service account (token, ca.crt, namespace). `root` is the directory that
 * holds them (NULL = /var/run/secrets/kubernetes.io/serviceaccount). */
int kube_config_in_cluster(const char *root, kube_config **out, prd_err *err);

/* A kubeconfig if one is named or found, otherwise in-cluster. */
int kube_config_auto(const char *path, const char *context, kube_config **out, prd_err *err);

void kube_config_free(kube_config *cfg);

/* Current credentials: re-reads token_file when it changed, runs the exec
 * plugin when there is no cached result or it expired (its
 * expirationTimestamp, minus a small margin). `force` drops the cache (after
 * a 401). */
int kube_config_credentials(kube_config *cfg, const clk *clock, bool force,
			    kube_credentials *out, prd_err *err);
void kube_credentials_clear(kube_credentials *c);

/* How many times the exec plugin has been run (observability, tests). */
unsigned kube_config_exec_runs(const kube_config *cfg);

#endif
