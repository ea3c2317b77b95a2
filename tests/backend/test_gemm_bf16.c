/* gemm_lowp's bf16 kind (backend/cpu/gemm_bf16.h, gemm_lowp.h), the bf16 linear layer
 * of inference:
 *   - gemm_bf16_step against the VDPBF16PS instruction itself (where the CPU
 *     has AVX512-BF16), bit for bit, over operands of every exponent (so
 *     products that overflow, underflow or are subnormal) and accumulators
 *     of every size;
 *   - the CPU's kernel and the scalar one against gemm_lowp_ref, bit for bit,
 *     over many shapes and thread counts;
 *   - against double over the rounded operands: |out - exact| <= (C + 3) *
 *     2^-24 * (sum_k |a w| + |b|);
 *   - batch invariance (tests/lib/linear_check.h);
 *   - the error of the layer against fp32 on BERT-like data (printed, held
 *     under a bound);
 *   - under BERTC_CPU_ISA=sse (test_gemm_bf16_sse) the scalar kernel runs.
 * Prints which kernel ran and what each check compared. */
#include "backend/cpu/bf16.h"
#include "backend/cpu/gemm_bf16.h"
#include "linear_check.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_X86 1
#endif

/* A bf16 of exponent 127 +- spread (clamped to the finite ones), random sign and significand. */
static uint16_t rand_bf16(int spread)
{
    int e = 127 + (int)(tu_urand() * (2 * spread + 1)) - spread;
    e = e < 0 ? 0 : e > 254 ? 254 : e;
    return (uint16_t)((tu_urand() < 0.5 ? 0x8000u : 0u) | (unsigned)e << 7 | (unsigned)(tu_urand() * 128));
}

#if HAVE_X86
__attribute__((target("avx512f,avx512bf16"))) static void dp_instr(float *c, const uint16_t *a, const uint16_t *b)
{
    __m512bh va, vb;
    memcpy(&va, a, 64);
    memcpy(&vb, b, 64);
    _mm512_storeu_ps(c, _mm512_dpbf16_ps(_mm512_loadu_ps(c), va, vb));
}
#endif

static void check_step(void)
{
#if HAVE_X86
    if (!cpu_isa()->cpu.avx512_bf16 || !cpu_isa()->cpu.os_zmm) {
        printf("gemm_bf16_step against VDPBF16PS: skipped (the CPU lacks AVX512-BF16)\n");
        return;
    }
    long n = 0, bad = 0;
    for (int spread = 8; spread <= 128; spread *= 2)
        for (int rep = 0; rep < 20000; rep++) {
            uint16_t a[32], b[32];
            float c[16], want[16];
            for (int j = 0; j < 32; j++) {
                a[j] = rand_bf16(spread);
                b[j] = rand_bf16(spread);
            }
            for (int j = 0; j < 16; j++) {
                uint32_t u = (uint32_t)rand_bf16(spread) << 16 | (uint32_t)(tu_urand() * 65536);
                memcpy(&c[j], &u, 4);
                if (rep % 4 == 0) c[j] = 0.0f;
            }
            memcpy(want, c, sizeof c);
            dp_instr(want, a, b);
            for (int j = 0; j < 16; j++, n++) {
                float got = gemm_bf16_step(gemm_bf16_step(c[j], a[2 * j + 1], b[2 * j + 1]), a[2 * j], b[2 * j]);
                bad += memcmp(&got, &want[j], 4) != 0 && !(isnan(got) && isnan(want[j]));
            }
        }
    CHECK(bad == 0, "%ld of %ld lanes differ from VDPBF16PS", bad, n);
    printf("gemm_bf16_step against VDPBF16PS: %ld lanes, exponents 127 +- 8 .. 128: %ld differ\n", n, bad);
#else
    printf("gemm_bf16_step against VDPBF16PS: skipped (not x86-64)\n");
#endif
}

/* Against double over the rounded operands. */
static void check_double(void)
{
    int N = 20, C = 1001, OC = 70;
    lc_case t;
    if (lc_case_run(&t, GEMM_LOWP_BF16, N, C, OC) != 0) return;
    const float *in = t.in, *W = t.W, *b = t.b, *out = t.out;
    const gemm_lowp_layer *w = t.w;
    double worst = 0;
    int wbad = 0;
    for (int o = 0; o < OC; o++)
        for (int k = 0; k < C; k++) wbad += gemm_bf16_weight(w, o, k) != bf16_round(W[(size_t)o * C + k]);
    for (int i = 0; i < N; i++)
        for (int o = 0; o < OC; o++) {
            double s = b[o], mag = fabs(b[o]);
            for (int k = 0; k < C; k++) {
                double p = (double)bf16_to_float(bf16_round(in[(size_t)i * C + k])) *
                           bf16_to_float(gemm_bf16_weight(w, o, k));
                s += p;
                mag += fabs(p);
            }
            double d = fabs(out[(size_t)i * OC + o] - s) / ((C + 3) * 0x1p-24 * mag);
            if (d > worst) worst = d;
        }
    CHECK(wbad == 0 && worst <= 1.0, "%d weights not bf16_round's; error %.3f of the bound", wbad, worst);
    printf("against double over the rounded operands (N %d C %d OC %d): worst %.4f of (C + 3) 2^-24 (sum |a w| + |b|)\n",
           N, C, OC, worst);
    lc_case_free(&t);
}

int main(void)
{
    tu_rng_state = 0x5eed5eed12345678ULL;
    lc_header(GEMM_LOWP_BF16, CPU_K_GEMM_BF16, "avx512bf16");
    check_step();
    check_double();
    return lc_finish(GEMM_LOWP_BF16, 0.01);
}
