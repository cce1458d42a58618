/* Node-group instance listings shared by the classes and the controller:
 * one cloud call per group per pass, the answer checked and copied. */
#include "classes/class.h"
#include "util/str.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void pr_group_unlist(pr_class_group *g)
{
	size_t i;
	for(i = 0; i < g->ninst; i++) {
		free(g->inst[i].id);
		free(g->inst[i].node);
		free(g->inst[i].errmsg);
	}
	free(g->inst);
	free(g->list_err);
	g->inst = NULL;
	g->ninst = 0;
	g->list_err = NULL;
	g->list_rc = 0;
	g->listed = false;
	g->list_seq++;
}

static int copy_instances(pr_class_group *g, const prd_cloud_instance *v, size_t n, prd_err *err)
{
	size_t i;
	g->inst = calloc(n + 1, sizeof(*g->inst));
	if(!g->inst)
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	for(i = 0; i < n; i++) {
		pr_class_inst *o = &g->inst[i];
		if(!v[i].id || !v[i].id[0])
			return prd_err_set(err, PRD_EIO, "driver %s: instances(%s): instance %zu has no id",
					   g->drv->api->name, g->id, i);
		if(v[i].error_class < PRD_CLOUD_ERRCLASS_NONE || v[i].error_class > PRD_CLOUD_ERRCLASS_OTHER ||
		   v[i].state < PRD_CLOUD_INSTANCE_RUNNING || v[i].state > PRD_CLOUD_INSTANCE_DELETING)
			return prd_err_set(err, PRD_EIO, "driver %s: instances(%s): instance %s has an unknown state",
					   g->drv->api->name, g->id, v[i].id);
		o->id = str_dup(v[i].id);
		o->node = v[i].node_name && v[i].node_name[0] ? str_dup(v[i].node_name) : NULL;
		o->state = v[i].state;
		o->errclass = v[i].error_class;
		if(o->errclass != PRD_CLOUD_ERRCLASS_NONE) {
			char m[600];
			snprintf(m, sizeof(m), "%s%s%s", v[i].error_code ? v[i].error_code : "error",
				 v[i].error_message ? ": " : "", v[i].error_message ? v[i].error_message : "");
			o->errmsg = str_dup(m);
		}
		g->ninst++;
		if(!o->id || (v[i].node_name && v[i].node_name[0] && !o->node) ||
		   (o->errclass != PRD_CLOUD_ERRCLASS_NONE && !o->errmsg))
			return prd_err_set(err, PRD_ENOMEM, "out of memory");
	}
	return 0;
}

int pr_group_refresh_target(pr_class_group *g, prd_err *err)
{
	prd_cloud_node_group *v = NULL;
	prd_cloud_error de;
	size_t n = 0, i;
	int rc;
	if(!g->target_stale)
		return 0;
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
		size_t i;
		for(i = 0; i < g->ninst; i++) {
			free(g->inst[i].id);
			free(g->inst[i].node);
			free(g->inst[i].errmsg);
		}
		free(g->inst);
		g->inst = NULL;
		g->ninst = 0;
		g->list_rc = rc;
		g->list_err = str_dup(err->msg);
	}
	return rc;
}
