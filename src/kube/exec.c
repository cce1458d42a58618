/* Rotating credentials: token files (service-account tokens rotate on
 * disk) and exec credential plugins (client.authentication.k8s.io).
 *
 * The plugin is started with posix_spawnp — the same PATH lookup as
 * execvp, without a shell, so nothing in the kubeconfig is ever
 * interpreted — with stdin on /dev/null, stdout captured through a pipe and
 * stderr passed through. KUBERNETES_EXEC_INFO carries the ExecCredential
 * request. posix_spawn rather than fork+exec because the process is
 * multi-threaded and the child must not run anything between the two. */
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kube/client_int.h"
#include "kube/config.h"
#include "kube/config_int.h"
#include "ops/log.h"
#include "util/buf.h"
#include "util/rfc3339.h"
#include "util/str.h"
#include "util/yamljson.h"

extern char **environ;

/* Refresh an exec credential this long before it expires. */
#define EXEC_EXPIRY_MARGIN_NS (10 * PRD_NS_PER_SEC)
#define EXEC_OUTPUT_MAX (1u << 20)

struct kube_cred_cache {
	pthread_mutex_t mu;
	/* token file */
	bool file_valid;
	char *file_token;
	struct timespec mtim;
	off_t size;
	ino_t ino;
	dev_t dev;
	/* exec plugin */
	bool exec_valid;
	char *exec_token;
	char *exec_cert;
	size_t exec_cert_len;
	char *exec_key;
	size_t exec_key_len;
	int64_t exec_expiry_ns;   /* 0 = no expiry given */
	unsigned exec_runs;
};

static void wipe(char **s, size_t n)
{
	if(*s) {
		explicit_bzero(*s, n ? n : strlen(*s));
		free(*s);
		*s = NULL;
	}
}

static void exec_cache_clear(struct kube_cred_cache *c)
{
	wipe(&c->exec_token, 0);
	free(c->exec_cert);
	c->exec_cert = NULL;
	c->exec_cert_len = 0;
	wipe(&c->exec_key, c->exec_key_len);
	c->exec_key_len = 0;
	c->exec_expiry_ns = 0;
	c->exec_valid = false;
}

struct kube_cred_cache *kube__cred_cache_new(void)
{
	struct kube_cred_cache *c = calloc(1, sizeof(*c));
	if(c && pthread_mutex_init(&c->mu, NULL) != 0) {
		free(c);
		return NULL;
	}
	return c;
}

