/* The DST's shipped-driver profiles (--driver kwok|clusterapi|karpenter):
 * each replica loads the driver's built module (cloud/NAME/.libs/NAME.so)
 * through the production loader, with a host whose kube_request is this
 * replica's way to the in-memory API (drv_request), and simulated
 * controllers for what the driver drives move the world on the simulated
 * clock (world_progress):
 *  - kwok: the driver creates and deletes Node objects itself; kwok's own
 *    controller makes them Ready later (or never: a Node that fails);
 *  - clusterapi and karpenter: see their sections below.
 *
 * The record (dst.g[].v, as for the abstract cloud) is kept from what the
 * API shows the driver's requests did, never from the driver's or the
 * controller's word: who created each Node, the owner mark the creating
 * request carried (the plan), whether the creator's lease was valid when
 * the request took effect and whether its fence said no when it was
 * decided. The oracle (oracle.c) judges from that record and the API.
 *
 * The drivers start threads only for parallel Node creates (kwok's
 * createParallelism, set to 1 here: no thread) and for a separate
 * management cluster (clusterapi's managementKubeconfig, not set here);
 * everything else runs on the calling controller's thread, so a crash or a
 * stall point inside a driver's request unwinds or pauses the one thread
 * there is. kwok's Node names come from its nameSeed (a seed per replica
 * and process), not getrandom(). */
#include "config.h"
#include "dst.h"
#include "driver/host_kube.h"
#include "util/yamljson.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KWOK_CM "dst-kwok-groups"

static bool loading; /* a driver's init: its requests are not faulted */

const char *profile_name(int profile)
{
	switch(profile) {
	case PROF_KWOK:
		return "kwok";
	case PROF_CAPI:
		return "clusterapi";
	case PROF_KARP:
		return "karpenter";
	default:
		return "abstract";
	}
}

static const char *jstr(json_object *o, const char *k)
{
	json_object *v = NULL;
	if(!o || !json_object_object_get_ex(o, k, &v) || !json_object_is_type(v, json_type_string))
		return NULL;
	return json_object_get_string(v);
}

static json_object *jobj(json_object *o, const char *k)
{
	json_object *v = NULL;
	return o && json_object_object_get_ex(o, k, &v) ? v : NULL;
}

static bool starts(const char *s, const char *prefix)
{
	return !strncmp(s, prefix, strlen(prefix));
}

/* ------------------------------------------------------- the record */

static inst *new_record(grp *g, const char *obj, int creator)
{
	inst *x;
	if(g->n >= MAXI)
		return NULL;
	x = &g->v[g->n++];
	memset(x, 0, sizeof(*x));
	snprintf(x->obj, sizeof(x->obj), "%s", obj);
	x->created_ns = now_ns();
	x->creator = creator;
	x->lease_ok = true;
	x->appeared = true;
	g->target++;
	return x;
}

static inst *record_of(const char *obj, grp **gout)
{
	size_t gi, i;
	for(gi = 0; gi < NGALL; gi++)
		for(i = 0; i < dst.g[gi].n; i++)
			if(!dst.g[gi].v[i].gone && !strcmp(dst.g[gi].v[i].obj, obj)) {
				*gout = &dst.g[gi];
				return &dst.g[gi].v[i];
			}
	return NULL;
}

static void record_gone(grp *g, inst *x)
{
	x->gone = true;
	g->target--;
}

/* ------------------------------------------------------------- kwok */

/* A Node of group g, Ready or not, with the kwok annotation and the
 * group label (and an owner mark when `owner`), as JSON text. */
static void kwok_node_json(const grp *g, const char *name, bool ready, char *out, size_t len)
{
	snprintf(out, len,
		 "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"%s\",\"labels\":"
		 "{\"kubernetes.io/hostname\":\"%s\",\"provreqd.io/node-group\":\"%s\",\"type\":\"kwok\"},"
		 "\"annotations\":{\"kwok.x-k8s.io/node\":\"fake\"}},\"status\":{\"allocatable\":{\"cpu\":\"%s\","
		 "\"memory\":\"32Gi\",\"pods\":\"110\"},\"capacity\":{\"cpu\":\"%s\",\"memory\":\"32Gi\",\"pods\":\"110\"}%s}}",
		 name, name, g->id, g->cpu, g->cpu, ready ? ",\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]" : "");
}

static void kwok_setup(void)
{
	char y[2048], node[1024], name[48];
	size_t gi;
	int k, off = 0;
	off += snprintf(y + off, sizeof(y) - (size_t)off, "metadata: {name: " KWOK_CM "}\ndata:\n");
	for(gi = 0; gi < NGROUPS; gi++)
		off += snprintf(y + off, sizeof(y) - (size_t)off,
				"  %s.yaml: |\n    apiVersion: v1\n    kind: Node\n    metadata:\n      name: %s\n"
				"      annotations: {provreqd.io/min-size: \"0\", provreqd.io/max-size: \"%d\"}\n"
				"      labels: {type: kwok}\n    status:\n"
				"      capacity: {cpu: \"%s\", memory: 32Gi, pods: \"110\"}\n"
				"      allocatable: {cpu: \"%s\", memory: 32Gi, pods: \"110\"}\n",
				dst.g[gi].id, dst.g[gi].id, dst.g[gi].max, dst.g[gi].cpu, dst.g[gi].cpu);
	post("/api/v1/namespaces/" DST_NS "/configmaps", y);
	/* Nodes there at the start: some Ready, maybe one that never was. */
	for(gi = 0; gi < NGROUPS; gi++) {
		grp *g = &dst.g[gi];
		int running = (int)rnd_in(0, 2), failed = pct(30);
		for(k = 0; k < running + failed; k++) {
			inst *x;
			snprintf(name, sizeof(name), "%s-s%d", g->id, ++dst.seq);
			kwok_node_json(g, name, k < running, node, sizeof(node));
			if(post("/api/v1/nodes", node) || !(x = new_record(g, name, BY_START)))
				continue;
			snprintf(x->id, sizeof(x->id), "kwok://%s", name);
			snprintf(x->node, sizeof(x->node), "%s", name);
			x->ready = k < running;
			if(!x->ready)
				x->errclass = PRD_CLOUD_ERRCLASS_OTHER;
		}
	}
}

/* A Node the driver created (the request's body as sent; the API took
 * it): recorded as r's, for the plan its owner mark names. */
