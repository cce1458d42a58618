/* Lease-based leader election (see lease.h for the protocol). */
#include "kube/lease.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ops/log.h"
#include "util/rfc3339.h"
#include "util/str.h"

struct kube_lease {
	kube_client *c;
	kube_lease_opts o;
	char *ns, *name, *id;
	pthread_mutex_t mu;          /* guards leading and the thread state */
	bool leading;
	/* What we saw last and when, on our monotonic clock. */
	char *obs_holder;
	char *obs_renew;             /* renewTime string as read */
	char *obs_rv;
	int64_t obs_mono;
	bool observed;
	int64_t last_renew_mono;     /* last successful renewal while leading */
	/* When the request of the last successful acquisition or renewal was
	 * sent (monotonic; under mu): others wait a full lease duration after
	 * they saw that renewal, so until this plus the renew deadline the
	 * lease is ours with a margin of (duration - deadline). */
	int64_t valid_from_mono;
	int64_t transitions;         /* leaseTransitions of our term (under mu) */
	uint64_t acquisitions;       /* times this process began leading (under mu) */
	char problem[PRD_ERR_MSG_MAX]; /* why the lease cannot be used; "" = none (under mu) */
	/* helper thread */
	pthread_t thr;
	bool running;
	bool stop;
	pthread_cond_t cv;
};

int kube_lease_new(kube_client *c, const kube_lease_opts *o, kube_lease **out, prd_err *err)
{
	kube_lease *le;

	*out = NULL;
	if(!o || !o->namespace_ || !*o->namespace_ || !o->name || !*o->name || !o->identity || !*o->identity)
		return prd_err_set(err, PRD_EINVAL, "lease: namespace, name and identity are required");
	le = calloc(1, sizeof(*le));
	if(!le)
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	le->c = c;
	le->o = *o;
	if(le->o.lease_duration_ns <= 0)
		le->o.lease_duration_ns = 15 * PRD_NS_PER_SEC;
	if(le->o.renew_deadline_ns <= 0)
		le->o.renew_deadline_ns = 10 * PRD_NS_PER_SEC;
	if(le->o.retry_period_ns <= 0)
		le->o.retry_period_ns = 2 * PRD_NS_PER_SEC;
	if(!le->o.clock)
		le->o.clock = clk_real();
	le->ns = str_dup(o->namespace_);
	le->name = str_dup(o->name);
	le->id = str_dup(o->identity);
	le->o.namespace_ = le->o.name = le->o.identity = NULL;
	pthread_mutex_init(&le->mu, NULL);
	pthread_cond_init(&le->cv, NULL);
	if(!le->ns || !le->name || !le->id) {
		kube_lease_free(le);
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	}
	if(le->o.renew_deadline_ns >= le->o.lease_duration_ns ||
	   le->o.retry_period_ns >= le->o.renew_deadline_ns) {
		kube_lease_free(le);
		return prd_err_set(err, PRD_EINVAL,
				   "lease: need retry period < renew deadline < lease duration");
	}
	*out = le;
	return 0;
}

void kube_lease_free(kube_lease *le)
{
	if(!le)
		return;
	kube_lease_stop(le);
	pthread_mutex_destroy(&le->mu);
	pthread_cond_destroy(&le->cv);
	free(le->ns);
	free(le->name);
	free(le->id);
	free(le->obs_holder);
	free(le->obs_renew);
	free(le->obs_rv);
	free(le);
}

bool kube_lease_is_leader(kube_lease *le)
{
	bool l;
	pthread_mutex_lock(&le->mu);
	l = le->leading;
	pthread_mutex_unlock(&le->mu);
	return l;
}

bool kube_lease_valid(kube_lease *le)
{
	bool v;
	int64_t now = clk_mono(le->o.clock);
	pthread_mutex_lock(&le->mu);
	v = le->leading && now < le->valid_from_mono + le->o.renew_deadline_ns;
	pthread_mutex_unlock(&le->mu);
	return v;
}

void kube_lease_term(kube_lease *le, char *identity, size_t n, int64_t *transitions)
{
	if(identity && n)
		str_copy(identity, n, le->id);
	pthread_mutex_lock(&le->mu);
	if(transitions)
		*transitions = le->transitions;
	pthread_mutex_unlock(&le->mu);
}

