/* Attention's products without packing, in gemm_fixed's order (att_fixed.h). */
#include "backend/cpu/att_fixed.h"

#include "backend/cpu/cpu_isa.h"

#include <stddef.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define ATT_HAVE_AVX512 1
#define ATT_TARGET __attribute__((target("avx512f")))
#endif

int att_fixed_ok(int HS)
{
#ifdef ATT_HAVE_AVX512
    return HS > 0 && HS % 16 == 0 && cpu_kernel_level(CPU_K_GEMM_FIXED) >= CPU_ISA_AVX512;
#else
    (void)HS;
    return 0;
#endif
}

#ifdef ATT_HAVE_AVX512
#define ATT_INLINE ATT_TARGET static inline __attribute__((always_inline))

/* r[0..15] (16 rows of 16) transposed in registers: unpacks of pairs and
 * quads, then two rounds of 128-bit lane shuffles. */
ATT_TARGET static inline __attribute__((always_inline)) void transpose16(__m512 r[16])
{
    __m512 t[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    /* r[4i + k], 128-bit lane L: column 4L + k of rows 4i .. 4i+3 */
    for (int i = 0; i < 4; i++) {
        __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 1]);
        __m512d c = _mm512_castps_pd(t[4 * i + 2]), d = _mm512_castps_pd(t[4 * i + 3]);
        r[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
        r[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
        r[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
        r[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
    }
    for (int k = 0; k < 4; k++) {
        t[k] = _mm512_shuffle_f32x4(r[k], r[4 + k], 0x88);
        t[4 + k] = _mm512_shuffle_f32x4(r[k], r[4 + k], 0xdd);
        t[8 + k] = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], 0x88);
        t[12 + k] = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], 0xdd);
    }
    for (int k = 0; k < 4; k++) {
        r[k] = _mm512_shuffle_f32x4(t[k], t[8 + k], 0x88);
        r[8 + k] = _mm512_shuffle_f32x4(t[k], t[8 + k], 0xdd);
        r[4 + k] = _mm512_shuffle_f32x4(t[4 + k], t[12 + k], 0x88);
        r[12 + k] = _mm512_shuffle_f32x4(t[4 + k], t[12 + k], 0xdd);
    }
}

/* kt[d][j] = k[j][d], rows of len16 (len rounded up to 16, zero past len):
 * 16 keys by 16 dimensions at a time, transposed in registers. */
ATT_TARGET static void transpose_k(float *kt, const float *k, int ldk, int len, int HS)
{
    int len16 = (len + 15) & ~15;
    for (int j = 0; j < len16; j += 16) {
        int nk = len - j < 16 ? len - j : 16;
        for (int d0 = 0; d0 < HS; d0 += 16) {
            __m512 r[16];
#pragma GCC unroll 16
            for (int t = 0; t < 16; t++)
                r[t] = t < nk ? _mm512_loadu_ps(k + (size_t)(j + t) * ldk + d0) : _mm512_setzero_ps();
            transpose16(r);
#pragma GCC unroll 16
            for (int d = 0; d < 16; d++) _mm512_store_ps(kt + (size_t)(d0 + d) * len16 + j, r[d]);
        }
    }
}

/* acc0/acc1[r] = sum over t < K of a[r][t] * b[t][0..15] / [16..31] (two:
 * both halves), each lane one chain of FMAs, t ascending from 0: the rows
 * of a at stride lda, of b at ldb. nr is a constant where it is inlined, so
 * the accumulators stay in registers. */
ATT_INLINE void chain_block(__m512 acc0[6], __m512 acc1[6], const float *a, size_t lda, int nr, const float *b,
                            size_t ldb, int K, int two)
{
#pragma GCC unroll 6
    for (int r = 0; r < nr; r++) acc0[r] = acc1[r] = _mm512_setzero_ps();
    for (int t = 0; t < K; t++) {
        __m512 b0 = _mm512_loadu_ps(b + (size_t)t * ldb), b1 = two ? _mm512_loadu_ps(b + (size_t)t * ldb + 16) : b0;
#pragma GCC unroll 6
        for (int r = 0; r < nr; r++) {
            __m512 x = _mm512_set1_ps(a[(size_t)r * lda + t]);
            acc0[r] = _mm512_fmadd_ps(x, b0, acc0[r]);
            acc1[r] = _mm512_fmadd_ps(x, b1, acc1[r]);
        }
    }
}

