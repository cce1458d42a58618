/* Growable NUL-terminated byte buffer that frees itself and stays failed
 * when an append runs out of memory. */
#include "util/buf.h"
#include "util/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void buf_init(buf *b)
{
	memset(b, 0, sizeof(*b));
}

void buf_init_max(buf *b, size_t max)
{
	buf_init(b);
	b->max = max;
}

void buf_free(buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

void buf_reset(buf *b)
{
	b->len = 0;
	if(b->data)
		b->data[0] = '\0';
}

static int buf_fail(buf *b, int code)
{
	buf_free(b);
	b->failed = code;
	return code;
}

int buf_reserve(buf *b, size_t extra)
{
	size_t need, ncap;
	char *p;

	if(b->failed)
		return b->failed;
	if(extra > (size_t)-1 - b->len - 1)
		return buf_fail(b, PRD_ERANGE);
	need = b->len + extra + 1;
	if(b->max && need > b->max + 1)
		return buf_fail(b, PRD_ERANGE);
	if(need <= b->cap)
		return PRD_OK;
	ncap = b->cap ? b->cap : 64;
	while(ncap < need) {
		if(ncap > (size_t)-1 / 2) {
			ncap = need;
			break;
		}
		ncap *= 2;
	}
	p = realloc(b->data, ncap);
	if(!p)
		return buf_fail(b, PRD_ENOMEM);
	b->data = p;
	b->cap = ncap;
	return PRD_OK;
}

int buf_append(buf *b, const void *data, size_t len)
{
	int rc = buf_reserve(b, len);
	if(rc)
		return rc;
	if(len)
		memcpy(b->data + b->len, data, len);
	b->len += len;
	b->data[b->len] = '\0';
	return PRD_OK;
}

int buf_append_str(buf *b, const char *s)
{
	return buf_append(b, s, strlen(s));
}

int buf_append_char(buf *b, char c)
{
	return buf_append(b, &c, 1);
}

int buf_vprintf(buf *b, const char *fmt, va_list ap)
{
	va_list ap2;
	int n, rc;

	if(b->failed)
		return b->failed;
	va_copy(ap2, ap);
	n = vsnprintf(NULL, 0, fmt, ap2);
	va_end(ap2);
	if(n < 0)
		return buf_fail(b, PRD_EINVAL);
	rc = buf_reserve(b, (size_t)n);
	if(rc)
		return rc;
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	b->len += (size_t)n;
	return PRD_OK;
}

int buf_printf(buf *b, const char *fmt, ...)
{
	va_list ap;
	int rc;
	va_start(ap, fmt);
	rc = buf_vprintf(b, fmt, ap);
	va_end(ap);
	return rc;
}

void buf_consume(buf *b, size_t n)
{
	if(n >= b->len) {
		buf_reset(b);
		return;
	}
	memmove(b->data, b->data + n, b->len - n);
	b->len -= n;
	b->data[b->len] = '\0';
}

const char *buf_str(const buf *b)
{
	return b->data ? b->data : "";
}

char *buf_detach(buf *b)
{
	char *p;
	if(b->failed)
		return NULL;
	p = b->data;
	if(!p)
		p = calloc(1, 1);
	b->data = NULL;
	b->len = b->cap = 0;
	return p;
}
