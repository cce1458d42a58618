/* The kwok driver's asynchronous mode: a cloud that behaves like a real
 * one, for tests.
 *
 * An increase only raises the target: the requested instances are kept in
 * a state file (so they outlive provreqd: kill it, restart it, run two
 * replicas, and the cloud still knows what it was asked for). Each one
 * appears after createDelayMs as "creating" with its provider ID and no
 * node name; after registerDelayMs more its Node is created (the kwok
 * controller then makes it Ready, as its stages say). A share of the
 * instances fail instead (out of resources) and stay reported with their
 * error until deleted or cancelled; a share of the increases are refused
 * as a stockout; a share of every call fails as a transient error;
 * deleting an instance that has appeared takes deleteDelayMs.
 *
 * The cloud moves on lazily: whenever the driver is called, what is due by
 * then happens. The state file is locked (flock) for each step, so several
 * processes may share it. Random draws come from `seed`. */
#include "kwok/kwok_async.h"
#include "kwok/kwok_dra.h"
#include "kwok/kwok_view.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "util/rand.h"

#define NS_PER_MS 1000000LL

void kwok_async_free(kwok_async *a)
{
	size_t i;
	if(!a)
		return;
	free(a->state_file);
	for(i = 0; i < a->ngroups; i++)
		free(a->groups[i]);
	free(a->groups);
	free(a);
}

static int want_int(json_object *v, const char *key, long long lo, long long hi, long long *out,
		    prd_cloud_error *err)
{
	if(!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < lo || json_object_get_int64(v) > hi)
		return kwok_fail(err, PRD_CLOUD_EINVAL, "kwok config: async.%s must be an integer from %lld to %lld",
				 key, lo, hi);
	*out = json_object_get_int64(v);
	return 0;
}

int kwok_async_parse(kwok *k, json_object *v, prd_cloud_error *err)
{
	kwok_async *a;
	int rc = 0;
	if(!json_object_is_type(v, json_type_object))
		return kwok_fail(err, PRD_CLOUD_EINVAL, "kwok config: async must be a mapping");
	a = calloc(1, sizeof(*a));
	if(!a)
		return kwok_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	a->seed = 1;
	a->create_delay_ms = 1000;
	a->register_delay_ms = 2000;
	a->delete_delay_ms = 1000;
	json_object_object_foreach(v, key, val) {
		long long n = 0;
		if(rc)
			break;
		if(!strcmp(key, "stateFile")) {
			if(!json_object_is_type(val, json_type_string) || !json_object_get_string_len(val)) {
				rc = kwok_fail(err, PRD_CLOUD_EINVAL, "kwok config: async.stateFile must be a path");
				break;
			}
			a->state_file = kwok_strdup(json_object_get_string(val));
			if(!a->state_file)
				rc = kwok_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
		} else if(!strcmp(key, "groups")) {
			size_t i, m;
			if(!json_object_is_type(val, json_type_array)) {
				rc = kwok_fail(err, PRD_CLOUD_EINVAL, "kwok config: async.groups must be a list of group names");
				break;
			}
			m = json_object_array_length(val);
			a->groups = calloc(m + 1, sizeof(*a->groups));
			for(i = 0; a->groups && i < m && !rc; i++) {
				json_object *g = json_object_array_get_idx(val, i);
				if(!json_object_is_type(g, json_type_string))
					rc = kwok_fail(err, PRD_CLOUD_EINVAL, "kwok config: async.groups[%zu] must be a string", i);
				else if(!(a->groups[a->ngroups++] = kwok_strdup(json_object_get_string(g))))
					rc = kwok_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
			}
			if(!a->groups)
				rc = kwok_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
		} else if(!strcmp(key, "seed")) {
			if(!(rc = want_int(val, key, 0, INT64_MAX, &n, err)))
				a->seed = (uint64_t)n;
		} else if(!strcmp(key, "createDelayMs")) {
			if(!(rc = want_int(val, key, 0, 3600000, &n, err)))
				a->create_delay_ms = (long)n;
		} else if(!strcmp(key, "registerDelayMs")) {
			if(!(rc = want_int(val, key, 0, 3600000, &n, err)))
				a->register_delay_ms = (long)n;
		} else if(!strcmp(key, "deleteDelayMs")) {
			if(!(rc = want_int(val, key, 0, 3600000, &n, err)))
				a->delete_delay_ms = (long)n;
		} else if(!strcmp(key, "instanceFailurePercent")) {
			if(!(rc = want_int(val, key, 0, 100, &n, err)))
				a->instance_failure_pct = (int)n;
		} else if(!strcmp(key, "stockoutPercent")) {
			if(!(rc = want_int(val, key, 0, 100, &n, err)))
				a->stockout_pct = (int)n;
		} else if(!strcmp(key, "transientPercent")) {
			if(!(rc = want_int(val, key, 0, 100, &n, err)))
				a->transient_pct = (int)n;
		} else {
			rc = kwok_fail(err, PRD_CLOUD_EINVAL,
				       "kwok config: async: unknown key '%s' (known: stateFile, groups, seed, "
				       "createDelayMs, registerDelayMs, deleteDelayMs, instanceFailurePercent, "
				       "stockoutPercent, transientPercent)",
				       key);
		}
	}
	if(!rc && !a->state_file)
		rc = kwok_fail(err, PRD_CLOUD_EINVAL, "kwok config: async needs stateFile (where the cloud keeps "
						    "the instances it was asked for)");
	if(rc) {
		kwok_async_free(a);
		return rc;
	}
	a->rng = a->seed * 0x9e3779b97f4a7c15ULL + 1;
	kwok_async_free(k->async);
	k->async = a;
	return 0;
}

