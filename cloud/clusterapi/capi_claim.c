/* Which Machines are a plan's (docs/drivers.md, "Which Machines are a
 * plan's").
 *
 * Cluster API cannot mark the Machines one scale call makes: the MachineSet
 * controller creates them from its template, later. So this driver marks
 * them itself, with the label provreqd.io/owner=<the plan's token>, once it
 * can prove them the plan's:
 *
 *  - at the increase, the group's Machines were exactly its replicas R, none
 *    of them being deleted (the MachineSets had what they were asked for,
 *    nothing was being replaced): their names are recorded (the claim);
 *  - at a later listing (one consistent reading of the Machines), the
 *    group's replicas are still R + delta (nobody else has moved them since),
 *    every recorded Machine is still there and not being deleted (nothing
 *    was replaced: a MachineHealthCheck's remediation, a rollout and a
 *    scale-down each delete a Machine before its successor exists), and the
 *    Machines not recorded number at most delta.
 *
 * Then every Machine not recorded is one the increase made, and is marked
 * (conditional on the resourceVersion it was listed with). Once the
 * condition fails the claim is dropped and nothing more is marked for it:
 * what is left unmarked is what cannot be told apart (a replacement the
 * same MachineSet makes while the plan's Machines come), and the host's
 * rollback chooses among those by readiness and pods. A claim lives in this
 * process only: a replica that restarts or takes over marks nothing more
 * for the plans before it, and the marks made stay on the Machines for any
 * replica to read. */
#include "clusterapi/clusterapi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct capi_claim {
	char *group;           /* the group's id */
	char token[64];        /* the plan's owner token */
	int32_t replicas;      /* R + delta: what the increase set */
	int32_t delta;
	char **names;          /* the group's Machines at the increase */
	size_t nnames;
};

static void claim_free(capi_claim *k)
{
	size_t i;
	if(!k)
		return;
	for(i = 0; i < k->nnames; i++)
		free(k->names[i]);
	free(k->names);
	free(k->group);
	free(k);
}

static void drop(capi *c, size_t i)
{
	claim_free(c->claims[i]);
	c->claims[i] = c->claims[--c->nclaims];
}

void capi_claims_free(capi *c)
{
	while(c->nclaims)
		drop(c, 0);
	free(c->claims);
	c->claims = NULL;
}

static const char *mname(json_object *m)
{
	return capi_jstr(capi_jobj(m, "metadata"), "name");
}

static bool deleting(json_object *m)
{
	return capi_jstr(capi_jobj(m, "metadata"), "deletionTimestamp") != NULL;
}

bool capi_claim_baseline_ok(json_object *machines, int32_t replicas)
{
	size_t i, n = json_object_array_length(machines);
	if((int64_t)n != replicas)
		return false;
	for(i = 0; i < n; i++)
		if(deleting(json_object_array_get_idx(machines, i)) || !mname(json_object_array_get_idx(machines, i)))
			return false;
	return true;
}

void capi_claim_note(capi *c, const capi_group *g, const char *token, int32_t from, int32_t delta,
		     json_object *machines)
{
	capi_claim *k, **bigger;
	size_t i, n = json_object_array_length(machines);
	if(!token || strlen(token) >= sizeof(k->token) || delta <= 0)
		return;
	for(i = 0; i < c->nclaims; i++)
		if(!strcmp(c->claims[i]->group, g->id)) {
			/* One claim a group: a later increase (another plan, or
			 * the same plan's rest) starts from what is there now. */
			drop(c, i);
			break;
		}
	if(c->nclaims >= CAPI_MAX_CLAIMS)
		drop(c, 0);
	k = calloc(1, sizeof(*k));
	if(!k || !(k->group = capi_strdup(g->id)) || !(k->names = calloc(n + 1, sizeof(*k->names)))) {
		claim_free(k);
		return;
	}
	snprintf(k->token, sizeof(k->token), "%s", token);
	k->replicas = from + delta;
	k->delta = delta;
	for(i = 0; i < n; i++)
		if(!(k->names[k->nnames++] = capi_strdup(mname(json_object_array_get_idx(machines, i))))) {
			claim_free(k);
			return;
		}
	bigger = realloc(c->claims, (c->nclaims + 1) * sizeof(*bigger));
	if(!bigger) {
		claim_free(k);
		return;
	}
	c->claims = bigger;
	c->claims[c->nclaims++] = k;
}

