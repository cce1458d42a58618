/* DRA in the scheduling simulation: devices published per node, pods'
 * device requests, allocated devices, bookings, fork/revert and the
 * estimator. */
#include "testutil.h"

#include "sched/cel.h"
#include "sched/estimator.h"
#include "sched/place.h"
#include "sched/sched.h"

#include <stdio.h>
#include <string.h>

#define N(a) (sizeof(a) / sizeof((a)[0]))
#define NDEV 8

static sched_dev_attr attrs[NDEV][2];
static sched_device gpus[NDEV];
static char names[NDEV][16];

/* 8 devices of driver gpu.example.com, pool = the node's name; attribute
 * index 0..7 and model "a100" for the first half, "h100" for the rest. */
static void make_gpus(const char *pool)
{
	size_t i;
	for(i = 0; i < NDEV; i++) {
		snprintf(names[i], sizeof(names[i]), "gpu-%zu", i);
		attrs[i][0] = (sched_dev_attr){ "gpu.example.com/index", SCHED_ATTR_INT, (int64_t)i, false, NULL };
		attrs[i][1] = (sched_dev_attr){ "gpu.example.com/model", SCHED_ATTR_STRING, 0, false,
		                                i < NDEV / 2 ? "a100" : "h100" };
		gpus[i] = (sched_device){ "gpu.example.com", pool, names[i], attrs[i], 2, NULL, 0 };
	}
}

static size_t add_gpu_node(sched_snapshot *s, const char *name, int64_t cpu)
{
	sched_res alloc[] = { { "cpu", cpu }, { "memory", (int64_t)64 << 30 }, { "pods", 110 } };
	sched_label labels[] = { { SCHED_KEY_HOSTNAME, name } };
	sched_node_spec n = { 0 };
	size_t idx = 0;
	make_gpus(name);
	n.name = name;
	n.labels = labels;
	n.n_labels = 1;
	n.allocatable = alloc;
	n.n_allocatable = N(alloc);
	n.devices = gpus;
	n.n_devices = NDEV;
	CU_ASSERT_EQUAL_FATAL(sched_snapshot_add_node(s, &n, &idx, NULL), 0);
	return idx;
}

static sched_cel *compile(const char *expr)
{
	sched_cel *c = NULL;
	prd_err e;
	CU_ASSERT_EQUAL_FATAL(sched_cel_compile(expr, &c, &e), 0);
	return c;
}

/* A pod of 1 cpu asking `count` devices through the class selector (and
 * an optional request selector). */
typedef struct gpod {
	sched_res req[1];
	const sched_cel *sels[2];
	sched_dev_request dr[2];
	sched_pod_spec pod;
} gpod;

static void make_pod(gpod *g, const sched_cel *cls, const sched_cel *extra, int64_t count)
{
	memset(g, 0, sizeof(*g));
	g->req[0] = (sched_res){ "cpu", 1000 };
	g->sels[0] = cls;
	g->sels[1] = extra;
	g->dr[0] = (sched_dev_request){ "gpu/gpu", g->sels, extra ? 2 : 1, count, false };
	g->pod.namespace = "default";
	g->pod.requests = g->req;
	g->pod.n_requests = 1;
	g->pod.dev_requests = g->dr;
	g->pod.n_dev_requests = 1;
}

static int64_t place(sched_snapshot *s, const sched_pod_spec *pod, int64_t count,
		     sched_place_result *keep)
{
	sched_podset set = { pod, count };
	sched_place_result r;
	int64_t placed;
	prd_err e;
	CU_ASSERT_EQUAL_FATAL(sched_place(s, &set, 1, &r, &e), 0);
	placed = r.placed;
	if(keep)
		*keep = r;
	else
		sched_place_result_free(&r);
	return placed;
}

