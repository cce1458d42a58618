/* The decoder's string interner: reference-counted shared copies of
 * strings and arrays (blobs) of decoded objects, behind one mutex. */
#include "kube/objects.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/str.h"

/* One string, or one shared array (a blob, see kube__blob_get): the
 * caller sees `s`; the header sits just before it. A blob never matches a
 * string of the same bytes, so releasing one never releases the other.
 * `s` is 16-byte aligned (the header is 16 bytes), enough for any array
 * of the decoded structs. */
typedef struct istr {
	uint64_t hash;
	uint32_t refs;
	uint32_t len : 31;
	uint32_t blob : 1;
	char s[];
} istr;

/* Longest string or blob (the header keeps 31 bits of length). */
#define ISTR_MAX 0x7fffffffu

struct kube_intern {
	pthread_mutex_t mu;
	istr **slots;   /* open addressing, linear probing, no tombstones */
	size_t cap;     /* power of two or 0 */
	size_t len;
	size_t bytes;
};

static istr *hdr(const char *s)
{
	return (istr *)(uintptr_t)(s - offsetof(istr, s));
}

kube_intern *kube_intern_new(void)
{
	kube_intern *t = calloc(1, sizeof(*t));
	if(!t)
		return NULL;
	if(pthread_mutex_init(&t->mu, NULL)) {
		free(t);
		return NULL;
	}
	return t;
}

void kube_intern_free(kube_intern *t)
{
	size_t i;
	if(!t)
		return;
	for(i = 0; i < t->cap; i++)
		free(t->slots[i]);
	free(t->slots);
	pthread_mutex_destroy(&t->mu);
	free(t);
}

static int grow(kube_intern *t)
{
	size_t ncap = t->cap ? t->cap * 2 : 256, i;
	istr **n = calloc(ncap, sizeof(*n));
	if(!n)
		return -1;
	for(i = 0; i < t->cap; i++) {
		istr *e = t->slots[i];
		size_t j;
		if(!e)
			continue;
		for(j = e->hash & (ncap - 1); n[j]; j = (j + 1) & (ncap - 1))
			;
		n[j] = e;
	}
	free(t->slots);
	t->slots = n;
	t->cap = ncap;
	return 0;
}

/* The shared copy of n bytes at s (a string, or a blob when `blob`), one
 * more reference; *had tells whether it was held already. NULL when out
 * of memory. */
/* A blob's hash, a word at a time (blobs are arrays of pointers and
 * numbers: hashing them byte by byte was most of what sharing a pod's
 * arrays cost). */
