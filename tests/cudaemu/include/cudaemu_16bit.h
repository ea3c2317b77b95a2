/* cudaemu's 16-bit float types (cuda_fp16.h, cuda_bf16.h): 16 bits in a
 * struct, as CUDA's, with the round-to-nearest-even conversion from float
 * (NAME_rn and its alias) and the exact one back. */
#ifndef CUDAEMU_16BIT_H
#define CUDAEMU_16BIT_H

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
