/* Table tests for src/sched: pod requests, validation, matchers, every
 * predicate through sched_check_pod, group placement, snapshot
 * fork/revert and bookings, the estimator and the expanders. */
#include "testutil.h"

#include "sched/estimator.h"
#include "sched/expander.h"
#include "sched/match.h"
#include "sched/place.h"
#include "sched/priorities.h"
#include "sched/sched.h"
#include "sched/sched_int.h" /* the arena's size, for the booking test */

#include <stdio.h>
#include <string.h>

#define N(a) (sizeof(a) / sizeof((a)[0]))
#define GI ((int64_t)1 << 30)

/* ---- helpers -------------------------------------------------------- */

/* A node with cpu (millicores), memory (GiB), pods, optional zone and
 * extra labels/taints. */
static size_t add_node(sched_snapshot *s, const char *name, const char *zone, int64_t cpu,
		       int64_t mem_gi, int64_t pods, const sched_label *extra, size_t n_extra,
		       const sched_taint *taints, size_t n_taints, bool unsched)
{
	sched_label labels[8];
	sched_res alloc[] = { { "cpu", cpu }, { "memory", mem_gi * GI }, { "pods", pods },
	                      { "nvidia.com/gpu", 2 } };
	sched_node_spec n = { 0 };
	size_t nl = 0, idx = 0, i;
	labels[nl++] = (sched_label){ SCHED_KEY_HOSTNAME, name };
	if(zone)
		labels[nl++] = (sched_label){ SCHED_KEY_ZONE, zone };
	for(i = 0; i < n_extra && nl < 8; i++)
		labels[nl++] = extra[i];
	n.name = name;
	n.labels = labels;
	n.n_labels = nl;
	n.allocatable = alloc;
	n.n_allocatable = N(alloc);
	n.taints = taints;
	n.n_taints = n_taints;
	n.unschedulable = unsched;
	CU_ASSERT_EQUAL_FATAL(sched_snapshot_add_node(s, &n, &idx, NULL), 0);
	return idx;
}

static size_t plain_node(sched_snapshot *s, const char *name, const char *zone, int64_t cpu)
{
	return add_node(s, name, zone, cpu, 16, 110, NULL, 0, NULL, 0, false);
}

static sched_fit check(sched_snapshot *s, const sched_pod_spec *p, size_t node)
{
	sched_fit f = SCHED_FIT_OK;
	prd_err e = { 0 };
	int rc = sched_check_pod(s, p, node, &f, &e);
	if(rc)
		fprintf(stderr, "check_pod: %s\n", e.msg);
	CU_ASSERT_EQUAL(rc, 0);
	return f;
}

static sched_pod_spec pod_cpu(int64_t cpu)
{
	static sched_res req[1];
	sched_pod_spec p = { 0 };
	req[0] = (sched_res){ "cpu", cpu };
	p.namespace = "default";
	p.requests = req;
	p.n_requests = 1;
	return p;
}

/* ---- pod requests --------------------------------------------------- */

static int64_t req_of(const sched_res *r, size_t n, const char *name)
{
	size_t i;
	for(i = 0; i < n; i++)
		if(strcmp(r[i].name, name) == 0)
			return r[i].value;
	return -1;
}

static void test_pod_requests(void)
{
	sched_res c1[] = { { "cpu", 100 }, { "memory", 200 } };
	sched_res c2[] = { { "cpu", 300 } };
	sched_res big_init[] = { { "cpu", 1000 }, { "memory", 50 } };
	sched_res side[] = { { "cpu", 50 }, { "memory", 10 } };
	sched_res over[] = { { "cpu", 5 } };
	sched_container ctr[] = { { c1, 2, false }, { c2, 1, false } };
	sched_container init1[] = { { big_init, 2, false } };
	sched_res out[SCHED_RES_MAX];
	size_t n = 0;

	/* Regular containers only: sums. */
	CU_ASSERT_EQUAL(sched_pod_requests(ctr, 2, NULL, 0, NULL, 0, out, &n, NULL), 0);
	CU_ASSERT_EQUAL(req_of(out, n, "cpu"), 400);
	CU_ASSERT_EQUAL(req_of(out, n, "memory"), 200);

	/* A big init container dominates cpu but not memory. */
	CU_ASSERT_EQUAL(sched_pod_requests(ctr, 2, init1, 1, over, 1, out, &n, NULL), 0);
	CU_ASSERT_EQUAL(req_of(out, n, "cpu"), 1005);
	CU_ASSERT_EQUAL(req_of(out, n, "memory"), 200);

	/* Sidecar before an init container: the init container runs beside
	 * it (1000 + 50), and the sidecar adds to the regular sum (400 + 50). */
	{
		sched_container init2[] = { { side, 2, true }, { big_init, 2, false } };
		CU_ASSERT_EQUAL(sched_pod_requests(ctr, 2, init2, 2, NULL, 0, out, &n, NULL), 0);
		CU_ASSERT_EQUAL(req_of(out, n, "cpu"), 1050);
		CU_ASSERT_EQUAL(req_of(out, n, "memory"), 210);
	}
	/* Sidecar after the init container: not running during it. */
	{
		sched_container init3[] = { { big_init, 2, false }, { side, 2, true } };
		CU_ASSERT_EQUAL(sched_pod_requests(ctr, 2, init3, 2, NULL, 0, out, &n, NULL), 0);
		CU_ASSERT_EQUAL(req_of(out, n, "cpu"), 1000);
		CU_ASSERT_EQUAL(req_of(out, n, "memory"), 210);
	}
	/* Kubernetes docs example: sidecars 1,2 then init 3 (big). */
	{
		sched_res s1[] = { { "cpu", 100 } }, s2[] = { { "cpu", 200 } }, i3[] = { { "cpu", 600 } };
		sched_res r1[] = { { "cpu", 150 } };
		sched_container ct[] = { { r1, 1, false } };
		sched_container in[] = { { s1, 1, true }, { s2, 1, true }, { i3, 1, false } };
		CU_ASSERT_EQUAL(sched_pod_requests(ct, 1, in, 3, NULL, 0, out, &n, NULL), 0);
		CU_ASSERT_EQUAL(req_of(out, n, "cpu"), 900); /* max(150+300, 600+300) */
	}
	/* No containers at all: empty. */
	CU_ASSERT_EQUAL(sched_pod_requests(NULL, 0, NULL, 0, NULL, 0, out, &n, NULL), 0);
	CU_ASSERT_EQUAL(n, 0);
	/* Negative quantity. */
	{
		sched_res bad[] = { { "cpu", -1 } };
		sched_container b[] = { { bad, 1, false } };
		prd_err e = { 0 };
		CU_ASSERT_EQUAL(sched_pod_requests(b, 1, NULL, 0, NULL, 0, out, &n, &e), PRD_EINVAL);
		CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "cpu"));
	}
	/* Too many resource names. */
	{
		char names[SCHED_RES_MAX + 1][24];
		sched_res many[SCHED_RES_MAX + 1];
		sched_container b[1];
		int i;
		for(i = 0; i <= SCHED_RES_MAX; i++) {
			snprintf(names[i], sizeof(names[i]), "x.io/r%d", i);
			many[i] = (sched_res){ names[i], 1 };
		}
		b[0] = (sched_container){ many, SCHED_RES_MAX + 1, false };
		CU_ASSERT_EQUAL(sched_pod_requests(b, 1, NULL, 0, NULL, 0, out, &n, NULL), PRD_ERANGE);
	}
	CU_ASSERT_EQUAL(sched_pod_requests(NULL, 1, NULL, 0, NULL, 0, out, &n, NULL), PRD_EINVAL);
}

/* ---- validation ----------------------------------------------------- */

static void test_validate(void)
{
	const char *one[] = { "1" }, *word[] = { "x" };
	sched_requirement gt_ok = { "rank", SCHED_OP_GT, one, 1 };
	sched_requirement gt_bad = { "rank", SCHED_OP_GT, word, 1 };
	sched_requirement in_empty = { "k", SCHED_OP_IN, NULL, 0 };
	sched_requirement bad_op = { "k", (sched_sel_op)42, NULL, 0 };
	sched_requirement exists_vals = { "k", SCHED_OP_EXISTS, one, 1 };
	sched_node_term t_ok = { &gt_ok, 1 }, t_bad = { &gt_bad, 1 }, t_in = { &in_empty, 1 };
	sched_node_term t_op = { &bad_op, 1 }, t_ex = { &exists_vals, 1 };
	sched_label_selector sel_gt = { NULL, 0, &gt_ok, 1 };
	sched_pod_term term_gt = { SCHED_KEY_HOSTNAME, &sel_gt, NULL, 0, false };
	sched_pod_term term_key = { "example.com/rack", NULL, NULL, 0, false };
	sched_spread sp0 = { SCHED_KEY_ZONE, 0, 0, SCHED_DO_NOT_SCHEDULE, NULL, false, false };
	sched_spread spneg = { SCHED_KEY_ZONE, 1, -1, SCHED_DO_NOT_SCHEDULE, NULL, false, false };
	sched_toleration tol_ex_val = { "k", SCHED_TOL_EXISTS, "v", SCHED_EFFECT_NONE };
	sched_toleration tol_op = { "k", (sched_tol_op)7, NULL, SCHED_EFFECT_NONE };
	sched_toleration tol_eff = { "k", SCHED_TOL_EQUAL, NULL, (sched_effect)9 };
	sched_host_port port_big = { 70000, SCHED_PROTO_TCP, NULL };
	sched_host_port port_proto = { 80, (sched_proto)5, NULL };
	sched_res neg[] = { { "cpu", -5 } }, huge[] = { { "memory", SCHED_QTY_MAX + 1 } };
	sched_res podsres[] = { { "pods", 1 } };
	sched_pod_spec p;

#define BAD(field_assign, want)                                                   \
	do {                                                                      \
		p = (sched_pod_spec){ .namespace = "default" };                   \
		field_assign;                                                     \
		CU_ASSERT_EQUAL(sched_pod_validate(&p, NULL), want);              \
	} while(0)

	BAD((void)0, 0);
	BAD((p.affinity_terms = &t_ok, p.n_affinity_terms = 1, p.has_node_affinity = true), 0);
	BAD((p.affinity_terms = &t_bad, p.n_affinity_terms = 1), PRD_EINVAL);
	BAD((p.affinity_terms = &t_in, p.n_affinity_terms = 1), PRD_EINVAL);
	BAD((p.affinity_terms = &t_op, p.n_affinity_terms = 1), PRD_EINVAL);
	BAD((p.affinity_terms = &t_ex, p.n_affinity_terms = 1), PRD_EINVAL);
	BAD((p.pod_affinity = &term_gt, p.n_pod_affinity = 1), PRD_EINVAL); /* Gt in label selector */
	BAD((p.pod_anti_affinity = &term_key, p.n_pod_anti_affinity = 1), PRD_EUNSUPPORTED);
	BAD((p.spread = &sp0, p.n_spread = 1), PRD_EINVAL);
	BAD((p.spread = &spneg, p.n_spread = 1), PRD_EINVAL);
	BAD((p.tolerations = &tol_ex_val, p.n_tolerations = 1), PRD_EINVAL);
	BAD((p.tolerations = &tol_op, p.n_tolerations = 1), PRD_EINVAL);
	BAD((p.tolerations = &tol_eff, p.n_tolerations = 1), PRD_EINVAL);
	BAD((p.host_ports = &port_big, p.n_host_ports = 1), PRD_EINVAL);
	BAD((p.host_ports = &port_proto, p.n_host_ports = 1), PRD_EINVAL);
	BAD((p.requests = neg, p.n_requests = 1), PRD_EINVAL);
	BAD((p.requests = huge, p.n_requests = 1), PRD_EINVAL);
	BAD((p.requests = podsres, p.n_requests = 1), PRD_EINVAL);
	BAD((p.n_labels = 3), PRD_EINVAL); /* NULL list with a count */
	BAD((p.namespace = NULL), PRD_EINVAL);
	CU_ASSERT_EQUAL(sched_pod_validate(NULL, NULL), PRD_EINVAL);
#undef BAD
}

