/* core/v1 Events about ResourcePools, written through a kube_api.
 *
 * kube/events.h has a full recorder (aggregation, spam filter) but it is
 * bound to the REST client; the pool reconciler talks through kube_api so
 * it runs unchanged against the in-memory store. Repeats are filtered by
 * the reconciler itself (one Warning per pool, reason and message per
 * window), so a plain create is enough here. */
#include "pools/pools.h"
#include "ops/log.h"
#include "util/rfc3339.h"
#include "util/str.h"

#include <stdlib.h>
#include <string.h>

/* The string member `key` of o's object member `parent` (parent NULL: of
 * o itself), or def. */
static const char *member(json_object *o, const char *parent, const char *key, const char *def)
{
	json_object *p = o, *v = NULL;
	if(parent && !json_object_object_get_ex(o, parent, &p))
		return def;
	if(!json_object_object_get_ex(p, key, &v) || !json_object_is_type(v, json_type_string))
		return def;
	return json_object_get_string(v);
}

int pool_event_write(const kube_api *api, const clk *clock, json_object *obj, const char *type,
		     const char *reason, const char *msg, prd_err *err)
{
	const char *name = member(obj, "metadata", "name", NULL);
	json_object *ev, *meta, *inv, *src;
	char now[RFC3339_MAX], prefix[256];
	int rc;

	if(!name)
		return prd_err_set(err, PRD_EINVAL, "event about an object without metadata.name");
	if(!clock)
		clock = clk_real();
	if(rfc3339_format(clk_wall(clock), now, sizeof(now)))
		return prd_err_set(err, PRD_EINVAL, "clock out of range");
	/* generateName: the apiserver appends 5 random characters; a name
	 * cut to leave room for them is still recognisable. */
	snprintf(prefix, sizeof(prefix), "%.200s.", name);

	ev = json_object_new_object();
	meta = json_object_new_object();
	inv = json_object_new_object();
	src = json_object_new_object();
	if(!ev || !meta || !inv || !src) {
		json_object_put(ev);
		json_object_put(meta);
		json_object_put(inv);
		json_object_put(src);
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	}
	json_object_object_add(ev, "apiVersion", json_object_new_string("v1"));
	json_object_object_add(ev, "kind", json_object_new_string("Event"));
	json_object_object_add(ev, "metadata", meta);
	json_object_object_add(meta, "generateName", json_object_new_string(prefix));
	json_object_object_add(meta, "namespace", json_object_new_string("default"));
	json_object_object_add(ev, "involvedObject", inv);
	json_object_object_add(inv, "apiVersion",
			       json_object_new_string(member(obj, NULL, "apiVersion", "capsule.clastix.io/v1beta2")));
	json_object_object_add(inv, "kind", json_object_new_string(member(obj, NULL, "kind", "ResourcePool")));
	json_object_object_add(inv, "name", json_object_new_string(name));
	json_object_object_add(inv, "uid", json_object_new_string(member(obj, "metadata", "uid", "")));
	json_object_object_add(inv, "resourceVersion",
			       json_object_new_string(member(obj, "metadata", "resourceVersion", "")));
	json_object_object_add(ev, "type", json_object_new_string(type));
	json_object_object_add(ev, "reason", json_object_new_string(reason));
	json_object_object_add(ev, "message", json_object_new_string_len(msg, (int)strnlen(msg, 1024)));
	json_object_object_add(ev, "source", src);
	json_object_object_add(src, "component", json_object_new_string("provreqd"));
	json_object_object_add(ev, "firstTimestamp", json_object_new_string(now));
	json_object_object_add(ev, "lastTimestamp", json_object_new_string(now));
	json_object_object_add(ev, "count", json_object_new_int(1));
	json_object_object_add(ev, "reportingComponent", json_object_new_string("provreqd"));
	json_object_object_add(ev, "reportingInstance", json_object_new_string("provreqd"));

	rc = kube_api_call(api, "POST", "/api/v1/namespaces/default/events", NULL, ev, NULL, NULL, err);
	if(rc)
		log_warn("pool: could not write Event", "object", name, "reason", reason, "error",
			 err ? err->msg : prd_strerror(rc));
	json_object_put(ev);
	return rc;
}
