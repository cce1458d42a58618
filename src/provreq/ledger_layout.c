/* The booking ledger's layout over its head and overflow objects
 * (ledger.c, "Layout"): which overflow objects a write keeps, and where
 * every other entry goes. Pure: it calls no API. */
#include "provreq/ledger_layout.h"
#include "util/assert.h"

#include <stdlib.h>
#include <string.h>

/* Bytes an entry takes in an object (what the apiserver's limit counts
 * is the values; the key is counted too, to stay on the safe side). */
size_t pr__ledger_entry_size(const char *uid, json_object *val)
{
	return strlen(uid) + (size_t)json_object_get_string_len(val);
}

void pr__ledger_layout_free(pr_ledger_layout *y)
{
	size_t i;
	json_object_put(y->head);
	for(i = 0; i < y->nfresh; i++)
		json_object_put(y->fresh[i]);
	free(y->fresh);
	free(y->fresh_bytes);
	free(y->keep);
	memset(y, 0, sizeof(*y));
}

/* Overflow object i holds exactly what `data` says of its entries, and
 * is where they were read from. */
static bool obj_unchanged(const pr_ledger *l, size_t i, json_object *data)
{
	json_object_object_foreach(l->objs[i].data, uid, val)
	{
		json_object *now;
		if((uintptr_t)hmap_get(&l->where, uid) != i + 1 || !json_object_object_get_ex(data, uid, &now) ||
		   strcmp(json_object_get_string(now), json_object_get_string(val)))
			return false;
	}
	return true;
}

static int fresh_add(pr_ledger_layout *y)
{
	json_object **f = realloc(y->fresh, (y->nfresh + 1) * sizeof(*f));
	size_t *b;
	if(!f)
		return PRD_ENOMEM;
	y->fresh = f;
	if(!(b = realloc(y->fresh_bytes, (y->nfresh + 1) * sizeof(*b))))
		return PRD_ENOMEM;
	y->fresh_bytes = b;
	if(!(y->fresh[y->nfresh] = json_object_new_object()))
		return PRD_ENOMEM;
	y->fresh_bytes[y->nfresh++] = 0;
	return 0;
}

#if PRD_ASSERTS_ON
/* The invariant of a layout: every entry of `data` is in exactly one
 * place (a kept object, the head or a new object), and a new object over
 * l->obj_max holds one entry alone. */
static bool layout_complete(const pr_ledger *l, json_object *data, const pr_ledger_layout *y)
{
	size_t i, placed = (size_t)json_object_object_length(y->head);
	for(i = 0; i < l->nobjs; i++)
		if(y->keep[i])
			placed += (size_t)json_object_object_length(l->objs[i].data);
	for(i = 0; i < y->nfresh; i++) {
		placed += (size_t)json_object_object_length(y->fresh[i]);
		if(y->fresh_bytes[i] > l->obj_max && json_object_object_length(y->fresh[i]) != 1)
			return false;
	}
	return placed == (size_t)json_object_object_length(data);
}
#endif

/* Lay `data` out: the overflow objects it leaves unchanged stay (but the
 * small ones join a spill, so objects do not multiply); every other entry
 * goes to the head while they all fit in l->inline_max, else they are
 * packed in order into new objects of up to l->obj_max, the last one kept
 * in the head when it fits there. */
int pr__ledger_layout_of(const pr_ledger *l, json_object *data, pr_ledger_layout *y)
{
	size_t i, pool = 0, names = 0;
	bool spill;
	memset(y, 0, sizeof(*y));
	if(!(y->head = json_object_new_object()) || (l->nobjs && !(y->keep = calloc(l->nobjs, sizeof(*y->keep)))))
		return PRD_ENOMEM;
	for(i = 0; i < l->nobjs; i++)
		if((y->keep[i] = obj_unchanged(l, i, data)))
			names += strlen(l->objs[i].name) + 1;
	/* What the kept objects do not hold. */
	json_object_object_foreach(data, uid, val)
	{
		uintptr_t at = (uintptr_t)hmap_get(&l->where, uid);
		if(!(at && y->keep[at - 1]))
			pool += pr__ledger_entry_size(uid, val);
	}
	spill = pool + names > l->inline_max;
	if(spill)
		for(i = 0; i < l->nobjs; i++)
			if(y->keep[i] && l->objs[i].bytes < l->obj_max / 4) {
				y->keep[i] = false;
				pool += l->objs[i].bytes;
			}
	{
		json_object_object_foreach(data, u, v)
		{
			uintptr_t at = (uintptr_t)hmap_get(&l->where, u);
			size_t sz = pr__ledger_entry_size(u, v);
			if(at && y->keep[at - 1])
				continue;
			if(!spill) {
				json_object_object_add(y->head, u, json_object_get(v));
				y->head_bytes += sz;
				continue;
			}
			if((!y->nfresh ||
			    (y->fresh_bytes[y->nfresh - 1] && y->fresh_bytes[y->nfresh - 1] + sz > l->obj_max)) &&
			   fresh_add(y))
				return PRD_ENOMEM;
			json_object_object_add(y->fresh[y->nfresh - 1], u, json_object_get(v));
			y->fresh_bytes[y->nfresh - 1] += sz;
		}
	}
	/* The last one, when the head has room for it. */
	if(y->nfresh && y->fresh_bytes[y->nfresh - 1] <= l->inline_max) {
		json_object_put(y->head);
		y->head = y->fresh[--y->nfresh];
		y->head_bytes = y->fresh_bytes[y->nfresh];
	}
#if PRD_ASSERTS_ON
	PRD_ASSERT(layout_complete(l, data, y));
#endif
	return 0;
}
