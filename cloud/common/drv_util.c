/* Helpers shared by the node-group drivers shipped with provreqd: error
 * messages, logging and kube-apiserver requests through the host services,
 * and JSON access. Compiled into each driver module (a driver never links
 * against the daemon), so every name here stays local to the module. */
#include "common/drv_util.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int drv_fail(prd_cloud_error *err, int code, const char *fmt, ...)
{
	va_list ap;
	if(err) {
		err->code = code;
		va_start(ap, fmt);
		vsnprintf(err->message, sizeof(err->message), fmt, ap);
		va_end(ap);
	}
	return code;
}

void drv_log(const prd_cloud_host *host, int level, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	if(!host || !host->log)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	host->log(host->ctx, level, line);
}

char *drv_strdup(const char *s)
{
	size_t n;
	char *p;
	if(!s)
		return NULL;
	n = strlen(s) + 1;
	p = malloc(n);
	if(p)
		memcpy(p, s, n);
	return p;
}

const char *drv_jstr(json_object *obj, const char *key)
{
	json_object *v;
	if(!obj || !json_object_object_get_ex(obj, key, &v) || !json_object_is_type(v, json_type_string))
		return NULL;
	return json_object_get_string(v);
}

json_object *drv_jobj(json_object *obj, const char *key)
{
	json_object *v;
	if(!obj || !json_object_object_get_ex(obj, key, &v) || !json_object_is_type(v, json_type_object))
		return NULL;
	return v;
}

int drv_request(const prd_cloud_host *host, const char *method, const char *path, const char *content_type,
		 json_object *body, json_object **out, long *http_status, prd_cloud_error *err)
{
	const char *text = NULL;
	size_t text_len = 0, resp_len = 0;
	char *resp = NULL;
	long status = 0;
	prd_cloud_error e;
	int rc;

	if(out)
		*out = NULL;
	if(body) {
		text = json_object_to_json_string_ext(body, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
		if(!text)
			return drv_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
		text_len = strlen(text);
		if(!content_type)
			content_type = "application/json";
	}
	memset(&e, 0, sizeof(e));
	rc = host->kube_request(host->ctx, method, path, content_type, text, text_len, &status, &resp,
				   &resp_len, &e);
	if(http_status)
		*http_status = status;
	if(rc) {
		if(resp)
			host->free(host->ctx, resp);
		if(!e.message[0])
			snprintf(e.message, sizeof(e.message), "HTTP %ld", status);
		return drv_fail(err, rc, "%s %s: %s", method, path, e.message);
	}
	if(out && resp && resp_len) {
		*out = json_tokener_parse(resp);
		if(!*out) {
			host->free(host->ctx, resp);
			return drv_fail(err, PRD_CLOUD_EIO, "%s %s: the answer is not JSON", method, path);
		}
	}
	if(resp)
		host->free(host->ctx, resp);
	return 0;
}

bool drv_query_escape(const char *s, char *out, size_t n)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;
	for(; *s; s++) {
		unsigned char c = (unsigned char)*s;
		bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
			     c == '-' || c == '_' || c == '.' || c == '~';
		if(o + (plain ? 1 : 3) >= n)
			return false;
		if(plain) {
			out[o++] = (char)c;
		} else {
			out[o++] = '%';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 15];
		}
	}
	out[o] = '\0';
	return true;
}

int drv_list(const prd_cloud_host *host, const char *path, int (*fn)(void *ud, json_object *item), void *ud,
	      prd_cloud_error *err)
{
	char *cont = NULL;
	int rc = 0;
	do {
		char page[2048], token[1024] = "";
		json_object *list = NULL, *items;
		const char *next;
		size_t i, n;
		bool fits = !cont || drv_query_escape(cont, token, sizeof(token));
		int w = snprintf(page, sizeof(page), "%s%slimit=500%s%s", path, strchr(path, '?') ? "&" : "?",
				 cont ? "&continue=" : "", token);
		free(cont);
		cont = NULL;
		if(!fits || w < 0 || (size_t)w >= sizeof(page))
			return drv_fail(err, PRD_CLOUD_EINVAL, "list path too long: %s", path);
		rc = drv_request(host, "GET", page, NULL, NULL, &list, NULL, err);
		if(rc)
			return rc;
		if(!list || !json_object_object_get_ex(list, "items", &items) ||
		   !json_object_is_type(items, json_type_array)) {
			json_object_put(list);
			return drv_fail(err, PRD_CLOUD_EIO, "GET %s: the answer is not a list", path);
		}
		n = json_object_array_length(items);
		for(i = 0; i < n && !rc; i++)
			rc = fn(ud, json_object_array_get_idx(items, i));
		next = drv_jstr(drv_jobj(list, "metadata"), "continue");
		if(!rc && next && next[0]) {
			cont = drv_strdup(next);
			if(!cont)
				rc = drv_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
		}
		json_object_put(list);
	} while(!rc && cont);
	free(cont);
	return rc;
}

