/* The management cluster: where the Cluster API objects live when that is
 * not the cluster provreqd itself runs against (see docs/drivers.md, "A
 * separate management cluster").
 *
 * Config keys (all optional; none of them: the objects are in provreqd's
 * own cluster, read through the host's client):
 *   managementKubeconfig  a kubeconfig file (typically a Secret mounted
 *                         into provreqd's pod) for the management cluster
 *   managementContext     the context to use in it (default current-context)
 *   managementInCluster   true: the pod's own service account (provreqd runs
 *                         in the management cluster and its --kubeconfig
 *                         points at the workload cluster)
 *
 * The driver builds its own API client from it with provreqd's kube client
 * sources compiled into the module (TLS, client certificates, bearer and
 * rotating token files, exec credential plugins such as
 * `aws eks get-token`). Requests go out through a prd_cloud_host of the
 * driver's own whose kube_request is that client, so every other file
 * of the driver reads and writes Cluster API objects the same way whichever
 * cluster holds them (capi_request), and Nodes through the host
 * (capi_wrequest).
 *
 * A management kubeconfig that cannot be read or used is not a reason to
 * stop provreqd: the driver loads, each call that needs the management
 * cluster fails with a message naming the file and what is wrong with it,
 * and the next call loads the file again (a Secret mounted late, or fixed,
 * is picked up without a restart). */
#include "clusterapi/clusterapi.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/client.h"
#include "kube/config.h"
#include "ops/log.h"
#include "util/buf.h"

struct capi_mgmt {
	char *kubeconfig;        /* managementKubeconfig, or NULL */
	char *context;           /* managementContext, or NULL */
	bool in_cluster;         /* managementInCluster */
	const prd_cloud_host *outer; /* the host provreqd gave the driver */
	prd_cloud_host host;     /* the same services, requests to kc */
	kube_config *cfg;        /* loaded on first use (owned) */
	kube_client *kc;         /* (owned) */
	char where[600];         /* "the management cluster (managementKubeconfig F)" */
};

/* ---- the kube client's log lines, through the host ------------------ */

/* The kube client sources compiled into this module log through log_kv.
 * The module has no logger of its own (provreqd's is in the daemon, out of
 * reach of a driver): these lines go to the host's log, attributed to the
 * driver. One host at a time, as one driver state at a time is loaded. */
static pthread_mutex_t bridge_mu = PTHREAD_MUTEX_INITIALIZER;
static const prd_cloud_host *bridge_host;

static void bridge_set(const prd_cloud_host *h)
{
	pthread_mutex_lock(&bridge_mu);
	bridge_host = h;
	pthread_mutex_unlock(&bridge_mu);
}

bool log_enabled(int level)
{
	return level <= PRD_LOG_DEBUG;
}

const char *log__int(char *b, long long v)
{
	snprintf(b, 24, "%c%lld", LOG__NUM, v);
	return b;
}

static bool secret_key(const char *k)
{
	static const char *const words[] = {"token", "password", "secret", "authorization", "key-data", "bearer", NULL};
	size_t i;
	for(i = 0; words[i]; i++)
		if(strstr(k, words[i]))
			return true;
	return false;
}

void log_kv(int level, const char *msg, ...)
{
	char line[1024];
	size_t o;
	const char *k, *v;
	va_list ap;
	int lv = level <= PRD_LOG_ERROR ? PRD_CLOUD_LOG_ERROR
		 : level == PRD_LOG_WARN ? PRD_CLOUD_LOG_WARN
		 : level == PRD_LOG_INFO ? PRD_CLOUD_LOG_INFO
					 : PRD_CLOUD_LOG_DEBUG;
	snprintf(line, sizeof(line), "clusterapi: management cluster: %s", msg);
	o = strlen(line);
	va_start(ap, msg);
	while((k = va_arg(ap, const char *)) != NULL) {
		v = va_arg(ap, const char *);
		if(v && v[0] == LOG__NUM)
			v++;
		if(o < sizeof(line))
			o += (size_t)snprintf(line + o, sizeof(line) - o, " %s=%s", k,
					      secret_key(k) ? "<redacted>" : v ? v : "<nil>");
	}
	va_end(ap);
	pthread_mutex_lock(&bridge_mu);
	if(bridge_host && bridge_host->log)
		bridge_host->log(bridge_host->ctx, lv, line);
	pthread_mutex_unlock(&bridge_mu);
}

