/* The bf16 linear layer (see gemm_bf16.h) on gemm_dot.h's driver: a word is
 * a pair of bf16 along k, the even k in the low half, as VDPBF16PS reads
 * it. */
#include "backend/cpu/gemm_bf16.h"

#include "backend/cpu/bf16.h"
#include "backend/cpu/gemm_dot.h"

#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#define BF16_X86 1
#include <immintrin.h>
#endif

/* x, or a zero of its sign when it is subnormal (the instruction's DAZ and FTZ). */
static inline float flush(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7f800000u) == 0) u &= 0x80000000u;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* The product of two bf16 has 16 significant bits: exact in double (and in
 * float where it is a normal number). The sum with s, exact in double up to
 * one rounding, rounds to float once more; double has more than 2 x 24 + 2
 * bits, so the two roundings give the correctly rounded sum. */
float gemm_bf16_step(float s, uint16_t a, uint16_t b)
{
    double p = (double)flush(bf16_to_float(a)) * (double)flush(bf16_to_float(b));
    return flush((float)((double)flush(s) + p));
}

static inline uint32_t pair(float lo, float hi)
{
    return (uint32_t)bf16_round(lo) | (uint32_t)bf16_round(hi) << 16;
}

/* ------------------------------------------------------------------------
 * Packing a row: word g holds x[2g] and x[2g+1] (0 past k). The vector
 * packer's 16 floats make 8 words, two runs of four; kg (a multiple of 4)
 * may end after the first. */

static void pack_scalar(uint32_t *a, float *rs, const float *x, int k, int kg)
{
    (void)rs;
    for (int g = 0; g < kg; g++)
        a[dot_a_index(g)] = pair(2 * g < k ? x[2 * g] : 0.0f, 2 * g + 1 < k ? x[2 * g + 1] : 0.0f);
}

#if BF16_X86
#define BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
/* VCVTNEPS2BF16 rounds as bf16_round (bf16.h), 16 floats into 8 words. */
BF16_TARGET static void pack_avx512(uint32_t *a, float *rs, const float *x, int k, int kg)
{
    (void)rs;
    for (int c = 0; c < kg * 2; c += 16) {
        __mmask16 msk = k - c >= 16 ? (__mmask16)0xffff : k - c > 0 ? (__mmask16)((1u << (k - c)) - 1u) : 0;
        __m256i h = (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(msk, x + c));
        int g = c / 2; /* words g .. g+7: two runs of four, the second only where kg has it */
        _mm_storeu_si128((__m128i *)(a + dot_a_index(g)), _mm256_castsi256_si128(h));
        if (g + 4 < kg) _mm_storeu_si128((__m128i *)(a + dot_a_index(g + 4)), _mm256_extracti128_si256(h, 1));
    }
}
#endif

/* ------------------------------------------------------------------------
 * Kernels. */

/* 16 lanes as arrays: VDPBF16PS and the bias, lane by lane. */
typedef struct {
    float v[DOT_LANES];
} f32x16;

static inline f32x16 s_zero(void)
{
    f32x16 r;
    for (int l = 0; l < DOT_LANES; l++) r.v[l] = 0.0f;
    return r;
}
static inline f32x16 s_dot(f32x16 c, dot_w16 a, dot_w16 b)
{
    for (int l = 0; l < DOT_LANES; l++) {
        float s = gemm_bf16_step(c.v[l], (uint16_t)(a.v[l] >> 16), (uint16_t)(b.v[l] >> 16));
        c.v[l] = gemm_bf16_step(s, (uint16_t)a.v[l], (uint16_t)b.v[l]);
    }
    return c;
}
static inline void s_epi(float *o, f32x16 c, const float *bias)
{
    for (int l = 0; l < DOT_LANES; l++) o[l] = c.v[l] + bias[l];
}

#define GD_NAME tile_scalar
#define GD_ATTR
#define GD_V f32x16
#define GD_VB dot_w16
#define GD_INIT(v) s_zero()
#define GD_BCAST(p) dot_w16_bcast(p)
#define GD_LOADB(p) dot_w16_load(p)
#define GD_DOT(c, a, b) s_dot(c, a, b)
#define GD_EPI(o, c, i, v) s_epi(o, c, e->bias + (v) * DOT_LANES)
#include "backend/cpu/gemm_dot_kernel.inc"

#if BF16_X86
#define GD_NAME tile_avx512bf16
#define GD_ATTR BF16_TARGET
#define GD_V __m512
#define GD_VB __m512bh
#define GD_INIT(v) _mm512_setzero_ps()
#define GD_BCAST(p) ((__m512bh)_mm512_set1_epi32((int)*(p)))
#define GD_LOADB(p) ((__m512bh)_mm512_loadu_si512(p))
#define GD_DOT(c, a, b) _mm512_dpbf16_ps(c, a, b)
#define GD_EPI(o, c, i, v) _mm512_storeu_ps(o, _mm512_add_ps(c, _mm512_loadu_ps(e->bias + (v) * DOT_LANES)))
#include "backend/cpu/gemm_dot_kernel.inc"
#endif

/* ------------------------------------------------------------------------
 * Weights and the reference. */

static int fill(struct dot_weights *d, const float *W, long ldw)
{
    for (int o = 0; o < d->oc; o++) {
        const float *x = W + (size_t)o * ldw;
        for (int g = 0; 2 * g < d->k; g++) *dot_word(d, o, g) = pair(x[2 * g], 2 * g + 1 < d->k ? x[2 * g + 1] : 0.0f);
    }
    return 0;
}

static uint16_t weight(const struct dot_weights *d, int o, int k)
{
    return (uint16_t)(*dot_word(d, o, k / 2) >> (16 * (k % 2)));
}

uint16_t gemm_bf16_weight(const gemm_lowp_layer *w, int o, int k)
{
    return weight(&w->d, o, k);
}

/* The chain of gemm_bf16.h, pair by pair, the odd k first. */
static void ref(const struct dot_weights *d, int N, const float *in, long ldin, float *out, long ldout)
{
    int C = d->k;
    for (int i = 0; i < N; i++) {
        const float *x = in + (size_t)i * ldin;
        for (int o = 0; o < d->oc; o++) {
            float s = 0.0f;
            for (int k = 0; k < C; k += 2) {
                int odd = k + 1 < C;
                s = gemm_bf16_step(s, odd ? bf16_round(x[k + 1]) : 0, odd ? weight(d, o, k + 1) : 0);
                s = gemm_bf16_step(s, bf16_round(x[k]), weight(d, o, k));
            }
            out[(size_t)i * ldout + o] = s + d->bias[o];
        }
    }
}

const struct dot_kind dot_kind_bf16 = {
    CPU_K_GEMM_BF16,
    "avx512bf16",
    {tile_scalar, pack_scalar},
#if BF16_X86
    {tile_avx512bf16, pack_avx512},
#else
    {NULL, NULL},
#endif
    NULL,
    2,
    0,
    0u, /* two +0 */
    fill,
    ref,
};
