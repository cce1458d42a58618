/* The services table handed to drivers (prd_cloud_host): logging, apiserver
 * requests through the daemon's transport, and the injectable clock. */
#include "driver/host.h"
#include "ops/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void host_log(void *ctx, int level, const char *message)
{
	const cloud_host_impl *h = ctx;
	int l = level < PRD_CLOUD_LOG_ERROR ? PRD_LOG_ERROR : level > PRD_CLOUD_LOG_DEBUG ? PRD_LOG_DEBUG : level;
	log_kv(l, message ? message : "", "component", h->component, (const char *)NULL);
}

static int host_request(void *ctx, const char *method, const char *path, const char *content_type,
			const char *body, size_t body_len, long *http_status, char **resp_body,
			size_t *resp_len, prd_cloud_error *err)
{
	const cloud_host_impl *h = ctx;
	*http_status = 0;
	*resp_body = NULL;
	*resp_len = 0;
	if(!method || !path || path[0] != '/') {
		if(err) {
			err->code = PRD_CLOUD_EINVAL;
			snprintf(err->message, sizeof(err->message), "kube_request: path must start with '/'");
		}
		return PRD_CLOUD_EINVAL;
	}
	if(!h->request) {
		if(err) {
			err->code = PRD_CLOUD_EUNSUPPORTED;
			snprintf(err->message, sizeof(err->message),
				 "kube_request: this provreqd has no apiserver connection");
		}
		return PRD_CLOUD_EUNSUPPORTED;
	}
	return h->request(h->request_ud, method, path, content_type, body, body_len, http_status,
			  resp_body, resp_len, err);
}

static int64_t host_now(void *ctx)
{
	const cloud_host_impl *h = ctx;
	return clk_wall(h->clock);
}

static void host_free(void *ctx, void *ptr)
{
	(void)ctx;
	free(ptr);
}

static int host_may_act(void *ctx)
{
	const cloud_host_impl *h = ctx;
	return h->fence ? h->fence(h->fence_ud) : 1;
}

void cloud_host_set_fence(cloud_host_impl *h, int (*fence)(void *ud), void *ud)
{
	h->fence = fence;
	h->fence_ud = ud;
}

void cloud_host_init(cloud_host_impl *h, const char *component, const clk *clock,
		     cloud_host_request_fn request, void *request_ud)
{
	memset(h, 0, sizeof(*h));
	h->host.struct_size = sizeof(h->host);
	h->host.ctx = h;
	h->host.log = host_log;
	h->host.kube_request = host_request;
	h->host.now_ns = host_now;
	h->host.free = host_free;
	h->host.may_act = host_may_act;
	h->clock = clock ? clock : clk_real();
	h->request = request;
	h->request_ud = request_ud;
	snprintf(h->component, sizeof(h->component), "%s", component ? component : "driver");
}