static void kwok_created(replica *r, json_object *node, bool lease_ok, bool fenced)
{
	json_object *md = jobj(node, "metadata"), *labels = jobj(md, "labels");
	const char *name = jstr(md, "name"), *gid = jstr(labels, "provreqd.io/node-group");
	const char *owner = jstr(labels, "provreqd.io/owner");
	grp *g = gid ? group_of(gid) : NULL;
	inst *x;
	if(!name || !g) {
		violation("(i) replica %s created Node %s of no group this world has (%s)", r->name, name ? name : "?",
			  gid ? gid : "no group label");
		return;
	}
	if(!(x = new_record(g, name, r->idx)))
		return;
	snprintf(x->id, sizeof(x->id), "kwok://%s", name);
	snprintf(x->node, sizeof(x->node), "%s", name);
	snprintf(x->owner, sizeof(x->owner), "%s", owner ? owner : "");
	if(owner)
		snprintf(x->plan, sizeof(x->plan), "%s", owner);
	else
		api_increasing(r, g->id, 1, x->plan, sizeof(x->plan));
	x->lease_ok = lease_ok;
	x->fenced = fenced;
	x->made_pass = r->in_pass ? r->pass_seq : -1;
	if(dst.faults && pct(dst.p_inst_fail))
		x->errclass = PRD_CLOUD_ERRCLASS_OTHER; /* kwok never makes it Ready */
	else
		x->t_register = now_ns() + rnd_in(2, 90) * SEC;
	vlog("kwok: %s created Node %s of %s for %s%s%s%s", r->name, name, g->id, x->plan[0] ? x->plan : "no plan",
	     lease_ok ? "" : " (its lease had expired)", fenced ? " (decided past its renew deadline)" : "",
	     x->errclass ? " (it will never be Ready)" : "");
	judge_increase(r, g, x->plan, 1, lease_ok, fenced);
}

static void kwok_deleted(replica *r, const char *name)
{
	grp *g = NULL;
	inst *x = record_of(name, &g);
	if(!x)
		return;
	vlog("kwok: %s deleted Node %s of %s", r->name, name, g->id);
	/* An atomic increase that could not make all its Nodes deletes
	 * those it made before it returns: its own call's part, undone in
	 * the same pass of the same process. */
	if(x->creator == r->idx && r->in_pass && x->made_pass == r->pass_seq)
		x->undone = true;
	else
		judge_delete(r, g, x, "deleted");
	record_gone(g, x);
}

/* kwok's own controller: a Node becomes Ready when its time comes. */
static void kwok_progress(void)
{
	int64_t now = now_ns();
	size_t gi, i;
	for(gi = 0; gi < NGALL; gi++)
		for(i = 0; i < dst.g[gi].n; i++) {
			inst *x = &dst.g[gi].v[i];
			char path[128];
			long st = 0;
			char *resp = NULL;
			size_t rl = 0;
			static const char ready[] = "{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}";
			if(x->gone || x->ready || x->errclass || now < x->t_register)
				continue;
			snprintf(path, sizeof(path), "/api/v1/nodes/%s/status", x->obj);
			raw_api(NULL, "PATCH", path, "application/merge-patch+json", ready, sizeof(ready) - 1, &st, &resp, &rl);
			free(resp);
			x->ready = true;
		}
}

/* cluster-autoscaler (or a person) on the same groups: Nodes of the
 * group without an owner mark, at most two per group; some deleted or
 * replaced later. */
static void kwok_outside(void)
{
	grp *g = &dst.g[rnd_in(0, NGROUPS - 1)];
	inst *own[MAXI];
	size_t i, n = 0;
	int op = (int)rnd_in(0, 2);
	char node[1024], name[48], path[128];
	for(i = 0; i < g->n; i++)
		if(g->v[i].creator == BY_OUTSIDE && !g->v[i].gone)
			own[n++] = &g->v[i];
	if(n && op) {
		inst *x = own[rnd_in(0, (int64_t)n - 1)];
		prd_err e;
		if(x->ready)
			room_lost(x->node);
		snprintf(path, sizeof(path), "/api/v1/nodes/%s", x->obj);
		kube_api_call(&dst.raw_api, "DELETE", path, NULL, NULL, NULL, NULL, &e);
		record_gone(g, x);
		vlog("outside: deleted Node %s of %s", x->obj, g->id);
		n--;
		if(op == 1)
			return;
	}
	if(n >= 2)
		return;
	{
		inst *x;
		snprintf(name, sizeof(name), "%s-o%d", g->id, ++dst.seq);
		kwok_node_json(g, name, false, node, sizeof(node));
		if(post("/api/v1/nodes", node) || !(x = new_record(g, name, BY_OUTSIDE)))
			return;
		snprintf(x->id, sizeof(x->id), "kwok://%s", name);
		snprintf(x->node, sizeof(x->node), "%s", name);
		x->t_register = now_ns() + rnd_in(2, 60) * SEC;
		vlog("outside: created Node %s of %s", name, g->id);
	}
}


/* ------------------------------------------------------- clusterapi */

/* Cluster API's controllers as the driver meets them: each group is a
 * MachineDeployment (the driver's group id "MachineDeployment/capi/NAME")
 * with one MachineSet; the MachineSet controller makes Machines for
 * replicas no Machine stands for yet (later, one by one), takes the
 * newest Machines away when replicas drop below the Machines there are
 * (those marked cluster.x-k8s.io/delete-machine first, then failed ones);
 * the infrastructure gives a Machine its providerID later and its Node
 * registers later still (or the Machine fails); a MachineHealthCheck
 * deletes a failed Machine and the MachineSet makes its replacement.
 *
 * The record: an increase of replicas by a replica's write is recorded as
 * that many requested instances of that replica, for the plan the API
 * shows increasing on the group (api_increasing: Cluster API carries no
 * token on a scale call); a drop is judged against the replica whose write
 * made it, as the MachineSet takes Machines away. A MachineHealthCheck's
 * replacement is recorded as the Machine it replaces was (a plan's stays
 * the plan's; one of a Machine there at the start or the outside actor's
 * is the outside actor's, which provreqd must never delete). A mark the
 * driver puts on a Machine (provreqd.io/owner) that the record does not
 * bear out is a violation (xi). */
#define CAPI_NS "capi"
#define CAPI_API "/apis/cluster.x-k8s.io/v1beta1/namespaces/" CAPI_NS
#define CAPI_MIN "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size"
#define CAPI_MAX "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size"
#define CAPI_DEL "cluster.x-k8s.io/delete-machine"

static const kube_resource CAPI_MDS = {"cluster.x-k8s.io", "v1beta1", "machinedeployments", "MachineDeployment", true};
static const kube_resource CAPI_MSS = {"cluster.x-k8s.io", "v1beta1", "machinesets", "MachineSet", true};
static const kube_resource CAPI_MACHINES = {"cluster.x-k8s.io", "v1beta1", "machines", "Machine", true};

static struct capi_world {
	int32_t replicas[NGROUPS];  /* the MachineDeployment's replicas as the MachineSet last acted on them */
	bool mhc;                   /* a MachineHealthCheck acts this seed */
	int64_t mhc_delay;
	char gid[NGROUPS][48];
} cw;

static const char *short_name(const grp *g)
{
	const char *s = strrchr(g->id, '/');
	return s ? s + 1 : g->id;
}

static int capi_gi(const grp *g)
{
	return (int)(g - dst.g);
}

static json_object *api_get(const char *path)
{
	long st = 0;
	char *resp = NULL;
	size_t rl = 0;
	json_object *o = NULL;
	if(raw_api(NULL, "GET", path, NULL, NULL, 0, &st, &resp, &rl) == 0 && resp)
		o = json_tokener_parse(resp);
	free(resp);
	return o;
}

static int api_send(const char *method, const char *path, const char *ct, const char *body)
{
	long st = 0;
	char *resp = NULL;
	size_t rl = 0;
	int rc = raw_api(NULL, method, path, ct, body, body ? strlen(body) : 0, &st, &resp, &rl);
	free(resp);
	return rc;
}