int kwok_async_check_groups(const kwok *k, prd_cloud_error *err)
{
	size_t i, j;
	for(i = 0; k->async && i < k->async->ngroups; i++) {
		for(j = 0; j < k->ngroups; j++)
			if(!strcmp(k->groups[j].id, k->async->groups[i]))
				break;
		if(j == k->ngroups)
			return kwok_fail(err, PRD_CLOUD_EINVAL, "kwok config: async.groups: '%s' is not a node group",
					 k->async->groups[i]);
	}
	return 0;
}

bool kwok_async_for(const kwok *k, const char *group)
{
	size_t i;
	if(!k->async)
		return false;
	if(!k->async->ngroups || !group)
		return true;
	for(i = 0; i < k->async->ngroups; i++)
		if(!strcmp(k->async->groups[i], group))
			return true;
	return false;
}

/* A draw with probability pct percent, from the seeded generator. */
static bool draw(kwok *k, int pct)
{
	if(pct <= 0)
		return false;
	return (int)(prd_splitmix64(&k->async->rng) % 100) < pct;
}

int kwok_async_transient(kwok *k, const char *group, const char *op, prd_cloud_error *err)
{
	if(!kwok_async_for(k, group) || !draw(k, k->async->transient_pct))
		return 0;
	return kwok_fail(err, PRD_CLOUD_EAGAIN, "kwok: %s%s%s: the cloud is unavailable, try again (simulated)", op,
			 group ? " " : "", group ? group : "");
}

/* ---- the state file ---------------------------------------------------- */

typedef int (*state_fn)(kwok *k, json_object *insts, void *ud, bool *dirty, prd_cloud_error *err);

/* Run fn on the instance array of the state file, under its lock; write it
 * back (atomically) when fn says it changed. */
