/* The CUDA backend's context services, which the ops call: failures
 * (cuda_fail_at), cuBLAS's status texts, the allocator with --gpu-mem-limit
 * and a high-water mark, and the workspace (cuda_ws_get). They call no op
 * and not the table (cuda_backend.cu), so the backend's files call each
 * other in one direction only. */
#include "backend/cuda/cuda_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cuda_fail_at(cuda_ctx *ctx, const char *stmt, const char *file, int line, const char *func, const char *what)
{
    if (ctx->error) return; /* the first failure explains the rest */
    ctx->error = ERR_RUNTIME;
    const char *base = strrchr(file, '/');
    snprintf(ctx->error_msg, sizeof ctx->error_msg, "%s:%d %s: %s: %s", base ? base + 1 : file, line, func, stmt,
             what);
}

const char *cuda_cublas_status_text(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "cuBLAS not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "out of memory (cuBLAS allocation failed)";
    case CUBLAS_STATUS_INVALID_VALUE: return "invalid value";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "architecture mismatch";
    case CUBLAS_STATUS_MAPPING_ERROR: return "mapping error";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "execution failed";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "internal error";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "not supported";
    default: return "unknown cuBLAS status";
    }
}

/* ------------------------------------------------------------------------
 * Allocator: cudaMalloc with bookkeeping. Sizes are rounded up to 256 bytes
 * (what cudaMalloc aligns to anyway) and counted as requested, so that the
 * count is what the planner predicts. */

void *cuda_mem_alloc(cuda_ctx *ctx, size_t bytes)
{
    size_t n = bytes < CUDA_WS_ALIGN ? CUDA_WS_ALIGN : cuda_ws_round(bytes);
    if (n == SIZE_MAX || n > (size_t)INT64_MAX) {
        err_set(ERR_RUNTIME, "cuda backend: out of memory: %zu bytes requested", bytes);
        return NULL;
    }
    if (ctx->limit > 0 && ctx->used + (int64_t)n > ctx->limit) {
        err_set(ERR_RUNTIME,
                "cuda backend: out of memory: %.1f MiB requested, %.1f MiB in use, limit %.1f MiB (--gpu-mem-limit)",
                (double)n / 1048576.0, (double)ctx->used / 1048576.0, (double)ctx->limit / 1048576.0);
        return NULL;
    }
    if (ctx->nrecs == ctx->caprecs) {
        int cap = ctx->caprecs ? 2 * ctx->caprecs : 64;
        cuda_alloc_rec *r = (cuda_alloc_rec *)realloc(ctx->recs, (size_t)cap * sizeof *r);
        if (!r) {
            err_set(ERR_RUNTIME, "cuda backend: out of memory (host) for the allocation table");
            return NULL;
        }
        ctx->recs = r;
        ctx->caprecs = cap;
    }
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, n);
    if (e != cudaSuccess) {
        cudaGetLastError(); /* an allocation failure is not sticky: clear it */
        size_t fr = 0, tot = 0;
        cudaMemGetInfo(&fr, &tot);
        err_set(ERR_RUNTIME, "cuda backend: out of memory: cudaMalloc(%.1f MiB): %s (%.1f MiB free of %.1f MiB)",
                (double)n / 1048576.0, cudaGetErrorString(e), (double)fr / 1048576.0, (double)tot / 1048576.0);
        return NULL;
    }
    CUDAEMU_ANNOTATE_SUBBUFFER(p, bytes ? bytes : 1, "an allocation (backend alloc)"); /* the rounding is outside it */
    ctx->recs[ctx->nrecs].p = p;
    ctx->recs[ctx->nrecs].bytes = n;
    ctx->nrecs++;
    ctx->used += (int64_t)n;
    if (ctx->used > ctx->peak) ctx->peak = ctx->used;
    return p;
}

void cuda_mem_release(cuda_ctx *ctx, void *p)
{
    if (!p) return;
    for (int i = ctx->nrecs - 1; i >= 0; i--) {
        if (ctx->recs[i].p != p) continue;
        ctx->used -= (int64_t)ctx->recs[i].bytes;
        ctx->recs[i] = ctx->recs[ctx->nrecs - 1];
        ctx->nrecs--;
        cudaFree(p);
        return;
    }
    /* Not ours: leave it (freeing a foreign pointer would be worse). */
    cuda_fail_at(ctx, "release", __FILE__, __LINE__, __func__, "pointer was not allocated by this backend");
}

void *cuda_ws_get(cuda_ctx *ctx, size_t bytes)
{
    if (ctx->error) return NULL;
    if (bytes <= ctx->ws_bytes && ctx->ws) return ctx->ws;
    /* Free first: the old contents are not needed, and holding both would
     * raise the peak above what the planner predicts. */
    if (ctx->ws) {
        cuda_mem_release(ctx, ctx->ws);
        ctx->ws = NULL;
        ctx->ws_bytes = 0;
    }
    void *p = cuda_mem_alloc(ctx, bytes);
    if (!p) {
        if (!ctx->error) {
            ctx->error = ERR_RUNTIME;
            snprintf(ctx->error_msg, sizeof ctx->error_msg, "workspace of %.1f MiB: %s", (double)bytes / 1048576.0,
                     err_msg());
        }
        return NULL;
    }
    ctx->ws = p;
    ctx->ws_bytes = cuda_ws_round(bytes);
    return p;
}
