/* The priority expander's table kept up to date from its ConfigMap by a
 * periodic re-read, handed on only when the resourceVersion changes. */
#include "sched/priority_cm.h"
#include "ops/log.h"
#include "util/str.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void prio_cm_init(prio_cm *w, const char *ns, const char *name)
{
	memset(w, 0, sizeof(*w));
	snprintf(w->ns, sizeof(w->ns), "%s", ns);
	snprintf(w->name, sizeof(w->name), "%s", name);
}

void prio_cm_free(prio_cm *w)
{
	free(w->rv);
	free(w->bad_rv);
	w->rv = w->bad_rv = NULL;
}

/* Log a problem when it is new (not the one logged last). */
static void note(prio_cm *w, int problem, const char *msg, const char *detail)
{
	char cm[520];
	if(problem == w->problem)
		return;
	w->problem = problem;
	snprintf(cm, sizeof(cm), "%s/%s", w->ns, w->name);
	if(problem == PRIO_CM_OK)
		log_info(msg, "configmap", cm, "resourceVersion", w->rv ? w->rv : "");
	else
		log_warn(msg, "configmap", cm, "error", detail);
}

/* The ConfigMap is gone: empty table (once). */
static int gone(prio_cm *w, const char *why, sched_priorities *out)
{
	note(w, PRIO_CM_MISSING, "priority expander ConfigMap not found: 'priority' is skipped until it exists",
	     why);
	if(!w->rv && w->read_once)
		return 0;
	w->read_once = true;
	free(w->rv);
	w->rv = NULL;
	memset(out, 0, sizeof(*out));
	return 1;
}

int prio_cm_poll(prio_cm *w, const kube_api *api, int64_t now_ns, sched_priorities *out)
{
	char path[600];
	json_object *cm = NULL;
	const char *rv;
	prd_err e;
	int rc;

	if(w->read_once && now_ns < w->next_ns)
		return 0;
	w->next_ns = now_ns + PRIO_CM_REREAD_NS;
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s/configmaps/%s", w->ns, w->name);
	rc = kube_api_call(api, "GET", path, NULL, NULL, &cm, NULL, &e);
	if(rc == PRD_ENOTFOUND)
		return gone(w, e.msg, out);
	if(rc) {
		note(w, PRIO_CM_UNREADABLE, "cannot read the priority expander ConfigMap: the table in use stays",
		     e.msg);
		w->read_once = true;
		return rc == PRD_ENOMEM ? rc : 0;
	}
	w->read_once = true;
	rv = json_object_get_string(json_object_object_get(json_object_object_get(cm, "metadata"),
							   "resourceVersion"));
	if(w->rv && rv && strcmp(w->rv, rv) == 0 && w->problem != PRIO_CM_UNREADABLE) {
		json_object_put(cm);
		return 0;
	}
	if(w->rv && rv && strcmp(w->rv, rv) == 0) {
		note(w, PRIO_CM_OK, "priority expander ConfigMap readable again", NULL);
		json_object_put(cm);
		return 0;
	}
	rc = sched_priorities_from_json(cm, out, &e);
	if(rc && !str_eq(w->bad_rv, rv)) {
		free(w->bad_rv);
		w->bad_rv = str_dup(rv ? rv : "");
		w->problem = -1; /* a new version refused: say so again */
	}
	if(rc) {
		note(w, PRIO_CM_MALFORMED, "priority expander ConfigMap refused: the table in use stays", e.msg);
		json_object_put(cm);
		return rc == PRD_ENOMEM ? rc : 0;
	}
	/* (rv points into cm.) */
	free(w->rv);
	w->rv = str_dup(rv ? rv : "");
	json_object_put(cm);
	w->problem = -1; /* log the load */
	note(w, PRIO_CM_OK, "priority expander table loaded", NULL);
	return 1;
}