static uint64_t blob_hash(const char *s, size_t n)
{
	uint64_t h = 0x9e3779b97f4a7c15ULL ^ n, w;
	size_t i;
	for(i = 0; i + 8 <= n; i += 8) {
		memcpy(&w, s + i, 8);
		h = (h ^ w) * 0xff51afd7ed558ccdULL;
		h ^= h >> 32;
	}
	for(; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 0x100000001b3ULL;
	h ^= h >> 29;
	h *= 0xbf58476d1ce4e5b9ULL;
	return h ^ (h >> 32);
}

static const char *get_locked(kube_intern *t, const char *s, size_t n, bool blob, bool *had)
{
	uint64_t h = blob ? blob_hash(s, n) : str_hash(s, n);
	size_t i;
	istr *e;
	const char *out = NULL;

	*had = false;
	if(n > ISTR_MAX)
		return NULL;
	if(t->cap) {
		for(i = h & (t->cap - 1); (e = t->slots[i]) != NULL; i = (i + 1) & (t->cap - 1)) {
			if(e->hash == h && e->len == n && e->blob == blob && memcmp(e->s, s, n) == 0) {
				e->refs++;
				out = e->s;
				*had = true;
				goto done;
			}
		}
	}
	if((t->len + 1) * 4 > t->cap * 3 && grow(t))
		goto done;
	e = malloc(sizeof(*e) + n + 1);
	if(!e)
		goto done;
	e->hash = h;
	e->refs = 1;
	e->len = (uint32_t)n;
	e->blob = blob;
	memcpy(e->s, s, n);
	e->s[n] = '\0';
	for(i = h & (t->cap - 1); t->slots[i]; i = (i + 1) & (t->cap - 1))
		;
	t->slots[i] = e;
	t->len++;
	t->bytes += sizeof(*e) + n + 1;
	out = e->s;
done:
	return out;
}

static const char *get(kube_intern *t, const char *s, size_t n, bool blob, bool *had)
{
	const char *out;
	pthread_mutex_lock(&t->mu);
	out = get_locked(t, s, n, blob, had);
	pthread_mutex_unlock(&t->mu);
	return out;
}

const char *kube_intern_getn(kube_intern *t, const char *s, size_t n)
{
	bool had;
	return get(t, s, n, false, &had);
}

const char *kube_intern_get(kube_intern *t, const char *s)
{
	return kube_intern_getn(t, s, strlen(s));
}

const char *kube_intern_ref(kube_intern *t, const char *s)
{
	if(!s)
		return NULL;
	pthread_mutex_lock(&t->mu);
	hdr(s)->refs++;
	pthread_mutex_unlock(&t->mu);
	return s;
}

/* Remove slot i and shift later members of its probe run back, so lookups
 * never need tombstones. */
static void remove_slot(kube_intern *t, size_t i)
{
	size_t mask = t->cap - 1, j = i;
	t->slots[i] = NULL;
	for(;;) {
		size_t home;
		j = (j + 1) & mask;
		if(!t->slots[j])
			return;
		home = t->slots[j]->hash & mask;
		/* Move slots[j] into the hole at i unless its home lies
		 * cyclically in (i, j]. */
		if((j > i && (home <= i || home > j)) || (j < i && (home <= i && home > j))) {
			t->slots[i] = t->slots[j];
			t->slots[j] = NULL;
			i = j;
		}
	}
}

/* Drop one reference; true when it was the last (the entry has left the
 * table and is not freed yet). Lock held. */
static bool put_locked(kube_intern *t, istr *e)
{
	size_t i;
	if(--e->refs)
		return false;
	for(i = e->hash & (t->cap - 1); t->slots[i] != e; i = (i + 1) & (t->cap - 1))
		;
	remove_slot(t, i);
	t->len--;
	t->bytes -= sizeof(*e) + e->len + 1;
	return true;
}

void kube_intern_put(kube_intern *t, const char *s)
{
	bool last;
	if(!s)
		return;
	pthread_mutex_lock(&t->mu);
	last = put_locked(t, hdr(s));
	pthread_mutex_unlock(&t->mu);
	if(last)
		free(hdr(s));
}

void kube__intern_lock(kube_intern *t)
{
	pthread_mutex_lock(&t->mu);
}

void kube__intern_unlock(kube_intern *t)
{
	pthread_mutex_unlock(&t->mu);
}

void kube__intern_put_locked(kube_intern *t, const char *s)
{
	if(s && put_locked(t, hdr(s)))
		free(hdr(s));
}

const void *kube__blob_get(kube_intern *t, const void *p, size_t n, bool *had)
{
	return get(t, p, n, true, had);
}

const void *kube__blob_get_locked(kube_intern *t, const void *p, size_t n, bool *had)
{
	return get_locked(t, p, n, true, had);
}

bool kube__blob_put(kube_intern *t, const void *p)
{
	bool last;
	if(!p)
		return false;
	pthread_mutex_lock(&t->mu);
	last = put_locked(t, hdr(p));
	pthread_mutex_unlock(&t->mu);
	return last;
}

bool kube__blob_put_locked(kube_intern *t, const void *p)
{
	return p && put_locked(t, hdr(p));
}

void kube__blob_free(const void *p)
{
	if(p)
		free(hdr(p));
}

size_t kube_intern_count(kube_intern *t)
{
	size_t n;
	pthread_mutex_lock(&t->mu);
	n = t->len;
	pthread_mutex_unlock(&t->mu);
	return n;
}

size_t kube_intern_bytes(kube_intern *t)
{
	size_t n;
	pthread_mutex_lock(&t->mu);
	n = t->bytes;
	pthread_mutex_unlock(&t->mu);
	return n;
}