/* ---- the management host -------------------------------------------- */

static int code_of(long http, int rc)
{
	if(http == 404)
		return PRD_CLOUD_ENOTFOUND;
	if(http == 409)
		return PRD_CLOUD_ECONFLICT;
	if(http == 400 || http == 422)
		return PRD_CLOUD_EINVAL;
	if(http == 429 || http >= 500)
		return PRD_CLOUD_EAGAIN;
	if(http)
		return PRD_CLOUD_EIO;
	switch(rc) {
	case PRD_ENOMEM:
		return PRD_CLOUD_ENOMEM;
	case PRD_EAGAIN:
	case PRD_ETIMEDOUT:
		return PRD_CLOUD_EAGAIN;
	default:
		return PRD_CLOUD_EIO;
	}
}

/* Load the kubeconfig and build the client unless that is done. */
static int mgmt_connect(capi_mgmt *mg, prd_cloud_error *err)
{
	kube_client_opts o;
	prd_err e = {0};
	int rc;
	if(mg->kc)
		return 0;
	kube_config_free(mg->cfg);
	mg->cfg = NULL;
	rc = mg->in_cluster ? kube_config_in_cluster(NULL, &mg->cfg, &e)
			    : kube_config_load(mg->kubeconfig, mg->context, &mg->cfg, &e);
	if(!rc) {
		memset(&o, 0, sizeof(o));
		/* A pass waits on these calls: an unreachable management
		 * cluster must cost seconds, not the client's minutes. */
		o.connect_timeout_ms = 5000;
		o.request_timeout_ms = 20000;
		o.max_retries = 1;
		o.user_agent = "provreqd-clusterapi";
		o.field_manager = "provreqd";
		rc = kube_client_new(mg->cfg, &o, &mg->kc, &e);
	}
	if(rc) {
		kube_config_free(mg->cfg);
		mg->cfg = NULL;
		return capi_fail(err, rc == PRD_ENOMEM ? PRD_CLOUD_ENOMEM : PRD_CLOUD_EIO,
				 "clusterapi: %s cannot be used (Machines, MachineDeployments and their templates are read there; "
				 "nothing was changed, and the file is read again at the next call): %s",
				 mg->where, e.msg);
	}
	return 0;
}

static int mgmt_request(void *ctx, const char *method, const char *path, const char *content_type,
			const char *body, size_t body_len, long *http_status, char **resp_body, size_t *resp_len,
			prd_cloud_error *err)
{
	capi_mgmt *mg = ctx;
	kube_status st;
	prd_err e = {0};
	int rc;
	*http_status = 0;
	*resp_body = NULL;
	*resp_len = 0;
	rc = mgmt_connect(mg, err);
	if(rc)
		return rc;
	memset(&st, 0, sizeof(st));
	rc = kube_request_bytes(mg->kc, method, path, content_type, body, body_len, resp_body, resp_len, &st, &e);
	*http_status = st.http_code ? st.http_code : (rc ? 0 : 200);
	if(rc) {
		free(*resp_body);
		*resp_body = NULL;
		/* e.msg names the verb and path already, and drv_request adds
		 * them again: say only which cluster answered. */
		return capi_fail(err, code_of(st.http_code, rc), "in %s: %s", mg->where, e.msg[0] ? e.msg : "failed");
	}
	if(!*resp_body && !(*resp_body = calloc(1, 1)))
		return capi_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	return 0;
}

static void mgmt_free_mem(void *ctx, void *p)
{
	(void)ctx;
	free(p);
}

static void mgmt_log(void *ctx, int level, const char *message)
{
	capi_mgmt *mg = ctx;
	mg->outer->log(mg->outer->ctx, level, message);
}

static int64_t mgmt_now(void *ctx)
{
	capi_mgmt *mg = ctx;
	return mg->outer->now_ns(mg->outer->ctx);
}

static int mgmt_may_act(void *ctx)
{
	capi_mgmt *mg = ctx;
	return mg->outer->may_act(mg->outer->ctx);
}

