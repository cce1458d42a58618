/* Memory and initial-list time of informer caches holding 5,000 Nodes and
 * 150,000 Pods, and the cost of a watch event.
 *
 * The objects are generated as the JSON text the apiserver sends for a
 * paginated list (pages of 500, managedFields omitted), one page at a time,
 * handed over as the client hands pages over — split into items by the
 * page scanner and decoded from the text (`text`, what `run` does), or
 * parsed with json-c into a tree first (`tree`, the path before the text
 * decoders) — and fed through the real reflector and informer code (a
 * fake list-watch stands in for the server). Prints one machine-readable
 * line:
 *
 *   bench=informer_memory nodes=N pods=N rss_mb=.. initial_list_ms=..
 *     bytes_per_pod=.. ...
 *
 * rss_mb is the process's resident set once both caches are synced;
 * initial_list_ms covers both lists end to end, including writing the
 * JSON text; json_generation_ms is that writing alone (the server's work),
 * so list_without_generation_ms is parse + decode + insert.
 * bytes_per_pod is the growth of the resident set while the pod cache
 * filled, divided by the pod count (so it includes hash-table and
 * intern-table overhead and allocator slack). A second line,
 *
 *   bench=informer_events decode=.. events=N us_per_event=..
 *
 * is the CPU time per MODIFIED pod event (a changed resourceVersion, so
 * each is decoded), from the event line as the watch stream carries it to
 * the object replaced in the cache.
 * Usage: bench_informer [nodes] [pods] [text|tree]. */
#include <json-c/json.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kube/client_int.h"
#include "kube/informer.h"
#include "kube/jscan.h"
#include "kube/objects.h"
#include "kube/reflector.h"
#include "ops/log.h"
#include "util/buf.h"
#include "util/clock.h"

#define PAGE 500

typedef struct gen {
	kube_kind kind;
	long count;
	long nodes;
	pthread_mutex_t mu;
	pthread_cond_t cv;
} gen;

static long rss_kb(const char *field)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long v = -1;
	size_t n = strlen(field);
	if(!f)
		return -1;
	while(fgets(line, sizeof(line), f))
		if(strncmp(line, field, n) == 0) {
			v = atol(line + n + 1);
			break;
		}
	fclose(f);
	return v;
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static const char *const zones[] = { "europe-west4-a", "europe-west4-b", "europe-west4-c" };
static const char *const types[] = { "n2-standard-8", "n2-standard-16", "n2-highmem-32", "a2-highgpu-1g" };