/* The Machine of that name in the listing, or NULL. */
static json_object *named(json_object *machines, const char *name)
{
	size_t i, n = json_object_array_length(machines);
	for(i = 0; i < n; i++) {
		json_object *m = json_object_array_get_idx(machines, i);
		if(mname(m) && !strcmp(mname(m), name))
			return m;
	}
	return NULL;
}

static bool recorded(const capi_claim *k, const char *name)
{
	size_t i;
	for(i = 0; name && i < k->nnames; i++)
		if(!strcmp(k->names[i], name))
			return true;
	return false;
}

const char *capi_machine_owner(json_object *m)
{
	return capi_jstr(capi_jobj(capi_jobj(m, "metadata"), "labels"), CAPI_OWNER_LABEL);
}

/* Label Machine m with the token, conditional on the resourceVersion it was
 * listed with; on success the listed copy carries the label too. */
static int mark(capi *c, const capi_group *g, json_object *m, const char *token)
{
	json_object *patch = json_object_new_object(), *md = json_object_new_object(), *labels = json_object_new_object();
	json_object *mmd = capi_jobj(m, "metadata"), *mlabels = capi_jobj(mmd, "labels");
	const char *rv = capi_jstr(mmd, "resourceVersion");
	prd_cloud_error e = {0, ""};
	char path[800];
	int rc;
	if(!patch || !md || !labels || !rv || !rv[0] || !mname(m)) {
		json_object_put(patch);
		json_object_put(md);
		json_object_put(labels);
		return PRD_CLOUD_EINVAL;
	}
	json_object_object_add(labels, CAPI_OWNER_LABEL, json_object_new_string(token));
	json_object_object_add(md, "labels", labels);
	json_object_object_add(md, "resourceVersion", json_object_new_string(rv));
	json_object_object_add(patch, "metadata", md);
	capi_path(c, path, sizeof(path), "machines", g->ns, mname(m), NULL);
	rc = capi_request(c, "PATCH", path, "application/merge-patch+json", patch, NULL, NULL, &e);
	json_object_put(patch);
	if(rc) {
		capi_log(c, PRD_CLOUD_LOG_DEBUG, "clusterapi: %s: marking Machine %s as plan %s's failed: %s", g->id,
			 mname(m), token, e.message);
		return rc;
	}
	if(!mlabels) {
		mlabels = json_object_new_object();
		json_object_object_add(mmd, "labels", mlabels);
	}
	if(mlabels)
		json_object_object_add(mlabels, CAPI_OWNER_LABEL, json_object_new_string(token));
	capi_log(c, PRD_CLOUD_LOG_INFO, "clusterapi: %s: Machine %s marked as scale-up plan %s's", g->id, mname(m), token);
	return 0;
}

void capi_claim_mark(capi *c, const capi_group *g, json_object *machines)
{
	capi_claim *k = NULL;
	size_t i, j, n = json_object_array_length(machines), fresh = 0, marked = 0;
	for(i = 0; i < c->nclaims && !k; i++)
		if(!strcmp(c->claims[i]->group, g->id))
			k = c->claims[i];
	if(!k)
		return;
	i--;
	/* The proof (see the top of the file), on this one listing. */
	if(g->replicas != k->replicas) {
		drop(c, i);
		return;
	}
	for(j = 0; j < k->nnames; j++) {
		json_object *was = named(machines, k->names[j]);
		if(!was || deleting(was)) {
			capi_log(c, PRD_CLOUD_LOG_DEBUG,
				 "clusterapi: %s: Machine %s of the group before scale-up plan %s is gone or going: the "
				 "plan's Machines are no longer told apart from a replacement; no more marks",
				 g->id, k->names[j], k->token);
			drop(c, i);
			return;
		}
	}
	for(j = 0; j < n; j++) {
		json_object *m = json_object_array_get_idx(machines, j);
		const char *own = capi_machine_owner(m);
		if(recorded(k, mname(m)))
			continue;
		if(deleting(m) || (own && strcmp(own, k->token))) {
			drop(c, i); /* another's, or going: nothing more is certain */
			return;
		}
		fresh++;
	}
	if(fresh > (size_t)k->delta) {
		drop(c, i);
		return;
	}
	for(j = 0; j < n; j++) {
		json_object *m = json_object_array_get_idx(machines, j);
		if(recorded(k, mname(m)))
			continue;
		if(capi_machine_owner(m) || mark(c, g, m, k->token) == 0)
			marked++;
	}
	if(marked >= (size_t)k->delta)
		drop(c, i); /* every Machine of the plan carries its mark */
}
