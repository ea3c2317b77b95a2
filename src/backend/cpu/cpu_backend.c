/* The CPU backend: context, memory, thread count, the GEMM wrapper and the
 * op table. The ops themselves are in ops_*.c (see cpu.h). */
#include "backend/cpu/cpu.h"
#include "backend/cpu/gemm_fixed.h"
#include "backend/cpu_kernels.h"

#include "core/err.h"

#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Attention row blocks fit in this much memory per thread (L2-sized) unless
 * one row of a long sequence needs more. */
#define CPU_SCRATCH_DEFAULT (64 * 1024)

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

static void cpu_free(void *vctx)
{
    cpu_ctx *ctx = vctx;
    if (!ctx) return;
    cpu_mask_cache_free(ctx);
    cpu_lowp_free(ctx);
    free(ctx->scratch);
    free(ctx->bf16_buf);
    free(ctx);
}

static void *cpu_alloc(void *vctx, size_t bytes)
{
    (void)vctx;
    void *p = NULL;
    /* Round up so that vector loops may read whole cache lines; 0 bytes
     * still gives a distinct pointer that release accepts. */
    size_t n = bytes + 63 < bytes ? 0 : (bytes + 63) & ~(size_t)63;
    if (n == 0 && bytes != 0) {
        err_set(ERR_RUNTIME, "cpu backend: out of memory (%zu bytes requested)", bytes);
        return NULL;
    }
    if (n == 0) n = 64;
    if (posix_memalign(&p, 64, n) != 0) {
        err_set(ERR_RUNTIME, "cpu backend: out of memory (%zu bytes requested)", bytes);
        return NULL;
    }
    return p;
}

static void cpu_release(void *vctx, void *p)
{
    cpu_lowp_forget_block(vctx, p);
    free(p);
}

static int cpu_upload(void *vctx, void *dst, const void *host_src, size_t bytes)
{
    cpu_lowp_forget(vctx, dst, bytes);
    if (bytes) memmove(dst, host_src, bytes);
    return 0;
}

static int cpu_download(void *vctx, void *host_dst, const void *src, size_t bytes)
{
    (void)vctx;
    if (bytes) memmove(host_dst, src, bytes);
    return 0;
}

static void cpu_zero(void *vctx, void *p, size_t bytes)
{
    cpu_lowp_forget(vctx, p, bytes);
    if (bytes) memset(p, 0, bytes);
}

static void cpu_copy(void *vctx, void *dst, const void *src, size_t bytes)
{
    cpu_lowp_forget(vctx, dst, bytes);
    if (bytes && dst != src) memmove(dst, src, bytes);
}

/* Ops run synchronously; sync reports (once) a failure an op recorded. */
static int cpu_sync(void *vctx)
{
    cpu_ctx *ctx = vctx;
    if (!ctx->error) return 0;
    int code = ctx->error;
    ctx->error = 0;
    return err_set(code, "%s", ctx->error_msg);
}

static const backend_i cpu_backend_i = {
    .name = "cpu",
    .probs_optional = 1,
    .free = cpu_free,
    .alloc = cpu_alloc,
    .release = cpu_release,
    .upload = cpu_upload,
    .download = cpu_download,
    .zero = cpu_zero,
    .copy = cpu_copy,
    .sync = cpu_sync,
    .embedding_forward = cpu_embedding_forward,
    .embedding_backward = cpu_embedding_backward,
    .layernorm_forward = cpu_layernorm_forward,
    .layernorm_backward = cpu_layernorm_backward,
    .matmul_forward = cpu_matmul_forward,
    .matmul_backward = cpu_matmul_backward,
    .matmul_forward_n = cpu_matmul_forward_n,
    .gelu_forward = cpu_gelu_forward,
    .gelu_backward = cpu_gelu_backward,
    .attention_forward = cpu_attention_forward,
    .attention_backward = cpu_attention_backward,
    .dropout_forward = cpu_dropout_forward,
    .dropout_backward = cpu_dropout_backward,
    .add = cpu_add,
    .qa_loss = cpu_qa_loss,
    .sum_squares = cpu_sum_squares,
    .scale = cpu_scale,
    .all_finite = cpu_all_finite,
    .adamw = cpu_adamw,
};

int backend_set_batch_invariant(backend *b, int on)
{
    if (!b || b->i != &cpu_backend_i) return 0;
    /* BERTC_INFER_GEMM=openblas: the library's GEMM all the same, to measure what invariance costs
     * (bench/gemm/predict_gemm.sh). */
    const char *g = getenv("BERTC_INFER_GEMM");
    if (g && !strcmp(g, "openblas")) on = 0;
    ((cpu_ctx *)b->ctx)->batch_invariant = on != 0;
    return 1;
}

int backend_cpu_set_bf16(backend *b, int on, char *impl, size_t cap)
{
    if (!b || b->i != &cpu_backend_i) return err_set(ERR_INPUT, "backend_cpu_set_bf16: not a CPU backend");
    int rc = on ? cpu_kernels_bf16(impl, cap) : 0;
    if (rc) return rc;
    ((cpu_ctx *)b->ctx)->bf16 = on != 0;
    return 0;
}

int backend_cpu_create(backend *out, int nthreads)
{
    if (!out) return err_set(ERR_INPUT, "backend_cpu_create: no output");
    out->i = NULL;
    out->ctx = NULL;
    if (nthreads < 0) return err_set(ERR_INPUT, "backend_cpu_create: thread count %d is negative", nthreads);
    if (nthreads == 0) nthreads = omp_get_num_procs();
    if (nthreads < 1) nthreads = 1;
    cpu_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return err_set(ERR_RUNTIME, "backend_cpu_create: out of memory");
    ctx->nthreads = nthreads;
    /* openblas_get_parallel: 0 sequential, 1 pthreads, 2 OpenMP */
    ctx->blas_pthreads = openblas_get_parallel() == 1;
    if (cpu_scratch_reserve(ctx, CPU_SCRATCH_DEFAULT) != 0) {
        cpu_free(ctx);
        return err_set(ERR_RUNTIME, "backend_cpu_create: out of memory for %d threads' scratch", nthreads);
    }
    omp_set_num_threads(nthreads);
    openblas_set_num_threads(nthreads);
    ctx->onednn_sgemm = cpu_kernels_onednn_sgemm();
    out->i = &cpu_backend_i;
    out->ctx = ctx;
    return 0;
}
