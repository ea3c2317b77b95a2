/* Dropout multipliers from the Philox stream: mul[j] = keep(first + j) ?
 * scale : 0, keep as philox_keep (core/philox.h). Dropout and attention
 * draw every mask here, forward and backward, so this is the one place that
 * must agree with philox_keep bit for bit (test_dropout checks every
 * element).
 *
 * One Philox block gives the 4 elements 4 blk .. 4 blk + 3. The blocks are
 * computed 8 at a time: with AVX2 intrinsics at the dropout family's avx2
 * level (about 1 ns per element, 25x philox_keep), otherwise with a loop
 * written for GCC's vectorizer. */
#include "backend/cpu/cpu_math.h"

#include "backend/cpu/cpu.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(BERTC_NO_CLONES)
#define HAVE_AVX2_PATH 1
#include <immintrin.h>
#endif

/* Portable: the rounds of philox4x32 (PHILOX_ROUND) inline, for the vectorizer. */
CPU_INLINE void mask_blocks_c_code(float *restrict mul, uint64_t blk0, size_t nb, philox_stream s, float p,
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
CPU_VARIANTS(CPU_K_DROPOUT, mask_blocks_c, (float *restrict mul, uint64_t blk0, size_t nb, philox_stream s, float p,
             float scale), (mul, blk0, nb, s, p, scale))

#ifdef HAVE_AVX2_PATH
/* What the AVX2 kernels need of a stream: the round keys, the counter words
 * that all blocks of a call share, and the integer threshold of p. */
typedef struct {
    __m256i key0[10], key1[10], c1, c2, c3, T;
} philox8_consts;

/* blocks of blk0's high 32 bits */
__attribute__((target("avx2"))) static void philox8_setup(philox8_consts *k, philox_stream s, uint64_t blk0, float p)
{
    k->c1 = _mm256_set1_epi32((int)(uint32_t)(blk0 >> 32));
    k->c2 = _mm256_set1_epi32((int)s.stream);
    k->c3 = _mm256_set1_epi32((int)s.step);
    uint32_t k0 = (uint32_t)s.seed, k1 = (uint32_t)(s.seed >> 32);
    for (int r = 0; r < 10; r++, k0 += 0x9E3779B9u, k1 += 0xBB67AE85u) {
        k->key0[r] = _mm256_set1_epi32((int)k0);
        k->key1[r] = _mm256_set1_epi32((int)k1);
    }
    /* u >= p with u = (r >> 8) 2^-24 is (r >> 8) >= ceil(p 2^24), exactly:
     * p 2^24 is exact in float and (r >> 8) < 2^24 */
    float th = p * 16777216.0f;
    int32_t need = th <= 0.0f ? 0 : !(th < 16777216.0f) ? 16777216 /* also NaN: u >= NaN is false */
                                                        : (int32_t)th + ((float)(int32_t)th < th);
    k->T = _mm256_set1_epi32(need - 1);
}

/* The keep masks of the 8 blocks from block number (high word, lo): lane j
 * of m[K] is all ones where element 4 (block j) + K is kept; then the 4x8
 * transpose that puts them in element order, m[q] holding elements
 * 8 q .. 8 q + 7 of the 32. */
__attribute__((target("avx2"), always_inline)) static inline void philox8_keep(const philox8_consts *k, uint32_t lo,
                                                                                __m256 m[4])
{
    /* The rounds run on two halves, the even blocks and the odd ones, each
     * block's words in the low half of a 64-bit lane: _mm256_mul_epu32 then
     * gives a round's 64-bit products whole, whose high words are the next
     * c0, c2 after a shift and whose low words are the next c3, c1 as they
     * are (the high half of a lane is never read). */
    const __m256i M0 = _mm256_set1_epi32((int)0xD2511F53u), M1 = _mm256_set1_epi32((int)0xCD9E8D57u);
    __m256i base = _mm256_set1_epi32((int)lo);
    __m256i e0 = _mm256_add_epi32(base, _mm256_setr_epi32(0, 0, 2, 0, 4, 0, 6, 0)), e1 = k->c1, e2 = k->c2,
            e3 = k->c3;
    __m256i o0 = _mm256_add_epi32(base, _mm256_setr_epi32(1, 0, 3, 0, 5, 0, 7, 0)), o1 = k->c1, o2 = k->c2,
            o3 = k->c3;
    for (int r = 0; r < 10; r++) {
        __m256i pe0 = _mm256_mul_epu32(e0, M0), pe1 = _mm256_mul_epu32(e2, M1);
        __m256i po0 = _mm256_mul_epu32(o0, M0), po1 = _mm256_mul_epu32(o2, M1);
        e0 = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(pe1, 32), e1), k->key0[r]);
        e2 = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(pe0, 32), e3), k->key1[r]);
        o0 = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(po1, 32), o1), k->key0[r]);
        o2 = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(po0, 32), o3), k->key1[r]);
        e1 = pe1;
        e3 = pe0;
        o1 = po1;
        o3 = po0;
    }
    /* block j's words back to lane j */
    __m256i c0 = _mm256_blend_epi32(e0, _mm256_slli_epi64(o0, 32), 0xAA);
    __m256i c1 = _mm256_blend_epi32(e1, _mm256_slli_epi64(o1, 32), 0xAA);
    __m256i c2 = _mm256_blend_epi32(e2, _mm256_slli_epi64(o2, 32), 0xAA);
    __m256i c3 = _mm256_blend_epi32(e3, _mm256_slli_epi64(o3, 32), 0xAA);
    __m256 m0 = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_srli_epi32(c0, 8), k->T));
    __m256 m1 = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_srli_epi32(c1, 8), k->T));
    __m256 m2 = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_srli_epi32(c2, 8), k->T));
    __m256 m3 = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_srli_epi32(c3, 8), k->T));
    /* mK holds output K of blocks 0..7; element 4 block + K goes to
     * position 4 block + K of the 32 */
    __m256 t0 = _mm256_unpacklo_ps(m0, m1), t1 = _mm256_unpackhi_ps(m0, m1);
    __m256 t2 = _mm256_unpacklo_ps(m2, m3), t3 = _mm256_unpackhi_ps(m2, m3);
    __m256 b04 = _mm256_shuffle_ps(t0, t2, 0x44), b15 = _mm256_shuffle_ps(t0, t2, 0xEE);
    __m256 b26 = _mm256_shuffle_ps(t1, t3, 0x44), b37 = _mm256_shuffle_ps(t1, t3, 0xEE);
    m[0] = _mm256_permute2f128_ps(b04, b15, 0x20);
    m[1] = _mm256_permute2f128_ps(b26, b37, 0x20);
    m[2] = _mm256_permute2f128_ps(b04, b15, 0x31);
    m[3] = _mm256_permute2f128_ps(b26, b37, 0x31);
}

