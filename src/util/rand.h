/* splitmix64: a small, seedable generator for choices that must be
 * reproducible from a seed (the expander's random strategy, test clouds,
 * simulations). Not for anything secret. */
#ifndef PRD_UTIL_RAND_H
#define PRD_UTIL_RAND_H

#include <stdint.h>

static inline uint64_t prd_splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

#endif
