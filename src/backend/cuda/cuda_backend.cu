/* The CUDA backend: memory ops, the op table, creation and the device
 * probe. The context's services that ops call (the allocator, the
 * workspace, failures) are in cuda_ctx.cu, the ops in the other cuda_*.cu
 * files (cuda_internal.h): this file calls them, none of them calls this. */
#include "backend/cuda/cuda_nccl.h"
#include "backend/cuda/cuda_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The oldest compute capability this build has kernels for (CMake builds
 * sm_75 to sm_90 plus PTX). */
#define CUDA_MIN_CC_MAJOR 7
#define CUDA_MIN_CC_MINOR 5

/* ------------------------------------------------------------------------
 * Memory ops of the table. */

static void *cb_alloc(void *vctx, size_t bytes)
{
    return cuda_mem_alloc((cuda_ctx *)vctx, bytes);
}

static void cb_release(void *vctx, void *p)
{
    cuda_ctx *ctx = (cuda_ctx *)vctx;
    if (p && ctx->nwc) cuda_weights_release(ctx, p); /* its 16-bit copy first (a record of its own) */
    cuda_mem_release(ctx, p);
}

static int cb_upload(void *vctx, void *dst, const void *host_src, size_t bytes)
{
    cuda_ctx *ctx = (cuda_ctx *)vctx;
    if (!bytes) return 0;
    /* From pageable memory the copy is staged before this returns, so the
     * caller may reuse host_src at once. */
    cuda_weights_wrote(ctx, dst, bytes);
    CUDA_CHECK(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, ctx->stream));
    return 0;
}

static int cb_download(void *vctx, void *host_dst, const void *src, size_t bytes)
{
    cuda_ctx *ctx = (cuda_ctx *)vctx;
    if (!bytes) return 0;
    if (ctx->error) {
        int code = ctx->error;
        ctx->error = 0;
        return err_set(code, "cuda backend: %s", ctx->error_msg);
    }
    CUDA_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, ctx->stream));
    CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
    return 0;
}

static void cb_zero(void *vctx, void *p, size_t bytes)
{
    cuda_ctx *ctx = (cuda_ctx *)vctx;
    if (ctx->error || !bytes) return;
    cuda_weights_wrote(ctx, p, bytes);
    CUDA_TRY(ctx, cudaMemsetAsync(p, 0, bytes, ctx->stream));
}

static void cb_copy(void *vctx, void *dst, const void *src, size_t bytes)
{
    cuda_ctx *ctx = (cuda_ctx *)vctx;
    if (ctx->error || !bytes || dst == src) return;
    cuda_weights_wrote(ctx, dst, bytes);
    CUDA_TRY(ctx, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, ctx->stream));
}

/* Waits for the stream; reports (once) the first failure an op recorded or
 * an asynchronous error of a kernel. */
static int cb_sync(void *vctx)
{
    cuda_ctx *ctx = (cuda_ctx *)vctx;
    cudaError_t e = cudaStreamSynchronize(ctx->stream);
    if (ctx->error) {
        int code = ctx->error;
        ctx->error = 0;
        return err_set(code, "cuda backend: %s", ctx->error_msg);
    }
    if (e != cudaSuccess)
        return err_set(ERR_RUNTIME, "cuda backend: cudaStreamSynchronize: %s (a kernel failed; the CUDA context is "
                                    "no longer usable)",
                       cudaGetErrorString(e));
    /* Input errors kernels met since the last sync. */
    int dev_err = 0;
    CUDA_CHECK(cudaMemcpy(&dev_err, ctx->dev_err, sizeof dev_err, cudaMemcpyDeviceToHost));
    if (dev_err) {
        CUDA_CHECK(cudaMemset(ctx->dev_err, 0, sizeof dev_err));
        if (dev_err == CUDA_DEV_ERR_TYPE_ID)
            return err_set(ERR_INPUT, "cuda backend: embedding_backward: a token type id outside 0..%d (the CUDA "
                                      "backend supports type_vocab_size up to %d)",
                           CUDA_WS_MAX_TYPES - 1, CUDA_WS_MAX_TYPES);
        return err_set(ERR_RUNTIME, "cuda backend: a kernel reported input error %d", dev_err);
    }
    return 0;
}

