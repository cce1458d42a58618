/* Error codes and messages shared by every module.
 *
 * Fallible functions return 0 on success or a negative PRD_E* code. Where a
 * person will read the failure, the function also takes a `prd_err *` and
 * fills in a message; passing NULL is always allowed. */
#ifndef PRD_UTIL_ERR_H
#define PRD_UTIL_ERR_H

#include <stddef.h>

enum {
	PRD_OK = 0,
	PRD_ENOMEM = -1,     /* allocation failed */
	PRD_EINVAL = -2,     /* malformed input */
	PRD_EIO = -3,        /* file, socket or database failure */
	PRD_ENOTFOUND = -4,  /* the thing asked for does not exist */
	PRD_EEXIST = -5,     /* already exists */
	PRD_ECONFLICT = -6,  /* optimistic concurrency conflict */
	PRD_ERANGE = -7,     /* value out of representable range */
	PRD_ETIMEDOUT = -8,
	PRD_EPERM = -9,      /* permission denied */
	PRD_EGONE = -10,     /* expired (e.g. resourceVersion too old) */
	PRD_EAGAIN = -11,    /* transient; retry later */
	PRD_EUNSUPPORTED = -12,
	PRD_ECORRUPT = -13,  /* stored data is damaged */
	PRD_EINTERNAL = -14
};

#define PRD_ERR_MSG_MAX 512

typedef struct prd_err {
	int code;
	char msg[PRD_ERR_MSG_MAX];
} prd_err;

/* Record `code` and a printf-style message in `e` (which may be NULL) and
 * return `code`, so callers can write `return prd_err_set(e, ...)`. */
int prd_err_set(prd_err *e, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Prefix the message already in `e` with more context ("loading x: ...").
 * Returns e->code (or PRD_EINTERNAL when e is NULL). */
int prd_err_prefix(prd_err *e, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

void prd_err_clear(prd_err *e);

/* Short stable name of a code, e.g. "ENOMEM". Never NULL. */
const char *prd_strerror(int code);

#endif
