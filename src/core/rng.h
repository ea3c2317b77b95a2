/* splitmix64 (Steele, Lea and Flood, 2014): a small, fast generator for
 * test data, benchmarks and the demo's data set; never for dropout, whose
 * masks come from Philox (core/philox.h). Header-only. */
#ifndef BERTC_RNG_H
#define BERTC_RNG_H

#include <stdint.h>

/* Advances *state and returns the next 64 random bits. Any seed works,
 * 0 included. */
static inline uint64_t splitmix64_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

#endif
