/* Classes a cloud driver serves itself (prd_cloud_driver.provisioning_classes
 * and provision): a request of such a class is handed to the driver with
 * the request and its PodTemplates as JSON, and the outcome becomes the
 * request's conditions like any built-in class's answer.
 *
 * The call runs on a thread of its own and is waited for at most the
 * configured timeout: a driver that hangs costs a condition, never the
 * controller's loop. While a call that timed out is still running, the
 * class answers "busy" without calling the driver again. */
#include "classes/driver_class.h"

#include "ops/log.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DC_PENDING_RETRY_NS (10 * PRD_NS_PER_SEC)

/* Shared by the module and the calls it started (a call that timed out
 * outlives its wait, and may outlive the module). */
typedef struct dc_shared {
	pthread_mutex_t mu;
	int refs;
	bool busy;
} dc_shared;

typedef struct dc_module {
	pr_class_module m;        /* first: the registry hands this back */
	char *name;
	cloud_driver *drv;
	int64_t timeout_ns;
	dc_shared *sh;
} dc_module;

typedef struct dc_call {
	dc_shared *sh;
	pthread_cond_t cv;
	bool done, abandoned;
	const prd_cloud_driver *api;
	void *state;
	char *cls, *req, *tmpls;
	prd_cloud_outcome out;
	prd_cloud_error err;
	int rc;
} dc_call;

static void shared_unref(dc_shared *sh)
{
	bool last;
	pthread_mutex_lock(&sh->mu);
	last = --sh->refs == 0;
	pthread_mutex_unlock(&sh->mu);
	if(last) {
		pthread_mutex_destroy(&sh->mu);
		free(sh);
	}
}

static void call_free(dc_call *k)
{
	dc_shared *sh = k->sh;
	pthread_cond_destroy(&k->cv);
	free(k->cls);
	free(k->req);
	free(k->tmpls);
	free(k);
	shared_unref(sh);
}

static void *call_thread(void *arg)
{
	dc_call *k = arg;
	prd_cloud_outcome out;
	prd_cloud_error err;
	int rc;
	bool abandoned;
	memset(&out, 0, sizeof(out));
	memset(&err, 0, sizeof(err));
	rc = k->api->provision(k->state, k->cls, k->req, k->tmpls, &out, &err);
	pthread_mutex_lock(&k->sh->mu);
	k->out = out;
	k->err = err;
	k->rc = rc;
	k->done = true;
	k->sh->busy = false;
	abandoned = k->abandoned;
	if(!abandoned)
		pthread_cond_signal(&k->cv);
	pthread_mutex_unlock(&k->sh->mu);
	if(abandoned) {
		log_info("a provision call that had timed out returned", "class", k->cls);
		call_free(k);
	}
	return NULL;
}

/* Call provision with a timeout. 0 with *out and *rc set; PRD_ETIMEDOUT
 * (the call goes on in the background; the module is busy until it ends);
 * PRD_EAGAIN when an earlier call is still running; PRD_ENOMEM. */
