/* 16-bit floats widened to float, exactly: IEEE half (every value,
 * subnormals, infinities and NaN payloads included, is a float) and bf16
 * (the upper half of a float). The checkpoint readers (safetensors, TF
 * bundles), the activation conversions (backend/act_convert.c) and the CPU
 * backend's bf16 products all widen with these. */
#ifndef BERTC_CORE_HALF_H
#define BERTC_CORE_HALF_H

#include <stdint.h>
#include <string.h>

static inline float f16_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13);
    } else if (exp) {
        bits = sign | ((exp + 112u) << 23) | (man << 13);
    } else {
        /* zero or subnormal: man * 2^-24, exact in float */
        float v = (float)man * 0x1p-24f;
        memcpy(&bits, &v, 4);
        bits |= sign;
    }
    float out;
    memcpy(&out, &bits, 4);
    return out;
}

static inline float bf16_to_float(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

#endif
