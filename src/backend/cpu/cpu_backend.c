/* The CPU backend: memory, the op table (generated from backend/ops.def),
 * the door (cpu_get_proc) and creation. The ops themselves are in ops_*.c,
 * the context's helpers in cpu_ctx.c (see cpu.h). */
#include "backend/cpu/cpu.h"
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

static backend_dtype cpu_act_type(void *vctx)
{
    (void)vctx;
    return BACKEND_F32;
}

static const backend_i cpu_backend_i = {
    .name = "cpu",
    .probs_optional = 1,
    BACKEND_MEMORY_FNS(cpu_),
    .act_type = cpu_act_type,
    .get_proc = cpu_get_proc,
#define BACKEND_OP(name, ret, params) .name = cpu_##name,
#define BACKEND_OPT(name, cpu, cuda, ret, params) .name = BACKEND_FN_##cpu(cpu_##name),
#include "backend/ops.def"
};

/* The door's functions. The table is the CPU's, so ctx is a cpu_ctx. */
static int cpu_set_batch_invariant(void *vctx, int on)
{
    /* BERTC_INFER_GEMM=openblas: the library's GEMM all the same, to measure what invariance costs
     * (bench/gemm/predict_gemm.sh). */
    const char *g = getenv("BERTC_INFER_GEMM");
    if (g && !strcmp(g, "openblas")) on = 0;
    ((cpu_ctx *)vctx)->batch_invariant = on != 0;
    return 1;
}

static int cpu_set_bf16(void *vctx, int on, char *impl, size_t cap)
{
    int rc = on ? cpu_kernels_bf16(impl, cap) : 0;
    if (rc) return rc;
    ((cpu_ctx *)vctx)->bf16 = on != 0;
    return 0;
}

/* "isa", "gemm" or "kernels": the line backend_kernel_info promises. */
static char *cpu_kernel_info(const char *what, char *buf, size_t cap)
{
    if (!strcmp(what, "isa")) snprintf(buf, cap, "%s", cpu_isa_name(cpu_kernels()->level));
    else if (!strcmp(what, "gemm")) cpu_kernels_gemm(buf, cap);
    else if (!strcmp(what, "kernels")) cpu_kernels_describe(buf, cap);
    else if (cap) buf[0] = 0;
    return buf;
}

void *cpu_get_proc(const char *name)
{
    static const struct {
        const char *name;
        void *fn;
    } procs[] = {
        {BACKEND_PROC_BATCH_INVARIANT, (void *)cpu_set_batch_invariant},
        {BACKEND_PROC_BF16, (void *)cpu_set_bf16},
        {BACKEND_PROC_ANSWER_PRECISION, (void *)cpu_set_answer_precision},
        {BACKEND_PROC_ANSWER_CHECK, (void *)cpu_answer_check},
        {BACKEND_PROC_KERNEL_INFO, (void *)cpu_kernel_info},
    };
    for (size_t i = 0; i < sizeof procs / sizeof procs[0]; i++)
        if (!strcmp(procs[i].name, name)) return procs[i].fn;
    return NULL;
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