/* ---- configuration --------------------------------------------------- */

int capi_mgmt_config(capi *c, const char *key, json_object *v, prd_cloud_error *err)
{
	capi_mgmt *mg = c->mgmt;
	const char *s = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
	if(!mg && !(mg = c->mgmt = calloc(1, sizeof(*mg))))
		return capi_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	if(!strcmp(key, "managementInCluster")) {
		if(!json_object_is_type(v, json_type_boolean))
			return capi_fail(err, PRD_CLOUD_EINVAL, "clusterapi config: managementInCluster must be true or "
								"false, got '%s'",
					 json_object_get_string(v));
		mg->in_cluster = json_object_get_boolean(v);
		return 0;
	}
	if(!s || !s[0] || strlen(s) > 4096)
		return capi_fail(err, PRD_CLOUD_EINVAL, "clusterapi config: %s must be a non-empty string, got '%s'", key,
				 json_object_get_string(v));
	if(!strcmp(key, "managementKubeconfig")) {
		free(mg->kubeconfig);
		if(!(mg->kubeconfig = capi_strdup(s)))
			return capi_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
		return 0;
	}
	free(mg->context);
	if(!(mg->context = capi_strdup(s)))
		return capi_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	return 0;
}

int capi_mgmt_init(capi *c, prd_cloud_error *err)
{
	capi_mgmt *mg = c->mgmt;
	c->api = c->host;
	if(!mg)
		return 0;
	if(mg->in_cluster && mg->kubeconfig)
		return capi_fail(err, PRD_CLOUD_EINVAL,
				 "clusterapi config: managementKubeconfig and managementInCluster: true exclude each other");
	if(mg->context && !mg->kubeconfig)
		return capi_fail(err, PRD_CLOUD_EINVAL, "clusterapi config: managementContext needs managementKubeconfig");
	if(!mg->kubeconfig && !mg->in_cluster) {
		free(mg);
		c->mgmt = NULL;
		return 0;
	}
	if(mg->in_cluster)
		snprintf(mg->where, sizeof(mg->where), "the management cluster (managementInCluster: the "
						       "pod's service account)");
	else
		snprintf(mg->where, sizeof(mg->where), "the management cluster (managementKubeconfig %s%s%s)",
			 mg->kubeconfig, mg->context ? ", context " : "", mg->context ? mg->context : "");
	mg->outer = c->host;
	mg->host = *c->host;
	mg->host.ctx = mg;
	mg->host.kube_request = mgmt_request;
	mg->host.free = mgmt_free_mem;
	mg->host.log = mgmt_log;
	mg->host.now_ns = mgmt_now;
	if(c->host->struct_size >= offsetof(prd_cloud_host, may_act) + sizeof(c->host->may_act) && c->host->may_act)
		mg->host.may_act = mgmt_may_act;
	c->api = &mg->host;
	bridge_set(c->host);
	return 0;
}

/* Try the management cluster once at start-up so a bad file is reported
 * at once; the driver loads whatever the answer. */
void capi_mgmt_probe(capi *c)
{
	prd_cloud_error e = {0, ""};
	if(c->mgmt && mgmt_connect(c->mgmt, &e))
		capi_log(c, PRD_CLOUD_LOG_ERROR, "%s", e.message);
	else if(c->mgmt)
		capi_log(c, PRD_CLOUD_LOG_INFO, "clusterapi: Cluster API objects are read from %s at %s",
			 c->mgmt->where, c->mgmt->cfg->server);
}

struct kube_client *capi_mgmt_client(capi *c)
{
	prd_cloud_error e = {0, ""};
	if(!c->mgmt || mgmt_connect(c->mgmt, &e))
		return NULL;
	return c->mgmt->kc;
}

void capi_mgmt_free(capi *c)
{
	capi_mgmt *mg = c->mgmt;
	if(!mg)
		return;
	bridge_set(NULL);
	kube_client_free(mg->kc);
	kube_config_free(mg->cfg);
	free(mg->kubeconfig);
	free(mg->context);
	free(mg);
	c->mgmt = NULL;
	c->api = c->host;
}
