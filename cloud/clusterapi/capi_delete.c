/* The clusterapi driver's deletes: particular Machines marked, then their group scaled down past them. */
#include "clusterapi/clusterapi.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "util/rfc3339.h"
#include "util/str.h"
#include "util/yamljson.h"

/* One Machine a delete call takes away: its name, the resourceVersion it
 * was listed with (the mark is conditional on it) and, once marked, the
 * value and resourceVersion of our mark (the undo is conditional on them). */
typedef struct capi_victim {
	const char *name;      /* borrowed from the Machine listing */
	const char *listed_rv; /* borrowed from the Machine listing */
	bool marked;           /* this call set the mark */
	char mark_rv[64];      /* the Machine's resourceVersion after our mark */
} capi_victim;

/* Merge-patch the delete-machine annotation of Machine `name` to `value`
 * (NULL removes it), conditional on resourceVersion `rv`. A 409 is
 * PRD_CLOUD_ECONFLICT. On success *new_rv (if given) is the Machine's new
 * resourceVersion. */
static int patch_mark(capi *c, const capi_group *g, const char *name, const char *value, const char *rv,
		      char *new_rv, size_t n, prd_cloud_error *err)
{
	char path[800];
	json_object *patch = json_object_new_object(), *md = json_object_new_object(), *ann = json_object_new_object();
	json_object *out = NULL;
	long status = 0;
	int rc;
	capi_path(c, path, sizeof(path), "machines", g->ns, name, NULL);
	json_object_object_add(ann, CAPI_DELETE_ANNOTATION, value ? json_object_new_string(value) : NULL);
	json_object_object_add(md, "annotations", ann);
	json_object_object_add(md, "resourceVersion", json_object_new_string(rv));
	json_object_object_add(patch, "metadata", md);
	rc = capi_request(c, "PATCH", path, "application/merge-patch+json", patch, &out, &status, err);
	json_object_put(patch);
	if(rc && status == 409)
		rc = capi_fail(err, PRD_CLOUD_ECONFLICT,
			       "clusterapi: %s: Machine %s changed between this call's read and its %s (409 Conflict)",
			       g->id, name, value ? "delete mark" : "removal of its delete mark");
	if(!rc && new_rv) {
		const char *r = capi_jstr(capi_jobj(out, "metadata"), "resourceVersion");
		snprintf(new_rv, n, "%s", r ? r : "");
	}
	json_object_put(out);
	return rc;
}

/* Take back the mark this call set on v, unless someone changed it since:
 * conditional on the resourceVersion our mark produced; after a 409 the
 * Machine is read again and the mark removed only if it still holds our
 * value (a mark another actor set, or set again, stays). */
static void unmark(capi *c, const capi_group *g, capi_victim *v, const char *value)
{
	prd_cloud_error e = {0, ""};
	json_object *m = NULL;
	char path[800];
	const char *now_value, *rv;
	int rc = patch_mark(c, g, v->name, NULL, v->mark_rv, NULL, 0, &e);
	if(rc == PRD_CLOUD_ECONFLICT) {
		capi_path(c, path, sizeof(path), "machines", g->ns, v->name, NULL);
		rc = capi_request(c, "GET", path, NULL, NULL, &m, NULL, &e);
		if(rc == PRD_CLOUD_ENOTFOUND)
			rc = 0; /* gone: nothing to take back */
		else if(!rc) {
			now_value = capi_jstr(capi_jobj(capi_jobj(m, "metadata"), "annotations"), CAPI_DELETE_ANNOTATION);
			rv = capi_jstr(capi_jobj(m, "metadata"), "resourceVersion");
			if(now_value && !strcmp(now_value, value) && rv)
				rc = patch_mark(c, g, v->name, NULL, rv, NULL, 0, &e);
		}
		json_object_put(m);
	}
	if(rc)
		capi_log(c, PRD_CLOUD_LOG_ERROR,
			 "clusterapi: %s: removing %s from Machine %s failed: %s (remove it by hand, or the next "
			 "scale-down of the group takes that Machine first)",
			 g->id, CAPI_DELETE_ANNOTATION, v->name, e.message);
}

/* delete_machines' first step: the Machines not being deleted (*existing)
 * and how many of them carry a delete mark (*marked). */
