/* Compact typed Kubernetes objects, decoded from json-c trees
 * (kube_decode) or straight from JSON text (kube_decode_text, which reads
 * Nodes and Pods without building a tree; the informers use it).
 *
 * The informer cache keeps these instead of the JSON the apiserver sends:
 * only the fields the controller, the scheduler simulation and the pool
 * populator read, with repeated strings interned. A pod takes well under a
 * kilobyte here against tens of kilobytes as a json-c tree.
 *
 * Every object starts with a kube_meta, so a `kube_meta *` can be passed
 * around and cast to the typed struct after checking `kind` (the kube_as_*
 * helpers do that).
 *
 * Strings: unless a field says otherwise, every `const char *` in these
 * structs is interned in the kube_intern table the object was decoded with
 * (compare them with strcmp; two strings from one table are equal exactly
 * when their pointers are). meta.name, meta.uid and meta.rv live in one
 * block owned by the object. Fields documented "owned" are freed with the
 * object. NULL means "absent" for optional strings.
 *
 * Lifetime and threads: a decoded object is immutable. The informer cache
 * owns the objects it holds and frees them with kube_obj_free() on the
 * reflector thread; readers see them only under the cache's read lock (see
 * informer.h). An object not in a cache belongs to whoever decoded it.
 *
 * Errors: decoders reject input that the apiserver would never send (wrong
 * JSON types, missing metadata.name, missing namespace on a namespaced
 * kind, bad quantities or timestamps, unknown taint effects or toleration
 * operators) with PRD_EINVAL and a message naming the object and the
 * field, e.g. `Pod default/web-1: spec.containers[0].resources.requests.cpu:
 * bad quantity "lots": ...`. They never crash on any JSON input. JSON null
 * counts as absent everywhere, as it does for the apiserver. */
#ifndef PRD_KUBE_OBJECTS_H
#define PRD_KUBE_OBJECTS_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kube/quantity.h"
#include "util/err.h"

/* ---------------------------------------------------------------- intern */

/* Interned strings: one shared copy of each distinct string, counted.
 * kube_intern_get() returns the shared copy with one more reference;
 * kube_intern_put() drops one and the copy is freed with its last. The
 * table has its own mutex, so reflector threads of different kinds may
 * share one. */
typedef struct kube_intern kube_intern;

/* NULL when out of memory. Free with kube_intern_free() after every object
 * holding strings from it was freed. */
kube_intern *kube_intern_new(void);
void kube_intern_free(kube_intern *t);
/* The shared copy of the n bytes at s, or NULL when out of memory. */
const char *kube_intern_getn(kube_intern *t, const char *s, size_t n);
const char *kube_intern_get(kube_intern *t, const char *s);
/* One more reference to a string this table returned (NULL passes). */
const char *kube_intern_ref(kube_intern *t, const char *s);
/* Drop one reference (NULL is ignored). */
void kube_intern_put(kube_intern *t, const char *s);
/* Distinct strings held, and the bytes they take (for benchmarks). */
size_t kube_intern_count(kube_intern *t);
size_t kube_intern_bytes(kube_intern *t);

/* ---------------------------------------------------------------- objects */

typedef enum kube_kind {
	KUBE_KIND_NODE = 1,
	KUBE_KIND_POD,
	KUBE_KIND_PODTEMPLATE,
	KUBE_KIND_PROVREQ,
	KUBE_KIND_RESOURCEPOOL,
	KUBE_KIND_CONFIGMAP,
	KUBE_KIND_LEASE,
	/* resource.k8s.io/v1 (Dynamic Resource Allocation), kept as JSON */
	KUBE_KIND_RESOURCESLICE,
	KUBE_KIND_DEVICECLASS,
	KUBE_KIND_RESOURCECLAIMTEMPLATE,
	KUBE_KIND_RESOURCECLAIM,
	/* provreqd.io/v1alpha1 ProvisioningClass, its spec kept as JSON
	 * (src/classes/pclass.c reads and checks it) */
	KUBE_KIND_PROVCLASS
} kube_kind;

/* "Node", "Pod", ... ("?" for a value outside the enum). */
const char *kube_kind_name(kube_kind k);

typedef struct kube_meta {
	const char *ns;       /* interned; "" for cluster-scoped kinds */
	const char *name;     /* owned block holding name, uid and rv */
	const char *uid;      /* "" when absent */
	const char *rv;       /* resourceVersion; "" when absent */
	int64_t created_ns;   /* creationTimestamp, ns since epoch; 0 when absent */
	int64_t deleted_ns;   /* deletionTimestamp; 0 when not being deleted */
	int64_t generation;   /* metadata.generation; 0 when absent */
	uint8_t kind;         /* a kube_kind */
} kube_meta;

