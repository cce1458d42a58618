/* The failure path of PRD_ASSERT (util/assert.h): one line on stderr naming
 * the broken invariant, then abort() so the core and the sanitizer's report
 * point at it. */
#include "util/assert.h"

#include <stdio.h>
#include <stdlib.h>

_Noreturn void prd_assert_fail(const char *file, int line, const char *func, const char *expr)
{
	/* Not the logger: the process is in a state its code did not expect,
	 * and the line must reach stderr even if the logger is part of it. */
	fprintf(stderr, "%s:%d: %s: assertion failed: %s\n", file, line, func, expr);
	fflush(stderr);
	abort();
}
