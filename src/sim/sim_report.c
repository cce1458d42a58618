/* The document behind `provreqd simulate -o json|yaml`. Field names are an
 * interface (docs/simulate.md documents them): add fields, never rename. */
#include "sim/sim.h"

#include "util/clock.h"

#include <stdlib.h>
#include <string.h>

/* "time" (RFC 3339) and "offsetSeconds" (since the start) of `t`. */
static void add_time(json_object *o, const sim_record *r, int64_t t)
{
	char ts[64];
	sim_time_str(t, ts, sizeof(ts));
	json_object_object_add(o, "time", json_object_new_string(ts));
	json_object_object_add(o, "offsetSeconds", json_object_new_int64((t - r->start) / PRD_NS_PER_SEC));
}

static json_object *request_states(const sim_record *r)
{
	json_object *arr = json_object_new_array();
	size_t i, k;
	for(i = 0; arr && i < r->nreq; i++) {
		json_object *o = json_object_new_object(), *st = json_object_new_array();
		sim_span *sp = NULL;
		size_t n = 0;
		if(!o || !st || sim_record_spans(r, i, &sp, &n)) {
			json_object_put(o);
			json_object_put(st);
			json_object_put(arr);
			return NULL;
		}
		json_object_object_add(o, "namespace", json_object_new_string(r->req[i].ns));
		json_object_object_add(o, "name", json_object_new_string(r->req[i].name));
		for(k = 0; k < n; k++) {
			json_object *s = json_object_new_object();
			char ts[64];
			if(!s)
				break;
			json_object_object_add(s, "state", json_object_new_string(sim_state_name(sp[k].state)));
			sim_time_str(sp[k].from, ts, sizeof(ts));
			json_object_object_add(s, "from", json_object_new_string(ts));
			sim_time_str(sp[k].to, ts, sizeof(ts));
			json_object_object_add(s, "to", json_object_new_string(ts));
			json_object_array_add(st, s);
		}
		free(sp);
		json_object_object_add(o, "states", st);
		json_object_array_add(arr, o);
	}
	return arr;
}

json_object *sim_report_doc(const sim_record *r, json_object *requests, json_object *groups, json_object *summary)
{
	json_object *doc = json_object_new_object(), *tr = json_object_new_array(), *sz = json_object_new_array();
	json_object *states = request_states(r);
	char ts[64];
	size_t i;

	if(!doc || !tr || !sz || !states) {
		json_object_put(doc);
		json_object_put(tr);
		json_object_put(sz);
		json_object_put(states);
		json_object_put(requests);
		json_object_put(groups);
		json_object_put(summary);
		return NULL;
	}
	json_object_object_add(doc, "schemaVersion", json_object_new_int(1));
	sim_time_str(r->start, ts, sizeof(ts));
	json_object_object_add(doc, "start", json_object_new_string(ts));
	sim_time_str(r->end, ts, sizeof(ts));
	json_object_object_add(doc, "end", json_object_new_string(ts));
	for(i = 0; i < r->ntr; i++) {
		const sim_transition *t = &r->tr[i];
		json_object *o;
		if(t->initial)
			continue;
		if(!(o = json_object_new_object()))
			break;
		add_time(o, r, t->t);
		json_object_object_add(o, "namespace", json_object_new_string(t->ns));
		json_object_object_add(o, "name", json_object_new_string(t->name));
		json_object_object_add(o, "type", json_object_new_string(t->type));
		json_object_object_add(o, "status", json_object_new_string(t->status));
		json_object_object_add(o, "reason", json_object_new_string(t->reason));
		json_object_object_add(o, "message", json_object_new_string(t->message));
		json_object_array_add(tr, o);
	}
	for(i = 0; i < r->nsmp; i++) {
		json_object *o = json_object_new_object();
		if(!o)
			break;
		add_time(o, r, r->smp[i].t);
		json_object_object_add(o, "group", json_object_new_string(r->smp[i].group));
		json_object_object_add(o, "target", json_object_new_int(r->smp[i].target));
		json_object_object_add(o, "ready", json_object_new_int(r->smp[i].ready));
		json_object_array_add(sz, o);
	}
	json_object_object_add(doc, "transitions", tr);
	json_object_object_add(doc, "nodeGroupSizes", sz);
	json_object_object_add(doc, "requestStates", states);
	json_object_object_add(doc, "requests", requests);
	json_object_object_add(doc, "nodeGroups", groups);
	json_object_object_add(doc, "summary", summary);
	return doc;
}
