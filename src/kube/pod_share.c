/* A decoded pod's arrays replaced by shared copies (kube__pod_share).
 *
 * The pods of one workload carry the same labels, node selector, requests
 * and tolerations (every pod gets the two default not-ready/unreachable
 * tolerations from admission). Kept per pod, these small arrays took about
 * 110 of the 380 bytes a pod held in the informer cache at 600,000 pods
 * (tests/bench/README.md); shared through the intern table, a workload's
 * pods hold one copy. The arrays are read-only once decoded, so sharing
 * them changes nothing for readers; kube__free_pod releases them. */
#include "kube/objects.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Drop the references an array's elements hold (table lock held). */
static void drop_kvs(kube_intern *in, const void *p, size_t n)
{
	const kube_kv *kv = p;
	size_t i;
	for(i = 0; i < n; i++) {
		kube__intern_put_locked(in, kv[i].key);
		kube__intern_put_locked(in, kv[i].value);
	}
}

static void drop_res(kube_intern *in, const void *p, size_t n)
{
	const kube_res *r = p;
	size_t i;
	for(i = 0; i < n; i++)
		kube__intern_put_locked(in, r[i].name);
}

static void drop_tolerations(kube_intern *in, const void *p, size_t n)
{
	const kube_toleration *t = p;
	size_t i;
	for(i = 0; i < n; i++) {
		kube__intern_put_locked(in, t[i].key);
		kube__intern_put_locked(in, t[i].value);
	}
}

/* Padding bytes zeroed, so that equal contents are equal bytes (the
 * decoders fill these structs field by field). */
static void norm_res(kube_res *r, size_t n)
{
	size_t i;
	for(i = 0; i < n; i++) {
		kube_res v;
		memset(&v, 0, sizeof(v));
		v.name = r[i].name;
		v.q.lo = r[i].q.lo;
		v.q.hi = r[i].q.hi;
		v.q.format = r[i].q.format;
		memcpy(&r[i], &v, sizeof(v));
	}
}

static void norm_tolerations(kube_toleration *t, size_t n)
{
	size_t i;
	for(i = 0; i < n; i++) {
		kube_toleration v;
		memset(&v, 0, sizeof(v));
		v.key = t[i].key;
		v.value = t[i].value;
		v.seconds = t[i].seconds;
		v.op = t[i].op;
		v.effect = t[i].effect;
		v.has_seconds = t[i].has_seconds;
		memcpy(&t[i], &v, sizeof(v));
	}
}

/* Replace the pod's own array *arr (n elements, `size` bytes each) by the
 * shared copy (table lock held); true when it did. The own array goes to
 * *own for the caller to free; its references went to a new blob or were
 * dropped when an equal blob existed. */
static bool share(kube_intern *in, void **arr, size_t n, size_t size,
		  void (*drop)(kube_intern *, const void *, size_t), void **own)
{
	const void *b;
	bool had;
	*own = NULL;
	if(!*arr || !n)
		return false;
	if(!(b = kube__blob_get_locked(in, *arr, n * size, &had)))
		return false;
	if(had)
		drop(in, *arr, n);
	*own = *arr;
	*arr = (void *)(uintptr_t)b;
	return true;
}

void kube__pod_share(kube_intern *in, kube_pod *pod)
{
	void *own[4];
	int i;
	norm_res(pod->requests, pod->nrequests);
	norm_tolerations(pod->tolerations, pod->ntolerations);
	kube__intern_lock(in);
	if(share(in, (void **)&pod->labels, pod->nlabels, sizeof(kube_kv), drop_kvs, &own[0]))
		pod->shared |= KUBE__POD_SHARED_LABELS;
	if(share(in, (void **)&pod->node_selector, pod->nnode_selector, sizeof(kube_kv), drop_kvs, &own[1]))
		pod->shared |= KUBE__POD_SHARED_SELECTOR;
	if(share(in, (void **)&pod->requests, pod->nrequests, sizeof(kube_res), drop_res, &own[2]))
		pod->shared |= KUBE__POD_SHARED_REQUESTS;
	if(share(in, (void **)&pod->tolerations, pod->ntolerations, sizeof(kube_toleration), drop_tolerations,
		 &own[3]))
		pod->shared |= KUBE__POD_SHARED_TOLERATIONS;
	kube__intern_unlock(in);
	for(i = 0; i < 4; i++)
		free(own[i]);
}

/* Release one of the pod's arrays (table lock held): a shared one drops a
 * reference (and what it refers to with its last), an own one is freed
 * with its references. */
static void release(kube_intern *in, const void *arr, size_t n, bool shared,
		    void (*drop)(kube_intern *, const void *, size_t))
{
	if(!shared) {
		drop(in, arr, n);
		free((void *)(uintptr_t)arr);
	} else if(kube__blob_put_locked(in, arr)) {
		drop(in, arr, n);
		kube__blob_free(arr);
	}
}

void kube__pod_release(kube_intern *in, kube_pod *pod)
{
	size_t i;
	kube__intern_lock(in);
	kube__intern_put_locked(in, pod->meta.ns);
	kube__intern_put_locked(in, pod->node_name);
	kube__intern_put_locked(in, pod->consume);
	kube__intern_put_locked(in, pod->pr_class);
	kube__intern_put_locked(in, pod->owner_kind);
	kube__intern_put_locked(in, pod->owner_name);
	for(i = 0; i < pod->nhost_ports; i++)
		kube__intern_put_locked(in, pod->host_ports[i].host_ip);
	release(in, pod->labels, pod->nlabels, pod->shared & KUBE__POD_SHARED_LABELS, drop_kvs);
	release(in, pod->node_selector, pod->nnode_selector, pod->shared & KUBE__POD_SHARED_SELECTOR, drop_kvs);
	release(in, pod->requests, pod->nrequests, pod->shared & KUBE__POD_SHARED_REQUESTS, drop_res);
	release(in, pod->tolerations, pod->ntolerations, pod->shared & KUBE__POD_SHARED_TOLERATIONS,
		drop_tolerations);
	kube__intern_unlock(in);
}
