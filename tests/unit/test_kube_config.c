/* kubeconfig loading, in-cluster config and rotating credentials. */
#include "testutil.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kube/client_int.h"
#include "kube/config.h"
#include "util/rfc3339.h"
#include "util/str.h"
#include "util/yamljson.h"

static kube_config *load_ok(const char *fixture, const char *ctx)
{
	kube_config *cfg = NULL;
	prd_err e = {0};
	char path[1024];
	int rc;

	str_copy(path, sizeof(path), test_srcpath(fixture));
	rc = kube_config_load(path, ctx, &cfg, &e);
	if(rc)
		fprintf(stderr, "load %s: %s\n", path, e.msg);
	CU_ASSERT_EQUAL(rc, 0);
	return cfg;
}

/* Load a fixture that must fail with `code` and a message containing every
 * NULL-terminated needle. */
static void load_fails(const char *fixture, int code, ...)
{
	kube_config *cfg = NULL;
	prd_err e = {0};
	char path[1024];
	const char *needle;
	va_list ap;
	int rc;

	str_copy(path, sizeof(path), fixture[0] == '/' ? fixture : test_srcpath(fixture));
	rc = kube_config_load(path, NULL, &cfg, &e);
	CU_ASSERT_EQUAL(rc, code);
	CU_ASSERT_PTR_NULL(cfg);
	kube_config_free(cfg);
	va_start(ap, code);
	while((needle = va_arg(ap, const char *))) {
		if(!strstr(e.msg, needle)) {
			fprintf(stderr, "message \"%s\" lacks \"%s\"\n", e.msg, needle);
			CU_FAIL("error message lacks an expected part");
		}
	}
	va_end(ap);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fputs(text, f);
	fclose(f);
}

static char *read_all(const char *path)
{
	char *d = NULL;
	size_t n;
	if(yj_read_file(path, 1 << 20, &d, &n, NULL))
		return NULL;
	return d;
}

static void test_token_context(void)
{
	kube_config *cfg = load_ok("fixtures/kubeconfig/variants.yaml", NULL);
	kube_credentials cr;
	CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
	CU_ASSERT_STRING_EQUAL(cfg->context, "token-ctx");
	/* Trailing slash dropped so paths can be appended. */
	CU_ASSERT_STRING_EQUAL(cfg->server, "https://api.example.test:6443");
	CU_ASSERT_STRING_EQUAL(cfg->namespace_, "team-a");
	/* certificate-authority is relative to the kubeconfig's directory. */
	CU_ASSERT_PTR_NOT_NULL_FATAL(cfg->ca_pem);
	CU_ASSERT_PTR_NOT_NULL(strstr(cfg->ca_pem, "RklYVFVSRS1DQQ=="));
	CU_ASSERT_EQUAL(cfg->ca_len, strlen(cfg->ca_pem));
	CU_ASSERT_FALSE(cfg->insecure);
	CU_ASSERT_STRING_EQUAL(cfg->token, "static-token");
	CU_ASSERT_EQUAL(kube_config_credentials(cfg, NULL, false, &cr, NULL), 0);
	CU_ASSERT_STRING_EQUAL(cr.bearer, "static-token");
	CU_ASSERT_PTR_NULL(cr.client_cert_pem);
	kube_credentials_clear(&cr);
	kube_config_free(cfg);
}

static void test_context_override(void)
{
	kube_config *cfg = load_ok("fixtures/kubeconfig/variants.yaml", "certdata-ctx");
	CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
	CU_ASSERT_STRING_EQUAL(cfg->context, "certdata-ctx");
	CU_ASSERT_STRING_EQUAL(cfg->namespace_, "default");
	CU_ASSERT_STRING_EQUAL(cfg->server, "https://10.1.2.3:6443");
	CU_ASSERT_STRING_EQUAL(cfg->tls_server_name, "kubernetes.internal");
	CU_ASSERT_STRING_EQUAL(cfg->ca_pem, "inline-ca-pem\n");
	CU_ASSERT_STRING_EQUAL(cfg->client_cert_pem, "inline-cert-pem\n");
	CU_ASSERT_EQUAL(cfg->client_cert_len, 16);
	CU_ASSERT_STRING_EQUAL(cfg->client_key_pem, "inline-key-pem\n");
	CU_ASSERT_PTR_NULL(cfg->token);
	kube_config_free(cfg);
}

