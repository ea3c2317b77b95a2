/* gemm_lowp's int8 kind (backend/cpu/gemm_int8.h, gemm_lowp.h), the int8
 * linear layer of inference:
 *   - the quantisation: q = x * 127 / max |x| to nearest, within 0.5 of the
 *     real quotient, in [-127, 127], a zero row giving scale 0; the prepared
 *     weights are the rows' quantisation;
 *   - the int32 sums are exact: with operands whose scales are exactly 1
 *     (integers, each row reaching 127), out is the exact integer sum;
 *   - the dequantisation against double: out within 4 roundings of
 *     acc * r_i * s_o + b computed from the exact integer sum;
 *   - the CPU's kernel (AVX512-VNNI where the CPU has it; at the avx2 level
 *     AVX-VNNI's, or AVX2's VPMADDUBSW one) and the scalar one against
 *     gemm_lowp_ref, bit for bit, over many shapes and thread counts; where
 *     AVX-VNNI's runs, AVX2's too (gemm_int8_force_avx2);
 *   - batch invariance (tests/lib/linear_check.h);
 *   - the error of the whole layer against fp32 on BERT-like data: printed,
 *     and held under a bound;
 *   - under BERTC_CPU_ISA=sse (ctest's test_gemm_int8_sse) the scalar kernel
 *     is the one that runs, under BERTC_CPU_ISA=avx2 (test_gemm_int8_avx2,
 *     on an AVX-512 CPU too) an avx2-level one.
 * Prints which kernel ran and what each check compared. */
#include "backend/cpu/gemm_int8.h"
#include "linear_check.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void check_quantize(void)
{
    enum { n = 1000 };
    float x[n];
    int8_t q[n];
    double worst = 0;
    int range_bad = 0;
    for (int rep = 0; rep < 50; rep++) {
        double mag = pow(10.0, (rep % 9) - 4);
        for (int k = 0; k < n; k++) x[k] = (float)(mag * lc_gauss());
        float s = gemm_int8_quantize(x, n, q);
        double amax = 0;
        for (int k = 0; k < n; k++) amax = fmax(amax, fabs(x[k]));
        CHECK(s == (float)(amax / 127.0) || fabs(s - amax / 127.0) <= 0x1p-23 * s, "scale %g for max %g", s, amax);
        for (int k = 0; k < n; k++) {
            double d = fabs(q[k] - x[k] * 127.0 / amax);
            if (d > worst) worst = d;
            range_bad += q[k] == -128; /* the one int8 outside [-127, 127] */
        }
    }
    CHECK(worst <= 0.5 + 1e-4 && range_bad == 0, "q off the quotient by %g, %d outside [-127, 127]", worst, range_bad);
    memset(x, 0, sizeof x);
    float s0 = gemm_int8_quantize(x, n, q);
    int nz = 0;
    for (int k = 0; k < n; k++) nz += q[k] != 0;
    CHECK(s0 == 0.0f && nz == 0, "a zero row: scale %g, %d nonzero q", s0, nz);
    printf("quantisation: |q - x * 127 / max| <= %.6f over 50 rows of 1000 (magnitudes 1e-4 .. 1e4); zero row: scale "
           "%g\n",
           worst, s0);
}

/* Integers in [-127, 127] with 127 in every row: every scale is exactly 1,
 * so out is the integer sum, exact in a float below 2^24. */
