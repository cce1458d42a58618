/* The ProvisioningRequest controller's lifecycle (pr_ctl_new, the setters,
 * pr_ctl_free) and its pass driver (pr_ctl_pass), which runs the stages in
 * order: world, snapshot, decide, write, housekeeping (ctl_int.h lists
 * them; docs/development.md, "The pass"). */
#include "provreq/controller.h"
#include "provreq/ctl_int.h"
#include "classes/driver_class.h"
#include "provreq/scaledown.h"
#include "ops/log.h"
#include "ops/metrics.h"
#include "util/str.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NS_PER_MIN (60 * PRD_NS_PER_SEC)

void pr_config_default(pr_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->booking_ttl_ns = 10 * NS_PER_MIN;
	cfg->provision_timeout_ns = 15 * NS_PER_MIN;
	cfg->template_grace_ns = 5 * NS_PER_MIN;
	cfg->max_age_ns = 7 * 24 * 60 * NS_PER_MIN;
	cfg->gc_after_ns = 7 * 24 * 60 * NS_PER_MIN;
	cfg->state_retention_ns = 24 * 60 * NS_PER_MIN;
	cfg->expander = "least-waste";
	cfg->scale_down = true;
	cfg->scale_down_idle_ns = 10 * NS_PER_MIN;
	cfg->driver_call_timeout_ns = 10 * PRD_NS_PER_SEC;
	cfg->nap_max_groups = 15;
	cfg->status_writers = 1;
	cfg->quota_check = true;
}

/* The built-in classes, then every class a loaded driver serves. */
static int register_classes(pr_ctl *c, prd_err *err)
{
	size_t i, k;
	int rc = pr_class_registry_new(&c->classes, err);
	for(i = 0; !rc && pr_class_builtins[i]; i++)
		rc = pr_class_register(c->classes, pr_class_builtins[i], "built-in", err);
	for(i = 0; !rc && c->drivers && i < c->drivers->n; i++) {
		cloud_driver *d = c->drivers->v[i];
		const char *const *names;
		if(!d->api->provisioning_classes || !d->api->provision)
			continue;
		names = d->api->provisioning_classes(d->state);
		for(k = 0; !rc && names && names[k]; k++) {
			pr_class_module *m = NULL, **v;
			char who[200];
			v = realloc(c->dclasses, (c->ndclasses + 1) * sizeof(*v));
			if(!v)
				return prd_err_set(err, PRD_ENOMEM, "out of memory");
			c->dclasses = v;
			rc = pr_driver_class_new(d, names[k], c->cfg.driver_call_timeout_ns, &m, err);
			if(rc)
				break;
			c->dclasses[c->ndclasses++] = m;
			snprintf(who, sizeof(who), "driver %s (%s)", d->api->name, d->path ? d->path : "?");
			rc = pr_class_register(c->classes, m, who, err);
			if(!rc)
				log_info("provisioning class served by a driver", "class", names[k], "driver", d->api->name);
		}
	}
	return rc;
}

