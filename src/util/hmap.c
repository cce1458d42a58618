/* String-keyed hash map (open addressing, linear probing) that owns copies
 * of its keys. */
#include "util/hmap.h"
#include "util/err.h"
#include "util/str.h"

#include <stdlib.h>
#include <string.h>

void hmap_init(hmap *m, void (*free_value)(void *))
{
	memset(m, 0, sizeof(*m));
	m->free_value = free_value;
}

void hmap_free(hmap *m)
{
	size_t i;
	for(i = 0; i < m->cap; i++) {
		if(m->slots[i].key) {
			if(m->free_value && !m->slots[i].tomb)
				m->free_value(m->slots[i].value);
			free(m->slots[i].key);
		}
	}
	free(m->slots);
	m->slots = NULL;
	m->cap = m->len = m->used = 0;
}

static hmap_entry *hmap_find(const hmap *m, const char *key, size_t h)
{
	size_t i, mask;
	if(!m->cap)
		return NULL;
	mask = m->cap - 1;
	for(i = h & mask;; i = (i + 1) & mask) {
		hmap_entry *e = &m->slots[i];
		if(!e->key)
			return NULL;
		if(!e->tomb && e->hash == h && strcmp(e->key, key) == 0)
			return e;
	}
}

static int hmap_grow(hmap *m)
{
	size_t ncap = m->cap ? m->cap * 2 : 16, i;
	hmap_entry *ns;

	/* Rehash in place when most used slots are tombstones. */
	if(m->cap && m->len * 2 < m->cap / 2)
		ncap = m->cap;
	ns = calloc(ncap, sizeof(*ns));
	if(!ns)
		return PRD_ENOMEM;
	for(i = 0; i < m->cap; i++) {
		hmap_entry *e = &m->slots[i];
		size_t j;
		if(!e->key)
			continue;
		if(e->tomb) {
			free(e->key);
			continue;
		}
		for(j = e->hash & (ncap - 1); ns[j].key; j = (j + 1) & (ncap - 1))
			;
		ns[j] = *e;
	}
	free(m->slots);
	m->slots = ns;
	m->cap = ncap;
	m->used = m->len;
	return PRD_OK;
}

int hmap_put(hmap *m, const char *key, void *value)
{
	size_t h = (size_t)str_hash(key, strlen(key)), i, mask;
	hmap_entry *e = hmap_find(m, key, h);
	char *k;

	if(e) {
		if(m->free_value && e->value != value)
			m->free_value(e->value);
		e->value = value;
		return PRD_OK;
	}
	if((m->used + 1) * 4 > m->cap * 3) {
		int rc = hmap_grow(m);
		if(rc)
			return rc;
	}
	k = str_dup(key);
	if(!k)
		return PRD_ENOMEM;
	mask = m->cap - 1;
	for(i = h & mask; m->slots[i].key; i = (i + 1) & mask)
		;
	m->slots[i].key = k;
	m->slots[i].value = value;
	m->slots[i].hash = h;
	m->slots[i].tomb = false;
	m->len++;
	m->used++;
	return PRD_OK;
}

void *hmap_get(const hmap *m, const char *key)
{
	hmap_entry *e = hmap_find(m, key, (size_t)str_hash(key, strlen(key)));
	return e ? e->value : NULL;
}

bool hmap_has(const hmap *m, const char *key)
{
	return hmap_find(m, key, (size_t)str_hash(key, strlen(key))) != NULL;
}

void *hmap_take(hmap *m, const char *key)
{
	hmap_entry *e = hmap_find(m, key, (size_t)str_hash(key, strlen(key)));
	void *v;
	if(!e)
		return NULL;
	v = e->value;
	e->tomb = true;
	e->value = NULL;
	m->len--;
	return v;
}

bool hmap_del(hmap *m, const char *key)
{
	hmap_entry *e = hmap_find(m, key, (size_t)str_hash(key, strlen(key)));
	if(!e)
		return false;
	if(m->free_value)
		m->free_value(e->value);
	e->tomb = true;
	e->value = NULL;
	m->len--;
	return true;
}

size_t hmap_len(const hmap *m)
{
	return m->len;
}

void hmap_iter_init(hmap_iter *it, const hmap *m)
{
	it->m = m;
	it->i = 0;
}

bool hmap_iter_next(hmap_iter *it, const char **key, void **value)
{
	while(it->i < it->m->cap) {
		const hmap_entry *e = &it->m->slots[it->i++];
		if(e->key && !e->tomb) {
			if(key)
				*key = e->key;
			if(value)
				*value = e->value;
			return true;
		}
	}
	return false;
}
