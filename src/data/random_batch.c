/* The benchmarks' random batch (random_batch.h). */
#include "data/random_batch.h"

#include "core/rng.h"

#include <stddef.h>

void random_batch_fill(int32_t *ids, int32_t *types, int32_t *mask, int32_t *start, int32_t *end, int B, int T, int V,
                       int lo_id, uint64_t seed)
{
    uint64_t s = seed;
    for (int b = 0; b < B; b++) {
        int len = b % 2 ? T - T / 4 : T;
        if (len < 1) len = 1;
        for (int t = 0; t < T; t++) {
            size_t i = (size_t)b * T + t;
            ids[i] = t < len ? (int32_t)(lo_id + splitmix64_next(&s) % (uint64_t)(V - lo_id)) : 0;
            types[i] = t >= T / 4 && t < len;
            mask[i] = t < len;
        }
        start[b] = (int32_t)(splitmix64_next(&s) % (uint64_t)len);
        end[b] = start[b] + (int32_t)(splitmix64_next(&s) % 8);
        if (end[b] >= len) end[b] = len - 1;
    }
}
