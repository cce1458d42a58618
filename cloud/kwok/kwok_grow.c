/* The kwok driver's group look-up and injected faults, and its increases: creating Nodes, in parallel rounds. */
#include "kwok/kwok_int.h"
#include "kwok/kwok_async.h"
#include "kwok/kwok_config.h"
#include "kwok/kwok_dra.h"
#include "kwok/kwok_nap.h"
#include "kwok/kwok_view.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

/* ---- what every operation starts with ----------------------------- */

kwok_group *kwok__find_group(kwok *k, const char *id)
{
	size_t i;
	for(i = 0; id && i < k->ngroups; i++)
		if(!strcmp(k->groups[i].id, id))
			return &k->groups[i];
	return NULL;
}

int kwok__no_group(prd_cloud_error *err, const char *id)
{
	return kwok_fail(err, PRD_CLOUD_ENOTFOUND, "kwok: no node group '%s'", id ? id : "(null)");
}

static void sleep_ms(long ms)
{
	struct timespec ts;
	ts.tv_sec = ms / 1000;
	ts.tv_nsec = (ms % 1000) * 1000000L;
	while(nanosleep(&ts, &ts) == -1)
		;
}

/* Apply the configured faults for one call of `op` on `group` (NULL for
 * calls not about one group): sleep for delays, fail for fail entries, and
 * lower *succeed (if given) for partial-success entries. */
int kwok__apply_faults(kwok *k, int op, const char *group, int32_t *succeed, const char **error_code,
		       prd_cloud_error *err)
{
	size_t i;
	for(i = 0; i < k->nfaults; i++) {
		kwok_fault *f = &k->faults[i];
		if(f->op != op || f->times == 0 || (f->group && (!group || strcmp(f->group, group))))
			continue;
		if(f->times > 0)
			f->times--;
		if(f->delay_ms > 0)
			sleep_ms(f->delay_ms);
		if(f->fail_message)
			return kwok_fail(err, f->fail_code, "kwok: %s%s%s: %s", kwok_op_name(op), group ? " " : "",
					 group ? group : "", f->fail_message);
		if(f->succeed >= 0 && succeed && f->succeed < *succeed) {
			*succeed = f->succeed;
			*error_code = f->error_code;
		}
	}
	return 0;
}

/* ---- growing -------------------------------------------------------- */

void kwok__free_names(char **names, int32_t n)
{
	int32_t i;
	for(i = 0; names && i < n; i++)
		free(names[i]);
	free(names);
}

/* May the host still change the cloud (ABI 1.3 prd_cloud_host.may_act)?
 * Asked before each Node of a multi-Node call, from any thread. */
static bool host_may_act(const kwok *k)
{
	const prd_cloud_host *h = k->host;
	if(h->struct_size < offsetof(prd_cloud_host, may_act) + sizeof(h->may_act) || !h->may_act)
		return true;
	return h->may_act(h->ctx) != 0;
}

/* One Node of kwok__create_nodes: what is sent and what came back. */
typedef struct kwok_mk {
	char name[80];
	json_object *node;      /* the Node sent (owned by the calling thread) */
	char *body;             /* ... as JSON text (owned) */
	size_t body_len;
	int rc;                 /* the host's answer */
	long status;
	char *answer;           /* released with host->free */
	size_t answer_len;
	prd_cloud_error err;
	bool sent;              /* false: not sent, the host may no longer act */
} kwok_mk;

/* The creates in flight: `v[idx[i]]` for the i-th of this round. The
 * threads touch only their own kwok_mk and the `stop` flag. */
typedef struct kwok_mk_round {
	const kwok *k;
	kwok_mk *v;
	const size_t *idx;
	pthread_mutex_t mu;
	bool stop;
} kwok_mk_round;

static void create_one(void *ud, size_t i)
{
	kwok_mk_round *r = ud;
	kwok_mk *m = &r->v[r->idx[i]];
	const prd_cloud_host *h = r->k->host;
	bool stop;
	/* Asked one thread at a time: the first "no" stops every thread, and
	 * no Node is sent after it. */
	pthread_mutex_lock(&r->mu);
	if(!r->stop && !host_may_act(r->k))
		r->stop = true;
	stop = r->stop;
	pthread_mutex_unlock(&r->mu);
	if(stop)
		return;
	m->sent = true;
	memset(&m->err, 0, sizeof(m->err));
	m->rc = h->kube_request(h->ctx, "POST", "/api/v1/nodes", "application/json", m->body, m->body_len, &m->status,
				&m->answer, &m->answer_len, &m->err);
}