void drv_instances_free(prd_cloud_instance *v, size_t n)
{
	size_t i;
	for(i = 0; v && i < n; i++) {
		free(v[i].id);
		free(v[i].node_name);
		free(v[i].error_code);
		free(v[i].error_message);
		free(v[i].owner);
	}
	free(v);
}

void drv_release_node_groups(void *state, prd_cloud_node_group *groups, size_t count)
{
	size_t i;
	(void)state;
	for(i = 0; groups && i < count; i++)
		free(groups[i].id);
	free(groups);
}

bool drv_taint_effect_ok(const char *e)
{
	return e && (!strcmp(e, "NoSchedule") || !strcmp(e, "PreferNoSchedule") || !strcmp(e, "NoExecute"));
}

bool drv_owner_token_ok(const char *s)
{
	size_t n = s ? strlen(s) : 0, i;
	if(n < 1 || n > 63)
		return false;
	for(i = 0; i < n; i++) {
		char c = s[i];
		bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
		if(!alnum && (i == 0 || i == n - 1 || (c != '-' && c != '_' && c != '.')))
			return false;
	}
	return true;
}

bool drv_label_in_domain(const char *key, const char *dom)
{
	const char *slash = key ? strchr(key, '/') : NULL;
	size_t dl = slash ? (size_t)(slash - key) : 0, n = strlen(dom);
	return slash && dl >= n && !strncmp(slash - n, dom, n) && (dl == n || slash[-(ptrdiff_t)n - 1] == '.');
}

void drv_release_shapes(void *state, prd_cloud_shape *v, size_t count)
{
	size_t i;
	(void)state;
	for(i = 0; v && i < count; i++) {
		free(v[i].name);
		free(v[i].node_json);
		free(v[i].zones);
	}
	free(v);
}

void drv_release_instances(void *state, prd_cloud_instance *v, size_t count)
{
	(void)state;
	drv_instances_free(v, count);
}

void drv_release_string(void *state, char *s)
{
	(void)state;
	free(s);
}

/* The work drv_parallel shares among its threads. */
typedef struct drv_par_job {
	void (*fn)(void *ud, size_t i);
	void *ud;
	size_t n;
	pthread_mutex_t mu;
	size_t next;
} drv_par_job;

static void *drv_par_worker(void *arg)
{
	drv_par_job *j = arg;
	for(;;) {
		size_t i;
		pthread_mutex_lock(&j->mu);
		i = j->next < j->n ? j->next++ : j->n;
		pthread_mutex_unlock(&j->mu);
		if(i >= j->n)
			return NULL;
		j->fn(j->ud, i);
	}
}

void drv_parallel(unsigned par, size_t n, void (*fn)(void *ud, size_t i), void *ud)
{
	pthread_t tid[DRV_PARALLEL_MAX];
	drv_par_job j;
	unsigned k, made = 0;
	j.fn = fn;
	j.ud = ud;
	j.n = n;
	j.next = 0;
	pthread_mutex_init(&j.mu, NULL);
	if(par > DRV_PARALLEL_MAX)
		par = DRV_PARALLEL_MAX;
	if(par > n)
		par = (unsigned)n;
	for(k = 1; k < par; k++)
		if(pthread_create(&tid[made], NULL, drv_par_worker, &j) == 0)
			made++;
	drv_par_worker(&j);
	for(k = 0; k < made; k++)
		pthread_join(tid[k], NULL);
	pthread_mutex_destroy(&j.mu);
}