static void cb_free(void *vctx)
{
    cuda_ctx *ctx = (cuda_ctx *)vctx;
    if (!ctx) return;
    if (ctx->stream) cudaStreamSynchronize(ctx->stream);
    for (int i = 0; i < ctx->nrecs; i++) cudaFree(ctx->recs[i].p);
    free(ctx->recs);
    free(ctx->mt_host);
    free(ctx->wc);
    if (ctx->lt) cublasLtDestroy(ctx->lt);
    if (ctx->stream) cudaStreamDestroy(ctx->stream);
    free(ctx);
}

/* The element type of activation memory: ctx->atype. */
static backend_dtype cb_act_type(void *vctx)
{
    cuda_ctx *ctx = (cuda_ctx *)vctx;
    return ctx->atype == GEMM_F16 ? BACKEND_F16 : ctx->atype == GEMM_BF16 ? BACKEND_BF16 : BACKEND_F32;
}

/* fp16/bf16 attention on the flash kernels saves the log-sum-exp
 * (cuda_attention.cu). */
static int cb_attention_saves_lse(void *vctx, int HS)
{
    cuda_ctx *ctx = (cuda_ctx *)vctx;
    return HS > 0 && cuda_ws_attention_lse(ctx->gtype != GEMM_F32, (size_t)HS);
}

/* Its precision is chosen at creation, and cuBLASLt is not batch-invariant
 * (backend.h): of the door's functions, only what attention saves. */
static void *cb_get_proc(const char *name)
{
    if (name && !strcmp(name, BACKEND_PROC_ATTENTION_SAVES_LSE)) return (void *)cb_attention_saves_lse;
    return NULL;
}

/* backend_i.annotate: tells the CPU stand-in's race check (nothing on a GPU). */
static void cb_annotate(void *vctx, const void *p, size_t bytes, const char *name)
{
    (void)vctx, (void)p, (void)bytes, (void)name;
    CUDAEMU_ANNOTATE_SUBBUFFER(p, bytes, name);
}

static const backend_i cuda_backend_i = {
    .name = "cuda",
    .probs_optional = 0, /* its softmax writes probs, and P V reads them */
    BACKEND_MEMORY_FNS(cb_),
    .act_type = cb_act_type,
    .get_proc = cb_get_proc,
#define BACKEND_OP(name, ret, params) .name = cuda_##name,
#define BACKEND_OPT(name, cpu, cuda, ret, params) .name = BACKEND_FN_##cuda(cuda_##name),
#include "backend/ops.def"
    .annotate = cb_annotate,
};

/* ------------------------------------------------------------------------
 * Probe and creation. */

extern "C" int cuda_probe(int gpu, char *name, size_t name_cap, int *cc_major, int *cc_minor, int64_t *total,
                          char *why, size_t why_cap)
{
    if (name && name_cap) name[0] = 0;
    if (cc_major) *cc_major = 0;
    if (cc_minor) *cc_minor = 0;
    if (total) *total = 0;
    if (why && why_cap) why[0] = 0;
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        cudaGetLastError();
        if (why && why_cap) {
            if (e == cudaErrorInsufficientDriver)
                snprintf(why, why_cap, "no NVIDIA driver, or one older than this build's CUDA %d.%d runtime "
                                       "(cudaGetDeviceCount: %s)",
                         CUDART_VERSION / 1000, (CUDART_VERSION % 1000) / 10, cudaGetErrorString(e));
            else snprintf(why, why_cap, "cudaGetDeviceCount: %s", cudaGetErrorString(e));
        }
        return 0;
    }
    if (count <= 0) {
        if (why && why_cap) snprintf(why, why_cap, "the driver reports no CUDA device");
        return 0;
    }
    if (gpu < 0 || gpu >= count) {
        if (why && why_cap) snprintf(why, why_cap, "GPU %d does not exist (%d found)", gpu, count);
        return 0;
    }
    int major = 0, minor = 0;
    if ((e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, gpu)) != cudaSuccess ||
        (e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, gpu)) != cudaSuccess) {
        cudaGetLastError();
        if (why && why_cap) snprintf(why, why_cap, "GPU %d: cudaDeviceGetAttribute: %s", gpu, cudaGetErrorString(e));
        return 0;
    }
    cudaDeviceProp prop;
    memset(&prop, 0, sizeof prop);
    if ((e = cudaGetDeviceProperties(&prop, gpu)) != cudaSuccess) {
        cudaGetLastError();
        if (why && why_cap) snprintf(why, why_cap, "GPU %d: cudaGetDeviceProperties: %s", gpu, cudaGetErrorString(e));
        return 0;
    }
    prop.name[sizeof prop.name - 1] = 0;
    if (name && name_cap) snprintf(name, name_cap, "%.100s", prop.name);
    if (cc_major) *cc_major = major;
    if (cc_minor) *cc_minor = minor;
    if (total) *total = (int64_t)prop.totalGlobalMem;
    if (major < CUDA_MIN_CC_MAJOR || (major == CUDA_MIN_CC_MAJOR && minor < CUDA_MIN_CC_MINOR)) {
        if (why && why_cap)
            snprintf(why, why_cap, "GPU %d (%.100s) has compute capability %d.%d; this build runs on %d.%d and newer", gpu,
                     prop.name, major, minor, CUDA_MIN_CC_MAJOR, CUDA_MIN_CC_MINOR);
        return 0;
    }
    return 1;
}