static void test_cert_files(void)
{
	kube_config *cfg = load_ok("fixtures/kubeconfig/variants.yaml", "certfile-ctx");
	CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
	CU_ASSERT_PTR_NOT_NULL_FATAL(cfg->client_cert_pem);
	CU_ASSERT_PTR_NOT_NULL(strstr(cfg->client_cert_pem, "RklYVFVSRS1DTElFTlQ="));
	CU_ASSERT_PTR_NOT_NULL_FATAL(cfg->client_key_pem);
	CU_ASSERT_PTR_NOT_NULL(strstr(cfg->client_key_pem, "BEGIN PRIVATE KEY"));
	kube_config_free(cfg);
}

static void test_insecure_basic(void)
{
	kube_config *cfg = load_ok("fixtures/kubeconfig/variants.yaml", "basic-ctx");
	CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
	CU_ASSERT_TRUE(cfg->insecure);
	CU_ASSERT_PTR_NULL(cfg->ca_pem);
	CU_ASSERT_STRING_EQUAL(cfg->username, "admin");
	CU_ASSERT_STRING_EQUAL(cfg->password, "s3cret");
	kube_config_free(cfg);
}

static void test_token_file_rotation(void)
{
	char dir[512], kc[600], tok[600], text[1024];
	kube_config *cfg = NULL;
	kube_credentials cr;
	prd_err e;

	snprintf(dir, sizeof(dir), "%s/tokfile", test_tmpdir());
	mkdir(dir, 0700);
	snprintf(tok, sizeof(tok), "%s/sa-token", dir);
	snprintf(kc, sizeof(kc), "%s/config", dir);
	write_file(tok, "first\n");
	snprintf(text, sizeof(text),
		 "current-context: c\nclusters:\n- name: a\n  cluster: {server: 'https://x'}\n"
		 "users:\n- name: u\n  user: {tokenFile: sa-token}\n"
		 "contexts:\n- name: c\n  context: {cluster: a, user: u}\n");
	write_file(kc, text);
	CU_ASSERT_EQUAL_FATAL(kube_config_load(kc, NULL, &cfg, &e), 0);
	CU_ASSERT_STRING_EQUAL(cfg->token_file, tok);
	CU_ASSERT_EQUAL(kube_config_credentials(cfg, NULL, false, &cr, NULL), 0);
	CU_ASSERT_STRING_EQUAL(cr.bearer, "first");
	kube_credentials_clear(&cr);
	write_file(tok, "second-token\n");
	CU_ASSERT_EQUAL(kube_config_credentials(cfg, NULL, false, &cr, NULL), 0);
	CU_ASSERT_STRING_EQUAL(cr.bearer, "second-token");
	kube_credentials_clear(&cr);
	kube_config_free(cfg);

	/* The tokenFile variant from the fixtures resolves relatively. */
	cfg = load_ok("fixtures/kubeconfig/variants.yaml", "tokenfile-ctx");
	CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
	CU_ASSERT_EQUAL(kube_config_credentials(cfg, NULL, false, &cr, NULL), 0);
	CU_ASSERT_STRING_EQUAL(cr.bearer, "file-token-1");
	kube_credentials_clear(&cr);
	kube_config_free(cfg);
}