static void node_json(buf *b, long i)
{
	const char *type = types[i % 4];
	int gpu = i % 4 == 3;
	int cpu = gpu ? 12 : 8 << (i % 3);
	buf_printf(b,
		   "{\"metadata\":{\"name\":\"node-%05ld\",\"uid\":\"6f1c%04lx-8d2e-4b7a-9c3d-%012lx\","
		   "\"resourceVersion\":\"%ld\",\"creationTimestamp\":\"2024-04-01T10:%02ld:%02ldZ\","
		   "\"labels\":{\"beta.kubernetes.io/arch\":\"amd64\",\"beta.kubernetes.io/os\":\"linux\","
		   "\"kubernetes.io/arch\":\"amd64\",\"kubernetes.io/hostname\":\"node-%05ld\",\"kubernetes.io/os\":\"linux\","
		   "\"node.kubernetes.io/instance-type\":\"%s\",\"topology.kubernetes.io/region\":\"europe-west4\","
		   "\"topology.kubernetes.io/zone\":\"%s\",\"provreqd.io/node-group\":\"pool-%ld\","
		   "\"cloud.google.com/gke-nodepool\":\"pool-%ld\"},"
		   "\"annotations\":{\"node.alpha.kubernetes.io/ttl\":\"0\","
		   "\"volumes.kubernetes.io/controller-managed-attach-detach\":\"true\","
		   "\"kwok.x-k8s.io/node\":\"fake\",\"csi.volume.kubernetes.io/nodeid\":"
		   "\"{\\\"pd.csi.storage.gke.io\\\":\\\"projects/p/zones/%s/instances/node-%05ld\\\"}\"}},"
		   "\"spec\":{\"podCIDR\":\"10.%ld.%ld.0/24\",\"podCIDRs\":[\"10.%ld.%ld.0/24\"],"
		   "\"providerID\":\"gce://project/%s/node-%05ld\"%s},"
		   "\"status\":{\"capacity\":{\"cpu\":\"%d\",\"ephemeral-storage\":\"98831908Ki\",\"hugepages-1Gi\":\"0\","
		   "\"hugepages-2Mi\":\"0\",\"memory\":\"%dGi\",\"pods\":\"110\"%s},"
		   "\"allocatable\":{\"cpu\":\"%dm\",\"ephemeral-storage\":\"47060071478\",\"hugepages-1Gi\":\"0\","
		   "\"hugepages-2Mi\":\"0\",\"memory\":\"%dMi\",\"pods\":\"110\"%s},"
		   "\"conditions\":["
		   "{\"type\":\"MemoryPressure\",\"status\":\"False\",\"lastHeartbeatTime\":\"2024-05-01T10:00:00Z\","
		   "\"lastTransitionTime\":\"2024-04-01T10:00:00Z\",\"reason\":\"KubeletHasSufficientMemory\","
		   "\"message\":\"kubelet has sufficient memory available\"},"
		   "{\"type\":\"DiskPressure\",\"status\":\"False\",\"lastHeartbeatTime\":\"2024-05-01T10:00:00Z\","
		   "\"lastTransitionTime\":\"2024-04-01T10:00:00Z\",\"reason\":\"KubeletHasNoDiskPressure\","
		   "\"message\":\"kubelet has no disk pressure\"},"
		   "{\"type\":\"PIDPressure\",\"status\":\"False\",\"lastHeartbeatTime\":\"2024-05-01T10:00:00Z\","
		   "\"lastTransitionTime\":\"2024-04-01T10:00:00Z\",\"reason\":\"KubeletHasSufficientPID\","
		   "\"message\":\"kubelet has sufficient PID available\"},"
		   "{\"type\":\"Ready\",\"status\":\"True\",\"lastHeartbeatTime\":\"2024-05-01T10:00:00Z\","
		   "\"lastTransitionTime\":\"2024-04-01T10:00:30Z\",\"reason\":\"KubeletReady\","
		   "\"message\":\"kubelet is posting ready status\"}],"
		   "\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"10.128.%ld.%ld\"},"
		   "{\"type\":\"Hostname\",\"address\":\"node-%05ld\"}],"
		   "\"daemonEndpoints\":{\"kubeletEndpoint\":{\"Port\":10250}},"
		   "\"nodeInfo\":{\"machineID\":\"%032lx\",\"systemUUID\":\"%032lx\",\"bootID\":\"%032lx\","
		   "\"kernelVersion\":\"6.1.0-18-cloud-amd64\",\"osImage\":\"Container-Optimized OS\","
		   "\"containerRuntimeVersion\":\"containerd://1.7.13\",\"kubeletVersion\":\"v1.31.0\","
		   "\"kubeProxyVersion\":\"v1.31.0\",\"operatingSystem\":\"linux\",\"architecture\":\"amd64\"},"
		   "\"images\":[{\"names\":[\"registry.k8s.io/pause:3.9\"],\"sizeBytes\":321520},"
		   "{\"names\":[\"registry.k8s.io/kube-proxy:v1.31.0\"],\"sizeBytes\":28075616}]}}",
		   i, i & 0xffff, i, 1000 + i, (i / 60) % 60, i % 60, i, type, zones[i % 3], i % 20, i % 20,
		   zones[i % 3], i, (i / 256) % 256, i % 256, (i / 256) % 256, i % 256, zones[i % 3], i,
		   gpu ? ",\"taints\":[{\"key\":\"nvidia.com/gpu\",\"value\":\"present\",\"effect\":\"NoSchedule\"}]" : "",
		   cpu, cpu * 4, gpu ? ",\"nvidia.com/gpu\":\"1\"" : "", cpu * 1000 - 180, cpu * 4 * 1024 - 1800,
		   gpu ? ",\"nvidia.com/gpu\":\"1\"" : "", (i / 256) % 256, i % 256, i, i, i * 7, i * 13);
}