void kube_lease_fence_key(const kube_lease *le, char out[64])
{
	size_t n = strlen(le->name), i;
	uint32_t h = 2166136261u;
	if(n <= 63) {
		str_copy(out, 64, le->name);
		return;
	}
	for(i = 0; i < n; i++)
		h = (h ^ (unsigned char)le->name[i]) * 16777619u;
	snprintf(out, 64, "%.54s-%08x", le->name, h);
}

bool kube_lease_new_term(kube_lease *le, kube_lease_follow *f, char key[64], char *identity, size_t n,
			 int64_t *transitions)
{
	uint64_t acq;
	int64_t tr;
	if(!kube_lease_valid(le))
		return false;
	pthread_mutex_lock(&le->mu);
	acq = le->acquisitions;
	tr = le->transitions;
	pthread_mutex_unlock(&le->mu);
	if(acq == f->acquisitions && tr == f->transitions)
		return false;
	f->acquisitions = acq;
	f->transitions = tr;
	kube_lease_fence_key(le, key);
	if(identity && n)
		str_copy(identity, n, le->id);
	*transitions = tr;
	return true;
}

int kube_lease_follow_raise(kube_lease *le, kube_lease_follow *f, int64_t transitions, prd_err *err)
{
	int rc = kube_lease_raise(le, transitions, err);
	if(!rc) {
		pthread_mutex_lock(&le->mu);
		f->transitions = le->transitions;
		pthread_mutex_unlock(&le->mu);
	}
	return rc;
}

bool kube_lease_problem(kube_lease *le, char *out, size_t n)
{
	bool p;
	pthread_mutex_lock(&le->mu);
	p = le->problem[0] != 0;
	if(out && n)
		str_copy(out, n, le->problem);
	pthread_mutex_unlock(&le->mu);
	return p;
}

/* Record the outcome of one step: `cause` NULL = the lease could be read
 * and written (or another candidate holds it). Reports changes only. */
static void set_problem(kube_lease *le, const char *cause)
{
	bool changed;
	pthread_mutex_lock(&le->mu);
	changed = !str_eq(cause ? cause : "", le->problem);
	str_copy(le->problem, sizeof(le->problem), cause ? cause : "");
	pthread_mutex_unlock(&le->mu);
	if(!changed)
		return;
	if(cause)
		log_warn("cannot take the leader-election lease", "lease", le->name, "namespace", le->ns, "error",
			 cause);
	else
		log_info("the leader-election lease can be used again", "lease", le->name, "namespace", le->ns);
	if(le->o.on_problem)
		le->o.on_problem(le->o.ud, cause);
}

static const char *jget(json_object *o, const char *k)
{
	json_object *v;
	if(!o || !json_object_object_get_ex(o, k, &v) || json_object_is_type(v, json_type_null))
		return NULL;
	return json_object_get_string(v);
}

static void set_leading(kube_lease *le, bool leading)
{
	bool was;
	pthread_mutex_lock(&le->mu);
	was = le->leading;
	le->leading = leading;
	if(leading && !was)
		le->acquisitions++;
	pthread_mutex_unlock(&le->mu);
	if(was == leading)
		return;
	log_info(leading ? "became leader" : "stopped leading", "lease", le->name, "identity", le->id);
	if(leading && le->o.on_started)
		le->o.on_started(le->o.ud);
	if(!leading && le->o.on_stopped)
		le->o.on_stopped(le->o.ud);
}

/* Remember the lease record as seen now; a change restarts the expiry
 * clock for other holders. */
static int observe(kube_lease *le, const char *holder, const char *renew, const char *rv, int64_t now)
{
	bool changed = !le->observed || !str_eq(holder, le->obs_holder) || !str_eq(renew, le->obs_renew);
	char *h = str_dup(holder), *r = str_dup(renew), *v = str_dup(rv);

	if((holder && !h) || (renew && !r) || (rv && !v)) {
		free(h);
		free(r);
		free(v);
		return PRD_ENOMEM;
	}
	if(changed) {
		if(!str_eq(holder, le->obs_holder) && le->o.on_new_leader)
			le->o.on_new_leader(le->o.ud, holder);
		le->obs_mono = now;
	}
	free(le->obs_holder);
	free(le->obs_renew);
	free(le->obs_rv);
	le->obs_holder = h;
	le->obs_renew = r;
	le->obs_rv = v;
	le->observed = true;
	return 0;
}