static void test_kubeconfig_list_merge(void)
{
	char list[3000], m1[1024], m2[1024];
	kube_config *cfg = NULL;
	prd_err e = {0};

	str_copy(m1, sizeof(m1), test_srcpath("fixtures/kubeconfig/merge1.yaml"));
	str_copy(m2, sizeof(m2), test_srcpath("fixtures/kubeconfig/merge2.yaml"));
	/* A missing file in the middle is skipped, like kubectl does. */
	snprintf(list, sizeof(list), "%s:%s/missing.yaml:%s", m1, test_tmpdir(), m2);
	setenv("KUBECONFIG", list, 1);
	CU_ASSERT_EQUAL(kube_config_load(NULL, NULL, &cfg, &e), 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
	/* First file's current-context and its definition of "shared" win. */
	CU_ASSERT_STRING_EQUAL(cfg->context, "first-ctx");
	CU_ASSERT_STRING_EQUAL(cfg->server, "https://first.example.test");
	/* The user comes from the second file. */
	CU_ASSERT_STRING_EQUAL(cfg->token, "token-from-second");
	kube_config_free(cfg);
	cfg = NULL;
	CU_ASSERT_EQUAL(kube_config_load(NULL, "second-ctx", &cfg, &e), 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
	CU_ASSERT_STRING_EQUAL(cfg->server, "https://second-only.example.test");
	kube_config_free(cfg);
	cfg = NULL;
	/* Reversed order: the second file's choices win now. */
	snprintf(list, sizeof(list), "%s:%s", m2, m1);
	setenv("KUBECONFIG", list, 1);
	CU_ASSERT_EQUAL(kube_config_load(NULL, NULL, &cfg, &e), 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
	CU_ASSERT_STRING_EQUAL(cfg->context, "second-ctx");
	kube_config_free(cfg);
	cfg = NULL;
	snprintf(list, sizeof(list), "%s/nope1:%s/nope2", test_tmpdir(), test_tmpdir());
	setenv("KUBECONFIG", list, 1);
	CU_ASSERT_EQUAL(kube_config_load(NULL, NULL, &cfg, &e), PRD_ENOTFOUND);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "no file of KUBECONFIG"));
	unsetenv("KUBECONFIG");
}

static void test_broken(void)
{
	char missing[600];
	snprintf(missing, sizeof(missing), "%s/nonexistent-kubeconfig", test_tmpdir());
	load_fails(missing, PRD_ENOTFOUND, "nonexistent-kubeconfig", "no such file", NULL);
	load_fails("fixtures/kubeconfig/bad-yaml.yaml", PRD_EINVAL, "bad-yaml.yaml", "invalid YAML",
		   "line ", "column ", NULL);
	load_fails("fixtures/kubeconfig/no-current.yaml", PRD_EINVAL, "no-current.yaml",
		   "no current-context", NULL);
	load_fails("fixtures/kubeconfig/missing-cluster.yaml", PRD_ENOTFOUND,
		   "names cluster \"nowhere\", which is not defined", NULL);
	load_fails("fixtures/kubeconfig/missing-user.yaml", PRD_ENOTFOUND,
		   "names user \"nobody\", which is not defined", NULL);
	load_fails("fixtures/kubeconfig/missing-ca.yaml", PRD_ENOTFOUND, "missing-ca.yaml",
		   "clusters[a].certificate-authority", "does-not-exist.crt", NULL);
	load_fails("fixtures/kubeconfig/bad-base64.yaml", PRD_EINVAL,
		   "users[u].client-certificate-data: invalid base64", NULL);
}

static void test_unknown_context_and_dir_ca(void)
{
	char dir[512], kc[600];
	kube_config *cfg = NULL;
	prd_err e = {0};
	int rc;

	rc = kube_config_load(test_srcpath("fixtures/kubeconfig/variants.yaml"), "nope", &cfg, &e);
	CU_ASSERT_EQUAL(rc, PRD_ENOTFOUND);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "context \"nope\" is not defined"));
	/* A CA "file" that cannot be read as a file. */
	snprintf(dir, sizeof(dir), "%s/cadir", test_tmpdir());
	mkdir(dir, 0700);
	snprintf(kc, sizeof(kc), "%s/config", dir);
	write_file(kc, "current-context: c\nclusters:\n- name: a\n  cluster:\n"
		       "    server: https://x\n    certificate-authority: .\n"
		       "contexts:\n- name: c\n  context: {cluster: a}\n");
	rc = kube_config_load(kc, NULL, &cfg, &e);
	CU_ASSERT_EQUAL(rc, PRD_EIO);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "certificate-authority"));
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "not a regular file"));
	CU_ASSERT_PTR_NULL(cfg);
}