static void container_json(buf *b, long i, int c)
{
	static const char *const names[] = { "app", "sidecar-proxy", "log-shipper" };
	static const char *const cpus[] = { "250m", "100m", "50m" };
	static const char *const mems[] = { "512Mi", "128Mi", "64Mi" };
	buf_printf(b,
		   "%s{\"name\":\"%s\",\"image\":\"registry.example.com/team-%ld/%s:v1.%ld.%d\","
		   "\"ports\":[{\"name\":\"http\",\"containerPort\":%d,\"protocol\":\"TCP\"}],"
		   "\"env\":[{\"name\":\"POD_NAME\",\"valueFrom\":{\"fieldRef\":{\"apiVersion\":\"v1\",\"fieldPath\":\"metadata.name\"}}},"
		   "{\"name\":\"LOG_LEVEL\",\"value\":\"info\"}],"
		   "\"resources\":{\"limits\":{\"cpu\":\"1\",\"memory\":\"1Gi\"},\"requests\":{\"cpu\":\"%s\",\"memory\":\"%s\"}},"
		   "\"volumeMounts\":[{\"name\":\"kube-api-access-%05lx\",\"readOnly\":true,"
		   "\"mountPath\":\"/var/run/secrets/kubernetes.io/serviceaccount\"}],"
		   "\"terminationMessagePath\":\"/dev/termination-log\",\"terminationMessagePolicy\":\"File\","
		   "\"imagePullPolicy\":\"IfNotPresent\"}",
		   c ? "," : "", names[c], i % 50, names[c], i % 7, c, 8080 + c, cpus[c], mems[c], i & 0xfffff);
}

/* Added to every pod's resourceVersion: the watch events' objects are
 * newer versions of the listed ones. */
static long rv_bump;