/* Blocks blk0 .. blk0+nb-1, nb a multiple of 8, all with the same high 32
 * bits of the block number. */
__attribute__((target("avx2"))) static void mask_blocks_avx2(float *mul, uint64_t blk0, size_t nb,
                                                             philox_stream s, float p, float scale)
{
    philox8_consts k;
    philox8_setup(&k, s, blk0, p);
    const __m256 S = _mm256_set1_ps(scale);
    for (size_t j = 0; j < nb; j += 8) {
        __m256 m[4];
        philox8_keep(&k, (uint32_t)(blk0 + j), m);
        float *o = mul + 4 * j;
        for (int q = 0; q < 4; q++) _mm256_storeu_ps(o + 8 * q, _mm256_and_ps(m[q], S));
    }
}

/* The same blocks as keep bits: g[j / 8] holds the 32 elements of blocks
 * j .. j+7, element 4 block + K at bit 4 block + K. */
__attribute__((target("avx2"))) static void bits_blocks_avx2(uint32_t *g, uint64_t blk0, size_t nb, philox_stream s,
                                                             float p)
{
    philox8_consts k;
    philox8_setup(&k, s, blk0, p);
    for (size_t j = 0; j < nb; j += 8) {
        __m256 m[4];
        philox8_keep(&k, (uint32_t)(blk0 + j), m);
        g[j / 8] = (uint32_t)_mm256_movemask_ps(m[0]) | (uint32_t)_mm256_movemask_ps(m[1]) << 8 |
                   (uint32_t)_mm256_movemask_ps(m[2]) << 16 | (uint32_t)_mm256_movemask_ps(m[3]) << 24;
    }
}

