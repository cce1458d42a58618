/* Watched collections of the management cluster: list once, then watch,
 * so a pass reads Cluster API objects from memory instead of the apiserver
 * (issue 25, "Watch, don't poll").
 *
 * Only with a management client of the driver's own (capi_mgmt.c): the
 * host's kube_request answers one request at a time and cannot stream a
 * watch. Each collection (a plural in a namespace or in all of them) has a
 * thread that LISTs it, then WATCHes from the list's resourceVersion (with
 * bookmarks, the server ending each watch after 5 minutes), applying every
 * event to a map of deep copies. A 410 Gone, or any failure, relists; while
 * a collection is not in step with the apiserver (before its first list,
 * after a failed watch until the relist) it answers PRD_CLOUD_EAGAIN and
 * the caller reads the apiserver as it did without watches.
 *
 * Threads: the map, `synced` and the counters are guarded by the
 * collection's mutex; readers (the driver's calls, on provreqd's worker)
 * take deep copies under it, so no json-c object is ever shared between
 * threads. `stop` is atomic. The list of collections itself is touched
 * only by the worker. */
#include "clusterapi/clusterapi.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kube/client.h"

struct capi_coll {
	char *key;             /* "group/version|ns|plural" */
	char *group, *version, *plural, *ns; /* ns NULL: all namespaces */
	kube_resource res;     /* points into the strings above */
	kube_client *kc;       /* borrowed from capi_mgmt */
	const prd_cloud_host *host; /* for log lines */
	pthread_t th;
	bool started;
	atomic_bool stop;
	pthread_mutex_t mu;
	json_object *items;    /* "ns/name" -> deep copy (mu) */
	bool synced;           /* items are the apiserver's (mu) */
	bool absent;           /* the kind is not served (404) (mu) */
	unsigned long lists, events; /* (mu) */
	char last_rv[64];      /* newest resourceVersion seen (thread only) */
	capi_coll *next;
};

static void coll_log(capi_coll *w, int level, const char *what, const char *why)
{
	char line[700];
	if(!w->host || !w->host->log)
		return;
	snprintf(line, sizeof(line), "clusterapi: watch of %s%s%s: %s%s%s", w->plural, w->ns ? " in " : "",
		 w->ns ? w->ns : "", what, why ? ": " : "", why ? why : "");
	w->host->log(w->host->ctx, level, line);
}

static bool drv_str_eq(const char *a, const char *b)
{
	return a && b && !strcmp(a, b);
}

static void item_key(json_object *obj, char *out, size_t n)
{
	json_object *md = capi_jobj(obj, "metadata");
	const char *ns = capi_jstr(md, "namespace"), *name = capi_jstr(md, "name");
	snprintf(out, n, "%s/%s", ns ? ns : "", name ? name : "");
}

static int collect(void *ud, json_object *item)
{
	char key[600];
	json_object *copy = NULL;
	item_key(item, key, sizeof(key));
	if(json_object_deep_copy(item, &copy, NULL))
		return PRD_ENOMEM;
	json_object_object_add(ud, key, copy);
	return 0;
}

static int on_event(void *ud, const char *type, json_object *obj)
{
	capi_coll *w = ud;
	char key[600];
	json_object *copy = NULL;
	const char *rv = capi_jstr(capi_jobj(obj, "metadata"), "resourceVersion");
	if(rv)
		snprintf(w->last_rv, sizeof(w->last_rv), "%s", rv);
	if(!strcmp(type, "BOOKMARK"))
		return 0;
	item_key(obj, key, sizeof(key));
	if(strcmp(type, "DELETED") && json_object_deep_copy(obj, &copy, NULL))
		return PRD_ENOMEM;
	pthread_mutex_lock(&w->mu);
	if(copy)
		json_object_object_add(w->items, key, copy);
	else
		json_object_object_del(w->items, key);
	w->events++;
	pthread_mutex_unlock(&w->mu);
	return 0;
}

static bool cancelled(void *ud)
{
	capi_coll *w = ud;
	return atomic_load(&w->stop);
}

