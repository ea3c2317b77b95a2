/* Philox4x32-10, the counter-based generator of Salmon et al. (2011), as
 * cuRAND and PyTorch use it. A draw is a pure function of (key, counter), so
 * a dropout mask depends only on (seed, step, layer, site, element) and a
 * resumed run, or another backend, draws exactly the same one. Header-only
 * and usable from CUDA C (PHILOX_HD). */
#ifndef BERTC_PHILOX_H
#define BERTC_PHILOX_H

#include <stdint.h>

#ifdef __CUDACC__
#define PHILOX_HD __host__ __device__ __forceinline__
#else
#define PHILOX_HD static inline
#endif

typedef struct {
    uint32_t v[4];
} philox_u32x4;

PHILOX_HD philox_u32x4 philox4x32(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0, uint32_t k1)
{
    for (int r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c0;
        uint64_t p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c0 = n0;
        c1 = (uint32_t)p1;
        c2 = n2;
        c3 = (uint32_t)p0;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    philox_u32x4 out = {{c0, c1, c2, c3}};
    return out;
}

/* The random stream of one dropout site in one training step:
 *   key     = seed
 *   counter = (element / 4, stream low, stream high, step)
 * where stream = layer * 16 + site. Element i uses lane i % 4 of the block
 * element / 4. */
typedef struct {
    uint64_t seed;   /* the run's seed */
    uint32_t step;   /* optimizer step * micro-batches + micro-batch index */
    uint32_t stream; /* layer * 16 + site (see dropout sites in bert.h) */
} philox_stream;

/* Uniform in [0, 1) with 24 bits, for element i of the stream. */
PHILOX_HD float philox_uniform(philox_stream s, uint64_t i)
{
    philox_u32x4 r = philox4x32((uint32_t)(i >> 2), (uint32_t)(i >> 34), s.stream, s.step, (uint32_t)s.seed,
                                (uint32_t)(s.seed >> 32));
    return (float)(r.v[i & 3] >> 8) * (1.0f / 16777216.0f);
}

/* Inverted dropout: keep element i with probability 1 - p. */
PHILOX_HD int philox_keep(philox_stream s, uint64_t i, float p)
{
    return philox_uniform(s, i) >= p;
}

#endif
