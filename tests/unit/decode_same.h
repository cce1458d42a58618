/* Differential check of the two decoders, shared by test_kube_decode_text
 * and fuzz_decode_text: decode JSON text with kube_decode_text() and with
 * json-c + kube_decode(), and say whether the results are the same (the
 * same object field by field, or the same error). Header-only so the fuzz
 * target, which links only library sources, can use it too. */
#ifndef PRD_TEST_DECODE_SAME_H
#define PRD_TEST_DECODE_SAME_H

#include <json-c/json.h>
#include <stdio.h>
#include <string.h>

#include "kube/objects.h"

/* Interned strings from one table are equal exactly when their pointers
 * are; owned strings compare by content. */
static int ds_str(const char *a, const char *b)
{
	if(!a || !b)
		return a == b;
	return strcmp(a, b) == 0;
}

static int ds_qty(const qty *a, const qty *b)
{
	return a->lo == b->lo && a->hi == b->hi && a->format == b->format;
}

static int ds_kvs(const kube_kv *a, size_t na, const kube_kv *b, size_t nb)
{
	size_t i;
	if(na != nb)
		return 0;
	for(i = 0; i < na; i++)
		if(a[i].key != b[i].key || a[i].value != b[i].value)
			return 0;
	return 1;
}

static int ds_res(const kube_res *a, size_t na, const kube_res *b, size_t nb)
{
	size_t i;
	if(na != nb)
		return 0;
	for(i = 0; i < na; i++)
		if(a[i].name != b[i].name || !ds_qty(&a[i].q, &b[i].q))
			return 0;
	return 1;
}

static int ds_meta(const kube_meta *a, const kube_meta *b)
{
	return a->kind == b->kind && a->ns == b->ns && ds_str(a->name, b->name) && ds_str(a->uid, b->uid) &&
	       ds_str(a->rv, b->rv) && a->created_ns == b->created_ns && a->deleted_ns == b->deleted_ns &&
	       a->generation == b->generation;
}

static int ds_node(const kube_node *a, const kube_node *b)
{
	size_t i;
	if(!ds_kvs(a->labels, a->nlabels, b->labels, b->nlabels) ||
	   !ds_kvs(a->annotations, a->nannotations, b->annotations, b->nannotations) ||
	   !ds_res(a->allocatable, a->nallocatable, b->allocatable, b->nallocatable) ||
	   !ds_res(a->capacity, a->ncapacity, b->capacity, b->ncapacity) || a->provider_id != b->provider_id ||
	   a->unschedulable != b->unschedulable || a->ready != b->ready || a->ntaints != b->ntaints)
		return 0;
	for(i = 0; i < a->ntaints; i++)
		if(a->taints[i].key != b->taints[i].key || a->taints[i].value != b->taints[i].value ||
		   a->taints[i].effect != b->taints[i].effect)
			return 0;
	return 1;
}

static int ds_pod(const kube_pod *a, const kube_pod *b)
{
	size_t i;
	if(a->node_name != b->node_name || a->consume != b->consume || a->pr_class != b->pr_class ||
	   a->owner_kind != b->owner_kind || a->owner_name != b->owner_name ||
	   !ds_str(a->affinity_json, b->affinity_json) || !ds_str(a->spread_json, b->spread_json) ||
	   !ds_kvs(a->labels, a->nlabels, b->labels, b->nlabels) ||
	   !ds_kvs(a->node_selector, a->nnode_selector, b->node_selector, b->nnode_selector) ||
	   !ds_res(a->requests, a->nrequests, b->requests, b->nrequests) || a->priority != b->priority ||
	   a->phase != b->phase || a->unschedulable != b->unschedulable || a->ntolerations != b->ntolerations ||
	   a->nhost_ports != b->nhost_ports)
		return 0;
	for(i = 0; i < a->ntolerations; i++) {
		const kube_toleration *x = &a->tolerations[i], *y = &b->tolerations[i];
		if(x->key != y->key || x->value != y->value || x->op != y->op || x->effect != y->effect ||
		   x->has_seconds != y->has_seconds || (x->has_seconds && x->seconds != y->seconds))
			return 0;
	}
	for(i = 0; i < a->nhost_ports; i++) {
		const kube_host_port *x = &a->host_ports[i], *y = &b->host_ports[i];
		if(x->host_ip != y->host_ip || x->port != y->port || x->protocol != y->protocol)
			return 0;
	}
	return 1;
}

/* Same typed object? (Nodes and Pods field by field; other kinds by
 * identity only.) */
static int ds_same(const kube_meta *a, const kube_meta *b)
{
	if(!ds_meta(a, b))
		return 0;
	if(a->kind == KUBE_KIND_NODE)
		return ds_node((const kube_node *)a, (const kube_node *)b);
	if(a->kind == KUBE_KIND_POD)
		return ds_pod((const kube_pod *)a, (const kube_pod *)b);
	return 1;
}

/* Decode both ways. Returns NULL when they agree, else what differed
 * (static text). *rc_out (may be NULL) gets kube_decode_text's result. */
static const char *ds_check(kube_kind kind, const char *json, size_t len, int max_depth, kube_intern *in,
			    int *rc_out)
{
	kube_meta *a = NULL, *b = NULL;
	prd_err ea, eb;
	json_tokener *tok;
	json_object *obj;
	const char *why = NULL;
	int ra, rb;

	memset(&ea, 0, sizeof(ea));
	memset(&eb, 0, sizeof(eb));
	ra = kube_decode_text(kind, json, len, max_depth, in, &a, &ea);
	if(rc_out)
		*rc_out = ra;
	tok = json_tokener_new_ex(max_depth);
	obj = json_tokener_parse_ex(tok, json, (int)len);
	if(json_tokener_get_error(tok) != json_tokener_success) {
		if(ra != PRD_EINVAL || a || !strstr(ea.msg, "not valid JSON"))
			why = "json-c cannot parse it but the text decoder did not say so";
	} else {
		rb = kube_decode(kind, obj, in, &b, &eb);
		if(ra != rb)
			why = "different result codes";
		else if(ra && strcmp(ea.msg, eb.msg))
			why = "different error messages";
		else if(!ra && (!a || !b || !ds_same(a, b)))
			why = "different objects";
		else if(ra && (a || b))
			why = "an object despite an error";
	}
	json_object_put(obj);
	json_tokener_free(tok);
	kube_obj_free(in, a);
	kube_obj_free(in, b);
	return why;
}

#endif
