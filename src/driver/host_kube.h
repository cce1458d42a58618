/* Request functions (driver/host.h cloud_host_request_fn) that connect a
 * driver's host->kube_request to a real apiserver (through kube_client)
 * or to the in-memory API (memapi, for `provreqd simulate` and tests).
 *
 * Both answer with the JSON text of the response body, allocated with
 * malloc (the host frees it with free), and map errors to PRD_CLOUD_E*
 * codes with the apiserver's message in err:
 *   404 → PRD_CLOUD_ENOTFOUND, 400/422 → PRD_CLOUD_EINVAL,
 *   429/5xx/timeouts → PRD_CLOUD_EAGAIN, others → PRD_CLOUD_EIO.
 * *http_status always holds the HTTP status (0 when there was no answer),
 * so a driver can tell 409 AlreadyExists from 409 Conflict and others. */
#ifndef PRD_DRIVER_HOST_KUBE_H
#define PRD_DRIVER_HOST_KUBE_H

#include <stddef.h>

#include "provreqd/cloud.h"

/* `ud` is a kube_client * (borrowed; it must outlive the drivers). */
int cloud_host_kube_request(void *ud, const char *method, const char *path, const char *content_type,
			    const char *body, size_t body_len, long *http_status, char **resp_body,
			    size_t *resp_len, prd_cloud_error *err);

/* `ud` is a memapi * (borrowed; it must outlive the drivers). */
int cloud_host_memapi_request(void *ud, const char *method, const char *path, const char *content_type,
			      const char *body, size_t body_len, long *http_status, char **resp_body,
			      size_t *resp_len, prd_cloud_error *err);

#endif