static void test_base64(void)
{
	char *o = NULL, *enc = NULL;
	size_t n = 0;
	CU_ASSERT_EQUAL(kube__base64_decode("aGVsbG8=", 8, &o, &n), 0);
	CU_ASSERT_EQUAL(n, 5);
	CU_ASSERT_STRING_EQUAL(o, "hello");
	free(o);
	CU_ASSERT_EQUAL(kube__base64_decode("aGVs\nbG8h", 9, &o, &n), 0);
	CU_ASSERT_STRING_EQUAL(o, "hello!");
	free(o);
	CU_ASSERT_EQUAL(kube__base64_decode("aGVsbG8", 7, &o, &n), 0); /* unpadded */
	CU_ASSERT_STRING_EQUAL(o, "hello");
	free(o);
	CU_ASSERT_EQUAL(kube__base64_decode("aGV=sbG8", 8, &o, &n), PRD_EINVAL);
	CU_ASSERT_EQUAL(kube__base64_decode("a", 1, &o, &n), PRD_EINVAL);
	CU_ASSERT_EQUAL(kube__base64_decode("aGVsbG8===", 10, &o, &n), PRD_EINVAL);
	CU_ASSERT_EQUAL(kube__base64_encode("hello", 5, &enc), 0);
	CU_ASSERT_STRING_EQUAL(enc, "aGVsbG8=");
	free(enc);
}

/* Set up an exec-plugin kubeconfig in a fresh directory. Returns its path. */
static void exec_setup(char *dir, size_t dn, char *kc, size_t kn, const char *extra_env)
{
	char script[700], text[4096], *src;
	static int seq;

	snprintf(dir, dn, "%s/exec%d", test_tmpdir(), ++seq);
	mkdir(dir, 0700);
	snprintf(script, sizeof(script), "%s/exec-plugin.sh", dir);
	src = read_all(test_srcpath("fixtures/kubeconfig/exec-plugin.sh"));
	CU_ASSERT_PTR_NOT_NULL_FATAL(src);
	write_file(script, src);
	free(src);
	CU_ASSERT_EQUAL(chmod(script, 0755), 0);
	snprintf(kc, kn, "%s/config", dir);
	snprintf(text, sizeof(text),
		 "current-context: c\n"
		 "clusters:\n- name: a\n  cluster: {server: 'https://exec.example.test:6443'}\n"
		 "users:\n- name: u\n  user:\n    exec:\n"
		 "      apiVersion: client.authentication.k8s.io/v1\n"
		 "      command: ./exec-plugin.sh\n"
		 "      interactiveMode: Never\n"
		 "      provideClusterInfo: true\n"
		 "      args: ['$(touch %s/pwned)', 'two words; echo x', '*', '`id`']\n"
		 "      env:\n"
		 "      - {name: PLUGIN_DIR, value: '%s'}\n"
		 "      - {name: PLUGIN_EXPIRY, value: '2030-01-01T00:00:00Z'}\n"
		 "%s"
		 "contexts:\n- name: c\n  context: {cluster: a, user: u}\n",
		 dir, dir, extra_env ? extra_env : "");
	write_file(kc, text);
}