static void pod_json(buf *b, long i, long nodes)
{
	long rs = i / 30, ns = rs % 50;
	int nc = 1 + (int)(i % 3), c;
	buf_printf(b,
		   "{\"metadata\":{\"name\":\"web-%06lx-%05ld\",\"generateName\":\"web-%06lx-\",\"namespace\":\"team-%ld\","
		   "\"uid\":\"%08lx-3c1d-4e2f-8a9b-%012lx\",\"resourceVersion\":\"%ld\","
		   "\"creationTimestamp\":\"2024-05-01T%02ld:%02ld:%02ldZ\","
		   "\"labels\":{\"app\":\"web-%ld\",\"pod-template-hash\":\"%06lx\",\"team\":\"team-%ld\",\"version\":\"v1\"},"
		   "\"annotations\":{\"kubectl.kubernetes.io/restartedAt\":\"2024-05-01T09:00:00Z\","
		   "\"prometheus.io/scrape\":\"true\"%s},"
		   "\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":\"ReplicaSet\",\"name\":\"web-%06lx\","
		   "\"uid\":\"%08lx-0000-4000-8000-000000000000\",\"controller\":true,\"blockOwnerDeletion\":true}]},"
		   "\"spec\":{\"containers\":[",
		   rs, i, rs, ns, i, i, 100000 + i + rv_bump, (i / 3600) % 24, (i / 60) % 60, i % 60, rs, rs, ns,
		   i % 100 == 0 ? ",\"autoscaling.x-k8s.io/consume-provisioning-request\":\"batch-1\"" : "", rs, rs);
	for(c = 0; c < nc; c++)
		container_json(b, i, c);
	buf_printf(b,
		   "],\"volumes\":[{\"name\":\"kube-api-access-%05lx\",\"projected\":{\"defaultMode\":420,\"sources\":["
		   "{\"serviceAccountToken\":{\"expirationSeconds\":3607,\"path\":\"token\"}},"
		   "{\"configMap\":{\"name\":\"kube-root-ca.crt\",\"items\":[{\"key\":\"ca.crt\",\"path\":\"ca.crt\"}]}},"
		   "{\"downwardAPI\":{\"items\":[{\"path\":\"namespace\",\"fieldRef\":{\"apiVersion\":\"v1\","
		   "\"fieldPath\":\"metadata.namespace\"}}]}}]}}],"
		   "\"restartPolicy\":\"Always\",\"terminationGracePeriodSeconds\":30,\"dnsPolicy\":\"ClusterFirst\","
		   "\"serviceAccountName\":\"default\",\"serviceAccount\":\"default\",\"nodeName\":\"node-%05ld\","
		   "\"securityContext\":{},\"schedulerName\":\"default-scheduler\",\"priority\":0,"
		   "\"enableServiceLinks\":true,\"preemptionPolicy\":\"PreemptLowerPriority\","
		   "\"tolerations\":[{\"key\":\"node.kubernetes.io/not-ready\",\"operator\":\"Exists\",\"effect\":\"NoExecute\","
		   "\"tolerationSeconds\":300},{\"key\":\"node.kubernetes.io/unreachable\",\"operator\":\"Exists\","
		   "\"effect\":\"NoExecute\",\"tolerationSeconds\":300}]%s},"
		   "\"status\":{\"phase\":\"Running\",\"conditions\":["
		   "{\"type\":\"PodReadyToStartContainers\",\"status\":\"True\",\"lastProbeTime\":null,\"lastTransitionTime\":\"2024-05-01T10:00:05Z\"},"
		   "{\"type\":\"Initialized\",\"status\":\"True\",\"lastProbeTime\":null,\"lastTransitionTime\":\"2024-05-01T10:00:01Z\"},"
		   "{\"type\":\"Ready\",\"status\":\"True\",\"lastProbeTime\":null,\"lastTransitionTime\":\"2024-05-01T10:00:09Z\"},"
		   "{\"type\":\"ContainersReady\",\"status\":\"True\",\"lastProbeTime\":null,\"lastTransitionTime\":\"2024-05-01T10:00:09Z\"},"
		   "{\"type\":\"PodScheduled\",\"status\":\"True\",\"lastProbeTime\":null,\"lastTransitionTime\":\"2024-05-01T10:00:00Z\"}],"
		   "\"hostIP\":\"10.128.%ld.%ld\",\"hostIPs\":[{\"ip\":\"10.128.%ld.%ld\"}],"
		   "\"podIP\":\"10.%ld.%ld.%ld\",\"podIPs\":[{\"ip\":\"10.%ld.%ld.%ld\"}],"
		   "\"startTime\":\"2024-05-01T10:00:00Z\",\"qosClass\":\"Burstable\",\"containerStatuses\":[",
		   i & 0xfffff, i % nodes,
		   i % 7 == 0 ? ",\"affinity\":{\"podAntiAffinity\":{\"preferredDuringSchedulingIgnoredDuringExecution\":"
				"[{\"weight\":100,\"podAffinityTerm\":{\"labelSelector\":{\"matchLabels\":{\"app\":\"web\"}},"
				"\"topologyKey\":\"kubernetes.io/hostname\"}}]}}"
			      : "",
		   (i % nodes / 256) % 256, i % nodes % 256, (i % nodes / 256) % 256, i % nodes % 256, (i / 65536) % 256,
		   (i / 256) % 256, i % 256, (i / 65536) % 256, (i / 256) % 256, i % 256);
	for(c = 0; c < nc; c++)
		buf_printf(b,
			   "%s{\"name\":\"c%d\",\"state\":{\"running\":{\"startedAt\":\"2024-05-01T10:00:08Z\"}},"
			   "\"lastState\":{},\"ready\":true,\"restartCount\":0,\"image\":\"registry.example.com/app:v1\","
			   "\"imageID\":\"registry.example.com/app@sha256:%064lx\","
			   "\"containerID\":\"containerd://%064lx\",\"started\":true}",
			   c ? "," : "", c, (unsigned long)i * 31 + (unsigned long)c, (unsigned long)i * 17 + (unsigned long)c);
	buf_append_str(b, "]}}");
}

