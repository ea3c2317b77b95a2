/* Vectorizable math for the CPU backend's elementwise loops.
 *
 * glibc's expf is a call per element (about 6 ns here); softmax alone needs
 * B*NH*T*T of them per layer, so the hot loops use this exp, which GCC turns
 * into 8-wide AVX2 code inside `omp simd` loops. It is accurate to about one
 * ulp, as torch's own vectorized exp (SLEEF) is; neither is bit-exact with
 * the other.
 *
 * CPU_VARIANTS compiles a loop twice, for x86-64-v3 (AVX2 + FMA) and the
 * baseline, and runs the one cpu_kernel_level() decided for its family
 * (cpu_isa.h), so a BERTC_CPU_ISA cap runs the baseline code an older CPU
 * runs. Every file that uses it turns floating-point contraction off, so
 * both variants compute the same rounded operations and results do not
 * depend on the machine: a fused multiply-add happens only where the code
 * calls fmaf (as torch does in the same place). */
#ifndef BERTC_BACKEND_CPU_MATH_H
#define BERTC_BACKEND_CPU_MATH_H

#include "backend/cpu/cpu_isa.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* Included first by every ops file, so these apply to all its functions:
 * no contraction (see above); no trapping math, which lets GCC turn the
 * selects of the loops below into vector blends (a float multiply "could
 * trap" otherwise and stays behind a branch). Neither changes a result. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off", "no-trapping-math")
#endif

/* The vector loops need these inlined, and GCC would not inline erff
 * (too big) on its own. */
#if defined(__GNUC__)
#define CPU_INLINE static inline __attribute__((always_inline))
#else
#define CPU_INLINE static inline
#endif

/* CPU_VARIANTS(FAMILY, name, (params), (args)) after `CPU_INLINE void
 * name_code(params)`: name_avx2 (x86-64-v3) and name_sse (the baseline)
 * with that code inlined, and name(), which runs the one FAMILY's level
 * asks for. CPU_VARIANTS_RET is the same for a function returning TYPE.
 * A caller that dispatches on the level itself (an intrinsics loop first,
 * then the rest) calls name_avx2 or name_sse directly. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(BERTC_NO_CLONES)
#define CPU_TARGET_AVX2 __attribute__((target("arch=x86-64-v3")))
/* The avx512 variant of a family that has one: the same C, vectorised 16 wide. */
#define CPU_TARGET_AVX512 __attribute__((target("arch=x86-64-v4")))
#else
#define CPU_TARGET_AVX2
#define CPU_TARGET_AVX512
#endif
#if defined(__GNUC__)
#define CPU_MAYBE_UNUSED __attribute__((unused))
#else
#define CPU_MAYBE_UNUSED
#endif
#define CPU_VARIANTS(family, name, params, args)                   \
    CPU_TARGET_AVX2 CPU_MAYBE_UNUSED static void name##_avx2 params { name##_code args; } \
    CPU_MAYBE_UNUSED static void name##_sse params { name##_code args; }              \
    CPU_MAYBE_UNUSED static void name params                                          \
    {                                                                \
        if (cpu_kernel_level(family) >= CPU_ISA_AVX2) name##_avx2 args; \
        else name##_sse args;                                        \
    }
#define CPU_VARIANTS_RET(family, type, name, params, args)                           \
    CPU_TARGET_AVX2 CPU_MAYBE_UNUSED static type name##_avx2 params { return name##_code args; } \
    CPU_MAYBE_UNUSED static type name##_sse params { return name##_code args; }                  \
    CPU_MAYBE_UNUSED static type name params                                                     \
    {                                                                               \
        return cpu_kernel_level(family) >= CPU_ISA_AVX2 ? name##_avx2 args : name##_sse args; \
    }

static inline float cpu_bits_to_float(int32_t i)
{
    float f;
    memcpy(&f, &i, sizeof f);
    return f;
}

/* dst = sqrt(src), correctly rounded as sqrtf. GCC keeps sqrtf scalar (a
 * call for errno's sake) even in `omp simd` loops, whatever the pragma says;
 * SSE2's sqrtps, present on every x86-64, does 4 at a time. */
