/* The int8 and bf16 dot-product peaks of this machine's cores, as
 * bench/gemm/fma_peak.c measures the fp32 one: every thread runs independent
 * chains of the instruction (enough to hide its latency) on registers, no
 * memory traffic. No int8 or bf16 GEMM can run faster; bench/gemm/answer_gemm.sh
 * gives its kernels' figures as a share of these.
 *
 *   gcc -O2 -fopenmp bench/gemm/int8_peak.c -o int8_peak && ./int8_peak int8 2
 *
 * int8: VPDPBUSD on zmm (64 u8 x s8 multiply-adds, 128 ops, per instruction),
 * printed as G int8 ops/s; bf16: VDPBF16PS on zmm (32 bf16 products and their
 * sums, 64 flops), as GFLOP/s. Prints "<kind> <threads> <G/s>" (the best of 5
 * rounds); exit 2 when the CPU lacks AVX512-VNNI or AVX512-BF16. */
#include "peak_time.h"

#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NACC 16
#define ROUNDS 20000000L

/* VPDPBUSD in asm: GCC 12 copies the intrinsic's accumulator before each
 * instruction (src/backend/cpu/gemm_int8.c says more), which would measure
 * the copies. */
__attribute__((target("avx512f,avx512vnni"))) static inline __m512i dpbusd(__m512i c, __m512i a, __m512i b)
{
    __asm__("vpdpbusd %2, %1, %0" : "+v"(c) : "v"(a), "v"(b));
    return c;
}

__attribute__((target("avx512f,avx512vnni"))) static float chains_int8(void)
{
    __m512i acc[NACC];
    const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
    for (int k = 0; k < NACC; k++) acc[k] = _mm512_set1_epi32(k);
    for (long r = 0; r < ROUNDS; r++) {
#pragma GCC unroll 16
        for (int k = 0; k < NACC; k++) acc[k] = dpbusd(acc[k], a, b);
    }
    __m512i s = acc[0];
    for (int k = 1; k < NACC; k++) s = _mm512_add_epi32(s, acc[k]);
    return (float)_mm512_reduce_add_epi32(s);
}

__attribute__((target("avx512f,avx512bf16"))) static float chains_bf16(void)
{
    __m512 acc[NACC];
    const __m512bh a = (__m512bh)_mm512_set1_epi16(0x3f80), b = (__m512bh)_mm512_set1_epi16(0x3380); /* 1, 2^-24 */
    for (int k = 0; k < NACC; k++) acc[k] = _mm512_set1_ps((float)k);
    for (long r = 0; r < ROUNDS; r++) {
#pragma GCC unroll 16
        for (int k = 0; k < NACC; k++) acc[k] = _mm512_dpbf16_ps(acc[k], a, b);
    }
    __m512 s = acc[0];
    for (int k = 1; k < NACC; k++) s = _mm512_add_ps(s, acc[k]);
    return _mm512_reduce_add_ps(s);
}

int main(int argc, char **argv)
{
    int bf = argc == 3 && !strcmp(argv[1], "bf16"), threads = argc == 3 ? atoi(argv[2]) : 0;
    if (argc != 3 || (!bf && strcmp(argv[1], "int8")) || threads < 1) {
        fprintf(stderr, "usage: int8_peak int8|bf16 THREADS\n");
        return 2;
    }
    __builtin_cpu_init();
    int has = bf ? __builtin_cpu_supports("avx512bf16") : __builtin_cpu_supports("avx512vnni");
    if (!__builtin_cpu_supports("avx512f") || !has) {
        fprintf(stderr, "int8_peak: this CPU lacks %s\n", bf ? "AVX512-BF16" : "AVX512-VNNI");
        return 2;
    }
    /* ops per instruction: 2 per multiply-add, 64 lanes of u8 x s8 or 32 bf16 products */
    double best = peak_best(threads, (bf ? 64.0 : 128.0) * NACC * ROUNDS * threads, bf ? chains_bf16 : chains_int8);
    printf("%s %d %.1f\n", argv[1], threads, best);
    return 0;
}
