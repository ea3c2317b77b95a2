/* Dropout multipliers from the Philox stream: mul[j] = keep(first + j) ?
 * scale : 0, keep as philox_keep (core/philox.h). Dropout and attention
 * draw every mask here, forward and backward, so this is the one place that
 * must agree with philox_keep bit for bit (test_dropout checks every
 * element).
 *
 * One Philox block gives the 4 elements 4 blk .. 4 blk + 3. The blocks are
 * computed 8 at a time: with AVX2 intrinsics where the CPU has AVX2 (about
 * 1 ns per element, 25x philox_keep), otherwise with a loop written for
 * GCC's vectorizer. */
#include "backend/cpu/cpu_math.h"

#include "backend/cpu/cpu.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(BERTC_NO_CLONES)
#define HAVE_AVX2_PATH 1
#include <immintrin.h>
#endif

/* Portable: the rounds of philox4x32 (PHILOX_ROUND) inline, for the vectorizer. */
CPU_CLONES static void mask_blocks_c(float *restrict mul, uint64_t blk0, size_t nb, philox_stream s, float p,
                                     float scale)
{
    const uint32_t key0 = (uint32_t)s.seed, key1 = (uint32_t)(s.seed >> 32);
#pragma omp simd
    for (size_t j = 0; j < nb; j++) {
        uint64_t blk = blk0 + j;
        uint32_t c0 = (uint32_t)blk, c1 = (uint32_t)(blk >> 32), c2 = s.stream, c3 = s.step;
        uint32_t k0 = key0, k1 = key1;
#pragma GCC unroll 10
        for (int r = 0; r < 10; r++) PHILOX_ROUND(c0, c1, c2, c3, k0, k1);
        /* the same float compare as philox_keep */
        mul[4 * j + 0] = PHILOX_UNIT(c0) >= p ? scale : 0.0f;
        mul[4 * j + 1] = PHILOX_UNIT(c1) >= p ? scale : 0.0f;
        mul[4 * j + 2] = PHILOX_UNIT(c2) >= p ? scale : 0.0f;
        mul[4 * j + 3] = PHILOX_UNIT(c3) >= p ? scale : 0.0f;
    }
}

#ifdef HAVE_AVX2_PATH
/* hi and lo 32 bits of the products of the 8 lanes of a with m */
__attribute__((target("avx2"))) static inline void mulhilo8(__m256i a, __m256i m, __m256i *hi, __m256i *lo)
{
    __m256i pe = _mm256_mul_epu32(a, m);                        /* lanes 0,2,4,6, 64-bit */
    __m256i po = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m); /* lanes 1,3,5,7 */
    *lo = _mm256_blend_epi32(pe, _mm256_slli_epi64(po, 32), 0xAA);
    *hi = _mm256_blend_epi32(_mm256_srli_epi64(pe, 32), po, 0xAA);
}

/* Blocks blk0 .. blk0+nb-1, nb a multiple of 8, all with the same high 32
 * bits of the block number. */