/* Forget what a round sent and got for m (the calling thread's). */
static void mk_clear(const kwok *k, kwok_mk *m)
{
	json_object_put(m->node);
	free(m->body);
	if(m->answer)
		k->host->free(k->host->ctx, m->answer);
	m->node = NULL;
	m->body = NULL;
	m->answer = NULL;
	m->answer_len = 0;
}

/* Draw m's name and build the Node to send (the calling thread: the
 * template's JSON is shared, and json-c's reference counts are not
 * atomic). */
static int mk_prepare(kwok *k, kwok_group *g, const char *owner, kwok_mk *m, prd_cloud_error *err)
{
	const char *text;
	char suffix[6];
	kwok_random_suffix(k, suffix);
	snprintf(m->name, sizeof(m->name), "%s-%s", g->id, suffix);
	m->node = kwok_node_for_group(g, m->name, owner);
	text = m->node ? json_object_to_json_string_ext(m->node, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)
		       : NULL;
	m->body = text ? kwok_strdup(text) : NULL;
	if(!m->body)
		return kwok_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	m->body_len = strlen(m->body);
	m->sent = false;
	m->rc = 0;
	m->status = 0;
	return 0;
}

/* A Node the apiserver created: the driver's view learns it, its
 * ResourceSlices are published, and it is listed in names. */
static int mk_created(kwok *k, kwok_group *g, kwok_mk *m, char **names, int32_t *ncreated, prd_cloud_error *err)
{
	json_object *made = m->answer && m->answer_len ? json_tokener_parse(m->answer) : NULL;
	/* The apiserver's answer has the creation time. */
	kwok_view_created(k, made ? made : m->node);
	json_object_put(made);
	if(k->slices && kwok_slices_create(k, g->id, m->name, err)) {
		/* A node without the devices it should publish: gone again,
		 * and this increase fails. */
		prd_cloud_error de;
		int rc = err->code ? err->code : PRD_CLOUD_EIO;
		memset(&de, 0, sizeof(de));
		kwok__delete_node(k, m->name, NULL, &de);
		return rc;
	}
	names[*ncreated] = kwok_strdup(m->name);
	g->live++;
	if(!names[*ncreated])
		/* The Node exists but we cannot remember it: it still counts
		 * as live. */
		return kwok_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	(*ncreated)++;
	return 0;
}

/* Create `n` Nodes of the group, labelled with `owner` when given, up to
 * createParallelism at once (provreqd's client paces them within its rate
 * limit); *created (caller frees with kwok__free_names) lists the names of
 * those that were created, even when an error stops the call part way
 * (then Nodes sent alongside the failed one may exist too: they are
 * listed). A random name that already exists is replaced (8 times at
 * most). Stops sending once the host may no longer act. */
int kwok__create_nodes(kwok *k, kwok_group *g, int32_t n, const char *owner, char ***created, int32_t *ncreated,
		       prd_cloud_error *err)
{
	char **names = calloc((size_t)n + 1, sizeof(*names));
	kwok_mk *v = calloc((size_t)n + 1, sizeof(*v));
	size_t *idx = calloc((size_t)n + 1, sizeof(*idx)), npend = 0, i;
	kwok_mk_round r;
	int attempt, rc = 0;
	*created = names;
	*ncreated = 0;
	if(!names || !v || !idx) {
		free(v);
		free(idx);
		return kwok_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	}
	memset(&r, 0, sizeof(r));
	r.k = k;
	r.v = v;
	r.idx = idx;
	pthread_mutex_init(&r.mu, NULL);
	for(i = 0; i < (size_t)n; i++)
		idx[npend++] = i;
	for(attempt = 0; npend && !rc && !r.stop; attempt++) {
		size_t again = 0;
		for(i = 0; i < npend && !rc; i++)
			rc = mk_prepare(k, g, owner, &v[idx[i]], err);
		if(!rc)
			drv_parallel(k->create_parallelism, npend, create_one, &r);
		/* In order, on this thread: what each got. */
		for(i = 0; i < npend; i++) {
			kwok_mk *m = &v[idx[i]];
			prd_cloud_error e;
			if(!m->sent) {
				mk_clear(k, m);
				continue;
			}
			if(m->rc == 0) {
				memset(&e, 0, sizeof(e));
				if(mk_created(k, g, m, names, ncreated, &e) && !rc)
					rc = kwok_fail(err, e.code ? e.code : PRD_CLOUD_EIO, "%s", e.message);
			} else if(m->status == 409 && attempt < 8 && !rc) {
				idx[again++] = idx[i]; /* the name is taken: draw another */
			} else if(!rc) {
				rc = kwok_fail(err, m->rc, "POST /api/v1/nodes: %s",
					       m->err.message[0] ? m->err.message : "no answer");
			}
			mk_clear(k, m);
		}
		npend = again;
	}
	if(!rc && r.stop)
		/* The host's lease may be gone (a pause longer than it): no
		 * more Nodes; what was made is listed as usual. */
		rc = kwok_fail(err, PRD_CLOUD_EAGAIN,
			       "kwok: group %s: stopped after %d of %d nodes: provreqd may no longer act "
			       "(its leader-election lease may have expired)",
			       g->id, (int)*ncreated, (int)n);
	pthread_mutex_destroy(&r.mu);
	free(v);
	free(idx);
	return rc;
}

