/* att_fixed.h: attention's two products of the batch-invariant forward give
 * gemm_fixed's bits (memcmp) for head sizes 16, 32, 48 and 64, window
 * lengths with and without a tail of keys (1, 5, 16, 17, 31, 33, 150),
 * rows that are and are not a multiple of the kernels' 6, alpha 1 and the
 * score scale, inside rows of the [N, C] layout (strides C). Where the
 * kernels do not run (no AVX-512, or BERTC_CPU_ISA below avx512: the avx2
 * variant of this test) att_fixed_ok is 0 and that is what is checked. */
#include "backend/cpu/att_fixed.h"
#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/gemm_fixed.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void)
{
    const int hss[] = {16, 32, 48, 64}, lens[] = {1, 5, 16, 17, 31, 33, 150};
    int ok = att_fixed_ok(32);
    printf("att_fixed_ok(32) = %d (gemm_fixed level %s)\n", ok, cpu_isa_name(cpu_kernel_level(CPU_K_GEMM_FIXED)));
    CHECK(ok == (cpu_kernel_level(CPU_K_GEMM_FIXED) >= CPU_ISA_AVX512), "att_fixed_ok follows gemm_fixed's level");
    CHECK(!att_fixed_ok(24) && !att_fixed_ok(0), "head sizes that are not a multiple of 16 are not taken");
    if (!ok) return tu_done();
    tu_rng_state = 0x5eed;
    int cases = 0, same_s = 0, same_o = 0;
    for (size_t h = 0; h < sizeof hss / sizeof hss[0]; h++)
        for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++) {
            int HS = hss[h], len = lens[l], C = 3 * HS, rows = len > 7 ? len - 1 : len;
            float *q = malloc((size_t)len * C * sizeof *q), *k = malloc((size_t)len * C * sizeof *k);
            float *v = malloc((size_t)len * C * sizeof *v);
            float *s1 = malloc((size_t)rows * len * sizeof *s1), *s2 = malloc((size_t)rows * len * sizeof *s2);
            float *o1 = calloc((size_t)rows * C, sizeof *o1), *o2 = calloc((size_t)rows * C, sizeof *o2);
            float *kt = aligned_alloc(64, (size_t)HS * ((len + 15) & ~15) * sizeof *kt + 64);
            tu_fill(q, (size_t)len * C, -2, 2);
            tu_fill(k, (size_t)len * C, -2, 2);
            tu_fill(v, (size_t)len * C, -1, 1);
            for (int a = 0; a < 2; a++) {
                float alpha = a ? (float)(1.0 / sqrt((double)HS)) : 1.0f;
                /* head 1 of 3: columns HS .. 2 HS - 1 */
                att_fixed_scores(s1, len, q + HS, C, k + HS, C, rows, len, HS, alpha, kt);
                gemm_fixed(0, 1, rows, len, HS, alpha, q + HS, C, k + HS, C, 0.0f, s2, len, 1);
                same_s += !memcmp(s1, s2, (size_t)rows * len * sizeof *s1);
                att_fixed_pv(o1 + HS, C, s1, len, v + HS, C, rows, len, HS);
                gemm_fixed(0, 0, rows, HS, len, 1.0f, s2, len, v + HS, C, 0.0f, o2 + HS, C, 1);
                same_o += !memcmp(o1, o2, (size_t)rows * C * sizeof *o1);
                cases++;
            }
            free(q), free(k), free(v), free(s1), free(s2), free(o1), free(o2), free(kt);
        }
    printf("%d cases (head sizes 16-64, lengths 1-150, alpha 1 and 1/sqrt(HS)): scores gemm_fixed's bits in %d, "
           "P V in %d (the other heads' columns untouched in all of them)\n",
           cases, same_s, same_o);
    CHECK(same_s == cases, "scores differ from gemm_fixed in %d cases", cases - same_s);
    CHECK(same_o == cases, "P V differs from gemm_fixed in %d cases", cases - same_o);
    return tu_done();
}