static int32_t md_replicas(const grp *g)
{
	char path[200];
	json_object *md, *r = NULL;
	int32_t n = -1;
	snprintf(path, sizeof(path), CAPI_API "/machinedeployments/%s", short_name(g));
	if(!(md = api_get(path)))
		return -1;
	if(json_object_object_get_ex(jobj(md, "spec"), "replicas", &r))
		n = (int32_t)json_object_get_int(r);
	else
		n = 0;
	json_object_put(md);
	return n;
}

static bool machine_marked_delete(const inst *x)
{
	char path[200];
	json_object *m;
	bool marked;
	snprintf(path, sizeof(path), CAPI_API "/machines/%s", x->obj);
	if(!(m = api_get(path)))
		return false;
	marked = jstr(jobj(jobj(m, "metadata"), "annotations"), CAPI_DEL) != NULL;
	json_object_put(m);
	return marked;
}

/* A requested instance (no Machine yet) of g, recorded as `creator`'s. */
static inst *capi_request_one(grp *g, int creator, const char *plan, bool lease_ok, bool fenced)
{
	inst *x;
	if(g->n >= MAXI)
		return NULL;
	x = &g->v[g->n++];
	memset(x, 0, sizeof(*x));
	x->creator = creator;
	x->lease_ok = lease_ok;
	x->fenced = fenced;
	snprintf(x->plan, sizeof(x->plan), "%s", plan ? plan : "");
	snprintf(x->id, sizeof(x->id), "(requested %d)", ++dst.seq);
	x->t_appear = now_ns() + rnd_in(0, 20) * SEC;
	g->target++;
	return x;
}

static void capi_remove(replica *by, grp *g, inst *x, const char *how)
{
	char path[200];
	if(by)
		judge_delete(by, g, x, how);
	if(x->appeared) {
		snprintf(path, sizeof(path), CAPI_API "/machines/%s", x->obj);
		api_send("DELETE", path, NULL, NULL);
		if(x->node[0]) {
			if(!by && x->ready)
				room_lost(x->node);
			snprintf(path, sizeof(path), "/api/v1/nodes/%s", x->node);
			api_send("DELETE", path, NULL, NULL);
		}
	}
	record_gone(g, x);
}

/* The MachineSet controller meets the MachineDeployment's replicas
 * (after a write by `by`, a replica, or NULL: anyone else): more replicas
 * are requested instances of whoever raised them; fewer cancel requested
 * ones (newest first) and then take Machines away (marked ones first,
 * then failed ones, then the newest). */
static void capi_sync(replica *by, grp *g, bool lease_ok, bool fenced)
{
	int gi = capi_gi(g);
	int32_t want = md_replicas(g), have = 0;
	size_t i;
	if(want < 0 || want == cw.replicas[gi])
		return;
	if(want > cw.replicas[gi]) {
		int32_t d = want - cw.replicas[gi];
		char plan[128] = "";
		if(by && by->call_owner[0])
			snprintf(plan, sizeof(plan), "%s", by->call_owner);
		else if(by)
			api_increasing(by, g->id, d, plan, sizeof(plan));
		vlog("capi: %s replicas %d -> %d by %s%s%s", g->id, cw.replicas[gi], want, by ? by->name : "outside",
		     plan[0] ? " for " : "", plan);
		for(i = 0; i < (size_t)d; i++)
			capi_request_one(g, by ? by->idx : BY_OUTSIDE, plan, lease_ok, fenced);
		if(by)
			judge_increase(by, g, plan, d, lease_ok, fenced);
		cw.replicas[gi] = want;
		return;
	}
	vlog("capi: %s replicas %d -> %d by %s", g->id, cw.replicas[gi], want, by ? by->name : "outside");
	cw.replicas[gi] = want;
	for(i = 0; i < g->n; i++)
		have += !g->v[i].gone;
	/* Requested instances are a count, not objects: those provreqd may
	 * cancel go first (newest first), then the rest. */
	for(int k = 0; k < 2; k++)
		for(i = g->n; i-- > 0 && have > want;)
			if(!g->v[i].gone && !g->v[i].appeared && (k || (by && may_delete(&g->v[i])))) {
				capi_remove(by, g, &g->v[i], "cancelled by a replicas decrease");
				have--;
			}
	for(int pass = 0; pass < 3 && have > want; pass++)
		for(i = g->n; i-- > 0 && have > want;) {
			inst *x = &g->v[i];
			if(x->gone || !x->appeared)
				continue;
			if((pass == 0 && !machine_marked_delete(x)) || (pass == 1 && !x->errclass))
				continue;
			capi_remove(by, g, x, pass == 0 ? "deleted (marked for deletion, replicas lowered)"
							: "deleted by the MachineSet after replicas dropped");
			have--;
		}
}

static void capi_machine_json(const grp *g, const char *name, char *out, size_t len)
{
	snprintf(out, len,
		 "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"" CAPI_NS "\",\"labels\":{\"cluster.x-k8s.io/deployment-name\":"
		 "\"%s\",\"cluster.x-k8s.io/set-name\":\"%s-ms\",\"cluster.x-k8s.io/cluster-name\":\"c1\"},"
		 "\"ownerReferences\":[{\"apiVersion\":\"cluster.x-k8s.io/v1beta1\",\"kind\":\"MachineSet\",\"name\":\"%s-ms\","
		 "\"uid\":\"ms-%s\",\"controller\":true}]},\"spec\":{\"clusterName\":\"c1\"}}",
		 name, short_name(g), short_name(g), short_name(g), short_name(g));
}

/* The Machine appears (the MachineSet made it). */
static void capi_appear(grp *g, inst *x)
{
	char body[1024];
	snprintf(x->obj, sizeof(x->obj), "%s-ms-%d", short_name(g), ++dst.seq);
	capi_machine_json(g, x->obj, body, sizeof(body));
	if(api_send("POST", CAPI_API "/machines", "application/json", body))
		return; /* tried again next time */
	x->appeared = true;
	x->created_ns = now_ns();
	snprintf(x->id, sizeof(x->id), "clusterapi://" CAPI_NS "/%s", x->obj);
	if(dst.faults && pct(dst.p_inst_fail)) {
		char path[200];
		x->errclass = PRD_CLOUD_ERRCLASS_OUT_OF_RESOURCES;
		x->t_gone = now_ns() + rnd_in(10, 60) * SEC; /* when the failure shows */
		snprintf(path, sizeof(path), CAPI_API "/machines/%s/status", x->obj);
		api_send("PATCH", path, "application/merge-patch+json",
			 "{\"status\":{\"phase\":\"Failed\",\"failureReason\":\"InsufficientCapacity\","
			 "\"failureMessage\":\"simulated: no capacity in the zone\"}}");
	} else {
		x->t_register = now_ns() + rnd_in(5, 120) * SEC;
	}
}