static void test_exec_plugin(void)
{
	char dir[512], kc[600], p[700], *args, *info;
	kube_config *cfg = NULL;
	kube_credentials cr;
	prd_err e = {0};
	clk fc;
	int64_t t;

	exec_setup(dir, sizeof(dir), kc, sizeof(kc), NULL);
	CU_ASSERT_EQUAL_FATAL(kube_config_load(kc, NULL, &cfg, &e), 0);
	snprintf(p, sizeof(p), "%s/exec-plugin.sh", dir);
	CU_ASSERT_STRING_EQUAL(cfg->exec->command, p);
	CU_ASSERT_EQUAL(kube_config_exec_runs(cfg), 0);

	CU_ASSERT_EQUAL(rfc3339_parse("2029-12-31T23:00:00Z", &t, NULL), 0);
	clk_fake_init(&fc, t);
	CU_ASSERT_EQUAL(kube_config_credentials(cfg, &fc, false, &cr, &e), 0);
	CU_ASSERT_STRING_EQUAL(cr.bearer, "exec-token-1");
	kube_credentials_clear(&cr);
	/* Cached until it expires. */
	clk_fake_advance(&fc, 30 * 60 * PRD_NS_PER_SEC);
	CU_ASSERT_EQUAL(kube_config_credentials(cfg, &fc, false, &cr, &e), 0);
	CU_ASSERT_STRING_EQUAL(cr.bearer, "exec-token-1");
	kube_credentials_clear(&cr);
	CU_ASSERT_EQUAL(kube_config_exec_runs(cfg), 1);
	/* Past expirationTimestamp: the plugin runs again. */
	clk_fake_advance(&fc, 31 * 60 * PRD_NS_PER_SEC);
	CU_ASSERT_EQUAL(kube_config_credentials(cfg, &fc, false, &cr, &e), 0);
	CU_ASSERT_STRING_EQUAL(cr.bearer, "exec-token-2");
	kube_credentials_clear(&cr);
	CU_ASSERT_EQUAL(kube_config_exec_runs(cfg), 2);
	/* force (after a 401) runs it even though the token is not expired
	 * by the clock (the fake clock went back). */
	clk_fake_set(&fc, t);
	CU_ASSERT_EQUAL(kube_config_credentials(cfg, &fc, true, &cr, &e), 0);
	CU_ASSERT_STRING_EQUAL(cr.bearer, "exec-token-3");
	kube_credentials_clear(&cr);

	/* Arguments arrive verbatim: no shell ever saw them. */
	snprintf(p, sizeof(p), "%s/args", dir);
	args = read_all(p);
	CU_ASSERT_PTR_NOT_NULL_FATAL(args);
	{
		char want[1024];
		snprintf(want, sizeof(want), "$(touch %s/pwned)\ntwo words; echo x\n*\n`id`\n", dir);
		CU_ASSERT_STRING_EQUAL(args, want);
	}
	free(args);
	snprintf(p, sizeof(p), "%s/pwned", dir);
	CU_ASSERT_NOT_EQUAL(access(p, F_OK), 0);
	/* The ExecCredential request, with cluster info as asked. */
	snprintf(p, sizeof(p), "%s/info", dir);
	info = read_all(p);
	CU_ASSERT_PTR_NOT_NULL_FATAL(info);
	CU_ASSERT_PTR_NOT_NULL(strstr(info, "\"kind\":\"ExecCredential\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(info, "\"apiVersion\":\"client.authentication.k8s.io\\/v1\"") ||
			       strstr(info, "\"apiVersion\":\"client.authentication.k8s.io/v1\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(info, "\"interactive\":false"));
	CU_ASSERT_PTR_NOT_NULL(strstr(info, "exec.example.test:6443"));
	free(info);
	kube_config_free(cfg);
}

static void test_exec_failures(void)
{
	char dir[512], kc[600];
	kube_config *cfg = NULL;
	kube_credentials cr;
	prd_err e = {0};
	int rc;

	exec_setup(dir, sizeof(dir), kc, sizeof(kc), "      - {name: PLUGIN_FAIL, value: '1'}\n");
	CU_ASSERT_EQUAL_FATAL(kube_config_load(kc, NULL, &cfg, &e), 0);
	rc = kube_config_credentials(cfg, NULL, false, &cr, &e);
	CU_ASSERT_EQUAL(rc, PRD_EIO);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "exited with status 3"));
	CU_ASSERT_PTR_NULL(cr.bearer);
	kube_config_free(cfg);

	/* A command that does not exist. */
	{
		char text[1024];
		snprintf(kc, sizeof(kc), "%s/config-missing", dir);
		snprintf(text, sizeof(text),
			 "current-context: c\nclusters:\n- name: a\n  cluster: {server: 'https://x'}\n"
			 "users:\n- name: u\n  user:\n    exec:\n"
			 "      apiVersion: client.authentication.k8s.io/v1beta1\n"
			 "      command: provreqd-no-such-plugin\n"
			 "      installHint: install the plugin\n"
			 "contexts:\n- name: c\n  context: {cluster: a, user: u}\n");
		write_file(kc, text);
		CU_ASSERT_EQUAL_FATAL(kube_config_load(kc, NULL, &cfg, &e), 0);
		rc = kube_config_credentials(cfg, NULL, false, &cr, &e);
		CU_ASSERT_NOT_EQUAL(rc, 0);
		CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "provreqd-no-such-plugin"));
		CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "install the plugin"));
		kube_config_free(cfg);
	}
	/* Unsupported protocol version. */
	{
		char text[1024];
		snprintf(text, sizeof(text),
			 "current-context: c\nclusters:\n- name: a\n  cluster: {server: 'https://x'}\n"
			 "users:\n- name: u\n  user:\n    exec:\n"
			 "      apiVersion: client.authentication.k8s.io/v1alpha1\n"
			 "      command: whatever\n"
			 "contexts:\n- name: c\n  context: {cluster: a, user: u}\n");
		write_file(kc, text);
		cfg = NULL;
		rc = kube_config_load(kc, NULL, &cfg, &e);
		CU_ASSERT_EQUAL(rc, PRD_EUNSUPPORTED);
		CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "v1alpha1 is not supported"));
		CU_ASSERT_PTR_NULL(cfg);
	}
}