static size_t json_bytes_sample;
/* Time spent writing the JSON text, which a real server does for us; it is
 * reported apart so the list figure can exclude it. Written by the
 * reflector thread, read after wait_synced (which orders the two). */
static double gen_ms_total;

/* The fake server: builds each page's JSON text, parses it the way the
 * client parses a page, and hands out its items. */
static int gen_list(void *ud, kube_item_fn fn, void *fn_ud, char **rv, prd_err *err)
{
	gen *g = ud;
	long start, i;
	buf b;
	int rc = 0;

	buf_init(&b);
	for(start = 0; start < g->count && !rc; start += PAGE) {
		json_object *page, *items;
		size_t k;
		double t0 = now_ms();
		buf_reset(&b);
		buf_printf(&b, "{\"kind\":\"%sList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"999999\","
			       "\"continue\":\"%ld\"},\"items\":[", kube_kind_name(g->kind), start);
		for(i = start; i < start + PAGE && i < g->count; i++) {
			if(i > start)
				buf_append_char(&b, ',');
			if(g->kind == KUBE_KIND_NODE)
				node_json(&b, i);
			else
				pod_json(&b, i, g->nodes);
		}
		buf_append_str(&b, "]}");
		if(b.failed) {
			rc = prd_err_set(err, PRD_ENOMEM, "out of memory");
			break;
		}
		if(start == 0)
			json_bytes_sample = b.len / (size_t)(i - start);
		gen_ms_total += now_ms() - t0;
		page = json_tokener_parse(buf_str(&b));
		if(!page || !json_object_object_get_ex(page, "items", &items)) {
			json_object_put(page);
			rc = prd_err_set(err, PRD_EINVAL, "generated page does not parse");
			break;
		}
		for(k = 0; k < json_object_array_length(items) && !rc; k++)
			rc = fn(fn_ud, json_object_array_get_idx(items, k));
		json_object_put(page);
	}
	buf_free(&b);
	if(!rc)
		*rv = strdup("999999");
	return rc;
}

/* The same pages handed over as text, split as kube_list_text splits a
 * page. */
static int gen_list_text(void *ud, kube_src_fn fn, void *fn_ud, char **rv, prd_err *err)
{
	gen *g = ud;
	long start, i;
	buf b;
	int rc = 0;

	buf_init(&b);
	for(start = 0; start < g->count && !rc; start += PAGE) {
		kube_page pg;
		size_t k;
		double t0 = now_ms();
		buf_reset(&b);
		buf_printf(&b, "{\"kind\":\"%sList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"999999\","
			       "\"continue\":\"%ld\"},\"items\":[", kube_kind_name(g->kind), start);
		for(i = start; i < start + PAGE && i < g->count; i++) {
			if(i > start)
				buf_append_char(&b, ',');
			if(g->kind == KUBE_KIND_NODE)
				node_json(&b, i);
			else
				pod_json(&b, i, g->nodes);
		}
		buf_append_str(&b, "]}");
		if(b.failed) {
			rc = prd_err_set(err, PRD_ENOMEM, "out of memory");
			break;
		}
		if(start == 0)
			json_bytes_sample = b.len / (size_t)(i - start);
		gen_ms_total += now_ms() - t0;
		if(kube__page_scan(b.data, b.len, KUBE_JSON_MAX_DEPTH, &pg)) {
			kube__page_free(&pg);
			rc = prd_err_set(err, PRD_EINVAL, "generated page does not scan");
			break;
		}
		for(k = 0; k < pg.nitems && !rc; k++) {
			kube_item_src src = { pg.items[k].s, pg.items[k].len, KUBE_JSON_MAX_DEPTH - 2, NULL };
			rc = fn(fn_ud, &src);
		}
		kube__page_free(&pg);
	}
	buf_free(&b);
	if(!rc)
		*rv = strdup("999999");
	return rc;
}

