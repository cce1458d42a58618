/* Helpers of the clusterapi driver that the other drivers do not share
 * (the shared ones are in cloud/common/drv_util.c). */
#include "clusterapi/clusterapi.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const kind_names[CAPI_KINDS] = {"MachineDeployment", "MachineSet", "MachinePool"};
static const char *const kind_plurals[CAPI_KINDS] = {"machinedeployments", "machinesets", "machinepools"};

const char *capi_kind_name(capi_kind k)
{
	return k < CAPI_KINDS ? kind_names[k] : "?";
}

const char *capi_kind_plural(capi_kind k)
{
	return k < CAPI_KINDS ? kind_plurals[k] : "?";
}

void capi_path(const capi *c, char *out, size_t n, const char *plural, const char *ns, const char *name,
	       const char *sub)
{
	snprintf(out, n, "/apis/" CAPI_GROUP "/%s%s%s/%s%s%s%s%s", c->version, ns ? "/namespaces/" : "", ns ? ns : "",
		 plural, name ? "/" : "", name ? name : "", sub ? "/" : "", sub ? sub : "");
}

/* Reasons Cluster API (and providers following its conventions) give a
 * False Ready-type condition while things are merely under way or unknown:
 * none of them is a failure. */
static bool waiting_reason(const char *r)
{
	/* (ObjectDoesNotExist: v1beta2's word for an infrastructure or
	 * bootstrap object not made yet. Its ObjectDeleted is a failure on a
	 * Machine that is not being deleted: see capi_machine_failure.) */
	static const char *const exact[] = {"NotReady", "InvalidConditionReported", "InternalError", "DoesNotExist",
					    "ObjectDoesNotExist", "Deleted", "Deleting", "NoReasonReported", "Ready",
					    NULL};
	static const char *const part[] = {"Provisioning", "InProgress", "Pending", "Creating", "Waiting", NULL};
	size_t i;
	for(i = 0; exact[i]; i++)
		if(!strcmp(r, exact[i]))
			return true;
	for(i = 0; part[i]; i++)
		if(strstr(r, part[i]))
			return true;
	return false;
}

/* Out of resources: the cloud has no capacity, or the account no quota. */
static bool resource_reason(const char *r)
{
	static const char *const words[] = {"capacity", "stockout", "outofstock", "quota", "limitexceeded", NULL};
	char low[128];
	size_t i;
	for(i = 0; r[i] && i + 1 < sizeof(low); i++)
		low[i] = (char)(r[i] >= 'A' && r[i] <= 'Z' ? r[i] - 'A' + 'a' : r[i]);
	low[i] = '\0';
	for(i = 0; words[i]; i++)
		if(strstr(low, words[i]))
			return true;
	return false;
}

static json_object *find_condition(json_object *status, const char *type)
{
	json_object *conds;
	size_t i, n;
	if(!json_object_object_get_ex(status, "conditions", &conds) || !json_object_is_type(conds, json_type_array))
		return NULL;
	n = json_object_array_length(conds);
	for(i = 0; i < n; i++) {
		json_object *c = json_object_array_get_idx(conds, i);
		const char *t = capi_jstr(c, "type");
		if(t && !strcmp(t, type))
			return c;
	}
	return NULL;
}

int capi_machine_failure(json_object *m, const char **code, const char **message)
{
	static const char *const types[] = {"InfrastructureReady", "BootstrapConfigReady", NULL};
	json_object *st = capi_jobj(m, "status"), *v1 = capi_jobj(capi_jobj(st, "deprecated"), "v1beta1");
	const char *fmsg = capi_jstr(st, "failureMessage"), *freason = capi_jstr(st, "failureReason");
	size_t i;
	/* A Machine being deleted has been taken out by whoever deletes it (a
	 * rollback, a scale-down, a MachineHealthCheck, a rollout); what its
	 * conditions say then is its teardown ("E2EMachine has been deleted"),
	 * not a failure to make it: a plan must not fail over a Machine a
	 * rollout replaces (e2e 87 rollout). */
	if(capi_jstr(capi_jobj(m, "metadata"), "deletionTimestamp"))
		return PRD_CLOUD_ERRCLASS_NONE;
	if(!(fmsg && fmsg[0])) {
		fmsg = capi_jstr(v1, "failureMessage");
		freason = capi_jstr(v1, "failureReason");
	}
	if(fmsg && fmsg[0]) {
		*code = freason && freason[0] ? freason : "MachineFailed";
		*message = fmsg;
		/* Class other, as this driver always reported them: their
		 * reasons are free text (CreateError...), not a vocabulary. */
		return PRD_CLOUD_ERRCLASS_OTHER;
	}
	for(i = 0; types[i]; i++) {
		json_object *c = find_condition(st, types[i]);
		const char *s = capi_jstr(c, "status"), *r = capi_jstr(c, "reason"), *msg = capi_jstr(c, "message");
		if(!s || strcmp(s, "False") || !r || !r[0] || waiting_reason(r))
			continue;
		*code = r;
		*message = msg && msg[0] ? msg : r;
		return resource_reason(r) ? PRD_CLOUD_ERRCLASS_OUT_OF_RESOURCES : PRD_CLOUD_ERRCLASS_OTHER;
	}
	return PRD_CLOUD_ERRCLASS_NONE;
}
