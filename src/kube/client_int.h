/* Internals of the kube client shared between its files and exposed to the
 * unit tests. Not part of the public API: names use the `kube__` prefix. */
#ifndef PRD_KUBE_CLIENT_INT_H
#define PRD_KUBE_CLIENT_INT_H

#include <stdbool.h>
#include <stddef.h>

#include "kube/client.h"
#include "util/buf.h"

/* Decode a failed answer: the apiserver's Status object in `body` if it is
 * one, else the HTTP code alone. Fills st (may be NULL) and returns the
 * PRD_E* code documented in client.h. `retry_after_s` is the Retry-After
 * header value (or -1). */
int kube__status_decode(long http_code, const char *body, size_t len, int retry_after_s,
			kube_status *st);

/* Splits a byte stream into newline-terminated lines. Each byte is looked
 * at once: `scanned` remembers where the search for the next '\n' resumes,
 * and consumed lines are dropped lazily (one memmove per feed, not per
 * line). */
typedef struct kube_framer {
	buf b;
	size_t start;     /* first byte of the current (incomplete) line */
	size_t scanned;   /* bytes before this are known to hold no '\n' after start */
	size_t max_line;  /* a longer line is an error (PRD_ERANGE) */
} kube_framer;

/* Called for each complete line (without its '\n'; blank lines are skipped).
 * `line` is borrowed and NUL-terminated. Non-zero stops the feed and is
 * returned by kube__framer_feed. */
typedef int (*kube_line_fn)(void *ud, char *line, size_t len);

void kube__framer_init(kube_framer *f, size_t max_line);
void kube__framer_free(kube_framer *f);
int kube__framer_feed(kube_framer *f, const char *data, size_t len, kube_line_fn fn, void *ud);
/* Bytes held for an incomplete line. */
size_t kube__framer_pending(const kube_framer *f);

/* Handle one watch line: decode the event and call fn. Returns 0, the
 * callback's non-zero value, or the error an ERROR event carries
 * (PRD_EGONE for 410); fills st/err for errors. */
int kube__watch_line(const char *line, size_t len, kube_event_fn fn, void *ud,
		     kube_status *st, prd_err *err);

/* The same for kube_watch_text: objects of plain event lines go to fn as
 * text, everything else as kube__watch_line does it. */
int kube__watch_line_text(const char *line, size_t len, kube_src_event_fn fn, void *ud,
			  kube_status *st, prd_err *err);

/* Append s to b percent-encoded for a URL query value. */
int kube__query_escape(buf *b, const char *s);

/* One request with retries; `idempotent` allows retrying 5xx and
 * transport failures (429 is retried for every verb). */
int kube__request_ex(kube_client *c, const char *method, const char *path, const char *content_type,
		     const char *body, size_t body_len, bool idempotent, json_object **out,
		     kube_status *st, prd_err *err);

/* GET path with the retries of kube__request_ex, the 2xx answer's bytes
 * left unparsed in *out (reset first; the caller frees it). */
int kube__request_raw(kube_client *c, const char *path, buf *out, kube_status *st, prd_err *err);

/* Any verb as kube__request_ex, the 2xx answer's bytes left unparsed in
 * *out as by kube__request_raw. */
int kube__request_raw_ex(kube_client *c, const char *method, const char *path, const char *content_type,
			 const char *body, size_t body_len, bool idempotent, buf *out, kube_status *st,
			 prd_err *err);

/* How deep the client lets json-c nest containers in an answer. */
#define KUBE_JSON_MAX_DEPTH (JSON_TOKENER_DEFAULT_DEPTH * 4)

/* The client's field manager (opts.field_manager or "provreqd"). */
const char *kube__field_manager(const kube_client *c);

/* Perform one watch request on a dedicated handle: streams the body through
 * `write_cb` and polls `cancelled`. Defined in client.c, used by watch.c. */
typedef struct kube__stream {
	size_t (*write_cb)(char *ptr, size_t size, size_t n, void *ud);
	void *write_ud;
	bool (*cancelled)(void *ud);
	void *cancel_ud;
	long low_speed_time_s;     /* 0 = no low-speed limit */
	long http_code;            /* set from the status line before the body arrives */
} kube__stream;

/* Returns 0 when the server ended the stream or it was cancelled, 1 when
 * write_cb stopped it (returned less than it was given), or a PRD_E* code
 * for a transport failure. */
int kube__stream_get(kube_client *c, const char *path, kube__stream *s, prd_err *err);

/* Base64 decode (standard alphabet, padding and line breaks accepted).
 * *out is NUL-terminated; caller frees. PRD_EINVAL on bad input. */
int kube__base64_decode(const char *in, size_t inlen, char **out, size_t *outlen);
int kube__base64_encode(const char *in, size_t inlen, char **out);

#endif