extern "C" int cuda_backend_create(backend *out, const cuda_backend_opts *o)
{
    out->i = NULL;
    out->ctx = NULL;
    if (o->mem_limit < 0) return err_set(ERR_INPUT, "cuda backend: negative memory limit");
    char name[128], why[256];
    int major = 0, minor = 0;
    int64_t total = 0;
    if (!cuda_probe(o->device, name, sizeof name, &major, &minor, &total, why, sizeof why))
        return err_set(ERR_RUNTIME, "cuda backend: %s", why);
    precision_kind prec = o->precision == PREC_AUTO ? select_auto_precision(major, minor) : o->precision;
    if (prec == PREC_BF16 && major < 8)
        return err_set(ERR_INPUT, "cuda backend: bf16 needs compute capability 8.0 or newer; %s is %d.%d", name, major,
                       minor);
    if (prec < PREC_FP32 || prec > PREC_BF16) return err_set(ERR_INPUT, "cuda backend: unknown precision %d", (int)prec);

    CUDA_CHECK(cudaSetDevice(o->device));
    cuda_ctx *ctx = (cuda_ctx *)calloc(1, sizeof *ctx);
    if (!ctx) return err_set(ERR_RUNTIME, "cuda backend: out of memory (host)");
    ctx->device = o->device;
    ctx->prec = prec;
    ctx->gtype = prec == PREC_FP16 ? GEMM_F16 : prec == PREC_BF16 ? GEMM_BF16 : GEMM_F32;
    /* the activations' type: gtype in fp16 / bf16, fp32 in fp32 / tf32 (cuda_ws_act_elem) */
    ctx->atype = cuda_ws_act_elem(ctx->gtype != GEMM_F32) == 2 ? ctx->gtype : GEMM_F32;
    ctx->limit = o->mem_limit;
    int rc = 0;
    cudaError_t e;
    cublasStatus_t s;
    if ((e = cudaDeviceGetAttribute(&ctx->sm_count, cudaDevAttrMultiProcessorCount, o->device)) != cudaSuccess ||
        (e = cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking)) != cudaSuccess) {
        rc = err_set(ERR_RUNTIME, "cuda backend: creating the stream on GPU %d: %s", o->device, cudaGetErrorString(e));
        goto fail;
    }
    if ((s = cublasLtCreate(&ctx->lt)) != CUBLAS_STATUS_SUCCESS) {
        ctx->lt = NULL;
        rc = err_set(ERR_RUNTIME, "cuda backend: cublasLtCreate: %s", cuda_cublas_status_text(s));
        goto fail;
    }
    ctx->lt_ws = cuda_mem_alloc(ctx, CUDA_WS_CUBLASLT);
    if (!ctx->lt_ws) goto fail_wrap;
    ctx->red = (double *)cuda_mem_alloc(ctx, CUDA_WS_REDUCE_BLOCKS * sizeof(double) + CUDA_WS_ALIGN);
    if (!ctx->red) goto fail_wrap;
    /* The result slots follow the partial sums: 1 double for the sum, then
     * the finite flag and the kernels' input-error code. */
    ctx->flag = (int *)(ctx->red + CUDA_WS_REDUCE_BLOCKS + 1);
    ctx->dev_err = ctx->flag + 1;
    if ((e = cudaMemsetAsync(ctx->dev_err, 0, sizeof(int), ctx->stream)) != cudaSuccess) {
        rc = err_set(ERR_RUNTIME, "cuda backend: cudaMemsetAsync: %s", cudaGetErrorString(e));
        goto fail;
    }
    out->i = &cuda_backend_i;
    out->ctx = ctx;
    return 0;
