/* The int8 linear layer (see gemm_int8.h) on gemm_dot.h's driver: a word is
 * 4 bytes along k; W's words hold q_o (signed), the packed rows hold q_i +
 * 128 (unsigned), and each channel's accumulator starts at -128 * sum_k
 * q_o[k], so that VPDPBUSD's unsigned-by-signed sum is exactly sum_k q_i[k]
 * q_o[k]. */
#include "backend/cpu/gemm_int8.h"

#include "backend/cpu/gemm_dot.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#define INT8_X86 1
#include <immintrin.h>
#endif

/* A row whose largest magnitude is below this counts as zero: 127 / max
 * would overflow a float near 2^-126, and nothing BERT computes is that small
 * in a whole row. */
#define QUANT_MIN 0x1p-100f

/* The scale's parts: max |x| over the row and 127 / max (0 for a zero row). */
static float quant_inv(const float *x, int n, float *amax_out)
{
    float amax = 0.0f;
    for (int k = 0; k < n; k++) {
        float a = fabsf(x[k]);
        if (a > amax) amax = a;
    }
    if (!(amax >= QUANT_MIN)) amax = 0.0f;
    *amax_out = amax;
    return amax > 0.0f ? 127.0f / amax : 0.0f;
}

/* x * inv rounded to nearest even (lrintf in the default rounding mode, as
 * VCVTPS2DQ rounds), held to [-127, 127]. */
static inline int quant_one(float x, float inv)
{
    long q = lrintf(x * inv);
    return q > 127 ? 127 : q < -127 ? -127 : (int)q;
}

float gemm_int8_quantize(const float *x, int n, int8_t *q)
{
    float amax, inv = quant_inv(x, n, &amax);
    for (int k = 0; k < n; k++) q[k] = (int8_t)quant_one(x[k], inv);
    return amax / 127.0f;
}

/* ------------------------------------------------------------------------
 * Packing a row: word g is (q[4g + t] + 128) in byte t (q = 0 past k). The
 * vector packer's 16 floats make the run of four words at c / 4, which
 * covers the kg words exactly (kg = ceil(k / 16) * 4). */

static void pack_scalar(uint32_t *a, float *rs, const float *x, int k, int kg)
{
    float amax, inv = quant_inv(x, k, &amax);
    *rs = amax / 127.0f;
    for (int g = 0; g < kg; g++) {
        uint32_t word = 0;
        for (int t = 0; t < 4; t++) {
            int kk = 4 * g + t, q = kk < k ? quant_one(x[kk], inv) : 0;
            word |= (uint32_t)(q + 128) << (8 * t);
        }
        a[dot_a_index(g)] = word;
    }
}

#if INT8_X86
/* The same bits 16 floats at a time: max is exact in any order, and the
 * multiply and VCVTPS2DQ round as quant_one does. */
__attribute__((target("avx512f,avx512bw,avx512vl"))) static void pack_avx512(uint32_t *a, float *rs, const float *x,
                                                                              int k, int kg)
{
    __m512 m = _mm512_setzero_ps();
    for (int c = 0; c < k; c += 16) {
        __mmask16 msk = k - c >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (k - c)) - 1u);
        m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_maskz_loadu_ps(msk, x + c)));
    }
    float amax = _mm512_reduce_max_ps(m);
    if (!(amax >= QUANT_MIN)) amax = 0.0f;
    *rs = amax / 127.0f;
    __m512 inv = _mm512_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
    const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127), off = _mm512_set1_epi32(128);
    for (int c = 0; c < k; c += 16) {
        __mmask16 msk = k - c >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (k - c)) - 1u);
        __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_maskz_loadu_ps(msk, x + c), inv));
        q = _mm512_add_epi32(_mm512_max_epi32(_mm512_min_epi32(q, hi), lo), off);
        _mm_storeu_si128((__m128i *)(a + dot_a_index(c / 4)), _mm512_cvtepi32_epi8(q)); /* words c/4 .. c/4+3 */
    }
}
#endif

/* ------------------------------------------------------------------------
 * Kernels. */

/* 16 lanes as arrays: VPDPBUSD and the epilogue, lane by lane. */
typedef struct {
    int32_t v[DOT_LANES];
} i32x16;

static inline i32x16 s_init(const int32_t *p)
{
    i32x16 r;
    memcpy(r.v, p, sizeof r.v);
    return r;
}
/* Unsigned bytes of a times signed bytes of b, four per lane, added to c
 * (wrapping, as the instruction; the sums of gemm_int8 never wrap). */
static inline i32x16 s_dpbusd(i32x16 c, dot_w16 a, dot_w16 b)
{
    for (int l = 0; l < DOT_LANES; l++) {
        uint32_t s = (uint32_t)c.v[l];
        for (int t = 0; t < 4; t++)
            s += (uint32_t)((int32_t)(uint8_t)(a.v[l] >> (8 * t)) * (int32_t)(int8_t)(uint8_t)(b.v[l] >> (8 * t)));
        c.v[l] = (int32_t)s;
    }
    return c;
}
static inline void s_epi(float *o, i32x16 c, const struct dot_epi *e, int i, int v)
{
    for (int l = 0; l < DOT_LANES; l++) {
        int j = v * DOT_LANES + l;
        o[l] = fmaf((float)c.v[l], e->rs[i] * e->cs[j], e->bias[j]);
    }
}

