/* Helpers of the kwok driver that the other drivers do not share (the
 * shared ones are in cloud/common/drv_util.c). */
#include "kwok/kwok_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "util/rfc3339.h"

/* The alphabet apiserver's generateName uses: no vowels (no words), no
 * look-alike characters. */
static const char suffix_alphabet[] = "bcdfghjklmnpqrstvwxz2456789";

void kwok_random_suffix(kwok *k, char out[6])
{
	unsigned char b[5];
	size_t i;
	if(k->name_seeded) {
		uint64_t z = (k->name_rng += 0x9e3779b97f4a7c15ULL);
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
		z ^= z >> 31;
		for(i = 0; i < sizeof(b); i++)
			b[i] = (unsigned char)(z >> (8 * i));
	} else if(getrandom(b, sizeof(b), GRND_NONBLOCK) != (ssize_t)sizeof(b)) {
		/* No entropy yet (early boot): an xorshift seeded from the clock
		 * still differs between calls; apiserver refuses duplicates and
		 * the caller retries with another name. */
		if(!k->rng)
			k->rng = (uint64_t)k->host->now_ns(k->host->ctx) | 1;
		for(i = 0; i < sizeof(b); i++) {
			k->rng ^= k->rng << 13;
			k->rng ^= k->rng >> 7;
			k->rng ^= k->rng << 17;
			b[i] = (unsigned char)(k->rng >> 24);
		}
	}
	for(i = 0; i < sizeof(b); i++)
		out[i] = suffix_alphabet[b[i] % (sizeof(suffix_alphabet) - 1)];
	out[5] = '\0';
}

int64_t kwok_node_created_ns(json_object *node)
{
	const char *ts = kwok_jstr(kwok_jobj(node, "metadata"), "creationTimestamp");
	prd_err e;
	int64_t ns = 0;
	if(!ts || rfc3339_parse(ts, &ns, &e) || ns < 0)
		return 0;
	return ns;
}

bool kwok_node_deleting(json_object *node)
{
	return kwok_jstr(kwok_jobj(node, "metadata"), "deletionTimestamp") != NULL;
}

static int count_fresh(void *ud, json_object *node)
{
	int32_t *live = ud;
	if(!kwok_node_deleting(node))
		(*live)++;
	return 0;
}

/* A conditional call compares with what the apiserver holds now: neither
 * the host's Node cache nor this driver's last count may be behind
 * another writer, which is what the condition is there to catch. */
int kwok_check_target(kwok *k, kwok_group *g, int32_t expected, int32_t pending, int32_t grow, const char *done,
		      prd_cloud_error *err)
{
	char path[256];
	int32_t live = 0, target;
	int rc;
	snprintf(path, sizeof(path), "/api/v1/nodes?labelSelector=" KWOK_GROUP_LABEL "%%3D%s", g->id);
	rc = kwok_list(k, path, count_fresh, &live, err);
	if(rc == PRD_CLOUD_EUNSUPPORTED)
		rc = 0; /* no apiserver: no Nodes (see count_live in kwok.c) */
	if(rc)
		return rc;
	g->live = live;
	target = live + (int32_t)g->nfailed + pending;
	if(expected >= 0 && target != expected)
		return kwok_fail(err, PRD_CLOUD_ECONFLICT,
				 "kwok: group %s: its target size is %d, not the %d this call was planned from "
				 "(another writer changed the group); nothing %s",
				 g->id, (int)target, (int)expected, done);
	if(grow > g->max - target)
		return kwok_fail(err, PRD_CLOUD_ERANGE,
				 "kwok: group %s: increasing the size from %d by %d would exceed its maximum size %d",
				 g->id, (int)target, (int)grow, (int)g->max);
	return 0;
}

json_object *kwok_node_for_group(const kwok_group *g, const char *name, const char *owner)
{
	json_object *node = json_object_new_object(), *md = json_object_new_object();
	json_object *labels = json_object_new_object(), *ann = json_object_new_object();
	json_object *spec = json_object_new_object(), *status = json_object_new_object();
	json_object *tmd = kwok_jobj(g->tmpl, "metadata"), *tspec = kwok_jobj(g->tmpl, "spec");
	json_object *tstatus = kwok_jobj(g->tmpl, "status"), *copy, *taints;
	char provider[128];

	if(!node || !md || !labels || !ann || !spec || !status) {
		json_object_put(node);
		json_object_put(md);
		json_object_put(labels);
		json_object_put(ann);
		json_object_put(spec);
		json_object_put(status);
		return NULL;
	}
	json_object_object_add(node, "apiVersion", json_object_new_string("v1"));
	json_object_object_add(node, "kind", json_object_new_string("Node"));
	json_object_object_add(node, "metadata", md);
	json_object_object_add(md, "name", json_object_new_string(name));
	if(kwok_jobj(tmd, "labels")) {
		json_object_object_foreach(kwok_jobj(tmd, "labels"), lk, lv) {
			/* Every node would claim one increase made it. */
			if(strcmp(lk, KWOK_OWNER_LABEL))
				json_object_object_add(labels, lk, json_object_get(lv));
		}
	}
	json_object_object_add(labels, "kubernetes.io/hostname", json_object_new_string(name));
	json_object_object_add(labels, KWOK_GROUP_LABEL, json_object_new_string(g->id));
	if(owner)
		json_object_object_add(labels, KWOK_OWNER_LABEL, json_object_new_string(owner));
	json_object_object_add(md, "labels", labels);
	if(kwok_jobj(tmd, "annotations")) {
		json_object_object_foreach(kwok_jobj(tmd, "annotations"), ak, av) {
			/* The sizing annotations describe the group, not a node. */
			if(strcmp(ak, KWOK_MIN_ANNOTATION) && strcmp(ak, KWOK_MAX_ANNOTATION) &&
			   strcmp(ak, KWOK_INITIAL_ANNOTATION))
				json_object_object_add(ann, ak, json_object_get(av));
		}
	}
	json_object_object_add(ann, KWOK_FAKE_ANNOTATION, json_object_new_string("fake"));
	json_object_object_add(md, "annotations", ann);
	json_object_object_add(node, "spec", spec);
	if(tspec && json_object_object_get_ex(tspec, "taints", &taints)) {
		copy = NULL;
		json_object_deep_copy(taints, &copy, NULL);
		json_object_object_add(spec, "taints", copy);
	}
	snprintf(provider, sizeof(provider), KWOK_PROVIDER_PREFIX "%s", name);
	json_object_object_add(spec, "providerID", json_object_new_string(provider));
	json_object_object_add(node, "status", status);
	copy = NULL;
	json_object_deep_copy(json_object_object_get(tstatus, "capacity"), &copy, NULL);
	json_object_object_add(status, "capacity", copy);
	copy = NULL;
	json_object_deep_copy(json_object_object_get(tstatus, "allocatable"), &copy, NULL);
	json_object_object_add(status, "allocatable", copy);
	return node;
}
