/* Node-group instance listings shared by the classes and the controller:
 * one cloud call per group per pass, the answer checked and copied. */
#include "classes/class.h"
#include "util/str.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* g->inst is one block: the array, then every string it points to
 * (copy_instances). */
void pr_group_unlist(pr_class_group *g)
{
	free(g->inst);
	free(g->list_err);
	g->inst = NULL;
	g->ninst = 0;
	g->list_err = NULL;
	g->list_rc = 0;
	g->listed = false;
	g->list_seq++;
}

/* "code: message" of a failed instance, cut to PR_INST_ERRMSG_MAX
 * characters, copied to out (when not NULL, with its NUL); returns its
 * length. */
#define PR_INST_ERRMSG_MAX 599

static size_t errmsg_put(char *out, const prd_cloud_instance *in)
{
	char m[PR_INST_ERRMSG_MAX + 1];
	int n = snprintf(m, sizeof(m), "%s%s%s", in->error_code ? in->error_code : "error",
			 in->error_message ? ": " : "", in->error_message ? in->error_message : "");
	size_t len = n < 0 ? 0 : (size_t)n > PR_INST_ERRMSG_MAX ? PR_INST_ERRMSG_MAX : (size_t)n;
	m[len] = '\0';
	if(out)
		memcpy(out, m, len + 1);
	return len;
}

static char *put_str(char **text, const char *s, size_t len)
{
	char *at = *text;
	memcpy(at, s, len);
	at[len] = '\0';
	*text += len + 1;
	return at;
}

/* Check the driver's answer, then copy it into one block: a pass lists
 * every group with a plan in flight, so this is two allocations fewer per
 * instance. On error g->inst stays NULL. */
static int copy_instances(pr_class_group *g, const prd_cloud_instance *arr, size_t n, prd_err *err)
{
	const prd_cloud_driver *api = g->drv->api;
	bool origin = cloud_instance_has_origin(api);
	size_t i, head = (n + 1) * sizeof(*g->inst), text_len = 0;
	char *block, *text;
	for(i = 0; i < n; i++) {
		const prd_cloud_instance *v = cloud_instance_at(api, arr, i);
		if(!v->id || !v->id[0])
			return prd_err_set(err, PRD_EIO, "driver %s: instances(%s): instance %zu has no id",
					   api->name, g->id, i);
		if(v->error_class < PRD_CLOUD_ERRCLASS_NONE || v->error_class > PRD_CLOUD_ERRCLASS_OTHER ||
		   v->state < PRD_CLOUD_INSTANCE_RUNNING || v->state > PRD_CLOUD_INSTANCE_DELETING)
			return prd_err_set(err, PRD_EIO, "driver %s: instances(%s): instance %s has an unknown state",
					   api->name, g->id, v->id);
		text_len += strlen(v->id) + 1;
		if(v->node_name && v->node_name[0])
			text_len += strlen(v->node_name) + 1;
		if(v->error_class != PRD_CLOUD_ERRCLASS_NONE)
			text_len += errmsg_put(NULL, v) + 1;
		if(origin && v->owner && v->owner[0])
			text_len += strlen(v->owner) + 1;
	}
	block = malloc(head + text_len);
	if(!block)
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	memset(block, 0, head);
	g->inst = (pr_class_inst *)(void *)block;
	text = block + head;
	for(i = 0; i < n; i++) {
		const prd_cloud_instance *v = cloud_instance_at(api, arr, i);
		pr_class_inst *o = &g->inst[i];
		o->id = put_str(&text, v->id, strlen(v->id));
		if(v->node_name && v->node_name[0])
			o->node = put_str(&text, v->node_name, strlen(v->node_name));
		o->state = v->state;
		o->errclass = v->error_class;
		if(o->errclass != PRD_CLOUD_ERRCLASS_NONE) {
			o->errmsg = text;
			text += errmsg_put(text, v) + 1;
		}
		if(origin) {
			if(v->owner && v->owner[0])
				o->owner = put_str(&text, v->owner, strlen(v->owner));
			o->created_ns = v->created_ns > 0 ? v->created_ns : 0;
		}
	}
	g->ninst = n;
	return 0;
}

void pr_owner_token(const char *intent_id, char out[PR_OWNER_MAX])
{
	size_t i;
	for(i = 0; intent_id[i] && i < PR_OWNER_MAX - 1; i++)
		out[i] = intent_id[i] == '/' ? '.' : intent_id[i] == '#' ? '-' : intent_id[i];
	out[i] = '\0';
}

