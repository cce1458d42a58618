/* What happened during a simulation, in simulated time: condition
 * transitions of every ProvisioningRequest and the node groups' sizes.
 * cmd_simulate feeds it after every controller pass; the report and the
 * plot read it. */
#include "sim/sim.h"

#include "util/rfc3339.h"
#include "util/str.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const state_names[SIM_NSTATES] = { "Pending", "ScaleUpInProgress", "Provisioned", "Failed",
						       "BookingExpired" };

const char *sim_state_name(int state)
{
	return state >= 0 && state < SIM_NSTATES ? state_names[state] : "Unknown";
}

void sim_record_init(sim_record *r, int64_t start, int64_t end)
{
	memset(r, 0, sizeof(*r));
	r->start = start;
	r->end = end;
}

void sim_record_free(sim_record *r)
{
	size_t i;
	for(i = 0; i < r->ntr; i++) {
		sim_transition *t = &r->tr[i];
		free(t->ns);
		free(t->name);
		free(t->type);
		free(t->status);
		free(t->reason);
		free(t->message);
	}
	for(i = 0; i < r->nsmp; i++)
		free(r->smp[i].group);
	for(i = 0; i < r->nreq; i++) {
		free(r->req[i].ns);
		free(r->req[i].name);
	}
	for(i = 0; i < r->ngroups; i++)
		free(r->groups[i]);
	free(r->tr);
	free(r->smp);
	free(r->req);
	free(r->groups);
	memset(r, 0, sizeof(*r));
}

/* Room for one more element of size `sz` in *v. */
static int grow(void **v, size_t *cap, size_t n, size_t sz)
{
	void *nv;
	size_t nc;
	if(n < *cap)
		return 0;
	nc = *cap ? *cap * 2 : 16;
	nv = realloc(*v, nc * sz);
	if(!nv)
		return PRD_ENOMEM;
	*v = nv;
	*cap = nc;
	return 0;
}

static const char *jstr(json_object *o, const char *key)
{
	json_object *v = json_object_object_get(o, key);
	return v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
}

/* The index of request ns/name, registered on first sight. */
static int req_index(sim_record *r, const char *ns, const char *name, int64_t created, size_t *out)
{
	size_t i;
	for(i = 0; i < r->nreq; i++)
		if(!strcmp(r->req[i].ns, ns) && !strcmp(r->req[i].name, name)) {
			*out = i;
			return 0;
		}
	if(grow((void **)&r->req, &r->cap_req, r->nreq, sizeof(*r->req)))
		return PRD_ENOMEM;
	r->req[r->nreq].ns = str_dup(ns);
	r->req[r->nreq].name = str_dup(name);
	r->req[r->nreq].created = created;
	if(!r->req[r->nreq].ns || !r->req[r->nreq].name) {
		free(r->req[r->nreq].ns);
		free(r->req[r->nreq].name);
		return PRD_ENOMEM;
	}
	*out = r->nreq++;
	return 0;
}

/* The newest recorded transition of condition `type` of ns/name, or NULL. */
static const sim_transition *last_of(const sim_record *r, const char *ns, const char *name, const char *type)
{
	size_t i = r->ntr;
	while(i-- > 0) {
		const sim_transition *t = &r->tr[i];
		if(!strcmp(t->type, type) && !strcmp(t->name, name) && !strcmp(t->ns, ns))
			return t;
	}
	return NULL;
}

int sim_record_request(sim_record *r, int64_t t, json_object *pr, bool initial)
{
	json_object *md = json_object_object_get(pr, "metadata");
	json_object *conds = json_object_object_get(json_object_object_get(pr, "status"), "conditions");
	const char *ns = jstr(md, "namespace"), *name = jstr(md, "name"), *ct = jstr(md, "creationTimestamp");
	int64_t created = r->start;
	size_t i, idx;

	if(!ns || !name)
		return 0;
	if(ct && rfc3339_parse(ct, &created, NULL) == 0 && created < r->start)
		created = r->start;
	if(req_index(r, ns, name, created, &idx))
		return PRD_ENOMEM;
	for(i = 0; conds && json_object_is_type(conds, json_type_array) && i < json_object_array_length(conds); i++) {
		json_object *c = json_object_array_get_idx(conds, i);
		const char *type = jstr(c, "type"), *status = jstr(c, "status");
		const char *reason = jstr(c, "reason"), *message = jstr(c, "message");
		const sim_transition *prev;
		sim_transition *nt;
		if(!type || !status)
			continue;
		prev = last_of(r, ns, name, type);
		if(prev && str_eq(prev->status, status) && str_eq(prev->reason, reason ? reason : "") &&
		   str_eq(prev->message, message ? message : ""))
			continue;
		if(grow((void **)&r->tr, &r->cap_tr, r->ntr, sizeof(*r->tr)))
			return PRD_ENOMEM;
		nt = &r->tr[r->ntr];
		memset(nt, 0, sizeof(*nt));
		nt->t = t;
		nt->initial = initial;
		nt->ns = str_dup(ns);
		nt->name = str_dup(name);
		nt->type = str_dup(type);
		nt->status = str_dup(status);
		nt->reason = str_dup(reason ? reason : "");
		nt->message = str_dup(message ? message : "");
		if(!nt->ns || !nt->name || !nt->type || !nt->status || !nt->reason || !nt->message) {
			free(nt->ns);
			free(nt->name);
			free(nt->type);
			free(nt->status);
			free(nt->reason);
			free(nt->message);
			return PRD_ENOMEM;
		}
		r->ntr++;
	}
	return 0;
}

