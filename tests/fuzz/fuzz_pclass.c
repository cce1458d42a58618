/* libFuzzer target for what comes from administrators and namespaces
 * (issue 28): any JSON read as a ProvisioningClass either is refused with
 * a message or gives a class whose parameters merge with a request's into
 * a sorted list without repeated keys, where a fixed key keeps the class's
 * value; and the same JSON read as ResourceQuotas (a list, or one quota)
 * checks a request's pods without crashing, and a refusal always says why. */
#include <json-c/json.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "classes/pclass.h"
#include "classes/quota.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_class(json_object *o)
{
	static const kube_kv req[3] = { { "ValidUntilSeconds", "99" }, { "noRetry", "true" }, { "x", "request" } };
	kube_intern *in = kube_intern_new();
	kube_meta *m = NULL;
	pr_pclass p;
	arena ar;
	kube_kv *out = NULL;
	size_t n = 0, i, k;
	if(!in)
		return;
	if(kube_decode(KUBE_KIND_PROVCLASS, o, in, &m, NULL) == 0) {
		if(pr_pclass_parse(kube_as_provclass(m), &p, NULL) == 0) {
			if(!p.error == !p.target)
				abort(); /* exactly one of: usable with a target, refused */
			arena_init(&ar);
			if(p.target && pr_pclass_merge(&p, req, 3, &ar, &out, &n) == 0) {
				for(i = 1; i < n; i++)
					if(strcmp(out[i - 1].key, out[i].key) >= 0)
						abort();
				for(k = 0; k < p.nfixed; k++)
					for(i = 0; i < n; i++)
						if(!strcmp(out[i].key, p.fixed[k])) {
							size_t j;
							for(j = 0; j < p.nparams && strcmp(p.params[j].key, p.fixed[k]); j++)
								;
							if(j == p.nparams || strcmp(out[i].value, p.params[j].value))
								abort();
						}
				free(pr_pclass_params_json(out, n));
			}
			if(p.target) {
				(void)pr_pclass_allows(&p, NULL);
				(void)pr_pclass_allows(&p, json_object_object_get(o, "labels"));
			}
			arena_free(&ar);
		}
		pr_pclass_clear(&p);
		kube_obj_free(in, m);
	}
	kube_intern_free(in);
}

static void check_quota(json_object *o)
{
	static const sched_res res[3] = { { "cpu", 1500 }, { "memory", 1LL << 30 }, { "example.com/gpu", 2 } };
	static const sched_pod_spec pod = { .requests = res, .n_requests = 3 };
	json_object *list = o, *spec = json_object_object_get(o, "podSpec");
	pr_quota_pods ask = { &pod, spec, 3 }, held = { &pod, spec, 2 };
	char msg[1024];
	int rc;
	if(!json_object_is_type(o, json_type_array)) {
		list = json_object_new_array();
		if(!list)
			return;
		json_object_array_add(list, json_object_get(o));
	}
	msg[0] = 0;
	rc = pr_quota_check(list, &ask, 1, &held, 1, msg, sizeof(msg));
	if(rc != 0 && !msg[0])
		abort();
	if(list != o)
		json_object_put(list);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_tokener *tok = json_tokener_new_ex(32);
	json_object *o;
	if(!tok)
		return 0;
	o = json_tokener_parse_ex(tok, (const char *)data, (int)size);
	if(o) {
		check_class(o);
		check_quota(o);
		json_object_put(o);
	}
	json_tokener_free(tok);
	return 0;
}
