/* Bump allocator for many small allocations released together by
 * arena_free(), with deferred destructors. Not thread-safe. */
#include "util/arena.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ARENA_CHUNK 16384
#define ARENA_ALIGN 16

struct arena_chunk {
	arena_chunk *next;
	size_t cap;
	_Alignas(ARENA_ALIGN) unsigned char data[];
};

void arena_init(arena *a)
{
	memset(a, 0, sizeof(*a));
}

struct arena_defer_item {
	arena_defer_item *next;
	void (*fn)(void *);
	void *ptr;
};

int arena_defer(arena *a, void (*fn)(void *), void *ptr)
{
	arena_defer_item *d = arena_alloc(a, sizeof(*d));
	if(!d) {
		fn(ptr);
		return -1;
	}
	d->fn = fn;
	d->ptr = ptr;
	d->next = a->defers;
	a->defers = d;
	return 0;
}

void arena_free(arena *a)
{
	arena_chunk *c, *n;
	arena_defer_item *d;
	for(d = a->defers; d; d = d->next)
		d->fn(d->ptr);
	c = a->head;
	while(c) {
		n = c->next;
		free(c);
		c = n;
	}
	memset(a, 0, sizeof(*a));
}

void *arena_alloc(arena *a, size_t n)
{
	size_t need = (n + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
	void *p;
	if(need < n)
		return NULL;
	if(!need)
		need = ARENA_ALIGN;
	if(!a->head || a->head->cap - a->used < need) {
		size_t cap = need > ARENA_CHUNK ? need : ARENA_CHUNK;
		arena_chunk *c = malloc(sizeof(*c) + cap);
		if(!c)
			return NULL;
		c->cap = cap;
		c->next = a->head;
		a->head = c;
		a->used = 0;
	}
	p = a->head->data + a->used;
	a->used += need;
	a->total += need;
	memset(p, 0, need);
	return p;
}

void *arena_array(arena *a, size_t n, size_t sz)
{
	if(sz && n > SIZE_MAX / sz)
		return NULL;
	return arena_alloc(a, n * sz);
}

char *arena_strdup(arena *a, const char *s)
{
	size_t n = strlen(s) + 1;
	char *p = arena_alloc(a, n);
	if(p)
		memcpy(p, s, n);
	return p;
}