void kube__cred_cache_free(struct kube_cred_cache *c)
{
	if(!c)
		return;
	exec_cache_clear(c);
	wipe(&c->file_token, 0);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

unsigned kube_config_exec_runs(const kube_config *cfg)
{
	unsigned n;
	if(!cfg || !cfg->cred)
		return 0;
	pthread_mutex_lock(&cfg->cred->mu);
	n = cfg->cred->exec_runs;
	pthread_mutex_unlock(&cfg->cred->mu);
	return n;
}

/* Re-read the token file when its identity, size or mtime changed (kubelet
 * rotates projected tokens by swapping a symlink, which changes the inode
 * seen through stat). Called with the lock held. */
static int refresh_token_file(const kube_config *cfg, struct kube_cred_cache *c, bool force,
			      prd_err *err)
{
	struct stat st;
	char *data = NULL;
	size_t len;
	int rc;

	if(stat(cfg->token_file, &st) != 0) {
		if(c->file_valid) {
			/* Keep using the last token across a rotation gap. */
			log_warn("token file unreadable, keeping the previous token", "file", cfg->token_file,
				 "error", strerror(errno));
			return 0;
		}
		return prd_err_set(err, PRD_EIO, "token file %s: %s", cfg->token_file, strerror(errno));
	}
	if(c->file_valid && !force && st.st_ino == c->ino && st.st_dev == c->dev &&
	   st.st_size == c->size && st.st_mtim.tv_sec == c->mtim.tv_sec &&
	   st.st_mtim.tv_nsec == c->mtim.tv_nsec)
		return 0;
	rc = yj_read_file(cfg->token_file, 1 << 20, &data, &len, err);
	if(rc)
		return prd_err_prefix(err, "token file");
	str_trim(data);
	if(!*data) {
		free(data);
		return prd_err_set(err, PRD_EINVAL, "token file %s is empty", cfg->token_file);
	}
	wipe(&c->file_token, 0);
	c->file_token = data;
	c->file_valid = true;
	c->ino = st.st_ino;
	c->dev = st.st_dev;
	c->size = st.st_size;
	c->mtim = st.st_mtim;
	log_debug("token file read", "file", cfg->token_file);
	return 0;
}

/* The ExecCredential request given to the plugin in KUBERNETES_EXEC_INFO.
 * Caller frees. */
static char *exec_info(const kube_config *cfg)
{
	json_object *o = json_object_new_object(), *spec = json_object_new_object();
	char *s = NULL;

	if(!o || !spec) {
		json_object_put(o);
		json_object_put(spec);
		return NULL;
	}
	json_object_object_add(o, "apiVersion", json_object_new_string(cfg->exec->api_version));
	json_object_object_add(o, "kind", json_object_new_string("ExecCredential"));
	json_object_object_add(o, "spec", spec);
	json_object_object_add(spec, "interactive", json_object_new_boolean(0));
	if(cfg->exec->provide_cluster_info) {
		json_object *cl = json_object_new_object();
		char *ca = NULL;
		if(cl) {
			json_object_object_add(cl, "server", json_object_new_string(cfg->server));
			if(cfg->tls_server_name)
				json_object_object_add(cl, "tls-server-name",
						       json_object_new_string(cfg->tls_server_name));
			if(cfg->insecure)
				json_object_object_add(cl, "insecure-skip-tls-verify", json_object_new_boolean(1));
			if(cfg->ca_pem && kube__base64_encode(cfg->ca_pem, cfg->ca_len, &ca) == 0) {
				json_object_object_add(cl, "certificate-authority-data", json_object_new_string(ca));
				free(ca);
			}
			json_object_object_add(spec, "cluster", cl);
		}
	}
	s = str_dup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
	json_object_put(o);
	return s;
}

static bool env_overridden(const char *entry, char *const *over)
{
	const char *eq = strchr(entry, '=');
	size_t n = eq ? (size_t)(eq - entry) : strlen(entry);
	for(size_t i = 0; over && over[i]; i++)
		if(strncmp(over[i], entry, n) == 0 && over[i][n] == '=')
			return true;
	return false;
}

/* The plugin's environment: ours, minus what the kubeconfig or the exec
 * protocol overrides, plus those. The array owns nothing but `info`. */
static char **exec_env(char *const *cfgenv, char *info)
{
	size_t n = 0, m = 0, k = 0;
	char **v;
	char *over_info[2] = {info, NULL};

	while(environ && environ[n])
		n++;
	while(cfgenv && cfgenv[m])
		m++;
	v = calloc(n + m + 2, sizeof(char *));
	if(!v)
		return NULL;
	for(size_t i = 0; i < n; i++)
		if(!env_overridden(environ[i], cfgenv) && !env_overridden(environ[i], over_info))
			v[k++] = environ[i];
	for(size_t i = 0; i < m; i++)
		if(!env_overridden(cfgenv[i], over_info))
			v[k++] = cfgenv[i];
	v[k] = info;
	return v;
}

/* argv for the plugin: its command then its arguments, borrowed from the
 * configuration. Caller frees the array only; NULL when out of memory. */
static char **exec_argv(const kube_exec_config *x)
{
	size_t nargs = 0;
	char **argv;

	while(x->args && x->args[nargs])
		nargs++;
	argv = calloc(nargs + 2, sizeof(char *));
	if(!argv)
		return NULL;
	argv[0] = x->command;
	for(size_t i = 0; i < nargs; i++)
		argv[i + 1] = x->args[i];
	return argv;
}

/* Start the plugin with stdin on /dev/null and stdout on `out_fd`; *pid is
 * set on success. The file actions live only as long as the spawn. */
static int exec_start(const kube_exec_config *x, char **argv, char **envp, int out_fd, pid_t *pid,
		      prd_err *err)
{
	posix_spawn_file_actions_t fa;
	int rc = 0, e;

	if(posix_spawn_file_actions_init(&fa) != 0)
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	if(posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0) != 0 ||
	   posix_spawn_file_actions_adddup2(&fa, out_fd, 1) != 0) {
		rc = prd_err_set(err, PRD_ENOMEM, "out of memory");
		goto done;
	}
	e = posix_spawnp(pid, x->command, &fa, NULL, argv, envp);
	if(e != 0) {
		*pid = -1;
		rc = prd_err_set(err, PRD_EIO, "exec plugin %s: cannot run: %s%s%s", x->command,
				 strerror(e), x->install_hint ? ". " : "",
				 x->install_hint ? x->install_hint : "");
	}
done:
	posix_spawn_file_actions_destroy(&fa);
	return rc;
}

/* Read the plugin's stdout from `fd` into `out` until end of file, within
 * the plugin's timeout. On error the plugin is killed (the caller still
 * reaps it). */
