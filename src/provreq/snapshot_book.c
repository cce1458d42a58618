/* The bookings in the pass's scheduling snapshot (the snapshot stage's
 * second half, see snapshot.c): pr__snap books into w->snap the local
 * store's active bookings, the booking ledger's and the other instances'
 * (shards.c) when the pass first asks for the snapshot, with the class
 * modules' reservations (PR_HOOK_RESERVE).
 *
 * Reads: the local store's active bookings (state_booking_list_active),
 * the ledger, the other instances' bookings.
 * Writes: the bookings into w->snap, c->stats.bookings_held, the parsed
 * bookings kept in c->bres (pr__bres_trim lets go of the unused ones); a
 * booking of a deleted request is removed from the store.
 *
 * One of the bookings core (host.c, shards.c, snapshot_book.c), the one
 * cycle left among the files of src/provreq: they call each other and are
 * read and changed together (docs/development.md, "Layers"). */
#include "provreq/ctl_int.h"
#include "provreq/convert.h"
#include "ops/log.h"
#include "ops/metrics.h"
#include "util/str.h"

#include <stdlib.h>
#include <string.h>

/* ---- bookings ------------------------------------------------------------ */

/* A booking's resources as booking_res parsed them, in c->bres_ar. */
typedef struct pr_bres {
	sched_res *res;
	size_t nres;
	const char **devs;
	size_t ndevs;
	json_object *dev_pods;
	uint64_t pass;            /* the last pass that used it */
} pr_bres;

/* Parse a booking's resources ({"cpu":"500m",...}) into base units, the
 * DRA devices it holds (PR_BOOKING_DEVICES) into *devs (arena), and the
 * pods whose devices are to be allocated anew (PR_BOOKING_DEVICE_PODS,
 * borrowed until the arena is freed) into *dev_pods. */
static int booking_res(arena *a, const char *js, sched_res **out, size_t *n, const char ***devs, size_t *ndevs,
		       json_object **dev_pods, prd_err *err)
{
	json_object *o = json_tokener_parse(js), *d = NULL;
	size_t i, len;
	int rc;
	*devs = NULL;
	*ndevs = 0;
	*dev_pods = NULL;
	if(!o)
		return prd_err_set(err, PRD_ECORRUPT, "booking resources are not JSON");
	if(arena_defer(a, pr__put_json, o))
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	if(json_object_object_get_ex(o, PR_BOOKING_DEVICES, &d) && json_object_is_type(d, json_type_array)) {
		len = json_object_array_length(d);
		if(!(*devs = arena_array(a, len + 1, sizeof(**devs))))
			return prd_err_set(err, PRD_ENOMEM, "out of memory");
		for(i = 0; i < len; i++) {
			json_object *s = json_object_array_get_idx(d, i);
			if(json_object_is_type(s, json_type_string))
				(*devs)[(*ndevs)++] = json_object_get_string(s);
		}
		json_object_get(d); /* the strings stay with o, which keeps the array */
		json_object_object_del(o, PR_BOOKING_DEVICES);
		if(arena_defer(a, pr__put_json, d))
			return prd_err_set(err, PRD_ENOMEM, "out of memory");
	}
	if(json_object_object_get_ex(o, PR_BOOKING_DEVICE_PODS, &d) && json_object_is_type(d, json_type_object)) {
		json_object_get(d);
		json_object_object_del(o, PR_BOOKING_DEVICE_PODS);
		if(arena_defer(a, pr__put_json, d))
			return prd_err_set(err, PRD_ENOMEM, "out of memory");
		*dev_pods = d;
	}
	rc = pr_conv_resources(a, o, "booking", out, n, err);
	return rc;
}

/* booking_res, kept by the booking's text (parsing is a function of the
 * text alone): a pass parses only the texts no earlier pass has, the
 * bookings made since. The parsed forms are borrowed until pr__bres_trim. */
