/* The CPU backend's context helpers, below the ops and the table: the
 * thread count, the GEMM wrapper, grown buffers and recorded failures
 * (cpu.h). The ops (ops_*.c) and answer_lowp.c call these; nothing here
 * calls back up. */
#include "backend/cpu/cpu.h"
#include "backend/cpu/gemm_fixed.h"

#include "core/err.h"

#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

void cpu_set_threads(cpu_ctx *ctx)
{
    if (omp_get_max_threads() != ctx->nthreads) omp_set_num_threads(ctx->nthreads);
}

void cpu_blas_serial_begin(cpu_ctx *ctx)
{
    ctx->blas_serial = 1;
    if (ctx->blas_pthreads && ctx->nthreads > 1) openblas_set_num_threads(1);
}

void cpu_blas_serial_end(cpu_ctx *ctx)
{
    if (ctx->blas_pthreads && ctx->nthreads > 1) openblas_set_num_threads(ctx->nthreads);
    ctx->blas_serial = 0;
}

/* gemm_fixed when the backend is batch-invariant (one thread inside a
 * cpu_blas_serial region), else oneDNN's or OpenBLAS's sgemm: inside such a
 * region oneDNN and the OpenMP build of OpenBLAS run single-threaded by
 * themselves (omp_in_parallel) and a pthreads OpenBLAS has been told to by
 * cpu_blas_serial_begin. */
void cpu_gemm(const cpu_ctx *ctx, int transa, int transb, int M, int N, int K, float alpha, const float *A, int lda,
              const float *B, int ldb, float beta, float *C, int ldc)
{
    if (ctx->batch_invariant) {
        gemm_fixed(transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, ctx->blas_serial ? 1 : ctx->nthreads);
        return;
    }
    if (ctx->onednn_sgemm) {
        if (ctx->onednn_sgemm(transa ? 'T' : 'N', transb ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta, C, ldc) != 0)
            cpu_fail((cpu_ctx *)ctx, "cpu backend: oneDNN's sgemm failed");
        return;
    }
    cblas_sgemm(CblasRowMajor, transa ? CblasTrans : CblasNoTrans, transb ? CblasTrans : CblasNoTrans, M, N, K,
                alpha, A, lda, B, ldb, beta, C, ldc);
}

uint16_t *cpu_bf16_reserve(cpu_ctx *ctx, size_t elems)
{
    if (elems > ctx->bf16_cap) {
        void *p = NULL;
        if (elems > SIZE_MAX / sizeof(uint16_t) - 32 || posix_memalign(&p, 64, elems * sizeof(uint16_t) + 64) != 0) {
            cpu_fail(ctx, "cpu backend: out of memory for the bf16 operands");
            return NULL;
        }
        free(ctx->bf16_buf);
        ctx->bf16_buf = p;
        ctx->bf16_cap = elems;
    }
    return ctx->bf16_buf;
}

void cpu_fail(cpu_ctx *ctx, const char *what)
{
    if (ctx->error) return; /* keep the first */
    ctx->error = ERR_RUNTIME;
    snprintf(ctx->error_msg, sizeof ctx->error_msg, "%s", what);
}

int cpu_scratch_reserve(cpu_ctx *ctx, size_t floats)
{
    if (floats <= ctx->scratch_floats) return 0;
    /* Round up to a cache line so every thread's block stays aligned;
     * two blocks per thread. */
    size_t per = (floats + 15) & ~(size_t)15;
    size_t total = 2 * per * (size_t)ctx->nthreads;
    void *p = NULL;
    if (per < floats || total / (2 * (size_t)ctx->nthreads) != per || total > SIZE_MAX / sizeof(float) ||
        posix_memalign(&p, 64, total * sizeof(float)) != 0) {
        cpu_fail(ctx, "cpu backend: out of memory for attention scratch");
        return -1;
    }
    free(ctx->scratch);
    ctx->scratch = p;
    ctx->scratch_floats = per;
    return 0;
}