/* Rows i0 .. i0+nr-1 of S at keys j .. j+31 (m0, m1: the keys that exist). */
ATT_INLINE void scores_block(float *S, int lds, const float *q, int ldq, const float *kt, int len16, int HS, int i0,
                             int nr, int j, __mmask16 m0, __mmask16 m1, float alpha)
{
    __m512 acc0[6], acc1[6];
    chain_block(acc0, acc1, q + (size_t)i0 * ldq, (size_t)ldq, nr, kt + j, (size_t)len16, HS, m1 != 0);
    const __m512 a = _mm512_set1_ps(alpha);
#pragma GCC unroll 6
    for (int r = 0; r < nr; r++) {
        float *srow = S + (size_t)(i0 + r) * lds + j;
        _mm512_mask_storeu_ps(srow, m0, alpha == 1.0f ? acc0[r] : _mm512_mul_ps(a, acc0[r]));
        if (m1) _mm512_mask_storeu_ps(srow + 16, m1, alpha == 1.0f ? acc1[r] : _mm512_mul_ps(a, acc1[r]));
    }
}

static __mmask16 keys_mask(int n)
{
    return n >= 16 ? (__mmask16)0xffff : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1);
}

ATT_TARGET void att_fixed_scores(float *S, int lds, const float *q, int ldq, const float *k, int ldk, int rows, int len,
                                 int HS, float alpha, float *kt)
{
    transpose_k(kt, k, ldk, len, HS);
    int len16 = (len + 15) & ~15;
    for (int j = 0; j < len; j += 32) {
        __mmask16 m0 = keys_mask(len - j), m1 = keys_mask(len - j - 16);
        int i0 = 0;
        for (; i0 + 6 <= rows; i0 += 6) scores_block(S, lds, q, ldq, kt, len16, HS, i0, 6, j, m0, m1, alpha);
        /* the last 1-5 rows as one block (nr a constant in each case) */
        switch (rows - i0) {
#define ATT_SCORES_REST(n) \
    case n: scores_block(S, lds, q, ldq, kt, len16, HS, i0, n, j, m0, m1, alpha); break;
            ATT_SCORES_REST(1) ATT_SCORES_REST(2) ATT_SCORES_REST(3) ATT_SCORES_REST(4) ATT_SCORES_REST(5)
#undef ATT_SCORES_REST
        default: break;
        }
    }
}

/* Rows i0 .. i0+nr-1 of O at columns c .. c+31 (two: 32 of them, else 16). */
ATT_INLINE void pv_block(float *o, int ldo, const float *p, int ldp, const float *v, int ldv, int len, int c, int two,
                         int i0, int nr)
{
    __m512 acc0[6], acc1[6];
    chain_block(acc0, acc1, p + (size_t)i0 * ldp, (size_t)ldp, nr, v + c, (size_t)ldv, len, two);
#pragma GCC unroll 6
    for (int r = 0; r < nr; r++) {
        float *orow = o + (size_t)(i0 + r) * ldo + c;
        _mm512_storeu_ps(orow, acc0[r]);
        if (two) _mm512_storeu_ps(orow + 16, acc1[r]);
    }
}

ATT_TARGET void att_fixed_pv(float *o, int ldo, const float *p, int ldp, const float *v, int ldv, int rows, int len,
                             int HS)
{
    for (int c = 0; c < HS; c += 32) {
        int two = HS - c >= 32, i0 = 0;
        for (; i0 + 6 <= rows; i0 += 6) pv_block(o, ldo, p, ldp, v, ldv, len, c, two, i0, 6);
        switch (rows - i0) {
#define ATT_PV_REST(n) \
    case n: pv_block(o, ldo, p, ldp, v, ldv, len, c, two, i0, n); break;
            ATT_PV_REST(1) ATT_PV_REST(2) ATT_PV_REST(3) ATT_PV_REST(4) ATT_PV_REST(5)
#undef ATT_PV_REST
        default: break;
        }
    }
}
#else
void att_fixed_scores(float *S, int lds, const float *q, int ldq, const float *k, int ldk, int rows, int len, int HS,
                      float alpha, float *kt)
{
    (void)S, (void)lds, (void)q, (void)ldq, (void)k, (void)ldk, (void)rows, (void)len, (void)HS, (void)alpha, (void)kt;
}
void att_fixed_pv(float *o, int ldo, const float *p, int ldp, const float *v, int ldv, int rows, int len, int HS)
{
    (void)o, (void)ldo, (void)p, (void)ldp, (void)v, (void)ldv, (void)rows, (void)len, (void)HS;
}
#endif