static inline void cpu_sqrt_array(float *dst, const float *src, size_t n)
{
    size_t i = 0;
#if defined(__SSE2__)
    for (; i + 4 <= n; i += 4) _mm_storeu_ps(dst + i, _mm_sqrt_ps(_mm_loadu_ps(src + i)));
#endif
    for (; i < n; i++) dst[i] = sqrtf(src[i]);
}

/* The arithmetic of e^x and erf(x), written once for the scalar functions
 * and their 8-lane forms below: GCC's vector operators apply to __m256 as
 * to float (a constant taken to every lane), each operation rounded alone
 * (no contraction), so both compute the same operations in the same order
 * (tools/check_vector_math.c checks every input). The 16-lane forms keep
 * their intrinsics: no AVX-512 machine was at hand to check them on.
 *
 * e^x: round(x / ln2) by the 1.5 * 2^23 trick (|x / ln2| < 2^22 here), the
 * Cody-Waite reduction r = x - k ln2 (ln2 in two parts), and Cephes'
 * degree-5 polynomial for e^r (z = r * r). */
#define CPU_EXP_ROUND(xc) ((xc) * 1.44269504088896341f + 12582912.0f - 12582912.0f)
#define CPU_EXP_REDUCE(xc, kf) ((xc) - (kf) * 0.693359375f - (kf) * -2.12194440e-4f)
#define CPU_EXP_POLY(r, z)                                                                                   \
    ((((((1.9875691500e-4f * (r) + 1.3981999507e-3f) * (r) + 8.3334519073e-3f) * (r) + 4.1665795894e-2f) * (r) + \
       1.6666665459e-1f) * (r) + 5.0000001201e-1f) * (z) + (r) + 1.0f)
/* erf: x + x P(x^2) below 0.921875 (z = x * x); above, 1 - e^(-x^2) Q(t) with
 * t = 1 / (1 + |x| / 2). */
#define CPU_ERF_SMALL(x, z)                                                                                     \
    ((x) + (x) * ((((((8.397949945e-05f * (z) + -8.149848147e-04f) * (z) + 5.201720500e-03f) * (z) +               \
                    -2.685970449e-02f) * (z) + 1.128370167e-01f) * (z) + -3.761263419e-01f) * (z) + 1.283791667e-01f))
#define CPU_ERFC_T(a) (1.0f / (1.0f + 0.5f * (a)))
#define CPU_ERFC_Q(t)                                                                                          \
    (((((((1.198415930e-01f * (t) + -4.730046766e-01f) * (t) + 5.660646725e-01f) * (t) + -1.059859575e-01f) * (t) + \
         3.489958066e-01f) * (t) + 2.593330577e-01f) * (t) + 2.849702568e-01f) * (t) + -1.581554266e-04f)

/* e^x for all floats: NaN stays NaN, large x gives inf, very negative x
 * underflows to 0 (gradually). Cody-Waite reduction x = k ln2 + r with
 * |r| <= ln2/2, Cephes' degree-5 polynomial for e^r, then 2^k applied as
 * two halves so that k can reach either end of the exponent range. */
CPU_INLINE float cpu_expf(float x)
{
    int nan = x != x;
    float xc = nan ? 0.0f : x;
    xc = xc < -104.0f ? -104.0f : xc;
    xc = xc > 89.0f ? 89.0f : xc;
    float kf = CPU_EXP_ROUND(xc), r = CPU_EXP_REDUCE(xc, kf);
    float p = CPU_EXP_POLY(r, r * r);
    int32_t k = (int32_t)kf;
    int32_t k1 = k / 2, k2 = k - k1;
    float y = p * cpu_bits_to_float((k1 + 127) << 23) * cpu_bits_to_float((k2 + 127) << 23);
    return nan ? x : y;
}


/* erf(x) for all floats, within about 1 ulp (glibc's erff is a call per
 * element). Coefficients fitted for bertc (tools are not needed to build):
 *   |x| < 0.921875:  erf = x + x P(x^2), P a degree-6 fit of erf(x)/x - 1
 *   |x| < 3.92:      erf = 1 - e^(-x^2) Q(t), t = 1/(1 + |x|/2), Q a degree-7
 *                    fit of erfc(x) e^(x^2), relative error 3e-10
 *   beyond:          +-1 (erfc < half an ulp of 1) */