static void count_marked(json_object *machines, int32_t *existing, int32_t *marked)
{
	size_t i, n = json_object_array_length(machines);
	for(i = 0; i < n; i++) {
		json_object *m = json_object_array_get_idx(machines, i);
		if(capi__machine_deleting(m))
			continue;
		(*existing)++;
		*marked += capi_jstr(capi_jobj(capi_jobj(m, "metadata"), "annotations"), CAPI_DELETE_ANNOTATION) != NULL;
	}
}

/* delete_machines' second step: the Machine of each of names[0..count)
 * into vic (name NULL: not marked, not counted), *nactive counting the
 * ones the decrement pays for. 0, or an error with nothing deleted. */
static int pick_victims(const capi_group *g, json_object *machines, const char *const *names, size_t count,
			bool by_id, int32_t covered, capi_victim *vic, size_t *nactive, prd_cloud_error *err)
{
	size_t i, j, n = json_object_array_length(machines);
	int rc = 0;
	for(i = 0; i < count && !rc; i++) {
		json_object *found = NULL;
		for(j = 0; j < n && !found; j++) {
			json_object *m = json_object_array_get_idx(machines, j);
			const char *node = capi__machine_node(m);
			char id[600];
			capi__machine_id(m, id, sizeof(id));
			if(names[i] && ((!by_id && node && !strcmp(node, names[i])) || !strcmp(id, names[i])))
				found = m;
		}
		if(!found && by_id && names[i])
			continue; /* gone already */
		if(!found) {
			rc = capi_fail(err, PRD_CLOUD_ENOTFOUND, "clusterapi: %s has no Machine for node %s; nothing deleted",
				       g->id, names[i] ? names[i] : "(null)");
			break;
		}
		vic[i].name = capi_jstr(capi_jobj(found, "metadata"), "name");
		vic[i].listed_rv = capi_jstr(capi_jobj(found, "metadata"), "resourceVersion");
		for(j = 0; j < i; j++)
			if(vic[j].name && !strcmp(vic[j].name, vic[i].name))
				rc = capi_fail(err, PRD_CLOUD_EINVAL, "clusterapi: %s: node %s is listed twice", g->id,
					       names[i]);
		if(capi__machine_deleting(found)) {
			vic[i].name = NULL; /* already going: neither mark nor count it */
			continue;
		}
		/* A mark set before (by anyone) is not touched; replicas already
		 * dropped for it while `covered` lasts, else it is counted. */
		if(capi_jstr(capi_jobj(capi_jobj(found, "metadata"), "annotations"), CAPI_DELETE_ANNOTATION)) {
			if(covered > 0) {
				covered--;
				vic[i].name = NULL;
				continue;
			}
			vic[i].listed_rv = NULL;
			(*nactive)++;
			continue;
		}
		(*nactive)++;
		if(!vic[i].listed_rv || !vic[i].listed_rv[0])
			rc = capi_fail(err, PRD_CLOUD_EIO,
				       "clusterapi: %s: Machine %s was listed without a resourceVersion to make its mark "
				       "conditional on; nothing deleted",
				       g->id, vic[i].name);
	}
	return rc;
}

/* delete_machines' last step: mark the victims, then lower replicas by
 * `nactive` conditionally on `rv`; the marks this call set are taken back
 * when either fails. */
static int mark_and_scale(capi *c, capi_group *g, capi_victim *vic, size_t count, int32_t cur, size_t nactive,
			  const char *rv, prd_cloud_error *err)
{
	char now[64];
	size_t i;
	int rc = 0;
	rfc3339_format(c->host->now_ns(c->host->ctx), now, sizeof(now));
	for(i = 0; i < count && !rc; i++) {
		if(!vic[i].name || !vic[i].listed_rv)
			continue;
		rc = patch_mark(c, g, vic[i].name, now, vic[i].listed_rv, vic[i].mark_rv, sizeof(vic[i].mark_rv), err);
		vic[i].marked = !rc;
	}
	if(!rc)
		rc = capi__put_scale(c, g, cur - (int32_t)nactive, rv, err);
	if(rc)
		for(i = 0; i < count; i++)
			if(vic[i].marked)
				unmark(c, g, &vic[i], now);
	return rc;
}

