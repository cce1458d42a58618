/* Watch streaming: newline framing of the chunked answer and decoding of
 * watch events. The apiserver writes one JSON object per line; curl hands
 * us chunks cut anywhere, so the framer keeps the tail of an incomplete
 * line and scans only bytes it has not looked at yet. */
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "kube/client.h"
#include "kube/client_int.h"
#include "kube/jscan.h"
#include "ops/log.h"
#include "util/buf.h"
#include "util/str.h"

#define WATCH_LINE_MAX (64u * 1024 * 1024)

void kube__framer_init(kube_framer *f, size_t max_line)
{
	buf_init(&f->b);
	f->start = 0;
	f->scanned = 0;
	f->max_line = max_line ? max_line : WATCH_LINE_MAX;
}

void kube__framer_free(kube_framer *f)
{
	buf_free(&f->b);
	f->start = f->scanned = 0;
}

size_t kube__framer_pending(const kube_framer *f)
{
	return f->b.len - f->start;
}

int kube__framer_feed(kube_framer *f, const char *data, size_t len, kube_line_fn fn, void *ud)
{
	int rc = 0;

	if(len && buf_append(&f->b, data, len))
		return f->b.failed;
	while(f->b.len > f->scanned) {
		char *base = f->b.data;
		char *nl = memchr(base + f->scanned, '\n', f->b.len - f->scanned);
		size_t pos, llen;
		char *line;

		if(!nl) {
			f->scanned = f->b.len;
			break;
		}
		pos = (size_t)(nl - base);
		*nl = '\0';
		line = base + f->start;
		llen = pos - f->start;
		if(llen && line[llen - 1] == '\r')
			line[--llen] = '\0';
		f->start = f->scanned = pos + 1;
		if(strspn(line, " \t") == llen)
			continue;
		rc = fn(ud, line, llen);
		if(rc)
			break;
	}
	if(!rc && f->b.len - f->start > f->max_line)
		rc = PRD_ERANGE;
	/* Drop consumed lines once per feed. */
	if(f->start) {
		buf_consume(&f->b, f->start);
		f->scanned -= f->start;
		f->start = 0;
	}
	return rc;
}

int kube__watch_line(const char *line, size_t len, kube_event_fn fn, void *ud, kube_status *st,
		     prd_err *err)
{
	json_tokener *tok = json_tokener_new_ex(JSON_TOKENER_DEFAULT_DEPTH * 4);
	json_object *ev = NULL, *type, *obj;
	const char *t;
	int rc = 0;

	if(!tok)
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	ev = json_tokener_parse_ex(tok, line, (int)len);
	if(!ev || json_tokener_get_error(tok) != json_tokener_success ||
	   !json_object_is_type(ev, json_type_object)) {
		rc = prd_err_set(err, PRD_EINVAL, "watch: event is not a JSON object");
		goto done;
	}
	if(!json_object_object_get_ex(ev, "type", &type) || !json_object_is_type(type, json_type_string) ||
	   !json_object_object_get_ex(ev, "object", &obj) || !json_object_is_type(obj, json_type_object)) {
		rc = prd_err_set(err, PRD_EINVAL, "watch: event without type or object");
		goto done;
	}
	t = json_object_get_string(type);
	if(strcmp(t, "ERROR") == 0) {
		json_object *code;
		long c = json_object_object_get_ex(obj, "code", &code) ? (long)json_object_get_int64(code) : 500;
		const char *s = json_object_to_json_string_ext(obj, JSON_C_TO_STRING_PLAIN);
		kube_status lst;
		if(!st)
			st = &lst;
		rc = kube__status_decode(c, s, strlen(s), -1, st);
		prd_err_set(err, rc, "watch: ERROR event: %ld %s: %s", st->http_code, st->reason, st->message);
		goto done;
	}
	if(strcmp(t, "ADDED") != 0 && strcmp(t, "MODIFIED") != 0 && strcmp(t, "DELETED") != 0 &&
	   strcmp(t, "BOOKMARK") != 0) {
		rc = prd_err_set(err, PRD_EINVAL, "watch: unknown event type %s", t);
		goto done;
	}
	rc = fn(ud, t, obj);
done:
	json_object_put(ev);
	json_tokener_free(tok);
	return rc;
}

typedef struct src_adapter {
	kube_src_event_fn fn;
	void *ud;
} src_adapter;

static int src_from_tree(void *ud, const char *type, json_object *obj)
{
	src_adapter *a = ud;
	kube_item_src src = { NULL, 0, 0, obj };
	return a->fn(a->ud, type, &src);
}

int kube__watch_line_text(const char *line, size_t len, kube_src_event_fn fn, void *ud, kube_status *st,
			  prd_err *err)
{
	src_adapter a = { fn, ud };
	kube_jstr obj;
	char type[16];

	if(kube__event_scan(line, len, KUBE_JSON_MAX_DEPTH, type, &obj) == 0 &&
	   (strcmp(type, "ADDED") == 0 || strcmp(type, "MODIFIED") == 0 || strcmp(type, "DELETED") == 0 ||
	    strcmp(type, "BOOKMARK") == 0)) {
		/* The object sits one container deep in its event. */
		kube_item_src src = { obj.s, obj.len, KUBE_JSON_MAX_DEPTH - 1, NULL };
		return fn(ud, type, &src);
	}
	/* ERROR events, unknown types and unusual JSON: as kube_watch. */
	return kube__watch_line(line, len, src_from_tree, &a, st, err);
}

