/* Kubernetes resource.Quantity, parsed, printed and compared the way
 * k8s.io/apimachinery does it.
 *
 * A qty is a plain value (no heap, safe to copy, embed and memset to zero;
 * an all-zero qty is 0 in DecimalSI format). It holds the amount as a signed
 * 128-bit count of nano units, so every quantity apimachinery keeps (it
 * rounds to 1n on parse) is exact here, within ±(2^127-1)n, about
 * ±1.7×10^29. Parsing or arithmetic that would leave that range returns
 * PRD_ERANGE instead of a wrong answer. No floating point is used.
 *
 * Grammar (apimachinery's):
 *   <quantity> ::= [+-] <number> <suffix>
 *   <number>   ::= <digits> | <digits>.<digits> | <digits>. | .<digits>
 *   <suffix>   ::= "" | n u m k M G T P E | Ki Mi Gi Ti Pi Ei | (e|E)[+-]<digits>
 * No white space anywhere. Like apimachinery, the digits may be omitted
 * ("-", ".", "Ki" all parse as zero); "1K", "1ki", "5e", "1.2.3" fail.
 *
 * Rounding and limits follow apimachinery: a value finer than 1n is rounded
 * away from zero to the next nano ("3.001n" → 4n, "0.1n" → 1n); a binary-SI
 * value is silently capped at 2^63-1 in magnitude ("9Ei" → 2^63-1); a
 * binary-SI value that rounds to less than 1 in magnitude becomes DecimalSI.
 *
 * Canonical string (apimachinery's String()): the value in the
 * quantity's format with the largest suffix that leaves no fraction:
 * DecimalSI "1500m", "1536Mi" for BinarySI 1.5Gi, "1e3" for DecimalExponent;
 * a BinarySI value below 1024 in magnitude, or one that is not a whole
 * number, prints as DecimalSI ("1.5Ki" → "1536", "0.5Ki" → "512",
 * "100.035Ki" → "102435840m"). Zero always prints "0". A DecimalSI value
 * past the E suffix keeps e notation ("1000E" → "1e21"), and a BinarySI
 * value past Ei prints in Ei ("1024Ei"), so the string always parses back
 * to the same amount. */
#ifndef PRD_KUBE_QUANTITY_H
#define PRD_KUBE_QUANTITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

typedef enum qty_format {
	QTY_DECIMAL_SI = 0,       /* 12M  = 12 * 10^6 */
	QTY_BINARY_SI = 1,        /* 12Mi = 12 * 2^20 */
	QTY_DECIMAL_EXPONENT = 2  /* 12e6 */
} qty_format;

/* The amount is private: use the functions below. */
typedef struct qty {
	uint64_t lo;      /* low 64 bits of the two's-complement nano count */
	int64_t hi;       /* high 64 bits */
	uint8_t format;   /* a qty_format */
} qty;

/* Longest canonical string, including the terminating NUL. */
#define QTY_STR_MAX 48

/* Parse a whole NUL-terminated string. On failure *out is left untouched,
 * PRD_EINVAL (malformed) or PRD_ERANGE (well formed, out of range) is
 * returned and `err` (may be NULL) says why. */
int qty_parse(const char *s, qty *out, prd_err *err);

/* Like qty_parse for the n bytes at s (which need not be terminated; a NUL
 * byte inside them is malformed). */
int qty_parse_n(const char *s, size_t n, qty *out, prd_err *err);

/* Write the canonical string into buf (size n). Returns 0, or PRD_ERANGE
 * (buf holds "" if n > 0) when n is too small; QTY_STR_MAX always fits. */
int qty_format_str(const qty *q, char *buf, size_t n);

/* Convenience for logs and messages: the canonical string in buf. */
const char *qty_str(const qty *q, char buf[QTY_STR_MAX]);

/* Exact constructors: v, or v/1000, in the given format (an unknown format
 * value becomes QTY_DECIMAL_EXPONENT, as apimachinery does). */
qty qty_from_int64(int64_t v, qty_format f);
qty qty_from_milli(int64_t v, qty_format f);

qty_format qty_get_format(const qty *q);
void qty_set_format(qty *q, qty_format f);

/* q += y / q -= y. If q is zero beforehand it takes y's format, otherwise
 * it keeps its own (apimachinery's Add/Sub). On PRD_ERANGE q is unchanged. */
int qty_add(qty *q, const qty *y);
int qty_sub(qty *q, const qty *y);

/* q *= n, keeping q's format. On PRD_ERANGE q is unchanged. */
int qty_mul(qty *q, int64_t n);

/* q = -q (always representable: the range is symmetric). */
void qty_neg(qty *q);

/* -1, 0 or 1 as a <, ==, > b (formats are ignored). */
int qty_cmp(const qty *a, const qty *b);
int qty_cmp_int64(const qty *a, int64_t b);
bool qty_equal(const qty *a, const qty *b);

bool qty_is_zero(const qty *q);
int qty_sign(const qty *q);   /* -1, 0 or 1 */

/* The value, and the value in thousandths, rounded away from zero to a
 * whole number (apimachinery's Value/MilliValue: "1m" has value 1, "1.5"
 * has milli-value 1500, "0.1m" has milli-value 1). PRD_ERANGE when the
 * result does not fit an int64 (apimachinery would silently overflow). */
int qty_value(const qty *q, int64_t *out);
int qty_milli_value(const qty *q, int64_t *out);

#endif