static int exec_read(const kube_exec_config *x, pid_t pid, int fd, buf *out, prd_err *err)
{
	const clk *rt = clk_real();
	int64_t deadline = clk_mono(rt) + (x->timeout_ms > 0 ? x->timeout_ms : 60000) * PRD_NS_PER_MS;
	int rc = 0;

	for(;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int64_t left = deadline - clk_mono(rt);
		char chunk[4096];
		ssize_t r;
		int pr;

		if(left <= 0) {
			rc = prd_err_set(err, PRD_ETIMEDOUT, "exec plugin %s: no answer within %ld ms",
					 x->command, x->timeout_ms);
			break;
		}
		pr = poll(&p, 1, (int)(left / PRD_NS_PER_MS) + 1);
		if(pr < 0 && errno == EINTR)
			continue;
		if(pr < 0) {
			rc = prd_err_set(err, PRD_EIO, "exec plugin %s: poll: %s", x->command, strerror(errno));
			break;
		}
		if(pr == 0)
			continue;
		r = read(fd, chunk, sizeof(chunk));
		if(r < 0 && errno == EINTR)
			continue;
		if(r <= 0)
			return 0;
		if(out->len + (size_t)r > EXEC_OUTPUT_MAX) {
			rc = prd_err_set(err, PRD_ERANGE, "exec plugin %s: output larger than %u bytes",
					 x->command, EXEC_OUTPUT_MAX);
			break;
		}
		if(buf_append(out, chunk, (size_t)r)) {
			rc = prd_err_set(err, PRD_ENOMEM, "out of memory");
			break;
		}
	}
	kill(pid, SIGKILL);
	return rc;
}

/* Wait for the plugin to end. When it ran without error so far (`rc` 0),
 * anything but exit status 0 becomes the error. */