static void test_in_cluster(void)
{
	char root[512], p[700];
	kube_config *cfg = NULL;
	kube_credentials cr;
	prd_err e = {0};

	snprintf(root, sizeof(root), "%s/sa", test_tmpdir());
	mkdir(root, 0700);
	unsetenv("KUBERNETES_SERVICE_HOST");
	CU_ASSERT_EQUAL(kube_config_in_cluster(root, &cfg, &e), PRD_ENOTFOUND);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "KUBERNETES_SERVICE_HOST"));
	setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
	setenv("KUBERNETES_SERVICE_PORT", "443", 1);
	/* No token yet. */
	CU_ASSERT_EQUAL(kube_config_in_cluster(root, &cfg, &e), PRD_ENOTFOUND);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "token"));
	snprintf(p, sizeof(p), "%s/token", root);
	write_file(p, "sa-token-one");
	snprintf(p, sizeof(p), "%s/ca.crt", root);
	write_file(p, "CLUSTER CA\n");
	snprintf(p, sizeof(p), "%s/namespace", root);
	write_file(p, "kube-system\n");
	CU_ASSERT_EQUAL_FATAL(kube_config_in_cluster(root, &cfg, &e), 0);
	CU_ASSERT_STRING_EQUAL(cfg->server, "https://10.96.0.1:443");
	CU_ASSERT_STRING_EQUAL(cfg->namespace_, "kube-system");
	CU_ASSERT_STRING_EQUAL(cfg->ca_pem, "CLUSTER CA\n");
	CU_ASSERT_PTR_NULL(cfg->context);
	CU_ASSERT_EQUAL(kube_config_credentials(cfg, NULL, false, &cr, &e), 0);
	CU_ASSERT_STRING_EQUAL(cr.bearer, "sa-token-one");
	kube_credentials_clear(&cr);
	/* kubelet rotates the token: the next request uses the new one. */
	snprintf(p, sizeof(p), "%s/token.new", root);
	write_file(p, "sa-token-two-rotated");
	{
		char t[700];
		snprintf(t, sizeof(t), "%s/token", root);
		CU_ASSERT_EQUAL(rename(p, t), 0);
	}
	CU_ASSERT_EQUAL(kube_config_credentials(cfg, NULL, false, &cr, &e), 0);
	CU_ASSERT_STRING_EQUAL(cr.bearer, "sa-token-two-rotated");
	kube_credentials_clear(&cr);
	kube_config_free(cfg);
	cfg = NULL;

	setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
	CU_ASSERT_EQUAL_FATAL(kube_config_in_cluster(root, &cfg, &e), 0);
	CU_ASSERT_STRING_EQUAL(cfg->server, "https://[fd00::1]:443");
	kube_config_free(cfg);
	cfg = NULL;

	/* kube_config_auto falls back to in-cluster when nothing else exists. */
	unsetenv("KUBECONFIG");
	setenv("HOME", root, 1);
	setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
	CU_ASSERT_NOT_EQUAL(kube_config_auto(NULL, NULL, &cfg, &e), 0); /* default root absent */
	kube_config_free(cfg);
	cfg = NULL;
	unsetenv("KUBERNETES_SERVICE_HOST");
	unsetenv("KUBERNETES_SERVICE_PORT");
	/* Nothing anywhere: the error names every place looked at (it once
	 * named only the in-cluster variables). */
	CU_ASSERT_EQUAL(kube_config_auto(NULL, NULL, &cfg, &e), PRD_ENOTFOUND);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "no --kubeconfig"));
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "$KUBECONFIG is not set"));
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "/.kube/config does not exist"));
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "KUBERNETES_SERVICE_HOST"));
	kube_config_free(cfg);
}