/* Fill spec for holding the lease. `keep` = we already held it (keep
 * acquireTime and leaseTransitions). */
static void fill_spec(kube_lease *le, json_object *spec, bool keep, int64_t transitions, const char *now)
{
	json_object_object_add(spec, "holderIdentity", json_object_new_string(le->id));
	/* Rounded up: truncated, others would wait less than the duration
	 * the fence's margin (duration - renew deadline) is counted from. */
	json_object_object_add(spec, "leaseDurationSeconds",
			       json_object_new_int((int)((le->o.lease_duration_ns + PRD_NS_PER_SEC - 1) / PRD_NS_PER_SEC)));
	json_object_object_add(spec, "renewTime", json_object_new_string(now));
	if(!keep) {
		json_object_object_add(spec, "acquireTime", json_object_new_string(now));
		json_object_object_add(spec, "leaseTransitions", json_object_new_int64(transitions));
	}
}

/* No Lease yet: create it holding it. *won when ours was created; another
 * candidate creating it first is not an error. */
static int create_lease(kube_lease *le, const char *now_s, json_object **out, bool *won, prd_err *err)
{
	json_object *obj = json_object_new_object(), *meta = json_object_new_object(),
		    *spec = json_object_new_object();
	int rc;

	if(!obj || !meta || !spec) {
		json_object_put(obj);
		json_object_put(meta);
		json_object_put(spec);
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	}
	json_object_object_add(obj, "apiVersion", json_object_new_string("coordination.k8s.io/v1"));
	json_object_object_add(obj, "kind", json_object_new_string("Lease"));
	json_object_object_add(obj, "metadata", meta);
	json_object_object_add(meta, "name", json_object_new_string(le->name));
	json_object_object_add(meta, "namespace", json_object_new_string(le->ns));
	json_object_object_add(obj, "spec", spec);
	fill_spec(le, spec, false, 0, now_s);
	rc = kube_create(le->c, &KUBE_LEASES, le->ns, obj, out, NULL, err);
	json_object_put(obj);
	if(rc == PRD_EEXIST)
		return 0; /* someone else created it first */
	if(!rc) {
		/* A new Lease starts the count again, also under a holder that
		 * led on the old one: the term is what the Lease says. */
		pthread_mutex_lock(&le->mu);
		le->transitions = 0;
		pthread_mutex_unlock(&le->mu);
		*won = true;
	}
	return rc;
}

/* The Lease exists (`cur`): observe its holder, and take it over when it
 * lapsed or renew it when it is ours. *won when the update went through;
 * a lease held by another, or a concurrent writer, is not an error. */
static int update_lease(kube_lease *le, json_object *cur, int64_t now, const char *now_s, json_object **out,
			bool *won, prd_err *err)
{
	json_object *spec, *meta = NULL, *t;
	const char *holder, *renew, *rv;
	int64_t transitions = 0;
	bool mine;
	int rc;

	if(!json_object_object_get_ex(cur, "spec", &spec) || !json_object_is_type(spec, json_type_object)) {
		spec = json_object_new_object();
		json_object_object_add(cur, "spec", spec);
	}
	json_object_object_get_ex(cur, "metadata", &meta);
	holder = jget(spec, "holderIdentity");
	renew = jget(spec, "renewTime");
	rv = jget(meta, "resourceVersion");
	if(holder && !*holder)
		holder = NULL;
	rc = observe(le, holder, renew, rv, now);
	if(rc)
		return prd_err_set(err, rc, "out of memory");
	mine = str_eq(holder, le->id);
	{
		/* The holder's own leaseDurationSeconds decides when its claim
		 * lapses, measured from when we saw its last renewal. */
		json_object *d;
		int64_t dur = le->o.lease_duration_ns;
		if(json_object_object_get_ex(spec, "leaseDurationSeconds", &d) && json_object_get_int64(d) > 0)
			dur = json_object_get_int64(d) * PRD_NS_PER_SEC;
		if(holder && !mine && now < le->obs_mono + dur)
			return 0; /* held by someone else and not expired */
	}
	if(json_object_object_get_ex(spec, "leaseTransitions", &t))
		transitions = json_object_get_int64(t);
	if(!mine) {
		if(holder)
			log_info("lease expired, taking it over", "lease", le->name, "previous", holder);
		transitions++;
	}
	fill_spec(le, spec, mine, transitions, now_s);
	pthread_mutex_lock(&le->mu);
	le->transitions = transitions;
	pthread_mutex_unlock(&le->mu);
	/* cur still carries metadata.resourceVersion: a concurrent writer
	 * makes this PUT fail with Conflict. */
	rc = kube_update(le->c, &KUBE_LEASES, le->ns, le->name, NULL, cur, out, NULL, err);
	if(rc == PRD_ECONFLICT)
		return 0;
	if(!rc)
		*won = true;
	return rc;
}

