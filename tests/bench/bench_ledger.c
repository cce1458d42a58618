/* The booking ledger (src/provreq/ledger.c) with many booked nodes, against
 * the in-memory API (which refuses a ConfigMap over 1 MiB of data, as the
 * apiserver does). One controller books requests of NODES_PER nodes
 * through the ledger as passes do (read, then a conditional write of the
 * pass's bookings); another instance reads what it wrote. Figures, one line
 * per size:
 *
 * Times are the process's CPU (the in-memory API's JSON work included).
 *
 *   bench=ledger_fill     booking every request, BATCH requests per pass:
 *                         cpu_ms_per_pass, objects_written_per_pass (created or
 *                         replaced: overflow objects and the head),
 *                         kb_written_per_pass
 *   bench=ledger_layout   the ledger once full: objects (the head and its
 *                         overflow objects), kb of entries, kb_per_object,
 *                         head_kb, and single_object_kb: the one ConfigMap
 *                         the format before overflow objects needed (over
 *                         1,024 it could not be written)
 *   bench=ledger_book     one more pass booking one request on the full
 *                         ledger (median of REPS): cpu_ms, objects_written, kb_written
 *   bench=ledger_release  a pass releasing one of the first requests (its
 *                         object is replaced): the same figures
 *   bench=ledger_read     another instance's reads: cold_cpu_ms (its first: every
 *                         object fetched and every entry turned into
 *                         booking rows, as a pass that places does),
 *                         cold_objects_read, warm_cpu_ms and warm_objects_read
 *                         (the next pass's read after one booking: the head
 *                         and what is new), rows
 *
 * Usage: bench_ledger [booked-nodes ...] (default 10000 50000). Build
 * without sanitizers (./configure CFLAGS=-O2). */
#include "kube/api.h"
#include "kube/memapi.h"
#include "ops/log.h"
#include "ops/metrics.h"
#include "provreq/controller.h"
#include "provreq/ctl_int.h"
#include "state/state.h"
#include "util/clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NODES_PER 100
#define BATCH 10
#define REPS 5
#define SEC PRD_NS_PER_SEC

/* Process CPU time: the box is shared, wall times are noise. It includes
 * the in-memory API's work (JSON in and out), which a real apiserver
 * would do elsewhere. */
static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

typedef struct inst {
	state_db *db;
	pr_ctl *ctl;
	char path[256];
} inst;

static int inst_new(inst *in, const clk *clock, const kube_api *api, const char *tag)
{
	state_config sc;
	pr_config cfg;
	prd_err e;
	state_config_default(&sc);
	snprintf(in->path, sizeof(in->path), "/tmp/bench-ledger-%d-%s.db", (int)getpid(), tag);
	unlink(in->path);
	pr_config_default(&cfg);
	cfg.booking_ledger = "provreqd/provreqd-bookings";
	if(state_open(in->path, clock, &sc, &in->db, &e) || pr_ctl_new(&cfg, clock, api, in->db, NULL, &in->ctl, &e)) {
		fprintf(stderr, "bench_ledger: %s\n", e.msg);
		return 1;
	}
	return 0;
}

static void inst_free(inst *in)
{
	pr_ctl_free(in->ctl);
	state_close(in->db);
	unlink(in->path);
}

/* A pass of `c`: the clock's time, a new pass number. */
static void next_pass(pr_ctl *c, const clk *clock)
{
	c->stats.passes++;
	c->now = clk_wall(clock);
}

static void req_names(size_t r, char *uid, size_t ulen, char *key, size_t klen)
{
	snprintf(uid, ulen, "00000000-0000-4000-8000-%012zu", r);
	snprintf(key, klen, "jobs/train-%zu", r);
}

/* Request r's rows into the store: NODES_PER nodes named as on a cloud. */
static int store_request(pr_ctl *c, size_t r, int64_t until)
{
	state_booking rows[NODES_PER];
	char names[NODES_PER][64], uid[64], key[64];
	size_t i;
	prd_err e;
	req_names(r, uid, sizeof(uid), key, sizeof(key));
	for(i = 0; i < NODES_PER; i++) {
		size_t n = r * NODES_PER + i;
		snprintf(names[i], sizeof(names[i]), "ip-10-%zu-%zu-%zu.eu-west-1.compute.internal", n / 65536,
			 n / 256 % 256, n % 256);
		memset(&rows[i], 0, sizeof(rows[i]));
		rows[i].request_uid = uid;
		rows[i].node_name = names[i];
		rows[i].resources_json = "{\"cpu\":\"8\",\"memory\":\"32Gi\",\"nvidia.com/gpu\":\"1\",\"pods\":\"8\"}";
		rows[i].expires_ns = until;
	}
	if(state_booking_set(c->db, uid, rows, NODES_PER, until, &e)) {
		fprintf(stderr, "bench_ledger: %s\n", e.msg);
		return 1;
	}
	return 0;
}