/* Wait `ms`, waking early when asked to stop. */
static void pause_ms(capi_coll *w, long ms)
{
	struct timespec ts = {0, 100 * 1000 * 1000};
	for(; ms > 0 && !atomic_load(&w->stop); ms -= 100)
		nanosleep(&ts, NULL);
}

static void unsync(capi_coll *w)
{
	pthread_mutex_lock(&w->mu);
	w->synced = false;
	pthread_mutex_unlock(&w->mu);
}

static void *coll_thread(void *arg)
{
	capi_coll *w = arg;
	char *rv = NULL;
	long backoff = 800;
	while(!atomic_load(&w->stop)) {
		kube_status st;
		prd_err e = {0};
		int rc;
		memset(&st, 0, sizeof(st));
		if(!rv) {
			json_object *fresh = json_object_new_object();
			rc = fresh ? kube_list(w->kc, &w->res, w->ns, NULL, collect, fresh, &rv, &st, &e) : PRD_ENOMEM;
			if(rc == PRD_ENOTFOUND) {
				/* Not served (a MachinePool CRD not installed): empty,
				 * and asked again in a minute. */
				pthread_mutex_lock(&w->mu);
				json_object_put(w->items);
				w->items = fresh;
				w->synced = true;
				w->absent = true;
				pthread_mutex_unlock(&w->mu);
				free(rv);
				rv = NULL;
				pause_ms(w, 60000);
				continue;
			}
			if(rc) {
				json_object_put(fresh);
				free(rv);
				rv = NULL;
				unsync(w);
				coll_log(w, PRD_CLOUD_LOG_WARN, "list failed, reading the apiserver meanwhile", e.msg);
				pause_ms(w, backoff);
				backoff = backoff < 15000 ? backoff * 2 : 30000;
				continue;
			}
			pthread_mutex_lock(&w->mu);
			json_object_put(w->items);
			w->items = fresh;
			w->synced = true;
			w->absent = false;
			w->lists++;
			pthread_mutex_unlock(&w->mu);
			backoff = 800;
		}
		{
			kube_watch_opts o;
			memset(&o, 0, sizeof(o));
			o.resource_version = rv;
			o.timeout_s = 300;
			o.bookmarks = true;
			o.cancelled = cancelled;
			o.cancel_ud = w;
			rc = kube_watch(w->kc, &w->res, w->ns, &o, on_event, w, &st, &e);
		}
		if(rc == 0 && !atomic_load(&w->stop)) {
			/* The server ended the watch: go on from the newest version
			 * seen (an event's or a bookmark's) or, without one, from
			 * where this watch began. */
			backoff = 800;
			if(w->last_rv[0]) {
				free(rv);
				rv = capi_strdup(w->last_rv);
				w->last_rv[0] = '\0';
			}
			if(rv)
				continue;
		} else if(rc && !atomic_load(&w->stop)) {
			unsync(w);
			if(rc != PRD_EGONE) {
				coll_log(w, PRD_CLOUD_LOG_WARN, "watch failed, reading the apiserver until it is listed again",
					 e.msg);
				pause_ms(w, backoff);
				backoff = backoff < 15000 ? backoff * 2 : 30000;
			}
		}
		free(rv);
		rv = NULL;
	}
	free(rv);
	return NULL;
}

static void coll_free(capi_coll *w)
{
	if(!w)
		return;
	if(w->started) {
		atomic_store(&w->stop, true);
		pthread_join(w->th, NULL);
	}
	pthread_mutex_destroy(&w->mu);
	json_object_put(w->items);
	free(w->key);
	free(w->group);
	free(w->version);
	free(w->plural);
	free(w->ns);
	free(w);
}

/* The collection for (apiVersion gv, ns, plural), started on first use.
 * NULL without a management client, or when it cannot be made. */