static int booking_res_kept(pr_ctl *c, const char *js, const pr_bres **out, prd_err *err)
{
	pr_bres *b = hmap_get(&c->bres, js);
	int rc;
	if(!b) {
		if(!(b = arena_alloc(&c->bres_ar, sizeof(*b))))
			return prd_err_set(err, PRD_ENOMEM, "out of memory");
		if((rc = booking_res(&c->bres_ar, js, &b->res, &b->nres, &b->devs, &b->ndevs, &b->dev_pods, err)))
			return rc;
		if(hmap_put(&c->bres, js, b))
			return prd_err_set(err, PRD_ENOMEM, "out of memory");
	}
	if(b->pass != c->stats.passes) {
		b->pass = c->stats.passes;
		c->bres_live++;
	}
	*out = b;
	return 0;
}

/* The texts of bookings that ended stay parsed until they outnumber those
 * in use; then everything is parsed anew on the next pass. */
void pr__bres_trim(pr_ctl *c)
{
	if(hmap_len(&c->bres) <= 2 * c->bres_live + 256)
		return;
	hmap_free(&c->bres);
	arena_free(&c->bres_ar);
	hmap_init(&c->bres, NULL);
	arena_init(&c->bres_ar);
}

/* A rebuilt booking's devices: what its pods (per podSet) would be
 * allocated on node idx now. */
static int book_rebuilt_devices(pr_world *w, const char *uid, size_t idx, json_object *dev_pods, prd_err *err)
{
	const kube_provreq *pr = NULL;
	sched_podset *sets;
	char missing[300];
	size_t i;
	int rc = 0;
	for(i = 0; i < w->nprs && !pr; i++)
		if(!strcmp(w->prs[i]->meta.uid, uid))
			pr = w->prs[i];
	if(!pr)
		return 0;
	if(!(sets = arena_array(&w->ar, pr->npod_sets + 1, sizeof(*sets))))
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	if((rc = pr__resolve_podsets(w, pr, sets, missing, sizeof(missing), err)))
		return rc == PRD_ENOTFOUND ? prd_err_set(err, rc, "%s not found", missing) : rc;
	json_object_object_foreach(dev_pods, k, v) {
		int64_t set;
		if(rc || str_to_int64(k, &set) || set < 0 || (size_t)set >= pr->npod_sets)
			continue;
		rc = sched_snapshot_book_pod_devices(w->snap, uid, idx, sets[set].pod, json_object_get_int64(v), NULL,
						     err);
	}
	return rc;
}

/* The booking ledger's live entries (ledger.c) of requests the local store
 * holds no rows of: another instance's bookings, including those whose
 * status write has not landed (or been seen) yet. Not reading it, the pass
 * places nothing. */
static int book_ledger(pr_ctl *c, pr_world *w, const state_booking *own, size_t nown, const hmap *dying,
		       prd_err *err)
{
	state_booking *v = NULL;
	size_t n = 0, i, idx;
	state_booking *mine = NULL;
	size_t nmine = 0;
	int rc = pr__ledger_read(c, err);
	if(rc)
		return rc;
	/* Only the rows of this instance's own requests stand for their
	 * entries: another shard's rows here (rebuilt from its status) are
	 * not booked (book_snapshot), so its entry must be. */
	if(nown && !(mine = malloc(nown * sizeof(*mine))))
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	for(i = 0; i < nown; i++)
		if(!pr__shards_foreign(c, own[i].request_uid))
			mine[nmine++] = own[i];
	/* A request being deleted books nothing, whoever's it is: its entry
	 * goes with the next write (its room is free now, as for a request
	 * gone). */
	{
		hmap_iter it;
		const char *uid;
		hmap_iter_init(&it, dying);
		while(hmap_iter_next(&it, &uid, NULL))
			pr__ledger_gone(c, uid);
	}
	rc = pr__ledger_rows(c, mine, nmine, &w->uids, &v, &n);
	free(mine);
	if(rc)
		return prd_err_set(err, rc, "out of memory");
	for(i = 0; i < n; i++) {
		const pr_bres *br = NULL;
		prd_err ce;
		if(sched_snapshot_find_node(w->snap, v[i].node_name, &idx))
			continue;
		if(booking_res_kept(c, v[i].resources_json, &br, &ce) ||
		   sched_snapshot_book(w->snap, v[i].request_uid, idx, br->res, br->nres, &ce))
			log_warn("booking ledger entry ignored", "request_uid", v[i].request_uid, "error", ce.msg);
		else
			c->stats.bookings_held++;
	}
	state_booking_list_free(v, n);
	return 0;
}

