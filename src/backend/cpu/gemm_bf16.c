/* The bf16 linear layer (see gemm_bf16.h) on gemm_dot.h's driver: a word is
 * a pair of bf16 along k, the even k in the low half, as VDPBF16PS reads
 * it. */
#include "backend/cpu/gemm_bf16.h"

#include "backend/cpu/bf16.h"
#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/gemm_dot.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#define BF16_X86 1
#include <immintrin.h>
#endif

struct gemm_bf16_weights {
    struct dot_weights d;
};

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
 * Packing the rows: word g of row i holds x[2g] and x[2g+1] (0 past k). */

static void pack_scalar(uint32_t *a, float *rs, const float *in, long ldin, int nrows, int k, int kg)
{
    (void)rs;
    for (int i = 0; i < DOT_MR; i++) {
        const float *x = in + (size_t)i * ldin;
        for (int g = 0; g < kg; g++) {
            int k0 = 2 * g;
            a[(size_t)g * DOT_MR + i] =
                i >= nrows ? 0u : pair(x[k0], k0 + 1 < k ? x[k0 + 1] : 0.0f);
        }
    }
}

#if BF16_X86
#define BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
/* VCVTNEPS2BF16 rounds as bf16_round (bf16.h), 16 floats into 8 words. */
BF16_TARGET static void pack_avx512(uint32_t *a, float *rs, const float *in, long ldin, int nrows, int k, int kg)
{
    (void)rs;
    for (int i = 0; i < DOT_MR; i++) {
        if (i >= nrows) {
            for (int g = 0; g < kg; g++) a[(size_t)g * DOT_MR + i] = 0u;
            continue;
        }
        const float *x = in + (size_t)i * ldin;
        for (int c = 0; c < k; c += 16) {
            __mmask16 msk = k - c >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (k - c)) - 1u);
            uint32_t w[8];
            _mm256_storeu_si256((__m256i *)w, (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(msk, x + c)));
            for (int t = 0, g = c / 2; t < 8 && g < kg; t++, g++) a[(size_t)g * DOT_MR + i] = w[t];
        }
    }
}
#endif

/* ------------------------------------------------------------------------
 * Kernels. */

/* 16 lanes as arrays: VDPBF16PS and the bias, lane by lane. */
typedef struct {
    float v[DOT_LANES];
} f32x16;
typedef struct {
    uint32_t v[DOT_LANES];
} w32x16;

static inline f32x16 s_zero(void)
{
    f32x16 r;
    for (int l = 0; l < DOT_LANES; l++) r.v[l] = 0.0f;
    return r;
}
static inline w32x16 s_bcast(const uint32_t *p)
{
    w32x16 r;
    for (int l = 0; l < DOT_LANES; l++) r.v[l] = *p;
    return r;
}
static inline w32x16 s_load(const uint32_t *p)
{
    w32x16 r;
    memcpy(r.v, p, sizeof r.v);
    return r;
}
static inline f32x16 s_dot(f32x16 c, w32x16 a, w32x16 b)
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
#define GD_VB w32x16
#define GD_INIT(v) s_zero()
#define GD_BCAST(p) s_bcast(p)
#define GD_LOADB(p) s_load(p)
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

static const struct dot_kern kern_scalar = {tile_scalar, pack_scalar};
#if BF16_X86
static const struct dot_kern kern_fast = {tile_avx512bf16, pack_avx512};
#endif

static atomic_int force_scalar;

void gemm_bf16_force_scalar(int on)
{
    atomic_store(&force_scalar, on != 0);
}

static const struct dot_kern *kern(void)
{
#if BF16_X86
    if (!atomic_load(&force_scalar) && cpu_kernel_level(CPU_K_GEMM_BF16) == CPU_ISA_AVX512) return &kern_fast;
#endif
    return &kern_scalar;
}

const char *gemm_bf16_kernel(void)
{
    return kern() == &kern_scalar ? "scalar" : "avx512bf16";
}

/* ------------------------------------------------------------------------
 * Weights, the product and the reference. */

gemm_bf16_weights *gemm_bf16_prepare(const float *W, long ldw, const float *bias, int OC, int C)
{
    gemm_bf16_weights *w = calloc(1, sizeof *w);
    if (!w || dot_weights_alloc(&w->d, OC, C, 2, bias, 0) != 0) {
        free(w);
        return NULL;
    }
    for (int o = 0; o < OC; o++) {
        const float *x = W + (size_t)o * ldw;
        for (int g = 0; g < w->d.kg; g++) *dot_word(&w->d, o, g) = pair(x[2 * g], 2 * g + 1 < C ? x[2 * g + 1] : 0.0f);
    }
    return w;
}

void gemm_bf16_free(gemm_bf16_weights *w)
{
    if (!w) return;
    dot_weights_free(&w->d);
    free(w);
}

size_t gemm_bf16_bytes(const gemm_bf16_weights *w)
{
    return sizeof *w + dot_weights_bytes(&w->d);
}

uint16_t gemm_bf16_weight(const gemm_bf16_weights *w, int o, int k)
{
    return (uint16_t)(*dot_word(&w->d, o, k / 2) >> (16 * (k % 2)));
}

void gemm_bf16(const gemm_bf16_weights *w, int N, const float *in, long ldin, float *out, long ldout, int nthreads)
{
    if (dot_gemm(kern(), 0, &w->d, N, in, ldin, out, ldout, nthreads) != 0)
        gemm_bf16_ref(w, N, in, ldin, out, ldout);
}

void gemm_bf16_ref(const gemm_bf16_weights *w, int N, const float *in, long ldin, float *out, long ldout)
{
    int C = w->d.k;
    for (int i = 0; i < N; i++) {
        const float *x = in + (size_t)i * ldin;
        for (int o = 0; o < w->d.oc; o++) {
            float s = 0.0f;
            for (int k = 0; k < C; k += 2) {
                uint16_t a1 = k + 1 < C ? bf16_round(x[k + 1]) : 0, b1 = k + 1 < C ? gemm_bf16_weight(w, o, k + 1) : 0;
                s = gemm_bf16_step(s, a1, b1);
                s = gemm_bf16_step(s, bf16_round(x[k]), gemm_bf16_weight(w, o, k));
            }
            out[(size_t)i * ldout + o] = s + w->d.bias[o];
        }
    }
}