CPU_INLINE float cpu_erff(float x)
{
    float a = x < 0.0f ? -x : x;
    float z = x * x;
    float small = CPU_ERF_SMALL(x, z);
    float big = 1.0f - cpu_expf(-z) * CPU_ERFC_Q(CPU_ERFC_T(a));
    big = a >= 3.92f ? 1.0f : big;
    big = x < 0.0f ? -big : big;
    float r = a < 0.921875f ? small : big;
    return x != x ? x : r;
}

/* The same two functions 8 lanes at a time with AVX2 intrinsics, operation
 * for operation (the selects as blends, the clamps of a NaN-free value as
 * min and max, x / 2 as the shift GCC makes of it): equal bit for bit to
 * cpu_expf and cpu_erff for all 2^32 inputs (tools/check_vector_math.c
 * checks every one), and a fifth faster than GCC's vectorization of the C.
 * Used by a family's avx2 variant. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(BERTC_NO_CLONES)
#define CPU_HAVE_AVX2_MATH 1
#include <immintrin.h>

#define CPU_SET8(v) _mm256_set1_ps(v)

__attribute__((target("avx2"), always_inline)) static inline __m256 cpu_expf8(__m256 x)
{
    __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
    __m256 xc = _mm256_min_ps(_mm256_max_ps(x, CPU_SET8(-104.0f)), CPU_SET8(89.0f));
    __m256 kf = CPU_EXP_ROUND(xc), r = CPU_EXP_REDUCE(xc, kf);
    __m256 p = CPU_EXP_POLY(r, r * r);
    __m256i k = _mm256_cvttps_epi32(kf);
    __m256i k1 = _mm256_srai_epi32(_mm256_add_epi32(k, _mm256_srli_epi32(k, 31)), 1);
    __m256i k2 = _mm256_sub_epi32(k, k1);
    const __m256i b127 = _mm256_set1_epi32(127);
    __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k1, b127), 23));
    __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k2, b127), 23));
    return _mm256_blendv_ps(_mm256_mul_ps(_mm256_mul_ps(p, s1), s2), x, nan);
}

__attribute__((target("avx2"), always_inline)) static inline __m256 cpu_erff8(__m256 x)
{
    const __m256 sign = CPU_SET8(-0.0f);
    __m256 neg = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ);
    __m256 a = _mm256_blendv_ps(x, _mm256_xor_ps(x, sign), neg);
    __m256 z = x * x;
    __m256 small = CPU_ERF_SMALL(x, z);
    __m256 big = 1.0f - cpu_expf8(_mm256_xor_ps(z, sign)) * CPU_ERFC_Q(CPU_ERFC_T(a));
    big = _mm256_blendv_ps(big, CPU_SET8(1.0f), _mm256_cmp_ps(a, CPU_SET8(3.92f), _CMP_GE_OQ));
    big = _mm256_blendv_ps(big, _mm256_xor_ps(big, sign), neg);
    __m256 r = _mm256_blendv_ps(big, small, _mm256_cmp_ps(a, CPU_SET8(0.921875f), _CMP_LT_OQ));
    return _mm256_blendv_ps(r, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}
/* The same two functions 16 lanes at a time with AVX-512F intrinsics, the
 * operations of cpu_expf8 and cpu_erff8 (the selects as mask blends): the
 * same bits for all 2^32 inputs (tools/check_vector_math.c). Used by the
 * avx512 variants of softmax and GELU. */
#define CPU_SET16(v) _mm512_set1_ps(v)
#define CPU_AVX512_MATH __attribute__((target("avx512f,avx512dq"), always_inline))