/* The bookings of requests that still hold capacity, into the pass's
 * snapshot. */
static int book_snapshot(pr_ctl *c, pr_world *w, prd_err *err)
{
	hmap dying;
	state_booking *b = NULL;
	size_t nb = 0, i;
	int rc;
	if(c->db && (rc = state_booking_list_active(c->db, &b, &nb, err)))
		return rc;
	c->bres_live = 0;
	c->stats.bookings_held = 0;
	hmap_init(&dying, NULL);
	for(i = 0; i < w->nprs; i++)
		if(w->prs[i]->meta.deleted_ns)
			hmap_put(&dying, w->prs[i]->meta.uid, NULL);
	for(i = 0; i < nb; i++) {
		const pr_bres *br = NULL;
		size_t idx;
		prd_err ce;
		/* Being deleted (a finalizer keeps it while its scale-up is
		 * undone): it books nothing any more. */
		if(hmap_has(&dying, b[i].request_uid))
			continue;
		/* The request is gone: its capacity is free at once, so a
		 * request recreated for the same pods gets it this pass. */
		if(!hmap_has(&w->uids, b[i].request_uid)) {
			if(i == 0 || strcmp(b[i - 1].request_uid, b[i].request_uid)) {
				state_booking_delete_request(c->db, b[i].request_uid, NULL, NULL);
				pr__ledger_gone(c, b[i].request_uid);
				log_info("released the booking of a deleted request", "request_uid", b[i].request_uid);
			}
			continue;
		}
		/* Another instance's request: its status says what it holds
		 * (pr__shards_book), not rows this store rebuilt from it. */
		if(pr__shards_foreign(c, b[i].request_uid))
			continue;
		if(sched_snapshot_find_node(w->snap, b[i].node_name, &idx))
			continue;
		if(booking_res_kept(c, b[i].resources_json, &br, &ce) ||
		   sched_snapshot_book(w->snap, b[i].request_uid, idx, br->res, br->nres, &ce) ||
		   (br->ndevs &&
		    sched_snapshot_book_devices(w->snap, b[i].request_uid, idx, br->devs, br->ndevs, NULL, &ce)) ||
		   (br->dev_pods && book_rebuilt_devices(w, b[i].request_uid, idx, br->dev_pods, &ce)))
			log_warn("booking ignored", "request_uid", b[i].request_uid, "error", ce.msg);
		else
			c->stats.bookings_held++;
	}
	rc = c->ledger.on ? book_ledger(c, w, b, nb, &dying, err) : 0;
	hmap_free(&dying);
	if(rc) {
		state_booking_list_free(b, nb);
		return rc;
	}
	pr__shards_book(c, w, b, nb);
	state_booking_list_free(b, nb);
	return 0;
}

sched_snapshot *pr__snap(pr_ctl *c, pr_world *w)
{
	prd_err e;
	int rc;
	if(w->snap_booked)
		return w->snap_failed ? NULL : w->snap;
	w->snap_booked = true;
	if((rc = book_snapshot(c, w, &e))) {
		/* Placing without the bookings would hand out booked room: like
		 * a pass that cannot read the cluster, this one acts no more. */
		w->snap_failed = true;
		c->fenced = true;
		log_error("cannot read the bookings; this pass acts no further", "error", e.msg);
		metrics_counter_add(M_RECONCILE_ERRORS, METRICS_L("provreq", prd_strerror(rc)), 1);
		pr__wake_at(c, c->now + PRD_NS_PER_SEC);
		return NULL;
	}
	pr__modules_hook(c, w, PR_HOOK_RESERVE);
	return w->snap;
}
