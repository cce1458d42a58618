/* provisioningClassDetails values of any length: a long value split into
 * `key`, `key.2`, ... pieces under the CRD's per-value cap, and read back whole. */
#include "classes/details.h"
#include "classes/vocab.h"
#include "state/state.h"
#include "util/buf.h"
#include "util/rfc3339.h"
#include "util/str.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void piece_key(char *out, size_t len, const char *key, size_t i)
{
	if(i == 0)
		snprintf(out, len, "%s", key);
	else
		snprintf(out, len, "%s.%zu", key, i + 1);
}

int pr_details_put(json_object *patch, const char *key, const char *value, prd_err *err)
{
	size_t len = value ? strlen(value) : 0, pieces = value ? (len + PR_DETAIL_CHUNK - 1) / PR_DETAIL_CHUNK : 0, i;
	char k[300];
	if(value && pieces == 0)
		pieces = 1;
	if(pieces > PR_DETAIL_MAX_CHUNKS)
		return prd_err_set(err, PRD_ERANGE, "%s: %zu bytes do not fit in %d provisioningClassDetails values", key,
				   len, PR_DETAIL_MAX_CHUNKS);
	for(i = 0; i < PR_DETAIL_MAX_CHUNKS; i++) {
		piece_key(k, sizeof(k), key, i);
		if(i < pieces) {
			size_t off = i * PR_DETAIL_CHUNK, n = len - off < PR_DETAIL_CHUNK ? len - off : PR_DETAIL_CHUNK;
			json_object_object_add(patch, k, json_object_new_string_len(value + off, (int)n));
		} else {
			json_object_object_add(patch, k, NULL);
		}
	}
	return 0;
}

static const char *detail(const kube_provreq *pr, const char *key)
{
	size_t i;
	for(i = 0; i < pr->nclass_details; i++)
		if(pr->class_details[i].key && !strcmp(pr->class_details[i].key, key))
			return pr->class_details[i].value;
	return NULL;
}

char *pr_details_get(const kube_provreq *pr, const char *key)
{
	const char *v = detail(pr, key);
	char k[300];
	buf b;
	size_t i;
	if(!v)
		return NULL;
	buf_init(&b);
	buf_append_str(&b, v);
	/* A full first piece may have more after it. */
	for(i = 1; i < PR_DETAIL_MAX_CHUNKS && strlen(v) == PR_DETAIL_CHUNK; i++) {
		piece_key(k, sizeof(k), key, i);
		if(!(v = detail(pr, k)))
			break;
		buf_append_str(&b, v);
	}
	if(b.failed) {
		buf_free(&b);
		return NULL;
	}
	return buf_detach(&b);
}

bool pr_details_plan_open(const kube_provreq *pr)
{
	char *phase = pr_details_get(pr, PR_DETAIL_PHASE);
	state_phase ph;
	bool open = phase && state_phase_parse(phase, &ph) == 0 && !state_phase_is_terminal(ph) &&
		    ph != STATE_PHASE_DONE;
	free(phase);
	return open;
}

bool pr_details_time(const char *text, int64_t *ns)
{
	if(!text || !*text)
		return false;
	if(rfc3339_parse(text, ns, NULL) == 0)
		return true;
	return str_to_int64(text, ns) == 0 && *ns >= 0;
}