int64_t pr_plan_began(const char *plan_id)
{
	const char *slash = strchr(plan_id, '/');
	char *end;
	long long t;
	if(!slash)
		return 0;
	t = strtoll(slash + 1, &end, 10);
	return end != slash + 1 && (*end == '#' || !*end) && t > 0 ? t : 0;
}

int pr_group_refresh_target(pr_class_group *g, prd_err *err)
{
	prd_cloud_node_group *v = NULL;
	prd_cloud_error de;
	size_t n = 0, i;
	int rc;
	if(!g->target_stale)
		return 0;
	if(g->nap_new) {
		/* Not created yet: empty, whatever was asked. */
		g->target_stale = false;
		return 0;
	}
	memset(&de, 0, sizeof(de));
	rc = g->drv->api->node_groups(g->drv->state, &v, &n, &de);
	if(rc) {
		de.message[sizeof(de.message) - 1] = '\0';
		return cloud_driver_error(g->drv, "node groups", de.code ? de.code : PRD_CLOUD_EIO, &de, err);
	}
	rc = prd_err_set(err, PRD_ENOTFOUND, "driver %s no longer lists node group %s", g->drv->api->name, g->id);
	for(i = 0; v && i < n; i++) {
		if(v[i].id && !strcmp(v[i].id, g->id)) {
			g->target = v[i].target_size;
			g->target_stale = false;
			rc = 0;
			break;
		}
	}
	if(v)
		g->drv->api->release_node_groups(g->drv->state, v, n);
	return rc;
}

static int group_list(pr_class_group *g, prd_err *err);

int pr_group_list(pr_class_group *g, prd_err *err)
{
	prd_err le;
	int rc;
	if(g->listed) {
		if(g->list_rc)
			prd_err_set(err, g->list_rc, "%s", g->list_err ? g->list_err : "cannot list instances");
		return g->list_rc;
	}
	rc = group_list(g, &le);
	if(rc)
		prd_err_set(err, rc, "%s", le.msg);
	return rc;
}

static int group_list(pr_class_group *g, prd_err *err)
{
	prd_cloud_instance *v = NULL;
	prd_cloud_error de;
	size_t n = 0;
	int rc;
	if(g->nap_new) {
		/* Not created yet (node auto-provisioning): no instances. */
		g->listed = true;
		return 0;
	}
	memset(&de, 0, sizeof(de));
	rc = g->drv->api->instances(g->drv->state, g->id, &v, &n, &de);
	if(rc) {
		de.message[sizeof(de.message) - 1] = '\0';
		rc = cloud_driver_error(g->drv, "instances", de.code ? de.code : PRD_CLOUD_EIO, &de, err);
	} else if(n && !v) {
		rc = prd_err_set(err, PRD_EIO, "driver %s: instances(%s): %zu instances but no list", g->drv->api->name,
				 g->id, n);
	} else {
		rc = copy_instances(g, v, n, err);
	}
	if(v)
		g->drv->api->release_instances(g->drv->state, v, n);
	g->listed = true;
	if(rc) {
		g->list_rc = rc;
		g->list_err = str_dup(err->msg);
	}
	return rc;
}

bool pr_group_deletes_ids(const pr_class_group *g)
{
	const prd_cloud_driver *api = g->drv->api;
	return (CLOUD_DRIVER_HAS(api, delete_instances) && api->delete_instances) ||
	       (CLOUD_DRIVER_HAS(api, delete_fenced) && api->delete_fenced);
}

int pr_group_delete(pr_class_group *g, const char *const *ids, size_t n, prd_cloud_error *de)
{
	const prd_cloud_driver *api = g->drv->api;
	int rc;
	memset(de, 0, sizeof(*de));
	if(!pr_group_deletes_ids(g)) {
		rc = api->delete_nodes(g->drv->state, g->id, ids, n, de);
	} else if(CLOUD_DRIVER_HAS(api, delete_fenced) && api->delete_fenced &&
		  (g->fence_term || !CLOUD_DRIVER_HAS(api, delete_instances) || !api->delete_instances)) {
		prd_cloud_delete rq;
		memset(&rq, 0, sizeof(rq));
		rq.struct_size = sizeof(rq);
		rq.group_id = g->id;
		rq.instance_ids = ids;
		rq.count = n;
		rq.fence_key = g->fence_term ? g->fence_key : NULL;
		rq.fence_term = g->fence_term;
		rc = api->delete_fenced(g->drv->state, &rq, de);
	} else {
		rc = api->delete_instances(g->drv->state, g->id, ids, n, de);
	}
	de->message[sizeof(de->message) - 1] = '\0';
	return rc;
}
