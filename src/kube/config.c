/* kubeconfig and in-cluster configuration.
 *
 * Loading reads every file of the search list (an explicit path, else the
 * $KUBECONFIG list, else ~/.kube/config) into json-c trees through the YAML
 * reader, picks the context, and resolves its cluster and user into a flat
 * kube_config. Files named inside a kubeconfig (CA, client certificate and
 * key) are read into memory here, once; only token files are re-read later
 * because they rotate. Credential refresh (token files, exec plugins) lives
 * in exec.c. */
#include "kube/config.h"

#include <errno.h>
#include <json-c/json.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kube/client_int.h"
#include "kube/config_int.h"
#include "ops/log.h"
#include "util/buf.h"
#include "util/str.h"
#include "util/yamljson.h"

#define KUBECONFIG_MAX (16u * 1024 * 1024)
#define SA_ROOT "/var/run/secrets/kubernetes.io/serviceaccount"

/* One parsed kubeconfig file. */
typedef struct kc_file {
	char *path;
	char *dir;            /* directory relative references resolve against */
	json_object *doc;
} kc_file;

typedef struct kc_set {
	kc_file *files;
	size_t n;
} kc_set;

/* A named entry found in some file: the entry's body plus the file it came
 * from (for relative paths and messages). */
typedef struct kc_entry {
	json_object *body;
	const kc_file *file;
} kc_entry;

static void kc_set_free(kc_set *s)
{
	for(size_t i = 0; i < s->n; i++) {
		free(s->files[i].path);
		free(s->files[i].dir);
		json_object_put(s->files[i].doc);
	}
	free(s->files);
	s->files = NULL;
	s->n = 0;
}

static char *dir_of(const char *path)
{
	const char *slash = strrchr(path, '/');
	if(!slash)
		return str_dup(".");
	if(slash == path)
		return str_dup("/");
	return str_ndup(path, (size_t)(slash - path));
}

/* A path from a kubeconfig, made absolute against the directory of the file
 * that names it. Caller frees. */
static char *resolve_path(const kc_file *f, const char *p)
{
	if(!p)
		return NULL;
	if(p[0] == '/' || !f)
		return str_dup(p);
	while(p[0] == '.' && p[1] == '/')
		p += 2;
	return str_printf("%s/%s", f->dir, p);
}

