/* Bump allocator for many small allocations with one lifetime (e.g. the
 * arrays of a scheduling pod spec built from JSON). Everything is released
 * at once by arena_free(). Not thread-safe. */
#ifndef PRD_UTIL_ARENA_H
#define PRD_UTIL_ARENA_H

#include <stddef.h>

typedef struct arena_chunk arena_chunk;

typedef struct arena_defer_item arena_defer_item;

typedef struct arena {
	arena_chunk *head;
	arena_defer_item *defers; /* run by arena_free, newest first */
	size_t used;      /* bytes used in head */
	size_t total;     /* bytes handed out, for accounting */
} arena;

void arena_init(arena *a);
void arena_free(arena *a);
/* n bytes aligned for any type, zeroed; NULL when out of memory. */
void *arena_alloc(arena *a, size_t n);
/* An array of n elements of size sz, zeroed; NULL on overflow or OOM. */
void *arena_array(arena *a, size_t n, size_t sz);
char *arena_strdup(arena *a, const char *s);
/* Run fn(ptr) when the arena is freed (e.g. release a JSON tree whose
 * strings the arena's structures borrow). Returns 0 or PRD_ENOMEM, in which
 * case fn(ptr) has already been called. */
int arena_defer(arena *a, void (*fn)(void *), void *ptr);

#endif