static void capi_register(grp *g, inst *x)
{
	char body[1200], path[200], pid[100];
	snprintf(x->node, sizeof(x->node), "%s-n%d", short_name(g), ++dst.seq);
	snprintf(pid, sizeof(pid), "sim://%s/%s", short_name(g), x->obj);
	snprintf(path, sizeof(path), CAPI_API "/machines/%s", x->obj);
	snprintf(body, sizeof(body), "{\"spec\":{\"providerID\":\"%s\"}}", pid);
	api_send("PATCH", path, "application/merge-patch+json", body);
	snprintf(body, sizeof(body),
		 "{\"metadata\":{\"name\":\"%s\",\"labels\":{\"kubernetes.io/hostname\":\"%s\",\"group\":\"%s\"},"
		 "\"annotations\":{\"cluster.x-k8s.io/machine\":\"%s\",\"cluster.x-k8s.io/cluster-namespace\":\"" CAPI_NS "\"}},"
		 "\"spec\":{\"providerID\":\"%s\"},\"status\":{\"allocatable\":{\"cpu\":\"%s\",\"memory\":\"32Gi\","
		 "\"pods\":\"110\"},\"capacity\":{\"cpu\":\"%s\",\"memory\":\"32Gi\",\"pods\":\"110\"},"
		 "\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}",
		 x->node, x->node, short_name(g), x->obj, pid, g->cpu, g->cpu);
	api_send("POST", "/api/v1/nodes", "application/json", body);
	snprintf(path, sizeof(path), CAPI_API "/machines/%s/status", x->obj);
	snprintf(body, sizeof(body), "{\"status\":{\"phase\":\"Running\",\"nodeRef\":{\"kind\":\"Node\",\"name\":\"%s\"}}}",
		 x->node);
	api_send("PATCH", path, "application/merge-patch+json", body);
	snprintf(x->id, sizeof(x->id), "%s", pid);
	x->ready = true;
}

static void capi_setup(void)
{
	char body[2048], ns[64];
	size_t gi;
	memset(&cw, 0, sizeof(cw));
	memapi_add_kind(dst.m, &CAPI_MDS, MEMAPI_STATUS | MEMAPI_GENERATION | MEMAPI_SCALE);
	memapi_add_kind(dst.m, &CAPI_MSS, MEMAPI_STATUS | MEMAPI_GENERATION | MEMAPI_SCALE);
	memapi_add_kind(dst.m, &CAPI_MACHINES, MEMAPI_STATUS | MEMAPI_GENERATION);
	snprintf(ns, sizeof(ns), "metadata: {name: %s}\n", CAPI_NS);
	post("/api/v1/namespaces", ns);
	cw.mhc = pct(70);
	cw.mhc_delay = rnd_in(10, 120) * SEC;
	for(gi = 0; gi < NGROUPS; gi++) {
		grp *g = &dst.g[gi];
		int running = (int)rnd_in(0, 2), failed = pct(30), k;
		snprintf(cw.gid[gi], sizeof(cw.gid[gi]), "MachineDeployment/" CAPI_NS "/%s", g->id);
		g->id = cw.gid[gi];
		snprintf(body, sizeof(body),
			 "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"" CAPI_NS "\",\"annotations\":{\"" CAPI_MIN "\":\"0\",\""
			 CAPI_MAX "\":\"%d\",\"capacity.cluster-autoscaler.kubernetes.io/cpu\":\"%s\","
			 "\"capacity.cluster-autoscaler.kubernetes.io/memory\":\"32Gi\"}},"
			 "\"spec\":{\"clusterName\":\"c1\",\"replicas\":%d,\"selector\":{\"matchLabels\":"
			 "{\"cluster.x-k8s.io/deployment-name\":\"%s\"}},\"template\":{\"metadata\":{\"labels\":"
			 "{\"cluster.x-k8s.io/deployment-name\":\"%s\"}},\"spec\":{\"clusterName\":\"c1\"}}}}",
			 short_name(g), g->max, g->cpu, running + failed, short_name(g), short_name(g));
		api_send("POST", CAPI_API "/machinedeployments", "application/json", body);
		snprintf(body, sizeof(body),
			 "{\"metadata\":{\"name\":\"%s-ms\",\"namespace\":\"" CAPI_NS "\",\"ownerReferences\":[{\"apiVersion\":"
			 "\"cluster.x-k8s.io/v1beta1\",\"kind\":\"MachineDeployment\",\"name\":\"%s\",\"uid\":\"md-%s\","
			 "\"controller\":true}]},\"spec\":{\"clusterName\":\"c1\",\"replicas\":%d,\"selector\":{\"matchLabels\":"
			 "{\"cluster.x-k8s.io/set-name\":\"%s-ms\"}}}}",
			 short_name(g), short_name(g), short_name(g), running + failed, short_name(g));
		api_send("POST", CAPI_API "/machinesets", "application/json", body);
		cw.replicas[gi] = running + failed;
		for(k = 0; k < running + failed; k++) {
			inst *x = capi_request_one(g, BY_START, NULL, true, false);
			if(!x)
				continue;
			g->target--; /* capi_request_one counts it; the start's are in replicas already */
			g->target++;
			x->t_register = 0;
			capi_appear(g, x);
			if(k < running) {
				x->errclass = 0;
				capi_register(g, x);
			} else if(!x->errclass) {
				char path[200];
				x->errclass = PRD_CLOUD_ERRCLASS_OTHER;
				x->t_gone = now_ns();
				snprintf(path, sizeof(path), CAPI_API "/machines/%s/status", x->obj);
				api_send("PATCH", path, "application/merge-patch+json",
					 "{\"status\":{\"phase\":\"Failed\",\"failureReason\":\"CreateError\","
					 "\"failureMessage\":\"simulated: the instance did not boot\"}}");
			}
		}
	}
}

static void capi_progress(void)
{
	int64_t now = now_ns();
	size_t gi, i, n;
	for(gi = 0; gi < NGROUPS; gi++) {
		grp *g = &dst.g[gi];
		n = g->n;
		for(i = 0; i < n; i++) {
			inst *x = &g->v[i];
			if(x->gone)
				continue;
			if(!x->appeared) {
				if(now >= x->t_appear)
					capi_appear(g, x);
				continue;
			}
			if(!x->errclass && !x->ready && now >= x->t_register)
				capi_register(g, x);
			/* The MachineHealthCheck: a failed Machine is deleted
			 * and the MachineSet makes a replacement, recorded as
			 * the Machine it replaces was. */
			if(cw.mhc && x->errclass && now >= x->t_gone + cw.mhc_delay && g->n < MAXI) {
				int creator = x->creator >= 0 && x->creator < NREP ? x->creator : BY_OUTSIDE;
				inst *y;
				char plan[128];
				bool lease_ok = x->lease_ok;
				snprintf(plan, sizeof(plan), "%s", creator == BY_OUTSIDE ? "" : x->plan);
				vlog("capi: a MachineHealthCheck replaces failed Machine %s of %s", x->obj, g->id);
				capi_remove(NULL, g, x, "deleted by a MachineHealthCheck");
				if((y = capi_request_one(g, creator, plan, lease_ok, false))) {
					y->t_appear = now + rnd_in(1, 15) * SEC;
					y->mhc = creator == BY_OUTSIDE;
				}
				x = &g->v[i];
			}
		}
	}
}

/* cluster-autoscaler on the same MachineDeployments: raises replicas by
 * one or two (at most two of its own per group), or takes one of its own
 * Machines away (marked, then replicas lowered), only when the MachineSet
 * has made every Machine replicas ask for (else the drop would cancel
 * someone's requested one). */
