/* fp32 -> bf16 (see bf16.h). */
#include "backend/cpu/bf16.h"

#include "backend/cpu/cpu_isa.h"

#include <omp.h>

#if defined(__x86_64__) && defined(__GNUC__) && (__GNUC__ >= 10 || defined(__clang__))
#include <immintrin.h>
#define HAVE_BF16_KERNEL 1

__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) static void convert_avx512bf16(uint16_t *dst,
                                                                                                const float *src,
                                                                                                size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256bh h = _mm512_cvtneps_pbh(_mm512_loadu_ps(src + i));
        _mm256_storeu_si256((__m256i *)(dst + i), (__m256i)h);
    }
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1u);
        __m256bh h = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, src + i));
        _mm256_mask_storeu_epi16(dst + i, m, (__m256i)h);
    }
}
#endif

static void convert_c(uint16_t *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = bf16_round(src[i]);
}

/* Chunks of this many elements per task (a multiple of 16). */
#define CHUNK (64 * 1024)

void bf16_from_float(uint16_t *dst, const float *src, size_t n, int nthreads)
{
    void (*fn)(uint16_t *, const float *, size_t) = convert_c;
#ifdef HAVE_BF16_KERNEL
    /* the bf16 family's avx512 code needs what this kernel does: AVX512-BF16 at level avx512 */
    if (cpu_kernel_level(CPU_K_GEMM_BF16) == CPU_ISA_AVX512) fn = convert_avx512bf16;
#endif
    size_t chunks = (n + CHUNK - 1) / CHUNK;
    if (chunks < 2 || nthreads < 2) {
        fn(dst, src, n);
        return;
    }
#pragma omp parallel for num_threads(nthreads) schedule(static)
    for (size_t c = 0; c < chunks; c++) {
        size_t i0 = c * CHUNK, len = n - i0 < CHUNK ? n - i0 : CHUNK;
        fn(dst + i0, src + i0, len);
    }
}