static void check_exact(void)
{
    int N = 33, C = 1000, OC = 70;
    float *in = lc_alloc(sizeof(float) * (size_t)N * C), *W = lc_alloc(sizeof(float) * (size_t)OC * C);
    float *out = lc_alloc(sizeof(float) * (size_t)N * OC);
    for (size_t j = 0; j < (size_t)N * C; j++) in[j] = (float)((int)(tu_urand() * 255) - 127);
    for (size_t j = 0; j < (size_t)OC * C; j++) W[j] = (float)((int)(tu_urand() * 255) - 127);
    for (int i = 0; i < N; i++) in[(size_t)i * C + i] = 127.0f;
    for (int o = 0; o < OC; o++) W[(size_t)o * C + (o * 3) % C] = -127.0f;
    gemm_lowp_layer *w = gemm_lowp_prepare(GEMM_LOWP_INT8, W, C, NULL, OC, C);
    CHECK(w != NULL, "prepare");
    if (!w) return;
    int qbad = 0;
    for (int o = 0; o < OC; o++) {
        qbad += gemm_int8_weight_scale(w, o) != 1.0f;
        for (int k = 0; k < C; k++) qbad += gemm_int8_weight(w, o, k) != (int)W[(size_t)o * C + k];
    }
    CHECK(qbad == 0, "%d prepared weights or scales are not the integers given", qbad);
    size_t bad = 0;
    for (int scalar = 0; scalar < 2; scalar++) {
        gemm_lowp_force_scalar(GEMM_LOWP_INT8, scalar);
        gemm_lowp(w, N, in, C, out, OC, 2);
        for (int i = 0; i < N; i++)
            for (int o = 0; o < OC; o++) {
                long long s = 0;
                for (int k = 0; k < C; k++) s += (long long)in[(size_t)i * C + k] * (long long)W[(size_t)o * C + k];
                bad += out[(size_t)i * OC + o] != (float)s;
            }
    }
    gemm_lowp_force_scalar(GEMM_LOWP_INT8, 0);
    CHECK(bad == 0, "%zu sums differ from the exact integer sum", bad);
    printf("exact int32 sums: N %d C %d OC %d integer operands, scales 1: %s on both kernels\n", N, C, OC,
           bad ? "DIFFER" : "out = the exact sum");
    gemm_lowp_free(w);
    free(in);
    free(W);
    free(out);
}

/* out against acc * r * s + b in double, acc the exact sum of the quantised
 * operands: (float)acc, r * s and the fused multiply-add round once each. */
static void check_dequant(void)
{
    int N = 20, C = 777, OC = 50;
    lc_case t;
    if (lc_case_run(&t, GEMM_LOWP_INT8, N, C, OC) != 0) return;
    const float *in = t.in, *b = t.b, *out = t.out;
    const gemm_lowp_layer *w = t.w;
    int8_t *q = lc_alloc((size_t)C);
    double worst = 0;
    for (int i = 0; i < N; i++) {
        float r = gemm_int8_quantize(in + (size_t)i * C, C, q);
        for (int o = 0; o < OC; o++) {
            long long acc = 0;
            for (int k = 0; k < C; k++) acc += (long long)q[k] * gemm_int8_weight(w, o, k);
            double prod = (double)acc * r * gemm_int8_weight_scale(w, o);
            double d = fabs(out[(size_t)i * OC + o] - (prod + b[o])) / ((fabs(prod) + fabs(b[o])) * 0x1p-24);
            if (d > worst) worst = d;
        }
    }
    CHECK(worst <= 4.0, "dequantisation off by %.2f roundings", worst);
    printf("dequantisation against double from the exact sums: within %.2f roundings of (|acc r s| + |b|) (bound 4)\n",
           worst);
    lc_case_free(&t);
    free(q);
}

int main(void)
{
    tu_rng_state = 0x1a2b3c4d5e6f7788ULL;
    lc_header(GEMM_LOWP_INT8, CPU_K_GEMM_INT8, "avx512vnni avxvnni avx2");
    check_quantize();
    check_exact();
    check_dequant();
    if (!strcmp(gemm_lowp_kernel(GEMM_LOWP_INT8), "avxvnni")) {
        gemm_int8_force_avx2(1);
        CHECK(!strcmp(gemm_lowp_kernel(GEMM_LOWP_INT8), "avx2"), "forced avx2, runs %s",
              gemm_lowp_kernel(GEMM_LOWP_INT8));
        check_exact();
        lc_check_bits(GEMM_LOWP_INT8);
        lc_check_invariance(GEMM_LOWP_INT8);
        gemm_int8_force_avx2(0);
    }
    return lc_finish(GEMM_LOWP_INT8, 0.05);
}
