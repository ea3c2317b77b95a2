/* cudaemu's __half: IEEE binary16 in 16 bits, with CUDA's conversions
 * (round to nearest even; overflow to inf; NaN to the canonical 0x7fff). */
#ifndef CUDAEMU_CUDA_FP16_H
#define CUDAEMU_CUDA_FP16_H

#include "cudaemu_16bit.h"

static inline uint16_t cudaemu_f2h_bits(float f)
{
    uint32_t x = cudaemu_f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return 0x7fff;              /* NaN */
    if (ax >= 0x477ff000u) return sign | 0x7c00u;     /* 65520 and up (and inf): inf */
    if (ax >= 0x38800000u) {                          /* normal: 2^-14 and up */
        uint32_t h = (((ax >> 23) - 127 + 15) << 10) | ((ax & 0x7fffffu) >> 13);
        uint32_t rem = ax & 0x1fffu;
        if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;
        return (uint16_t)(sign | h);
    }
    if (ax < 0x33000000u) return sign; /* below 2^-25: zero */
    uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    int e = (int)(ax >> 23) - 127; /* -25 .. -15 */
    int shift = -(e + 1);          /* 14 .. 24 */
    uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) q++;
    return (uint16_t)(sign | q);
}

static inline float cudaemu_h2f_bits(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, x;
    if (e == 0x1f) x = sign | 0x7f800000u | (m << 13);
    else if (e) x = sign | ((e - 15 + 127) << 23) | (m << 13);
    else if (!m) x = sign;
    else {
        int sh = 0;
        while (!(m & 0x400u)) {
            m <<= 1;
            sh++;
        }
        x = sign | ((uint32_t)(1 - 15 + 127 - sh) << 23) | ((m & 0x3ffu) << 13);
    }
    return cudaemu_f32_of_bits(x);
}

#ifdef __cplusplus
CUDAEMU_16BIT_TYPE(__half, __float2half_rn, __float2half, __half2float, cudaemu_f2h_bits, cudaemu_h2f_bits)
#endif

#endif