/* One pass that books (add) or releases requests [from, to). */
static int ledger_pass(pr_ctl *c, const clk *clock, size_t from, size_t to, bool add, int64_t until)
{
	pr_ledger_change ch[BATCH];
	char uids[BATCH][64], keys[BATCH][64];
	size_t i, n = 0;
	prd_err e;
	next_pass(c, clock);
	for(i = from; i < to && n < BATCH; i++, n++) {
		req_names(i, uids[n], sizeof(uids[n]), keys[n], sizeof(keys[n]));
		if(add && store_request(c, i, until))
			return 1;
		if(!add)
			state_booking_delete_request(c->db, uids[n], NULL, NULL);
		memset(&ch[n], 0, sizeof(ch[n]));
		ch[n].uid = uids[n];
		ch[n].key = keys[n];
		ch[n].add = add;
	}
	if(pr__ledger_read(c, &e) || pr__ledger_commit(c, ch, n, &e)) {
		fprintf(stderr, "bench_ledger: %s\n", e.msg);
		return 1;
	}
	for(i = 0; i < n; i++)
		if(ch[i].too_large) {
			fprintf(stderr, "bench_ledger: a request was too large for the ledger\n");
			return 1;
		}
	return 0;
}

/* Another instance's read as a pass that places does it: the ledger and
 * its entries as booking rows. */
static int read_pass(pr_ctl *c, const clk *clock, double *ms, uint64_t *objects, size_t *rows)
{
	state_booking *v = NULL;
	size_t n = 0;
	uint64_t before = c->stats.ledger_objects_read;
	double t0;
	prd_err e;
	next_pass(c, clock);
	t0 = now_ms();
	if(pr__ledger_read(c, &e) || pr__ledger_rows(c, NULL, 0, NULL, &v, &n)) {
		fprintf(stderr, "bench_ledger: cannot read the ledger\n");
		return 1;
	}
	*ms = now_ms() - t0;
	*objects = c->stats.ledger_objects_read - before;
	*rows = n;
	state_booking_list_free(v, n);
	return 0;
}

