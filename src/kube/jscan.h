/* A strict JSON pull scanner for the text decoders (decode_text.c) and the
 * list/watch framing that feeds them.
 *
 * It reads RFC 8259 JSON in place, one token at a time, without building a
 * tree: strings come back as views into the input when they hold no escape
 * and as unescaped copies in the scanner's own buffer otherwise.
 *
 * It is deliberately stricter than json-c, whose tokener (non-strict mode)
 * also takes comments, single quotes, trailing commas, NaN, leading zeros
 * and more. Every function returns 0 or KUBE_JS_BAIL; BAIL means "this is
 * not plain JSON of the shape the caller expected", never "this is
 * invalid": the caller then hands the same bytes to json-c, which decides
 * (and words the error). Things json-c treats in its own way are BAIL
 * too: \u0000 (json-c keeps it inside strings), unpaired surrogates
 * (json-c substitutes U+FFFD), control characters inside strings, and
 * nesting deeper than max_depth (json-c's max_depth: containers open at
 * once, counted from the document the scanner was started on).
 *
 * Why not a library: json-c has no streaming interface; yajl (Debian's
 * libyajl 2.1.0) streams, but upstream has been dormant since 2014 (Debian
 * carries its security fixes), its callback interface would turn every
 * decoder into an explicit state machine, and what matters here is control
 * over exactly which JSON is taken and which is left to json-c, so that
 * both paths agree byte for byte. The scanner is small and fuzzed
 * (tests/fuzz/fuzz_decode_text.c).
 *
 * Not thread-safe; one scanner per thread. Owns only its buffer. */
#ifndef PRD_KUBE_JSCAN_H
#define PRD_KUBE_JSCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define KUBE_JS_BAIL (-100)

typedef struct kube_js {
	const char *p;      /* next byte */
	const char *end;
	int depth;          /* containers open */
	int max_depth;
	bool first;         /* just after '{' or '[': no comma expected */
	char *tmp;          /* unescaped strings; owned */
	size_t tmpcap;
} kube_js;

/* A string value or key: `s` points into the input, or into the scanner's
 * buffer when the string had escapes (valid until the next string is
 * read). Not NUL-terminated when it points into the input. */
typedef struct kube_jstr {
	const char *s;
	size_t len;
} kube_jstr;

void kube__js_init(kube_js *j, const char *data, size_t len, int max_depth);
void kube__js_free(kube_js *j);

/* The next significant byte (whitespace skipped), or -1 at the end. */
int kube__js_peek(kube_js *j);
/* Consume `null` if it is next; true if it was. */
bool kube__js_null(kube_js *j);

/* Objects: after kube__js_obj_begin, call kube__js_obj_next until *more is
 * false; each time it is true, *key holds the next key (':' consumed) and
 * the caller must read or skip its value. Arrays likewise, without keys. */
int kube__js_obj_begin(kube_js *j);
int kube__js_obj_next(kube_js *j, kube_jstr *key, bool *more);
int kube__js_arr_begin(kube_js *j);
int kube__js_arr_next(kube_js *j, bool *more);

int kube__js_str(kube_js *j, kube_jstr *out);
/* A plain integer (no fraction, no exponent, no "-0") within int64. */
int kube__js_int(kube_js *j, int64_t *out);
int kube__js_bool(kube_js *j, bool *out);
/* Skip one value of any type, checking it as strictly as the rest. */
int kube__js_skip(kube_js *j);
/* Only whitespace remains. */
int kube__js_end(kube_js *j);

/* Does key equal the NUL-terminated literal? */
static inline bool kube__js_is(const kube_jstr *k, const char *lit, size_t litlen)
{
	return k->len == litlen && memcmp(k->s, lit, litlen) == 0;
}
#define KUBE_JS_IS(k, lit) kube__js_is((k), (lit), sizeof(lit) - 1)

/* ---- framing: where the objects are in a list page or a watch event ---- */

/* A list page ({"metadata":{...},"items":[...]}) split without decoding
 * its items: spans of every item (each a JSON object), and copies of
 * metadata.resourceVersion and metadata.continue (NULL when absent).
 * Duplicate keys resolve as json-c resolves them (the last wins). */
typedef struct kube_page {
	kube_jstr *items;
	size_t nitems, cap;
	char *rv;
	char *cont;
} kube_page;

/* 0, KUBE_JS_BAIL (not plain JSON of that shape: parse it with json-c,
 * which decides) or PRD_ENOMEM. Free with kube__page_free() either way. */
int kube__page_scan(const char *data, size_t len, int max_depth, kube_page *pg);
void kube__page_free(kube_page *pg);

/* A watch event line ({"type":"ADDED","object":{...}}): *type is a copy of
 * the type (at most 15 bytes, else BAIL) and obj the object's span. */
int kube__event_scan(const char *line, size_t len, int max_depth, char type[16], kube_jstr *obj);

#endif
