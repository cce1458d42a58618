/* --metrics-access=tokenreview: who may read /metrics, asked of the
 * apiserver as controller-runtime's secure metrics and kube-rbac-proxy
 * ask it. The bearer token goes to a TokenReview
 * (authentication.k8s.io/v1); the user it names, with its uid, groups and
 * extra, to a SubjectAccessReview (authorization.k8s.io/v1) for the
 * non-resource URL (`get` on `/metrics`). So a scraper needs a ClusterRole
 * granting `get` on nonResourceURLs ["/metrics"] (the chart's
 * provreqd-metrics-reader), and provreqd needs `create` on tokenreviews
 * and subjectaccessreviews (the chart adds it when metrics.access is
 * tokenreview).
 *
 * Nothing is cached: each scrape costs two small API requests, which at
 * Prometheus' usual 15-60 s interval is noise next to the controller's
 * own traffic, and a revoked binding takes effect at the next scrape. */
#ifndef PRD_KUBE_METRICS_AUTHZ_H
#define PRD_KUBE_METRICS_AUTHZ_H

#include "kube/client.h"
#include "util/buf.h"

/* An http_authz_fn; ud is the kube_client (borrowed, thread-safe). */
int metrics_authz_kube(void *ud, const char *token, const char *path, buf *why);

#endif