static int run(size_t nodes)
{
	clk fake;
	memapi *m = NULL;
	kube_api api;
	inst w, r;
	size_t nreq = nodes / NODES_PER, i, rows = 0;
	int64_t until;
	double t0, ms, v[REPS], vr[REPS], ow[REPS], orl[REPS], kw[REPS], krl[REPS], cold_ms, warm_ms;
	uint64_t objs0, bytes0, cold_objs, warm_objs, passes = 0, entries_bytes;
	const pr_stats *st;
	int rc = 1;
	clk_fake_init(&fake, 1714557600LL * SEC);
	until = clk_wall(&fake) + 3600 * SEC;
	if(memapi_new(&fake, 0, &m))
		return 1;
	api = kube_api_from_memapi(m);
	if(inst_new(&w, &fake, &api, "w"))
		goto out_m;
	if(inst_new(&r, &fake, &api, "r"))
		goto out_w;
	st = pr_ctl_stats(w.ctl);

	/* Fill. */
	t0 = now_ms();
	for(i = 0; i < nreq; i += BATCH, passes++)
		if(ledger_pass(w.ctl, &fake, i, i + BATCH < nreq ? i + BATCH : nreq, true, until))
			goto out;
	ms = now_ms() - t0;
	printf("bench=ledger_fill nodes=%zu requests=%zu passes=%llu cpu_ms_per_pass=%.2f objects_written_per_pass=%.2f "
	       "kb_written_per_pass=%.1f\n",
	       nodes, nreq, (unsigned long long)passes, ms / (double)passes,
	       (double)st->ledger_objects_written / (double)passes,
	       (double)st->ledger_bytes_written / 1024.0 / (double)passes);
	entries_bytes = st->ledger_bytes;
	{
		json_object *head = NULL, *d;
		prd_err e;
		size_t head_bytes = 0;
		if(kube_api_call(&api, "GET", "/api/v1/namespaces/provreqd/configmaps/provreqd-bookings", NULL, NULL,
				 &head, NULL, &e) == 0 &&
		   (d = json_object_object_get(head, "data"))) {
			json_object_object_foreach(d, k, val)
			{
				(void)k;
				head_bytes += (size_t)json_object_get_string_len(val);
			}
		}
		json_object_put(head);
		printf("bench=ledger_layout nodes=%zu objects=%llu kb=%.1f kb_per_object=%.1f head_kb=%.1f "
		       "single_object_kb=%.1f\n",
		       nodes, (unsigned long long)st->ledger_objects, (double)entries_bytes / 1024.0,
		       (double)entries_bytes / 1024.0 / (double)st->ledger_objects, (double)head_bytes / 1024.0,
		       (double)entries_bytes / 1024.0);
	}

	/* Cold read by another instance. */
	if(read_pass(r.ctl, &fake, &cold_ms, &cold_objs, &rows))
		goto out;

	/* Book one more request and release it, REPS times. */
	for(i = 0; i < REPS; i++) {
		objs0 = st->ledger_objects_written;
		bytes0 = st->ledger_bytes_written;
		t0 = now_ms();
		if(ledger_pass(w.ctl, &fake, nreq + i, nreq + i + 1, true, until))
			goto out;
		v[i] = now_ms() - t0;
		ow[i] = (double)(st->ledger_objects_written - objs0);
		kw[i] = (double)(st->ledger_bytes_written - bytes0) / 1024.0;
		if(i == 0 && read_pass(r.ctl, &fake, &warm_ms, &warm_objs, &rows))
			goto out;
		/* An old booking ends: its object is replaced. */
		objs0 = st->ledger_objects_written;
		bytes0 = st->ledger_bytes_written;
		t0 = now_ms();
		if(ledger_pass(w.ctl, &fake, i * (nreq / REPS), i * (nreq / REPS) + 1, false, until))
			goto out;
		vr[i] = now_ms() - t0;
		orl[i] = (double)(st->ledger_objects_written - objs0);
		krl[i] = (double)(st->ledger_bytes_written - bytes0) / 1024.0;
	}
	qsort(v, REPS, sizeof(v[0]), cmp_double);
	qsort(vr, REPS, sizeof(vr[0]), cmp_double);
	qsort(ow, REPS, sizeof(ow[0]), cmp_double);
	qsort(orl, REPS, sizeof(orl[0]), cmp_double);
	qsort(kw, REPS, sizeof(kw[0]), cmp_double);
	qsort(krl, REPS, sizeof(krl[0]), cmp_double);
	printf("bench=ledger_book nodes=%zu cpu_ms=%.2f objects_written=%.0f kb_written=%.1f\n", nodes, v[REPS / 2],
	       ow[REPS / 2], kw[REPS / 2]);
	printf("bench=ledger_release nodes=%zu cpu_ms=%.2f objects_written=%.0f kb_written=%.1f\n", nodes, vr[REPS / 2],
	       orl[REPS / 2], krl[REPS / 2]);
	printf("bench=ledger_read nodes=%zu cold_cpu_ms=%.2f cold_objects_read=%llu warm_cpu_ms=%.2f warm_objects_read=%llu "
	       "rows=%zu\n",
	       nodes, cold_ms, (unsigned long long)cold_objs, warm_ms, (unsigned long long)warm_objs, rows);
	fflush(stdout);
	rc = 0;
out:
	inst_free(&r);
out_w:
	inst_free(&w);
out_m:
	memapi_free(m);
	return rc;
}

int main(int argc, char **argv)
{
	int a, rc = 0;
	FILE *devnull = fopen("/dev/null", "w");
	log_setup(PRD_LOG_ERROR, PRD_LOG_TEXT, devnull ? devnull : stderr);
	if(metrics_init())
		return 1;
	if(argc < 2) {
		rc |= run(10000);
		rc |= run(50000);
	}
	for(a = 1; a < argc; a++)
		rc |= run((size_t)strtoul(argv[a], NULL, 10));
	metrics_shutdown();
	if(devnull)
		fclose(devnull);
	return rc;
}