typedef struct kube_kv {
	const char *key;
	const char *value;
} kube_kv;

/* A resource amount: name ("cpu", "nvidia.com/gpu") and quantity. */
typedef struct kube_res {
	const char *name;
	qty q;
} kube_res;

typedef enum kube_taint_effect {
	KUBE_EFFECT_ALL = 0,          /* toleration with empty effect: matches all */
	KUBE_EFFECT_NO_SCHEDULE,
	KUBE_EFFECT_PREFER_NO_SCHEDULE,
	KUBE_EFFECT_NO_EXECUTE
} kube_taint_effect;

typedef struct kube_taint {
	const char *key;
	const char *value;    /* NULL when absent */
	uint8_t effect;       /* kube_taint_effect, never ALL */
} kube_taint;

typedef enum kube_toleration_op {
	KUBE_TOL_EQUAL = 0,
	KUBE_TOL_EXISTS
} kube_toleration_op;

typedef struct kube_toleration {
	const char *key;      /* NULL: matches every key (operator Exists) */
	const char *value;    /* NULL when absent */
	int64_t seconds;      /* tolerationSeconds, when has_seconds */
	uint8_t op;           /* kube_toleration_op */
	uint8_t effect;       /* kube_taint_effect */
	bool has_seconds;
} kube_toleration;

typedef enum kube_cond_status {
	KUBE_COND_ABSENT = 0,
	KUBE_COND_TRUE,
	KUBE_COND_FALSE,
	KUBE_COND_UNKNOWN
} kube_cond_status;

typedef struct kube_node {
	kube_meta meta;
	kube_kv *labels;
	kube_kv *annotations;    /* only keys under kube_node_annotation_prefixes */
	kube_taint *taints;
	kube_res *allocatable;
	kube_res *capacity;
	const char *provider_id; /* NULL when absent */
	uint16_t nlabels, nannotations, ntaints, nallocatable, ncapacity;
	bool unschedulable;
	uint8_t ready;           /* kube_cond_status of the Ready condition */
} kube_node;

/* Annotation key prefixes a Node keeps (NULL-terminated): cluster
 * autoscaler, provreqd, Cluster API and kwok keys. */
extern const char *const kube_node_annotation_prefixes[];

typedef enum kube_pod_phase {
	KUBE_POD_PENDING = 0,
	KUBE_POD_RUNNING,
	KUBE_POD_SUCCEEDED,
	KUBE_POD_FAILED,
	KUBE_POD_UNKNOWN
} kube_pod_phase;

typedef struct kube_host_port {
	const char *host_ip;  /* NULL when absent (all addresses) */
	int32_t port;
	uint8_t protocol;     /* 0 TCP, 1 UDP, 2 SCTP */
} kube_host_port;

/* The annotations that tie a pod to the ProvisioningRequest whose capacity
 * it consumes (the first is current, the second deprecated). */
#define KUBE_ANN_CONSUME "autoscaling.x-k8s.io/consume-provisioning-request"
#define KUBE_ANN_CONSUME_OLD "cluster-autoscaler.kubernetes.io/consume-provisioning-request"
#define KUBE_ANN_PR_CLASS "autoscaling.x-k8s.io/provisioning-class-name"
#define KUBE_ANN_PR_CLASS_OLD "cluster-autoscaler.kubernetes.io/provisioning-class-name"

typedef struct kube_pod {
	kube_meta meta;
	const char *node_name;    /* spec.nodeName; NULL when unscheduled */
	const char *consume;      /* consume annotation (either form); NULL if none */
	const char *pr_class;     /* provisioning-class-name annotation; NULL if none */
	const char *owner_kind;   /* the controller ownerReference (else the first) */
	const char *owner_name;
	char *affinity_json;      /* owned; spec.affinity as JSON text, NULL if none */
	char *spread_json;        /* owned; spec.topologySpreadConstraints, NULL if none */
	kube_kv *labels;
	kube_kv *node_selector;
	/* Effective requests, computed as the scheduler does:
	 * max(sum(containers) + sum(sidecars), each init container + sidecars
	 * started before it) + overhead, with pod-level requests (spec.resources)
	 * replacing cpu, memory and hugepages when set. */
	kube_res *requests;
	kube_toleration *tolerations;
	kube_host_port *host_ports;
	uint16_t nlabels, nnode_selector, nrequests, ntolerations, nhost_ports;
	int32_t priority;
	uint8_t phase;            /* kube_pod_phase */
	bool unschedulable;       /* PodScheduled=False with reason Unschedulable */
	uint8_t shared;           /* decoders only: which of labels, node_selector,
	                             requests and tolerations are shared arrays
	                             (KUBE__POD_SHARED_*; see kube__pod_share) */
} kube_pod;

