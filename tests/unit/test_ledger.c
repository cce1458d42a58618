/* The booking ledger at scale (src/provreq/ledger.c, "Layout"): more
 * bookings than one ConfigMap holds, a booking too large for its records,
 * the overflow objects a write makes, replaces and leaves behind. Against
 * the in-memory API, which refuses a ConfigMap over 1 MiB of data as the
 * apiserver does. */
#include "ctlfix.h"
#include "testutil.h"
#include "classes/vocab.h"
#include "util/buf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LEDGER "/api/v1/namespaces/provreqd/configmaps/provreqd-bookings"
#define LEDGER_OBJECTS_KEY "provreqd.io.objects"

static const char *uid_of(const char *ns, const char *name)
{
	static char out[64];
	json_object *o = get_pr(ns, name);
	snprintf(out, sizeof(out), "%s",
		 o ? json_object_get_string(json_object_object_get(json_object_object_get(o, "metadata"), "uid")) : "gone");
	json_object_put(o);
	return out;
}

static json_object *get(const char *path)
{
	json_object *o = NULL;
	prd_err e;
	if(kube_api_call(&api, "GET", path, NULL, NULL, &o, NULL, &e)) {
		json_object_put(o);
		return NULL;
	}
	return o;
}

/* Bytes of a ConfigMap's data values (what the 1 MiB limit counts). */
static size_t data_bytes(json_object *cm)
{
	size_t n = 0;
	json_object *d = json_object_object_get(cm, "data");
	if(d) {
		json_object_object_foreach(d, k, v)
		{
			(void)k;
			n += (size_t)json_object_get_string_len(v);
		}
	}
	return n;
}

/* Whether the ledger (its head, or an object the head names) holds an
 * entry for uid; *objects (optional) the objects the head names. */
static bool ledger_has(const char *uid, int *objects)
{
	json_object *head = get(LEDGER), *d = json_object_object_get(head, "data"), *names;
	const char *p;
	bool found = d && json_object_object_get_ex(d, uid, NULL);
	if(objects)
		*objects = 0;
	names = d ? json_object_object_get(d, LEDGER_OBJECTS_KEY) : NULL;
	for(p = names ? json_object_get_string(names) : NULL; p && *p;) {
		size_t len = strcspn(p, ",");
		char path[400];
		json_object *o;
		snprintf(path, sizeof(path), "/api/v1/namespaces/provreqd/configmaps/%.*s", (int)len, p);
		o = get(path);
		CU_ASSERT_PTR_NOT_NULL(o);
		found |= o && json_object_object_get_ex(json_object_object_get(o, "data"), uid, NULL);
		json_object_put(o);
		if(objects)
			(*objects)++;
		p += len;
		p += *p == ',';
	}
	json_object_put(head);
	return found;
}

/* The overflow objects in the namespace, named by the head or not. */
static int labeled_objects(void)
{
	json_object *o = get("/api/v1/namespaces/provreqd/configmaps?labelSelector=provreqd.io%2Fbooking-ledger%3D"
			     "provreqd-bookings");
	int n = o ? (int)json_object_array_length(json_object_object_get(o, "items")) : -1;
	json_object_put(o);
	return n;
}

static void put_configmap(const char *name, json_object *data)
{
	json_object *o = json_object_new_object(), *md = json_object_new_object();
	prd_err e;
	json_object_object_add(md, "name", json_object_new_string(name));
	json_object_object_add(o, "metadata", md);
	json_object_object_add(o, "data", data);
	CU_ASSERT_EQUAL(kube_api_call(&api, "POST", "/api/v1/namespaces/provreqd/configmaps", NULL, o, NULL, NULL, &e),
			0);
	json_object_put(o);
}

/* A Ready node with `cpu` cpus and no labels (names here are longer than a
 * label value may be). */
static void add_bare_node(const char *name, const char *cpu)
{
	char y[800];
	snprintf(y, sizeof(y),
		 "metadata: {name: \"%s\"}\n"
		 "status:\n  allocatable: {cpu: \"%s\", memory: 16Gi, pods: \"110\"}\n"
		 "  conditions: [{type: Ready, status: \"True\"}]\n",
		 name, cpu);
	fx_send("POST", "/api/v1/nodes", y);
}

