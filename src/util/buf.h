/* Growable byte buffer, always NUL-terminated.
 *
 * When an append fails for lack of memory the buffer frees its contents and
 * stays failed (every later append returns PRD_ENOMEM), so a caller can chain
 * appends and check once at the end without leaking. */
#ifndef PRD_UTIL_BUF_H
#define PRD_UTIL_BUF_H

#include <stdarg.h>
#include <stddef.h>

typedef struct buf {
	char *data;     /* NULL until the first append */
	size_t len;
	size_t cap;
	size_t max;     /* 0 = unlimited; appends beyond it fail with PRD_ERANGE */
	int failed;     /* sticky error code of a failed append */
} buf;

void buf_init(buf *b);
/* Like buf_init but refuses to grow past `max` bytes. */
void buf_init_max(buf *b, size_t max);
void buf_free(buf *b);
void buf_reset(buf *b);               /* keep memory, set len to 0 */
int buf_reserve(buf *b, size_t extra);
int buf_append(buf *b, const void *data, size_t len);
int buf_append_str(buf *b, const char *s);
int buf_append_char(buf *b, char c);
int buf_printf(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int buf_vprintf(buf *b, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
/* Remove the first n bytes. */
void buf_consume(buf *b, size_t n);
/* A NUL-terminated view; "" for an empty buffer. Borrowed. */
const char *buf_str(const buf *b);
/* Hand the contents to the caller (free with free()); the buffer is reset.
 * Returns NULL if the buffer failed. An empty buffer gives "". */
char *buf_detach(buf *b);

#endif