static int have_avx2(void)
{
    return cpu_kernel_level(CPU_K_DROPOUT) >= CPU_ISA_AVX2;
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

/* ------------------------------------------------------------------------
 * Keep bits: the same masks, one bit per element, for masks that are kept
 * between forward and backward (attention, cpu_mask_cache). */

/* Blocks blk0 .. blk0+nb-1 as keep bits in g, as bits_blocks_avx2; a last
 * partial group has 0 past block nb. */
static void bits_blocks(uint32_t *g, uint64_t blk0, size_t nb, philox_stream s, float p)
{
    size_t j = 0;
#ifdef HAVE_AVX2_PATH
    while (nb - j >= 8 && have_avx2()) {
        /* stop where the block number's high word changes (c1 is per call) */
        uint64_t b = blk0 + j, room = ((b >> 32) + 1) << 32;
        size_t run = room - b < nb - j ? (size_t)(room - b) : nb - j;
        run &= ~(size_t)7;
        if (run == 0) break;
        bits_blocks_avx2(g + j / 8, b, run, s, p);
        j += run;
    }
#endif
    for (; j < nb; j++) {
        uint64_t b = blk0 + j;
        philox_u32x4 r = philox4x32((uint32_t)b, (uint32_t)(b >> 32), s.stream, s.step, (uint32_t)s.seed,
                                    (uint32_t)(s.seed >> 32));
        uint32_t keep = 0;
        for (int K = 0; K < 4; K++) keep |= (uint32_t)(PHILOX_UNIT(r.v[K]) >= p) << K;
        if (j % 8 == 0) g[j / 8] = 0;
        g[j / 8] |= keep << (4 * (j % 8));
    }
}

/* Stream words (64 elements from the block of `first`) drawn per pass. */
#define BITS_PASS 64

void cpu_dropout_bits(uint64_t *out, philox_stream rng, uint64_t first, size_t count, float p)
{
    if (count == 0) return;
    uint64_t blk = first >> 2;
    unsigned lead = (unsigned)(first & 3); /* stream bits before element first */
    size_t nbits = lead + count, nout = (count + 63) / 64;
    uint32_t g[2 * BITS_PASS];
    for (size_t k0 = 0; k0 * 64 < nbits; k0 += BITS_PASS) {
        size_t here = nbits - k0 * 64 < (size_t)BITS_PASS * 64 ? nbits - k0 * 64 : (size_t)BITS_PASS * 64;
        size_t nw = (here + 63) / 64;
        g[2 * nw - 1] = 0;
        bits_blocks(g, blk + 16 * (uint64_t)k0, (here + 3) / 4, rng, p);
        for (size_t k = 0; k < nw; k++) {
            uint64_t w = (uint64_t)g[2 * k] | (uint64_t)g[2 * k + 1] << 32;
            size_t o = k0 + k;
            if (lead == 0) {
                out[o] = w;
                continue;
            }
            if (o > 0) out[o - 1] |= w << (64 - lead);
            if (o < nout) out[o] = w >> lead;
        }
    }
    if (count % 64) out[nout - 1] &= ((uint64_t)1 << (count % 64)) - 1;
}

#ifdef HAVE_AVX2_PATH
/* Lane j all ones where bit j of the byte at bit i of bits is set (i a
 * multiple of 8). */
__attribute__((target("avx2"), always_inline)) static inline __m256 bits8(const uint64_t *bits, size_t i)
{
    const __m256i sel = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    __m256i b = _mm256_set1_epi32((int)((bits[i >> 6] >> (i & 63)) & 0xFF));
    return _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(b, sel), sel));
}