static void capi_outside(void)
{
	grp *g = &dst.g[rnd_in(0, NGROUPS - 1)];
	inst *own[MAXI];
	size_t i, n = 0;
	int pending = 0;
	char path[200], body[200];
	int32_t cur = md_replicas(g);
	for(i = 0; i < g->n; i++) {
		if(g->v[i].gone)
			continue;
		pending += !g->v[i].appeared;
		if(g->v[i].creator == BY_OUTSIDE && g->v[i].appeared && !g->v[i].plan[0])
			own[n++] = &g->v[i];
	}
	if(cur < 0)
		return;
	capi_sync(NULL, g, true, false); /* anything a replica's write left unsynced */
	if(n && pct(50) && !pending) {
		inst *x = own[rnd_in(0, (int64_t)n - 1)];
		snprintf(path, sizeof(path), CAPI_API "/machines/%s", x->obj);
		api_send("PATCH", path, "application/merge-patch+json",
			 "{\"metadata\":{\"annotations\":{\"" CAPI_DEL "\":\"2026-01-01T00:00:00Z\"}}}");
		snprintf(path, sizeof(path), CAPI_API "/machinedeployments/%s/scale", short_name(g));
		snprintf(body, sizeof(body), "{\"spec\":{\"replicas\":%d}}", cur - 1);
		api_send("PATCH", path, "application/merge-patch+json", body);
		capi_sync(NULL, g, true, false);
		return;
	}
	if(n >= 2 || cur + 1 > g->max)
		return;
	snprintf(path, sizeof(path), CAPI_API "/machinedeployments/%s/scale", short_name(g));
	snprintf(body, sizeof(body), "{\"spec\":{\"replicas\":%d}}", cur + 1);
	api_send("PATCH", path, "application/merge-patch+json", body);
	capi_sync(NULL, g, true, false);
}

/* A write of the driver's to the Cluster API objects. */
static void capi_written(replica *r, const char *method, const char *path, json_object *sent, bool lease_ok,
			 bool fenced)
{
	size_t gi;
	(void)method;
	if(!starts(path, CAPI_API))
		return;
	if(starts(path, CAPI_API "/machinedeployments/")) {
		const char *name = path + strlen(CAPI_API "/machinedeployments/");
		for(gi = 0; gi < NGROUPS; gi++) {
			size_t len = strlen(short_name(&dst.g[gi]));
			if(!strncmp(name, short_name(&dst.g[gi]), len) && (!name[len] || name[len] == '/' || name[len] == '?'))
				capi_sync(r, &dst.g[gi], lease_ok, fenced);
		}
		return;
	}
	if(starts(path, CAPI_API "/machines/") && sent) {
		/* (xi) A mark: the record must bear it out. */
		const char *mark = jstr(jobj(jobj(sent, "metadata"), "labels"), "provreqd.io/owner");
		char name[128];
		grp *g = NULL;
		inst *x;
		snprintf(name, sizeof(name), "%.*s", (int)strcspn(path + strlen(CAPI_API "/machines/"), "/?"),
			 path + strlen(CAPI_API "/machines/"));
		if(!mark || !(x = record_of(name, &g)))
			return;
		if(x->creator < 0 || x->creator >= NREP || strcmp(x->plan, mark))
			violation("(xi) replica %s marked Machine %s of %s as plan %s's, which %s%s%s", r->name, name,
				  g->id, mark,
				  x->creator == BY_START ? "was there at the start"
				  : x->creator == BY_OUTSIDE ? "the outside actor (or a MachineHealthCheck) made"
							      : "the record gives to plan ",
				  x->creator >= 0 && x->creator < NREP ? (x->plan[0] ? x->plan : "(none)") : "", "");
	}
}

/* -------------------------------------------------------- karpenter */

/* Karpenter as the driver meets it: two NodePools (ga, gb), each allowing
 * one instance type, so each is one node group ("ga/c-4/zone-a/on-demand").
 * The driver creates NodeClaims (owner label, do-not-disrupt); Karpenter
 * launches them later (status Launched, a providerID), their Nodes
 * register later still (status.nodeName, Registered), or the launch fails
 * (Launched False, InsufficientCapacity) and Karpenter deletes the
 * NodeClaim after a while; Karpenter consolidates a registered NodeClaim
 * that does not say karpenter.sh/do-not-disrupt (an empty node, to
 * Karpenter: nothing here runs pods). Consolidating a Node a Provisioned,
 * unexpired request books is a violation (xii): the driver's hold was
 * lifted too early or never set. A consolidated instance of a plan stays
 * counted as the plan's (it held it; Karpenter took it back after). */
#define KARP_API "/apis/karpenter.sh/v1"

static const kube_resource KARP_POOLS = {"karpenter.sh", "v1", "nodepools", "NodePool", false};
static const kube_resource KARP_CLAIMS = {"karpenter.sh", "v1", "nodeclaims", "NodeClaim", false};

static struct karp_world {
	char gid[NGROUPS][48];
	char type[NGROUPS][16];
	bool consolidate;          /* Karpenter consolidates this seed */
	int64_t consolidate_after;
} kw;

static int karp_gi_of_pool(const char *pool)
{
	int gi;
	for(gi = 0; pool && gi < NGROUPS; gi++)
		if(!strncmp(dst.g[gi].id, pool, strlen(pool)) && dst.g[gi].id[strlen(pool)] == '/')
			return gi;
	return -1;
}

static void karp_pool_name(const grp *g, char *out, size_t len)
{
	snprintf(out, len, "%.*s", (int)strcspn(g->id, "/"), g->id);
}


static void karp_node_gone(inst *x)
{
	char path[200];
	if(!x->node[0])
		return;
	snprintf(path, sizeof(path), "/api/v1/nodes/%s", x->node);
	api_send("DELETE", path, NULL, NULL);
}

static bool karp_claim_held(const inst *x)
{
	char path[200];
	json_object *c;
	bool held;
	snprintf(path, sizeof(path), KARP_API "/nodeclaims/%s", x->obj);
	if(!(c = api_get(path)))
		return true;
	held = jstr(jobj(jobj(c, "metadata"), "annotations"), "karpenter.sh/do-not-disrupt") != NULL;
	json_object_put(c);
	return held;
}

/* Karpenter launches, registers, fails, deletes failed NodeClaims and
 * consolidates unheld ones, as their times come. */