/* ---- matchers ------------------------------------------------------- */

static void test_requirements(void)
{
	sched_label labels[] = { { "zone", "a" }, { "rank", "10" }, { "word", "ten" } };
	const char *a[] = { "a" }, *b[] = { "b" }, *ab[] = { "b", "a" }, *five[] = { "5" };
	const char *twenty[] = { "20" };
	struct {
		sched_requirement r;
		bool want;
	} t[] = {
		{ { "zone", SCHED_OP_IN, a, 1 }, true },
		{ { "zone", SCHED_OP_IN, ab, 2 }, true },
		{ { "zone", SCHED_OP_IN, b, 1 }, false },
		{ { "nope", SCHED_OP_IN, a, 1 }, false },
		{ { "zone", SCHED_OP_NOT_IN, b, 1 }, true },
		{ { "zone", SCHED_OP_NOT_IN, a, 1 }, false },
		{ { "nope", SCHED_OP_NOT_IN, a, 1 }, true }, /* absent label satisfies NotIn */
		{ { "zone", SCHED_OP_EXISTS, NULL, 0 }, true },
		{ { "nope", SCHED_OP_EXISTS, NULL, 0 }, false },
		{ { "nope", SCHED_OP_DOES_NOT_EXIST, NULL, 0 }, true },
		{ { "zone", SCHED_OP_DOES_NOT_EXIST, NULL, 0 }, false },
		{ { "rank", SCHED_OP_GT, five, 1 }, true },
		{ { "rank", SCHED_OP_GT, twenty, 1 }, false },
		{ { "rank", SCHED_OP_LT, twenty, 1 }, true },
		{ { "rank", SCHED_OP_LT, five, 1 }, false },
		{ { "word", SCHED_OP_GT, five, 1 }, false }, /* label not an integer */
		{ { "nope", SCHED_OP_LT, five, 1 }, false },
		{ { "zone", (sched_sel_op)99, a, 1 }, false },
	};
	size_t i;
	for(i = 0; i < N(t); i++) {
		bool got = sched_requirement_matches(&t[i].r, labels, N(labels));
		if(got != t[i].want)
			fprintf(stderr, "requirement case %zu: got %d\n", i, got);
		CU_ASSERT_EQUAL(got, t[i].want);
	}
}

static void test_selectors(void)
{
	sched_label labels[] = { { "app", "web" }, { "tier", "fe" } };
	sched_label ml_ok[] = { { "app", "web" } }, ml_bad[] = { { "app", "db" } };
	const char *fe[] = { "fe" };
	sched_requirement ex_ok = { "tier", SCHED_OP_IN, fe, 1 };
	sched_requirement ex_bad = { "tier", SCHED_OP_NOT_IN, fe, 1 };
	sched_label_selector empty = { 0 };
	sched_label_selector s1 = { ml_ok, 1, &ex_ok, 1 }, s2 = { ml_ok, 1, &ex_bad, 1 };
	sched_label_selector s3 = { ml_bad, 1, NULL, 0 };
	sched_node_term term_empty = { NULL, 0 }, term_ok = { &ex_ok, 1 }, term_bad = { &ex_bad, 1 };
	sched_node_term terms_or[] = { { &ex_bad, 1 }, { &ex_ok, 1 } };
	sched_pod_spec p = { .namespace = "default" };

	CU_ASSERT_FALSE(sched_selector_matches(NULL, labels, 2));  /* null: nothing */
	CU_ASSERT_TRUE(sched_selector_matches(&empty, labels, 2)); /* empty: everything */
	CU_ASSERT_TRUE(sched_selector_matches(&empty, NULL, 0));
	CU_ASSERT_TRUE(sched_selector_matches(&s1, labels, 2));
	CU_ASSERT_FALSE(sched_selector_matches(&s2, labels, 2));
	CU_ASSERT_FALSE(sched_selector_matches(&s3, labels, 2));

	/* A node selector term with no expressions matches no node. */
	CU_ASSERT_FALSE(sched_node_term_matches(&term_empty, labels, 2));
	CU_ASSERT_TRUE(sched_node_term_matches(&term_ok, labels, 2));
	CU_ASSERT_FALSE(sched_node_term_matches(&term_bad, labels, 2));

	/* Terms are OR'ed; required affinity with zero terms matches nothing. */
	p.has_node_affinity = true;
	p.affinity_terms = terms_or;
	p.n_affinity_terms = 2;
	CU_ASSERT_TRUE(sched_node_affinity_matches(&p, labels, 2));
	p.n_affinity_terms = 1;
	CU_ASSERT_FALSE(sched_node_affinity_matches(&p, labels, 2));
	p.n_affinity_terms = 0;
	CU_ASSERT_FALSE(sched_node_affinity_matches(&p, labels, 2));
	p.has_node_affinity = false;
	CU_ASSERT_TRUE(sched_node_affinity_matches(&p, labels, 2));
	/* nodeSelector: every pair, exact value. */
	p.node_selector = ml_ok;
	p.n_node_selector = 1;
	CU_ASSERT_TRUE(sched_node_affinity_matches(&p, labels, 2));
	p.node_selector = ml_bad;
	CU_ASSERT_FALSE(sched_node_affinity_matches(&p, labels, 2));

	/* Pod terms: namespaces default to the owner's. */
	{
		const char *nss[] = { "other" };
		sched_pod_term t = { SCHED_KEY_HOSTNAME, &s1, NULL, 0, false };
		CU_ASSERT_TRUE(sched_pod_term_matches(&t, "default", "default", labels, 2));
		CU_ASSERT_FALSE(sched_pod_term_matches(&t, "default", "other", labels, 2));
		t.namespaces = nss;
		t.n_namespaces = 1;
		CU_ASSERT_TRUE(sched_pod_term_matches(&t, "default", "other", labels, 2));
		CU_ASSERT_FALSE(sched_pod_term_matches(&t, "default", "default", labels, 2));
		t.all_namespaces = true;
		CU_ASSERT_TRUE(sched_pod_term_matches(&t, "default", "default", labels, 2));
		t.selector = NULL;
		CU_ASSERT_FALSE(sched_pod_term_matches(&t, "default", "default", labels, 2));
	}
}

static void test_tolerations(void)
{
	struct {
		sched_toleration t;
		sched_taint taint;
		bool want;
	} c[] = {
		/* empty key + Exists tolerates every taint */
		{ { NULL, SCHED_TOL_EXISTS, NULL, SCHED_EFFECT_NONE }, { "a", "b", SCHED_EFFECT_NO_EXECUTE }, true },
		{ { "", SCHED_TOL_EXISTS, NULL, SCHED_EFFECT_NONE }, { "x", NULL, SCHED_EFFECT_NO_SCHEDULE }, true },
		/* empty key + Exists restricted to one effect */
		{ { NULL, SCHED_TOL_EXISTS, NULL, SCHED_EFFECT_NO_SCHEDULE }, { "a", "b", SCHED_EFFECT_NO_EXECUTE }, false },
		{ { "a", SCHED_TOL_EQUAL, "b", SCHED_EFFECT_NONE }, { "a", "b", SCHED_EFFECT_NO_SCHEDULE }, true },
		{ { "a", SCHED_TOL_EQUAL, "c", SCHED_EFFECT_NONE }, { "a", "b", SCHED_EFFECT_NO_SCHEDULE }, false },
		{ { "a", SCHED_TOL_EQUAL, NULL, SCHED_EFFECT_NONE }, { "a", "", SCHED_EFFECT_NO_SCHEDULE }, true },
		{ { "a", SCHED_TOL_EXISTS, NULL, SCHED_EFFECT_NO_EXECUTE }, { "a", "b", SCHED_EFFECT_NO_EXECUTE }, true },
		{ { "a", SCHED_TOL_EXISTS, NULL, SCHED_EFFECT_NO_EXECUTE }, { "a", "b", SCHED_EFFECT_NO_SCHEDULE }, false },
		{ { "b", SCHED_TOL_EXISTS, NULL, SCHED_EFFECT_NONE }, { "a", "b", SCHED_EFFECT_NO_SCHEDULE }, false },
		{ { "a", (sched_tol_op)5, "b", SCHED_EFFECT_NONE }, { "a", "b", SCHED_EFFECT_NO_SCHEDULE }, false },
	};
	size_t i;
	for(i = 0; i < N(c); i++) {
		bool got = sched_toleration_tolerates(&c[i].t, &c[i].taint);
		if(got != c[i].want)
			fprintf(stderr, "toleration case %zu: got %d\n", i, got);
		CU_ASSERT_EQUAL(got, c[i].want);
	}
	/* Only NoSchedule / NoExecute block; PreferNoSchedule and an empty
	 * effect (invalid in the API) are ignored, as kube-scheduler does. */
	{
		sched_pod_spec p = { .namespace = "default" };
		sched_taint soft[] = { { "a", "b", SCHED_EFFECT_PREFER_NO_SCHEDULE },
		                       { "c", "d", SCHED_EFFECT_NONE } };
		sched_taint hard[] = { { "a", "b", SCHED_EFFECT_NO_EXECUTE } };
		sched_toleration all = { NULL, SCHED_TOL_EXISTS, NULL, SCHED_EFFECT_NONE };
		CU_ASSERT_TRUE(sched_taints_tolerated(&p, soft, 2));
		CU_ASSERT_FALSE(sched_taints_tolerated(&p, hard, 1));
		CU_ASSERT_FALSE(sched_tolerates_unschedulable(&p));
		p.tolerations = &all;
		p.n_tolerations = 1;
		CU_ASSERT_TRUE(sched_taints_tolerated(&p, hard, 1));
		CU_ASSERT_TRUE(sched_tolerates_unschedulable(&p));
	}
}

