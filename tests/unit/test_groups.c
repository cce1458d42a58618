/* The host's copy of a driver's instance listing (src/classes/groups.c):
 * checked, copied into one block, listed once a pass. */
#include "testutil.h"
#include "classes/class.h"
#include "driver/loader.h"

#include <stdlib.h>
#include <string.h>

/* What the fake driver answers: `n` instances built by make_answer. */
static int calls, releases;
static int answer_kind;

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

static void set(prd_cloud_instance *in, const char *id, const char *node, int32_t state, int32_t errclass,
		const char *code, const char *message)
{
	in->id = dup_or_null(id);
	in->node_name = dup_or_null(node);
	in->state = state;
	in->error_class = errclass;
	in->error_code = dup_or_null(code);
	in->error_message = dup_or_null(message);
}

static int f_instances(void *st, const char *group, prd_cloud_instance **out, size_t *count, prd_cloud_error *err)
{
	prd_cloud_instance *v = calloc(5, sizeof(*v));
	char longmsg[1001];
	(void)st;
	(void)group;
	(void)err;
	calls++;
	memset(longmsg, 'x', sizeof(longmsg) - 1);
	longmsg[sizeof(longmsg) - 1] = '\0';
	set(&v[0], "p://a", "a", PRD_CLOUD_INSTANCE_RUNNING, PRD_CLOUD_ERRCLASS_NONE, NULL, NULL);
	set(&v[1], "p://b", "", PRD_CLOUD_INSTANCE_CREATING, PRD_CLOUD_ERRCLASS_NONE, NULL, NULL);
	set(&v[2], "p://c", NULL, PRD_CLOUD_INSTANCE_CREATING, PRD_CLOUD_ERRCLASS_OUT_OF_RESOURCES, "Stockout",
	    "no capacity");
	set(&v[3], "p://d", NULL, PRD_CLOUD_INSTANCE_DELETING, PRD_CLOUD_ERRCLASS_OTHER, NULL, longmsg);
	if(answer_kind == 1)
		set(&v[4], "", "e", PRD_CLOUD_INSTANCE_RUNNING, PRD_CLOUD_ERRCLASS_NONE, NULL, NULL);
	else if(answer_kind == 2)
		set(&v[4], "p://e", "e", 7, PRD_CLOUD_ERRCLASS_NONE, NULL, NULL);
	else
		set(&v[4], "p://e", "e", PRD_CLOUD_INSTANCE_RUNNING, PRD_CLOUD_ERRCLASS_OTHER, "Quota", NULL);
	*out = v;
	*count = 5;
	return 0;
}

static void f_release(void *st, prd_cloud_instance *v, size_t n)
{
	size_t i;
	(void)st;
	releases++;
	for(i = 0; i < n; i++) {
		free(v[i].id);
		free(v[i].node_name);
		free(v[i].error_code);
		free(v[i].error_message);
	}
	free(v);
}

static const prd_cloud_driver api = {
	.abi_major = PRD_CLOUD_ABI_MAJOR,
	.abi_minor = PRD_CLOUD_ABI_MINOR,
	.struct_size = sizeof(prd_cloud_driver),
	.name = "fake",
	.instances = f_instances,
	.release_instances = f_release,
	.instance_size = sizeof(prd_cloud_instance),
};

static pr_class_group group(cloud_driver *d)
{
	pr_class_group g;
	memset(&g, 0, sizeof(g));
	d->api = &api;
	g.drv = d;
	g.id = "g1";
	return g;
}

/* Every field is copied as the driver gave it: an empty node name is no
 * node, a failed instance's message is "code: message" ("error" without a
 * code) cut to 599 characters; the driver's list is released once, and a
 * second listing in the pass asks nothing. */
static void test_copy(void)
{
	cloud_driver d;
	pr_class_group g = group(&d);
	prd_err e;
	size_t i;
	calls = releases = 0;
	answer_kind = 0;
	CU_ASSERT_EQUAL_FATAL(pr_group_list(&g, &e), 0);
	CU_ASSERT_EQUAL(calls, 1);
	CU_ASSERT_EQUAL(releases, 1);
	CU_ASSERT_EQUAL_FATAL(g.ninst, 5);
	CU_ASSERT_STRING_EQUAL(g.inst[0].id, "p://a");
	CU_ASSERT_STRING_EQUAL(g.inst[0].node, "a");
	CU_ASSERT_EQUAL(g.inst[0].state, PRD_CLOUD_INSTANCE_RUNNING);
	CU_ASSERT_PTR_NULL(g.inst[0].errmsg);
	CU_ASSERT_STRING_EQUAL(g.inst[1].id, "p://b");
	CU_ASSERT_PTR_NULL(g.inst[1].node);
	CU_ASSERT_EQUAL(g.inst[1].state, PRD_CLOUD_INSTANCE_CREATING);
	CU_ASSERT_PTR_NULL(g.inst[2].node);
	CU_ASSERT_EQUAL(g.inst[2].errclass, PRD_CLOUD_ERRCLASS_OUT_OF_RESOURCES);
	CU_ASSERT_STRING_EQUAL(g.inst[2].errmsg, "Stockout: no capacity");
	CU_ASSERT_EQUAL(g.inst[3].state, PRD_CLOUD_INSTANCE_DELETING);
	CU_ASSERT_PTR_NOT_NULL_FATAL(g.inst[3].errmsg);
	CU_ASSERT_EQUAL(strlen(g.inst[3].errmsg), 599);
	CU_ASSERT_NSTRING_EQUAL(g.inst[3].errmsg, "error: xxxx", 11);
	CU_ASSERT_STRING_EQUAL(g.inst[4].errmsg, "Quota");
	CU_ASSERT_STRING_EQUAL(g.inst[4].node, "e");
	/* The strings do not overlap. */
	for(i = 0; i + 1 < g.ninst; i++)
		CU_ASSERT(g.inst[i].id + strlen(g.inst[i].id) < g.inst[i + 1].id);
	CU_ASSERT_EQUAL(pr_group_list(&g, &e), 0);
	CU_ASSERT_EQUAL(calls, 1);
	pr_group_unlist(&g);
	CU_ASSERT_PTR_NULL(g.inst);
	CU_ASSERT_EQUAL(pr_group_list(&g, &e), 0);
	CU_ASSERT_EQUAL(calls, 2);
	CU_ASSERT_EQUAL(g.ninst, 5);
	pr_group_unlist(&g);
}

/* An instance without an id or with an unknown state makes the whole
 * listing an error (kept for the pass), with nothing copied. */
static void test_bad_answers(void)
{
	cloud_driver d;
	pr_class_group g = group(&d);
	prd_err e;
	calls = releases = 0;
	answer_kind = 1;
	CU_ASSERT_EQUAL(pr_group_list(&g, &e), PRD_EIO);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "instance 4 has no id"));
	CU_ASSERT_PTR_NULL(g.inst);
	CU_ASSERT_EQUAL(g.ninst, 0);
	CU_ASSERT_EQUAL(releases, 1);
	CU_ASSERT_EQUAL(pr_group_list(&g, &e), PRD_EIO);
	CU_ASSERT_EQUAL(calls, 1);
	pr_group_unlist(&g);
	answer_kind = 2;
	CU_ASSERT_EQUAL(pr_group_list(&g, &e), PRD_EIO);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "instance p://e has an unknown state"));
	CU_ASSERT_PTR_NULL(g.inst);
	pr_group_unlist(&g);
}

static const test_case cases[] = {
	{"a listing is copied", test_copy},
	{"a bad listing is an error", test_bad_answers},
	{NULL, NULL}};

TEST_MAIN("node-group listings", cases)