static int with_state(kwok *k, state_fn fn, void *ud, prd_cloud_error *err)
{
	char lockp[4200], tmp[4200];
	json_object *doc = NULL, *insts = NULL;
	bool dirty = false;
	int fd, rc;
	snprintf(lockp, sizeof(lockp), "%s.lock", k->async->state_file);
	snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", k->async->state_file, (long)getpid());
	fd = open(lockp, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if(fd < 0)
		return kwok_fail(err, PRD_CLOUD_EIO, "kwok: async state %s: %s", lockp, strerror(errno));
	while(flock(fd, LOCK_EX) != 0 && errno == EINTR)
		;
	if(access(k->async->state_file, F_OK) == 0) {
		doc = json_object_from_file(k->async->state_file);
		if(!doc || !json_object_object_get_ex(doc, "instances", &insts) ||
		   !json_object_is_type(insts, json_type_array)) {
			rc = kwok_fail(err, PRD_CLOUD_EIO, "kwok: async state %s is not a state file (delete it to start "
							   "an empty cloud)",
				       k->async->state_file);
			goto out;
		}
	} else {
		doc = json_object_new_object();
		insts = json_object_new_array();
		json_object_object_add(doc, "instances", insts);
		dirty = true;
	}
	rc = fn(k, insts, ud, &dirty, err);
	if(!rc && dirty) {
		if(json_object_to_file_ext(tmp, doc, JSON_C_TO_STRING_PLAIN) || rename(tmp, k->async->state_file)) {
			unlink(tmp);
			rc = kwok_fail(err, PRD_CLOUD_EIO, "kwok: cannot write async state %s: %s", k->async->state_file,
				       strerror(errno));
		}
	}
out:
	json_object_put(doc);
	flock(fd, LOCK_UN);
	close(fd);
	return rc;
}

static int64_t jint(json_object *o, const char *key)
{
	json_object *v;
	return json_object_object_get_ex(o, key, &v) ? json_object_get_int64(v) : 0;
}

static void drop(json_object *insts, size_t i)
{
	json_object_array_del_idx(insts, i, 1);
}

/* The instances of `group` in the state that count in its target: asked
 * for, without a Node yet, not being deleted (what progress_fn counts as
 * pending). */
static int32_t state_pending(json_object *insts, const char *group)
{
	size_t i, n = json_object_array_length(insts);
	int32_t pending = 0;
	for(i = 0; i < n; i++) {
		json_object *x = json_object_array_get_idx(insts, i);
		const char *g = kwok_jstr(x, "group");
		pending += g && !strcmp(g, group) && kwok_jstr(x, "name") && !jint(x, "deleteAt");
	}
	return pending;
}

/* The cloud moves on to now: Nodes register, deletes finish; each group's
 * pending count is recomputed. */
static int progress_fn(kwok *k, json_object *insts, void *ud, bool *dirty, prd_cloud_error *err)
{
	int64_t now = k->host->now_ns(k->host->ctx);
	size_t i, g;
	(void)ud;
	for(g = 0; g < k->ngroups; g++)
		k->groups[g].pending = 0;
	for(i = json_object_array_length(insts); i-- > 0;) {
		json_object *x = json_object_array_get_idx(insts, i);
		const char *name = kwok_jstr(x, "name"), *group = kwok_jstr(x, "group");
		const char *failed = kwok_jstr(x, "failed");
		int64_t del = jint(x, "deleteAt");
		kwok_group *kg = NULL;
		for(g = 0; group && g < k->ngroups; g++)
			if(!strcmp(k->groups[g].id, group))
				kg = &k->groups[g];
		if(!name || !kg) {
			drop(insts, i);
			*dirty = true;
			continue;
		}
		if(del) {
			if(now >= del) {
				drop(insts, i);
				*dirty = true;
			}
			continue;
		}
		if((!failed || !failed[0]) && now >= jint(x, "registerAt")) {
			json_object *node = kwok_node_for_group(kg, name, kwok_jstr(x, "owner")), *made = NULL;
			long status = 0;
			int rc;
			if(!node)
				return kwok_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
			rc = kwok_request(k, "POST", "/api/v1/nodes", NULL, node, &made, &status, err);
			if(!rc || status == 409)
				kwok_view_created(k, made && !rc ? made : node);
			json_object_put(made);
			json_object_put(node);
			if(rc && status != 409) {
				kg->pending++;
				continue; /* registers at a later call */
			}
			if(k->slices && kwok_slices_create(k, kg->id, name, err))
				kwok_log(k, PRD_CLOUD_LOG_WARN, "kwok: node %s registered without its ResourceSlices: %s",
					 name, err->message);
			kg->live++;
			drop(insts, i);
			*dirty = true;
			continue;
		}
		kg->pending++;
	}
	return 0;
}

int kwok_async_progress(kwok *k, prd_cloud_error *err)
{
	if(!k->async)
		return 0;
	return with_state(k, progress_fn, NULL, err);
}

typedef struct grow_ctx {
	kwok_group *g;
	int32_t delta, succeed;
	const char *error_code;
	bool atomic;
	int32_t expected;
	const char *owner;
} grow_ctx;

/* Under the state file's lock, so that a conditional increase and what
 * it compares with are one step for every process sharing the file. */
static int grow_fn(kwok *k, json_object *insts, void *ud, bool *dirty, prd_cloud_error *err)
{
	grow_ctx *c = ud;
	int64_t now = k->host->now_ns(k->host->ctx);
	bool all_fail;
	int32_t i;
	int rc;
	if(c->expected >= 0 &&
	   (rc = kwok_check_target(k, c->g, c->expected, state_pending(insts, c->g->id), c->delta, "asked for", err)))
		return rc;
	/* An atomic increase fails as one; a `succeed` fault fails the
	 * instances beyond K (all of them when the increase is atomic). */
	all_fail = c->atomic && (c->succeed < c->delta || draw(k, k->async->instance_failure_pct));
	for(i = 0; i < c->delta; i++) {
		json_object *x = json_object_new_object();
		char name[80], suffix[6];
		int64_t appear = now + k->async->create_delay_ms * NS_PER_MS;
		bool forced = i >= c->succeed;
		bool fail = c->atomic ? all_fail : forced || draw(k, k->async->instance_failure_pct);
		const char *code = (forced || c->atomic) && c->succeed < c->delta && c->error_code ? c->error_code
												     : "OutOfResources";
		kwok_random_suffix(k, suffix);
		snprintf(name, sizeof(name), "%s-%s", c->g->id, suffix);
		json_object_object_add(x, "name", json_object_new_string(name));
		json_object_object_add(x, "group", json_object_new_string(c->g->id));
		json_object_object_add(x, "appearAt", json_object_new_int64(appear));
		json_object_object_add(x, "registerAt",
				       json_object_new_int64(appear + k->async->register_delay_ms * NS_PER_MS));
		json_object_object_add(x, "failed", json_object_new_string(fail ? code : ""));
		json_object_object_add(x, "deleteAt", json_object_new_int64(0));
		json_object_object_add(x, "requestedAt", json_object_new_int64(now));
		if(c->owner)
			json_object_object_add(x, "owner", json_object_new_string(c->owner));
		if(json_object_array_add(insts, x))
			return kwok_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
		c->g->pending++;
	}
	*dirty = true;
	return 0;
}

int kwok_async_grow(kwok *k, kwok_group *g, const kwok_grow_req *req, int32_t succeed, const char *error_code,
		    prd_cloud_error *err)
{
	grow_ctx c = { g, req->delta, succeed, error_code, req->atomic, req->expected, req->owner };
	int32_t delta = req->delta;
	int rc = kwok_async_transient(k, g->id, req->atomic ? "atomic-increase" : "increase", err);
	if(rc)
		return rc;
	if(draw(k, k->async->stockout_pct))
		return kwok_fail(err, PRD_CLOUD_EIO,
				 "kwok: group %s: ZONE_RESOURCE_POOL_EXHAUSTED: no capacity for %d nodes (simulated "
				 "stockout)",
				 g->id, (int)delta);
	rc = with_state(k, grow_fn, &c, err);
	if(!rc)
		kwok_log(k, PRD_CLOUD_LOG_INFO, "kwok: group %s: target raised by %d; instances come asynchronously",
			 g->id, (int)delta);
	return rc;
}

typedef struct each_ctx {
	const char *group;
	int (*fn)(void *ud, const kwok_pending *p);
	void *ud;
} each_ctx;

static int each_fn(kwok *k, json_object *insts, void *ud, bool *dirty, prd_cloud_error *err)
{
	each_ctx *c = ud;
	int64_t now = k->host->now_ns(k->host->ctx);
	size_t i, n = json_object_array_length(insts);
	(void)dirty;
	for(i = 0; i < n; i++) {
		json_object *x = json_object_array_get_idx(insts, i);
		const char *group = kwok_jstr(x, "group"), *failed = kwok_jstr(x, "failed");
		kwok_pending p;
		p.name = kwok_jstr(x, "name");
		if(!group || !p.name || strcmp(group, c->group))
			continue;
		p.appeared = now >= jint(x, "appearAt");
		p.failed = failed && failed[0] ? failed : NULL;
		p.deleting = jint(x, "deleteAt") != 0;
		p.owner = kwok_jstr(x, "owner");
		/* A state file written before requestedAt was kept: the
		 * request was createDelayMs before the instance appeared. */
		p.requested_ns = jint(x, "requestedAt");
		if(!p.requested_ns)
			p.requested_ns = jint(x, "appearAt") - k->async->create_delay_ms * NS_PER_MS;
		if(c->fn(c->ud, &p))
			return kwok_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	}
	return 0;
}

int kwok_async_each(kwok *k, const char *group, int (*fn)(void *ud, const kwok_pending *p), void *ud,
		    prd_cloud_error *err)
{
	each_ctx c = { group, fn, ud };
	return with_state(k, each_fn, &c, err);
}

typedef struct del_ctx {
	kwok_group *g;
	const char *name;
	bool found;
} del_ctx;

static int del_fn(kwok *k, json_object *insts, void *ud, bool *dirty, prd_cloud_error *err)
{
	del_ctx *c = ud;
	int64_t now = k->host->now_ns(k->host->ctx);
	size_t i, n = json_object_array_length(insts);
	(void)err;
	for(i = 0; i < n; i++) {
		json_object *x = json_object_array_get_idx(insts, i);
		const char *group = kwok_jstr(x, "group"), *name = kwok_jstr(x, "name");
		if(!group || !name || strcmp(group, c->g->id) || strcmp(name, c->name))
			continue;
		c->found = true;
		if(jint(x, "deleteAt"))
			return 0; /* already being deleted */
		if(now < jint(x, "appearAt"))
			drop(insts, i); /* not created yet: cancelled */
		else
			json_object_object_add(x, "deleteAt", json_object_new_int64(now + k->async->delete_delay_ms * NS_PER_MS));
		if(c->g->pending > 0)
			c->g->pending--;
		*dirty = true;
		return 0;
	}
	return 0;
}

int kwok_async_delete(kwok *k, kwok_group *g, const char *name, bool *found, prd_cloud_error *err)
{
	del_ctx c = { g, name, false };
	int rc = with_state(k, del_fn, &c, err);
	*found = c.found;
	return rc;
}

typedef struct cancel_ctx {
	kwok_group *g;
	int32_t expected;      /* >= 0: only when the target is this */
	int32_t delta, cancelled;
	int32_t cancellable;   /* found in the state (when the range check failed) */
	int32_t elsewhere;     /* requested instances the caller can still cancel itself */
	bool refused;
} cancel_ctx;

/* Cancellable: requested and not appeared yet, or failed; not being deleted. */
static bool cancellable(json_object *x, const char *group, int64_t now)
{
	const char *g = kwok_jstr(x, "group"), *failed = kwok_jstr(x, "failed");
	if(!g || strcmp(g, group) || jint(x, "deleteAt"))
		return false;
	return now < jint(x, "appearAt") || (failed && failed[0]);
}

/* Lower the target: requested instances that have not appeared go first
 * (newest first), then failed ones. Nothing is cancelled when fewer than
 * delta (with the caller's own) can be. */
static int cancel_fn(kwok *k, json_object *insts, void *ud, bool *dirty, prd_cloud_error *err)
{
	cancel_ctx *c = ud;
	int64_t now = k->host->now_ns(k->host->ctx);
	size_t i, n = json_object_array_length(insts);
	int pass, rc;
	if(c->expected >= 0 &&
	   (rc = kwok_check_target(k, c->g, c->expected, state_pending(insts, c->g->id), 0, "cancelled", err)))
		return rc;
	for(i = 0; i < n; i++)
		c->cancellable += cancellable(json_object_array_get_idx(insts, i), c->g->id, now);
	if(c->delta > c->cancellable + c->elsewhere) {
		c->refused = true;
		return 0;
	}
	for(pass = 0; pass < 2 && c->cancelled < c->delta; pass++) {
		for(i = json_object_array_length(insts); i-- > 0 && c->cancelled < c->delta;) {
			json_object *x = json_object_array_get_idx(insts, i);
			const char *failed = kwok_jstr(x, "failed");
			bool is_failed = failed && failed[0];
			if(!cancellable(x, c->g->id, now) || (pass == 0) == is_failed)
				continue;
			drop(insts, i);
			c->cancelled++;
			if(c->g->pending > 0)
				c->g->pending--;
			*dirty = true;
		}
	}
	return 0;
}

int kwok_async_cancel(kwok *k, kwok_group *g, int32_t delta, int32_t elsewhere, int32_t expected, int32_t *cancelled,
		      prd_cloud_error *err)
{
	cancel_ctx c = { g, expected, delta, 0, 0, elsewhere, false };
	int rc = with_state(k, cancel_fn, &c, err);
	*cancelled = c.cancelled;
	if(!rc && c.refused)
		rc = kwok_fail(err, PRD_CLOUD_ERANGE,
			       "kwok: group %s: cannot lower the target by %d: only %d requested instances are not "
			       "created yet or failed (delete instances to go lower)",
			       g->id, (int)delta, (int)(c.cancellable + elsewhere));
	return rc;
}
