/* fp32 -> bf16 for the CPU backend's bf16 products (--precision bf16):
 * round to nearest even, as torch's .to(torch.bfloat16) and the
 * VCVTNEPS2BF16 instruction round; a NaN stays a (quiet) NaN; a subnormal
 * float (below 2^-126, far under anything BERT computes) becomes a zero of
 * its sign, as the instruction does (torch would round it). */
#ifndef BERTC_BACKEND_CPU_BF16_H
#define BERTC_BACKEND_CPU_BF16_H

#include "core/half.h" /* bf16_to_float: the float a bf16 stands for */

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* One float, in portable C. */
static inline uint16_t bf16_round(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* NaN: keep it quiet */
    if ((u & 0x7f800000u) == 0) return (uint16_t)((u >> 16) & 0x8000u);      /* subnormal: signed zero */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* dst[i] = bf16_round(src[i]) for n elements, on up to nthreads threads
 * (VCVTNEPS2BF16 where the CPU has AVX512-BF16, the same bits). */
void bf16_from_float(uint16_t *dst, const float *src, size_t n, int nthreads);

#endif
