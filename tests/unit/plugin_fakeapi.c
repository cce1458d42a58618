/* A stand-in apiserver for test_plugin_cli.sh: the loopback server of the
 * kube client tests, answering what kubectl-create-provisioningrequest
 * sends in one of a few ways, and writing every request it gets (method,
 * URL, credentials, impersonation headers, body) to a log file the script
 * reads.
 *
 *   plugin_fakeapi MODE LOGFILE
 *
 * prints its URL on stdout and serves until SIGTERM (or 60 s). MODE:
 *   create       POSTs are stored: 201 with the object, a uid added
 *   nocrd        POSTs of provisioningrequests answer 404 with the generic
 *                Status the apiserver gives for a resource it does not serve
 *   nocrd-plain  the same 404 as bare "404 page not found" text
 *   exists       POSTs of provisioningrequests answer 409 AlreadyExists
 * In every mode a GET of a PodTemplate whose name begins with "missing"
 * answers 404; other GETs answer 200 with an empty object. */
#include "test_kube_fakesrv.h"

#include <json-c/json.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct api {
	const char *mode;
	FILE *log;
	pthread_mutex_t mu;
} api;

static char *status_body(int code, const char *reason, const char *msg)
{
	json_object *o = json_object_new_object();
	char *s;
	json_object_object_add(o, "kind", json_object_new_string("Status"));
	json_object_object_add(o, "apiVersion", json_object_new_string("v1"));
	json_object_object_add(o, "status", json_object_new_string("Failure"));
	json_object_object_add(o, "message", json_object_new_string(msg));
	json_object_object_add(o, "reason", json_object_new_string(reason));
	json_object_object_add(o, "code", json_object_new_int(code));
	s = fake_strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
	json_object_put(o);
	return s;
}

static void handle(void *ud, const fake_req *rq, fake_resp *r)
{
	api *a = ud;
	bool provreq = strstr(rq->url, "/provisioningrequests") != NULL;

	pthread_mutex_lock(&a->mu);
	fprintf(a->log, "%s %s\nauth: %s\nimpersonate-user: %s\nimpersonate-groups: %s\nbody: %s\n", rq->method,
		rq->url, rq->auth, rq->impersonate_user, rq->impersonate_groups, rq->body);
	fflush(a->log);
	pthread_mutex_unlock(&a->mu);

	if(strcmp(rq->method, "POST") == 0 && provreq && strcmp(a->mode, "nocrd") == 0) {
		r->status = 404;
		r->body = status_body(404, "NotFound", "the server could not find the requested resource");
	} else if(strcmp(rq->method, "POST") == 0 && provreq && strcmp(a->mode, "nocrd-plain") == 0) {
		r->status = 404;
		r->body = fake_strdup("404 page not found\n");
	} else if(strcmp(rq->method, "POST") == 0 && provreq && strcmp(a->mode, "exists") == 0) {
		json_object *o = json_tokener_parse(rq->body), *meta = NULL, *name = NULL;
		char msg[400];
		json_object_object_get_ex(o, "metadata", &meta);
		json_object_object_get_ex(meta, "name", &name);
		snprintf(msg, sizeof(msg), "provisioningrequests.autoscaling.x-k8s.io \"%s\" already exists",
			 name ? json_object_get_string(name) : "");
		json_object_put(o);
		r->status = 409;
		r->body = status_body(409, "AlreadyExists", msg);
	} else if(strcmp(rq->method, "POST") == 0) {
		json_object *o = json_tokener_parse(rq->body), *meta = NULL;
		if(!o || !json_object_object_get_ex(o, "metadata", &meta)) {
			json_object_put(o);
			r->status = 400;
			r->body = status_body(400, "BadRequest", "not an object");
			return;
		}
		json_object_object_add(meta, "uid", json_object_new_string("0c1d2e3f-0000-4000-8000-000000000001"));
		r->status = 201;
		r->body = fake_strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
		json_object_put(o);
	} else if(strcmp(rq->method, "GET") == 0 && strstr(rq->url, "/podtemplates/missing")) {
		r->status = 404;
		r->body = status_body(404, "NotFound", "podtemplates \"missing\" not found");
	} else {
		r->status = 200;
		r->body = fake_strdup("{}");
	}
}

int main(int argc, char **argv)
{
	api a;
	fake_srv *srv;
	sigset_t set;
	int sig;

	if(argc != 3) {
		fprintf(stderr, "usage: %s create|nocrd|nocrd-plain|exists LOGFILE\n", argv[0]);
		return 2;
	}
	memset(&a, 0, sizeof(a));
	a.mode = argv[1];
	a.log = fopen(argv[2], "w");
	if(!a.log) {
		perror(argv[2]);
		return 1;
	}
	pthread_mutex_init(&a.mu, NULL);
	/* Blocked before the server's threads start, so they inherit the
	 * mask and only sigwait below sees the signals. */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGALRM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	srv = fake_start(handle, &a);
	if(!srv) {
		fputs("cannot start the server\n", stderr);
		return 1;
	}
	printf("%s\n", fake_url(srv));
	fflush(stdout);
	alarm(60);
	sigwait(&set, &sig);
	fake_stop(srv);
	fclose(a.log);
	pthread_mutex_destroy(&a.mu);
	return 0;
}
