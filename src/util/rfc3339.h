/* RFC 3339 timestamps as Kubernetes writes and reads them.
 *
 * metav1.Time is serialised with second precision ("2024-05-01T10:00:00Z"),
 * metav1.MicroTime with six fractional digits. Parsing accepts any number of
 * fractional digits (up to nanoseconds; more are truncated), 'Z'/'z' or a
 * numeric offset, and 'T'/'t' as separator. */
#ifndef PRD_UTIL_RFC3339_H
#define PRD_UTIL_RFC3339_H

#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

#define RFC3339_MAX 40

/* Parse into nanoseconds since the epoch (UTC). */
int rfc3339_parse(const char *s, int64_t *out_ns, prd_err *err);
/* "YYYY-MM-DDTHH:MM:SSZ" (seconds, truncating). */
int rfc3339_format(int64_t ns, char *out, size_t outlen);
/* "YYYY-MM-DDTHH:MM:SS.ffffffZ" (metav1.MicroTime). */
int rfc3339_format_micro(int64_t ns, char *out, size_t outlen);

#endif
