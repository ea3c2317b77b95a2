/* Activation types in kernels (CUDA C++ only): the element type of
 * activation memory is ctx->atype (cuda_internal.h), float, __half or
 * __nv_bfloat16; kernels are templates on it, load through act_f (exact)
 * and store through act_of (round to nearest even), so the math between is
 * fp32 and a value is rounded once, where it is stored. Shared by the ops
 * (cuda_dense.cu, cuda_loss.cu), the fused kernels (cuda_fused.cu) and the
 * GEMMs' conversions (cuda_gemm.cu). */
#ifndef BERTC_CUDA_ACT_CUH
#define BERTC_CUDA_ACT_CUH

#include "backend/cuda/cuda_internal.h"

__device__ __forceinline__ float act_f(float x) { return x; }
__device__ __forceinline__ float act_f(__half x) { return __half2float(x); }
__device__ __forceinline__ float act_f(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T> __device__ __forceinline__ T act_of(float x);
template <> __device__ __forceinline__ float act_of<float>(float x) { return x; }
template <> __device__ __forceinline__ __half act_of<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 act_of<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

/* f rounded to T and back: the value a store of f holds. */
template <typename T> __device__ __forceinline__ float act_round(float f)
{
    return act_f(act_of<T>(f));
}

/* fn<T>(...) for the element type `at` names (a host-side dispatch). */
#define ACT_DISPATCH(at, fn, ...)                                                                              \
    do {                                                                                                       \
        if ((at) == GEMM_F16) fn<__half>(__VA_ARGS__);                                                         \
        else if ((at) == GEMM_BF16) fn<__nv_bfloat16>(__VA_ARGS__);                                            \
        else fn<float>(__VA_ARGS__);                                                                           \
    } while (0)

/* Bytes of one element of type t. */
static inline size_t act_size(gemm_type t)
{
    return t == GEMM_F32 ? 4 : 2;
}

#endif