static void karp_progress_now(void)
{
	int64_t now = now_ns();
	size_t gi, i;
	for(gi = 0; gi < NGROUPS; gi++) {
		grp *g = &dst.g[gi];
		char pool[16];
		karp_pool_name(g, pool, sizeof(pool));
		for(i = 0; i < g->n; i++) {
			inst *x = &g->v[i];
			char path[200], body[1400];
			if(x->gone)
				continue;
			if(x->errclass) {
				if(!x->appeared && now >= x->t_appear) {
					x->appeared = true;
					snprintf(path, sizeof(path), KARP_API "/nodeclaims/%s/status", x->obj);
					api_send("PATCH", path, "application/merge-patch+json",
						 "{\"status\":{\"conditions\":[{\"type\":\"Launched\",\"status\":\"False\","
						 "\"reason\":\"InsufficientCapacity\",\"message\":\"simulated: no capacity\"}]}}");
				} else if(x->appeared && now >= x->t_gone) {
					snprintf(path, sizeof(path), KARP_API "/nodeclaims/%s", x->obj);
					api_send("DELETE", path, NULL, NULL);
					vlog("karpenter: deleted NodeClaim %s, which could not launch", x->obj);
					record_gone(g, x);
				}
				continue;
			}
			if(!x->ready && now >= x->t_register) {
				snprintf(x->node, sizeof(x->node), "%s-n%d", pool, ++dst.seq);
				snprintf(body, sizeof(body),
					 "{\"metadata\":{\"name\":\"%s\",\"labels\":{\"kubernetes.io/hostname\":\"%s\","
					 "\"karpenter.sh/nodepool\":\"%s\",\"node.kubernetes.io/instance-type\":\"%s\","
					 "\"topology.kubernetes.io/zone\":\"zone-a\",\"karpenter.sh/capacity-type\":\"on-demand\"%s%s%s}},"
					 "\"spec\":{\"providerID\":\"kwok://%s\"},\"status\":{\"allocatable\":{\"cpu\":\"%s\","
					 "\"memory\":\"32Gi\",\"pods\":\"110\"},\"capacity\":{\"cpu\":\"%s\",\"memory\":\"32Gi\",\"pods\":"
					 "\"110\"},\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}",
					 x->node, x->node, pool, kw.type[gi], x->owner[0] ? ",\"provreqd.io/owner\":\"" : "",
					 x->owner, x->owner[0] ? "\"" : "", x->node, g->cpu, g->cpu);
				api_send("POST", "/api/v1/nodes", "application/json", body);
				snprintf(path, sizeof(path), KARP_API "/nodeclaims/%s/status", x->obj);
				snprintf(body, sizeof(body),
					 "{\"status\":{\"nodeName\":\"%s\",\"providerID\":\"kwok://%s\",\"conditions\":["
					 "{\"type\":\"Launched\",\"status\":\"True\",\"reason\":\"Launched\"},"
					 "{\"type\":\"Registered\",\"status\":\"True\",\"reason\":\"Registered\"}]}}",
					 x->node, x->node);
				api_send("PATCH", path, "application/merge-patch+json", body);
				x->appeared = x->ready = true;
				continue;
			}
			if(x->ready && kw.consolidate && now >= x->t_register + kw.consolidate_after && !karp_claim_held(x)) {
				const plan_rec *p = x->plan[0] ? ledger_find(x->plan) : NULL;
				/* The driver holds the NodeClaims it makes for the
				 * booking of the request they were made for; any other
				 * booking on a node (a check-capacity request's) is
				 * revoked by a consolidation, as on Karpenter's own
				 * nodes (room_lost). */
				if(x->creator >= 0 && x->creator < NREP && p && booked_by(x->node, p->req))
					violation("(xii) Karpenter consolidated NodeClaim %s (Node %s) of %s, made for request %s, "
						  "whose booking holds it: nothing held it (karpenter.sh/do-not-disrupt)", x->obj,
						  x->node, g->id, p->req);
				vlog("karpenter: consolidated NodeClaim %s (Node %s)", x->obj, x->node);
				room_lost(x->node);
				snprintf(path, sizeof(path), KARP_API "/nodeclaims/%s", x->obj);
				api_send("DELETE", path, NULL, NULL);
				karp_node_gone(x);
				/* A plan's instance within its delta stays counted as
				 * held; a surplus one (a late call's) is simply gone. */
				x->reclaimed = x->creator >= 0 && x->creator < NREP && p && plan_live(x->plan) <= p->delta;
				record_gone(g, x);
			}
		}
	}
}

static void karp_times(inst *x)
{
	if(dst.faults && pct(dst.p_inst_fail)) {
		x->errclass = PRD_CLOUD_ERRCLASS_OUT_OF_RESOURCES;
		x->t_appear = now_ns() + rnd_in(2, 30) * SEC;
		x->t_gone = x->t_appear + rnd_in(10, 90) * SEC;
	} else {
		x->t_register = now_ns() + rnd_in(5, 120) * SEC;
	}
}

/* A NodeClaim the driver created (its name from the API's answer, its
 * owner mark from the body sent). */
static void karp_created(replica *r, json_object *sent, const char *resp, bool lease_ok, bool fenced)
{
	json_object *made = resp ? json_tokener_parse(resp) : NULL;
	const char *name = jstr(jobj(made, "metadata"), "name");
	const char *pool = jstr(jobj(jobj(sent, "metadata"), "labels"), "karpenter.sh/nodepool");
	const char *owner = jstr(jobj(jobj(sent, "metadata"), "labels"), "provreqd.io/owner");
	int gi = karp_gi_of_pool(pool);
	grp *g;
	inst *x;
	if(!name || gi < 0) {
		violation("(i) replica %s created NodeClaim %s of no group this world has (pool %s)", r->name,
			  name ? name : "?", pool ? pool : "none");
		json_object_put(made);
		return;
	}
	g = &dst.g[gi];
	if(!(x = new_record(g, name, r->idx))) {
		json_object_put(made);
		return;
	}
	x->appeared = false;
	snprintf(x->id, sizeof(x->id), "%s", name);
	snprintf(x->owner, sizeof(x->owner), "%s", owner ? owner : "");
	if(owner)
		snprintf(x->plan, sizeof(x->plan), "%s", owner);
	else
		api_increasing(r, g->id, 1, x->plan, sizeof(x->plan));
	x->lease_ok = lease_ok;
	x->fenced = fenced;
	x->made_pass = r->in_pass ? r->pass_seq : -1;
	karp_times(x);
	vlog("karpenter: %s created NodeClaim %s of %s for %s%s%s", r->name, name, g->id, x->plan[0] ? x->plan : "no plan",
	     lease_ok ? "" : " (its lease had expired)", fenced ? " (decided past its renew deadline)" : "");
	json_object_put(made);
	judge_increase(r, g, x->plan, 1, lease_ok, fenced);
}

static void karp_deleted(replica *r, const char *name)
{
	grp *g = NULL;
	inst *x = record_of(name, &g);
	if(!x)
		return;
	vlog("karpenter: %s deleted NodeClaim %s of %s", r->name, name, g->id);
	if(x->creator == r->idx && r->in_pass && x->made_pass == r->pass_seq)
		x->undone = true;
	else
		judge_delete(r, g, x, "deleted");
	karp_node_gone(x);
	record_gone(g, x);
}

/* Karpenter's own NodeClaims for pods it schedules (no owner mark), at
 * most two per group; consolidation takes them back. */
