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

/* One round on the counter c0..c3 and key k0, k1 (variables, updated in
 * place). A macro so that the CPU backend's vectorised mask loop
 * (backend/cpu/dropout_mask.c) runs the very same rounds. */
#define PHILOX_ROUND(c0, c1, c2, c3, k0, k1)                                                                  \
    do {                                                                                                       \
        uint64_t philox_p0_ = (uint64_t)0xD2511F53u * (c0);                                                    \
        uint64_t philox_p1_ = (uint64_t)0xCD9E8D57u * (c2);                                                    \
        uint32_t philox_n0_ = (uint32_t)(philox_p1_ >> 32) ^ (c1) ^ (k0);                                      \
        uint32_t philox_n2_ = (uint32_t)(philox_p0_ >> 32) ^ (c3) ^ (k1);                                      \
        (c0) = philox_n0_;                                                                                     \
        (c1) = (uint32_t)philox_p1_;                                                                           \
        (c2) = philox_n2_;                                                                                     \
        (c3) = (uint32_t)philox_p0_;                                                                           \
        (k0) += 0x9E3779B9u;                                                                                   \
        (k1) += 0xBB67AE85u;                                                                                   \
    } while (0)

/* The top 24 bits of a draw as a float in [0, 1). */
#define PHILOX_UNIT(x) ((float)((x) >> 8) * (1.0f / 16777216.0f))

PHILOX_HD philox_u32x4 philox4x32(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0, uint32_t k1)
{
    for (int r = 0; r < 10; r++) PHILOX_ROUND(c0, c1, c2, c3, k0, k1);
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
    return PHILOX_UNIT(r.v[i & 3]);
}

/* Inverted dropout: keep element i with probability 1 - p. */
PHILOX_HD int philox_keep(philox_stream s, uint64_t i, float p)
{
    return philox_uniform(s, i) >= p;
}

#endif