static void test_fits_twice_per_node(void)
{
	sched_snapshot *s = sched_snapshot_new();
	sched_cel *cls = compile("device.driver == 'gpu.example.com'");
	sched_place_result r;
	gpod g;
	size_t fr;

	add_gpu_node(s, "n1", 64000);
	add_gpu_node(s, "n2", 64000);
	add_gpu_node(s, "n3", 64000);
	make_pod(&g, cls, NULL, 4);
	CU_ASSERT_EQUAL(sched_snapshot_fork(s), 0);
	CU_ASSERT_EQUAL(place(s, &g.pod, 7, &r), 6); /* 2 per node, 64 cpus notwithstanding */
	CU_ASSERT_FALSE(r.fits_all);
	CU_ASSERT_EQUAL(r.sets[0].n_assign, 3);
	CU_ASSERT_EQUAL(r.sets[0].assign[0].count, 2);
	sched_place_result_free(&r);
	sched_snapshot_node_devices(s, 0, &fr);
	CU_ASSERT_EQUAL(fr, 0);
	/* Revert gives every device back. */
	CU_ASSERT_EQUAL(sched_snapshot_revert(s), 0);
	sched_snapshot_node_devices(s, 0, &fr);
	CU_ASSERT_EQUAL(fr, NDEV);
	CU_ASSERT_EQUAL(place(s, &g.pod, 6, NULL), 6);
	/* Committed at depth 0: the devices stay taken. */
	CU_ASSERT_EQUAL(place(s, &g.pod, 1, NULL), 0);
	sched_cel_free(cls);
	sched_snapshot_free(s);
}

static void test_selectors(void)
{
	sched_snapshot *s = sched_snapshot_new();
	sched_cel *cls = compile("device.driver == 'gpu.example.com'");
	sched_cel *half = compile("device.attributes['gpu.example.com'].model == 'a100'");
	sched_cel *other = compile("device.driver == 'other.example.com'");
	sched_cel *err = compile("device.attributes['gpu.example.com'].missing == 1");
	sched_fit why;
	gpod g;

	add_gpu_node(s, "n1", 64000);
	add_gpu_node(s, "n2", 64000);
	CU_ASSERT_EQUAL(sched_snapshot_fork(s), 0);
	make_pod(&g, cls, half, 4);
	CU_ASSERT_EQUAL(place(s, &g.pod, 4, NULL), 2); /* half the devices: one per node */
	CU_ASSERT_EQUAL(sched_snapshot_revert(s), 0);
	make_pod(&g, other, NULL, 1);
	CU_ASSERT_EQUAL(place(s, &g.pod, 1, NULL), 0);
	CU_ASSERT_EQUAL(sched_check_pod(s, &g.pod, 0, &why, NULL), 0);
	CU_ASSERT_EQUAL(why, SCHED_FIT_DEVICES);
	/* A selector that cannot be evaluated never matches. */
	make_pod(&g, cls, err, 1);
	CU_ASSERT_EQUAL(place(s, &g.pod, 1, NULL), 0);
	/* Request count larger than the node's devices. */
	make_pod(&g, cls, NULL, 9);
	CU_ASSERT_EQUAL(place(s, &g.pod, 1, NULL), 0);
	/* cpu still counts: 3 cpus leave room for 3 one-device pods. */
	sched_snapshot_free(s);
	s = sched_snapshot_new();
	add_gpu_node(s, "small", 3000);
	make_pod(&g, cls, NULL, 1);
	CU_ASSERT_EQUAL(place(s, &g.pod, 8, NULL), 3);
	sched_cel_free(cls);
	sched_cel_free(half);
	sched_cel_free(other);
	sched_cel_free(err);
	sched_snapshot_free(s);
}

static void test_allocated_and_all(void)
{
	sched_snapshot *s = sched_snapshot_new();
	sched_cel *cls = compile("device.driver == 'gpu.example.com'");
	sched_cel *half = compile("device.attributes['gpu.example.com'].index >= 4");
	prd_err e;
	gpod g;

	add_gpu_node(s, "n1", 64000);
	CU_ASSERT_EQUAL(sched_snapshot_take_device(s, 0, "gpu.example.com/n1/gpu-0", &e), 0);
	CU_ASSERT_EQUAL(sched_snapshot_take_device(s, 0, "gpu.example.com/n1/gpu-7", &e), 0);
	CU_ASSERT_EQUAL(sched_snapshot_take_device(s, 0, "gpu.example.com/n1/gpu-9", &e), PRD_ENOTFOUND);
	CU_ASSERT_EQUAL(sched_snapshot_take_device(s, 0, "gpu.example.com/other/gpu-1", &e), PRD_ENOTFOUND);
	CU_ASSERT_EQUAL(sched_snapshot_take_device(s, 0, "nonsense", &e), PRD_EINVAL);
	make_pod(&g, cls, NULL, 4);
	CU_ASSERT_EQUAL(sched_snapshot_fork(s), 0);
	CU_ASSERT_EQUAL(place(s, &g.pod, 2, NULL), 1); /* 6 free devices */
	CU_ASSERT_EQUAL(sched_snapshot_revert(s), 0);
	/* allocationMode All: every matching device, none of them taken. */
	make_pod(&g, cls, half, 1);
	g.dr[0].all = true;
	CU_ASSERT_EQUAL(place(s, &g.pod, 1, NULL), 0); /* gpu-7 is allocated */
	sched_cel_free(half);
	half = compile("device.attributes['gpu.example.com'].index >= 1 && device.attributes['gpu.example.com'].index <= 3");
	make_pod(&g, cls, half, 1);
	g.dr[0].all = true;
	CU_ASSERT_EQUAL(place(s, &g.pod, 2, NULL), 1); /* gpu-1..3 once */
	sched_cel_free(cls);
	sched_cel_free(half);
	sched_snapshot_free(s);
}