__attribute__((target("avx2"))) static void apply_avx2(float *out, const float *x, const uint64_t *bits, size_t n,
                                                       float scale)
{
    const __m256 S = _mm256_set1_ps(scale);
    for (size_t i = 0; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), _mm256_and_ps(bits8(bits, i), S)));
}

__attribute__((target("avx2"))) static void apply2_avx2(float *dx, float *out, const float *x, const uint64_t *bits,
                                                        size_t n, float scale)
{
    const __m256 S = _mm256_set1_ps(scale);
    for (size_t i = 0; i + 8 <= n; i += 8) {
        __m256 m = _mm256_and_ps(bits8(bits, i), S);
        _mm256_storeu_ps(dx + i, _mm256_mul_ps(m, _mm256_loadu_ps(dx + i)));
        _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), m));
    }
}

__attribute__((target("avx2"))) static void apply_acc_avx2(float *out, const float *x, const uint64_t *bits, size_t n,
                                                           float scale)
{
    const __m256 S = _mm256_set1_ps(scale);
    for (size_t i = 0; i + 8 <= n; i += 8) {
        __m256 y = _mm256_mul_ps(_mm256_loadu_ps(x + i), _mm256_and_ps(bits8(bits, i), S));
        _mm256_storeu_ps(out + i, _mm256_add_ps(_mm256_loadu_ps(out + i), y));
    }
}
#endif

static inline float bit_mul(const uint64_t *bits, size_t i, float scale)
{
    return (bits[i >> 6] >> (i & 63)) & 1 ? scale : 0.0f;
}

CPU_INLINE void apply_c_code(float *out, const float *x, const uint64_t *bits, size_t i0, size_t n, float scale)
{
#pragma omp simd
    for (size_t i = i0; i < n; i++) out[i] = x[i] * bit_mul(bits, i, scale);
}
CPU_VARIANTS(CPU_K_DROPOUT, apply_c, (float *out, const float *x, const uint64_t *bits, size_t i0, size_t n,
             float scale), (out, x, bits, i0, n, scale))

CPU_INLINE void apply2_c_code(float *dx, float *out, const float *x, const uint64_t *bits, size_t i0, size_t n,
                              float scale)
{
#pragma omp simd
    for (size_t i = i0; i < n; i++) {
        float m = bit_mul(bits, i, scale);
        dx[i] = m * dx[i];
        out[i] = x[i] * m;
    }
}
CPU_VARIANTS(CPU_K_DROPOUT, apply2_c, (float *dx, float *out, const float *x, const uint64_t *bits, size_t i0, size_t n,
             float scale), (dx, out, x, bits, i0, n, scale))

CPU_INLINE void apply_acc_c_code(float *out, const float *x, const uint64_t *bits, size_t i0, size_t n,
                                 float scale)
{
#pragma omp simd
    for (size_t i = i0; i < n; i++) out[i] += x[i] * bit_mul(bits, i, scale);
}
CPU_VARIANTS(CPU_K_DROPOUT, apply_acc_c, (float *out, const float *x, const uint64_t *bits, size_t i0, size_t n,
             float scale), (out, x, bits, i0, n, scale))

/* out from x and the keep bits: the intrinsics take the whole vectors of 8
 * where the dropout family runs AVX2, the C kernel the rest (all of it
 * elsewhere). */
typedef void (*apply_avx2_fn)(float *out, const float *x, const uint64_t *bits, size_t n, float scale);
typedef void (*apply_c_fn)(float *out, const float *x, const uint64_t *bits, size_t i0, size_t n, float scale);
#ifdef HAVE_AVX2_PATH
#define AVX2_KERNEL(f) (f)
#else
#define AVX2_KERNEL(f) NULL
#endif

