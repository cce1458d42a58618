/* One topology domain per gang (part of the decide stage).
 *
 * Kueue's topology-aware scheduling marks a PodSet's template with
 * kueue.x-k8s.io/podset-required-topology: LABEL (all its pods in nodes
 * that share one value of LABEL) or -preferred-topology (one value if
 * possible). For a request whose PodTemplates carry either, provreqd picks
 * one domain (a value of LABEL) for all the annotated podSets of the
 * request before the class decides it, and hands the class those podSets
 * with LABEL=VALUE added to their nodeSelector: check-capacity then books
 * only in that domain, and an atomic scale-up places what fits on the
 * domain's nodes and buys nodes only of groups whose template carries the
 * label. The chosen domain goes to provisioningClassDetails key
 * topologyDomain ("LABEL=VALUE", and VALUE alone under topologyDomainValue)
 * with a positive answer, so Kueue can pin the pods there (podSetUpdates); a scale-up in flight keeps its domain (the detail) until
 * it ends.
 *
 * The domain: the first, in order of value, where every pod fits on the
 * existing nodes (bookings and other requests counted). When none has room:
 * required, check-capacity answers CapacityIsNotFound saying what each
 * domain could take; a class that can add nodes gets the domain with a node
 * group (then the most pods placed on existing nodes, then the value).
 * Preferred falls back to no constraint.
 *
 * Reads: the requests' PodTemplates (annotations), the pass's snapshot
 * (forked and reverted), the node groups' templates.
 * Writes: the podSets handed to the class (pass arena), the request's
 * conditions when it is answered here, the topologyDomain detail. */
#include "provreq/ctl_int.h"
#include "classes/details.h"
#include "kube/selector.h"
#include "ops/log.h"
#include "util/buf.h"
#include "util/str.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const json_object *annotations(pr_world *w, const kube_provreq *pr, size_t i)
{
	char key[600];
	json_object *t;
	snprintf(key, sizeof(key), "%s/%s", pr->meta.ns, pr->pod_sets[i].template_name ? pr->pod_sets[i].template_name : "");
	t = hmap_get(w->tpls, key);
	return t ? json_object_object_get(json_object_object_get(t, "metadata"), "annotations") : NULL;
}

static const char *ann(const json_object *a, const char *key)
{
	json_object *v = NULL;
	if(!a || !json_object_object_get_ex(a, key, &v) || !json_object_is_type(v, json_type_string))
		return NULL;
	return json_object_get_string(v);
}

/* The podSets' topology asks: the label (NULL: none), required or only
 * preferred, and which podSets carry it. -1 with msg when the podSets ask
 * for different labels or a label that is not one. */
static int read_ask(pr_world *w, const kube_provreq *pr, size_t nsets, const char **label, bool *required, bool *on,
		    char *msg, size_t len)
{
	size_t i;
	prd_err e;
	*label = NULL;
	*required = false;
	for(i = 0; i < nsets; i++) {
		const json_object *a = annotations(w, pr, i);
		const char *req = ann(a, PR_ANN_REQUIRED_TOPOLOGY), *pref = ann(a, PR_ANN_PREFERRED_TOPOLOGY);
		const char *l = req ? req : pref;
		on[i] = l != NULL;
		if(!l)
			continue;
		if(sel_validate_key(l, &e)) {
			snprintf(msg, len, "PodTemplate %s: %s: %s", pr->pod_sets[i].template_name,
				 req ? PR_ANN_REQUIRED_TOPOLOGY : PR_ANN_PREFERRED_TOPOLOGY, e.msg);
			return -1;
		}
		if(*label && strcmp(*label, l)) {
			snprintf(msg, len,
				 "the podSets ask for one domain of different topology labels (%s and %s); provreqd keeps a "
				 "request's podSets in one domain of one label",
				 *label, l);
			return -1;
		}
		*label = l;
		*required |= req != NULL;
	}
	return 0;
}

/* The podSets with LABEL=VALUE added to the nodeSelector of those `on`,
 * into out (arena copies). 0 or PRD_ENOMEM. */
