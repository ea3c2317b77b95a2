/* cudaemu's __nv_bfloat16: the top 16 bits of an fp32, with CUDA's
 * conversion (round to nearest even; NaN to the canonical 0x7fff). */
#ifndef CUDAEMU_CUDA_BF16_H
#define CUDAEMU_CUDA_BF16_H

#include "cudaemu_16bit.h"

static inline uint16_t cudaemu_f2bf_bits(float f)
{
    uint32_t x = cudaemu_f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return 0x7fff;
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

static inline float cudaemu_bf2f_bits(uint16_t b)
{
    return cudaemu_f32_of_bits((uint32_t)b << 16);
}

#ifdef __cplusplus
CUDAEMU_16BIT_TYPE(__nv_bfloat16, __float2bfloat16_rn, __float2bfloat16, __bfloat162float, cudaemu_f2bf_bits, cudaemu_bf2f_bits)
#endif

#endif