int pr_ctl_new(const pr_config *cfg, const clk *clock, const kube_api *api, state_db *db,
	       cloud_drivers *drivers, pr_ctl **out, prd_err *err)
{
	pr_ctl *c = calloc(1, sizeof(*c));
	int rc;
	if(!c)
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	c->cfg = *cfg;
	c->clock = clock ? clock : clk_real();
	c->api = *api;
	c->db = db;
	c->drivers = drivers;
	hmap_init(&c->written, free);
	hmap_init(&c->unowned, NULL);
	hmap_init(&c->idle_since, free);
	hmap_init(&c->consumers, NULL);
	hmap_init(&c->pod_blocked, NULL);
	hmap_init(&c->pod_users, free);
	hmap_init(&c->nfp, free);
	hmap_init(&c->nodes_by_name, NULL);
	hmap_init(&c->tpls, pr__put_json);
	hmap_init(&c->born, free);
	hmap_init(&c->tmpl_said, free);
	hmap_init(&c->made, NULL);
	hmap_init(&c->bres, NULL);
	arena_init(&c->bres_ar);
	hmap_init(&c->class_kept, free);
	hmap_init(&c->prs, NULL);
	hmap_init(&c->fenced_groups, NULL);
	hmap_init(&c->groups_exported, NULL);
	hmap_init(&c->conds_logged, NULL);
	pr__dirty_init(c);
	pr__shards_init(c);
	pr__ledger_init(c, cfg->booking_ledger, cfg->ledger_object_bytes);
	c->need_rebuild = true;
	c->limits.booking_ttl_ns = cfg->booking_ttl_ns;
	c->limits.provision_timeout_ns = cfg->provision_timeout_ns;
	c->limits.max_nodes_total = cfg->max_nodes_total;
	c->limits.max_nodes_per_scaleup = cfg->max_nodes_per_scaleup;
	c->limits.nap = cfg->nap;
	c->limits.nap_max_groups = cfg->nap_max_groups;
	c->limits.scale_down_idle_ns = cfg->scale_down_idle_ns;
	c->limits.res_limits = cfg->res_limits;
	c->limits.nres_limits = cfg->nres_limits;
	rc = sched_expander_new(cfg->expander, NULL, 0, 1, &c->expander, err);
	if(rc) {
		free(c);
		return prd_err_prefix(err, "expander");
	}
	{
		kube_recorder_opts ro;
		memset(&ro, 0, sizeof(ro));
		ro.clock = c->clock;
		rc = kube_recorder_new(&c->api, &ro, &c->recorder, err);
		if(rc) {
			sched_expander_free(c->expander);
			free(c);
			return prd_err_prefix(err, "event recorder");
		}
	}
	rc = register_classes(c, err);
	if(rc) {
		pr_ctl_free(c);
		return rc;
	}
	*out = c;
	return 0;
}

/* What the modules kept across passes, while the modules are still there. */
static void free_class_kept(pr_ctl *c)
{
	const pr_class_module *const *mods;
	size_t i, n = c->classes ? pr_class_modules(c->classes, &mods) : 0;
	for(i = 0; i < n; i++) {
		void **cell = hmap_get(&c->class_kept, mods[i]->name);
		if(cell && *cell && mods[i]->kept_free)
			mods[i]->kept_free(*cell);
	}
	hmap_free(&c->class_kept);
}

void pr_ctl_free(pr_ctl *c)
{
	size_t i;
	if(!c)
		return;
	free_class_kept(c);
	pr_class_registry_free(c->classes);
	sched_snapshot_free(c->base);
	for(i = 0; i < c->ndclasses; i++)
		pr_driver_class_free(c->dclasses[i]);
	free(c->dclasses);
	sched_expander_free(c->expander);
	kube_recorder_free(c->recorder);
	pr__status_discard(c);
	pr__marks_discard(c);
	free(c->marks);
	hmap_free(&c->written);
	hmap_free(&c->unowned);
	hmap_free(&c->idle_since);
	json_object_put(c->details);
	free(c->fed_gen);
	free(c->fed);
	pr__dirty_free(c);
	pr__shards_free(c);
	pr__pclass_free(c);
	pr__ledger_free(c);
	hmap_free(&c->consumers);
	hmap_free(&c->pod_blocked);
	hmap_free(&c->pod_users);
	hmap_free(&c->nfp);
	hmap_free(&c->nodes_by_name);
	hmap_free(&c->tpls);
	hmap_free(&c->born);
	hmap_free(&c->tmpl_said);
	hmap_free(&c->made);
	hmap_free(&c->bres);
	arena_free(&c->bres_ar);
	pr__drop_kept_requests(c);
	hmap_free(&c->prs);
	hmap_free(&c->fenced_groups);
	hmap_free(&c->groups_exported);
	hmap_free(&c->conds_logged);
	free(c);
}