static int call_with_timeout(dc_module *dm, char *req, char *tmpls, prd_cloud_outcome *out, prd_cloud_error *cerr,
			     int *rc)
{
	dc_call *k;
	pthread_t t;
	pthread_attr_t attr;
	pthread_condattr_t ca;
	struct timespec until;
	int res = 0, started;
	pthread_mutex_lock(&dm->sh->mu);
	if(dm->sh->busy) {
		pthread_mutex_unlock(&dm->sh->mu);
		free(req);
		free(tmpls);
		return PRD_EAGAIN;
	}
	pthread_mutex_unlock(&dm->sh->mu);
	k = calloc(1, sizeof(*k));
	if(!k) {
		free(req);
		free(tmpls);
		return PRD_ENOMEM;
	}
	k->sh = dm->sh;
	k->api = dm->drv->api;
	k->state = dm->drv->state;
	k->req = req;
	k->tmpls = tmpls;
	k->cls = strdup(dm->name);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&k->cv, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_lock(&dm->sh->mu);
	dm->sh->refs++;
	pthread_mutex_unlock(&dm->sh->mu);
	if(!k->cls) {
		call_free(k);
		return PRD_ENOMEM;
	}
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += (time_t)(dm->timeout_ns / PRD_NS_PER_SEC);
	until.tv_nsec += (long)(dm->timeout_ns % PRD_NS_PER_SEC);
	if(until.tv_nsec >= PRD_NS_PER_SEC) {
		until.tv_sec++;
		until.tv_nsec -= PRD_NS_PER_SEC;
	}
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_mutex_lock(&dm->sh->mu);
	dm->sh->busy = true;
	started = pthread_create(&t, &attr, call_thread, k);
	pthread_attr_destroy(&attr);
	if(started) {
		dm->sh->busy = false;
		pthread_mutex_unlock(&dm->sh->mu);
		call_free(k);
		return PRD_ENOMEM;
	}
	while(!k->done)
		if(pthread_cond_timedwait(&k->cv, &dm->sh->mu, &until) && !k->done) {
			k->abandoned = true;
			res = PRD_ETIMEDOUT;
			break;
		}
	pthread_mutex_unlock(&dm->sh->mu);
	if(res)
		return res; /* the thread frees the call */
	*out = k->out;
	*cerr = k->err;
	*rc = k->rc;
	call_free(k);
	return 0;
}

/* The request as JSON, as the driver sees it. */
static char *request_json(const pr_class_req *req)
{
	const kube_provreq *pr = req->pr;
	json_object *o = json_object_new_object(), *md = json_object_new_object(), *spec = json_object_new_object();
	json_object *sets = json_object_new_array(), *params = json_object_new_object();
	char *s;
	size_t i;
	json_object_object_add(o, "apiVersion", json_object_new_string("autoscaling.x-k8s.io/v1"));
	json_object_object_add(o, "kind", json_object_new_string("ProvisioningRequest"));
	json_object_object_add(md, "name", json_object_new_string(pr->meta.name ? pr->meta.name : ""));
	json_object_object_add(md, "namespace", json_object_new_string(pr->meta.ns ? pr->meta.ns : ""));
	json_object_object_add(md, "uid", json_object_new_string(pr->meta.uid ? pr->meta.uid : ""));
	json_object_object_add(o, "metadata", md);
	json_object_object_add(spec, "provisioningClassName", json_object_new_string(req->class_name ? req->class_name : ""));
	for(i = 0; i < pr->npod_sets; i++) {
		json_object *ps = json_object_new_object(), *ref = json_object_new_object();
		json_object_object_add(ref, "name",
				       json_object_new_string(pr->pod_sets[i].template_name ? pr->pod_sets[i].template_name : ""));
		json_object_object_add(ps, "podTemplateRef", ref);
		json_object_object_add(ps, "count", json_object_new_int(pr->pod_sets[i].count));
		json_object_array_add(sets, ps);
	}
	json_object_object_add(spec, "podSets", sets);
	for(i = 0; i < pr->nparameters; i++)
		if(pr->parameters[i].key)
			json_object_object_add(params, pr->parameters[i].key,
					       json_object_new_string(pr->parameters[i].value ? pr->parameters[i].value : ""));
	json_object_object_add(spec, "parameters", params);
	json_object_object_add(o, "spec", spec);
	s = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(o);
	return s;
}