/* Delete a Node by name, only if it still has `uid` (when given). A Node
 * that is already gone counts as deleted. */
int kwok__delete_node(kwok *k, const char *name, const char *uid, prd_cloud_error *err)
{
	char path[320];
	json_object *opts = NULL;
	long status = 0;
	int rc;
	snprintf(path, sizeof(path), "/api/v1/nodes/%s", name);
	if(uid) {
		json_object *pre = json_object_new_object();
		opts = json_object_new_object();
		json_object_object_add(opts, "apiVersion", json_object_new_string("v1"));
		json_object_object_add(opts, "kind", json_object_new_string("DeleteOptions"));
		json_object_object_add(pre, "uid", json_object_new_string(uid));
		json_object_object_add(opts, "preconditions", pre);
	}
	rc = kwok_request(k, "DELETE", path, NULL, opts, NULL, &status, err);
	json_object_put(opts);
	if(rc && status == 404)
		rc = 0;
	if(!rc && k->slices)
		kwok_slices_delete(k, name);
	if(!rc)
		kwok_view_deleted(k, name);
	return rc;
}

/* Delete the nodes an atomic increase created. Returns 0 or the first
 * error (the message appended to `why`). */
static int roll_back(kwok *k, kwok_group *g, char **names, int32_t n, char *why, size_t why_len)
{
	int32_t i;
	int rc = 0;
	for(i = 0; i < n; i++) {
		prd_cloud_error e = {0, ""};
		int r = kwok__delete_node(k, names[i], NULL, &e);
		if(r) {
			size_t len = strlen(why);
			if(!rc)
				snprintf(why + len, why_len - len, "; rolling back, deleting %s failed: %s", names[i],
					 e.message);
			rc = r;
		} else {
			g->live--;
		}
	}
	return rc;
}

/* Remember n nodes an increase (of `asked`, made by `owner`) was refused. */
static int add_failed(kwok *k, kwok_group *g, int32_t n, const char *code, int32_t asked, const char *owner)
{
	kwok_failed *v = realloc(g->failed, (g->nfailed + (size_t)n) * sizeof(*v));
	int64_t now = k->host->now_ns(k->host->ctx);
	int32_t i;
	if(!v)
		return -1;
	g->failed = v;
	for(i = 0; i < n; i++) {
		char name[80], suffix[6], msg[256];
		kwok_random_suffix(k, suffix);
		snprintf(name, sizeof(name), "%s-%s", g->id, suffix);
		snprintf(msg, sizeof(msg),
			 "kwok fault injection: no capacity for %d of the %d nodes requested in group %s",
			 (int)n, (int)asked, g->id);
		v[g->nfailed].name = kwok_strdup(name);
		v[g->nfailed].code = kwok_strdup(code);
		v[g->nfailed].message = kwok_strdup(msg);
		v[g->nfailed].owner = owner ? kwok_strdup(owner) : NULL;
		v[g->nfailed].created_ns = now;
		if(!v[g->nfailed].name || !v[g->nfailed].code || !v[g->nfailed].message ||
		   (owner && !v[g->nfailed].owner)) {
			free(v[g->nfailed].name);
			free(v[g->nfailed].code);
			free(v[g->nfailed].message);
			free(v[g->nfailed].owner);
			return -1;
		}
		g->nfailed++;
	}
	return 0;
}

/* increase_size, atomic_increase_size and increase. All check the
 * maximum first. When fault injection lets only k of n nodes through, the
 * plain form keeps the k and reports the rest through instances(); the
 * atomic form deletes the k again (as it does when the API fails part
 * way) and returns PRD_CLOUD_EAGAIN. A conditional increase compares the
 * target read afresh right before it creates anything, after any
 * injected delay: a caller that stalled there must find the group as
 * another writer left it. Listing and creating are two requests, so a
 * writer in between is not seen: Nodes offer no compare-and-set on a
 * count. */