static int exec_reap(const kube_exec_config *x, pid_t pid, int rc, prd_err *err)
{
	int status = 0;

	while(waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if(!rc && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
		if(WIFEXITED(status))
			rc = prd_err_set(err, PRD_EIO, "exec plugin %s exited with status %d%s%s",
					 x->command, WEXITSTATUS(status), x->install_hint ? ". " : "",
					 x->install_hint ? x->install_hint : "");
		else
			rc = prd_err_set(err, PRD_EIO, "exec plugin %s killed by signal %d", x->command,
					 WIFSIGNALED(status) ? WTERMSIG(status) : 0);
	}
	return rc;
}

/* Run the plugin and capture its stdout into `out`. */
static int exec_spawn(const kube_config *cfg, buf *out, prd_err *err)
{
	const kube_exec_config *x = cfg->exec;
	char *info_json = exec_info(cfg), *info = NULL;
	char **argv = NULL, **envp = NULL;
	int fds[2] = {-1, -1}, rc = 0;
	pid_t pid = -1;

	if(info_json)
		info = str_printf("KUBERNETES_EXEC_INFO=%s", info_json);
	argv = exec_argv(x);
	if(!info || !argv) {
		rc = prd_err_set(err, PRD_ENOMEM, "out of memory");
		goto done;
	}
	envp = exec_env(x->env, info);
	if(!envp) {
		rc = prd_err_set(err, PRD_ENOMEM, "out of memory");
		goto done;
	}
	if(pipe2(fds, O_CLOEXEC) != 0) {
		rc = prd_err_set(err, PRD_EIO, "exec plugin %s: pipe: %s", x->command, strerror(errno));
		goto done;
	}
	rc = exec_start(x, argv, envp, fds[1], &pid, err);
	if(rc)
		goto done;
	close(fds[1]);
	fds[1] = -1;
	rc = exec_read(x, pid, fds[0], out, err);
done:
	if(pid > 0)
		rc = exec_reap(x, pid, rc, err);
	if(fds[0] >= 0)
		close(fds[0]);
	if(fds[1] >= 0)
		close(fds[1]);
	free(envp);
	free(argv);
	free(info);
	free(info_json);
	return rc;
}

static int dup_status_str(json_object *status, const char *key, char **dst, size_t *len)
{
	json_object *v;
	if(!json_object_object_get_ex(status, key, &v) || !json_object_is_type(v, json_type_string) ||
	   !*json_object_get_string(v))
		return 0;
	*dst = str_dup(json_object_get_string(v));
	if(!*dst)
		return PRD_ENOMEM;
	if(len)
		*len = strlen(*dst);
	return 0;
}

/* Run the plugin and replace the cached credential with its answer. The
 * output is never quoted in messages: it holds secrets. Lock held. */
static int run_exec(const kube_config *cfg, struct kube_cred_cache *c, prd_err *err)
{
	const kube_exec_config *x = cfg->exec;
	json_object *o = NULL, *status, *v;
	buf out;
	int rc;
	const char *api, *kind;

	buf_init(&out);
	exec_cache_clear(c);
	c->exec_runs++;
	rc = exec_spawn(cfg, &out, err);
	if(rc)
		goto done;
	o = json_tokener_parse(buf_str(&out));
	if(!o || !json_object_is_type(o, json_type_object)) {
		rc = prd_err_set(err, PRD_EINVAL, "exec plugin %s: output is not a JSON ExecCredential",
				 x->command);
		goto done;
	}
	api = json_object_object_get_ex(o, "apiVersion", &v) ? json_object_get_string(v) : NULL;
	kind = json_object_object_get_ex(o, "kind", &v) ? json_object_get_string(v) : NULL;
	if(!str_eq(kind, "ExecCredential") || !str_eq(api, x->api_version)) {
		rc = prd_err_set(err, PRD_EINVAL,
				 "exec plugin %s: answered kind %s apiVersion %s, want ExecCredential %s",
				 x->command, kind ? kind : "(none)", api ? api : "(none)", x->api_version);
		goto done;
	}
	if(!json_object_object_get_ex(o, "status", &status) ||
	   !json_object_is_type(status, json_type_object)) {
		rc = prd_err_set(err, PRD_EINVAL, "exec plugin %s: ExecCredential has no status", x->command);
		goto done;
	}
	if(dup_status_str(status, "token", &c->exec_token, NULL) ||
	   dup_status_str(status, "clientCertificateData", &c->exec_cert, &c->exec_cert_len) ||
	   dup_status_str(status, "clientKeyData", &c->exec_key, &c->exec_key_len)) {
		rc = prd_err_set(err, PRD_ENOMEM, "out of memory");
		goto done;
	}
	if(!c->exec_cert != !c->exec_key) {
		rc = prd_err_set(err, PRD_EINVAL,
				 "exec plugin %s: clientCertificateData and clientKeyData must come together",
				 x->command);
		goto done;
	}
	if(!c->exec_token && !c->exec_cert) {
		rc = prd_err_set(err, PRD_EINVAL, "exec plugin %s: status has neither a token nor a client certificate",
				 x->command);
		goto done;
	}
	if(json_object_object_get_ex(status, "expirationTimestamp", &v) &&
	   json_object_is_type(v, json_type_string)) {
		prd_err e2;
		rc = rfc3339_parse(json_object_get_string(v), &c->exec_expiry_ns, &e2);
		if(rc) {
			rc = prd_err_set(err, PRD_EINVAL, "exec plugin %s: status.expirationTimestamp: %s",
					 x->command, e2.msg);
			goto done;
		}
	}
	c->exec_valid = true;
	log_debug("exec credential obtained", "command", x->command);
done:
	if(rc)
		exec_cache_clear(c);
	json_object_put(o);
	if(out.data)
		explicit_bzero(out.data, out.len);
	buf_free(&out);
	return rc;
}

static int copy_blob(char **dst, size_t *dlen, const char *src, size_t slen)
{
	if(!src)
		return 0;
	*dst = malloc(slen + 1);
	if(!*dst)
		return PRD_ENOMEM;
	memcpy(*dst, src, slen);
	(*dst)[slen] = '\0';
	*dlen = slen;
	return 0;
}

int kube_config_credentials(kube_config *cfg, const clk *clock, bool force, kube_credentials *out,
			    prd_err *err)
{
	struct kube_cred_cache *c = cfg->cred;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if(!clock)
		clock = clk_real();
	pthread_mutex_lock(&c->mu);
	if(cfg->exec) {
		bool stale = !c->exec_valid || force ||
			     (c->exec_expiry_ns && clk_wall(clock) >= c->exec_expiry_ns - EXEC_EXPIRY_MARGIN_NS);
		if(stale)
			rc = run_exec(cfg, c, err);
		if(!rc) {
			if(c->exec_token && !(out->bearer = str_dup(c->exec_token)))
				rc = PRD_ENOMEM;
			if(!rc)
				rc = copy_blob(&out->client_cert_pem, &out->client_cert_len, c->exec_cert,
					       c->exec_cert_len);
			if(!rc)
				rc = copy_blob(&out->client_key_pem, &out->client_key_len, c->exec_key,
					       c->exec_key_len);
			if(rc)
				prd_err_set(err, rc, "out of memory");
		}
	} else if(cfg->token) {
		out->bearer = str_dup(cfg->token);
		if(!out->bearer)
			rc = prd_err_set(err, PRD_ENOMEM, "out of memory");
	} else if(cfg->token_file) {
		rc = refresh_token_file(cfg, c, force, err);
		if(!rc && !(out->bearer = str_dup(c->file_token)))
			rc = prd_err_set(err, PRD_ENOMEM, "out of memory");
	}
	pthread_mutex_unlock(&c->mu);
	if(rc)
		kube_credentials_clear(out);
	return rc;
}

void kube_credentials_clear(kube_credentials *c)
{
	if(!c)
		return;
	wipe(&c->bearer, 0);
	free(c->client_cert_pem);
	wipe(&c->client_key_pem, c->client_key_len);
	memset(c, 0, sizeof(*c));
}
