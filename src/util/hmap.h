/* String-keyed hash map (open addressing, linear probing).
 *
 * The map copies keys and owns the copies; values are opaque pointers the
 * caller owns (an optional destructor passed to hmap_init is called on
 * values when they are replaced, deleted or the map is freed). */
#ifndef PRD_UTIL_HMAP_H
#define PRD_UTIL_HMAP_H

#include <stdbool.h>
#include <stddef.h>

typedef struct hmap_entry {
	char *key;        /* NULL = empty slot */
	void *value;
	size_t hash;
	bool tomb;        /* deleted marker */
} hmap_entry;

typedef struct hmap {
	hmap_entry *slots;
	size_t cap;       /* power of two or 0 */
	size_t len;       /* live entries */
	size_t used;      /* live + tombstones */
	void (*free_value)(void *);
} hmap;

typedef struct hmap_iter {
	const hmap *m;
	size_t i;
} hmap_iter;

void hmap_init(hmap *m, void (*free_value)(void *));
void hmap_free(hmap *m);
/* Insert or replace. The old value (if any) is destroyed. */
int hmap_put(hmap *m, const char *key, void *value);
void *hmap_get(const hmap *m, const char *key);
bool hmap_has(const hmap *m, const char *key);
/* Remove; destroys the value. Returns true if it existed. */
bool hmap_del(hmap *m, const char *key);
/* Remove and hand the value back instead of destroying it. */
void *hmap_take(hmap *m, const char *key);
size_t hmap_len(const hmap *m);

void hmap_iter_init(hmap_iter *it, const hmap *m);
/* Next entry, or false at the end. Order is unspecified. The map must not
 * be modified during iteration. */
bool hmap_iter_next(hmap_iter *it, const char **key, void **value);

#endif
