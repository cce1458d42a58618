/* Bump allocator for many small allocations with one lifetime (e.g. the
 * arrays of a scheduling pod spec built from JSON). Everything is released
 * at once by arena_free(). Not thread-safe. */
#ifndef PRD_UTIL_ARENA_H
#define PRD_UTIL_ARENA_H

#include <stddef.h>

typedef struct arena_chunk arena_chunk;

typedef struct arena {
	arena_chunk *head;
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

#endif
