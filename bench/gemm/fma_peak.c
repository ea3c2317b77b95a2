/* The fp32 multiply-add peak of this machine's cores: every thread runs
 * independent chains of vector FMAs (enough of them to hide the latency), no
 * memory traffic. No GEMM and no training step can run fp32 arithmetic faster
 * than this; bench/gemm/fp32_ceiling.sh divides a step's FLOPs by it.
 *
 *   gcc -O2 -fopenmp bench/gemm/fma_peak.c -o fma_peak && ./fma_peak avx2 2
 *
 * Prints one line: "<isa> <threads> <GFLOP/s>" (the best of 5 rounds).
 * isa is avx2 (256-bit FMA) or avx512 (512-bit); exit 2 when the CPU lacks it. */
#include "peak_time.h"

#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHAINS 12
#define ITERS 20000000L

/* One function per vector width: CHAINS accumulators, ITERS rounds of
 * acc = acc * b + c, and the lanes summed so nothing is optimised away. */
#define FMA_CHAINS(name, isa, vec, set1, fmadd, sum)                                                              \
    __attribute__((target(isa))) static float name(void)                                                              \
    {                                                                                                                \
        vec acc[CHAINS];                                                                                             \
        const vec b = set1(0.999999f), c = set1(1e-7f);                                                              \
        for (int k = 0; k < CHAINS; k++) acc[k] = set1((float)k);                                                    \
        for (long i = 0; i < ITERS; i++) {                                                                           \
            _Pragma("GCC unroll 12") for (int k = 0; k < CHAINS; k++) acc[k] = fmadd(acc[k], b, c);                 \
        }                                                                                                            \
        float s = 0;                                                                                                 \
        for (int k = 0; k < CHAINS; k++) s += sum(acc[k]);                                                           \
        return s;                                                                                                    \
    }

__attribute__((target("avx2"))) static inline float sum256(__m256 v)
{
    float t[8];
    _mm256_storeu_ps(t, v);
    return t[0] + t[7];
}

FMA_CHAINS(run_avx2, "avx2,fma", __m256, _mm256_set1_ps, _mm256_fmadd_ps, sum256)
FMA_CHAINS(run_avx512, "avx512f", __m512, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_reduce_add_ps)

int main(int argc, char **argv)
{
    if (argc != 3 || (strcmp(argv[1], "avx2") && strcmp(argv[1], "avx512")) || atoi(argv[2]) < 1) {
        fprintf(stderr, "usage: fma_peak avx2|avx512 THREADS\n");
        return 2;
    }
    int wide = !strcmp(argv[1], "avx512"), threads = atoi(argv[2]);
    __builtin_cpu_init();
    if (wide ? !__builtin_cpu_supports("avx512f") : !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))) {
        fprintf(stderr, "fma_peak: this CPU lacks %s\n", argv[1]);
        return 2;
    }
    double flops = 2.0 * ITERS * CHAINS * (wide ? 16 : 8) * threads;
    double best = peak_best(threads, flops, wide ? run_avx512 : run_avx2);
    printf("%s %d %.1f\n", argv[1], threads, best);
    return 0;
}