__attribute__((target("avx2"))) static void mask_blocks_avx2(float *mul, uint64_t blk0, size_t nb,
                                                             philox_stream s, float p, float scale)
{
    const __m256i M0 = _mm256_set1_epi32((int)0xD2511F53u), M1 = _mm256_set1_epi32((int)0xCD9E8D57u);
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i c1i = _mm256_set1_epi32((int)(uint32_t)(blk0 >> 32));
    const __m256i c2i = _mm256_set1_epi32((int)s.stream), c3i = _mm256_set1_epi32((int)s.step);
    __m256i key0[10], key1[10];
    uint32_t k0 = (uint32_t)s.seed, k1 = (uint32_t)(s.seed >> 32);
    for (int r = 0; r < 10; r++, k0 += 0x9E3779B9u, k1 += 0xBB67AE85u) {
        key0[r] = _mm256_set1_epi32((int)k0);
        key1[r] = _mm256_set1_epi32((int)k1);
    }
    /* u >= p with u = (r >> 8) 2^-24 is (r >> 8) >= ceil(p 2^24), exactly:
     * p 2^24 is exact in float and (r >> 8) < 2^24 */
    float th = p * 16777216.0f;
    int32_t need = th <= 0.0f ? 0 : !(th < 16777216.0f) ? 16777216 /* also NaN: u >= NaN is false */
                                                        : (int32_t)th + ((float)(int32_t)th < th);
    const __m256i T = _mm256_set1_epi32(need - 1);
    const __m256 S = _mm256_set1_ps(scale);
    for (size_t j = 0; j < nb; j += 8) {
        __m256i c0 = _mm256_add_epi32(_mm256_set1_epi32((int)(uint32_t)(blk0 + j)), lane);
        __m256i c1 = c1i, c2 = c2i, c3 = c3i;
        for (int r = 0; r < 10; r++) {
            __m256i h0, l0, h1, l1;
            mulhilo8(c0, M0, &h0, &l0);
            mulhilo8(c2, M1, &h1, &l1);
            c0 = _mm256_xor_si256(_mm256_xor_si256(h1, c1), key0[r]);
            c2 = _mm256_xor_si256(_mm256_xor_si256(h0, c3), key1[r]);
            c1 = l1;
            c3 = l0;
        }
        __m256 m0 = _mm256_and_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_srli_epi32(c0, 8), T)), S);
        __m256 m1 = _mm256_and_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_srli_epi32(c1, 8), T)), S);
        __m256 m2 = _mm256_and_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_srli_epi32(c2, 8), T)), S);
        __m256 m3 = _mm256_and_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_srli_epi32(c3, 8), T)), S);
        /* mK holds output K of blocks 0..7; element 4 block + K goes to
         * mul[4 j + 4 block + K]: a 4x8 transpose */
        __m256 t0 = _mm256_unpacklo_ps(m0, m1), t1 = _mm256_unpackhi_ps(m0, m1);
        __m256 t2 = _mm256_unpacklo_ps(m2, m3), t3 = _mm256_unpackhi_ps(m2, m3);
        __m256 b04 = _mm256_shuffle_ps(t0, t2, 0x44), b15 = _mm256_shuffle_ps(t0, t2, 0xEE);
        __m256 b26 = _mm256_shuffle_ps(t1, t3, 0x44), b37 = _mm256_shuffle_ps(t1, t3, 0xEE);
        float *o = mul + 4 * j;
        _mm256_storeu_ps(o + 0, _mm256_permute2f128_ps(b04, b15, 0x20));
        _mm256_storeu_ps(o + 8, _mm256_permute2f128_ps(b26, b37, 0x20));
        _mm256_storeu_ps(o + 16, _mm256_permute2f128_ps(b04, b15, 0x31));
        _mm256_storeu_ps(o + 24, _mm256_permute2f128_ps(b26, b37, 0x31));
    }
}

static int have_avx2(void)
{
    static int known = -1;
    if (known < 0) known = __builtin_cpu_supports("avx2") ? 1 : 0;
    return known;
}
#endif

static void mask_blocks(float *mul, uint64_t blk0, size_t nb, philox_stream s, float p, float scale)
{
#ifdef HAVE_AVX2_PATH
    while (nb >= 8 && have_avx2()) {
        /* stop where the block number's high word changes (c1 is per call) */
        uint64_t room = ((blk0 >> 32) + 1) << 32;
        size_t run = room - blk0 < nb ? (size_t)(room - blk0) : nb;
        run &= ~(size_t)7;
        if (run == 0) break;
        mask_blocks_avx2(mul, blk0, run, s, p, scale);
        mul += 4 * run;
        blk0 += run;
        nb -= run;
    }
#endif
    if (nb) mask_blocks_c(mul, blk0, nb, s, p, scale);
}

void cpu_dropout_mask(float *mul, philox_stream rng, uint64_t first, size_t count, float p, float scale)
{
    uint64_t i = first, end = first + count;
    for (; i < end && (i & 3); i++) mul[i - first] = philox_keep(rng, i, p) ? scale : 0.0f;
    size_t nb = (size_t)((end - i) / 4);
    if (nb) {
        mask_blocks(mul + (i - first), i >> 2, nb, rng, p, scale);
        i += 4 * (uint64_t)nb;
    }
    for (; i < end; i++) mul[i - first] = philox_keep(rng, i, p) ? scale : 0.0f;
}