typedef struct kube_podtemplate {
	kube_meta meta;
	/* The `template` field (metadata + spec) as a json-c tree detached from
	 * the input; owned by the object, read-only for everyone else. Never
	 * NULL after a successful decode. */
	json_object *tmpl;
} kube_podtemplate;

/* A resource.k8s.io/v1 object (ResourceSlice, DeviceClass,
 * ResourceClaimTemplate, ResourceClaim): its `spec` and, for a
 * ResourceClaim, `status.allocation`, as json-c trees detached from the
 * input and owned by the object (read-only for everyone else; NULL when
 * absent). The scheduling simulation reads them through
 * src/provreq/dra.c. */
typedef struct kube_draobj {
	kube_meta meta;
	json_object *spec;
	json_object *allocation;
} kube_draobj;

/* A ProvisioningClass (cluster-scoped): the spec as it came, checked by
 * src/classes/pclass.c so that a malformed one becomes an Event and a
 * condition on the requests naming it, not a decoding error. */
typedef struct kube_provclass {
	kube_meta meta;
	json_object *spec;        /* owned; NULL when absent */
} kube_provclass;

typedef struct kube_pr_podset {
	const char *template_name;
	int32_t count;
} kube_pr_podset;

typedef struct kube_condition {
	const char *type;
	const char *status;      /* "True", "False", "Unknown" */
	const char *reason;      /* NULL when absent */
	const char *message;     /* NULL when absent */
	int64_t last_transition_ns;
	int64_t observed_generation;
} kube_condition;

typedef struct kube_provreq {
	kube_meta meta;           /* meta.generation is the spec generation */
	const char *class_name;   /* spec.provisioningClassName */
	/* Set only on the copy the controller decides a request through a
	 * ProvisioningClass with: the class the request named (class_name is
	 * then the class it is served as). Logs name both. */
	const char *named_class;
	kube_pr_podset *pod_sets;
	kube_kv *parameters;
	kube_condition *conditions;
	kube_kv *class_details;   /* status.provisioningClassDetails */
	uint16_t npod_sets, nparameters, nconditions, nclass_details;
	bool held;                /* metadata.finalizers names KUBE_PR_FINALIZER */
} kube_provreq;

/* provreqd's finalizer on a request whose scale-up is in flight. */
#define KUBE_PR_FINALIZER "provreqd.io/scale-up-in-flight"

typedef struct kube_resourcepool {
	kube_meta meta;           /* cluster-scoped: ns is "" */
	kube_kv *annotations;     /* all but kubectl's last-applied-configuration */
	kube_res *hard;           /* spec.quota.hard */
	kube_res *used;           /* status.allocation.used */
	kube_res *alloc_hard;     /* status.allocation.hard */
	uint16_t nannotations, nhard, nused, nalloc_hard;
} kube_resourcepool;

typedef struct kube_configmap {
	kube_meta meta;
	kube_kv *data;
	uint16_t ndata;
} kube_configmap;

typedef struct kube_lease {
	kube_meta meta;
	const char *holder;       /* spec.holderIdentity; NULL when absent */
	int64_t acquire_ns;       /* spec.acquireTime; 0 when absent */
	int64_t renew_ns;         /* spec.renewTime; 0 when absent */
	int32_t duration_s;       /* spec.leaseDurationSeconds; 0 when absent */
	int32_t transitions;      /* spec.leaseTransitions */
} kube_lease;

/* Decode `obj` as an object of `kind`. On success *out is a new object the
 * caller frees with kube_obj_free(in, *out). On failure *out is NULL and
 * PRD_EINVAL (bad input) or PRD_ENOMEM is returned with a message in err. */
int kube_decode(kube_kind kind, json_object *obj, kube_intern *in, kube_meta **out, prd_err *err);

/* Decode an object of `kind` from its JSON text (len bytes at json, not
 * necessarily NUL-terminated), with the same result as parsing the text
 * with json-c (nesting up to max_depth containers) and calling
 * kube_decode(): the same object, or the same error. Nodes and Pods are
 * read straight from the text (decode_text.c) unless the text is unusual,
 * in which case, and for every other kind, json-c parses it. Text json-c
 * cannot parse is PRD_EINVAL ("Pod: not valid JSON: ..."). */
int kube_decode_text(kube_kind kind, const char *json, size_t len, int max_depth, kube_intern *in,
		     kube_meta **out, prd_err *err);

