/* One topology domain per gang: PodTemplates carrying Kueue's
 * kueue.x-k8s.io/podset-required-topology (or -preferred-topology) are
 * booked, or scaled up for, in one domain of the label, which the
 * request's details name. Each test says which broken controller it
 * catches. */
#include "testutil.h"
#include "ctlfix.h"
#include "classes/vocab.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ZONE "topology.kubernetes.io/zone"

/* A PodTemplate of one container requesting cpu, annotated with `ann`
 * ("key: value") in its template's metadata. */
static void add_gang_template(const char *ns, const char *name, const char *cpu, const char *ann)
{
	char y[900], path[256];
	snprintf(y, sizeof(y),
		 "metadata: {name: %s}\n"
		 "template:\n  metadata: {annotations: {%s}}\n"
		 "  spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: \"%s\"}}}]}\n",
		 name, ann ? ann : "", cpu);
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s/podtemplates", ns);
	CU_ASSERT_EQUAL(fx_send("POST", path, y), 0);
}

/* Zone a: one 2-CPU node; zone b: two. */
static void zones(void)
{
	add_node_l("a1", "2", ZONE ": a");
	add_node_l("b1", "2", ZONE ": b");
	add_node_l("b2", "2", ZONE ": b");
}

/* A 2-pod gang of 2 CPU each is booked in zone b, the one zone with room
 * for both, and the details say so; a 3-pod gang that fits only across
 * zones is not booked, the message saying what each zone could take.
 * Broken controllers caught: one that books across zones (first fit puts
 * a pod on a1 and one on b1), one that books the 3-pod gang (6 CPU are
 * free across the zones), one that does not name the domain. */
static void test_required_check_capacity(void)
{
	start(NULL);
	zones();
	add_gang_template("ml", "w", "2", PR_ANN_REQUIRED_TOPOLOGY ": " ZONE);
	add_pr("ml", "two", PR_CLASS_CHECK, "w", 2, NULL);
	pass();
	CU_ASSERT_STRING_EQUAL(cond("ml", "two", "Provisioned"), "True/CapacityIsFound");
	CU_ASSERT_STRING_EQUAL(detail_of("ml", "two", PR_DETAIL_TOPOLOGY), ZONE "=b");
	CU_ASSERT_STRING_EQUAL(detail_of("ml", "two", PR_DETAIL_TOPOLOGY_VALUE), "b");
	CU_ASSERT_TRUE(strstr(detail_of("ml", "two", PR_DETAIL_BOOKING), "a1") == NULL);
	CU_ASSERT_TRUE(strstr(detail_of("ml", "two", PR_DETAIL_BOOKING), "b1") != NULL);
	CU_ASSERT_TRUE(strstr(detail_of("ml", "two", PR_DETAIL_BOOKING), "b2") != NULL);
	stop();

	start(NULL);
	zones();
	add_gang_template("ml", "w", "2", PR_ANN_REQUIRED_TOPOLOGY ": " ZONE);
	add_pr("ml", "three", PR_CLASS_CHECK, "w", 3, NULL);
	pass();
	CU_ASSERT_STRING_EQUAL(cond("ml", "three", "Provisioned"), "False/CapacityIsNotFound");
	CU_ASSERT_STRING_EQUAL(cond_msg("ml", "three", "Provisioned"),
			       "no single " ZONE " domain has room for all 3 pods (" PR_ANN_REQUIRED_TOPOLOGY
			       "); pods that fit in each: " ZONE "=a: 1, " ZONE "=b: 2");
	CU_ASSERT_STRING_EQUAL(detail_of("ml", "three", PR_DETAIL_TOPOLOGY), "-");
	CU_ASSERT_STRING_EQUAL(detail_of("ml", "three", PR_DETAIL_BOOKING), "-");
	stop();
}

/* Preferred: one domain when one has room, else anywhere. Broken
 * controllers caught: one that treats preferred as required (the 3-pod
 * gang would not be booked), one that ignores it (the 2-pod gang would
 * straddle a and b). */
static void test_preferred(void)
{
	start(NULL);
	zones();
	add_gang_template("ml", "w", "2", PR_ANN_PREFERRED_TOPOLOGY ": " ZONE);
	add_pr("ml", "two", PR_CLASS_CHECK, "w", 2, NULL);
	pass();
	CU_ASSERT_STRING_EQUAL(detail_of("ml", "two", PR_DETAIL_TOPOLOGY), ZONE "=b");
	CU_ASSERT_TRUE(strstr(detail_of("ml", "two", PR_DETAIL_BOOKING), "a1") == NULL);
	stop();

	start(NULL);
	zones();
	add_gang_template("ml", "w", "2", PR_ANN_PREFERRED_TOPOLOGY ": " ZONE);
	add_pr("ml", "three", PR_CLASS_CHECK, "w", 3, NULL);
	pass();
	CU_ASSERT_STRING_EQUAL(cond("ml", "three", "Provisioned"), "True/CapacityIsFound");
	CU_ASSERT_STRING_EQUAL(detail_of("ml", "three", PR_DETAIL_TOPOLOGY), "-");
	stop();
}

