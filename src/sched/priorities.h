/* The priority expander's table in cluster-autoscaler's format.
 *
 * cluster-autoscaler reads it from the ConfigMap
 * `cluster-autoscaler-priority-expander`, data key `priorities`: a YAML
 * map of integer priority to a list of node-group-name regular
 * expressions; the highest priority with a matching expression wins:
 *
 *   apiVersion: v1
 *   kind: ConfigMap
 *   metadata: {name: cluster-autoscaler-priority-expander, namespace: kube-system}
 *   data:
 *     priorities: |-
 *       10:
 *         - .*-spot-.*
 *       50:
 *         - ^gpu-a100$
 *
 * A document read here is either such a ConfigMap or the bare map (what
 * the `priorities` key holds). Expressions are POSIX extended, unanchored
 * (see expander.h); one that does not compile is an error naming it. */
#ifndef PRD_SCHED_PRIORITIES_H
#define PRD_SCHED_PRIORITIES_H

#include <json-c/json.h>

#include "sched/expander.h"

/* A parsed table: v[0..n) highest priority first; the strings live as
 * long as the table. */
typedef struct sched_priorities {
	sched_priority *v;
	size_t n;
	json_object *doc;     /* holds the expressions' strings */
} sched_priorities;

/* The ConfigMap data key cluster-autoscaler reads. */
#define SCHED_PRIORITIES_KEY "priorities"

/* Parse YAML text: a ConfigMap (its data.priorities) or the bare map.
 * Errors say where ("data.priorities: priority \"ten\": not an
 * integer"). On success *out owns its memory: sched_priorities_free(). */
int sched_priorities_parse(const char *text, size_t len, sched_priorities *out, prd_err *e);

/* The same for a decoded document (borrowed). */
int sched_priorities_from_json(json_object *doc, sched_priorities *out, prd_err *e);

/* The same for a file (at most 1 MiB); errors begin with the path. */
int sched_priorities_read_file(const char *path, sched_priorities *out, prd_err *e);

void sched_priorities_free(sched_priorities *p);

#endif