static capi_coll *coll_of(capi *c, const char *gv, const char *ns, const char *plural)
{
	kube_client *kc = capi_mgmt_client(c);
	const char *slash = strchr(gv, '/');
	char key[700];
	capi_coll *w;
	if(!kc || !c->watch)
		return NULL;
	snprintf(key, sizeof(key), "%s|%s|%s", gv, ns ? ns : "", plural);
	for(w = c->colls; w; w = w->next)
		if(!strcmp(w->key, key))
			return w;
	if(!(w = calloc(1, sizeof(*w))))
		return NULL;
	pthread_mutex_init(&w->mu, NULL);
	w->key = capi_strdup(key);
	w->group = slash ? strndup(gv, (size_t)(slash - gv)) : capi_strdup("");
	w->version = capi_strdup(slash ? slash + 1 : gv);
	w->plural = capi_strdup(plural);
	w->ns = ns ? capi_strdup(ns) : NULL;
	w->items = json_object_new_object();
	w->kc = kc;
	w->host = c->host;
	if(!w->key || !w->group || !w->version || !w->plural || (ns && !w->ns) || !w->items) {
		coll_free(w);
		return NULL;
	}
	w->res.group = w->group;
	w->res.version = w->version;
	w->res.resource = w->plural;
	w->res.kind = w->plural;
	w->res.namespaced = true;
	if(pthread_create(&w->th, NULL, coll_thread, w)) {
		coll_free(w);
		return NULL;
	}
	w->started = true;
	w->next = c->colls;
	c->colls = w;
	return w;
}

int capi_watch_list(capi *c, const char *gv, const char *ns, const char *plural, const char *only_ns,
		    const sel *match, json_object **items)
{
	capi_coll *w = coll_of(c, gv, ns, plural);
	json_object *arr;
	int rc = 0;
	*items = NULL;
	if(!w)
		return PRD_CLOUD_EAGAIN;
	if(!(arr = json_object_new_array()))
		return PRD_CLOUD_ENOMEM;
	pthread_mutex_lock(&w->mu);
	if(!w->synced) {
		rc = PRD_CLOUD_EAGAIN;
	} else if(w->absent) {
		rc = PRD_CLOUD_ENOTFOUND;
	} else {
		json_object_object_foreach(w->items, k, v) {
			json_object *copy = NULL;
			(void)k;
			if(only_ns && !drv_str_eq(capi_jstr(capi_jobj(v, "metadata"), "namespace"), only_ns))
				continue;
			if(match && !sel_matches_json(match, capi_jobj(capi_jobj(v, "metadata"), "labels")))
				continue;
			if(json_object_deep_copy(v, &copy, NULL) || json_object_array_add(arr, copy)) {
				json_object_put(copy);
				rc = PRD_CLOUD_ENOMEM;
				break;
			}
		}
	}
	pthread_mutex_unlock(&w->mu);
	if(rc) {
		json_object_put(arr);
		return rc;
	}
	*items = arr;
	return 0;
}

int capi_watch_get(capi *c, const char *gv, const char *ns, const char *plural, const char *obj_ns,
		   const char *name, json_object **obj)
{
	capi_coll *w = coll_of(c, gv, ns, plural);
	json_object *v;
	char key[600];
	int rc = 0;
	*obj = NULL;
	if(!w)
		return PRD_CLOUD_EAGAIN;
	snprintf(key, sizeof(key), "%s/%s", obj_ns ? obj_ns : "", name);
	pthread_mutex_lock(&w->mu);
	if(!w->synced)
		rc = PRD_CLOUD_EAGAIN;
	else if(w->absent || !json_object_object_get_ex(w->items, key, &v))
		rc = PRD_CLOUD_ENOTFOUND;
	else if(json_object_deep_copy(v, obj, NULL))
		rc = PRD_CLOUD_ENOMEM;
	pthread_mutex_unlock(&w->mu);
	return rc;
}

void capi_watch_stats(capi *c, unsigned long *lists, unsigned long *events)
{
	capi_coll *w;
	*lists = *events = 0;
	for(w = c->colls; w; w = w->next) {
		pthread_mutex_lock(&w->mu);
		*lists += w->lists;
		*events += w->events;
		pthread_mutex_unlock(&w->mu);
	}
}

void capi_watch_free(capi *c)
{
	capi_coll *w = c->colls, *next;
	for(; w; w = next) {
		next = w->next;
		coll_free(w);
	}
	c->colls = NULL;
}
