/* Injectable clock. Every piece of the controller reads time through a
 * `clk`, so tests and `provreqd simulate` can move time by hand.
 *
 * Times are nanoseconds: wall time since the Unix epoch (UTC) and a
 * monotonic counter for measuring intervals.
 *
 * Waiting goes through the clock too (clk_sleep): the real clock sleeps,
 * a fake clock moves itself forward by the time asked for and returns at
 * once, so code that paces itself runs deterministically in tests. A fake
 * clock is plain data: move it (by hand or by clk_sleep) from one thread
 * at a time. */
#ifndef PRD_UTIL_CLOCK_H
#define PRD_UTIL_CLOCK_H

#include <stdint.h>

#define PRD_NS_PER_SEC 1000000000LL
#define PRD_NS_PER_MS 1000000LL

typedef struct clk clk;
struct clk {
	int64_t (*wall_ns)(const clk *c);
	int64_t (*mono_ns)(const clk *c);
	/* Wait `ns` (> 0). The clock is const for its readers only: a fake
	 * clock's sleep moves the (non-const) clock it was initialised on. */
	void (*sleep_ns)(const clk *c, int64_t ns);
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
/* Wait `ns` on clock c; nothing happens for ns <= 0. The real clock
 * sleeps the whole time (resuming after signals). */
static inline void clk_sleep(const clk *c, int64_t ns)
{
	if(ns > 0)
		c->sleep_ns(c, ns);
}

#endif