fail_wrap:
    rc = err_wrap(ERR_RUNTIME, "cuda backend: creation on GPU %d (%s)", o->device, name);
fail:
    cb_free(ctx);
    return rc;
}

extern "C" precision_kind cuda_backend_precision(void *vctx)
{
    return ((cuda_ctx *)vctx)->prec;
}

extern "C" int cuda_backend_mem(void *vctx, backend_mem *out)
{
    cuda_ctx *ctx = (cuda_ctx *)vctx;
    memset(out, 0, sizeof *out);
    size_t fr = 0, tot = 0;
    CUDA_CHECK(cudaMemGetInfo(&fr, &tot));
    out->device_free = (int64_t)fr;
    out->device_total = (int64_t)tot;
    out->used = ctx->used;
    out->peak = ctx->peak;
    out->limit = ctx->limit;
    out->free = (int64_t)fr;
    if (ctx->limit > 0 && ctx->limit - ctx->used < out->free) out->free = ctx->limit - ctx->used;
    if (out->free < 0) out->free = 0;
    return 0;
}

extern "C" void cuda_backend_trim(void *vctx)
{
    cuda_ctx *ctx = (cuda_ctx *)vctx;
    if (!ctx->ws) return;
    cudaStreamSynchronize(ctx->stream); /* ops in flight may still read it */
    cuda_mem_release(ctx, ctx->ws);
    ctx->ws = NULL;
    ctx->ws_bytes = 0;
}

extern "C" void cuda_backend_reset_peak(void *vctx)
{
    cuda_ctx *ctx = (cuda_ctx *)vctx;
    ctx->peak = ctx->used;
}

/* The module's table (backend/cuda_module.h). */
static int api_create(backend *out, int device, precision_kind precision, int64_t mem_limit)
{
    cuda_backend_opts o = {device, precision, mem_limit};
    return cuda_backend_create(out, &o);
}

/* NCCL writes the parameters of the sharded optimizer's all-gather, and
 * whatever else the collectives and receives are given: their 16-bit
 * copies go stale. */
static int api_nccl_begin(void *vctx, float *dev_x, size_t n)
{
    cuda_weights_wrote((cuda_ctx *)vctx, dev_x, n * sizeof(float));
    return cuda_nccl_allreduce_begin((void *)((cuda_ctx *)vctx)->stream, dev_x, n);
}

static int api_nccl_reduce_scatter(void *vctx, float *dev_x, size_t n)
{
    cuda_weights_wrote((cuda_ctx *)vctx, dev_x, n * sizeof(float));
    return cuda_nccl_reduce_scatter_begin((void *)((cuda_ctx *)vctx)->stream, dev_x, n);
}

static int api_nccl_allgather(void *vctx, float *dev_x, size_t n)
{
    cuda_weights_wrote((cuda_ctx *)vctx, dev_x, n * sizeof(float));
    return cuda_nccl_allgather_begin((void *)((cuda_ctx *)vctx)->stream, dev_x, n);
}

static int api_p2p_send(void *vctx, int ch, const float *dev, size_t n, int peer, int slot)
{
    return cuda_nccl_p2p_send((void *)((cuda_ctx *)vctx)->stream, ch, dev, n, peer, slot);
}

static int api_p2p_recv(void *vctx, int ch, float *dev, size_t n, int peer, int slot)
{
    cuda_weights_wrote((cuda_ctx *)vctx, dev, n * sizeof(float));
    return cuda_nccl_p2p_recv((void *)((cuda_ctx *)vctx)->stream, ch, dev, n, peer, slot);
}

static const bertc_cuda_api cuda_api_table = {
    BERTC_CUDA_ABI,
    sizeof(bertc_cuda_api),
    sizeof(backend_i),
    sizeof(backend_mem),
    BERTC_VERSION,
    CUDART_VERSION,
    cuda_probe,
    api_create,
    cuda_backend_precision,
    cuda_backend_mem,
    cuda_backend_trim,
    cuda_backend_reset_peak,
    cuda_nccl_load,
    cuda_nccl_init,
    cuda_nccl_free,
    api_nccl_begin,
    cuda_nccl_allreduce_wait,
    api_nccl_reduce_scatter,
    api_nccl_allgather,
    cuda_nccl_p2p_init,
    api_p2p_send,
    api_p2p_recv,
    cuda_nccl_p2p_wait,
    cuda_nccl_p2p_free,
};

extern "C" const bertc_cuda_api *cuda_backend_api(void)
{
    return &cuda_api_table;
}
