/* Injectable clock. Every piece of the controller reads time through a
 * `clk`, so tests and `provreqd simulate` can move time by hand.
 *
 * Times are nanoseconds: wall time since the Unix epoch (UTC) and a
 * monotonic counter for measuring intervals. */
#ifndef PRD_UTIL_CLOCK_H
#define PRD_UTIL_CLOCK_H

#include <stdint.h>

#define PRD_NS_PER_SEC 1000000000LL
#define PRD_NS_PER_MS 1000000LL

typedef struct clk clk;
struct clk {
	int64_t (*wall_ns)(const clk *c);
	int64_t (*mono_ns)(const clk *c);
	/* Fake clocks only: the current time, moved by clk_fake_*. */
	int64_t fake_wall;
	int64_t fake_mono;
};

/* The process's real clock (a shared constant; never freed). */
const clk *clk_real(void);
/* Initialise a fake clock starting at wall time `start_wall_ns`. */
void clk_fake_init(clk *c, int64_t start_wall_ns);
void clk_fake_advance(clk *c, int64_t delta_ns);
void clk_fake_set(clk *c, int64_t wall_ns);

static inline int64_t clk_wall(const clk *c) { return c->wall_ns(c); }
static inline int64_t clk_mono(const clk *c) { return c->mono_ns(c); }

#endif