static void karp_outside(void)
{
	grp *g = &dst.g[rnd_in(0, NGROUPS - 1)];
	size_t i, n = 0;
	char body[1024], name[48], pool[16];
	inst *x;
	int gi = (int)(g - dst.g);
	for(i = 0; i < g->n; i++)
		n += g->v[i].creator == BY_OUTSIDE && !g->v[i].gone;
	if(n >= 2)
		return;
	karp_pool_name(g, pool, sizeof(pool));
	snprintf(name, sizeof(name), "%s-k%d", pool, ++dst.seq);
	snprintf(body, sizeof(body),
		 "{\"metadata\":{\"name\":\"%s\",\"labels\":{\"karpenter.sh/nodepool\":\"%s\","
		 "\"node.kubernetes.io/instance-type\":\"%s\"}},\"spec\":{\"nodeClassRef\":{\"group\":"
		 "\"karpenter.kwok.sh\",\"kind\":\"KWOKNodeClass\",\"name\":\"default\"},\"requirements\":[]}}",
		 name, pool, kw.type[gi]);
	if(api_send("POST", KARP_API "/nodeclaims", "application/json", body) || !(x = new_record(g, name, BY_OUTSIDE)))
		return;
	x->appeared = false;
	snprintf(x->id, sizeof(x->id), "%s", name);
	karp_times(x);
	vlog("outside: Karpenter made NodeClaim %s of %s", name, g->id);
}

static void karp_setup(void)
{
	char body[2048], pool[16];
	size_t gi;
	memset(&kw, 0, sizeof(kw));
	memapi_add_kind(dst.m, &KARP_POOLS, MEMAPI_STATUS | MEMAPI_GENERATION);
	memapi_add_kind(dst.m, &KARP_CLAIMS, MEMAPI_STATUS | MEMAPI_GENERATION);
	kw.consolidate = pct(70);
	kw.consolidate_after = rnd_in(20, 180) * SEC;
	for(gi = 0; gi < NGROUPS; gi++) {
		grp *g = &dst.g[gi];
		int running = (int)rnd_in(0, 2), k;
		snprintf(pool, sizeof(pool), "%s", g->id);
		snprintf(kw.type[gi], sizeof(kw.type[gi]), "c-%s", g->cpu);
		snprintf(kw.gid[gi], sizeof(kw.gid[gi]), "%s/%s/zone-a/on-demand", pool, kw.type[gi]);
		g->id = kw.gid[gi];
		snprintf(body, sizeof(body),
			 "{\"metadata\":{\"name\":\"%s\",\"annotations\":{\"karpenter.sh/nodepool-hash\":\"h1\"}},"
			 "\"spec\":{\"template\":{\"spec\":{\"nodeClassRef\":{\"group\":\"karpenter.kwok.sh\",\"kind\":"
			 "\"KWOKNodeClass\",\"name\":\"default\"},\"requirements\":[{\"key\":\"node.kubernetes.io/instance-type\","
			 "\"operator\":\"In\",\"values\":[\"%s\"]},{\"key\":\"karpenter.sh/capacity-type\",\"operator\":\"In\","
			 "\"values\":[\"on-demand\"]},{\"key\":\"topology.kubernetes.io/zone\",\"operator\":\"In\",\"values\":"
			 "[\"zone-a\"]}]}},\"limits\":{\"cpu\":\"%d\"}}}",
			 pool, kw.type[gi], g->max * atoi(g->cpu));
		api_send("POST", KARP_API "/nodepools", "application/json", body);
		/* Nodes of Karpenter's own there at the start (its claims). */
		for(k = 0; k < running; k++) {
			char name[48], node[1024];
			inst *x;
			snprintf(name, sizeof(name), "%s-start-%d", pool, ++dst.seq);
			snprintf(body, sizeof(body),
				 "{\"metadata\":{\"name\":\"%s\",\"labels\":{\"karpenter.sh/nodepool\":\"%s\","
				 "\"node.kubernetes.io/instance-type\":\"%s\"}},\"spec\":{\"nodeClassRef\":{\"group\":"
				 "\"karpenter.kwok.sh\",\"kind\":\"KWOKNodeClass\",\"name\":\"default\"},\"requirements\":[]}}",
				 name, pool, kw.type[gi]);
			if(api_send("POST", KARP_API "/nodeclaims", "application/json", body) || !(x = new_record(g, name, BY_START)))
				continue;
			snprintf(x->id, sizeof(x->id), "%s", name);
			x->appeared = false;
			x->t_register = 0;
			(void)node;
		}
	}
	karp_progress_now();
}

/* ------------------------------------------------ the host's requests */

static int answer(long code, const char *reason, const char *msg, long *status, char **resp, size_t *resp_len,
		  prd_cloud_error *err, int rc)
{
	char body[256];
	snprintf(body, sizeof(body), "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"%s\",\"code\":%ld,"
		 "\"message\":\"%s\"}", reason, code, msg);
	*status = code;
	*resp = strdup(body);
	*resp_len = *resp ? strlen(*resp) : 0;
	err->code = rc;
	snprintf(err->message, sizeof(err->message), "%s", msg);
	return rc;
}

/* The profile's record of a write the API took. `sent` is the body as
 * the driver made it (before --no-owner-marks took the marks out). */
static void written(replica *r, const char *method, const char *path, json_object *sent, const char *resp,
		    bool lease_ok, bool fenced)
{
	if(dst.profile == PROF_KWOK) {
		if(!strcmp(method, "POST") && !strcmp(path, "/api/v1/nodes") && sent)
			kwok_created(r, sent, lease_ok, fenced);
		else if(!strcmp(method, "DELETE") && starts(path, "/api/v1/nodes/") && !strchr(path + 14, '/')) {
			char name[128];
			snprintf(name, sizeof(name), "%.*s", (int)strcspn(path + 14, "?"), path + 14);
			kwok_deleted(r, name);
		}
	} else if(dst.profile == PROF_CAPI) {
		capi_written(r, method, path, sent, lease_ok, fenced);
	} else if(dst.profile == PROF_KARP) {
		if(!strcmp(method, "POST") && !strcmp(path, KARP_API "/nodeclaims") && sent)
			karp_created(r, sent, resp, lease_ok, fenced);
		else if(!strcmp(method, "DELETE") && starts(path, KARP_API "/nodeclaims/")) {
			const char *n = path + strlen(KARP_API "/nodeclaims/");
			char name[128];
			snprintf(name, sizeof(name), "%.*s", (int)strcspn(n, "?/"), n);
			karp_deleted(r, name);
		}
	}
}

/* --no-owner-marks: a world whose objects lose the owner mark the driver
 * put on them (the record keeps what was sent). Returns the body to send
 * (owned by `o`'s serialisation, valid while o lives) or NULL to send the
 * original. */
static const char *strip_marks(json_object *o)
{
	json_object *labels = jobj(jobj(o, "metadata"), "labels");
	json_object *ann = jobj(jobj(o, "metadata"), "annotations");
	if(!labels && !ann)
		return NULL;
	if(labels)
		json_object_object_del(labels, "provreqd.io/owner");
	if(ann)
		json_object_object_del(ann, "provreqd.io/owner");
	return json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
}

/* A driver's request, on replica r's behalf: a write is an external call
 * (crash and stall points, as the controller's own API writes), any
 * request may fail (503), a write may meet a conflict (409), be slow (the
 * caller stands still while the others go on) or take effect with its
 * answer lost. */