static int constrain(arena *ar, const sched_podset *sets, size_t n, const bool *on, const char *label,
		     const char *value, sched_podset *out)
{
	size_t i;
	for(i = 0; i < n; i++) {
		sched_pod_spec *p;
		sched_label *nsel;
		out[i] = sets[i];
		if(!on[i])
			continue;
		if(!(p = arena_alloc(ar, sizeof(*p))) ||
		   !(nsel = arena_array(ar, sets[i].pod->n_node_selector + 1, sizeof(*nsel))))
			return PRD_ENOMEM;
		*p = *sets[i].pod;
		if(p->n_node_selector)
			memcpy(nsel, p->node_selector, p->n_node_selector * sizeof(*nsel));
		nsel[p->n_node_selector].key = label;
		nsel[p->n_node_selector].value = value;
		p->node_selector = nsel;
		p->n_node_selector++;
		out[i].pod = p;
	}
	return 0;
}

static int str_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Every value of `label` on the snapshot's nodes and the groups' templates,
 * sorted, without repeats (arena). */
static const char **domains(arena *ar, const sched_snapshot *snap, const pr_class_host *h, const char *label,
			    size_t *n)
{
	size_t nn = sched_snapshot_node_count(snap), cap = nn + h->ngroups + 1, i, k, m = 0;
	const char **v = arena_array(ar, cap, sizeof(*v));
	if(!v)
		return NULL;
	for(i = 0; i < nn; i++) {
		const char *d = sched_snapshot_node_label(snap, i, label);
		if(d)
			v[m++] = d;
	}
	for(i = 0; i < h->ngroups; i++) {
		const pr_class_group *g = &h->groups[i];
		for(k = 0; g->has_tmpl && k < g->tmpl.n_labels; k++)
			if(g->tmpl.labels[k].key && !strcmp(g->tmpl.labels[k].key, label) && g->tmpl.labels[k].value)
				v[m++] = g->tmpl.labels[k].value;
	}
	qsort(v, m, sizeof(*v), str_cmp);
	for(i = 0, k = 0; i < m; i++)
		if(k == 0 || strcmp(v[k - 1], v[i]))
			v[k++] = v[i];
	*n = k;
	return v;
}

static bool group_in(const pr_class_host *h, const char *label, const char *value)
{
	size_t i, k;
	for(i = 0; i < h->ngroups; i++) {
		const pr_class_group *g = &h->groups[i];
		for(k = 0; g->has_tmpl && k < g->tmpl.n_labels; k++)
			if(g->tmpl.labels[k].key && !strcmp(g->tmpl.labels[k].key, label) && g->tmpl.labels[k].value &&
			   !strcmp(g->tmpl.labels[k].value, value))
				return true;
	}
	return false;
}

/* How many pods of the constrained podSets fit on the existing nodes;
 * -1 when the simulation fails (msg says why). */
static int64_t fits(sched_snapshot *snap, const sched_podset *sets, size_t n, char *msg, size_t len)
{
	sched_place_result res;
	prd_err e;
	int64_t placed = -1;
	memset(&res, 0, sizeof(res));
	if(sched_snapshot_fork(snap) == 0) {
		if(sched_place(snap, sets, n, &res, &e) == 0)
			placed = res.placed;
		else
			snprintf(msg, len, "cannot simulate the pods: %s", e.msg);
		sched_snapshot_revert(snap);
	}
	sched_place_result_free(&res);
	return placed;
}

static bool adds_nodes(const pr_class_ctx *x, const pr_class_req *req)
{
	const pr_class_module *m = pr__module_for(x->c, req->class_name);
	return !m || !m->existing_nodes_only;
}

