/* ProvisioningRequest semantics that need no cluster: class names, parameters,
 * terminal states, ordering and the condition list. */
#include "provreq/request.h"
#include "sched/sched.h"
#include "util/rfc3339.h"
#include "util/str.h"

#include <stdio.h>
#include <string.h>

int pr_params_parse(const kube_provreq *pr, pr_params *out, prd_err *err)
{
	size_t i;
	memset(out, 0, sizeof(*out));
	/* The CRD allows counts up to 2^31-1; the placement plans at most
	 * SCHED_COUNT_MAX pods of a podSet. A larger one could never be
	 * served: fail it at once, naming the limit, rather than retrying it
	 * until --max-age. */
	for(i = 0; i < pr->npod_sets; i++)
		if((int64_t)pr->pod_sets[i].count > SCHED_COUNT_MAX)
			return prd_err_set(err, PRD_EINVAL,
					   "podSet %zu: count %ld is above %lld, the most pods of one podSet provreqd can plan",
					   i, (long)pr->pod_sets[i].count, (long long)SCHED_COUNT_MAX);
	for(i = 0; i < pr->nparameters; i++)
		if(pr_param_parse(pr->parameters[i].key, pr->parameters[i].value, out, err))
			return PRD_EINVAL;
	return 0;
}

int pr_param_parse(const char *k, const char *v, pr_params *out, prd_err *err)
{
	if(!strcmp(k, "ValidUntilSeconds")) {
		int64_t s;
		if(str_to_int64(v, &s) || s <= 0)
			return prd_err_set(err, PRD_EINVAL,
					   "parameter ValidUntilSeconds: \"%.64s\" is not a positive whole number of seconds", v);
		out->has_valid_until = true;
		out->valid_until_s = s;
	} else if(!strcmp(k, "noRetry")) {
		if(str_to_bool(v, &out->no_retry))
			return prd_err_set(err, PRD_EINVAL, "parameter noRetry: \"%.64s\" is not true or false", v);
	} else if(!strcmp(k, "processorInstance")) {
		out->processor = v;
	}
	return 0;
}

const kube_condition *pr_cond(const kube_provreq *pr, const char *type)
{
	size_t i;
	for(i = 0; i < pr->nconditions; i++)
		if(!strcmp(pr->conditions[i].type, type))
			return &pr->conditions[i];
	return NULL;
}

bool pr_cond_true(const kube_provreq *pr, const char *type)
{
	const kube_condition *c = pr_cond(pr, type);
	return c && c->status && !strcmp(c->status, "True");
}

bool pr_is_terminal(const kube_provreq *pr)
{
	return pr_cond_true(pr, PR_COND_FAILED) || pr_cond_true(pr, PR_COND_BOOKING_EXPIRED) ||
	       pr_cond_true(pr, PR_COND_REVOKED);
}

int pr_order_cmp(const void *a, const void *b)
{
	const kube_provreq *x = *(const kube_provreq *const *)a, *y = *(const kube_provreq *const *)b;
	int c;
	if(x->meta.created_ns != y->meta.created_ns)
		return x->meta.created_ns < y->meta.created_ns ? -1 : 1;
	c = strcmp(x->meta.name, y->meta.name);
	if(c)
		return c;
	return strcmp(x->meta.ns, y->meta.ns);
}

static json_object *cond_json(const char *type, const char *status, const char *reason, const char *message,
			      int64_t ltt_ns, int64_t generation)
{
	json_object *o = json_object_new_object();
	char ts[RFC3339_MAX];
	rfc3339_format(ltt_ns, ts, sizeof(ts));
	json_object_object_add(o, "type", json_object_new_string(type));
	json_object_object_add(o, "status", json_object_new_string(status));
	json_object_object_add(o, "lastTransitionTime", json_object_new_string(ts));
	json_object_object_add(o, "reason", json_object_new_string(reason ? reason : "Unknown"));
	json_object_object_add(o, "message", json_object_new_string(message ? message : ""));
	json_object_object_add(o, "observedGeneration", json_object_new_int64(generation));
	return o;
}

int pr_conds_init(pr_conds *c, const kube_provreq *pr, prd_err *err)
{
	size_t i;
	c->changed = false;
	c->list = json_object_new_array();
	if(!c->list)
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	for(i = 0; i < pr->nconditions; i++) {
		const kube_condition *k = &pr->conditions[i];
		json_object_array_add(c->list, cond_json(k->type, k->status ? k->status : "Unknown", k->reason,
							 k->message, k->last_transition_ns, k->observed_generation));
	}
	return 0;
}

void pr_conds_free(pr_conds *c)
{
	json_object_put(c->list);
	c->list = NULL;
}

static json_object *find(const pr_conds *c, const char *type)
{
	size_t i;
	for(i = 0; i < json_object_array_length(c->list); i++) {
		json_object *o = json_object_array_get_idx(c->list, i);
		if(!strcmp(json_object_get_string(json_object_object_get(o, "type")), type))
			return o;
	}
	return NULL;
}

static bool str_field_is(json_object *o, const char *k, const char *v)
{
	json_object *f = json_object_object_get(o, k);
	return f && v && !strcmp(json_object_get_string(f), v);
}

int pr_conds_set(pr_conds *c, const char *type, const char *status, const char *reason, const char *message,
		 int64_t now_ns, int64_t generation)
{
	json_object *o = find(c, type);
	char ts[RFC3339_MAX];
	if(!o) {
		json_object_array_add(c->list, cond_json(type, status, reason, message, now_ns, generation));
		c->changed = true;
		return 0;
	}
	if(!str_field_is(o, "status", status)) {
		rfc3339_format(now_ns, ts, sizeof(ts));
		json_object_object_add(o, "status", json_object_new_string(status));
		json_object_object_add(o, "lastTransitionTime", json_object_new_string(ts));
		c->changed = true;
	}
	if(!str_field_is(o, "reason", reason)) {
		json_object_object_add(o, "reason", json_object_new_string(reason));
		c->changed = true;
	}
	if(!str_field_is(o, "message", message ? message : "")) {
		json_object_object_add(o, "message", json_object_new_string(message ? message : ""));
		c->changed = true;
	}
	if(json_object_get_int64(json_object_object_get(o, "observedGeneration")) != generation) {
		json_object_object_add(o, "observedGeneration", json_object_new_int64(generation));
		c->changed = true;
	}
	return 0;
}

const char *pr_conds_status(const pr_conds *c, const char *type)
{
	json_object *o = find(c, type);
	return o ? json_object_get_string(json_object_object_get(o, "status")) : NULL;
}

const char *pr_conds_reason(const pr_conds *c, const char *type)
{
	json_object *o = find(c, type);
	return o ? json_object_get_string(json_object_object_get(o, "reason")) : NULL;
}