/* One attempt; returns 0 with *won, or an error code. */
static int try_acquire_or_renew(kube_lease *le, bool *won, prd_err *err)
{
	json_object *cur = NULL, *out = NULL;
	char now_s[RFC3339_MAX];
	int64_t now = clk_mono(le->o.clock);
	int rc;

	*won = false;
	rfc3339_format_micro(clk_wall(le->o.clock), now_s, sizeof(now_s));
	rc = kube_get(le->c, &KUBE_LEASES, le->ns, le->name, &cur, NULL, err);
	if(rc == PRD_ENOTFOUND)
		rc = create_lease(le, now_s, &out, won, err);
	else if(!rc)
		rc = update_lease(le, cur, now, now_s, &out, won, err);
	if(!rc && *won) {
		json_object *os = NULL, *om = NULL;
		json_object_object_get_ex(out, "spec", &os);
		json_object_object_get_ex(out, "metadata", &om);
		rc = observe(le, le->id, jget(os, "renewTime"), jget(om, "resourceVersion"), now);
		if(rc)
			prd_err_set(err, rc, "out of memory");
	}
	json_object_put(cur);
	json_object_put(out);
	return rc;
}

int kube_lease_step(kube_lease *le, bool *leading, int64_t *next_ns, prd_err *err)
{
	bool won = false, was = kube_lease_is_leader(le);
	int64_t now, sent;
	prd_err local = {0};
	int rc;

	if(!err)
		err = &local;
	sent = clk_mono(le->o.clock);
	rc = try_acquire_or_renew(le, &won, err);

	now = clk_mono(le->o.clock);
	if(won) {
		le->last_renew_mono = now;
		pthread_mutex_lock(&le->mu);
		le->valid_from_mono = sent;
		pthread_mutex_unlock(&le->mu);
		set_leading(le, true);
	} else if(was) {
		/* Lost the lease to someone else, or could not renew: keep
		 * leading only while the renew deadline allows. */
		bool other = !rc && le->obs_holder && !str_eq(le->obs_holder, le->id);
		if(other || now - le->last_renew_mono >= le->o.renew_deadline_ns) {
			if(rc)
				log_warn("failed to renew the lease within the deadline", "lease", le->name,
					 "error", err->msg);
			set_leading(le, false);
		}
	}
	set_problem(le, rc ? (err->msg[0] ? err->msg : "the apiserver could not be asked") : NULL);
	if(leading)
		*leading = kube_lease_is_leader(le);
	if(next_ns)
		*next_ns = le->o.retry_period_ns;
	return rc;
}

int kube_lease_raise(kube_lease *le, int64_t transitions, prd_err *err)
{
	json_object *cur = NULL, *out = NULL, *spec = NULL, *t;
	int64_t have = 0;
	int rc;

	if(!kube_lease_valid(le))
		return prd_err_set(err, PRD_EAGAIN, "lease: this process does not hold the lease");
	rc = kube_get(le->c, &KUBE_LEASES, le->ns, le->name, &cur, NULL, err);
	if(!rc && (!json_object_object_get_ex(cur, "spec", &spec) || !str_eq(jget(spec, "holderIdentity"), le->id)))
		rc = prd_err_set(err, PRD_ECONFLICT, "lease: held by another process now");
	if(!rc && json_object_object_get_ex(spec, "leaseTransitions", &t))
		have = json_object_get_int64(t);
	if(!rc && have < transitions) {
		json_object_object_add(spec, "leaseTransitions", json_object_new_int64(transitions));
		/* The resourceVersion read above is the precondition: a
		 * takeover or renewal in between makes this a Conflict. The
		 * fence is asked again right before the write. */
		if(!kube_lease_valid(le))
			rc = prd_err_set(err, PRD_EAGAIN, "lease: this process does not hold the lease");
		else
			rc = kube_update(le->c, &KUBE_LEASES, le->ns, le->name, NULL, cur, &out, NULL, err);
		/* (The renewing thread reads the Lease afresh on its next step;
		 * what it observed is its own, not touched here.) */
		have = transitions;
	}
	if(!rc) {
		pthread_mutex_lock(&le->mu);
		le->transitions = have;
		pthread_mutex_unlock(&le->mu);
		log_info("raised the lease's term above one recorded where it fences", "lease", le->name,
			 "leaseTransitions", LOGI((long long)have));
	}
	json_object_put(cur);
	json_object_put(out);
	return rc;
}

