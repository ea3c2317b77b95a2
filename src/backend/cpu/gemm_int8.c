/* The int8 linear layer (see gemm_int8.h) on gemm_dot.h's driver: a word is
 * 4 bytes along k; W's words hold q_o (signed), the packed rows hold q_i +
 * 128 (unsigned), and each channel's accumulator starts at -128 * sum_k
 * q_o[k], so that VPDPBUSD's unsigned-by-signed sum is exactly sum_k q_i[k]
 * q_o[k]. */
#include "backend/cpu/gemm_int8.h"

#include "backend/cpu/gemm_dot.h"

#include <math.h>
#include <stdatomic.h>
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
 * The avx2 level (gemm_int8_ymm.inc). Without VNNI the u8 x s8 product is
 * VPMADDUBSW, whose pairs of products are summed into a saturating int16:
 * with q + 128 (up to 255) against 127 a pair reaches 64,770 and would clip.
 * So the avx2 kernel's rows are packed as q itself (signed), and each
 * product is taken as |q_i| x (q_o with q_i's sign) (VPABSB, VPSIGNB): both
 * at most 127, a pair at most 32,258, never clipped, and the pair sums go to
 * int32 by VPMADDWD against ones. The sums are then the exact ones, the same
 * as VPDPBUSD's and the scalar kernel's. Where the CPU has AVX-VNNI its
 * 256-bit VPDPBUSD takes q + 128 as the avx512 kernel does. */

#if INT8_X86
#define AVX2_TARGET __attribute__((target("avx2,fma")))
/* The row's bytes by AVX2, 16 at a time: off 0 for q (the avx2 kernel), 128
 * for q + 128 (AVX-VNNI's); the rounding, the clamp and the scale are
 * pack_scalar's. */
AVX2_TARGET static inline void pack_ymm(uint32_t *a, float *rs, const float *x, int k, int off)
{
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 m = _mm256_setzero_ps();
    int c = 0;
    for (; c + 8 <= k; c += 8) m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + c)));
    float lanes[8], amax = 0.0f;
    _mm256_storeu_ps(lanes, m);
    for (int l = 0; l < 8; l++) amax = lanes[l] > amax ? lanes[l] : amax;
    for (; c < k; c++) amax = fabsf(x[c]) > amax ? fabsf(x[c]) : amax;
    if (!(amax >= QUANT_MIN)) amax = 0.0f;
    *rs = amax / 127.0f;
    const __m256 inv = _mm256_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
    const __m128i lo = _mm_set1_epi8(-127), shift = _mm_set1_epi8((char)off);
    for (c = 0; c < k; c += 16) {
        const float *p = x + c;
        float tail[16];
        if (k - c < 16) {
            memset(tail, 0, sizeof tail);
            memcpy(tail, p, (size_t)(k - c) * sizeof *p);
            p = tail;
        }
        __m256i q0 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(p), inv));
        __m256i q1 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(p + 8), inv));
        /* int16 then int8 with saturation (in order after the 64-bit
         * permute), then the clamp's lower end: quant_one's [-127, 127]. */
        __m256i h = _mm256_permute4x64_epi64(_mm256_packs_epi32(q0, q1), 0xd8);
        __m128i q = _mm_max_epi8(_mm_packs_epi16(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1)), lo);
        _mm_storeu_si128((__m128i *)(a + dot_a_index(c / 4)), _mm_add_epi8(q, shift)); /* words c/4 .. c/4+3 */
    }
}

AVX2_TARGET static void pack_avx2(uint32_t *a, float *rs, const float *x, int k, int kg)
{
    (void)kg;
    pack_ymm(a, rs, x, k, 0);
}

AVX2_TARGET static inline void avx2_dot2(__m256i *c0, __m256i *c1, __m256i s, __m256i b0, __m256i b1)
{
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i u = _mm256_abs_epi8(s);
    *c0 = _mm256_add_epi32(*c0, _mm256_madd_epi16(_mm256_maddubs_epi16(u, _mm256_sign_epi8(b0, s)), ones));
    *c1 = _mm256_add_epi32(*c1, _mm256_madd_epi16(_mm256_maddubs_epi16(u, _mm256_sign_epi8(b1, s)), ones));
}

#define Y_NAME tile_avx2
#define Y_ATTR AVX2_TARGET
#define Y_INIT(j) _mm256_setzero_si256()
#define Y_DOT2(c0, c1, s, b0, b1) avx2_dot2(&(c0), &(c1), s, b0, b1)
#include "backend/cpu/gemm_int8_ymm.inc"

#define AVXVNNI_TARGET __attribute__((target("avx2,fma,avxvnni")))
AVXVNNI_TARGET static void pack_avxvnni(uint32_t *a, float *rs, const float *x, int k, int kg)
{
    (void)kg;
    pack_ymm(a, rs, x, k, 128);
}

#define Y_NAME tile_avxvnni
#define Y_ATTR AVXVNNI_TARGET
#define Y_INIT(j) _mm256_loadu_si256((const __m256i *)(e->comp + (j)))
#define Y_DOT2(c0, c1, s, b0, b1)                                                                                     \
    do {                                                                                                               \
        (c0) = _mm256_dpbusd_avx_epi32(c0, s, b0);                                                                    \
        (c1) = _mm256_dpbusd_avx_epi32(c1, s, b1);                                                                    \
    } while (0)
#include "backend/cpu/gemm_int8_ymm.inc"
#endif

static atomic_int no_avxvnni;

void gemm_int8_force_avx2(int on)
{
    atomic_store(&no_avxvnni, on != 0);
}

/* The avx2 level's kernel: AVX-VNNI's where the CPU has it, AVX2's own
 * otherwise (the same bits). */
static const struct dot_kern *avx2_pick(const char **name)
{
#if INT8_X86
    static const struct dot_kern avx2 = {tile_avx2, pack_avx2}, avxvnni = {tile_avxvnni, pack_avxvnni};
    if (cpu_isa()->cpu.avx_vnni && !atomic_load(&no_avxvnni)) {
        *name = "avxvnni";
        return &avxvnni;
    }
    *name = "avx2";
    return &avx2;
#else
    (void)name;
    return NULL;
#endif
}

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
    avx2_pick,
    4,
    1,
    0x80808080u, /* four q = 0 */
    fill,
    ref,
};