static void test_ports(void)
{
	struct {
		sched_host_port a, b;
		bool want;
	} c[] = {
		{ { 80, SCHED_PROTO_TCP, NULL }, { 80, SCHED_PROTO_TCP, NULL }, true },
		{ { 80, SCHED_PROTO_TCP, NULL }, { 80, SCHED_PROTO_UDP, NULL }, false },
		{ { 80, SCHED_PROTO_TCP, NULL }, { 81, SCHED_PROTO_TCP, NULL }, false },
		{ { 80, SCHED_PROTO_TCP, "10.0.0.1" }, { 80, SCHED_PROTO_TCP, "10.0.0.2" }, false },
		{ { 80, SCHED_PROTO_TCP, "10.0.0.1" }, { 80, SCHED_PROTO_TCP, "10.0.0.1" }, true },
		{ { 80, SCHED_PROTO_TCP, "0.0.0.0" }, { 80, SCHED_PROTO_TCP, "10.0.0.2" }, true },
		{ { 80, SCHED_PROTO_TCP, "" }, { 80, SCHED_PROTO_TCP, "10.0.0.2" }, true },
		{ { 0, SCHED_PROTO_TCP, NULL }, { 0, SCHED_PROTO_TCP, NULL }, false },
	};
	size_t i;
	for(i = 0; i < N(c); i++)
		CU_ASSERT_EQUAL(sched_host_ports_conflict(&c[i].a, &c[i].b), c[i].want);
}

/* ---- predicates through the snapshot -------------------------------- */

static void test_resources(void)
{
	sched_snapshot *s = sched_snapshot_new();
	size_t n0 = plain_node(s, "n0", "z1", 4000);
	size_t n1 = add_node(s, "n1", "z1", 4000, 16, 2, NULL, 0, NULL, 0, false);
	sched_pod_spec p = pod_cpu(4000), q;
	sched_res gpu[] = { { "nvidia.com/gpu", 2 } }, gpu3[] = { { "nvidia.com/gpu", 3 } };
	sched_res zero[] = { { "cpu", 0 }, { "example.com/unknown", 0 } };
	sched_res unknown[] = { { "example.com/unknown", 1 } };
	sched_res hp[] = { { "hugepages-2Mi", 1 } };

	CU_ASSERT_EQUAL(check(s, &p, n0), SCHED_FIT_OK);      /* exactly fits */
	p = pod_cpu(4001);
	CU_ASSERT_EQUAL(check(s, &p, n0), SCHED_FIT_RESOURCES); /* one over */
	q = (sched_pod_spec){ .namespace = "default", .requests = zero, .n_requests = 2 };
	CU_ASSERT_EQUAL(check(s, &q, n0), SCHED_FIT_OK);      /* zero requests */
	q.requests = gpu;
	q.n_requests = 1;
	CU_ASSERT_EQUAL(check(s, &q, n0), SCHED_FIT_OK);
	q.requests = gpu3;
	CU_ASSERT_EQUAL(check(s, &q, n0), SCHED_FIT_RESOURCES);
	q.requests = unknown;                                 /* no node has it */
	CU_ASSERT_EQUAL(check(s, &q, n0), SCHED_FIT_RESOURCES);
	q.requests = hp;                                      /* hugepages not advertised */
	CU_ASSERT_EQUAL(check(s, &q, n0), SCHED_FIT_RESOURCES);

	/* Pod slots: node n1 takes two pods. */
	q.requests = zero;
	q.n_requests = 2;
	CU_ASSERT_EQUAL(sched_snapshot_add_pods(s, n1, &q, 2, NULL), 0);
	CU_ASSERT_EQUAL(check(s, &q, n1), SCHED_FIT_RESOURCES);

	/* Bound pods consume capacity; overcommitted nodes take nothing. */
	p = pod_cpu(3000);
	CU_ASSERT_EQUAL(sched_snapshot_add_pods(s, n0, &p, 2, NULL), 0);
	q.requests = zero;
	CU_ASSERT_EQUAL(check(s, &q, n0), SCHED_FIT_OK);      /* zero cpu still fits */
	p = pod_cpu(1);
	CU_ASSERT_EQUAL(check(s, &p, n0), SCHED_FIT_RESOURCES);
	{
		int64_t f = -1;
		CU_ASSERT_EQUAL(sched_snapshot_node_free(s, n0, "cpu", &f), 0);
		CU_ASSERT_EQUAL(f, 0);
		CU_ASSERT_EQUAL(sched_snapshot_node_free(s, n0, "pods", &f), 0);
		CU_ASSERT_EQUAL(f, 108);
		CU_ASSERT_EQUAL(sched_snapshot_node_free(s, n0, "nothing", &f), 0);
		CU_ASSERT_EQUAL(f, 0);
	}
	sched_snapshot_free(s);
}

static void test_node_predicates(void)
{
	sched_snapshot *s = sched_snapshot_new();
	sched_label ssd[] = { { "disk", "ssd" }, { "rank", "7" } };
	sched_taint t_ns[] = { { "dedicated", "gpu", SCHED_EFFECT_NO_SCHEDULE } };
	sched_taint t_ne[] = { { "maint", NULL, SCHED_EFFECT_NO_EXECUTE } };
	sched_taint t_pref[] = { { "soft", NULL, SCHED_EFFECT_PREFER_NO_SCHEDULE } };
	sched_taint t_empty[] = { { "odd", "x", SCHED_EFFECT_NONE } };
	size_t n_plain = plain_node(s, "plain", "z1", 4000);
	size_t n_ssd = add_node(s, "ssd", "z1", 4000, 16, 110, ssd, 2, NULL, 0, false);
	size_t n_ns = add_node(s, "tainted", "z1", 4000, 16, 110, NULL, 0, t_ns, 1, false);
	size_t n_ne = add_node(s, "noexec", "z1", 4000, 16, 110, NULL, 0, t_ne, 1, false);
	size_t n_pref = add_node(s, "pref", "z1", 4000, 16, 110, NULL, 0, t_pref, 1, false);
	size_t n_empty = add_node(s, "emptyeffect", "z1", 4000, 16, 110, NULL, 0, t_empty, 1, false);
	size_t n_unsch = add_node(s, "cordoned", "z1", 4000, 16, 110, NULL, 0, NULL, 0, true);
	sched_pod_spec p = pod_cpu(100);
	const char *five[] = { "5" }, *ssdv[] = { "ssd" };
	sched_requirement gt5 = { "rank", SCHED_OP_GT, five, 1 };
	sched_requirement in_ssd = { "disk", SCHED_OP_IN, ssdv, 1 };
	sched_requirement both[] = { gt5, in_ssd };
	sched_node_term terms[] = { { both, 2 } }, empty_term[] = { { NULL, 0 } };
	sched_toleration tol_gpu = { "dedicated", SCHED_TOL_EQUAL, "gpu", SCHED_EFFECT_NO_SCHEDULE };
	sched_toleration tol_ne = { "maint", SCHED_TOL_EXISTS, NULL, SCHED_EFFECT_NO_EXECUTE };
	sched_toleration tol_all = { NULL, SCHED_TOL_EXISTS, NULL, SCHED_EFFECT_NONE };
	sched_toleration tol_cordon = { SCHED_TAINT_UNSCHEDULABLE, SCHED_TOL_EXISTS, NULL,
	                                SCHED_EFFECT_NO_SCHEDULE };

	/* nodeName */
	p.node_name = "ssd";
	CU_ASSERT_EQUAL(check(s, &p, n_plain), SCHED_FIT_NODE_NAME);
	CU_ASSERT_EQUAL(check(s, &p, n_ssd), SCHED_FIT_OK);
	p.node_name = NULL;
	/* nodeSelector */
	p.node_selector = ssd;
	p.n_node_selector = 1;
	CU_ASSERT_EQUAL(check(s, &p, n_plain), SCHED_FIT_NODE_AFFINITY);
	CU_ASSERT_EQUAL(check(s, &p, n_ssd), SCHED_FIT_OK);
	p.n_node_selector = 0;
	/* required node affinity (Gt) */
	p.has_node_affinity = true;
	p.affinity_terms = terms;
	p.n_affinity_terms = 1;
	CU_ASSERT_EQUAL(check(s, &p, n_plain), SCHED_FIT_NODE_AFFINITY);
	CU_ASSERT_EQUAL(check(s, &p, n_ssd), SCHED_FIT_OK);
	/* a term without expressions matches nothing */
	p.affinity_terms = empty_term;
	CU_ASSERT_EQUAL(check(s, &p, n_ssd), SCHED_FIT_NODE_AFFINITY);
	p.has_node_affinity = false;
	p.n_affinity_terms = 0;
	/* taints */
	CU_ASSERT_EQUAL(check(s, &p, n_ns), SCHED_FIT_TAINTS);
	CU_ASSERT_EQUAL(check(s, &p, n_ne), SCHED_FIT_TAINTS);
	CU_ASSERT_EQUAL(check(s, &p, n_pref), SCHED_FIT_OK);
	CU_ASSERT_EQUAL(check(s, &p, n_empty), SCHED_FIT_OK);
	p.tolerations = &tol_gpu;
	p.n_tolerations = 1;
	CU_ASSERT_EQUAL(check(s, &p, n_ns), SCHED_FIT_OK);
	CU_ASSERT_EQUAL(check(s, &p, n_ne), SCHED_FIT_TAINTS);
	p.tolerations = &tol_ne;
	CU_ASSERT_EQUAL(check(s, &p, n_ne), SCHED_FIT_OK);
	/* unschedulable: blocked unless the unschedulable taint is tolerated */
	p.n_tolerations = 0;
	CU_ASSERT_EQUAL(check(s, &p, n_unsch), SCHED_FIT_UNSCHEDULABLE);
	p.tolerations = &tol_cordon;
	p.n_tolerations = 1;
	CU_ASSERT_EQUAL(check(s, &p, n_unsch), SCHED_FIT_OK);
	p.tolerations = &tol_all;
	CU_ASSERT_EQUAL(check(s, &p, n_unsch), SCHED_FIT_OK);
	CU_ASSERT_EQUAL(check(s, &p, n_ns), SCHED_FIT_OK);
	CU_ASSERT_EQUAL(check(s, &p, n_ne), SCHED_FIT_OK);
	sched_snapshot_free(s);
}