typedef struct ids {
	char v[16][64];
	const char *p[16];
	size_t n;
} ids;

static void collect(void *ud, const sched_device *d)
{
	ids *x = ud;
	if(x->n == 16)
		return;
	snprintf(x->v[x->n], sizeof(x->v[x->n]), "%s/%s/%s", d->driver, d->pool, d->name);
	x->p[x->n] = x->v[x->n];
	x->n++;
}

/* A Provisioned request's booked devices are not given to the next
 * request, in this pass and in the next (rebuilt from recorded ids). */
static void test_booking_holds_devices(void)
{
	sched_snapshot *s = sched_snapshot_new();
	sched_cel *cls = compile("device.driver == 'gpu.example.com'");
	sched_place_result r;
	size_t missing = 9, fr;
	int64_t booked = 0;
	ids x;
	gpod g;

	add_gpu_node(s, "n1", 64000);
	make_pod(&g, cls, NULL, 4);
	CU_ASSERT_EQUAL(sched_snapshot_fork(s), 0);
	CU_ASSERT_EQUAL(place(s, &g.pod, 1, &r), 1);
	memset(&x, 0, sizeof(x));
	sched_snapshot_placed_devices(s, &r.sets[0], 0, collect, &x);
	CU_ASSERT_EQUAL(x.n, 4);
	CU_ASSERT_STRING_EQUAL(x.p[0], "gpu.example.com/n1/gpu-0");
	sched_place_result_free(&r);
	CU_ASSERT_EQUAL(sched_snapshot_revert(s), 0);

	/* Next pass: the booking is all that holds them. */
	CU_ASSERT_EQUAL(sched_snapshot_fork(s), 0);
	CU_ASSERT_EQUAL(sched_snapshot_book_devices(s, "uid-a", 0, x.p, x.n, &missing, NULL), 0);
	CU_ASSERT_EQUAL(missing, 0);
	sched_snapshot_node_devices(s, 0, &fr);
	CU_ASSERT_EQUAL(fr, 4);
	CU_ASSERT_EQUAL(sched_snapshot_fork(s), 0);
	CU_ASSERT_EQUAL(place(s, &g.pod, 2, NULL), 1); /* not 2: four are booked */
	CU_ASSERT_EQUAL(sched_snapshot_revert(s), 0);
	/* Unbooking frees them; reverting the unbook holds them again. */
	CU_ASSERT_EQUAL(sched_snapshot_fork(s), 0);
	CU_ASSERT_EQUAL(sched_snapshot_unbook(s, "uid-a", NULL), 0);
	CU_ASSERT_EQUAL(place(s, &g.pod, 2, NULL), 2);
	CU_ASSERT_EQUAL(sched_snapshot_revert(s), 0);
	sched_snapshot_node_devices(s, 0, &fr);
	CU_ASSERT_EQUAL(fr, 4);
	CU_ASSERT_EQUAL(sched_snapshot_revert(s), 0);
	sched_snapshot_node_devices(s, 0, &fr);
	CU_ASSERT_EQUAL(fr, NDEV);

	/* Rebuilt from pod counts: the same effect. */
	CU_ASSERT_EQUAL(sched_snapshot_fork(s), 0);
	CU_ASSERT_EQUAL(sched_snapshot_book_pod_devices(s, "uid-b", 0, &g.pod, 1, &booked, NULL), 0);
	CU_ASSERT_EQUAL(booked, 1);
	CU_ASSERT_EQUAL(place(s, &g.pod, 2, NULL), 1);
	CU_ASSERT_EQUAL(sched_snapshot_revert(s), 0);
	/* A device already taken by a claim is not booked again. */
	CU_ASSERT_EQUAL(sched_snapshot_take_device(s, 0, "gpu.example.com/n1/gpu-0", NULL), 0);
	CU_ASSERT_EQUAL(sched_snapshot_book_devices(s, "uid-c", 0, x.p, x.n, &missing, NULL), 0);
	CU_ASSERT_EQUAL(missing, 1);
	sched_cel_free(cls);
	sched_snapshot_free(s);
}

