/* The plan key: the HMAC key that seals the scale-up plan records provreqd
 * writes into requests' statuses (classes/plan_seal.h). It lives in a
 * Secret in provreqd's own namespace, which provreqd's Role may read and
 * create and which whoever else may patch request statuses
 * (cluster-autoscaler's service account) may not read. Every replica and
 * shard reads the same Secret; the first to find it missing creates it
 * with 32 random bytes, and a create that loses the race (409) reads the
 * winner's, so all of them seal with one key. */
#include "classes/plan_seal.h"
#include "ops/log.h"
#include "ops/metrics.h"
#include "provreq/ctl_int.h"

#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <string.h>

/* The key out of the Secret `o`: data.key, 32 bytes in base64. */
static int key_of(json_object *o, const char *ns, uint8_t key[PR_PLAN_KEY_LEN], prd_err *err)
{
	json_object *data = json_object_object_get(o, "data");
	const char *b64 = json_object_get_string(json_object_object_get(data, "key"));
	uint8_t raw[3 * 64 / 4 + 3];
	size_t len = b64 ? strlen(b64) : 0, pad = 0;
	int n;
	if(!b64 || len != 44)
		return prd_err_set(err, PRD_ECORRUPT, "Secret %s/%s: data.key is not %d bytes in base64", ns,
				   PR_PLAN_KEY_SECRET, PR_PLAN_KEY_LEN);
	while(pad < 2 && b64[len - 1 - pad] == '=')
		pad++;
	n = EVP_DecodeBlock(raw, (const unsigned char *)b64, (int)len);
	if(n < 0 || (size_t)n - pad != PR_PLAN_KEY_LEN)
		return prd_err_set(err, PRD_ECORRUPT, "Secret %s/%s: data.key is not %d bytes in base64", ns,
				   PR_PLAN_KEY_SECRET, PR_PLAN_KEY_LEN);
	memcpy(key, raw, PR_PLAN_KEY_LEN);
	OPENSSL_cleanse(raw, sizeof(raw));
	return 0;
}

static int get_key(const kube_api *api, const char *ns, uint8_t key[PR_PLAN_KEY_LEN], prd_err *err)
{
	char path[400];
	json_object *o = NULL;
	int rc;
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s/secrets/%s", ns, PR_PLAN_KEY_SECRET);
	rc = kube_api_call(api, "GET", path, NULL, NULL, &o, NULL, err);
	if(!rc)
		rc = key_of(o, ns, key, err);
	json_object_put(o);
	return rc;
}

int pr_plan_key_load(const kube_api *api, const char *ns, uint8_t key[PR_PLAN_KEY_LEN], bool *created, prd_err *err)
{
	uint8_t fresh[PR_PLAN_KEY_LEN];
	char b64[64], path[300];
	json_object *o, *md, *labels, *data;
	int rc;
	if(created)
		*created = false;
	if(!ns || !ns[0])
		return prd_err_set(err, PRD_EINVAL, "no namespace for the plan key's Secret");
	rc = get_key(api, ns, key, err);
	if(rc != PRD_ENOTFOUND)
		return rc;
	if(RAND_bytes(fresh, sizeof(fresh)) != 1)
		return prd_err_set(err, PRD_EINTERNAL, "cannot draw a random plan key (libcrypto RAND_bytes failed)");
	EVP_EncodeBlock((unsigned char *)b64, fresh, sizeof(fresh));
	o = json_object_new_object();
	md = json_object_new_object();
	labels = json_object_new_object();
	data = json_object_new_object();
	json_object_object_add(md, "name", json_object_new_string(PR_PLAN_KEY_SECRET));
	json_object_object_add(labels, "app.kubernetes.io/name", json_object_new_string("provreqd"));
	json_object_object_add(md, "labels", labels);
	json_object_object_add(o, "apiVersion", json_object_new_string("v1"));
	json_object_object_add(o, "kind", json_object_new_string("Secret"));
	json_object_object_add(o, "metadata", md);
	json_object_object_add(o, "type", json_object_new_string("Opaque"));
	json_object_object_add(data, "key", json_object_new_string(b64));
	json_object_object_add(o, "data", data);
	OPENSSL_cleanse(b64, sizeof(b64));
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s/secrets", ns);
	/* A create never overwrites: a replica that lost the race reads the
	 * winner's key. */
	rc = kube_api_call(api, "POST", path, "application/json", o, NULL, NULL, err);
	json_object_put(o);
	if(rc == 0) {
		memcpy(key, fresh, sizeof(fresh));
		if(created)
			*created = true;
	} else if(rc == PRD_EEXIST || rc == PRD_ECONFLICT) {
		rc = get_key(api, ns, key, err);
	}
	OPENSSL_cleanse(fresh, sizeof(fresh));
	return rc;
}

bool pr__plan_sealed(const pr_ctl *c, const kube_provreq *pr)
{
	char why[300];
	return pr_plan_seal_verify(c->plan_key_set ? c->plan_key : NULL, pr, why, sizeof(why)) == PR_SEAL_OK;
}

void pr_ctl_set_plan_key(pr_ctl *c, const uint8_t *key, size_t len)
{
	char id[9];
	if(!key || len != PR_PLAN_KEY_LEN) {
		OPENSSL_cleanse(c->plan_key, sizeof(c->plan_key));
		c->plan_key_set = false;
		metrics_gauge_set(M_PLAN_KEY, NULL, 0);
		return;
	}
	memcpy(c->plan_key, key, PR_PLAN_KEY_LEN);
	c->plan_key_set = true;
	metrics_gauge_set(M_PLAN_KEY, NULL, 1);
	pr_plan_key_id(key, id);
	log_info("scale-up plan records are sealed and verified with the plan key", "key_id", id);
}