static int grow(kwok *k, const char *group_id, const kwok_grow_req *req, prd_cloud_error *err)
{
	kwok_group *g = kwok__find_group(k, group_id);
	const char *error_code = NULL;
	int32_t target, delta = req->delta, succeed = req->delta, ncreated = 0;
	bool atomic = req->atomic;
	char **created = NULL;
	prd_cloud_error e = {0, ""};
	int rc;
	if(!g)
		return kwok__no_group(err, group_id);
	if(delta <= 0)
		return kwok_fail(err, PRD_CLOUD_EINVAL, "kwok: group %s: the increase must be positive, got %d", g->id,
				 (int)delta);
	target = g->live + (int32_t)g->nfailed + g->pending;
	if(delta > g->max - target)
		return kwok_fail(err, PRD_CLOUD_ERANGE,
				 "kwok: group %s: increasing the size from %d by %d would exceed its maximum size %d",
				 g->id, (int)target, (int)delta, (int)g->max);
	rc = kwok__apply_faults(k, atomic ? KWOK_OP_ATOMIC_INCREASE : KWOK_OP_INCREASE, g->id, &succeed, &error_code,
			  err);
	if(rc)
		return rc;
	if(kwok_async_for(k, g->id))
		return kwok_async_grow(k, g, req, succeed, error_code, err);
	if(req->expected >= 0 && (rc = kwok_check_target(k, g, req->expected, 0, delta, "created", err)))
		return rc;
	rc = kwok__create_nodes(k, g, succeed, req->owner, &created, &ncreated, &e);
	if(!rc && succeed < delta) {
		if(atomic) {
			rc = kwok_fail(&e, PRD_CLOUD_EAGAIN,
				       "kwok: group %s: %s: only %d of %d nodes could be created (fault injection); "
				       "all-or-nothing, so none are kept",
				       g->id, error_code, (int)succeed, (int)delta);
		} else if(add_failed(k, g, delta - succeed, error_code, delta, req->owner)) {
			rc = kwok_fail(&e, PRD_CLOUD_ENOMEM, "out of memory");
		} else {
			kwok_log(k, PRD_CLOUD_LOG_WARN,
				 "kwok: group %s: created %d of %d nodes; %d reported as %s (fault injection)", g->id,
				 (int)succeed, (int)delta, (int)(delta - succeed), error_code);
		}
	}
	if(rc && atomic && ncreated) {
		int r = roll_back(k, g, created, ncreated, e.message, sizeof(e.message));
		if(r)
			rc = r;
	}
	kwok__free_names(created, ncreated);
	return rc ? kwok_fail(err, rc, "%s", e.message) : 0;
}

int kwok__kw_increase_size(void *state, const char *group_id, int32_t delta, prd_cloud_error *err)
{
	kwok_grow_req req = {delta, false, -1, NULL};
	return grow(state, group_id, &req, err);
}

int kwok__kw_atomic_increase(void *state, const char *group_id, int32_t delta, prd_cloud_error *err)
{
	kwok_grow_req req = {delta, true, -1, NULL};
	return grow(state, group_id, &req, err);
}

/* 1..63 of [A-Za-z0-9._-], alphanumeric at both ends: a label value. */
static bool owner_ok(const char *s)
{
	size_t n = strlen(s), i;
	if(n < 1 || n > 63)
		return false;
	for(i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
		if(!alnum && ((i == 0 || i == n - 1) || (c != '.' && c != '_' && c != '-')))
			return false;
	}
	return true;
}

/* ABI 1.3: an increase with an expected target and an owner token. */
int kwok__kw_increase(void *state, const prd_cloud_increase *in, prd_cloud_error *err)
{
	kwok_grow_req req;
	if(!in || in->struct_size < offsetof(prd_cloud_increase, owner) + sizeof(in->owner))
		return kwok_fail(err, PRD_CLOUD_EINVAL, "kwok: increase: the request is %u bytes, older than ABI 1.3's",
				 in ? (unsigned)in->struct_size : 0u);
	if(in->owner && !owner_ok(in->owner))
		return kwok_fail(err, PRD_CLOUD_EINVAL,
				 "kwok: increase: owner '%.80s' is not 1-63 of [A-Za-z0-9._-] beginning and ending "
				 "alphanumeric (a label value)",
				 in->owner);
	if(in->expected_target < -1)
		return kwok_fail(err, PRD_CLOUD_EINVAL, "kwok: increase: expected target %d (want -1 or a size)",
				 (int)in->expected_target);
	req.delta = in->delta;
	req.atomic = in->atomic != 0;
	req.expected = in->expected_target;
	req.owner = in->owner;
	return grow(state, in->group_id, &req, err);
}
