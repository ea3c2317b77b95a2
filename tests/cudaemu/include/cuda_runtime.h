/* cudaemu's cuda_runtime.h: the runtime API (cuda_runtime_api.h) and, for
 * C++, the device side: dim3, threadIdx and friends, __syncthreads, the warp
 * shuffles, the device math bertc's kernels call, and the launcher that
 * CUDA_LAUNCH expands to (cudaemu_exec.h). */
#ifndef CUDAEMU_CUDA_RUNTIME_H
#define CUDAEMU_CUDA_RUNTIME_H

#include "cuda_runtime_api.h"

#ifdef __cplusplus
#include "cudaemu_exec.h"
#endif

#endif