typedef struct watch_state {
	kube__stream s;
	kube_framer fr;
	buf errbody;
	kube_event_fn fn;
	kube_src_event_fn src_fn;   /* instead of fn: objects as text */
	void *ud;
	int stop_rc;        /* why the write callback stopped the transfer */
	kube_status *st;
	prd_err *err;
	unsigned long events;
} watch_state;

static int watch_line_cb(void *ud, char *line, size_t len)
{
	watch_state *w = ud;
	w->events++;
	if(w->src_fn)
		return kube__watch_line_text(line, len, w->src_fn, w->ud, w->st, w->err);
	return kube__watch_line(line, len, w->fn, w->ud, w->st, w->err);
}

static size_t watch_write(char *ptr, size_t size, size_t n, void *ud)
{
	watch_state *w = ud;
	size_t len = size * n;
	int rc;

	if(w->s.http_code != 200) {
		/* An error answer: keep (a bounded amount of) the Status body. */
		if(w->errbody.len < 65536 && buf_append(&w->errbody, ptr, len))
			return 0;
		return len;
	}
	rc = kube__framer_feed(&w->fr, ptr, len, watch_line_cb, w);
	if(rc) {
		if(rc == PRD_ERANGE)
			prd_err_set(w->err, rc, "watch: event larger than %zu bytes", w->fr.max_line);
		else if(rc == PRD_ENOMEM)
			prd_err_set(w->err, rc, "watch: out of memory");
		w->stop_rc = rc;
		return 0;
	}
	return len;
}

int kube__query_escape(buf *b, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	for(const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
		   *p == '-' || *p == '_' || *p == '.' || *p == '~')
			buf_append_char(b, (char)*p);
		else
			buf_printf(b, "%%%c%c", hex[*p >> 4], hex[*p & 15]);
	}
	return b->failed;
}

static int watch_run(kube_client *c, const kube_resource *r, const char *ns, const kube_watch_opts *o,
		     kube_event_fn fn, kube_src_event_fn src_fn, void *ud, kube_status *st, prd_err *err)
{
	static const kube_watch_opts none = {0};
	watch_state w;
	kube_status lst;
	char *base = kube_path(r, ns, NULL, NULL);
	buf path;
	int rc;

	if(!o)
		o = &none;
	if(!st)
		st = &lst;
	memset(st, 0, sizeof(*st));
	memset(&w, 0, sizeof(w));
	kube__framer_init(&w.fr, 0);
	buf_init(&w.errbody);
	buf_init(&path);
	w.fn = fn;
	w.src_fn = src_fn;
	w.ud = ud;
	w.st = st;
	w.err = err;
	w.s.write_cb = watch_write;
	w.s.write_ud = &w;
	w.s.cancelled = o->cancelled;
	w.s.cancel_ud = o->cancel_ud;
	/* Only a connection that delivers nothing for longer than the server's
	 * own timeout is given up; with no timeout, TCP keepalive is the
	 * guard against a dead peer. */
	w.s.low_speed_time_s = o->timeout_s > 0 ? o->timeout_s + 30 : 0;
	if(!base) {
		rc = prd_err_set(err, PRD_ENOMEM, "out of memory");
		goto done;
	}
	buf_printf(&path, "%s?watch=1", base);
	if(o->bookmarks)
		buf_append_str(&path, "&allowWatchBookmarks=true");
	if(o->resource_version && *o->resource_version) {
		buf_append_str(&path, "&resourceVersion=");
		kube__query_escape(&path, o->resource_version);
	}
	if(o->timeout_s > 0)
		buf_printf(&path, "&timeoutSeconds=%ld", o->timeout_s);
	if(o->label_selector && *o->label_selector) {
		buf_append_str(&path, "&labelSelector=");
		kube__query_escape(&path, o->label_selector);
	}
	if(o->field_selector && *o->field_selector) {
		buf_append_str(&path, "&fieldSelector=");
		kube__query_escape(&path, o->field_selector);
	}
	if(path.failed) {
		rc = prd_err_set(err, PRD_ENOMEM, "out of memory");
		goto done;
	}
	rc = kube__stream_get(c, buf_str(&path), &w.s, err);
	if(w.s.http_code && w.s.http_code != 200) {
		rc = kube__status_decode(w.s.http_code, w.errbody.data, w.errbody.len, -1, st);
		prd_err_set(err, rc, "WATCH %s: %ld %s: %s", buf_str(&path), w.s.http_code, st->reason,
			    st->message);
	} else if(rc == 1) {
		rc = w.stop_rc;
	} else if(rc == 0) {
		st->http_code = w.s.http_code;
		if(w.fr.b.len - w.fr.start > 0)
			log_debug("watch ended inside an event", "path", buf_str(&path));
	}
	log_trace("watch ended", "path", buf_str(&path), "events", LOGI(w.events), "rc", LOGI(rc));
done:
	kube__framer_free(&w.fr);
	buf_free(&w.errbody);
	buf_free(&path);
	free(base);
	return rc;
}

int kube_watch(kube_client *c, const kube_resource *r, const char *ns, const kube_watch_opts *o,
	       kube_event_fn fn, void *ud, kube_status *st, prd_err *err)
{
	return watch_run(c, r, ns, o, fn, NULL, ud, st, err);
}

int kube_watch_text(kube_client *c, const kube_resource *r, const char *ns, const kube_watch_opts *o,
		    kube_src_event_fn fn, void *ud, kube_status *st, prd_err *err)
{
	return watch_run(c, r, ns, o, NULL, fn, ud, st, err);
}