/* Podsets asking for different labels cannot be kept in one domain of
 * one: said, not guessed. Broken controller caught: one that silently
 * uses one of the labels. */
static void test_mixed_labels_refused(void)
{
	start(NULL);
	zones();
	add_gang_template("ml", "z", "1", PR_ANN_REQUIRED_TOPOLOGY ": " ZONE);
	add_gang_template("ml", "r", "1", PR_ANN_REQUIRED_TOPOLOGY ": example.com/rack");
	{
		char y[600];
		snprintf(y, sizeof(y),
			 "metadata: {name: mixed}\nspec:\n  provisioningClassName: %s\n"
			 "  podSets: [{podTemplateRef: {name: z}, count: 1}, {podTemplateRef: {name: r}, count: 1}]\n",
			 PR_CLASS_CHECK);
		CU_ASSERT_EQUAL(fx_send("POST", "/apis/autoscaling.x-k8s.io/v1/namespaces/ml/provisioningrequests", y), 0);
	}
	pass();
	CU_ASSERT_STRING_EQUAL(cond("ml", "mixed", "Failed"), "True/" PR_R_INVALID);
	CU_ASSERT_TRUE(strstr(cond_msg("ml", "mixed", "Failed"), "different topology labels") != NULL);
	stop();
}

/* Atomic: the plan buys nodes only in the chosen domain, and the booking
 * it ends with stays there. The example
 * driver labels a group's nodes example.provreqd.io/group=<group>, so each
 * group is a domain of that label. Node x1 of domain gb has room for one
 * pod; the other pod needs a new node. Broken controller caught: one that
 * places a pod on x1 and buys the other in group ga (least-waste prefers
 * ga's 2-CPU nodes to gb's 4-CPU ones): a gang across two domains. Once the
 * plan's node registers, the booking the plan ends with is x1 and that
 * node, not a ga node with room that appeared meanwhile (the room on x1
 * was held for the plan, in the domain; the plan's progress also narrows
 * the podSets to the recorded domain, pr__topology_pin, which this test
 * does not tell apart from the hold). */
static void test_required_atomic(void)
{
	start("ga 0 5 0 2 16Gi 110\ngb 0 5 0 4 16Gi 110\n");
	add_node_l("x1", "2", "example.provreqd.io/group: gb");
	add_gang_template("ml", "w", "2", PR_ANN_REQUIRED_TOPOLOGY ": example.provreqd.io/group");
	add_pr("ml", "gang", PR_CLASS_ATOMIC, "w", 2, NULL);
	pass();
	CU_ASSERT_STRING_EQUAL(cond("ml", "gang", "Provisioned"), "False/ScaleUpInProgress");
	CU_ASSERT_STRING_EQUAL(detail_of("ml", "gang", PR_DETAIL_GROUP), "gb");
	CU_ASSERT_STRING_EQUAL(detail_of("ml", "gang", PR_DETAIL_TOPOLOGY), "example.provreqd.io/group=gb");
	/* While the plan waits, a node of domain ga with room appears; then
	 * the plan's node registers. The booking the plan ends with is in gb:
	 * x1 and the new node, not the ga node listed before it. */
	add_node_l("y1", "2", "example.provreqd.io/group: ga");
	{
		cloud_driver *d = drivers.v[0];
		prd_cloud_instance *v = NULL;
		size_t n = 0, i;
		prd_cloud_error de;
		CU_ASSERT_EQUAL_FATAL(d->api->instances(d->state, "gb", &v, &n, &de), 0);
		CU_ASSERT_EQUAL_FATAL(n, 1);
		for(i = 0; i < n; i++) {
			char labels[200];
			snprintf(labels, sizeof(labels), "example.provreqd.io/group: gb");
			add_node_l(v[i].node_name, "2", labels); /* (room for one pod: the other is on x1 or y1) */
		}
		d->api->release_instances(d->state, v, n);
	}
	clk_fake_advance(&fake, 5 * SEC);
	pass();
	clk_fake_advance(&fake, 5 * SEC);
	pass();
	CU_ASSERT_STRING_EQUAL(cond("ml", "gang", "Provisioned"), "True/CapacityIsProvisioned");
	CU_ASSERT_TRUE(strstr(detail_of("ml", "gang", PR_DETAIL_BOOKING), "y1") == NULL);
	CU_ASSERT_TRUE(strstr(detail_of("ml", "gang", PR_DETAIL_BOOKING), "x1") != NULL);
	CU_ASSERT_STRING_EQUAL(detail_of("ml", "gang", PR_DETAIL_TOPOLOGY), "example.provreqd.io/group=gb");
	stop();
}

static const test_case cases[] = {
	{ "required: check-capacity books in one zone, or not at all", test_required_check_capacity },
	{ "preferred: one zone when one has room, else anywhere", test_preferred },
	{ "podSets asking for different labels are refused", test_mixed_labels_refused },
	{ "required: an atomic plan buys nodes in the chosen domain", test_required_atomic },
	{ NULL, NULL }
};

TEST_MAIN("topology", cases)
