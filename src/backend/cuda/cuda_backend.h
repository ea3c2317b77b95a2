/* The CUDA backend's C interface, beyond backend.h's table: creation with a
 * precision, the device probe, and the allocator's figures. Compiled into
 * the CUDA module (libbertc_cuda.so, backend/cuda_module.h), whose table
 * holds these; backend/select.h is how the rest of bertc reaches them.
 * tests/gpu's gpu_check links them in and calls them directly.
 *
 * Precision applies to the GEMMs (cuBLASLt, fp32 accumulation): fp32
 * (plain fp32), tf32 (TF32 Tensor Cores), fp16 and bf16 (inputs converted
 * to 16 bits on the fly). Storage stays fp32: parameters, gradients,
 * optimizer state and activations, as the op table's float pointers say.
 *
 * The allocator counts every byte it hands out (the op table's alloc, the
 * workspace, cuBLASLt's workspace) and refuses, with an "out of memory"
 * error, an allocation that would take the count past mem_limit: that is
 * --gpu-mem-limit, which makes a big card behave as a small one. */
#ifndef BERTC_CUDA_BACKEND_H
#define BERTC_CUDA_BACKEND_H

#include "backend/backend.h"
#include "backend/select.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int device;             /* CUDA ordinal */
    precision_kind precision; /* PREC_AUTO: bf16 from compute capability 8.0, fp16 on 7.x */
    int64_t mem_limit;      /* bytes; 0 = none */
} cuda_backend_opts;

/* ERR_RUNTIME with the CUDA error text when there is no usable device
 * (no driver, no device, compute capability below 7.5) or creation fails;
 * ERR_INPUT for bf16 below compute capability 8.0. */
int cuda_backend_create(backend *out, const cuda_backend_opts *o);

/* 1 when device `gpu` exists and can run this build's kernels (fills name,
 * compute capability, total memory); 0 with the reason in why. Never
 * crashes without a driver: cudaGetDeviceCount failing is an answer. */
int cuda_probe(int gpu, char *name, size_t name_cap, int *cc_major, int *cc_minor, int64_t *total, char *why,
               size_t why_cap);

/* The precision a CUDA backend context computes in (resolved). */
precision_kind cuda_backend_precision(void *ctx);

/* Allocator figures of a CUDA backend context (see select.h's backend_mem). */
int cuda_backend_mem(void *ctx, backend_mem *out);
void cuda_backend_reset_peak(void *ctx);
/* Frees the workspace (select.h's backend_mem_trim). */
void cuda_backend_trim(void *ctx);

#ifdef __cplusplus
}
#endif

#endif