static void test_host_ports_pred(void)
{
	sched_snapshot *s = sched_snapshot_new();
	size_t n0 = plain_node(s, "n0", "z1", 4000);
	sched_host_port h80 = { 80, SCHED_PROTO_TCP, NULL }, h80u = { 80, SCHED_PROTO_UDP, NULL };
	sched_pod_spec p = pod_cpu(10), q = pod_cpu(10);
	sched_podset set = { &p, 3 };
	sched_place_result r;

	p.host_ports = &h80;
	p.n_host_ports = 1;
	q.host_ports = &h80u;
	q.n_host_ports = 1;
	CU_ASSERT_EQUAL(check(s, &p, n0), SCHED_FIT_OK);
	CU_ASSERT_EQUAL(sched_snapshot_add_pods(s, n0, &p, 1, NULL), 0);
	CU_ASSERT_EQUAL(check(s, &p, n0), SCHED_FIT_HOST_PORTS);
	CU_ASSERT_EQUAL(check(s, &q, n0), SCHED_FIT_OK);
	/* A podSet with a host port puts at most one copy per node. */
	plain_node(s, "n1", "z1", 4000);
	plain_node(s, "n2", "z1", 4000);
	CU_ASSERT_EQUAL(sched_place(s, &set, 1, &r, NULL), 0);
	CU_ASSERT_EQUAL(r.placed, 2);
	CU_ASSERT_FALSE(r.fits_all);
	CU_ASSERT_EQUAL(r.sets[0].n_assign, 2);
	sched_place_result_free(&r);
	sched_snapshot_free(s);
}

static sched_label app_web[] = { { "app", "web" } };
static sched_label app_db[] = { { "app", "db" } };
static sched_label_selector sel_web = { app_web, 1, NULL, 0 };
static sched_label_selector sel_db = { app_db, 1, NULL, 0 };

static void test_anti_affinity(void)
{
	sched_snapshot *s = sched_snapshot_new();
	size_t a0 = plain_node(s, "a0", "za", 8000), a1 = plain_node(s, "a1", "za", 8000);
	size_t b0 = plain_node(s, "b0", "zb", 8000), nz = plain_node(s, "nozone", NULL, 8000);
	sched_pod_term host_db = { SCHED_KEY_HOSTNAME, &sel_db, NULL, 0, false };
	sched_pod_term zone_db = { SCHED_KEY_ZONE, &sel_db, NULL, 0, false };
	sched_pod_term host_web = { SCHED_KEY_HOSTNAME, &sel_web, NULL, 0, false };
	sched_pod_term zone_web = { SCHED_KEY_ZONE, &sel_web, NULL, 0, false };
	sched_pod_spec db = pod_cpu(10), web = pod_cpu(10), other = pod_cpu(10);

	db.labels = app_db;
	db.n_labels = 1;
	web.labels = app_web;
	web.n_labels = 1;
	CU_ASSERT_EQUAL(sched_snapshot_add_pods(s, a0, &db, 1, NULL), 0);

	web.pod_anti_affinity = &host_db;
	web.n_pod_anti_affinity = 1;
	CU_ASSERT_EQUAL(check(s, &web, a0), SCHED_FIT_ANTI_AFFINITY);
	CU_ASSERT_EQUAL(check(s, &web, a1), SCHED_FIT_OK);
	web.pod_anti_affinity = &zone_db;
	CU_ASSERT_EQUAL(check(s, &web, a1), SCHED_FIT_ANTI_AFFINITY);
	CU_ASSERT_EQUAL(check(s, &web, b0), SCHED_FIT_OK);
	CU_ASSERT_EQUAL(check(s, &web, nz), SCHED_FIT_OK); /* no zone label: no zone domain */

	/* Symmetry: an existing pod's anti-affinity keeps matching pods away. */
	other.labels = app_web;
	other.n_labels = 1;
	other.pod_anti_affinity = &zone_web;
	other.n_pod_anti_affinity = 1;
	CU_ASSERT_EQUAL(sched_snapshot_add_pods(s, b0, &other, 1, NULL), 0);
	web.n_pod_anti_affinity = 0;
	CU_ASSERT_EQUAL(check(s, &web, b0), SCHED_FIT_ANTI_AFFINITY);
	CU_ASSERT_EQUAL(check(s, &web, a0), SCHED_FIT_OK);
	/* Other namespace: the term covers only its owner's namespace. */
	web.namespace = "elsewhere";
	CU_ASSERT_EQUAL(check(s, &web, b0), SCHED_FIT_OK);
	web.namespace = "default";

	/* Self anti-affinity on hostname: one copy per node. */
	{
		sched_snapshot *t = sched_snapshot_new();
		sched_podset set;
		sched_place_result r;
		size_t i;
		for(i = 0; i < 4; i++) {
			char name[32];
			snprintf(name, sizeof(name), "n%zu", i);
			plain_node(t, name, i < 2 ? "za" : "zb", 8000);
		}
		web.pod_anti_affinity = &host_web;
		web.n_pod_anti_affinity = 1;
		set = (sched_podset){ &web, 6 };
		CU_ASSERT_EQUAL(sched_place(t, &set, 1, &r, NULL), 0);
		CU_ASSERT_EQUAL(r.placed, 4);
		CU_ASSERT_FALSE(r.fits_all);
		for(i = 0; i < r.sets[0].n_assign; i++)
			CU_ASSERT_EQUAL(r.sets[0].assign[i].count, 1);
		sched_place_result_free(&r);
		/* ... and on zone: one copy per zone, on the first node of each. */
		web.pod_anti_affinity = &zone_web;
		web.namespace = "fresh";
		CU_ASSERT_EQUAL(sched_place(t, &set, 1, &r, NULL), 0);
		CU_ASSERT_EQUAL(r.placed, 2);
		CU_ASSERT_EQUAL(r.sets[0].n_assign, 2);
		CU_ASSERT_EQUAL(r.sets[0].assign[0].node, 0);
		CU_ASSERT_EQUAL(r.sets[0].assign[1].node, 2);
		sched_place_result_free(&r);
		sched_snapshot_free(t);
	}
	sched_snapshot_free(s);
}

static void test_affinity(void)
{
	sched_snapshot *s = sched_snapshot_new();
	size_t a0 = plain_node(s, "a0", "za", 8000), a1 = plain_node(s, "a1", "za", 8000);
	size_t b0 = plain_node(s, "b0", "zb", 8000), nz = plain_node(s, "nozone", NULL, 8000);
	sched_pod_term host_db = { SCHED_KEY_HOSTNAME, &sel_db, NULL, 0, false };
	sched_pod_term zone_db = { SCHED_KEY_ZONE, &sel_db, NULL, 0, false };
	sched_pod_term zone_web = { SCHED_KEY_ZONE, &sel_web, NULL, 0, false };
	sched_pod_spec db = pod_cpu(10), web = pod_cpu(10);
	sched_podset set;
	sched_place_result r;

	db.labels = app_db;
	db.n_labels = 1;
	web.labels = app_web;
	web.n_labels = 1;
	web.pod_affinity = &host_db;
	web.n_pod_affinity = 1;
	/* No db pod anywhere and web does not match its own term: nowhere. */
	CU_ASSERT_EQUAL(check(s, &web, a0), SCHED_FIT_AFFINITY);
	CU_ASSERT_EQUAL(sched_snapshot_add_pods(s, a0, &db, 1, NULL), 0);
	CU_ASSERT_EQUAL(check(s, &web, a0), SCHED_FIT_OK);
	CU_ASSERT_EQUAL(check(s, &web, a1), SCHED_FIT_AFFINITY);
	web.pod_affinity = &zone_db;
	CU_ASSERT_EQUAL(check(s, &web, a1), SCHED_FIT_OK);
	CU_ASSERT_EQUAL(check(s, &web, b0), SCHED_FIT_AFFINITY);
	CU_ASSERT_EQUAL(check(s, &web, nz), SCHED_FIT_AFFINITY); /* missing topology label */

	/* First pod of a self-affine series goes anywhere; the rest follow it
	 * into its zone. */
	web.pod_affinity = &zone_web;
	web.namespace = "series";
	CU_ASSERT_EQUAL(check(s, &web, b0), SCHED_FIT_OK);
	web.requests = NULL;
	web.n_requests = 0;
	{
		sched_res big[] = { { "cpu", 5000 } };
		web.requests = big;
		web.n_requests = 1;
		set = (sched_podset){ &web, 3 };
		CU_ASSERT_EQUAL(sched_snapshot_fork(s), 0);
		CU_ASSERT_EQUAL(sched_place(s, &set, 1, &r, NULL), 0);
		/* a0 has room for one (8000 - 10), a1 one; b0 is in another zone */
		CU_ASSERT_EQUAL(r.placed, 2);
		CU_ASSERT_EQUAL(r.sets[0].assign[0].node, a0);
		CU_ASSERT_EQUAL(r.sets[0].assign[1].node, a1);
		sched_place_result_free(&r);
		CU_ASSERT_EQUAL(sched_snapshot_revert(s), 0);
	}
	sched_snapshot_free(s);
}

/* The node inclusion policies of topology spread. With zone b's only node
 * tainted: Ignore (the default) still counts zone b as a domain holding 0
 * pods, so only one of two pods fits in zone a; Honor leaves zone b out
 * and both fit (what kube-scheduler does). With the pod's node selector
 * admitting only zone a: Honor (the default) leaves zone b out; Ignore
 * counts it. Broken simulator caught: one with the policies hard-coded
 * (the first version, which answered "only 1 of 2 pods fit"). */
