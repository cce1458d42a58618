/* The plan record's seal: an HMAC-SHA256 under the plan key over the
 * fields of a request's scale-up plan record, computed and verified here. */
#include "classes/plan_seal.h"
#include "classes/details.h"
#include "classes/vocab.h"
#include "util/buf.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const pr_plan_seal_fields[PR_PLAN_SEAL_NFIELDS] = {
	PR_DETAIL_PLAN,     PR_DETAIL_GROUP, PR_DETAIL_DELTA, PR_DETAIL_TARGET_BEFORE, PR_DETAIL_DEADLINE,
	PR_DETAIL_PHASE,    PR_DETAIL_KNOWN, PR_DETAIL_TERM,  PR_DETAIL_NAP_SPEC,
};

#define SEAL_VERSION "v1"

bool pr_plan_seal_covers(const char *key)
{
	size_t i, n;
	for(i = 0; i < PR_PLAN_SEAL_NFIELDS; i++) {
		n = strlen(pr_plan_seal_fields[i]);
		if(!strncmp(key, pr_plan_seal_fields[i], n) && (key[n] == '\0' || key[n] == '.'))
			return true;
	}
	return false;
}

static void hex(const uint8_t *v, size_t n, char *out)
{
	static const char d[] = "0123456789abcdef";
	size_t i;
	for(i = 0; i < n; i++) {
		out[2 * i] = d[v[i] >> 4];
		out[2 * i + 1] = d[v[i] & 15];
	}
	out[2 * n] = '\0';
}

void pr_plan_key_id(const uint8_t key[PR_PLAN_KEY_LEN], char out[9])
{
	static const char label[] = "provreqd plan key id";
	uint8_t in[sizeof(label) + PR_PLAN_KEY_LEN], md[SHA256_DIGEST_LENGTH];
	memcpy(in, label, sizeof(label));
	memcpy(in + sizeof(label), key, PR_PLAN_KEY_LEN);
	SHA256(in, sizeof(in), md);
	hex(md, 4, out);
}

/* One field into the MAC's message: its name with its NUL, then absent
 * (0) or present (1) with its length as 8 bytes big-endian and its
 * bytes. */
static void mac_field(buf *b, const char *name, const char *v)
{
	uint64_t n = v ? strlen(v) : 0;
	int i;
	buf_append(b, name, strlen(name) + 1);
	buf_append_char(b, v ? 1 : 0);
	if(!v)
		return;
	for(i = 0; i < 8; i++)
		buf_append_char(b, (char)(uint8_t)(n >> (56 - 8 * i)));
	buf_append(b, v, n);
}

bool pr_plan_seal(const uint8_t key[PR_PLAN_KEY_LEN], const char *uid, const char *const vals[PR_PLAN_SEAL_NFIELDS],
		  char out[PR_PLAN_SEAL_MAX])
{
	static const char head[] = "provreqd plan seal " SEAL_VERSION;
	uint8_t md[EVP_MAX_MD_SIZE];
	unsigned mdlen = 0;
	char id[9], mdhex[2 * EVP_MAX_MD_SIZE + 1];
	buf b;
	bool ok;
	size_t i;
	buf_init(&b);
	buf_append(&b, head, sizeof(head));
	mac_field(&b, "uid", uid ? uid : "");
	for(i = 0; i < PR_PLAN_SEAL_NFIELDS; i++)
		mac_field(&b, pr_plan_seal_fields[i], vals[i]);
	ok = !b.failed && HMAC(EVP_sha256(), key, PR_PLAN_KEY_LEN, (const uint8_t *)b.data, b.len, md, &mdlen) &&
	     mdlen == SHA256_DIGEST_LENGTH;
	buf_free(&b);
	if(!ok)
		return false;
	pr_plan_key_id(key, id);
	hex(md, SHA256_DIGEST_LENGTH, mdhex);
	snprintf(out, PR_PLAN_SEAL_MAX, SEAL_VERSION ".%.8s.%.64s", id, mdhex);
	return true;
}

pr_seal_check pr_plan_seal_verify(const uint8_t *key, const kube_provreq *pr, char *why, size_t len)
{
	char *vals[PR_PLAN_SEAL_NFIELDS], *have, want[PR_PLAN_SEAL_MAX], id[9];
	pr_seal_check r;
	size_t i, wl;
	if(!key) {
		snprintf(why, len, "this replica has no plan key to verify it with (the Secret could not be read)");
		return PR_SEAL_NO_KEY;
	}
	if(!(have = pr_details_get(pr, PR_DETAIL_PLAN_SEAL))) {
		snprintf(why, len, "it carries no seal (%s): provreqd did not write it, or a provreqd older than plan "
			 "seals did", PR_DETAIL_PLAN_SEAL);
		return PR_SEAL_MISSING;
	}
	for(i = 0; i < PR_PLAN_SEAL_NFIELDS; i++)
		vals[i] = pr_details_get(pr, pr_plan_seal_fields[i]);
	pr_plan_key_id(key, id);
	if(!pr_plan_seal(key, pr->meta.uid, (const char *const *)vals, want)) {
		snprintf(why, len, "its seal cannot be computed (libcrypto failed)");
		r = PR_SEAL_WRONG;
	} else if((wl = strlen(want)) == strlen(have) && CRYPTO_memcmp(want, have, wl) == 0) {
		r = PR_SEAL_OK;
	} else if(strncmp(have, SEAL_VERSION ".", 3) || strncmp(have + 3, id, 8)) {
		snprintf(why, len, "its seal was made with another plan key (%.12s; this replica's is %s)",
			 strncmp(have, SEAL_VERSION ".", 3) ? "unknown" : have + 3, id);
		r = PR_SEAL_OTHER_KEY;
	} else {
		snprintf(why, len, "its seal does not match the record: a field was changed by someone other than "
			 "provreqd");
		r = PR_SEAL_WRONG;
	}
	for(i = 0; i < PR_PLAN_SEAL_NFIELDS; i++)
		free(vals[i]);
	free(have);
	return r;
}

const char *pr_seal_check_name(pr_seal_check c)
{
	switch(c) {
	case PR_SEAL_OK: return "ok";
	case PR_SEAL_NO_KEY: return "no_key";
	case PR_SEAL_MISSING: return "missing";
	case PR_SEAL_OTHER_KEY: return "other_key";
	default: return "wrong";
	}
}