int sim_record_size(sim_record *r, int64_t t, const char *group, int32_t target, int32_t ready)
{
	size_t i = r->nsmp;
	bool known = false;
	sim_sample *s;

	while(i-- > 0)
		if(!strcmp(r->smp[i].group, group)) {
			if(r->smp[i].target == target && r->smp[i].ready == ready)
				return 0;
			break;
		}
	for(i = 0; i < r->ngroups && !known; i++)
		known = !strcmp(r->groups[i], group);
	if(!known) {
		char **ng = realloc(r->groups, (r->ngroups + 1) * sizeof(*ng));
		if(!ng)
			return PRD_ENOMEM;
		r->groups = ng;
		if(!(ng[r->ngroups] = str_dup(group)))
			return PRD_ENOMEM;
		r->ngroups++;
	}
	if(grow((void **)&r->smp, &r->cap_smp, r->nsmp, sizeof(*r->smp)))
		return PRD_ENOMEM;
	s = &r->smp[r->nsmp];
	s->t = t;
	s->target = target;
	s->ready = ready;
	if(!(s->group = str_dup(group)))
		return PRD_ENOMEM;
	r->nsmp++;
	return 0;
}

/* Final conditions win over Provisioned: a request that failed or whose
 * booking expired stays so even though Provisioned keeps its last value. */
int sim_state_of(const char *provisioned, const char *provisioned_reason, const char *failed,
		 const char *booking_expired)
{
	if(str_eq(failed, "True"))
		return SIM_FAILED;
	if(str_eq(booking_expired, "True"))
		return SIM_BOOKING_EXPIRED;
	if(str_eq(provisioned, "True"))
		return SIM_PROVISIONED;
	if(str_eq(provisioned, "False") && str_eq(provisioned_reason, "ScaleUpInProgress"))
		return SIM_SCALEUP;
	return SIM_PENDING;
}

/* Append [from, to) in `state` to the spans. */
static int span_push(sim_span **v, size_t *cap, size_t *n, int64_t from, int64_t to, int state,
		     const sim_transition *why)
{
	if(to <= from)
		return 0;
	if(grow((void **)v, cap, *n, sizeof(**v)))
		return PRD_ENOMEM;
	(*v)[*n].from = from;
	(*v)[*n].to = to;
	(*v)[*n].state = state;
	(*v)[*n].type = why ? why->type : NULL;
	(*v)[*n].reason = why ? why->reason : NULL;
	(*v)[*n].message = why ? why->message : NULL;
	(*n)++;
	return 0;
}

int sim_record_spans(const sim_record *r, size_t idx, sim_span **spans, size_t *n)
{
	const sim_req *q = &r->req[idx];
	const char *prov = NULL, *prov_reason = NULL, *failed = NULL, *expired = NULL;
	sim_span *v = NULL;
	size_t i, cnt = 0, cap = 0;
	int64_t from = q->created;
	int state = SIM_PENDING, rc = 0;
	/* The latest change within the current span (why), when it came
	 * (why_t), and what it was before changes at that instant (earlier):
	 * a span ends with what held before the instant its successor began,
	 * not with a change made at that same instant. */
	const sim_transition *why = NULL, *earlier = NULL;
	int64_t why_t = INT64_MIN;

	for(i = 0; !rc && i < r->ntr; i++) {
		const sim_transition *t = &r->tr[i];
		int64_t at = t->initial || t->t < from ? from : t->t;
		int next;
		if(strcmp(t->ns, q->ns) || strcmp(t->name, q->name))
			continue;
		if(!strcmp(t->type, "Provisioned")) {
			prov = t->status;
			prov_reason = t->reason;
		} else if(!strcmp(t->type, "Failed"))
			failed = t->status;
		else if(!strcmp(t->type, "BookingExpired"))
			expired = t->status;
		next = sim_state_of(prov, prov_reason, failed, expired);
		if(next == state) {
			if(t->reason && *t->reason) { /* e.g. CapacityIsNotFound while Pending */
				if(at != why_t)
					earlier = why;
				why = t;
				why_t = at;
			}
			continue;
		}
		rc = span_push(&v, &cap, &cnt, from, at, state, why_t < at ? why : earlier);
		from = at;
		state = next;
		why = earlier = t;
		why_t = at;
	}
	if(!rc)
		rc = span_push(&v, &cap, &cnt, from, r->end, state, why);
	if(rc) {
		free(v);
		v = NULL;
		cnt = 0;
	}
	*spans = v;
	*n = cnt;
	return rc;
}

void sim_time_str(int64_t t, char *out, size_t n)
{
	if(rfc3339_format(t, out, n))
		snprintf(out, n, "%lld", (long long)t);
}

void sim_offset_str(int64_t start, int64_t t, char *out, size_t n)
{
	long long s = (long long)((t - start) / PRD_NS_PER_SEC), h, m, sec;
	const char *sign = s < 0 ? "-" : "+";
	if(s < 0)
		s = -s;
	h = s / 3600;
	m = s / 60 % 60;
	sec = s % 60;
	if(h && !m && !sec)
		snprintf(out, n, "%s%lldh", sign, h);
	else if(h && !sec)
		snprintf(out, n, "%s%lldh%02lldm", sign, h, m);
	else if(h)
		snprintf(out, n, "%s%lldh%02lldm%02llds", sign, h, m, sec);
	else if(m && !sec)
		snprintf(out, n, "%s%lldm", sign, m);
	else if(m)
		snprintf(out, n, "%s%lldm%02llds", sign, m, sec);
	else
		snprintf(out, n, "%s%llds", sign, sec);
}