static int drv_request(void *ud, const char *method, const char *path, const char *ct, const char *body, size_t len,
		       long *status, char **resp, size_t *resp_len, prd_cloud_error *err)
{
	replica *r = ud;
	bool write = strcmp(method, "GET") != 0, fenced = !fence_says(r), lease_ok;
	json_object *sent = NULL, *copy = NULL;
	const char *send = body;
	size_t send_len = len;
	int rc;
	*status = 0;
	*resp = NULL;
	*resp_len = 0;
	if(write)
		call_begin(r, true);
	if(!loading && (dst.fail_next > 0 || (dst.faults && pct(dst.p_transient / 3)))) {
		if(dst.fail_next > 0)
			dst.fail_next--;
		return answer(503, "ServiceUnavailable", "simulated apiserver overload", status, resp, resp_len, err,
			      PRD_CLOUD_EAGAIN);
	}
	if(write && !loading && dst.faults && pct(2))
		return answer(409, "Conflict", "simulated conflict: the object has been modified", status, resp, resp_len,
			      err, PRD_CLOUD_EIO);
	if(write && !loading && dst.faults && pct(3) && !dst.stall_depth && r->in_pass)
		stall(r, rnd_in(1, 8) * SEC, "in a slow driver request");
	if(write && body && len) {
		sent = json_tokener_parse(body);
		if(sent && dst.no_marks && (copy = json_tokener_parse(body))) {
			const char *s = strip_marks(copy);
			if(s) {
				send = s;
				send_len = strlen(s);
			}
		}
	}
	lease_ok = lease_valid(r);
	if(write)
		dst.api_writes++;
	rc = cloud_host_memapi_request(dst.m, method, path, ct, send, send_len, status, resp, resp_len, err);
	if(write && rc == 0)
		written(r, method, path, sent, *resp, lease_ok, fenced);
	json_object_put(sent);
	json_object_put(copy);
	if(write) {
		crash_point(r, true);
		if(rc == 0 && !loading && dst.faults && pct(dst.p_ambiguous / 2)) {
			free(*resp);
			*resp = NULL;
			*resp_len = 0;
			*status = 0;
			err->code = PRD_CLOUD_EAGAIN;
			snprintf(err->message, sizeof(err->message), "%s %s: timed out waiting for the answer", method, path);
			return PRD_CLOUD_EAGAIN;
		}
	}
	return rc;
}

/* The controller's increase() through a shipped driver: the owner token
 * it passes names the plan the call is for (what the abstract cloud
 * records from the same argument), for worlds whose API writes carry no
 * token (a Cluster API scale write). */
static replica *replica_of_state(void *state)
{
	int i;
	for(i = 0; i < NREP; i++)
		if(dst.r[i].loaded.n && dst.r[i].loaded.v[0]->state == state)
			return &dst.r[i];
	return NULL;
}

static int shim_increase(void *state, const prd_cloud_increase *req, prd_cloud_error *err)
{
	replica *r = replica_of_state(state);
	char saved[128];
	int rc;
	if(!r)
		return PRD_CLOUD_EINVAL;
	memcpy(saved, r->call_owner, sizeof(saved));
	snprintf(r->call_owner, sizeof(r->call_owner), "%s", req && req->owner ? req->owner : "");
	rc = r->real->increase(state, req, err);
	memcpy(r->call_owner, saved, sizeof(saved));
	return rc;
}

static int may_act(void *ud)
{
	return dst.unfenced || fence_says(ud);
}

static const char *module_path(const char *name, char *out, size_t len)
{
	const char *b = getenv("PRD_BUILDDIR");
	snprintf(out, len, "%s/cloud/%s/.libs/%s.so", b ? b : ".", name, name);
	return out;
}

/* Load the profile's driver for r's new process. */
int driver_load(replica *r)
{
	char path[1024], cfg[512], comp[64];
	cloud_driver *d = NULL;
	prd_err e;
	int rc;
	r->incarnation++;
	snprintf(comp, sizeof(comp), "driver/%s", profile_name(dst.profile));
	cloud_host_init(&r->host, comp, &dst.clock, drv_request, r);
	cloud_host_set_fence(&r->host, may_act, r);
	cloud_drivers_init(&r->loaded);
	switch(dst.profile) {
	case PROF_KWOK:
		snprintf(cfg, sizeof(cfg), "templateConfigMap: " DST_NS "/" KWOK_CM "\ncreateParallelism: 1\nnameSeed: %llu\n",
			 (unsigned long long)(dst.seed * 1000 + r->idx * 100 + r->incarnation));
		break;
	case PROF_CAPI:
		snprintf(cfg, sizeof(cfg), "namespace: " CAPI_NS "\nwatch: false\n");
		break;
	case PROF_KARP:
		snprintf(cfg, sizeof(cfg),
			 "shapes:\n- instanceType: c-4\n  zone: zone-a\n  capacityType: on-demand\n  maxSize: %d\n"
			 "  capacity: {cpu: \"4\", memory: 32Gi, pods: \"110\"}\n"
			 "  allocatable: {cpu: \"4\", memory: 32Gi, pods: \"110\"}\n"
			 "- instanceType: c-8\n  zone: zone-a\n  capacityType: on-demand\n  maxSize: %d\n"
			 "  capacity: {cpu: \"8\", memory: 32Gi, pods: \"110\"}\n"
			 "  allocatable: {cpu: \"8\", memory: 32Gi, pods: \"110\"}\n",
			 dst.g[0].max, dst.g[1].max);
		break;
	default:
		fprintf(stderr, "dst: profile %s is not built yet\n", profile_name(dst.profile));
		return -1;
	}
	loading = true;
	rc = cloud_drivers_load(&r->loaded, module_path(profile_name(dst.profile), path, sizeof(path)), &r->host.host,
				cfg, &d, &e);
	loading = false;
	if(rc) {
		fprintf(stderr, "dst: %s: loading %s: %s\n", r->name, path, e.msg);
		return -1;
	}
	r->real = d->api;
	r->call_owner[0] = '\0';
	if(d->api->increase) {
		r->shim = *d->api;
		r->shim.increase = shim_increase;
		d->api = &r->shim;
	}
	r->drivers = r->loaded;
	return 0;
}

/* ------------------------------------------------------- dispatch */

void world_setup(void)
{
	if(dst.profile == PROF_KWOK)
		kwok_setup();
	else if(dst.profile == PROF_CAPI)
		capi_setup();
	else if(dst.profile == PROF_KARP)
		karp_setup();
}

void world_progress(void)
{
	if(dst.profile == PROF_KWOK)
		kwok_progress();
	else if(dst.profile == PROF_CAPI)
		capi_progress();
	else if(dst.profile == PROF_KARP)
		karp_progress_now();
}

bool world_settled(void)
{
	size_t gi, i;
	for(gi = 0; gi < NGALL; gi++)
		for(i = 0; i < dst.g[gi].n; i++) {
			const inst *x = &dst.g[gi].v[i];
			if(!x->gone && !x->errclass && !x->ready)
				return false;
			/* Karpenter deletes a NodeClaim that could not launch. */
			if(dst.profile == PROF_KARP && !x->gone && x->errclass)
				return false;
			/* A failed Machine waits for its MachineHealthCheck. */
			if(dst.profile == PROF_CAPI && cw.mhc && !x->gone && x->errclass)
				return false;
		}
	return true;
}

void world_outside(void)
{
	if(dst.profile == PROF_KWOK)
		kwok_outside();
	else if(dst.profile == PROF_CAPI)
		capi_outside();
	else if(dst.profile == PROF_KARP)
		karp_outside();
}