int pr__topology_gate(pr_class_ctx *x, const pr_class_host *h, pr_class_req *req, const char **domain)
{
	pr_world *w = x->w;
	const char *label, **dv;
	bool required, *on;
	sched_snapshot *snap;
	sched_podset *try_, *best_sets = NULL;
	int64_t total = 0, best = -1;
	size_t i, nd = 0, best_i = 0;
	char msg[1200];
	buf why;
	*domain = NULL;
	if(!req->sets || !(on = arena_array(&w->ar, req->nsets + 1, sizeof(*on))))
		return 0;
	if(read_ask(w, x->pr, req->nsets, &label, &required, on, msg, sizeof(msg))) {
		h->failed(h->ctx, PR_R_INVALID, msg);
		return 1;
	}
	if(!label || !(snap = h->snapshot(h->ctx)))
		return 0;
	if(!(try_ = arena_array(&w->ar, req->nsets + 1, sizeof(*try_))) || !(dv = domains(&w->ar, snap, h, label, &nd)))
		return 0;
	for(i = 0; i < req->nsets; i++)
		total += req->sets[i].count;
	buf_init(&why);
	for(i = 0; i < nd; i++) {
		int64_t placed;
		bool better;
		if(constrain(&w->ar, req->sets, req->nsets, on, label, dv[i], try_))
			break;
		msg[0] = 0;
		if((placed = fits(snap, try_, req->nsets, msg, sizeof(msg))) < 0) {
			buf_free(&why);
			h->not_provisioned(h->ctx, PR_R_CHECK_FAILED, msg);
			return 1;
		}
		buf_printf(&why, "%s%s=%s: %lld", i ? ", " : "", label, dv[i], (long long)placed);
		if(placed == total) {
			best_i = i;
			best = placed;
			best_sets = try_;
			break;
		}
		/* Without room anywhere, a class that adds nodes gets the domain
		 * with a node group, then the most pods placed. */
		better = best < 0 || (group_in(h, label, dv[i]) && !group_in(h, label, dv[best_i])) ||
			 (group_in(h, label, dv[i]) == group_in(h, label, dv[best_i]) && placed > best);
		if(better) {
			best = placed;
			best_i = i;
			best_sets = arena_array(&w->ar, req->nsets + 1, sizeof(*best_sets));
			if(best_sets)
				memcpy(best_sets, try_, req->nsets * sizeof(*try_));
		}
	}
	if(best == total || (required && adds_nodes(x, req) && best_sets && (best > 0 || group_in(h, label, dv[best_i])))) {
		buf_free(&why);
		if(!best_sets)
			return 0;
		memcpy(req->sets, best_sets, req->nsets * sizeof(*req->sets));
		snprintf(msg, sizeof(msg), "%s=%s", label, dv[best_i]);
		*domain = arena_strdup(&w->ar, msg);
		return 0;
	}
	if(!required) {
		buf_free(&why);
		return 0; /* preferred: no one domain has room; any node will do */
	}
	if(nd == 0)
		snprintf(msg, sizeof(msg), "the pods must share one %s domain (%s), and no node%s carries that label", label,
			 PR_ANN_REQUIRED_TOPOLOGY, adds_nodes(x, req) ? " or node group" : "");
	else
		snprintf(msg, sizeof(msg),
			 "no single %s domain has room for all %lld pods (%s); pods that fit in each: %.600s%s", label,
			 (long long)total, PR_ANN_REQUIRED_TOPOLOGY, buf_str(&why),
			 adds_nodes(x, req) ? "; and no node group carries that label" : "");
	buf_free(&why);
	h->not_provisioned(h->ctx, PR_R_NOT_FOUND, msg);
	return 1;
}

int pr__topology_pin(pr_class_ctx *x, pr_class_req *req)
{
	pr_world *w = x->w;
	char *rec = pr_details_get(x->pr, PR_DETAIL_TOPOLOGY), *eq, msg[600];
	const char *label;
	bool required, *on;
	int rc = 0;
	if(!rec || !req->sets || !(eq = strchr(rec, '=')) || !(on = arena_array(&w->ar, req->nsets + 1, sizeof(*on)))) {
		free(rec);
		return 0;
	}
	if(read_ask(w, x->pr, req->nsets, &label, &required, on, msg, sizeof(msg)) == 0 && label &&
	   !strncmp(rec, label, (size_t)(eq - rec)) && strlen(label) == (size_t)(eq - rec)) {
		const char *value = arena_strdup(&w->ar, eq + 1);
		if(value)
			rc = constrain(&w->ar, req->sets, req->nsets, on, label, value, req->sets);
	}
	free(rec);
	return rc;
}

void pr__topology_after(pr_class_ctx *x, const char *domain)
{
	const char *status = pr_conds_status(x->conds, PR_COND_PROVISIONED);
	const char *reason = pr_conds_reason(x->conds, PR_COND_PROVISIONED);
	bool positive = status && (!strcmp(status, "True") || (reason && !strcmp(reason, PR_R_SCALING_UP)));
	char *had;
	if(!x->c->details)
		return;
	if(domain && positive) {
		pr_details_put(x->c->details, PR_DETAIL_TOPOLOGY, domain, NULL);
		pr_details_put(x->c->details, PR_DETAIL_TOPOLOGY_VALUE, strchr(domain, '=') + 1, NULL);
		return;
	}
	/* A domain recorded by an earlier answer that no longer holds. */
	if((had = pr_details_get(x->pr, PR_DETAIL_TOPOLOGY))) {
		pr_details_put(x->c->details, PR_DETAIL_TOPOLOGY, NULL, NULL);
		pr_details_put(x->c->details, PR_DETAIL_TOPOLOGY_VALUE, NULL, NULL);
		free(had);
	}
}