/* Delete particular Machines: find each one in the group (by its node's
 * name, or by instance ID when by_id), then, all against one read:
 *   1. mark each with cluster.x-k8s.io/delete-machine, every mark
 *      conditional on the resourceVersion the Machine was listed with (a
 *      Machine that changed since - being deleted, replaced, marked by
 *      someone else - is a conflict, not a blind overwrite);
 *   2. lower replicas by the number of Machines marked through the scale
 *      subresource, conditional on the resourceVersion of the group read
 *      before the Machines were listed (or the fenced read: a newer
 *      leader's term is refused).
 * Any conflict or failure undoes the marks this call set (conditionally,
 * see unmark) and changes nothing else: the MachineSet controller only
 * acts on a mark when replicas drop, which happens in step 2 or not at
 * all. An instance ID without a Machine is already gone and is skipped; a
 * node name without one is refused.
 *
 * A Machine that carries a delete-machine mark already is left as it is.
 * Whether it counts in the decrement depends on whether replicas already
 * dropped for it: the marked Machines that exceed replicas (more Machines
 * not being deleted than replicas) are ones the MachineSet controller is
 * about to remove - most often this driver's own earlier call, which the
 * caller repeats because the Machine is still listed (a MachineDeployment
 * mid-rollout takes seconds to act) - and are "already being deleted":
 * counting them again would lower replicas a second time and take a
 * Machine nobody chose (seen against the real MachineDeployment
 * controller, e2e 87 rollout). Only a mark no decrement covers counts. */
static int delete_machines(void *state, const char *group_id, const char *const *names, size_t count, bool by_id,
			   const char *fkey, uint64_t fterm, prd_cloud_error *err)
{
	capi *c = state;
	capi_group *g = capi__find_group(c, group_id);
	json_object *machines = NULL;
	capi_victim *vic = NULL;
	size_t nactive = 0;
	int32_t cur, existing = 0, marked = 0, covered;
	char rv[64];
	int rc;
	if(!g)
		return capi__no_group(err, group_id);
	if(!count)
		return 0;
	rc = capi__read_for_write(c, g, fterm ? fkey : NULL, fterm, &cur, rv, sizeof(rv), err);
	if(!rc)
		rc = capi_group_machines(c, g, true, &machines, err);
	if(rc)
		return rc;
	count_marked(machines, &existing, &marked);
	/* Marked Machines replicas no longer pay for: being removed. */
	covered = existing - cur < 0 ? 0 : existing - cur < marked ? existing - cur : marked;
	vic = calloc(count, sizeof(*vic));
	if(!vic) {
		rc = capi_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
		goto done;
	}
	rc = pick_victims(g, machines, names, count, by_id, covered, vic, &nactive, err);
	if(!rc && cur - (int32_t)nactive < g->min)
		rc = capi_fail(err, PRD_CLOUD_ERANGE,
			       "clusterapi: %s: deleting %zu nodes would take replicas from %d below its minimum size %d",
			       g->id, nactive, (int)cur, (int)g->min);
	if(rc || !nactive)
		goto done;
	rc = mark_and_scale(c, g, vic, count, cur, nactive, rv, err);
done:
	free(vic);
	json_object_put(machines);
	return rc;
}

int capi__cp_delete_nodes(void *state, const char *group_id, const char *const *names, size_t count,
			  prd_cloud_error *err)
{
	return delete_machines(state, group_id, names, count, false, NULL, 0, err);
}

/* Instances by ID (a Machine's providerID, or its pending stand-in before
 * the infrastructure assigned one): a Machine that never got a Node - one
 * still provisioning, or one that failed - can be removed too. */
int capi__cp_delete_instances(void *state, const char *group_id, const char *const *ids, size_t count,
			      prd_cloud_error *err)
{
	return delete_machines(state, group_id, ids, count, true, NULL, 0, err);
}

/* ABI 1.4: delete_instances carrying a fencing token. */
int capi__cp_delete_fenced(void *state, const prd_cloud_delete *req, prd_cloud_error *err)
{
	if(!req || req->struct_size < offsetof(prd_cloud_delete, fence_term) + sizeof(req->fence_term))
		return capi_fail(err, PRD_CLOUD_EINVAL, "clusterapi: delete: the request is %u bytes, older than ABI 1.4's",
				 req ? (unsigned)req->struct_size : 0u);
	if(req->count && !req->instance_ids)
		return capi_fail(err, PRD_CLOUD_EINVAL, "clusterapi: delete: no instance ids");
	return delete_machines(state, req->group_id, req->instance_ids, req->count, true, req->fence_key,
			       req->fence_term, err);
}