static void test_estimator(void)
{
	sched_snapshot *s = sched_snapshot_new();
	sched_cel *cls = compile("device.driver == 'gpu.example.com'");
	sched_res alloc[] = { { "cpu", 64000 }, { "memory", (int64_t)64 << 30 }, { "pods", 110 } };
	sched_node_spec t = { 0 };
	sched_est_limits lim = { 100, 0, 0, 0 };
	sched_est_result r;
	sched_podset set;
	prd_err e;
	gpod g;
	size_t fr;

	add_gpu_node(s, "existing", 64000);
	make_gpus("tmpl");
	t.name = "gpu-group";
	t.allocatable = alloc;
	t.n_allocatable = N(alloc);
	t.devices = gpus;
	t.n_devices = NDEV;
	make_pod(&g, cls, NULL, 4);
	set.pod = &g.pod;
	set.count = 5;
	CU_ASSERT_EQUAL_FATAL(sched_estimate(s, &t, &set, 1, &lim, &r, &e), 0);
	CU_ASSERT_EQUAL(r.new_nodes, 3);
	CU_ASSERT_EQUAL(r.place.placed, 5);
	sched_est_result_free(&r);
	/* The estimate left the snapshot as it was. */
	CU_ASSERT_EQUAL(sched_snapshot_node_count(s), 1);
	sched_snapshot_node_devices(s, 0, &fr);
	CU_ASSERT_EQUAL(fr, NDEV);
	/* A template without devices takes none of these pods. */
	t.n_devices = 0;
	CU_ASSERT_EQUAL_FATAL(sched_estimate(s, &t, &set, 1, &lim, &r, &e), 0);
	CU_ASSERT_EQUAL(r.new_nodes, 0);
	CU_ASSERT_EQUAL(r.place.placed, 0);
	sched_est_result_free(&r);
	sched_cel_free(cls);
	sched_snapshot_free(s);
}

/* Two requests in one pod never share a device. */
static void test_two_requests(void)
{
	sched_snapshot *s = sched_snapshot_new();
	sched_cel *cls = compile("device.driver == 'gpu.example.com'");
	gpod g;

	add_gpu_node(s, "n1", 64000);
	make_pod(&g, cls, NULL, 2);
	g.dr[1] = g.dr[0];
	g.pod.n_dev_requests = 2;
	CU_ASSERT_EQUAL(place(s, &g.pod, 3, NULL), 2);
	sched_cel_free(cls);
	sched_snapshot_free(s);
}

static void test_validate(void)
{
	sched_cel *cls = compile("true");
	gpod g;
	prd_err e;
	make_pod(&g, cls, NULL, 0);
	CU_ASSERT_EQUAL(sched_pod_validate(&g.pod, &e), PRD_EINVAL);
	make_pod(&g, cls, NULL, 1);
	g.sels[0] = NULL;
	CU_ASSERT_EQUAL(sched_pod_validate(&g.pod, &e), PRD_EINVAL);
	make_pod(&g, cls, NULL, 1);
	g.pod.n_dev_requests = SCHED_DEV_REQ_MAX + 1;
	CU_ASSERT_EQUAL(sched_pod_validate(&g.pod, &e), PRD_ERANGE);
	sched_cel_free(cls);
}

static const test_case cases[] = {
	{ "pods of 4 devices fit twice on a node of 8", test_fits_twice_per_node },
	{ "class and request selectors", test_selectors },
	{ "allocated devices and allocationMode All", test_allocated_and_all },
	{ "bookings hold devices", test_booking_holds_devices },
	{ "estimator counts template devices", test_estimator },
	{ "two requests of one pod", test_two_requests },
	{ "validation", test_validate },
	{ NULL, NULL },
};

TEST_MAIN("sched_dra", cases)
