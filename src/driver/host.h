/* The services table provreqd hands to drivers (provreqd/cloud.h
 * prd_cloud_host): logging through the daemon's logger, kube-apiserver
 * requests through whatever transport the daemon uses (the real client in
 * `run`, the in-memory API in `simulate` and tests), and the injectable
 * clock. */
#ifndef PRD_DRIVER_HOST_H
#define PRD_DRIVER_HOST_H

#include "provreqd/cloud.h"
#include "util/clock.h"

/* How the host answers a driver's kube_request: same contract as
 * prd_cloud_host.kube_request, with the body allocated by malloc. */
typedef int (*cloud_host_request_fn)(void *ud, const char *method, const char *path,
				     const char *content_type, const char *body, size_t body_len,
				     long *http_status, char **resp_body, size_t *resp_len,
				     prd_cloud_error *err);

typedef struct cloud_host_impl {
	prd_cloud_host host;          /* what the driver sees; host.ctx points here */
	const clk *clock;
	cloud_host_request_fn request; /* NULL: requests fail with EUNSUPPORTED */
	void *request_ud;
	char component[64];           /* log attribution, e.g. "driver/kwok" */
	/* prd_cloud_host.may_act: NULL answers yes (not leader-elected). Set
	 * with cloud_host_set_fence; read from the controller's thread. */
	int (*fence)(void *ud);
	void *fence_ud;
} cloud_host_impl;

/* Fill `h` (caller owns its memory; it must outlive every driver given
 * &h->host). */
void cloud_host_init(cloud_host_impl *h, const char *component, const clk *clock,
		     cloud_host_request_fn request, void *request_ud);
/* Answer prd_cloud_host.may_act with fence(ud) (`run` passes the lease). */
void cloud_host_set_fence(cloud_host_impl *h, int (*fence)(void *ud), void *ud);

#endif