static int gen_watch(void *ud, const char *rv, long timeout_s, bool (*cancelled)(void *), void *cancel_ud,
		     kube_event_fn fn, void *fn_ud, prd_err *err)
{
	gen *g = ud;
	pthread_mutex_lock(&g->mu);
	while(!cancelled(cancel_ud)) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 20 * PRD_NS_PER_MS;
		if(ts.tv_nsec >= PRD_NS_PER_SEC) {
			ts.tv_sec++;
			ts.tv_nsec -= PRD_NS_PER_SEC;
		}
		pthread_cond_timedwait(&g->cv, &g->mu, &ts);
	}
	pthread_mutex_unlock(&g->mu);
	return 0;
}

static int gen_watch_text(void *ud, const char *rv, long timeout_s, bool (*cancelled)(void *), void *cancel_ud,
			  kube_src_event_fn fn, void *fn_ud, prd_err *err)
{
	return gen_watch(ud, rv, timeout_s, cancelled, cancel_ud, NULL, NULL, err);
}

static bool text_mode = true;

typedef struct on_node {
	const char *node;
	size_t n;
} on_node;

static int count_on_node(void *ud, const kube_meta *m)
{
	on_node *o = ud;
	const char *node = ((const kube_pod *)m)->node_name;
	if(node && strcmp(node, o->node) == 0)
		o->n++;
	return 0;
}

static kube_informer *load(kube_intern *in, gen *g, double *ms)
{
	kube_informer_opts o;
	kube_informer *inf;
	kube_listwatch lw = { gen_list, gen_watch, g, text_mode ? gen_list_text : NULL,
			      text_mode ? gen_watch_text : NULL };
	double t0;

	memset(&o, 0, sizeof(o));
	o.kind = g->kind;
	o.intern = in;
	if(kube_informer_new(&o, &inf, NULL))
		return NULL;
	t0 = now_ms();
	if(kube_informer_start(inf, &lw, NULL) || !kube_informer_wait_synced(inf)) {
		kube_informer_free(inf);
		return NULL;
	}
	*ms = now_ms() - t0;
	return inf;
}

/* Watch events into the pod cache, as the reflector hands them over. */
static int ev_tree(void *ud, const char *type, json_object *obj)
{
	(void)type;
	return kube_informer_store_ops()->event(ud, KUBE_EV_MODIFIED, obj);
}

static int ev_text(void *ud, const char *type, const kube_item_src *src)
{
	(void)type;
	return kube_informer_store_ops()->event_src(ud, KUBE_EV_MODIFIED, src);
}

/* CPU per MODIFIED event: n event lines (generated before the clock
 * starts) through the watch line decoding into the stopped cache. */
static double events_us(kube_informer *pi, long n, long nodes)
{
	char **lines = calloc((size_t)n, sizeof(*lines));
	struct timespec t0, t1;
	long i;
	double us;

	rv_bump = 1000000;
	for(i = 0; i < n; i++) {
		buf b;
		buf_init(&b);
		buf_append_str(&b, "{\"type\":\"MODIFIED\",\"object\":");
		pod_json(&b, i, nodes);
		buf_append_char(&b, '}');
		lines[i] = buf_detach(&b);
	}
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
	for(i = 0; i < n; i++) {
		int rc = text_mode ? kube__watch_line_text(lines[i], strlen(lines[i]), ev_text, pi, NULL, NULL)
				   : kube__watch_line(lines[i], strlen(lines[i]), ev_tree, pi, NULL, NULL);
		if(rc)
			fprintf(stderr, "bench_informer: event %ld: %d\n", i, rc);
	}
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
	us = ((double)(t1.tv_sec - t0.tv_sec) * 1e6 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e3) / (double)n;
	for(i = 0; i < n; i++)
		free(lines[i]);
	free(lines);
	return us;
}

