/* PRD_ASSERT(cond): an invariant the code relies on, checked in the
 * checking builds and compiled out in a release build.
 *
 * Checked when the tree is configured with --enable-sanitizers,
 * --enable-tsan or --enable-asserts (configure then passes
 * -DPRD_ASSERTS=1), which is how CI builds the unit tests and the
 * deterministic simulation (tests/dst/dst). A failure prints
 * "FILE:LINE: FUNCTION: assertion failed: EXPR" on stderr and aborts.
 *
 * An assertion states something that cannot be false unless provreqd has
 * a bug: never use it for input from outside (API objects, flags, driver
 * answers, the state file), which becomes a condition, an Event, a log
 * line and a metric (CONVENTIONS.md). In a release build the expression is
 * not evaluated (it is only type-checked), so it must have no side
 * effects. */
#ifndef PRD_UTIL_ASSERT_H
#define PRD_UTIL_ASSERT_H

#if defined(PRD_ASSERTS) && PRD_ASSERTS
#define PRD_ASSERT(cond) \
	((cond) ? (void)0 : prd_assert_fail(__FILE__, __LINE__, __func__, #cond))
#define PRD_ASSERTS_ON 1
#else
#define PRD_ASSERT(cond) ((void)sizeof(!(cond)))
#define PRD_ASSERTS_ON 0
#endif

/* Reports a failed PRD_ASSERT on stderr and aborts; never returns. */
_Noreturn void prd_assert_fail(const char *file, int line, const char *func, const char *expr);

#endif
