/* The injectable clock: wall and monotonic nanoseconds and sleeping, real or
 * fake (moved by hand or by clk_sleep in tests and simulate). */
#include "util/clock.h"

#include <errno.h>
#include <time.h>

static int64_t real_wall(const clk *c)
{
	struct timespec ts;
	(void)c;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * PRD_NS_PER_SEC + ts.tv_nsec;
}

static int64_t real_mono(const clk *c)
{
	struct timespec ts;
	(void)c;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * PRD_NS_PER_SEC + ts.tv_nsec;
}

static void real_sleep(const clk *c, int64_t ns)
{
	struct timespec ts;
	(void)c;
	ts.tv_sec = (time_t)(ns / PRD_NS_PER_SEC);
	ts.tv_nsec = (long)(ns % PRD_NS_PER_SEC);
	while(nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static const clk real_clock = { real_wall, real_mono, real_sleep, 0, 0 };

const clk *clk_real(void)
{
	return &real_clock;
}

static int64_t fake_wall(const clk *c) { return c->fake_wall; }
static int64_t fake_mono(const clk *c) { return c->fake_mono; }

/* Every fake clock is a `clk` its owner declared without const (only
 * clk_fake_init installs this function), so moving it here is sound. */
static void fake_sleep(const clk *c, int64_t ns)
{
	clk_fake_advance((clk *)c, ns);
}

void clk_fake_init(clk *c, int64_t start_wall_ns)
{
	c->wall_ns = fake_wall;
	c->mono_ns = fake_mono;
	c->sleep_ns = fake_sleep;
	c->fake_wall = start_wall_ns;
	c->fake_mono = 0;
}

void clk_fake_advance(clk *c, int64_t delta_ns)
{
	c->fake_wall += delta_ns;
	c->fake_mono += delta_ns;
}

void clk_fake_set(clk *c, int64_t wall_ns)
{
	if(wall_ns > c->fake_wall)
		c->fake_mono += wall_ns - c->fake_wall;
	c->fake_wall = wall_ns;
}