/* metadata.namespace, .name and .resourceVersion of an object's JSON text
 * ("" when absent), as kube_json_meta() would read them from the parsed
 * object. Returns 0, or non-zero when the text is not plain enough to be
 * sure (parse it with json-c and use kube_json_meta() then): no metadata
 * object, values of other types or 256 bytes and longer, duplicate keys,
 * any JSON json-c reads its own way. A missing name is "" here (where
 * kube_json_meta() fails): bookmarks have none. */
typedef struct kube_text_id {
	char ns[256];
	char name[256];
	char rv[256];
} kube_text_id;
int kube_text_id_scan(const char *json, size_t len, int max_depth, kube_text_id *id);

/* A copy of a decoded ProvisioningRequest sharing table `in` (so a reader
 * can keep it after releasing an informer's lock). NULL when out of memory
 * or for other kinds. Free with kube_obj_free(in, copy). */
kube_meta *kube_obj_clone(kube_intern *in, const kube_meta *obj);

/* Free an object decoded with table `in` (NULL is ignored). */
void kube_obj_free(kube_intern *in, kube_meta *obj);

/* Borrowed metadata.namespace ("" when absent), .name and .resourceVersion
 * ("" when absent) of a JSON object, without decoding it. PRD_EINVAL when
 * there is no metadata.name string. */
int kube_json_meta(json_object *obj, const char **ns, const char **name, const char **rv);

/* "ns/name", or "name" for cluster-scoped objects (ns ""), into buf; false
 * if it did not fit. */
bool kube_meta_key(const kube_meta *m, char *buf, size_t n);

/* Checked casts: NULL unless m is of that kind. */
const kube_node *kube_as_node(const kube_meta *m);
const kube_pod *kube_as_pod(const kube_meta *m);
const kube_podtemplate *kube_as_podtemplate(const kube_meta *m);
const kube_provreq *kube_as_provreq(const kube_meta *m);
const kube_resourcepool *kube_as_resourcepool(const kube_meta *m);
const kube_configmap *kube_as_configmap(const kube_meta *m);
const kube_lease *kube_as_lease(const kube_meta *m);
const kube_provclass *kube_as_provclass(const kube_meta *m);
/* Any of the four resource.k8s.io kinds. */
const kube_draobj *kube_as_draobj(const kube_meta *m);

/* Lookups in the small arrays above (linear; they hold a handful). */
const char *kube_kv_get(const kube_kv *kv, size_t n, const char *key);
const qty *kube_res_get(const kube_res *r, size_t n, const char *name);
/* The condition of `type`, or NULL. */
const kube_condition *kube_provreq_condition(const kube_provreq *pr, const char *type);

/* ------------------------------------------- internal to the decoders */

/* Decoding context: the table, the error sink and the object's identity
 * for messages. */
typedef struct kube__dctx {
	kube_intern *in;
	prd_err *err;
	const char *kind;
	const char *ns;
	const char *name;
} kube__dctx;

