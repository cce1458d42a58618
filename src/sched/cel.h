/* A subset of CEL for DRA device selectors (DeviceClass and request
 * `selectors[].cel.expression`), compiled once and evaluated per device.
 *
 * The subset, and nothing else:
 *   device.driver
 *   device.attributes["domain"].name   device.attributes["domain"]["name"]
 *   device.capacity["domain"].name     device.capacity["domain"]["name"]
 *   quantity("10Gi")
 *   q.compareTo(q2)  q.isGreaterThan(q2)  q.isLessThan(q2)   (quantities)
 *   string ('..' or ".."), int (decimal or hex, optional leading -), true,
 *   false literals; == != < <= > >= && || ! and parentheses.
 * Like Kubernetes' CEL environment, quantities have no ordering operators
 * (only ==, != and the methods above): `q < q2` is refused at compile time.
 *
 * Anything else (other identifiers, functions, methods, `in`, `?:`,
 * arithmetic, lists, maps, floats, bytes, raw strings, macros) fails to
 * compile with PRD_EUNSUPPORTED and a message naming the construct;
 * malformed text fails with PRD_EINVAL. A caller must never treat such a
 * selector as matching.
 *
 * Evaluation follows CEL: a missing attribute or capacity, or operands of
 * different types, is a runtime error (the Kubernetes allocator then
 * aborts the allocation); `false && error` is false and `true || error`
 * true. */
#ifndef PRD_SCHED_CEL_H
#define PRD_SCHED_CEL_H

#include "sched/sched.h"

typedef struct sched_cel sched_cel;

/* Compile `expr` (NUL-terminated, at most SCHED_CEL_MAX_LEN bytes). *out is
 * the caller's, freed with sched_cel_free(). */
#define SCHED_CEL_MAX_LEN 10240
int sched_cel_compile(const char *expr, sched_cel **out, prd_err *e);
void sched_cel_free(sched_cel *c);

/* The source text the expression was compiled from (borrowed). */
const char *sched_cel_text(const sched_cel *c);

/* Evaluate for one device: 1 (true), 0 (false), or a negative code with
 * `e` saying why (a runtime error: the device cannot be judged). */
int sched_cel_eval(const sched_cel *c, const sched_device *d, prd_err *e);

#endif
