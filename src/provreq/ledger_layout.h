/* How the booking ledger's entries are laid out over its head and
 * overflow objects (ledger.c, "Layout"): the part of a ledger write that
 * reads the ledger as last read and the entries to write, and calls the
 * API for nothing. */
#ifndef PRD_PROVREQ_LEDGER_LAYOUT_H
#define PRD_PROVREQ_LEDGER_LAYOUT_H

#include "provreq/ctl_int.h"

/* An overflow object the head names: its data is shared with l->cache. */
typedef struct pr_ledger_obj {
	char *name;
	json_object *data;
	size_t bytes;
} pr_ledger_obj;

/* Where a write puts the entries (ledger.c, "Layout"). */
typedef struct pr_ledger_layout {
	json_object *head;        /* the head's entries */
	size_t head_bytes;
	bool *keep;               /* per l->objs: named again, unchanged */
	json_object **fresh;      /* the new overflow objects' entries */
	size_t *fresh_bytes;
	size_t nfresh;
} pr_ledger_layout;

/* Bytes an entry takes in an object (what the apiserver's limit counts
 * is the values; the key is counted too, to stay on the safe side). */
size_t pr__ledger_entry_size(const char *uid, json_object *val);
/* Lay `data` out: the overflow objects it leaves unchanged stay (but the
 * small ones join a spill, so objects do not multiply); every other entry
 * goes to the head while they all fit in l->inline_max, else they are
 * packed in order into new objects of up to l->obj_max, the last one kept
 * in the head when it fits there. 0 or PRD_ENOMEM; free *y with
 * pr__ledger_layout_free either way. */
int pr__ledger_layout_of(const pr_ledger *l, json_object *data, pr_ledger_layout *y);
void pr__ledger_layout_free(pr_ledger_layout *y);

#endif