#define GD_NAME tile_scalar
#define GD_ATTR
#define GD_V i32x16
#define GD_VB dot_w16
#define GD_INIT(v) s_init(e->comp + (v) * DOT_LANES)
#define GD_BCAST(p) dot_w16_bcast(p)
#define GD_LOADB(p) dot_w16_load(p)
#define GD_DOT(c, a, b) s_dpbusd(c, a, b)
#define GD_EPI(o, c, i, v) s_epi(o, c, e, i, v)
#include "backend/cpu/gemm_dot_kernel.inc"

#if INT8_X86
#define VNNI_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))
VNNI_TARGET static inline void v_epi(float *o, __m512i c, const struct dot_epi *e, int i, int v)
{
    __m512 t = _mm512_mul_ps(_mm512_set1_ps(e->rs[i]), _mm512_loadu_ps(e->cs + v * DOT_LANES));
    _mm512_storeu_ps(o, _mm512_fmadd_ps(_mm512_cvtepi32_ps(c), t, _mm512_loadu_ps(e->bias + v * DOT_LANES)));
}

/* VPDPBUSD: c += the 4 unsigned bytes of a times the 4 signed bytes of b, per
 * lane. In asm, not _mm512_dpbusd_epi32: GCC 12 does not keep the intrinsic's
 * 24 accumulators in registers (it copies each before the instruction and
 * stores it to the stack on every step, 3x slower); the asm names the
 * accumulator as its own output, which it is. */
VNNI_TARGET static inline __m512i vnni_dot(__m512i c, __m512i a, __m512i b)
{
    __asm__("vpdpbusd %2, %1, %0" : "+v"(c) : "v"(a), "v"(b));
    return c;
}

#define GD_NAME tile_vnni
#define GD_ATTR VNNI_TARGET
#define GD_V __m512i
#define GD_VB __m512i
#define GD_INIT(v) _mm512_loadu_si512(e->comp + (v) * DOT_LANES)
#define GD_BCAST(p) _mm512_set1_epi32((int)*(p))
#define GD_LOADB(p) _mm512_loadu_si512(p)
#define GD_DOT(c, a, b) vnni_dot(c, a, b)
#define GD_EPI(o, c, i, v) v_epi(o, c, e, i, v)
#include "backend/cpu/gemm_dot_kernel.inc"
#endif

/* ------------------------------------------------------------------------
 * Weights and the reference. */

static int fill(struct dot_weights *d, const float *W, long ldw)
{
    int8_t *q = malloc(d->k > 0 ? (size_t)d->k : 1);
    if (!q) return -1;
    for (int o = 0; o < d->oc; o++) {
        d->cs[o] = gemm_int8_quantize(W + (size_t)o * ldw, d->k, q);
        int32_t sum = 0;
        for (int k = 0; k < d->k; k++) {
            sum += q[k];
            *dot_word(d, o, k / 4) |= (uint32_t)(uint8_t)q[k] << (8 * (k % 4));
        }
        d->comp[o] = -128 * sum;
    }
    free(q);
    return 0;
}

static int weight(const struct dot_weights *d, int o, int k)
{
    return (int8_t)(uint8_t)(*dot_word(d, o, k / 4) >> (8 * (k % 4)));
}

int gemm_int8_weight(const gemm_lowp_layer *w, int o, int k)
{
    return weight(&w->d, o, k);
}

float gemm_int8_weight_scale(const gemm_lowp_layer *w, int o)
{
    return w->d.cs[o];
}

static void ref(const struct dot_weights *d, int N, const float *in, long ldin, float *out, long ldout)
{
    int C = d->k;
    /* The row's q once (recomputed per term when even this cannot be had). */
    int8_t *q = malloc(C > 0 ? (size_t)C : 1);
    for (int i = 0; i < N; i++) {
        const float *x = in + (size_t)i * ldin;
        float amax, inv = quant_inv(x, C, &amax), r = amax / 127.0f;
        for (int k = 0; q && k < C; k++) q[k] = (int8_t)quant_one(x[k], inv);
        for (int o = 0; o < d->oc; o++) {
            int32_t acc = 0;
            for (int k = 0; k < C; k++) acc += (q ? q[k] : quant_one(x[k], inv)) * weight(d, o, k);
            out[(size_t)i * ldout + o] = fmaf((float)acc, r * d->cs[o], d->bias[o]);
        }
    }
    free(q);
}

const struct dot_kind dot_kind_int8 = {
    CPU_K_GEMM_INT8,
    "avx512vnni",
    {tile_scalar, pack_scalar},
#if INT8_X86
    {tile_vnni, pack_avx512},
#else
    {NULL, NULL},
#endif
    4,
    1,
    0x80808080u, /* four q = 0 */
    fill,
    ref,
};
