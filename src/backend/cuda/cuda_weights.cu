/* The 16-bit copies of the fp32 weights that the GEMMs read in fp16 and
 * bf16 (issue 47): without them every matmul converted its weight into the
 * workspace first, forward and backward, each step (about 1 GB of traffic
 * a step for BERT-base, and a launch per weight).
 *
 * A copy belongs to one allocation (cuda_alloc_rec): made the first time
 * a matmul reads a weight inside that allocation (bert.c's parameter
 * block: one copy of every weight), 2 bytes per float of it, freed with it
 * (the table's release, cb_release). It holds the span GEMMs have read
 * (the hull of their weights): a read beyond it widens the span and
 * converts what it adds, so
 * no conversion reads floats no GEMM asked for (the allocation's rounding,
 * a caller's spare float: the stand-in's race check holds a kernel to the
 * tensor it is given). Each copy keeps the floats of its span written
 * since its last refresh as one stale interval; the next read converts
 * that interval in one launch, so a copy a GEMM reads is always the fp32
 * weight rounded (__float2half_rn / __float2bfloat16_rn, as cuda_convert).
 *
 * What marks a copy stale (cuda_weights_wrote, with the bytes written):
 * every backend op that writes parameters, whichever memory the caller
 * passes it: the memory ops (upload, zero, copy), scale, the single-tensor
 * adamw, and the NCCL collectives and receives of the module's table (the
 * sharded optimizer's all-gather, the pipeline's messages). adamw_multi
 * writes the copy itself in its one pass (cuda_mt_tensor.p16), so a
 * current copy stays current with no conversion at all. The other ops
 * write activations, gradients and statistics (ops.def), which bertc never
 * hands a GEMM as its weight, and do not mark. On the stand-in every read
 * checks the copy against its fp32 weight element for element (a stale
 * read stops the run as a failure), so a write that forgets to mark it is
 * caught by any test that trains or answers there. */
#include "backend/cuda/cuda_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The copy whose allocation holds p, or NULL. */
static cuda_wcopy *wcopy_find(cuda_ctx *ctx, const void *p)
{
    const char *c = (const char *)p;
    for (int i = 0; i < ctx->nwc; i++)
        if (c >= ctx->wc[i].base && c < ctx->wc[i].base + ctx->wc[i].nf * sizeof(float)) return &ctx->wc[i];
    return NULL;
}

/* A new copy of the allocation that holds w, its span empty; NULL with the
 * failure recorded. */
static cuda_wcopy *wcopy_make(cuda_ctx *ctx, const float *w)
{
    const char *base = NULL;
    size_t bytes = 0;
    for (int i = 0; i < ctx->nrecs && !base; i++) {
        const char *p = (const char *)ctx->recs[i].p;
        if ((const char *)w >= p && (const char *)w < p + ctx->recs[i].bytes) base = p, bytes = ctx->recs[i].bytes;
    }
    if (!base) {
        cuda_fail_at(ctx, "cuda_weights16", __FILE__, __LINE__, __func__,
                     "a weight that was not allocated by this backend");
        return NULL;
    }
    if (ctx->nwc == ctx->capwc) {
        int cap = ctx->capwc ? 2 * ctx->capwc : 4;
        cuda_wcopy *wc = (cuda_wcopy *)realloc(ctx->wc, (size_t)cap * sizeof *wc);
        if (!wc) {
            cuda_fail_at(ctx, "realloc", __FILE__, __LINE__, __func__, "out of host memory");
            return NULL;
        }
        ctx->wc = wc;
        ctx->capwc = cap;
    }
    size_t nf = bytes / sizeof(float); /* the allocation's rounded size: the planner's cuda_ws_weight_copy */
    void *p16 = cuda_mem_alloc(ctx, nf * 2);
    if (!p16) {
        if (!ctx->error) {
            ctx->error = ERR_RUNTIME;
            snprintf(ctx->error_msg, sizeof ctx->error_msg, "16-bit weight copy of %.1f MiB: %s",
                     (double)(nf * 2) / 1048576.0, err_msg());
        }
        return NULL;
    }
    cuda_wcopy *c = &ctx->wc[ctx->nwc++];
    c->base = base;
    c->nf = nf;
    c->p16 = p16;
    c->read_lo = c->read_hi = 0;
    c->stale_lo = c->stale_hi = 0;
    return c;
}

/* [*lo, *hi) joined with [a, b) (an empty interval, lo >= hi, joins as
 * nothing). */
static void span_join(size_t *lo, size_t *hi, size_t a, size_t b)
{
    if (a >= b) return;
    if (*lo >= *hi) {
        *lo = a;
        *hi = b;
        return;
    }
    if (a < *lo) *lo = a;
    if (b > *hi) *hi = b;
}