CPU_AVX512_MATH static inline __m512 cpu_expf16(__m512 x)
{
    __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    __m512 xc = _mm512_min_ps(_mm512_max_ps(x, CPU_SET16(-104.0f)), CPU_SET16(89.0f));
    const __m512 shift = CPU_SET16(12582912.0f);
    __m512 kf = _mm512_sub_ps(_mm512_add_ps(_mm512_mul_ps(xc, CPU_SET16(1.44269504088896341f)), shift), shift);
    __m512 r = _mm512_sub_ps(xc, _mm512_mul_ps(kf, CPU_SET16(0.693359375f)));
    r = _mm512_sub_ps(r, _mm512_mul_ps(kf, CPU_SET16(-2.12194440e-4f)));
    __m512 z = _mm512_mul_ps(r, r);
    __m512 p = CPU_SET16(1.9875691500e-4f);
    p = _mm512_add_ps(_mm512_mul_ps(p, r), CPU_SET16(1.3981999507e-3f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), CPU_SET16(8.3334519073e-3f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), CPU_SET16(4.1665795894e-2f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), CPU_SET16(1.6666665459e-1f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), CPU_SET16(5.0000001201e-1f));
    p = _mm512_add_ps(_mm512_add_ps(_mm512_mul_ps(p, z), r), CPU_SET16(1.0f));
    /* p 2^k in one VSCALEFPS: p (in [0.7, 1.5)) times 2^(k/2) is exact, so
     * the C's two multiplies round once, where the whole product does */
    return _mm512_mask_blend_ps(nan, _mm512_scalef_ps(p, kf), x);
}

CPU_AVX512_MATH static inline __m512 cpu_erff16(__m512 x)
{
    __mmask16 neg = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
    __m512 a = _mm512_abs_ps(x);
    __m512 z = _mm512_mul_ps(x, x);
    __m512 p = CPU_SET16(8.397949945e-05f);
    p = _mm512_add_ps(_mm512_mul_ps(p, z), CPU_SET16(-8.149848147e-04f));
    p = _mm512_add_ps(_mm512_mul_ps(p, z), CPU_SET16(5.201720500e-03f));
    p = _mm512_add_ps(_mm512_mul_ps(p, z), CPU_SET16(-2.685970449e-02f));
    p = _mm512_add_ps(_mm512_mul_ps(p, z), CPU_SET16(1.128370167e-01f));
    p = _mm512_add_ps(_mm512_mul_ps(p, z), CPU_SET16(-3.761263419e-01f));
    p = _mm512_add_ps(_mm512_mul_ps(p, z), CPU_SET16(1.283791667e-01f));
    __m512 small = _mm512_add_ps(x, _mm512_mul_ps(x, p));
    __mmask16 is_small = _mm512_cmp_ps_mask(a, CPU_SET16(0.921875f), _CMP_LT_OQ);
    __m512 r = small;
    /* the tail's branch (an exponential and a division) only where a lane
     * needs it: the selected lanes are the same either way */
    if (is_small != 0xffff) {
        __m512 t = _mm512_div_ps(CPU_SET16(1.0f), _mm512_add_ps(CPU_SET16(1.0f), _mm512_mul_ps(CPU_SET16(0.5f), a)));
        __m512 q = CPU_SET16(1.198415930e-01f);
        q = _mm512_add_ps(_mm512_mul_ps(q, t), CPU_SET16(-4.730046766e-01f));
        q = _mm512_add_ps(_mm512_mul_ps(q, t), CPU_SET16(5.660646725e-01f));
        q = _mm512_add_ps(_mm512_mul_ps(q, t), CPU_SET16(-1.059859575e-01f));
        q = _mm512_add_ps(_mm512_mul_ps(q, t), CPU_SET16(3.489958066e-01f));
        q = _mm512_add_ps(_mm512_mul_ps(q, t), CPU_SET16(2.593330577e-01f));
        q = _mm512_add_ps(_mm512_mul_ps(q, t), CPU_SET16(2.849702568e-01f));
        q = _mm512_add_ps(_mm512_mul_ps(q, t), CPU_SET16(-1.581554266e-04f));
        __m512 big = _mm512_sub_ps(CPU_SET16(1.0f), _mm512_mul_ps(cpu_expf16(_mm512_xor_ps(z, CPU_SET16(-0.0f))), q));
        big = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, CPU_SET16(3.92f), _CMP_GE_OQ), big, CPU_SET16(1.0f));
        big = _mm512_mask_blend_ps(neg, big, _mm512_xor_ps(big, CPU_SET16(-0.0f)));
        r = _mm512_mask_blend_ps(is_small, big, small);
    }
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), r, x);
}
#endif

#endif
