/* The look-ups every stage of a pass makes: the class module serving a
 * class name, a request's podSets resolved against the world's
 * PodTemplates, a node group by id. They read the pass's data and call
 * nothing above them (docs/development.md, "The pass"). */
#include "provreq/convert.h"
#include "provreq/ctl_int.h"

#include <stdio.h>
#include <string.h>

const pr_class_module *pr__module_for(const pr_ctl *c, const char *name)
{
	return pr_class_lookup(c->classes, name);
}

/* Resolve the request's PodTemplates into sched podSets. Returns 0, or
 * PRD_ENOTFOUND naming the first missing template in `missing`, or another
 * code when a template cannot be simulated. */
int pr__resolve_podsets(pr_world *w, const kube_provreq *pr, sched_podset *sets, char *missing, size_t mlen,
			   prd_err *err)
{
	size_t i;
	int rc;
	for(i = 0; i < pr->npod_sets; i++) {
		char key[600];
		json_object *t;
		sched_pod_spec *ps;
		json_object *md;
		snprintf(key, sizeof(key), "%s/%s", pr->meta.ns, pr->pod_sets[i].template_name);
		t = hmap_get(w->tpls, key);
		if(!t) {
			snprintf(missing, mlen, "%s", pr->pod_sets[i].template_name);
			return PRD_ENOTFOUND;
		}
		ps = arena_alloc(&w->ar, sizeof(*ps));
		if(!ps)
			return prd_err_set(err, PRD_ENOMEM, "out of memory");
		md = json_object_object_get(t, "metadata");
		if((rc = pr_conv_pod_dra(&w->ar, json_object_object_get(t, "spec"), md, pr->meta.ns, &w->dra, ps,
					 err))) {
			if(rc == PRD_ENOTFOUND) {
				/* A ResourceClaimTemplate or DeviceClass: waited for like a
				 * PodTemplate. */
				snprintf(missing, mlen, "%s", err ? err->msg : "?");
				return PRD_ENOTFOUND;
			}
			return prd_err_prefix(err, "PodTemplate %s", pr->pod_sets[i].template_name);
		}
		sets[i].pod = ps;
		sets[i].count = pr->pod_sets[i].count;
	}
	return 0;
}

pr_group *pr__find_group(pr_world *w, const char *id)
{
	size_t i;
	for(i = 0; i < w->ngroups; i++)
		if(!strcmp(w->groups[i].id, id))
			return &w->groups[i];
	return NULL;
}