/* [{"name": N, "template": {...}}] for every podSet's PodTemplate. */
static char *templates_json(const pr_class_host *h, const pr_class_req *req)
{
	const kube_provreq *pr = req->pr;
	json_object *a = json_object_new_array();
	char *s;
	size_t i;
	for(i = 0; i < pr->npod_sets; i++) {
		const char *name = pr->pod_sets[i].template_name;
		json_object *t = name ? h->template_json(h->ctx, name) : NULL, *e;
		if(!t)
			continue;
		e = json_object_new_object();
		json_object_object_add(e, "name", json_object_new_string(name));
		json_object_object_add(e, "template", json_object_get(t));
		json_object_array_add(a, e);
	}
	s = strdup(json_object_to_json_string_ext(a, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(a);
	return s;
}

/* A reason the API takes: CamelCase letters and digits, starting with a
 * letter, at most 63 characters (the driver's buffer is 64). */
static bool good_reason(const char *r, size_t cap)
{
	size_t i, n = strnlen(r, cap);
	if(n == 0 || n >= cap || !((r[0] >= 'A' && r[0] <= 'Z') || (r[0] >= 'a' && r[0] <= 'z')))
		return false;
	for(i = 0; i < n; i++)
		if(!((r[i] >= 'A' && r[i] <= 'Z') || (r[i] >= 'a' && r[i] <= 'z') || (r[i] >= '0' && r[i] <= '9')))
			return false;
	return true;
}

/* A request the driver provisioned holds, like a check-capacity request,
 * the room its pods take on the existing nodes until they are scheduled
 * or the booking TTL ends (so no later request is handed that room). Pods
 * that fit no existing node are on capacity the driver keeps outside the
 * cluster's Nodes (or Nodes not yet registered): nothing here can hold
 * that, and the request is Provisioned all the same, as the driver said. */
static void book_what_fits(const pr_class_host *h, const pr_class_req *req)
{
	sched_snapshot *snap = h->snapshot(h->ctx);
	sched_place_result res;
	prd_err e;
	if(!snap)
		return; /* the pass acts no further: nothing is written */
	memset(&res, 0, sizeof(res));
	if(sched_snapshot_fork(snap)) {
		log_warn("cannot book a driver-provisioned request's room", "request", req->pr->meta.name);
		return;
	}
	if(sched_place(snap, req->sets, req->nsets, &res, &e) == 0 && res.placed > 0 &&
	   h->book(h->ctx, req->sets, req->nsets, &res, &e) == 0) {
		sched_snapshot_commit(snap);
		if(!res.fits_all)
			log_info("a driver-provisioned request's pods fit the existing nodes only in part; that part is booked",
				 "request", req->pr->meta.name, "namespace", req->pr->meta.ns, "booked_pods",
				 LOGI(res.placed), "pods", LOGI(res.requested));
	} else {
		sched_snapshot_revert(snap);
	}
	sched_place_result_free(&res);
}

static void dc_decide(const pr_class_module *m, const pr_class_host *h, const pr_class_req *req)
{
	dc_module *dm = (dc_module *)m;
	prd_cloud_outcome out;
	prd_cloud_error cerr;
	char *rj, *tj, msg[PRD_CLOUD_MSG_MAX + 300];
	const char *reason;
	int rc = 0, res;
	if(req->terminal || !req->sets || !h->may_act(h->ctx))
		return;
	rj = request_json(req);
	tj = templates_json(h, req);
	if(!rj || !tj) {
		free(rj);
		free(tj);
		h->not_provisioned(h->ctx, PR_R_DRIVER_ERROR, "out of memory preparing the call to the driver");
		return;
	}
	memset(&out, 0, sizeof(out));
	memset(&cerr, 0, sizeof(cerr));
	res = call_with_timeout(dm, rj, tj, &out, &cerr, &rc);
	if(res == PRD_EAGAIN) {
		snprintf(msg, sizeof(msg), "driver %s is still busy with an earlier provision call that timed out",
			 dm->drv->api->name);
		h->set_cond(h->ctx, PR_COND_PROVISIONED, "False", PR_R_DRIVER_ERROR, msg);
		h->wake_at(h->ctx, h->now + DC_PENDING_RETRY_NS);
		return;
	}
	if(res == PRD_ETIMEDOUT) {
		snprintf(msg, sizeof(msg), "driver %s did not answer provision within %llds", dm->drv->api->name,
			 (long long)(dm->timeout_ns / PRD_NS_PER_SEC) ? (long long)(dm->timeout_ns / PRD_NS_PER_SEC) : 1);
		log_warn("driver provision call timed out", "driver", dm->drv->api->name, "class", dm->name,
			 "request", req->pr->meta.name);
		h->not_provisioned(h->ctx, PR_R_DRIVER_ERROR, msg);
		return;
	}
	if(res) {
		h->not_provisioned(h->ctx, PR_R_DRIVER_ERROR, "cannot call the driver: out of memory");
		return;
	}
	if(rc) {
		cerr.message[sizeof(cerr.message) - 1] = '\0';
		snprintf(msg, sizeof(msg), "driver %s: provision: %s", dm->drv->api->name,
			 cerr.message[0] ? cerr.message : "failed without a message");
		h->not_provisioned(h->ctx, PR_R_DRIVER_ERROR, msg);
		return;
	}
	out.message[sizeof(out.message) - 1] = '\0';
	if(out.reason[0] && !good_reason(out.reason, sizeof(out.reason))) {
		snprintf(msg, sizeof(msg), "driver %s answered with a reason that is not a CamelCase word", dm->drv->api->name);
		h->not_provisioned(h->ctx, PR_R_DRIVER_ERROR, msg);
		return;
	}
	switch(out.state) {
	case PRD_CLOUD_OUTCOME_PENDING:
		reason = out.reason[0] ? out.reason : "Pending";
		h->set_cond(h->ctx, PR_COND_PROVISIONED, "False", reason,
			    out.message[0] ? out.message : "the driver is working on it");
		h->wake_at(h->ctx, h->now + DC_PENDING_RETRY_NS);
		return;
	case PRD_CLOUD_OUTCOME_PROVISIONED:
		book_what_fits(h, req);
		h->provisioned(h->ctx, out.reason[0] ? out.reason : PR_R_PROVISIONED,
			       out.message[0] ? out.message : "the driver provisioned the capacity");
		return;
	case PRD_CLOUD_OUTCOME_NOT_PROVISIONED:
		h->not_provisioned(h->ctx, out.reason[0] ? out.reason : PR_R_NOT_FOUND,
				   out.message[0] ? out.message : "the driver could not provision the capacity");
		return;
	case PRD_CLOUD_OUTCOME_FAILED:
		h->failed(h->ctx, out.reason[0] ? out.reason : "ProvisioningFailed",
			  out.message[0] ? out.message : "the driver failed the request");
		return;
	default:
		snprintf(msg, sizeof(msg), "driver %s answered an outcome state %d that is not one of 0-3",
			 dm->drv->api->name, (int)out.state);
		h->not_provisioned(h->ctx, PR_R_DRIVER_ERROR, msg);
	}
}

int pr_driver_class_new(cloud_driver *drv, const char *class_name, int64_t timeout_ns, pr_class_module **out,
			prd_err *err)
{
	dc_module *dm = calloc(1, sizeof(*dm));
	if(!dm)
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	dm->name = strdup(class_name);
	dm->sh = calloc(1, sizeof(*dm->sh));
	if(!dm->name || !dm->sh) {
		free(dm->name);
		free(dm->sh);
		free(dm);
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	}
	pthread_mutex_init(&dm->sh->mu, NULL);
	dm->sh->refs = 1;
	dm->drv = drv;
	dm->timeout_ns = timeout_ns > 0 ? timeout_ns : 10 * PRD_NS_PER_SEC;
	dm->m.name = dm->name;
	/* The metric label and plugin short name: the class name itself
	 * (driver classes are not known when the plugin is built). */
	dm->m.short_name = dm->name;
	dm->m.ud = drv;
	dm->m.decide = dc_decide;
	*out = &dm->m;
	return 0;
}

void pr_driver_class_free(pr_class_module *m)
{
	dc_module *dm = (dc_module *)m;
	if(!dm)
		return;
	shared_unref(dm->sh);
	free(dm->name);
	free(dm);
}

bool pr_driver_class_is(const pr_class_module *m)
{
	return m && m->decide == dc_decide;
}