/* The ledger as another instance left it: one ConfigMap (the format
 * before overflow objects) whose ten entries, of requests that exist,
 * total 1,048,500 bytes, just under the 1 MiB a ConfigMap may hold. This
 * instance books two requests, one pass after the other: each goes into
 * the ledger, which now spans several objects, each under the limit, and
 * the entries it was given are all still there. Broken controller caught:
 * today's, whose one object cannot grow past 1 MiB: the apiserver refuses
 * its write (422), so no booking of any instance is written until
 * entries expire ("mine" stays without Provisioned). */
static void test_ledger_grows_past_one_configmap(void)
{
	pr_config cfg;
	json_object *data = json_object_new_object(), *head;
	char uids[10][64], mine[64];
	int i, objects = 0;
	pr_config_default(&cfg);
	cfg.booking_ledger = "provreqd/provreqd-bookings";
	start_cfg(NULL, &cfg);
	add_node("n1", "4");
	add_template("t", "one", "1");
	for(i = 0; i < 10; i++) {
		char name[32];
		buf b;
		int k;
		snprintf(name, sizeof(name), "theirs-%d", i);
		add_pr("t", name, "example.com/elsewhere", "one", 1, NULL);
		snprintf(uids[i], sizeof(uids[i]), "%s", uid_of("t", name));
		buf_init(&b);
		buf_printf(&b, "{\"request\":\"t/%s\",\"at\":\"%lld\",\"until\":\"%lld\",\"nodes\":{", name,
			   (long long)clk_wall(&fake), (long long)(clk_wall(&fake) + 60 * MIN));
		/* Nodes of another cluster's size (none of them here), then one
		 * whose name brings the entry to 104,850 bytes. */
		for(k = 0; b.len + 40 + 80 < 104850; k++)
			buf_printf(&b, "%s\"far-%d-%05d\":{\"cpu\":\"1\",\"pods\":\"1\"}", k ? "," : "", i, k);
		{
			size_t pad = 104850 - b.len - strlen(",\"\":{\"cpu\":\"1\",\"pods\":\"1\"}}}");
			buf_append_str(&b, ",\"");
			while(pad--)
				buf_append_char(&b, 'x');
			buf_append_str(&b, "\":{\"cpu\":\"1\",\"pods\":\"1\"}}}");
		}
		CU_ASSERT_EQUAL(b.len, 104850);
		json_object_object_add(data, uids[i], json_object_new_string_len(b.data, (int)b.len));
		buf_free(&b);
	}
	put_configmap("provreqd-bookings", data);
	head = get(LEDGER);
	CU_ASSERT_EQUAL(data_bytes(head), 1048500);
	json_object_put(head);

	add_pr("t", "mine", PR_CLASS_CHECK, "one", 2, NULL);
	snprintf(mine, sizeof(mine), "%s", uid_of("t", "mine"));
	pass();
	CU_ASSERT_STRING_EQUAL(cond("t", "mine", "Provisioned"), "True/CapacityIsFound");
	CU_ASSERT_TRUE(ledger_has(mine, &objects));
	CU_ASSERT_TRUE(objects >= 1); /* (and the head) */
	for(i = 0; i < 10; i++)
		CU_ASSERT_TRUE(ledger_has(uids[i], NULL));
	/* And the next booking, on the ledger as it now is. */
	clk_fake_advance(&fake, SEC);
	add_pr("t", "next", PR_CLASS_CHECK, "one", 2, NULL);
	pass();
	CU_ASSERT_STRING_EQUAL(cond("t", "next", "Provisioned"), "True/CapacityIsFound");
	CU_ASSERT_TRUE(ledger_has(uid_of("t", "next"), NULL));
	CU_ASSERT_TRUE(ledger_has(mine, NULL));
	/* (Every object under the limit: the in-memory API refuses others.) */
	CU_ASSERT_EQUAL(labeled_objects(), objects);
	stop();
}

/* A check-capacity request of 2,100 pods, one per node, on nodes with
 * names of 250 characters: its booking needs 531,300 bytes in its status,
 * more than the 16 provisioningClassDetails values of 32,000 bytes that
 * may hold it. It fails with BookingTooLarge and a message saying what to
 * do, and a request decided in the same pass is booked. Broken controller
 * caught: today's, which reports it Provisioned with a booking recorded
 * nowhere (not in its status, so not in the ledger either): another shard
 * or a new leader would hand the same nodes out again. */