int kube_lease_release(kube_lease *le, prd_err *err)
{
	json_object *cur = NULL, *spec, *meta;
	char now_s[RFC3339_MAX];
	int rc = 0;

	if(!kube_lease_is_leader(le))
		return 0;
	rfc3339_format_micro(clk_wall(le->o.clock), now_s, sizeof(now_s));
	rc = kube_get(le->c, &KUBE_LEASES, le->ns, le->name, &cur, NULL, err);
	if(!rc && json_object_object_get_ex(cur, "spec", &spec) &&
	   str_eq(jget(spec, "holderIdentity"), le->id)) {
		json_object_object_get_ex(cur, "metadata", &meta);
		/* client-go's release: no holder, a 1 s lease, fresh times. */
		json_object_object_del(spec, "holderIdentity");
		json_object_object_add(spec, "leaseDurationSeconds", json_object_new_int(1));
		json_object_object_add(spec, "renewTime", json_object_new_string(now_s));
		json_object_object_add(spec, "acquireTime", json_object_new_string(now_s));
		rc = kube_update(le->c, &KUBE_LEASES, le->ns, le->name, NULL, cur, NULL, NULL, err);
	}
	json_object_put(cur);
	if(rc)
		log_warn("could not release the lease", "lease", le->name, "error", err ? err->msg : "");
	else
		log_info("lease released", "lease", le->name, "identity", le->id);
	set_leading(le, false);
	return rc;
}

static void *lease_thread(void *arg)
{
	kube_lease *le = arg;
	const clk *rt = clk_real();

	for(;;) {
		int64_t next = le->o.retry_period_ns, deadline;
		struct timespec ts;
		prd_err err = {0};

		pthread_mutex_lock(&le->mu);
		if(le->stop) {
			pthread_mutex_unlock(&le->mu);
			break;
		}
		pthread_mutex_unlock(&le->mu);
		kube_lease_step(le, NULL, &next, &err);
		/* Jitter (up to +20 %) keeps candidates from stepping in lock
		 * step; a leader renews without it. */
		if(!kube_lease_is_leader(le))
			next += (int64_t)(rand() % 200) * next / 1000;
		deadline = clk_wall(rt) + next;
		ts.tv_sec = deadline / PRD_NS_PER_SEC;
		ts.tv_nsec = deadline % PRD_NS_PER_SEC;
		pthread_mutex_lock(&le->mu);
		while(!le->stop && pthread_cond_timedwait(&le->cv, &le->mu, &ts) != ETIMEDOUT)
			;
		pthread_mutex_unlock(&le->mu);
	}
	return NULL;
}

int kube_lease_start(kube_lease *le, prd_err *err)
{
	int e;
	pthread_mutex_lock(&le->mu);
	if(le->running) {
		pthread_mutex_unlock(&le->mu);
		return prd_err_set(err, PRD_EINVAL, "lease: already started");
	}
	le->stop = false;
	e = pthread_create(&le->thr, NULL, lease_thread, le);
	if(e == 0)
		le->running = true;
	pthread_mutex_unlock(&le->mu);
	return e ? prd_err_set(err, PRD_EIO, "lease: pthread_create: %s", strerror(e)) : 0;
}

void kube_lease_stop(kube_lease *le)
{
	bool running;
	pthread_mutex_lock(&le->mu);
	running = le->running;
	le->stop = true;
	pthread_cond_broadcast(&le->cv);
	pthread_mutex_unlock(&le->mu);
	if(running) {
		pthread_join(le->thr, NULL);
		le->running = false;
		kube_lease_release(le, NULL);
	}
}