static void test_spread_policies(void)
{
	sched_snapshot *s = sched_snapshot_new();
	sched_taint t[] = { { "dedicated", "gpu", SCHED_EFFECT_NO_SCHEDULE } };
	sched_label pool_x[] = { { "pool", "x" } }, pool_y[] = { { "pool", "y" } };
	sched_spread zs = { SCHED_KEY_ZONE, 1, 0, SCHED_DO_NOT_SCHEDULE, &sel_web, false, false };
	sched_pod_spec web = pod_cpu(100);
	sched_podset set = { &web, 2 };
	sched_place_result r;

	add_node(s, "a1", "za", 8000, 16, 110, pool_x, 1, NULL, 0, false);
	add_node(s, "b1", "zb", 8000, 16, 110, pool_y, 1, t, N(t), false);
	web.labels = app_web;
	web.n_labels = 1;
	web.spread = &zs;
	web.n_spread = 1;
	CU_ASSERT_EQUAL(sched_snapshot_fork(s), 0);
	CU_ASSERT_EQUAL(sched_place(s, &set, 1, &r, NULL), 0);
	CU_ASSERT_EQUAL(r.placed, 1); /* Ignore: zb counts with 0 */
	sched_place_result_free(&r);
	CU_ASSERT_EQUAL(sched_snapshot_revert(s), 0);
	zs.honor_taints = true;
	CU_ASSERT_EQUAL(sched_snapshot_fork(s), 0);
	CU_ASSERT_EQUAL(sched_place(s, &set, 1, &r, NULL), 0);
	CU_ASSERT_EQUAL(r.placed, 2); /* Honor: zb is no domain */
	CU_ASSERT_TRUE(r.fits_all);
	sched_place_result_free(&r);
	CU_ASSERT_EQUAL(sched_snapshot_revert(s), 0);
	zs.honor_taints = false;

	/* Node affinity: the pod may only go to pool x (zone a); zone b is
	 * untainted now. */
	sched_snapshot_free(s);
	s = sched_snapshot_new();
	add_node(s, "a1", "za", 8000, 16, 110, pool_x, 1, NULL, 0, false);
	add_node(s, "b1", "zb", 8000, 16, 110, pool_y, 1, NULL, 0, false);
	web.node_selector = pool_x;
	web.n_node_selector = 1;
	CU_ASSERT_EQUAL(sched_snapshot_fork(s), 0);
	CU_ASSERT_EQUAL(sched_place(s, &set, 1, &r, NULL), 0);
	CU_ASSERT_EQUAL(r.placed, 2); /* Honor: zb is no domain */
	sched_place_result_free(&r);
	CU_ASSERT_EQUAL(sched_snapshot_revert(s), 0);
	zs.ignore_affinity = true;
	CU_ASSERT_EQUAL(sched_snapshot_fork(s), 0);
	CU_ASSERT_EQUAL(sched_place(s, &set, 1, &r, NULL), 0);
	CU_ASSERT_EQUAL(r.placed, 1); /* Ignore: zb counts with 0 */
	sched_place_result_free(&r);
	CU_ASSERT_EQUAL(sched_snapshot_revert(s), 0);
	sched_snapshot_free(s);
}

static void test_spread(void)
{
	sched_snapshot *s = sched_snapshot_new();
	sched_spread zs = { SCHED_KEY_ZONE, 1, 0, SCHED_DO_NOT_SCHEDULE, &sel_web, false, false };
	sched_spread hs = { SCHED_KEY_HOSTNAME, 1, 0, SCHED_DO_NOT_SCHEDULE, &sel_web, false, false };
	sched_pod_spec web = pod_cpu(100);
	sched_podset set = { &web, 7 };
	sched_place_result r;
	size_t a0 = plain_node(s, "a0", "za", 8000), a1 = plain_node(s, "a1", "za", 8000);
	size_t b0 = plain_node(s, "b0", "zb", 8000), c0 = plain_node(s, "c0", "zc", 8000);
	size_t nz = plain_node(s, "nozone", NULL, 8000);

	web.labels = app_web;
	web.n_labels = 1;
	web.spread = &zs;
	web.n_spread = 1;
	CU_ASSERT_EQUAL(check(s, &web, nz), SCHED_FIT_SPREAD); /* missing zone label */
	CU_ASSERT_EQUAL(sched_snapshot_add_pods(s, a0, &web, 1, NULL), 0);
	CU_ASSERT_EQUAL(check(s, &web, a1), SCHED_FIT_SPREAD); /* za would be 2 vs 0 */
	CU_ASSERT_EQUAL(check(s, &web, b0), SCHED_FIT_OK);
	/* maxSkew 2 allows it */
	zs.max_skew = 2;
	CU_ASSERT_EQUAL(check(s, &web, a1), SCHED_FIT_OK);
	zs.max_skew = 1;
	/* ScheduleAnyway is not a filter */
	zs.when = SCHED_SCHEDULE_ANYWAY;
	CU_ASSERT_EQUAL(check(s, &web, a1), SCHED_FIT_OK);
	zs.when = SCHED_DO_NOT_SCHEDULE;

	/* Placement round-robins zones: za has 1, so zb, zc, then za... */
	CU_ASSERT_EQUAL(sched_snapshot_fork(s), 0);
	CU_ASSERT_EQUAL(sched_place(s, &set, 1, &r, NULL), 0);
	CU_ASSERT_EQUAL(r.placed, 7);
	{
		int64_t per_zone[3] = { 1, 0, 0 };
		size_t i;
		for(i = 0; i < r.sets[0].n_assign; i++) {
			size_t n = r.sets[0].assign[i].node;
			per_zone[n <= a1 ? 0 : n == b0 ? 1 : 2] += r.sets[0].assign[i].count;
			CU_ASSERT_NOT_EQUAL(n, nz);
		}
		CU_ASSERT_EQUAL(per_zone[0], 3);
		CU_ASSERT_EQUAL(per_zone[1], 3);
		CU_ASSERT_EQUAL(per_zone[2], 2);
	}
	sched_place_result_free(&r);
	CU_ASSERT_EQUAL(sched_snapshot_revert(s), 0);

	/* minDomains larger than the number of zones: minimum counts as 0, so
	 * each zone takes at most maxSkew matching pods. */
	zs.min_domains = 5;
	CU_ASSERT_EQUAL(check(s, &web, a1), SCHED_FIT_SPREAD);
	CU_ASSERT_EQUAL(check(s, &web, b0), SCHED_FIT_OK);
	CU_ASSERT_EQUAL(sched_snapshot_fork(s), 0);
	CU_ASSERT_EQUAL(sched_place(s, &set, 1, &r, NULL), 0);
	CU_ASSERT_EQUAL(r.placed, 2); /* zb and zc one each */
	sched_place_result_free(&r);
	CU_ASSERT_EQUAL(sched_snapshot_revert(s), 0);
	zs.min_domains = 0;

	/* Hostname spread: the node without a zone label counts as a domain
	 * too (hostname needs no zone), and one pod per node per round. */
	web.spread = &hs;
	CU_ASSERT_EQUAL(check(s, &web, a0), SCHED_FIT_SPREAD);
	CU_ASSERT_EQUAL(check(s, &web, nz), SCHED_FIT_OK);
	set.count = 9;
	CU_ASSERT_EQUAL(sched_snapshot_fork(s), 0);
	CU_ASSERT_EQUAL(sched_place(s, &set, 1, &r, NULL), 0);
	CU_ASSERT_EQUAL(r.placed, 9);
	{
		size_t i;
		int64_t tot[5] = { 1, 0, 0, 0, 0 };
		for(i = 0; i < r.sets[0].n_assign; i++)
			tot[r.sets[0].assign[i].node] += r.sets[0].assign[i].count;
		for(i = 0; i < 5; i++)
			CU_ASSERT_EQUAL(tot[i], 2);
	}
	sched_place_result_free(&r);
	CU_ASSERT_EQUAL(sched_snapshot_revert(s), 0);
	(void)c0;
	sched_snapshot_free(s);
}

/* ---- placement, snapshot ------------------------------------------- */

static void test_group_placement(void)
{
	sched_snapshot *s = sched_snapshot_new();
	sched_pod_spec small = pod_cpu(1000), big;
	sched_res bigr[] = { { "cpu", 3000 } };
	sched_podset sets[2];
	sched_place_result r;
	size_t i;

	for(i = 0; i < 3; i++) {
		char name[32];
		snprintf(name, sizeof(name), "n%zu", i);
		plain_node(s, name, "z", 4000);
	}
	big = (sched_pod_spec){ .namespace = "default", .requests = bigr, .n_requests = 1 };
	sets[0] = (sched_podset){ &small, 3 };
	sets[1] = (sched_podset){ &big, 3 };
	/* Largest first: the three 3-cpu pods take one node each, then the
	 * 1-cpu pods fill the remaining cpu on each. Small-first would fail. */
	CU_ASSERT_EQUAL(sched_place(s, sets, 2, &r, NULL), 0);
	CU_ASSERT_TRUE(r.fits_all);
	CU_ASSERT_EQUAL(r.order[0], 1);
	CU_ASSERT_EQUAL(r.order[1], 0);
	CU_ASSERT_EQUAL(r.sets[0].n_assign, 3);
	CU_ASSERT_EQUAL(r.sets[1].n_assign, 3);
	sched_place_result_free(&r);
	/* The placement stayed in the snapshot: nothing more fits. */
	sets[0].count = 1;
	CU_ASSERT_EQUAL(sched_place(s, sets, 1, &r, NULL), 0);
	CU_ASSERT_FALSE(r.fits_all);
	CU_ASSERT_EQUAL(r.placed, 0);
	sched_place_result_free(&r);

	/* Count 0 fits trivially; absurd counts are refused. */
	sets[0].count = 0;
	CU_ASSERT_EQUAL(sched_place(s, sets, 1, &r, NULL), 0);
	CU_ASSERT_TRUE(r.fits_all);
	sched_place_result_free(&r);
	sets[0].count = SCHED_COUNT_MAX + 1;
	CU_ASSERT_EQUAL(sched_place(s, sets, 1, &r, NULL), PRD_EINVAL);
	sets[0].count = -1;
	CU_ASSERT_EQUAL(sched_place(s, sets, 1, &r, NULL), PRD_EINVAL);
	CU_ASSERT_EQUAL(sched_place(NULL, sets, 1, &r, NULL), PRD_EINVAL);
	CU_ASSERT_EQUAL(sched_place(s, sets, 1, NULL, NULL), PRD_EINVAL);
	sets[0].pod = NULL;
	sets[0].count = 1;
	CU_ASSERT_EQUAL(sched_place(s, sets, 1, &r, NULL), PRD_EINVAL);
	sched_snapshot_free(s);
}

static void test_group_fill(void)
{
	sched_snapshot *s = sched_snapshot_new();
	sched_pod_spec p = pod_cpu(1000);
	sched_podset set = { &p, 10 };
	sched_place_result r;

	plain_node(s, "n0", "z", 4000);
	plain_node(s, "n1", "z", 2500);
	plain_node(s, "n2", "z", 4000);
	CU_ASSERT_EQUAL(sched_place(s, &set, 1, &r, NULL), 0);
	CU_ASSERT_TRUE(r.fits_all);
	CU_ASSERT_EQUAL(r.sets[0].n_assign, 3);
	CU_ASSERT_EQUAL(r.sets[0].assign[0].count, 4);
	CU_ASSERT_EQUAL(r.sets[0].assign[1].count, 2);
	CU_ASSERT_EQUAL(r.sets[0].assign[2].count, 4);
	sched_place_result_free(&r);
	sched_snapshot_free(s);
}