static void test_ledger_booking_too_large_for_its_status(void)
{
	pr_config cfg;
	char name[300];
	int i;
	pr_config_default(&cfg);
	cfg.booking_ledger = "provreqd/provreqd-bookings";
	start_cfg(NULL, &cfg);
	for(i = 0; i < 2101; i++) {
		int k;
		size_t off = (size_t)snprintf(name, sizeof(name), "n%05d", i);
		for(k = 0; k < 4; k++)
			off += (size_t)snprintf(name + off, sizeof(name) - off,
						".segment-%d-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", k);
		add_bare_node(name, "1");
	}
	CU_ASSERT_EQUAL(strlen(name), 250);
	add_template("t", "one", "1");
	add_pr("t", "huge", PR_CLASS_CHECK, "one", 2100, NULL);
	clk_fake_advance(&fake, SEC);
	add_pr("t", "small", PR_CLASS_CHECK, "one", 1, NULL);
	pass();
	CU_ASSERT_STRING_EQUAL(cond("t", "huge", "Failed"), "True/" PR_R_BOOKING_TOO_LARGE);
	CU_ASSERT_PTR_NOT_NULL(strstr(cond_msg("t", "huge", "Failed"), "split the request"));
	CU_ASSERT_STRING_EQUAL(detail_of("t", "huge", "provreqd.io/booking"), "-");
	CU_ASSERT_FALSE(ledger_has(uid_of("t", "huge"), NULL));
	CU_ASSERT_STRING_EQUAL(cond("t", "small", "Provisioned"), "True/CapacityIsFound");
	CU_ASSERT_TRUE(ledger_has(uid_of("t", "small"), NULL));
	stop();
}

/* With objects of 4 KiB (as if the limit were lower), a few bookings span
 * several objects: each booking is found there, a refused head write
 * leaves no object behind, a booking whose entry is over one object fails
 * with BookingTooLarge while another of the same pass is booked, ended
 * bookings take their objects with them, and an object nothing names
 * (a writer cut off) goes on the next term. */
static void test_ledger_objects_made_replaced_and_swept(void)
{
	pr_config cfg;
	char name[32];
	int i, objects = 0;
	pr_config_default(&cfg);
	cfg.booking_ledger = "provreqd/provreqd-bookings";
	cfg.ledger_object_bytes = 4096;
	start_cfg(NULL, &cfg);
	for(i = 0; i < 600; i++) {
		snprintf(name, sizeof(name), "n%03d", i);
		add_node(name, "1");
	}
	add_template("t", "one", "1");
	for(i = 0; i < 12; i++) {
		snprintf(name, sizeof(name), "r%02d", i);
		add_pr("t", name, PR_CLASS_CHECK, "one", 20, NULL);
		clk_fake_advance(&fake, SEC);
		pass();
		CU_ASSERT_STRING_EQUAL(cond("t", name, "Provisioned"), "True/CapacityIsFound");
	}
	for(i = 0; i < 12; i++) {
		snprintf(name, sizeof(name), "r%02d", i);
		CU_ASSERT_TRUE(ledger_has(uid_of("t", name), &objects));
	}
	CU_ASSERT_TRUE(objects >= 3);
	CU_ASSERT_EQUAL(labeled_objects(), objects);
	CU_ASSERT_EQUAL(pr_ctl_stats(ctl)->ledger_objects, (uint64_t)objects + 1);

	/* Refused: nothing is booked, and the objects made for the write go. */
	memapi_inject_fault(m, "PUT", LEDGER, 409, 1);
	add_pr("t", "refused", PR_CLASS_CHECK, "one", 20, NULL);
	clk_fake_advance(&fake, SEC);
	pass();
	CU_ASSERT_STRING_EQUAL(cond("t", "refused", "Provisioned"), "-");
	CU_ASSERT_FALSE(ledger_has(uid_of("t", "refused"), &objects));
	CU_ASSERT_EQUAL(labeled_objects(), objects);

	/* 200 nodes: an entry of over 4 KiB. */
	add_pr("t", "wide", PR_CLASS_CHECK, "one", 200, NULL);
	clk_fake_advance(&fake, SEC);
	pass();
	CU_ASSERT_STRING_EQUAL(cond("t", "wide", "Failed"), "True/" PR_R_BOOKING_TOO_LARGE);
	CU_ASSERT_PTR_NOT_NULL(strstr(cond_msg("t", "wide", "Failed"), "booking ledger"));
	CU_ASSERT_FALSE(ledger_has(uid_of("t", "wide"), NULL));
	CU_ASSERT_STRING_EQUAL(cond("t", "refused", "Provisioned"), "True/CapacityIsFound");
	CU_ASSERT_TRUE(ledger_has(uid_of("t", "refused"), NULL));

	/* Everything expires: the statuses say so and the objects go. */
	clk_fake_advance(&fake, 11 * MIN);
	pass();
	CU_ASSERT_STRING_EQUAL(cond("t", "r00", "BookingExpired"), "True/CapacityReservationTimeExpired");
	CU_ASSERT_STRING_EQUAL(cond("t", "refused", "BookingExpired"), "True/CapacityReservationTimeExpired");
	CU_ASSERT_FALSE(ledger_has(uid_of("t", "r05"), &objects));
	CU_ASSERT_EQUAL(objects, 0);
	CU_ASSERT_EQUAL(labeled_objects(), 0);

	/* An object a writer made and never named (it died before its head
	 * write): deleted once a new term has written the head. */
	{
		json_object *o = json_object_new_object(), *md = json_object_new_object(), *l = json_object_new_object();
		prd_err e;
		json_object_object_add(l, "provreqd.io/booking-ledger", json_object_new_string("provreqd-bookings"));
		json_object_object_add(md, "name", json_object_new_string("provreqd-bookings-left"));
		json_object_object_add(md, "labels", l);
		json_object_object_add(o, "metadata", md);
		json_object_object_add(o, "data", json_object_new_object());
		CU_ASSERT_EQUAL(kube_api_call(&api, "POST", "/api/v1/namespaces/provreqd/configmaps", NULL, o, NULL,
					      NULL, &e),
				0);
		json_object_put(o);
	}
	CU_ASSERT_EQUAL(labeled_objects(), 1);
	pr_ctl_rebuild_from_api(ctl);
	clk_fake_advance(&fake, SEC);
	pass();
	CU_ASSERT_EQUAL(labeled_objects(), 0);
	stop();
}

