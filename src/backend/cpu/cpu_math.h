/* Vectorizable math for the CPU backend's elementwise loops.
 *
 * glibc's expf is a call per element (about 6 ns here); softmax alone needs
 * B*NH*T*T of them per layer, so the hot loops use this exp, which GCC turns
 * into 8-wide AVX2 code inside `omp simd` loops. It is accurate to about one
 * ulp, as torch's own vectorized exp (SLEEF) is; neither is bit-exact with
 * the other.
 *
 * CPU_CLONES compiles a function twice, for x86-64-v3 (AVX2 + FMA) and the
 * baseline, and picks one when the program loads. Every file that uses it
 * turns floating-point contraction off, so both clones compute the same
 * rounded operations and results do not depend on the machine: a fused
 * multiply-add happens only where the code calls fmaf (as torch does in
 * the same place). */
#ifndef BERTC_BACKEND_CPU_MATH_H
#define BERTC_BACKEND_CPU_MATH_H

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

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(BERTC_NO_CLONES)
#define CPU_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define CPU_CLONES
#endif

/* The vector loops need these inlined, and GCC would not inline erff
 * (too big) on its own. */
#if defined(__GNUC__)
#define CPU_INLINE static inline __attribute__((always_inline))
#else
#define CPU_INLINE static inline
#endif

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
    /* round(x / ln2) by the 1.5 * 2^23 trick (|x / ln2| < 2^22 here) */
    float kf = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = xc - kf * 0.693359375f;
    r = r - kf * -2.12194440e-4f;
    float z = r * r;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * z + r + 1.0f;
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
    float p = 8.397949945e-05f;
    p = p * z + -8.149848147e-04f;
    p = p * z + 5.201720500e-03f;
    p = p * z + -2.685970449e-02f;
    p = p * z + 1.128370167e-01f;
    p = p * z + -3.761263419e-01f;
    p = p * z + 1.283791667e-01f;
    float small = x + x * p;

    float t = 1.0f / (1.0f + 0.5f * a);
    float q = 1.198415930e-01f;
    q = q * t + -4.730046766e-01f;
    q = q * t + 5.660646725e-01f;
    q = q * t + -1.059859575e-01f;
    q = q * t + 3.489958066e-01f;
    q = q * t + 2.593330577e-01f;
    q = q * t + 2.849702568e-01f;
    q = q * t + -1.581554266e-04f;
    float big = 1.0f - cpu_expf(-z) * q;
    big = a >= 3.92f ? 1.0f : big;
    big = x < 0.0f ? -big : big;
    float r = a < 0.921875f ? small : big;
    return x != x ? x : r;
}

#endif