static void test_fork_revert(void)
{
	sched_snapshot *s = sched_snapshot_new();
	sched_pod_spec p = pod_cpu(1000);
	sched_res book[] = { { "cpu", 2000 } };
	int64_t f;
	size_t n0 = plain_node(s, "n0", "z", 4000), idx, rel;

	CU_ASSERT_EQUAL(sched_snapshot_commit(s), PRD_EINVAL);
	CU_ASSERT_EQUAL(sched_snapshot_revert(s), PRD_EINVAL);
	CU_ASSERT_EQUAL(sched_snapshot_fork(s), 0);
	CU_ASSERT_EQUAL(sched_snapshot_add_pods(s, n0, &p, 1, NULL), 0);
	CU_ASSERT_EQUAL(sched_snapshot_fork(s), 0); /* nested */
	CU_ASSERT_EQUAL(sched_snapshot_depth(s), 2);
	CU_ASSERT_EQUAL(sched_snapshot_add_pods(s, n0, &p, 2, NULL), 0);
	plain_node(s, "n1", "z", 4000);
	CU_ASSERT_EQUAL(sched_snapshot_node_count(s), 2);
	CU_ASSERT_EQUAL(sched_snapshot_node_free(s, n0, "cpu", &f), 0);
	CU_ASSERT_EQUAL(f, 1000);
	CU_ASSERT_EQUAL(sched_snapshot_revert(s), 0);
	CU_ASSERT_EQUAL(sched_snapshot_node_count(s), 1);
	CU_ASSERT_EQUAL(sched_snapshot_find_node(s, "n1", &idx), PRD_ENOTFOUND);
	CU_ASSERT_EQUAL(sched_snapshot_node_free(s, n0, "cpu", &f), 0);
	CU_ASSERT_EQUAL(f, 3000);
	/* Nested commit hands changes to the outer fork, which reverts them. */
	CU_ASSERT_EQUAL(sched_snapshot_fork(s), 0);
	CU_ASSERT_EQUAL(sched_snapshot_book(s, "uid-1", n0, book, 1, NULL), 0);
	CU_ASSERT_EQUAL(sched_snapshot_commit(s), 0);
	CU_ASSERT_EQUAL(sched_snapshot_node_free(s, n0, "cpu", &f), 0);
	CU_ASSERT_EQUAL(f, 1000);
	CU_ASSERT_EQUAL(sched_snapshot_revert(s), 0);
	CU_ASSERT_EQUAL(sched_snapshot_node_free(s, n0, "cpu", &f), 0);
	CU_ASSERT_EQUAL(f, 4000);
	CU_ASSERT_EQUAL(sched_snapshot_depth(s), 0);

	/* Bookings at depth 0, released by uid, release undone by revert. */
	CU_ASSERT_EQUAL(sched_snapshot_book(s, "uid-1", n0, book, 1, NULL), 0);
	CU_ASSERT_EQUAL(sched_snapshot_book(s, "uid-2", n0, book, 1, NULL), 0);
	CU_ASSERT_EQUAL(sched_snapshot_node_free(s, n0, "cpu", &f), 0);
	CU_ASSERT_EQUAL(f, 0);
	CU_ASSERT_EQUAL(check(s, &p, n0), SCHED_FIT_RESOURCES);
	CU_ASSERT_EQUAL(sched_snapshot_fork(s), 0);
	CU_ASSERT_EQUAL(sched_snapshot_unbook(s, "uid-1", &rel), 0);
	CU_ASSERT_EQUAL(rel, 1);
	CU_ASSERT_EQUAL(check(s, &p, n0), SCHED_FIT_OK);
	CU_ASSERT_EQUAL(sched_snapshot_revert(s), 0);
	CU_ASSERT_EQUAL(check(s, &p, n0), SCHED_FIT_RESOURCES);
	CU_ASSERT_EQUAL(sched_snapshot_unbook(s, "uid-2", &rel), 0);
	CU_ASSERT_EQUAL(sched_snapshot_unbook(s, "uid-2", &rel), 0);
	CU_ASSERT_EQUAL(rel, 0);
	CU_ASSERT_EQUAL(sched_snapshot_node_free(s, n0, "cpu", &f), 0);
	CU_ASSERT_EQUAL(f, 2000);

	/* Fork depth limit. */
	{
		int i;
		for(i = 0; i < SCHED_FORK_MAX; i++)
			CU_ASSERT_EQUAL(sched_snapshot_fork(s), 0);
		CU_ASSERT_EQUAL(sched_snapshot_fork(s), PRD_ERANGE);
		for(i = 0; i < SCHED_FORK_MAX; i++)
			CU_ASSERT_EQUAL(sched_snapshot_revert(s), 0);
	}
	sched_snapshot_free(s);
}

/* A snapshot told how many nodes come takes them all (and more after);
 * a workload's pods added to a node one after another make one entry, an
 * interleaved node another. */
static void test_reserve_and_entries(void)
{
	sched_snapshot *s = sched_snapshot_new();
	sched_pod_spec p = pod_cpu(100);
	int64_t f;
	size_t idx, n0, n1;
	CU_ASSERT_EQUAL(sched_snapshot_reserve_nodes(s, 2), 0);
	n0 = plain_node(s, "n0", "z", 4000);
	n1 = plain_node(s, "n1", "z", 4000);
	plain_node(s, "n2", "z", 4000);
	CU_ASSERT_EQUAL(sched_snapshot_reserve_nodes(s, 1), 0); /* fewer than held: nothing to do */
	CU_ASSERT_EQUAL(sched_snapshot_node_count(s), 3);
	CU_ASSERT_EQUAL(sched_snapshot_find_node(s, "n2", &idx), 0);
	CU_ASSERT_EQUAL(idx, 2);
	CU_ASSERT_EQUAL(sched_snapshot_pod_entries(s), 0);
	CU_ASSERT_EQUAL(sched_snapshot_add_pods(s, n0, &p, 1, NULL), 0);
	CU_ASSERT_EQUAL(sched_snapshot_add_pods(s, n0, &p, 2, NULL), 0);
	CU_ASSERT_EQUAL(sched_snapshot_pod_entries(s), 1);
	CU_ASSERT_EQUAL(sched_snapshot_add_pods(s, n1, &p, 1, NULL), 0);
	CU_ASSERT_EQUAL(sched_snapshot_add_pods(s, n0, &p, 1, NULL), 0);
	CU_ASSERT_EQUAL(sched_snapshot_pod_entries(s), 3);
	CU_ASSERT_EQUAL(sched_snapshot_node_free(s, n0, "cpu", &f), 0);
	CU_ASSERT_EQUAL(f, 3600);
	sched_snapshot_free(s);
}

static void test_snapshot_invalid(void)
{
	sched_snapshot *s = sched_snapshot_new();
	sched_res neg[] = { { "cpu", -1 } };
	sched_node_spec n = { .name = "n", .allocatable = neg, .n_allocatable = 1 };
	sched_taint badt = { "k", NULL, (sched_effect)17 };
	sched_pod_spec p = pod_cpu(1);
	char names[SCHED_RES_MAX][32];
	sched_res many[SCHED_RES_MAX];
	size_t i;

	CU_ASSERT_EQUAL(sched_snapshot_add_node(s, &n, NULL, NULL), PRD_EINVAL);
	n.n_allocatable = 0;
	n.taints = &badt;
	n.n_taints = 1;
	CU_ASSERT_EQUAL(sched_snapshot_add_node(s, &n, NULL, NULL), PRD_EINVAL);
	n.n_taints = 0;
	CU_ASSERT_EQUAL(sched_snapshot_add_node(s, &n, NULL, NULL), 0);
	CU_ASSERT_EQUAL(sched_snapshot_add_node(s, &n, NULL, NULL), PRD_EEXIST);
	CU_ASSERT_EQUAL(sched_snapshot_add_node(NULL, &n, NULL, NULL), PRD_EINVAL);
	CU_ASSERT_EQUAL(sched_snapshot_add_node(s, NULL, NULL, NULL), PRD_EINVAL);
	for(i = 0; i < SCHED_RES_MAX; i++) {
		snprintf(names[i], sizeof(names[i]), "x.io/r%zu", i);
		many[i] = (sched_res){ names[i], 1 };
	}
	n.name = "m";
	n.allocatable = many;
	n.n_allocatable = SCHED_RES_MAX;
	CU_ASSERT_EQUAL(sched_snapshot_add_node(s, &n, NULL, NULL), PRD_ERANGE);
	CU_ASSERT_EQUAL(sched_snapshot_add_pods(s, 5, &p, 1, NULL), PRD_EINVAL);
	CU_ASSERT_EQUAL(sched_snapshot_add_pods(s, 0, &p, -1, NULL), PRD_EINVAL);
	CU_ASSERT_EQUAL(sched_snapshot_add_pods(s, 0, NULL, 1, NULL), PRD_EINVAL);
	CU_ASSERT_EQUAL(sched_snapshot_book(s, "u", 0, neg, 1, NULL), PRD_EINVAL);
	CU_ASSERT_EQUAL(sched_snapshot_book(s, NULL, 0, NULL, 0, NULL), PRD_EINVAL);
	CU_ASSERT_EQUAL(sched_snapshot_node_free(s, 9, "cpu", NULL), PRD_EINVAL);
	{
		sched_fit f;
		CU_ASSERT_EQUAL(sched_check_pod(s, &p, 3, &f, NULL), PRD_EINVAL);
	}
	sched_snapshot_free(s);
	sched_snapshot_free(NULL);
}

/* ---- estimator ------------------------------------------------------ */

static const sched_label tmpl_labels[] = { { SCHED_KEY_ZONE, "z1" }, { "pool", "gpu" } };
static const sched_res tmpl_alloc[] = { { "cpu", 4000 }, { "memory", 16 * GI }, { "pods", 110 } };

static sched_node_spec tmpl_node(void)
{
	sched_node_spec t = { 0 };
	t.name = "tmpl";
	t.labels = tmpl_labels;
	t.n_labels = 2;
	t.allocatable = tmpl_alloc;
	t.n_allocatable = 3;
	return t;
}