/* An entry in an overflow object holds its room like one in the head:
 * another instance's booking of n1, its status write still on its way.
 * Broken controller caught: one that reads the head's entries only
 * ("mine" would be booked on n1). */
static void test_ledger_overflow_entry_holds_room(void)
{
	pr_config cfg;
	json_object *obj = json_object_new_object(), *head = json_object_new_object();
	char entry[400];
	pr_config_default(&cfg);
	cfg.booking_ledger = "provreqd/provreqd-bookings";
	start_cfg(NULL, &cfg);
	add_node("n1", "4");
	add_template("t", "one", "1");
	add_pr("t", "theirs", "example.com/elsewhere", "one", 3, NULL);
	snprintf(entry, sizeof(entry),
		 "{\"request\":\"t/theirs\",\"at\":\"%lld\",\"until\":\"%lld\",\"nodes\":{\"n1\":{\"cpu\":\"3\","
		 "\"pods\":\"3\"}}}",
		 (long long)clk_wall(&fake), (long long)(clk_wall(&fake) + 5 * MIN));
	json_object_object_add(obj, uid_of("t", "theirs"), json_object_new_string(entry));
	put_configmap("provreqd-bookings-o1", obj);
	json_object_object_add(head, LEDGER_OBJECTS_KEY, json_object_new_string("provreqd-bookings-o1"));
	put_configmap("provreqd-bookings", head);
	add_pr("t", "mine", PR_CLASS_CHECK, "one", 2, NULL);
	pass();
	CU_ASSERT_STRING_EQUAL(cond("t", "mine", "Provisioned"), "False/CapacityIsNotFound");
	/* Its booking ends (the entry is removed): the room is free. */
	{
		json_object *o = get(LEDGER);
		prd_err e;
		json_object_object_del(json_object_object_get(o, "data"), LEDGER_OBJECTS_KEY);
		CU_ASSERT_EQUAL(kube_api_call(&api, "PUT", LEDGER, NULL, o, NULL, NULL, &e), 0);
		json_object_put(o);
	}
	clk_fake_advance(&fake, 61 * SEC);
	pass();
	CU_ASSERT_STRING_EQUAL(cond("t", "mine", "Provisioned"), "True/CapacityIsFound");
	stop();
}

static const test_case cases[] = {
	{ "booking ledger: bookings past one ConfigMap's 1 MiB are recorded, others go on", test_ledger_grows_past_one_configmap },
	{ "booking ledger: a booking too large for its status fails with BookingTooLarge", test_ledger_booking_too_large_for_its_status },
	{ "booking ledger: overflow objects made, replaced and swept", test_ledger_objects_made_replaced_and_swept },
	{ "booking ledger: an entry in an overflow object holds its room", test_ledger_overflow_entry_holds_room },
	{ NULL, NULL }
};

TEST_MAIN("ledger", cases)
