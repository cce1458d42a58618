/* The keyed digest (HMAC-SHA256) over the scale-up plan record a request's
 * status carries (docs/operator.md "What someone with status-write can and
 * cannot make provreqd do").
 *
 * Anyone allowed to patch provisioningrequests/status can write the plan
 * record's fields (plan id, groups, deltas, target sizes before, deadline,
 * phase, the instances known before and their ownership rule, the leader
 * term, the records of groups a plan creates). provreqd acts on that record
 * only when its seal, PR_DETAIL_PLAN_SEAL, verifies under the plan key: 32
 * random bytes that only provreqd's identity can read (a Secret in its own
 * namespace, pr_plan_key_load) and that every replica and shard shares.
 *
 * The seal covers the request's uid and every sealed field, each with its
 * name and length (so no value can be shifted into another), absent
 * fields included. It is rewritten with every status write that changes a
 * sealed field (the phase moves as the plan runs): src/provreq/status.c. */
#ifndef PRD_CLASSES_PLAN_SEAL_H
#define PRD_CLASSES_PLAN_SEAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kube/objects.h"

#define PR_PLAN_KEY_LEN 32
/* "v1." + 8 hex of the key's id + "." + 64 hex of the digest, and NUL. */
#define PR_PLAN_SEAL_MAX 80
#define PR_PLAN_SEAL_NFIELDS 9

/* The sealed provisioningClassDetails keys, in the order they are
 * digested. */
extern const char *const pr_plan_seal_fields[PR_PLAN_SEAL_NFIELDS];

/* Is `key` one of pr_plan_seal_fields (or one of its pieces, "key.N")? */
bool pr_plan_seal_covers(const char *key);

/* The seal of a record: `vals[i]` is the value of pr_plan_seal_fields[i]
 * (NULL: absent). Written into `out`. False only when libcrypto fails. */
bool pr_plan_seal(const uint8_t key[PR_PLAN_KEY_LEN], const char *uid, const char *const vals[PR_PLAN_SEAL_NFIELDS],
		  char out[PR_PLAN_SEAL_MAX]);

/* The id of a key, as the seal names it: 8 hex characters of
 * SHA-256("provreqd plan key id" || key). */
void pr_plan_key_id(const uint8_t key[PR_PLAN_KEY_LEN], char out[9]);

typedef enum {
	PR_SEAL_OK = 0,
	PR_SEAL_NO_KEY,    /* this replica has no plan key: nothing can be verified */
	PR_SEAL_MISSING,   /* the status has no seal (forged, or written before seals) */
	PR_SEAL_OTHER_KEY, /* sealed under another key (the Secret was replaced) */
	PR_SEAL_WRONG      /* the seal does not match the record: a field was changed */
} pr_seal_check;

/* Does the plan record in pr's status verify under `key` (NULL: none)?
 * On anything but PR_SEAL_OK, `why` says what is wrong for a person. */
pr_seal_check pr_plan_seal_verify(const uint8_t *key, const kube_provreq *pr, char *why, size_t len);

/* The metric label of a check's outcome (no_key, missing, other_key,
 * wrong). */
const char *pr_seal_check_name(pr_seal_check c);

#endif
