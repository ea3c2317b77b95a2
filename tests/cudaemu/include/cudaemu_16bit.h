/* cudaemu's 16-bit float types (cuda_fp16.h, cuda_bf16.h): 16 bits in a
 * struct, as CUDA's, with the round-to-nearest-even conversion from float
 * (NAME_rn and its alias) and the exact one back. */
#ifndef CUDAEMU_16BIT_H
#define CUDAEMU_16BIT_H

#include <stdint.h>
#include <string.h>

/* An fp32's bits and back, by memcpy (no type punning through pointers). */
static inline uint32_t cudaemu_f32_bits(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    return x;
}

static inline float cudaemu_f32_of_bits(uint32_t x)
{
    float f;
    memcpy(&f, &x, 4);
    return f;
}

#ifdef __cplusplus
#define CUDAEMU_16BIT_TYPE(T, from_float_rn, from_float, to_float, f2bits, bits2f) \
    struct T {                                                                     \
        unsigned short __x;                                                        \
    };                                                                             \
    static inline T from_float_rn(float f)                                         \
    {                                                                              \
        T h;                                                                       \
        h.__x = f2bits(f);                                                         \
        return h;                                                                  \
    }                                                                              \
    static inline T from_float(float f) { return from_float_rn(f); }               \
    static inline float to_float(T h) { return bits2f(h.__x); }
#endif

#endif