/* The span widened to [a, b) read now: what it adds is stale (it was
 * never converted). */
static void wcopy_widen(cuda_wcopy *c, size_t a, size_t b)
{
    if (c->read_lo >= c->read_hi) {
        span_join(&c->stale_lo, &c->stale_hi, a, b);
    } else {
        span_join(&c->stale_lo, &c->stale_hi, a, a < c->read_lo ? c->read_lo : a);
        span_join(&c->stale_lo, &c->stale_hi, b > c->read_hi ? c->read_hi : b, b);
    }
    span_join(&c->read_lo, &c->read_hi, a, b);
}

#ifdef CUDAEMU
/* The stand-in runs every call before it returns: the copy must hold the
 * fp32 weight rounded, element for element, wherever a GEMM reads it. */
static void wcopy_verify(cuda_ctx *ctx, const cuda_wcopy *c, size_t off, size_t n)
{
    const float *w = (const float *)c->base + off;
    const uint16_t *got = (const uint16_t *)c->p16 + off;
    for (size_t i = 0; i < n; i++) {
        uint16_t want;
        if (ctx->gtype == GEMM_F16) {
            __half h = __float2half_rn(w[i]);
            memcpy(&want, &h, 2);
        } else {
            __nv_bfloat16 h = __float2bfloat16_rn(w[i]);
            memcpy(&want, &h, 2);
        }
        if (want == got[i]) continue;
        char what[200];
        snprintf(what, sizeof what,
                 "a stale 16-bit weight copy: float %zu of its allocation rounds to 0x%04x, the copy holds 0x%04x "
                 "(a write that did not call cuda_weights_wrote)",
                 off + i, want, got[i]);
        cuda_fail_at(ctx, "cuda_weights16", __FILE__, __LINE__, __func__, what);
        return;
    }
}
#endif

const void *cuda_weights16(cuda_ctx *ctx, const float *w, size_t n)
{
    if (ctx->error) return NULL;
    cuda_wcopy *c = wcopy_find(ctx, w);
    if (!c && !(c = wcopy_make(ctx, w))) return NULL;
    size_t off = (size_t)((const char *)w - c->base);
    if (off % sizeof(float) || off / sizeof(float) + n > c->nf) {
        cuda_fail_at(ctx, "cuda_weights16", __FILE__, __LINE__, __func__,
                     "a weight that is not whole floats inside one allocation");
        return NULL;
    }
    off /= sizeof(float);
    wcopy_widen(c, off, off + n);
    if (c->stale_lo < c->stale_hi) {
        cuda_convert(ctx, (char *)c->p16 + c->stale_lo * 2, (const float *)c->base + c->stale_lo,
                     c->stale_hi - c->stale_lo, ctx->gtype);
        c->stale_lo = c->stale_hi = 0;
        ctx->wc_refreshes++;
    }
#ifdef CUDAEMU
    if (!ctx->error) wcopy_verify(ctx, c, off, n);
#endif
    return ctx->error ? NULL : (const char *)c->p16 + off * 2;
}

void *cuda_weights_copy_of(cuda_ctx *ctx, const float *p, size_t n)
{
    cuda_wcopy *c = ctx->nwc ? wcopy_find(ctx, p) : NULL;
    if (!c) return NULL;
    size_t off = (size_t)((const char *)p - c->base);
    if (off % sizeof(float) || off / sizeof(float) + n > c->nf) return NULL;
    return (char *)c->p16 + off / sizeof(float) * 2;
}

void cuda_weights_wrote(cuda_ctx *ctx, const void *p, size_t bytes)
{
    const char *lo = (const char *)p, *hi = lo + bytes;
    for (int i = 0; i < ctx->nwc && bytes; i++) {
        cuda_wcopy *c = &ctx->wc[i];
        const char *end = c->base + c->nf * sizeof(float);
        if (hi <= c->base || lo >= end) continue;
        /* the floats of the span the bytes touch (outside it nothing is
         * held), joined to what is stale already */
        size_t a = (size_t)((lo > c->base ? lo : c->base) - c->base) / sizeof(float);
        size_t b = ((size_t)((hi < end ? hi : end) - c->base) + sizeof(float) - 1) / sizeof(float);
        if (a < c->read_lo) a = c->read_lo;
        if (b > c->read_hi) b = c->read_hi;
        span_join(&c->stale_lo, &c->stale_hi, a, b);
    }
}

void cuda_weights_release(cuda_ctx *ctx, const void *p)
{
    for (int i = 0; i < ctx->nwc; i++) {
        if (ctx->wc[i].base != (const char *)p) continue;
        void *p16 = ctx->wc[i].p16;
        ctx->wc[i] = ctx->wc[--ctx->nwc];
        cuda_mem_release(ctx, p16);
        return;
    }
}
