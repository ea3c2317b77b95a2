/* Activation elements in kernels: activation memory (backend_act) is
 * float, __half or __nv_bfloat16 (cuda_ctx.atype); kernels load an element
 * as fp32 (act_f), compute in fp32, and round once, to nearest even, where
 * they store one (act_of). For float both are the identity, so the fp32
 * instance of a kernel templated on the element type computes what an fp32
 * kernel does. */
#ifndef BERTC_CUDA_ACT_H
#define BERTC_CUDA_ACT_H

#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

__device__ __forceinline__ float act_f(float x) { return x; }
__device__ __forceinline__ float act_f(__half x) { return __half2float(x); }
__device__ __forceinline__ float act_f(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T> __device__ __forceinline__ T act_of(float x);
template <> __device__ __forceinline__ float act_of<float>(float x) { return x; }
template <> __device__ __forceinline__ __half act_of<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 act_of<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

#endif