int pr_ctl_use_event_api(pr_ctl *c, const kube_api *api, unsigned senders, prd_err *err)
{
	kube_recorder_opts ro;
	kube_recorder *r = NULL;
	int rc;
	memset(&ro, 0, sizeof(ro));
	ro.clock = c->clock;
	ro.senders = senders;
	c->ev_api = *api;
	rc = kube_recorder_new(&c->ev_api, &ro, &r, err);
	if(rc)
		return prd_err_prefix(err, "event recorder");
	kube_recorder_free(c->recorder);
	c->recorder = r;
	return 0;
}

const pr_stats *pr_ctl_stats(const pr_ctl *c)
{
	return &c->stats;
}

void pr_ctl_use_informers(pr_ctl *c, const pr_informers *inf)
{
	c->inf = *inf;
	c->use_inf = true;
}

void pr_ctl_set_fence(pr_ctl *c, pr_fence_fn may_act, void *ud)
{
	c->may_act = may_act;
	c->may_act_ud = ud;
}

void pr_ctl_rebuild_from_api(pr_ctl *c)
{
	c->need_rebuild = true;
}

void pr_ctl_set_term_raise(pr_ctl *c, pr_term_raise_fn raise, void *ud)
{
	c->raise = raise;
	c->raise_ud = ud;
}

bool pr_ctl_fenced_out(const pr_ctl *c, char *why, size_t n)
{
	if(why && n)
		str_copy(why, n, c->fenced_out);
	return c->fenced_out[0] != '\0';
}

void pr_ctl_set_term(pr_ctl *c, const char *key, const char *identity, int64_t transitions)
{
	c->raises = 0;
	pr__term_apply(c, key, identity, transitions);
}

/* The world and its snapshot. The world stage reads (in informer mode it
 * returns with the caches locked); from what the locks still guard, the
 * local store is rebuilt on a new term, the shards' view synced and the
 * snapshot built; then the world stage lets the caches go. */
static int load(pr_ctl *c, pr_world *w, prd_err *err)
{
	int rc = pr__world_read(c, w, err);
	if(!rc) {
		pr__rebuild_on_new_term(c, w);
		pr__shards_sync(c, w);
		/* (The bookings go in when the pass first asks for it: pr__snap.) */
		rc = pr__snapshot_build(c, w, err);
	}
	return pr__world_done(c, w, rc, err);
}

/* What the pass made, in the reverse order of the stages: the snapshot's
 * base given back, the decide stage's gate answers, the world. */
static void end_pass(pr_ctl *c, pr_world *w)
{
	pr__snapshot_release(c, w);
	pr__quota_world_free(w);
	pr__world_free(w);
}

/* One pass: read the world (and build its snapshot), decide every request,
 * send what was decided, keep house; then give the snapshot's base back and
 * free the world. */
int pr_ctl_pass(pr_ctl *c, int64_t *next_wake_ns, prd_err *err)
{
	int64_t t0 = clk_mono(clk_real());
	pr_world w;
	int rc;

	c->now = clk_wall(c->clock);
	c->next_wake = INT64_MAX;
	c->stats.passes++;
	c->fenced = false;
	c->fenced_out[0] = '\0';
	hmap_free(&c->conds_logged);
	hmap_init(&c->conds_logged, NULL);
	c->stats.requests_seen = 0;
	c->stats.requests_decided = 0;
	rc = load(c, &w, err);
	if(rc) {
		end_pass(c, &w);
		metrics_counter_add(M_RECONCILE_ERRORS, METRICS_L("provreq", prd_strerror(rc)), 1);
		return prd_err_prefix(err, "reading the cluster");
	}
	pr__decide(c, &w);
	pr__write(c, &w);
	pr__housekeeping(c, &w);
	end_pass(c, &w);
	pr__bres_trim(c); /* (the snapshot no longer borrows them) */
	metrics_observe(M_RECONCILE_DURATION, METRICS_L("provreq"),
			(double)(clk_mono(clk_real()) - t0) / (double)PRD_NS_PER_SEC);
	if(next_wake_ns)
		*next_wake_ns = c->next_wake;
	return 0;
}

int pr_ctl_set_priorities(pr_ctl *c, const struct sched_priority *prio, size_t n, prd_err *err)
{
	return sched_expander_set_priorities(c->expander, prio, n, err);
}