static void test_estimator(void)
{
	sched_snapshot *s = sched_snapshot_new();
	sched_node_spec t = tmpl_node();
	sched_pod_spec p = pod_cpu(1000), q;
	sched_res qr[] = { { "cpu", 3000 } };
	sched_podset sets[2] = { { &p, 10 }, { NULL, 0 } };
	sched_est_limits lim = { 100, 0, 0, 0 };
	sched_est_result r;
	size_t before;

	plain_node(s, "existing", "z1", 4000);
	before = sched_snapshot_node_count(s);
	CU_ASSERT_EQUAL(sched_estimate(s, &t, sets, 1, &lim, &r, NULL), 0);
	CU_ASSERT_EQUAL(r.new_nodes, 3);
	CU_ASSERT_TRUE(r.place.fits_all);
	CU_ASSERT_EQUAL(r.place.sets[0].n_assign, 3);
	CU_ASSERT_EQUAL(r.place.sets[0].assign[0].node, 0);
	CU_ASSERT_EQUAL(r.place.sets[0].assign[0].count, 4);
	CU_ASSERT_EQUAL(r.place.sets[0].assign[2].count, 2);
	CU_ASSERT_EQUAL(r.limited_by, SCHED_EST_UNLIMITED);
	sched_est_result_free(&r);
	CU_ASSERT_EQUAL(sched_snapshot_node_count(s), before); /* reverted */

	/* FFD across podSets: 3-cpu pods first, 1-cpu pods fill the gaps. */
	q = (sched_pod_spec){ .namespace = "default", .requests = qr, .n_requests = 1 };
	sets[1] = (sched_podset){ &q, 3 };
	sets[0].count = 3;
	CU_ASSERT_EQUAL(sched_estimate(s, &t, sets, 2, &lim, &r, NULL), 0);
	CU_ASSERT_EQUAL(r.new_nodes, 3);
	CU_ASSERT_EQUAL(r.place.order[0], 1);
	sched_est_result_free(&r);

	/* Limits: group room, cluster total, per scale-up; the tightest wins. */
	sets[0].count = 10;
	lim = (sched_est_limits){ 2, 0, 0, 0 };
	CU_ASSERT_EQUAL(sched_estimate(s, &t, sets, 1, &lim, &r, NULL), 0);
	CU_ASSERT_EQUAL(r.new_nodes, 2);
	CU_ASSERT_EQUAL(r.place.placed, 8);
	CU_ASSERT_FALSE(r.place.fits_all);
	CU_ASSERT_EQUAL(r.limited_by, SCHED_EST_GROUP_MAX);
	sched_est_result_free(&r);
	lim = (sched_est_limits){ 10, 6, 5, 0 };
	CU_ASSERT_EQUAL(sched_estimate(s, &t, sets, 1, &lim, &r, NULL), 0);
	CU_ASSERT_EQUAL(r.new_nodes, 1);
	CU_ASSERT_EQUAL(r.limited_by, SCHED_EST_TOTAL_MAX);
	sched_est_result_free(&r);
	lim = (sched_est_limits){ 10, 0, 0, 2 };
	CU_ASSERT_EQUAL(sched_estimate(s, &t, sets, 1, &lim, &r, NULL), 0);
	CU_ASSERT_EQUAL(r.new_nodes, 2);
	CU_ASSERT_EQUAL(r.limited_by, SCHED_EST_SCALEUP_MAX);
	sched_est_result_free(&r);
	lim = (sched_est_limits){ 0, 0, 0, 0 };
	CU_ASSERT_EQUAL(sched_estimate(s, &t, sets, 1, &lim, &r, NULL), 0);
	CU_ASSERT_EQUAL(r.new_nodes, 0);
	CU_ASSERT_EQUAL(r.place.placed, 0);
	sched_est_result_free(&r);

	/* A pod too big for the template needs no nodes and does not fit. */
	lim = (sched_est_limits){ 100, 0, 0, 0 };
	{
		sched_pod_spec huge = pod_cpu(5000);
		sched_podset hs = { &huge, 2 };
		CU_ASSERT_EQUAL(sched_estimate(s, &t, &hs, 1, &lim, &r, NULL), 0);
		CU_ASSERT_EQUAL(r.new_nodes, 0);
		CU_ASSERT_FALSE(r.place.fits_all);
		CU_ASSERT_EQUAL(r.limited_by, SCHED_EST_UNLIMITED);
		sched_est_result_free(&r);
	}
	/* Hostname anti-affinity: one node per pod. */
	{
		sched_pod_spec a = pod_cpu(100);
		sched_pod_term host_web = { SCHED_KEY_HOSTNAME, &sel_web, NULL, 0, false };
		sched_podset as = { &a, 5 };
		a.labels = app_web;
		a.n_labels = 1;
		a.pod_anti_affinity = &host_web;
		a.n_pod_anti_affinity = 1;
		CU_ASSERT_EQUAL(sched_estimate(s, &t, &as, 1, &lim, &r, NULL), 0);
		CU_ASSERT_EQUAL(r.new_nodes, 5);
		sched_est_result_free(&r);
	}
	/* Bad input. */
	lim.group_room = -1;
	CU_ASSERT_EQUAL(sched_estimate(s, &t, sets, 1, &lim, &r, NULL), PRD_EINVAL);
	lim.group_room = 1;
	CU_ASSERT_EQUAL(sched_estimate(s, &t, sets, 1, NULL, &r, NULL), PRD_EINVAL);
	CU_ASSERT_EQUAL(sched_estimate(s, NULL, sets, 1, &lim, &r, NULL), PRD_EINVAL);
	sets[0].count = -3;
	CU_ASSERT_EQUAL(sched_estimate(s, &t, sets, 1, &lim, &r, NULL), PRD_EINVAL);
	CU_ASSERT_EQUAL(sched_snapshot_depth(s), 0);
	sched_snapshot_free(s);
}

static void test_estimator_taint(void)
{
	sched_snapshot *s = sched_snapshot_new();
	sched_node_spec t = tmpl_node();
	sched_taint gpu = { "nvidia.com/gpu", "present", SCHED_EFFECT_NO_SCHEDULE };
	sched_toleration tol = { "nvidia.com/gpu", SCHED_TOL_EXISTS, NULL, SCHED_EFFECT_NONE };
	sched_pod_spec p = pod_cpu(1000);
	sched_podset set = { &p, 4 };
	sched_est_limits lim = { 10, 0, 0, 0 };
	sched_est_result r;

	t.taints = &gpu;
	t.n_taints = 1;
	CU_ASSERT_EQUAL(sched_estimate(s, &t, &set, 1, &lim, &r, NULL), 0);
	CU_ASSERT_EQUAL(r.new_nodes, 0);
	CU_ASSERT_FALSE(r.place.fits_all);
	sched_est_result_free(&r);
	p.tolerations = &tol;
	p.n_tolerations = 1;
	CU_ASSERT_EQUAL(sched_estimate(s, &t, &set, 1, &lim, &r, NULL), 0);
	CU_ASSERT_EQUAL(r.new_nodes, 1);
	CU_ASSERT_TRUE(r.place.fits_all);
	sched_est_result_free(&r);
	sched_snapshot_free(s);
}

/* ---- expanders ------------------------------------------------------ */

/* cluster-autoscaler's priority ConfigMap, parsed and handed to a running
 * expander: the table can arrive (and change) after the expander is made. */
static void test_priority_table(void)
{
	static const char cm[] =
		"apiVersion: v1\nkind: ConfigMap\n"
		"metadata: {name: cluster-autoscaler-priority-expander, namespace: kube-system}\n"
		"data:\n  priorities: |-\n    10:\n      - .*\n    50:\n      - ^pool-d$\n      - ^pool-z$\n";
	sched_option o[] = {
		{ "pool-a", true, 1, 1, 4000, 16 * GI, 1000, GI, false, 0 },
		{ "pool-d", true, 1, 1, 4000, 16 * GI, 1000, GI, false, 0 },
	};
	sched_priorities p;
	sched_expander *x;
	size_t best;
	prd_err e = { 0 };

	CU_ASSERT_EQUAL_FATAL(sched_priorities_parse(cm, strlen(cm), &p, &e), 0);
	CU_ASSERT_EQUAL(p.n, 2);
	CU_ASSERT_EQUAL(p.v[0].priority, 50); /* highest first */
	CU_ASSERT_EQUAL(p.v[0].n_regexes, 2);
	CU_ASSERT_STRING_EQUAL(p.v[1].regexes[0], ".*");
	CU_ASSERT_EQUAL_FATAL(sched_expander_new("priority", NULL, 0, 1, &x, &e), 0);
	CU_ASSERT_EQUAL(sched_expander_choose(x, o, 2, &best, NULL), 0);
	CU_ASSERT_EQUAL(best, 0); /* no table: skipped, first option */
	CU_ASSERT_EQUAL(sched_expander_set_priorities(x, p.v, p.n, &e), 0);
	sched_priorities_free(&p);
	CU_ASSERT_EQUAL(sched_expander_choose(x, o, 2, &best, NULL), 0);
	CU_ASSERT_EQUAL(best, 1);
	/* A bad table leaves the one in use. */
	{
		const char *bad[] = { "(" };
		sched_priority pb[] = { { 99, bad, 1 } };
		CU_ASSERT_EQUAL(sched_expander_set_priorities(x, pb, 1, &e), PRD_EINVAL);
		CU_ASSERT_EQUAL(sched_expander_choose(x, o, 2, &best, NULL), 0);
		CU_ASSERT_EQUAL(best, 1);
	}
	sched_expander_free(x);

	/* The bare map reads the same. */
	{
		static const char bare[] = "7: [a]\n-3: [b, c]\n";
		CU_ASSERT_EQUAL_FATAL(sched_priorities_parse(bare, strlen(bare), &p, &e), 0);
	}
	CU_ASSERT_EQUAL(p.n, 2);
	CU_ASSERT_EQUAL(p.v[1].priority, -3);
	sched_priorities_free(&p);

	/* Every mistake says where. */
	{
		static const struct {
			const char *text, *want;
		} bad[] = {
			{ "ten: [a]\n", "priority \"ten\": not an integer" },
			{ "10: a\n", "priority 10: want a non-empty list" },
			{ "10: []\n", "priority 10: want a non-empty list" },
			{ "10: [a, 5]\n", "priority 10, item 2: want a regular expression" },
			{ "10: [\"a(\"]\n", "priority 10: \"a(\" is not a regular expression" },
			{ "[a]\n", "want a map of integer priority" },
			{ "{}\n", "want a map of integer priority" },
			{ "kind: ConfigMap\ndata: {other: x}\n", "no string data.priorities" },
			{ "kind: ConfigMap\ndata: {priorities: \"x: [a]\"}\n", "data.priorities: priority \"x\"" },
			{ "kind: Secret\n", "want a ConfigMap" },
		};
		size_t i;
		for(i = 0; i < N(bad); i++) {
			memset(&e, 0, sizeof(e));
			CU_ASSERT_EQUAL(sched_priorities_parse(bad[i].text, strlen(bad[i].text), &p, &e), PRD_EINVAL);
			if(!strstr(e.msg, bad[i].want))
				fprintf(stderr, "%s: got \"%s\", want \"%s\"\n", bad[i].text, e.msg, bad[i].want);
			CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, bad[i].want));
		}
	}
}