static const char *jstr(json_object *o, const char *key)
{
	json_object *v;
	if(!o || !json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
		return NULL;
	return json_object_get_string(v);
}

static const char *jstr_nonempty(json_object *o, const char *key)
{
	const char *s = jstr(o, key);
	return s && *s ? s : NULL;
}

/* Read and parse one kubeconfig file. A missing file gives PRD_ENOTFOUND so
 * $KUBECONFIG lists can skip it. */
static int kc_read(kc_set *s, const char *path, prd_err *err)
{
	char *data = NULL;
	size_t len = 0;
	json_object *doc = NULL;
	kc_file *nf;
	int rc;

	rc = yj_read_file(path, KUBECONFIG_MAX, &data, &len, err);
	if(rc) {
		if(rc == PRD_ENOTFOUND)
			prd_err_set(err, rc, "kubeconfig %s: no such file", path);
		else
			prd_err_prefix(err, "kubeconfig %s", path);
		goto done;
	}
	if(len == 0 || strspn(data, " \t\r\n") == len) {
		doc = json_object_new_object();
		if(!doc) {
			rc = prd_err_set(err, PRD_ENOMEM, "out of memory");
			goto done;
		}
	} else {
		rc = yj_parse_one(data, len, &doc, err);
		if(rc) {
			prd_err_prefix(err, "kubeconfig %s: invalid YAML", path);
			goto done;
		}
		if(!json_object_is_type(doc, json_type_object)) {
			rc = prd_err_set(err, PRD_EINVAL, "kubeconfig %s: not a mapping", path);
			goto done;
		}
	}
	nf = realloc(s->files, (s->n + 1) * sizeof(*s->files));
	if(!nf) {
		rc = prd_err_set(err, PRD_ENOMEM, "out of memory");
		goto done;
	}
	s->files = nf;
	nf[s->n].path = str_dup(path);
	nf[s->n].dir = dir_of(path);
	nf[s->n].doc = doc;
	if(!nf[s->n].path || !nf[s->n].dir) {
		free(nf[s->n].path);
		free(nf[s->n].dir);
		rc = prd_err_set(err, PRD_ENOMEM, "out of memory");
		goto done;
	}
	s->n++;
	doc = NULL;
done:
	json_object_put(doc);
	free(data);
	return rc;
}

/* The files to load: `path`, else every entry of $KUBECONFIG (missing ones
 * skipped, as kubectl does), else ~/.kube/config. */
static int kc_gather(kc_set *s, const char *path, prd_err *err)
{
	const char *env = getenv("KUBECONFIG");
	int rc = 0;

	if(path && *path)
		return kc_read(s, path, err);
	if(env && *env) {
		char *copy = str_dup(env), *save = NULL, *tok;
		if(!copy)
			return prd_err_set(err, PRD_ENOMEM, "out of memory");
		for(tok = strtok_r(copy, ":", &save); tok; tok = strtok_r(NULL, ":", &save)) {
			bool seen = false;
			for(size_t i = 0; i < s->n; i++)
				if(strcmp(s->files[i].path, tok) == 0)
					seen = true;
			if(seen)
				continue;
			rc = kc_read(s, tok, err);
			if(rc == PRD_ENOTFOUND) {
				rc = 0;
				continue;
			}
			if(rc)
				break;
		}
		free(copy);
		if(!rc && s->n == 0)
			rc = prd_err_set(err, PRD_ENOTFOUND, "no file of KUBECONFIG=%s exists", env);
		return rc;
	} else {
		const char *home = getenv("HOME");
		char *p;
		if(!home || !*home)
			return prd_err_set(err, PRD_ENOTFOUND, "no kubeconfig: neither KUBECONFIG nor HOME is set");
		p = str_printf("%s/.kube/config", home);
		if(!p)
			return prd_err_set(err, PRD_ENOMEM, "out of memory");
		rc = kc_read(s, p, err);
		free(p);
		return rc;
	}
}

/* Find the first entry named `name` in the list `list` ("clusters",
 * "users", "contexts") across files; the body is the member `body`
 * ("cluster", "user", "context"). First file wins, as in client-go. */
static int kc_find(const kc_set *s, const char *list, const char *body, const char *name,
		   kc_entry *out, prd_err *err)
{
	for(size_t i = 0; i < s->n; i++) {
		json_object *arr;
		if(!json_object_object_get_ex(s->files[i].doc, list, &arr) || !arr ||
		   json_object_is_type(arr, json_type_null))
			continue;
		if(!json_object_is_type(arr, json_type_array))
			return prd_err_set(err, PRD_EINVAL, "kubeconfig %s: %s is not a list",
					   s->files[i].path, list);
		for(size_t j = 0; j < json_object_array_length(arr); j++) {
			json_object *e = json_object_array_get_idx(arr, j), *b;
			const char *n = jstr(e, "name");
			if(!n || strcmp(n, name) != 0)
				continue;
			if(!json_object_object_get_ex(e, body, &b) || !json_object_is_type(b, json_type_object))
				return prd_err_set(err, PRD_EINVAL, "kubeconfig %s: %s[%s] has no %s",
						   s->files[i].path, list, name, body);
			out->body = b;
			out->file = &s->files[i];
			return 0;
		}
	}
	return PRD_ENOTFOUND;
}

int kube__base64_decode(const char *in, size_t inlen, char **out, size_t *outlen)
{
	/* Strict standard-alphabet decoder; white space (line breaks in PEM-ish
	 * values) is skipped, '=' padding only at the end. */
	static const signed char tbl[256] = {
		['A'] = 1, ['B'] = 2, ['C'] = 3, ['D'] = 4, ['E'] = 5, ['F'] = 6, ['G'] = 7,
		['H'] = 8, ['I'] = 9, ['J'] = 10, ['K'] = 11, ['L'] = 12, ['M'] = 13, ['N'] = 14,
		['O'] = 15, ['P'] = 16, ['Q'] = 17, ['R'] = 18, ['S'] = 19, ['T'] = 20, ['U'] = 21,
		['V'] = 22, ['W'] = 23, ['X'] = 24, ['Y'] = 25, ['Z'] = 26, ['a'] = 27, ['b'] = 28,
		['c'] = 29, ['d'] = 30, ['e'] = 31, ['f'] = 32, ['g'] = 33, ['h'] = 34, ['i'] = 35,
		['j'] = 36, ['k'] = 37, ['l'] = 38, ['m'] = 39, ['n'] = 40, ['o'] = 41, ['p'] = 42,
		['q'] = 43, ['r'] = 44, ['s'] = 45, ['t'] = 46, ['u'] = 47, ['v'] = 48, ['w'] = 49,
		['x'] = 50, ['y'] = 51, ['z'] = 52, ['0'] = 53, ['1'] = 54, ['2'] = 55, ['3'] = 56,
		['4'] = 57, ['5'] = 58, ['6'] = 59, ['7'] = 60, ['8'] = 61, ['9'] = 62, ['+'] = 63,
		['/'] = 64,
	};
	char *o = malloc(inlen / 4 * 3 + 4);
	size_t n = 0, q = 0, pad = 0;
	unsigned acc = 0;

	if(!o)
		return PRD_ENOMEM;
	for(size_t i = 0; i < inlen; i++) {
		unsigned char ch = (unsigned char)in[i];
		if(ch == ' ' || ch == '\n' || ch == '\r' || ch == '\t')
			continue;
		if(ch == '=') {
			pad++;
			continue;
		}
		if(pad || !tbl[ch]) {
			free(o);
			return PRD_EINVAL;
		}
		acc = (acc << 6) | (unsigned)(tbl[ch] - 1);
		if(++q == 4) {
			o[n++] = (char)(acc >> 16);
			o[n++] = (char)(acc >> 8);
			o[n++] = (char)acc;
			q = 0;
			acc = 0;
		}
	}
	if(q == 1 || pad > 2 || (pad && (q + pad) != 4)) {
		free(o);
		return PRD_EINVAL;
	}
	if(q == 2) {
		o[n++] = (char)(acc >> 4);
	} else if(q == 3) {
		o[n++] = (char)(acc >> 10);
		o[n++] = (char)(acc >> 2);
	}
	o[n] = '\0';
	*out = o;
	*outlen = n;
	return 0;
}

int kube__base64_encode(const char *in, size_t inlen, char **out)
{
	static const char al[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const unsigned char *u = (const unsigned char *)in;
	char *o = malloc((inlen + 2) / 3 * 4 + 1);
	size_t n = 0, i;

	if(!o)
		return PRD_ENOMEM;
	for(i = 0; i + 2 < inlen; i += 3) {
		unsigned v = (unsigned)u[i] << 16 | (unsigned)u[i + 1] << 8 | u[i + 2];
		o[n++] = al[v >> 18];
		o[n++] = al[(v >> 12) & 63];
		o[n++] = al[(v >> 6) & 63];
		o[n++] = al[v & 63];
	}
	if(i < inlen) {
		unsigned v = (unsigned)u[i] << 16 | (i + 1 < inlen ? (unsigned)u[i + 1] << 8 : 0);
		o[n++] = al[v >> 18];
		o[n++] = al[(v >> 12) & 63];
		o[n++] = i + 1 < inlen ? al[(v >> 6) & 63] : '=';
		o[n++] = '=';
	}
	o[n] = '\0';
	*out = o;
	return 0;
}

/* Load a PEM/bytes field given either as `<key>-data` (base64) or as a file
 * name `<key>`; -data wins, as in client-go. */
static int load_blob(const kc_entry *e, const char *what, const char *key, const char *data_key,
		     char **out, size_t *outlen, prd_err *err)
{
	const char *d = jstr_nonempty(e->body, data_key);
	const char *f = jstr_nonempty(e->body, key);
	int rc;

	if(d) {
		rc = kube__base64_decode(d, strlen(d), out, outlen);
		if(rc == PRD_EINVAL)
			return prd_err_set(err, rc, "kubeconfig %s: %s.%s: invalid base64",
					   e->file->path, what, data_key);
		if(rc)
			return prd_err_set(err, rc, "out of memory");
		return 0;
	}
	if(f) {
		char *p = resolve_path(e->file, f);
		if(!p)
			return prd_err_set(err, PRD_ENOMEM, "out of memory");
		rc = yj_read_file(p, KUBECONFIG_MAX, out, outlen, err);
		if(rc)
			prd_err_prefix(err, "kubeconfig %s: %s.%s", e->file->path, what, key);
		free(p);
		return rc;
	}
	return 0;
}

static int dup_field(char **dst, const char *src, prd_err *err)
{
	if(!src)
		return 0;
	*dst = str_dup(src);
	return *dst ? 0 : prd_err_set(err, PRD_ENOMEM, "out of memory");
}

/* Strip trailing slashes from the server URL and check its scheme. */
static int set_server(kube_config *cfg, const char *server, const char *where, prd_err *err)
{
	size_t n;
	if(!server || !*server)
		return prd_err_set(err, PRD_EINVAL, "%s: server is missing", where);
	if(!str_starts_with(server, "https://") && !str_starts_with(server, "http://"))
		return prd_err_set(err, PRD_EINVAL, "%s: server %s is not an http(s) URL", where, server);
	n = strlen(server);
	while(n > 0 && server[n - 1] == '/')
		n--;
	cfg->server = str_ndup(server, n);
	return cfg->server ? 0 : prd_err_set(err, PRD_ENOMEM, "out of memory");
}

static int load_cluster(kube_config *cfg, const kc_entry *e, const char *name, prd_err *err)
{
	char what[300];
	json_object *v;
	int rc;

	snprintf(what, sizeof(what), "clusters[%s]", name);
	{
		char where[700];
		snprintf(where, sizeof(where), "kubeconfig %s: %s", e->file->path, what);
		rc = set_server(cfg, jstr(e->body, "server"), where, err);
		if(rc)
			return rc;
	}
	rc = load_blob(e, what, "certificate-authority", "certificate-authority-data", &cfg->ca_pem,
		       &cfg->ca_len, err);
	if(rc)
		return rc;
	if(json_object_object_get_ex(e->body, "insecure-skip-tls-verify", &v)) {
		if(json_object_is_type(v, json_type_boolean))
			cfg->insecure = json_object_get_boolean(v);
		else if(json_object_is_type(v, json_type_string) &&
			str_to_bool(json_object_get_string(v), &cfg->insecure) == 0)
			;
		else
			return prd_err_set(err, PRD_EINVAL,
					   "kubeconfig %s: %s.insecure-skip-tls-verify: not a boolean",
					   e->file->path, what);
	}
	return dup_field(&cfg->tls_server_name, jstr_nonempty(e->body, "tls-server-name"), err);
}

static void strv_free(char **v)
{
	if(!v)
		return;
	for(size_t i = 0; v[i]; i++)
		free(v[i]);
	free(v);
}

static void exec_free(kube_exec_config *x)
{
	if(!x)
		return;
	free(x->api_version);
	free(x->command);
	strv_free(x->args);
	strv_free(x->env);
	free(x->install_hint);
	free(x);
}

/* exec.args: a list of strings, copied into x->args (NULL-terminated). */
static int load_exec_args(kube_exec_config *x, json_object *ex, const kc_entry *e, const char *what,
			  prd_err *err)
{
	json_object *args;
	size_t na = json_object_object_get_ex(ex, "args", &args) && json_object_is_type(args, json_type_array)
			    ? json_object_array_length(args)
			    : 0;

	x->args = calloc(na + 1, sizeof(char *));
	if(!x->args)
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	for(size_t i = 0; i < na; i++) {
		json_object *a = json_object_array_get_idx(args, i);
		if(!json_object_is_type(a, json_type_string))
			return prd_err_set(err, PRD_EINVAL, "kubeconfig %s: %s.exec.args[%zu] is not a string",
					   e->file->path, what, i);
		x->args[i] = str_dup(json_object_get_string(a));
		if(!x->args[i])
			return prd_err_set(err, PRD_ENOMEM, "out of memory");
	}
	return 0;
}

/* exec.env: a list of {name, value}, copied into x->env as "name=value"
 * (NULL-terminated). */
static int load_exec_env(kube_exec_config *x, json_object *ex, const kc_entry *e, const char *what,
			 prd_err *err)
{
	json_object *env;
	size_t ne = json_object_object_get_ex(ex, "env", &env) && json_object_is_type(env, json_type_array)
			    ? json_object_array_length(env)
			    : 0;

	x->env = calloc(ne + 1, sizeof(char *));
	if(!x->env)
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	for(size_t i = 0; i < ne; i++) {
		json_object *kv = json_object_array_get_idx(env, i);
		const char *n = jstr_nonempty(kv, "name"), *val = jstr(kv, "value");
		if(!n || strchr(n, '='))
			return prd_err_set(err, PRD_EINVAL, "kubeconfig %s: %s.exec.env[%zu].name is invalid",
					   e->file->path, what, i);
		x->env[i] = str_printf("%s=%s", n, val ? val : "");
		if(!x->env[i])
			return prd_err_set(err, PRD_ENOMEM, "out of memory");
	}
	return 0;
}

static int load_exec(kube_config *cfg, json_object *ex, const kc_entry *e, const char *what,
		     prd_err *err)
{
	kube_exec_config *x = calloc(1, sizeof(*x));
	const char *api = jstr_nonempty(ex, "apiVersion");
	const char *cmd = jstr_nonempty(ex, "command");
	const char *mode = jstr_nonempty(ex, "interactiveMode");
	json_object *pci;
	int rc = 0;

	if(!x)
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	if(!api || (strcmp(api, "client.authentication.k8s.io/v1") != 0 &&
		    strcmp(api, "client.authentication.k8s.io/v1beta1") != 0)) {
		rc = prd_err_set(err, PRD_EUNSUPPORTED,
				 "kubeconfig %s: %s.exec.apiVersion: %s is not supported "
				 "(want client.authentication.k8s.io/v1 or v1beta1)",
				 e->file->path, what, api ? api : "(missing)");
		goto done;
	}
	if(!cmd) {
		rc = prd_err_set(err, PRD_EINVAL, "kubeconfig %s: %s.exec.command is missing",
				 e->file->path, what);
		goto done;
	}
	if(mode && strcmp(mode, "Always") == 0) {
		rc = prd_err_set(err, PRD_EUNSUPPORTED,
				 "kubeconfig %s: %s.exec.interactiveMode Always needs a terminal, "
				 "which a controller does not have", e->file->path, what);
		goto done;
	}
	x->api_version = str_dup(api);
	/* A command with a '/' is a path relative to the kubeconfig's
	 * directory; a bare name is looked up in PATH (client-go's rule). */
	x->command = strchr(cmd, '/') ? resolve_path(e->file, cmd) : str_dup(cmd);
	x->install_hint = str_dup(jstr(ex, "installHint"));
	x->timeout_ms = 60000;
	if(json_object_object_get_ex(ex, "provideClusterInfo", &pci))
		x->provide_cluster_info = json_object_get_boolean(pci);
	if(!x->api_version || !x->command) {
		rc = prd_err_set(err, PRD_ENOMEM, "out of memory");
		goto done;
	}
	rc = load_exec_args(x, ex, e, what, err);
	if(!rc)
		rc = load_exec_env(x, ex, e, what, err);
	if(rc)
		goto done;
	cfg->exec = x;
	x = NULL;
done:
	exec_free(x);
	return rc;
}

static int load_user(kube_config *cfg, const kc_entry *e, const char *name, prd_err *err)
{
	char what[300];
	const char *tok = jstr_nonempty(e->body, "token");
	const char *tf = jstr_nonempty(e->body, "tokenFile");
	json_object *ex;
	int rc;

	snprintf(what, sizeof(what), "users[%s]", name);
	rc = load_blob(e, what, "client-certificate", "client-certificate-data", &cfg->client_cert_pem,
		       &cfg->client_cert_len, err);
	if(!rc)
		rc = load_blob(e, what, "client-key", "client-key-data", &cfg->client_key_pem,
			       &cfg->client_key_len, err);
	if(rc)
		return rc;
	if(!cfg->client_cert_pem != !cfg->client_key_pem)
		return prd_err_set(err, PRD_EINVAL,
				   "kubeconfig %s: %s: client certificate and client key must be given together",
				   e->file->path, what);
	/* A token wins over tokenFile (client-go's precedence). */
	if(tok) {
		rc = dup_field(&cfg->token, tok, err);
	} else if(tf) {
		cfg->token_file = resolve_path(e->file, tf);
		if(!cfg->token_file)
			return prd_err_set(err, PRD_ENOMEM, "out of memory");
		{
			char *data = NULL;
			size_t len;
			rc = yj_read_file(cfg->token_file, 1 << 20, &data, &len, err);
			free(data);
			if(rc)
				return prd_err_prefix(err, "kubeconfig %s: %s.tokenFile", e->file->path, what);
		}
	}
	if(!rc)
		rc = dup_field(&cfg->username, jstr_nonempty(e->body, "username"), err);
	if(!rc)
		rc = dup_field(&cfg->password, jstr(e->body, "password"), err);
	if(rc)
		return rc;
	if(json_object_object_get_ex(e->body, "exec", &ex) && ex &&
	   !json_object_is_type(ex, json_type_null)) {
		if(!json_object_is_type(ex, json_type_object))
			return prd_err_set(err, PRD_EINVAL, "kubeconfig %s: %s.exec is not a mapping",
					   e->file->path, what);
		rc = load_exec(cfg, ex, e, what, err);
	}
	if(!rc && json_object_object_get_ex(e->body, "auth-provider", &ex) && ex &&
	   !json_object_is_type(ex, json_type_null))
		rc = prd_err_set(err, PRD_EUNSUPPORTED,
				 "kubeconfig %s: %s.auth-provider is not supported (use an exec plugin)",
				 e->file->path, what);
	return rc;
}

static kube_config *config_new(void)
{
	kube_config *cfg = calloc(1, sizeof(*cfg));
	if(!cfg)
		return NULL;
	cfg->cred = kube__cred_cache_new();
	if(!cfg->cred) {
		free(cfg);
		return NULL;
	}
	return cfg;
}

/* Overwrite a secret before freeing it so it does not linger in freed
 * heap memory. */
static void free_secret(char *s, size_t n)
{
	if(!s)
		return;
	if(!n)
		n = strlen(s);
	explicit_bzero(s, n);
	free(s);
}

/* A header value may not carry a line break (it would start another
 * header) or other control characters. */
static bool header_safe(const char *v)
{
	for(; *v; v++)
		if((unsigned char)*v < 0x20 || *v == 0x7f)
			return false;
	return true;
}

/* Apply the connection and credential overrides (not context/cluster/user,
 * which choose kubeconfig entries) to a loaded configuration. */
static int apply_overrides(kube_config *cfg, const kube_config_overrides *ov, prd_err *err)
{
	int rc = 0;

	if(ov->server) {
		free(cfg->server);
		cfg->server = NULL;
		rc = set_server(cfg, ov->server, "--server", err);
		if(rc)
			return rc;
		/* The kubeconfig's name for its own server says nothing
		 * about another one. */
		free(cfg->tls_server_name);
		cfg->tls_server_name = NULL;
	}
	if(ov->insecure_skip_tls_verify) {
		cfg->insecure = true;
		free(cfg->ca_pem);
		cfg->ca_pem = NULL;
		cfg->ca_len = 0;
	}
	if(ov->token) {
		if(!*ov->token || !header_safe(ov->token))
			return prd_err_set(err, PRD_EINVAL, "--token: empty or contains control characters");
		free_secret(cfg->token, 0);
		cfg->token = NULL;
		free(cfg->token_file);
		cfg->token_file = NULL;
		free(cfg->username);
		cfg->username = NULL;
		free_secret(cfg->password, 0);
		cfg->password = NULL;
		exec_free(cfg->exec);
		cfg->exec = NULL;
		rc = dup_field(&cfg->token, ov->token, err);
		if(rc)
			return rc;
	}
	if(ov->impersonate_groups && ov->impersonate_groups[0] && !ov->impersonate_user)
		return prd_err_set(err, PRD_EINVAL, "--as-group needs --as: groups are impersonated with a user");
	if(ov->impersonate_user) {
		size_t n = 0, i;
		if(!*ov->impersonate_user || !header_safe(ov->impersonate_user))
			return prd_err_set(err, PRD_EINVAL, "--as: empty or contains control characters");
		rc = dup_field(&cfg->impersonate_user, ov->impersonate_user, err);
		if(rc)
			return rc;
		while(ov->impersonate_groups && ov->impersonate_groups[n])
			n++;
		if(n) {
			cfg->impersonate_groups = calloc(n + 1, sizeof(char *));
			if(!cfg->impersonate_groups)
				return prd_err_set(err, PRD_ENOMEM, "out of memory");
			for(i = 0; i < n; i++) {
				if(!*ov->impersonate_groups[i] || !header_safe(ov->impersonate_groups[i]))
					return prd_err_set(err, PRD_EINVAL,
							   "--as-group: empty or contains control characters");
				cfg->impersonate_groups[i] = str_dup(ov->impersonate_groups[i]);
				if(!cfg->impersonate_groups[i])
					return prd_err_set(err, PRD_ENOMEM, "out of memory");
			}
		}
	}
	return 0;
}

int kube_config_load(const char *path, const char *context, kube_config **out, prd_err *err)
{
	kube_config_overrides ov;
	memset(&ov, 0, sizeof(ov));
	ov.context = context;
	return kube_config_load_with(path, &ov, out, err);
}

/* The kubeconfig entries a load uses: the context, and the cluster and
 * user it (or --cluster/--user) names. Names and bodies are borrowed from
 * the kc_set. */
typedef struct kc_pick {
	const char *first;        /* first file's path, for messages */
	const char *ctxname, *clname, *usname, *ns;
	kc_entry ctx, cl, us;
} kc_pick;

/* Find the cluster or user `name` (`kind` "cluster" or "user", in the list
 * `list`), named by the override `flag` when `overridden`, else by the
 * context. */
static int pick_entry(const kc_set *s, const kc_pick *pk, const char *list, const char *kind, const char *name,
		      bool overridden, const char *flag, kc_entry *out, prd_err *err)
{
	int rc = kc_find(s, list, kind, name, out, err);

	if(rc == PRD_ENOTFOUND && overridden)
		rc = prd_err_set(err, PRD_ENOTFOUND, "kubeconfig %s: %s \"%s\" (%s) is not defined", pk->first,
				 kind, name, flag);
	else if(rc == PRD_ENOTFOUND)
		rc = prd_err_set(err, PRD_ENOTFOUND,
				 "kubeconfig %s: context \"%s\" names %s \"%s\", which is not defined",
				 pk->ctx.file->path, pk->ctxname, kind, name);
	return rc;
}

/* Choose the context (the override, else the first current-context) and
 * find it, its cluster and its user, overrides winning. */
static int kc_pick_entries(const kc_set *s, const kube_config_overrides *ov, kc_pick *pk, prd_err *err)
{
	int rc;

	pk->ctxname = ov->context && *ov->context ? ov->context : NULL;
	pk->first = s->n ? s->files[0].path : "(none found)";
	for(size_t i = 0; i < s->n && !pk->ctxname; i++)
		pk->ctxname = jstr_nonempty(s->files[i].doc, "current-context");
	if(!pk->ctxname && !ov->cluster && !ov->server)
		return prd_err_set(err, PRD_EINVAL,
				   "kubeconfig %s%s: no current-context is set and no context was given", pk->first,
				   s->n > 1 ? " (and the other KUBECONFIG files)" : "");
	if(pk->ctxname) {
		rc = kc_find(s, "contexts", "context", pk->ctxname, &pk->ctx, err);
		if(rc == PRD_ENOTFOUND)
			rc = prd_err_set(err, PRD_ENOTFOUND, "kubeconfig %s: context \"%s\" is not defined",
					 pk->first, pk->ctxname);
		if(rc)
			return rc;
		pk->clname = jstr_nonempty(pk->ctx.body, "cluster");
		pk->usname = jstr_nonempty(pk->ctx.body, "user");
		pk->ns = jstr_nonempty(pk->ctx.body, "namespace");
		if(!pk->clname && !ov->cluster && !ov->server)
			return prd_err_set(err, PRD_EINVAL, "kubeconfig %s: contexts[%s].cluster is missing",
					   pk->ctx.file->path, pk->ctxname);
	}
	if(ov->cluster && *ov->cluster)
		pk->clname = ov->cluster;
	if(ov->user && *ov->user)
		pk->usname = ov->user;
	rc = 0;
	if(pk->clname)
		rc = pick_entry(s, pk, "clusters", "cluster", pk->clname, pk->clname == ov->cluster, "--cluster",
				&pk->cl, err);
	if(!rc && pk->usname)
		rc = pick_entry(s, pk, "users", "user", pk->usname, pk->usname == ov->user, "--user", &pk->us,
				err);
	return rc;
}

int kube_config_load_with(const char *path, const kube_config_overrides *ovp, kube_config **out, prd_err *err)
{
	kc_set s = {0};
	kube_config *cfg = NULL;
	kube_config_overrides ov;
	kc_pick pk = {0};
	int rc;

	*out = NULL;
	if(ovp)
		ov = *ovp;
	else
		memset(&ov, 0, sizeof(ov));
	if(ov.server && !*ov.server)
		ov.server = NULL;
	rc = kc_gather(&s, path, err);
	/* kubectl --server=URL works without any kubeconfig; an explicitly
	 * named file must still exist. */
	if(rc == PRD_ENOTFOUND && ov.server && !(path && *path)) {
		prd_err_clear(err);
		rc = 0;
	}
	if(!rc)
		rc = kc_pick_entries(&s, &ov, &pk, err);
	if(rc)
		goto done;
	cfg = config_new();
	if(!cfg) {
		rc = prd_err_set(err, PRD_ENOMEM, "out of memory");
		goto done;
	}
	cfg->context = pk.ctxname ? str_dup(pk.ctxname) : NULL;
	cfg->namespace_ = str_dup(pk.ns ? pk.ns : "default");
	if((pk.ctxname && !cfg->context) || !cfg->namespace_) {
		rc = prd_err_set(err, PRD_ENOMEM, "out of memory");
		goto done;
	}
	if(pk.clname)
		rc = load_cluster(cfg, &pk.cl, pk.clname, err);
	if(!rc && pk.usname)
		rc = load_user(cfg, &pk.us, pk.usname, err);
	if(!rc)
		rc = apply_overrides(cfg, &ov, err);
	if(rc)
		goto done;
	log_debug("kubeconfig loaded", "file", pk.first, "context", cfg->context ? cfg->context : "(none)",
		  "server", cfg->server);
	*out = cfg;
	cfg = NULL;
done:
	kube_config_free(cfg);
	kc_set_free(&s);
	return rc;
}

int kube_config_in_cluster(const char *root, kube_config **out, prd_err *err)
{
	const char *host = getenv("KUBERNETES_SERVICE_HOST");
	const char *port = getenv("KUBERNETES_SERVICE_PORT");
	kube_config *cfg = NULL;
	char *p = NULL, *data = NULL;
	size_t len;
	int rc = 0;

	*out = NULL;
	if(!root)
		root = SA_ROOT;
	if(!host || !*host || !port || !*port) {
		rc = prd_err_set(err, PRD_ENOTFOUND,
				 "not running in a cluster: KUBERNETES_SERVICE_HOST and "
				 "KUBERNETES_SERVICE_PORT must be set");
		goto done;
	}
	cfg = config_new();
	if(!cfg) {
		rc = prd_err_set(err, PRD_ENOMEM, "out of memory");
		goto done;
	}
	/* An IPv6 address needs brackets in a URL. */
	cfg->server = strchr(host, ':') ? str_printf("https://[%s]:%s", host, port)
					 : str_printf("https://%s:%s", host, port);
	cfg->token_file = str_printf("%s/token", root);
	p = str_printf("%s/ca.crt", root);
	if(!cfg->server || !cfg->token_file || !p) {
		rc = prd_err_set(err, PRD_ENOMEM, "out of memory");
		goto done;
	}
	rc = yj_read_file(cfg->token_file, 1 << 20, &data, &len, err);
	if(rc) {
		prd_err_prefix(err, "in-cluster service account token");
		goto done;
	}
	free(data);
	data = NULL;
	rc = yj_read_file(p, KUBECONFIG_MAX, &cfg->ca_pem, &cfg->ca_len, err);
	if(rc) {
		prd_err_prefix(err, "in-cluster CA bundle");
		goto done;
	}
	free(p);
	p = str_printf("%s/namespace", root);
	if(!p) {
		rc = prd_err_set(err, PRD_ENOMEM, "out of memory");
		goto done;
	}
	if(yj_read_file(p, 4096, &data, &len, NULL) == 0 && *str_trim(data)) {
		cfg->namespace_ = data;
		data = NULL;
	} else {
		cfg->namespace_ = str_dup("default");
		if(!cfg->namespace_) {
			rc = prd_err_set(err, PRD_ENOMEM, "out of memory");
			goto done;
		}
	}
	*out = cfg;
	cfg = NULL;
done:
	free(p);
	free(data);
	kube_config_free(cfg);
	return rc;
}

int kube_config_auto(const char *path, const char *context, kube_config **out, prd_err *err)
{
	kube_config_overrides ov;
	memset(&ov, 0, sizeof(ov));
	ov.context = context;
	return kube_config_auto_with(path, &ov, out, err);
}

int kube_config_auto_with(const char *path, const kube_config_overrides *ov, kube_config **out, prd_err *err)
{
	const char *env = getenv("KUBECONFIG");
	const char *home = getenv("HOME");
	int rc;

	if((path && *path) || (env && *env))
		return kube_config_load_with(path, ov, out, err);
	if(home && *home) {
		char *p = str_printf("%s/.kube/config", home);
		bool exists;
		if(!p)
			return prd_err_set(err, PRD_ENOMEM, "out of memory");
		exists = access(p, F_OK) == 0;
		free(p);
		if(exists || (ov && ov->server && *ov->server))
			return kube_config_load_with(NULL, ov, out, err);
	}
	rc = kube_config_in_cluster(NULL, out, err);
	if(rc == PRD_ENOTFOUND && !(getenv("KUBERNETES_SERVICE_HOST") && *getenv("KUBERNETES_SERVICE_HOST"))) {
		/* Nothing was found anywhere: say every place looked at, not
		 * only the last. */
		return prd_err_set(err, PRD_ENOTFOUND,
				   "no cluster configuration found: no --kubeconfig, $KUBECONFIG is not set, %s%s "
				   "does not exist, and not running in a cluster (KUBERNETES_SERVICE_HOST and "
				   "KUBERNETES_SERVICE_PORT are not set)",
				   home && *home ? home : "$HOME", "/.kube/config");
	}
	if(!rc && ov) {
		rc = apply_overrides(*out, ov, err);
		if(rc) {
			kube_config_free(*out);
			*out = NULL;
		}
	}
	return rc;
}

void kube_config_free(kube_config *cfg)
{
	if(!cfg)
		return;
	free(cfg->server);
	free(cfg->context);
	free(cfg->namespace_);
	free(cfg->ca_pem);
	free(cfg->tls_server_name);
	free(cfg->client_cert_pem);
	free_secret(cfg->client_key_pem, cfg->client_key_len);
	free_secret(cfg->token, 0);
	free(cfg->token_file);
	free(cfg->username);
	free_secret(cfg->password, 0);
	exec_free(cfg->exec);
	free(cfg->impersonate_user);
	if(cfg->impersonate_groups) {
		for(size_t i = 0; cfg->impersonate_groups[i]; i++)
			free(cfg->impersonate_groups[i]);
		free(cfg->impersonate_groups);
	}
	kube__cred_cache_free(cfg->cred);
	free(cfg);
}