int main(int argc, char **argv)
{
	gen gn = { KUBE_KIND_NODE, 5000, 5000, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER };
	gen gp = { KUBE_KIND_POD, 150000, 5000, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER };
	kube_intern *in;
	kube_informer *ni, *pi;
	double node_ms = 0, pod_ms = 0;
	long rss0, rss1, rss2, hwm;
	size_t node_json_bytes;
	on_node node0 = { "node-00000", 0 };

	if(argc > 1)
		gn.count = gp.nodes = atol(argv[1]);
	if(argc > 2)
		gp.count = atol(argv[2]);
	if(argc > 3)
		text_mode = strcmp(argv[3], "tree") != 0;
	if(gn.count <= 0 || gp.count < 0) {
		fprintf(stderr, "usage: bench_informer [nodes] [pods] [text|tree]\n");
		return 2;
	}
	log_setup(PRD_LOG_WARN, PRD_LOG_TEXT, NULL);
	in = kube_intern_new();
	rss0 = rss_kb("VmRSS:");
	ni = load(in, &gn, &node_ms);
	node_json_bytes = json_bytes_sample;
	malloc_trim(0);
	rss1 = rss_kb("VmRSS:");
	pi = load(in, &gp, &pod_ms);
	if(!ni || !pi) {
		fprintf(stderr, "bench_informer: loading failed\n");
		return 1;
	}
	/* Give freed page memory back to the kernel, as a long-running
	 * process does over time, so RSS reflects what the caches hold. */
	malloc_trim(0);
	rss2 = rss_kb("VmRSS:");
	hwm = rss_kb("VmHWM:");
	kube_informer_rdlock(pi);
	kube_informer_foreach(pi, count_on_node, &node0);
	if(kube_informer_len(pi) != (size_t)gp.count || kube_informer_len(ni) != (size_t)gn.count) {
		fprintf(stderr, "bench_informer: cache holds %zu pods, %zu nodes\n", kube_informer_len(pi),
			kube_informer_len(ni));
		return 1;
	}
	kube_informer_rdunlock(pi);

	printf("bench=informer_memory decode=%s nodes=%ld pods=%ld rss_mb=%.1f peak_rss_mb=%.1f initial_list_ms=%.0f "
	       "json_generation_ms=%.0f list_without_generation_ms=%.0f node_list_ms=%.0f bytes_per_pod=%.0f bytes_per_node=%.0f pod_json_bytes=%zu node_json_bytes=%zu "
	       "interned_strings=%zu interned_kb=%zu pods_on_node0=%zu\n",
	       text_mode ? "text" : "tree", gn.count, gp.count, rss2 / 1024.0, hwm / 1024.0, pod_ms + node_ms, gen_ms_total,
	       pod_ms + node_ms - gen_ms_total, node_ms,
	       gp.count ? (double)(rss2 - rss1) * 1024.0 / (double)gp.count : 0.0,
	       (double)(rss1 - rss0) * 1024.0 / (double)gn.count, json_bytes_sample, node_json_bytes,
	       kube_intern_count(in), kube_intern_bytes(in) / 1024, node0.n);
	kube_informer_stop(pi);
	if(gp.count > 0) {
		long n = gp.count < 5000 ? gp.count : 5000;
		printf("bench=informer_events decode=%s events=%ld us_per_event=%.1f\n", text_mode ? "text" : "tree", n,
		       events_us(pi, n, gp.nodes));
	}
	kube_informer_free(pi);
	kube_informer_free(ni);
	kube_intern_free(in);
	return 0;
}