static void test_expanders(void)
{
	/* a: 2 nodes, little waste; b: 1 node, more waste, more pods;
	 * c: does not fit; d: same as a. */
	sched_option o[] = {
		{ "pool-a", true, 2, 10, 4000, 16 * GI, 7600, 30 * GI, false, 0 },
		{ "pool-b", true, 1, 12, 16000, 64 * GI, 8000, 32 * GI, false, 0 },
		{ "pool-c", false, 1, 20, 4000, 16 * GI, 4000, 16 * GI, false, 0 },
		{ "pool-d", true, 2, 10, 4000, 16 * GI, 7600, 30 * GI, false, 0 },
	};
	const char *hi[] = { "^pool-b$" }, *lo[] = { "pool-.*" };
	sched_priority pr[] = { { 10, hi, 1 }, { 1, lo, 1 } };
	sched_expander *x;
	size_t best;
	prd_err e = { 0 };

	struct {
		const char *chain;
		size_t want;
	} c[] = {
		{ NULL, 0 },                      /* least-waste; a and d tie, a first */
		{ "least-waste", 0 },
		{ "most-pods", 1 },
		{ "least-nodes", 1 },
		{ "priority", 1 },
		{ "most-pods,least-waste", 1 },
		{ "least-waste,priority", 0 },    /* priority has no say among a/d: both 1 */
	};
	size_t i;
	for(i = 0; i < N(c); i++) {
		CU_ASSERT_EQUAL_FATAL(sched_expander_new(c[i].chain, pr, 2, 1, &x, &e), 0);
		CU_ASSERT_EQUAL(sched_expander_choose(x, o, N(o), &best, &e), 0);
		if(best != c[i].want)
			fprintf(stderr, "expander %s chose %zu\n", c[i].chain ? c[i].chain : "(default)",
			        best);
		CU_ASSERT_EQUAL(best, c[i].want);
		sched_expander_free(x);
	}
	/* Priority: unmatched groups drop out; if none match, the strategy is
	 * skipped and the next link decides. */
	{
		const char *only_d[] = { "-d$" }, *nomatch[] = { "^zzz" };
		sched_priority pd[] = { { 5, only_d, 1 } }, pn[] = { { 5, nomatch, 1 } };
		CU_ASSERT_EQUAL(sched_expander_new("priority", pd, 1, 1, &x, NULL), 0);
		CU_ASSERT_EQUAL(sched_expander_choose(x, o, N(o), &best, NULL), 0);
		CU_ASSERT_EQUAL(best, 3);
		sched_expander_free(x);
		CU_ASSERT_EQUAL(sched_expander_new("priority,most-pods", pn, 1, 1, &x, NULL), 0);
		CU_ASSERT_EQUAL(sched_expander_choose(x, o, N(o), &best, NULL), 0);
		CU_ASSERT_EQUAL(best, 1);
		sched_expander_free(x);
	}
	/* Random: same seed, same sequence; never picks a non-fitting option;
	 * over many draws each fitting option shows up. */
	{
		sched_expander *y;
		int seen[4] = { 0 }, k;
		CU_ASSERT_EQUAL(sched_expander_new("random", NULL, 0, 42, &x, NULL), 0);
		CU_ASSERT_EQUAL(sched_expander_new("random", NULL, 0, 42, &y, NULL), 0);
		for(k = 0; k < 200; k++) {
			size_t b1, b2;
			CU_ASSERT_EQUAL(sched_expander_choose(x, o, N(o), &b1, NULL), 0);
			CU_ASSERT_EQUAL(sched_expander_choose(y, o, N(o), &b2, NULL), 0);
			CU_ASSERT_EQUAL(b1, b2);
			seen[b1]++;
		}
		CU_ASSERT_EQUAL(seen[2], 0);
		CU_ASSERT_TRUE(seen[0] > 0 && seen[1] > 0 && seen[3] > 0);
		sched_expander_free(x);
		sched_expander_free(y);
	}
	/* Errors. */
	CU_ASSERT_EQUAL(sched_expander_new("cheapest", NULL, 0, 1, &x, &e), PRD_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "cheapest"));
	/* "priority" without a table yet (its ConfigMap is missing) is skipped,
	 * not an error: refusing a chain with no table source is the config's. */
	CU_ASSERT_EQUAL_FATAL(sched_expander_new("priority,most-pods", NULL, 0, 1, &x, NULL), 0);
	CU_ASSERT_EQUAL(sched_expander_choose(x, o, N(o), &best, NULL), 0);
	CU_ASSERT_EQUAL(best, 1);
	sched_expander_free(x);
	{
		const char *bad[] = { "pool-(" };
		sched_priority pb[] = { { 1, bad, 1 } };
		CU_ASSERT_EQUAL(sched_expander_new("priority", pb, 1, 1, &x, NULL), PRD_EINVAL);
	}
	CU_ASSERT_EQUAL(sched_expander_new("least-nodes", NULL, 0, 1, &x, NULL), 0);
	CU_ASSERT_EQUAL(sched_expander_choose(x, &o[2], 1, &best, NULL), PRD_ENOTFOUND);
	CU_ASSERT_EQUAL(sched_expander_choose(x, o, 0, &best, NULL), PRD_ENOTFOUND);
	{
		sched_option neg = o[0];
		neg.pods = -1;
		CU_ASSERT_EQUAL(sched_expander_choose(x, &neg, 1, &best, NULL), PRD_EINVAL);
		neg = o[0];
		neg.group_id = NULL;
		CU_ASSERT_EQUAL(sched_expander_choose(x, &neg, 1, &best, NULL), PRD_EINVAL);
	}
	sched_expander_free(x);
	sched_expander_free(NULL);
	/* Price (auto-provisioned shapes): the cheapest new nodes among the
	 * options with a price, whatever the waste; without any price the
	 * strategy is skipped. Catches an expander that ignores the price
	 * (least-waste would pick pool-a: index 0) or weighs the price of one
	 * node instead of all of them (pool-b, 1 node at 3.0 > 2 x 1.0). */
	{
		sched_option q[] = {
			{ "pool-a", true, 2, 10, 4000, 16 * GI, 7600, 30 * GI, true, 1500000 },
			{ "pool-b", true, 1, 12, 16000, 64 * GI, 8000, 32 * GI, true, 3000000 },
			{ "pool-c", true, 2, 10, 4000, 16 * GI, 7600, 30 * GI, false, 0 },
			{ "pool-d", true, 2, 12, 16000, 64 * GI, 8000, 32 * GI, true, 1000000 },
		};
		CU_ASSERT_EQUAL_FATAL(sched_expander_new("price,least-waste", NULL, 0, 1, &x, NULL), 0);
		CU_ASSERT_EQUAL(sched_expander_choose(x, q, N(q), &best, NULL), 0);
		CU_ASSERT_EQUAL(best, 3);
		CU_ASSERT_EQUAL(sched_expander_choose(x, q, 3, &best, NULL), 0);
		CU_ASSERT_EQUAL(best, 0); /* a (2 x 1.5 = 3.0) ties b (1 x 3.0): least-waste picks a */
		CU_ASSERT_EQUAL(sched_expander_choose(x, &q[2], 1, &best, NULL), 0);
		CU_ASSERT_EQUAL(best, 0);
		sched_expander_free(x);
	}
}

static size_t arena_used(const sched_snapshot *s)
{
	const sched__chunk *c;
	size_t n = 0;
	for(c = s->arena.head; c; c = c->next)
		n += c->used;
	return n;
}

/* A kept snapshot is booked in a fork and reverted on every controller
 * pass; the arena keeps what a fork allocated. Catches a snapshot that
 * copies the request's uid for every booking: 10,000 passes grew it by
 * half a megabyte. */
static void test_book_in_forks_does_not_grow(void)
{
	sched_snapshot *s = sched_snapshot_new();
	sched_res pods = { "pods", 1 };
	size_t idx = plain_node(s, "n1", "za", 4000), before, i;
	CU_ASSERT_EQUAL(sched_snapshot_fork(s), 0);
	CU_ASSERT_EQUAL(sched_snapshot_book(s, "1f0c6a1e-93b4-4c55-a4a4-2a1b8f0e6d11", idx, &pods, 1, NULL), 0);
	CU_ASSERT_EQUAL(sched_snapshot_revert(s), 0);
	before = arena_used(s);
	for(i = 0; i < 10000; i++) {
		CU_ASSERT_EQUAL(sched_snapshot_fork(s), 0);
		CU_ASSERT_EQUAL(sched_snapshot_book(s, "1f0c6a1e-93b4-4c55-a4a4-2a1b8f0e6d11", idx, &pods, 1, NULL), 0);
		CU_ASSERT_EQUAL(sched_snapshot_revert(s), 0);
	}
	CU_ASSERT_EQUAL(arena_used(s), before);
	sched_snapshot_free(s);
}

static const test_case cases[] = {
	{ "pod_requests", test_pod_requests },
	{ "booking in forks does not grow the snapshot", test_book_in_forks_does_not_grow },
	{ "validate", test_validate },
	{ "requirements", test_requirements },
	{ "selectors", test_selectors },
	{ "tolerations", test_tolerations },
	{ "ports", test_ports },
	{ "resources", test_resources },
	{ "node_predicates", test_node_predicates },
	{ "host_ports_pred", test_host_ports_pred },
	{ "anti_affinity", test_anti_affinity },
	{ "affinity", test_affinity },
	{ "spread", test_spread },
	{ "spread: node inclusion policies", test_spread_policies },
	{ "group_placement", test_group_placement },
	{ "group_fill", test_group_fill },
	{ "fork_revert", test_fork_revert },
	{ "reserve_and_entries", test_reserve_and_entries },
	{ "snapshot_invalid", test_snapshot_invalid },
	{ "estimator", test_estimator },
	{ "estimator_taint", test_estimator_taint },
	{ "expanders", test_expanders },
	{ "priority table", test_priority_table },
	{ NULL, NULL }
};

TEST_MAIN("sched", cases)