static void apply_split(apply_avx2_fn avx2, apply_c_fn c, float *out, const float *x, const uint64_t *bits, size_t n,
                        float scale)
{
    size_t i = 0;
#ifdef HAVE_AVX2_PATH
    if (have_avx2()) {
        i = n & ~(size_t)7;
        avx2(out, x, bits, i, scale);
    }
#else
    (void)avx2;
#endif
    c(out, x, bits, i, n, scale);
}

void cpu_dropout_apply_bits_acc(float *out, const float *x, const uint64_t *bits, size_t n, float scale)
{
    apply_split(AVX2_KERNEL(apply_acc_avx2), apply_acc_c, out, x, bits, n, scale);
}

void cpu_dropout_apply_bits(float *out, const float *x, const uint64_t *bits, size_t n, float scale)
{
    apply_split(AVX2_KERNEL(apply_avx2), apply_c, out, x, bits, n, scale);
}

void cpu_dropout_apply_bits2(float *dx, float *out, const float *x, const uint64_t *bits, size_t n, float scale)
{
    size_t i = 0;
#ifdef HAVE_AVX2_PATH
    if (have_avx2()) {
        i = n & ~(size_t)7;
        apply2_avx2(dx, out, x, bits, i, scale);
    }
#endif
    apply2_c(dx, out, x, bits, i, n, scale);
}

#ifdef HAVE_AVX2_PATH
/* cpu_probs_store's whole vectors, n a multiple of 8; streaming when
 * probs is 32-byte aligned. */
__attribute__((target("avx2"), always_inline)) static inline void probs_put(float *probs, __m256 y, int stream)
{
    if (stream) _mm256_stream_ps(probs, y);
    else _mm256_storeu_ps(probs, y);
}

__attribute__((target("avx2"))) static void probs_store_avx2(float *probs, float *x, float inv, size_t n, float *out,
                                                             const uint64_t *bits, float scale)
{
    const __m256 I = _mm256_set1_ps(inv), S = _mm256_set1_ps(scale);
    int stream = ((uintptr_t)probs & 31) == 0;
    for (size_t i = 0; i < n; i += 8) {
        __m256 y = _mm256_mul_ps(_mm256_loadu_ps(x + i), I);
        if (probs) probs_put(probs + i, y, stream);
        if (out) _mm256_storeu_ps(out + i, _mm256_mul_ps(y, _mm256_and_ps(bits8(bits, i), S)));
        else _mm256_storeu_ps(x + i, y);
    }
}
#endif

CPU_INLINE void probs_store_c_code(float *probs, float *x, float inv, size_t i0, size_t n, float *out,
                                   const uint64_t *bits, float scale)
{
    if (out) {
#pragma omp simd
        for (size_t i = i0; i < n; i++) {
            float y = x[i] * inv;
            if (probs) probs[i] = y;
            out[i] = y * bit_mul(bits, i, scale);
        }
        return;
    }
#pragma omp simd
    for (size_t i = i0; i < n; i++) {
        float y = x[i] * inv;
        if (probs) probs[i] = y;
        x[i] = y;
    }
}
CPU_VARIANTS(CPU_K_DROPOUT, probs_store_c, (float *probs, float *x, float inv, size_t i0, size_t n, float *out,
             const uint64_t *bits, float scale), (probs, x, inv, i0, n, out, bits, scale))

void cpu_probs_store(float *probs, float *x, float inv, size_t n, float *out, const uint64_t *bits, float scale)
{
    size_t i = 0;
#ifdef HAVE_AVX2_PATH
    if (have_avx2()) {
        i = n & ~(size_t)7;
        probs_store_avx2(probs, x, inv, i, out, bits, scale);
    }
#endif
    probs_store_c(probs, x, inv, i, n, out, bits, scale);
}

void cpu_probs_store_done(void)
{
#ifdef HAVE_AVX2_PATH
    if (have_avx2()) _mm_sfence();
#endif
}