int kube__fail(kube__dctx *c, int code, const char *path, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Child `key` of object o as the given type; *out NULL when absent or
 * null; PRD_EINVAL (with a message naming path.key) for another type. */
int kube__obj(kube__dctx *c, json_object *o, const char *key, const char *path, json_object **out);
int kube__arr(kube__dctx *c, json_object *o, const char *key, const char *path, json_object **out);
int kube__str(kube__dctx *c, json_object *o, const char *key, const char *path, const char **out);
int kube__int(kube__dctx *c, json_object *o, const char *key, const char *path, int64_t *out, bool *present);
int kube__bool(kube__dctx *c, json_object *o, const char *key, const char *path, bool *out);
int kube__time(kube__dctx *c, json_object *o, const char *key, const char *path, int64_t *out);
/* Intern the string child `key` (NULL when absent). */
int kube__istr(kube__dctx *c, json_object *o, const char *key, const char *path, const char **out);
/* A string→string map as interned pairs. keep (may be NULL) filters keys. */
int kube__kvs(kube__dctx *c, json_object *map, const char *path, bool (*keep)(const char *key),
	      kube_kv **out, uint16_t *n);
/* A name→quantity map as interned resources. */
int kube__res(kube__dctx *c, json_object *map, const char *path, kube_res **out, uint16_t *n);
/* Parse one quantity value (string or JSON number). */
int kube__qty(kube__dctx *c, json_object *v, const char *path, qty *out);
/* Decode metadata into m (kind set by the caller); namespaced kinds must
 * carry a namespace. Fills c->ns/c->name for later messages. */
int kube__meta(kube__dctx *c, json_object *obj, bool namespaced, kube_meta *m);
void kube__meta_free(kube_intern *in, kube_meta *m);
void kube__kvs_free(kube_intern *in, kube_kv *kv, size_t n);
void kube__res_free(kube_intern *in, kube_res *r, size_t n);
/* Parse a taint effect name; ALL for "" only when allow_all. */
int kube__effect(kube__dctx *c, const char *s, bool allow_all, const char *path, uint8_t *out);

/* The text decoders alone (decode_text.c): 0 with *out, or KUBE_JS_BAIL
 * (jscan.h) when json-c has to decide; kube_decode_text() wraps them.
 * Exposed so tests can check a canonical object never needs json-c. */
int kube__decode_text_direct(kube_kind kind, const char *json, size_t len, int max_depth, kube_intern *in,
			     kube_meta **out);

/* Shared arrays ("blobs") in an intern table: one read-only copy of each
 * distinct run of bytes, counted like the strings and never equal to one.
 * kube__blob_get returns the shared copy of the n bytes at p with one more
 * reference (NULL when out of memory); *had is true when an equal blob was
 * held already. What the bytes refer to (interned strings) is the blob's
 * creator's to hand over: with *had false the blob now owns the
 * references p held, with *had true the caller drops its own.
 * kube__blob_put drops one reference and returns true when it was the
 * last: the blob has left the table, and the caller releases what its
 * bytes refer to, then frees it with kube__blob_free. */
const void *kube__blob_get(kube_intern *t, const void *p, size_t n, bool *had);
bool kube__blob_put(kube_intern *t, const void *p);
void kube__blob_free(const void *p);
/* The same, and kube_intern_put, inside one hold of the table's lock
 * (a pod's arrays and their strings in one hold instead of one each). */
void kube__intern_lock(kube_intern *t);
void kube__intern_unlock(kube_intern *t);
const void *kube__blob_get_locked(kube_intern *t, const void *p, size_t n, bool *had);
bool kube__blob_put_locked(kube_intern *t, const void *p);
void kube__intern_put_locked(kube_intern *t, const char *s);

/* A decoded pod's labels, node selector, requests and tolerations
 * replaced by shared arrays (pods of one workload carry the same ones:
 * on a large cluster these arrays were a third of the pod cache), each
 * normalised first so that equal contents are equal bytes. An array that
 * cannot be shared (out of memory) stays the pod's own. Call once, on a
 * pod that decoded successfully; kube__free_pod releases either kind. */
#define KUBE__POD_SHARED_LABELS 1u
#define KUBE__POD_SHARED_SELECTOR 2u
#define KUBE__POD_SHARED_REQUESTS 4u
#define KUBE__POD_SHARED_TOLERATIONS 8u
void kube__pod_share(kube_intern *in, kube_pod *pod);
/* Drop every reference a pod holds in the table (its interned strings
 * and those four arrays, shared or not) in one hold of the table's lock;
 * kube__free_pod then frees what the pod owns alone. */
void kube__pod_release(kube_intern *in, kube_pod *pod);

int kube__decode_node(kube__dctx *c, json_object *obj, kube_meta **out);
int kube__decode_pod(kube__dctx *c, json_object *obj, kube_meta **out);
int kube__decode_podtemplate(kube__dctx *c, json_object *obj, kube_meta **out);
int kube__decode_provreq(kube__dctx *c, json_object *obj, kube_meta **out);
int kube__decode_resourcepool(kube__dctx *c, json_object *obj, kube_meta **out);
int kube__decode_configmap(kube__dctx *c, json_object *obj, kube_meta **out);
int kube__decode_lease(kube__dctx *c, json_object *obj, kube_meta **out);
void kube__free_node(kube_intern *in, kube_meta *m);
void kube__free_pod(kube_intern *in, kube_meta *m);
void kube__free_podtemplate(kube_intern *in, kube_meta *m);
int kube__decode_draobj(kube__dctx *c, kube_kind kind, json_object *obj, kube_meta **out);
void kube__free_draobj(kube_intern *in, kube_meta *m);
void kube__free_provreq(kube_intern *in, kube_meta *m);
kube_meta *kube__clone_provreq(kube_intern *in, const kube_meta *m);
void kube__free_resourcepool(kube_intern *in, kube_meta *m);
void kube__free_configmap(kube_intern *in, kube_meta *m);
void kube__free_lease(kube_intern *in, kube_meta *m);
int kube__decode_provclass(kube__dctx *c, json_object *obj, kube_meta **out);
void kube__free_provclass(kube_intern *in, kube_meta *m);

#endif