/* kubectl's global flags: --cluster/--user pick entries other than the
 * context's, --server/--token/--insecure-skip-tls-verify replace what the
 * kubeconfig says, --as/--as-group set impersonation; --server works
 * without any kubeconfig file. */
static void test_overrides(void)
{
	char kc[1024], none[1024];
	kube_config *cfg = NULL;
	kube_config_overrides ov;
	const char *groups[] = { "team-a", "system:authenticated", NULL };
	const char *bad_groups[] = { "ok", "evil\r\nX-Injected: 1", NULL };
	prd_err e = {0};

	snprintf(kc, sizeof(kc), "%s/ov.yaml", test_tmpdir());
	write_file(kc, "current-context: main\n"
		       "clusters:\n"
		       "- name: prod\n  cluster: {server: 'https://prod.example.test:6443', "
		       "certificate-authority-data: 'Q0EK', tls-server-name: prod-name}\n"
		       "- name: staging\n  cluster: {server: 'https://staging.example.test'}\n"
		       "users:\n"
		       "- name: alice\n  user: {token: alice-token}\n"
		       "- name: bob\n  user: {username: bob, password: pw}\n"
		       "contexts:\n"
		       "- name: main\n  context: {cluster: prod, user: alice, namespace: team-a}\n");

	/* --cluster and --user pick other entries; the context's namespace stays */
	memset(&ov, 0, sizeof(ov));
	ov.cluster = "staging";
	ov.user = "bob";
	CU_ASSERT_EQUAL_FATAL(kube_config_load_with(kc, &ov, &cfg, &e), 0);
	CU_ASSERT_STRING_EQUAL(cfg->server, "https://staging.example.test");
	CU_ASSERT_STRING_EQUAL(cfg->username, "bob");
	CU_ASSERT_PTR_NULL(cfg->token);
	CU_ASSERT_STRING_EQUAL(cfg->namespace_, "team-a");
	kube_config_free(cfg);
	cfg = NULL;

	/* --server, --token, --insecure-skip-tls-verify, --as, --as-group */
	memset(&ov, 0, sizeof(ov));
	ov.user = "bob";
	ov.server = "https://other.example.test:8443/";
	ov.token = "flag-token";
	ov.insecure_skip_tls_verify = true;
	ov.impersonate_user = "jane";
	ov.impersonate_groups = groups;
	CU_ASSERT_EQUAL_FATAL(kube_config_load_with(kc, &ov, &cfg, &e), 0);
	CU_ASSERT_STRING_EQUAL(cfg->server, "https://other.example.test:8443");
	CU_ASSERT_PTR_NULL(cfg->tls_server_name); /* it named the old server */
	CU_ASSERT_TRUE(cfg->insecure);
	CU_ASSERT_PTR_NULL(cfg->ca_pem);
	CU_ASSERT_STRING_EQUAL(cfg->token, "flag-token");
	CU_ASSERT_PTR_NULL(cfg->username); /* a token replaces basic auth */
	CU_ASSERT_PTR_NULL(cfg->password);
	CU_ASSERT_STRING_EQUAL(cfg->impersonate_user, "jane");
	CU_ASSERT_PTR_NOT_NULL_FATAL(cfg->impersonate_groups);
	CU_ASSERT_STRING_EQUAL(cfg->impersonate_groups[0], "team-a");
	CU_ASSERT_STRING_EQUAL(cfg->impersonate_groups[1], "system:authenticated");
	CU_ASSERT_PTR_NULL(cfg->impersonate_groups[2]);
	kube_config_free(cfg);
	cfg = NULL;

	/* Without overrides nothing changes (and nothing is impersonated). */
	CU_ASSERT_EQUAL_FATAL(kube_config_load_with(kc, NULL, &cfg, &e), 0);
	CU_ASSERT_STRING_EQUAL(cfg->server, "https://prod.example.test:6443");
	CU_ASSERT_STRING_EQUAL(cfg->tls_server_name, "prod-name");
	CU_ASSERT_STRING_EQUAL(cfg->token, "alice-token");
	CU_ASSERT_PTR_NULL(cfg->impersonate_user);
	kube_config_free(cfg);
	cfg = NULL;

	/* Refusals name the flag. */
	memset(&ov, 0, sizeof(ov));
	ov.cluster = "nope";
	CU_ASSERT_EQUAL(kube_config_load_with(kc, &ov, &cfg, &e), PRD_ENOTFOUND);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "cluster \"nope\" (--cluster) is not defined"));
	memset(&ov, 0, sizeof(ov));
	ov.user = "nope";
	CU_ASSERT_EQUAL(kube_config_load_with(kc, &ov, &cfg, &e), PRD_ENOTFOUND);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "user \"nope\" (--user) is not defined"));
	memset(&ov, 0, sizeof(ov));
	ov.server = "ftp://x";
	CU_ASSERT_EQUAL(kube_config_load_with(kc, &ov, &cfg, &e), PRD_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "--server"));
	memset(&ov, 0, sizeof(ov));
	ov.impersonate_groups = groups;
	CU_ASSERT_EQUAL(kube_config_load_with(kc, &ov, &cfg, &e), PRD_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "--as-group needs --as"));
	ov.impersonate_user = "jane";
	ov.impersonate_groups = bad_groups;
	CU_ASSERT_EQUAL(kube_config_load_with(kc, &ov, &cfg, &e), PRD_EINVAL);
	CU_ASSERT_PTR_NULL(cfg);

	/* --server alone, no kubeconfig anywhere: like kubectl, that is enough. */
	snprintf(none, sizeof(none), "%s/no-such-kubeconfig", test_tmpdir());
	setenv("KUBECONFIG", none, 1);
	memset(&ov, 0, sizeof(ov));
	ov.server = "http://127.0.0.1:1";
	ov.token = "t";
	CU_ASSERT_EQUAL_FATAL(kube_config_auto_with(NULL, &ov, &cfg, &e), 0);
	CU_ASSERT_STRING_EQUAL(cfg->server, "http://127.0.0.1:1");
	CU_ASSERT_STRING_EQUAL(cfg->namespace_, "default");
	CU_ASSERT_STRING_EQUAL(cfg->token, "t");
	kube_config_free(cfg);
	cfg = NULL;
	/* ... but a file named explicitly must exist */
	CU_ASSERT_EQUAL(kube_config_load_with(none, &ov, &cfg, &e), PRD_ENOTFOUND);
	/* and without --server a missing kubeconfig is still an error */
	ov.server = NULL;
	CU_ASSERT_NOT_EQUAL(kube_config_load_with(NULL, &ov, &cfg, &e), 0);
	CU_ASSERT_PTR_NULL(cfg);
	unsetenv("KUBECONFIG");
}

static const test_case cases[] = {
	{"token context, CA file relative to the kubeconfig", test_token_context},
	{"--context override, inline CA/cert/key data, tls-server-name", test_context_override},
	{"client certificate and key files", test_cert_files},
	{"insecure-skip-tls-verify and basic auth", test_insecure_basic},
	{"tokenFile is re-read when it changes", test_token_file_rotation},
	{"KUBECONFIG list merge, first wins", test_kubeconfig_list_merge},
	{"broken kubeconfigs give clear errors", test_broken},
	{"unknown context, CA path that is a directory", test_unknown_context_and_dir_ca},
	{"base64", test_base64},
	{"exec plugin: no shell, expiry re-runs it", test_exec_plugin},
	{"exec plugin failures", test_exec_failures},
	{"in-cluster config from a service-account directory", test_in_cluster},
	{"overrides: --cluster/--user/--server/--token/--insecure/--as", test_overrides},
	{NULL, NULL}
};

TEST_MAIN("kube_config", cases)
