/* Answers in bf16 or int8 on the CPU (backend_set_answer_precision,
 * backend.h): the linear layers' weights prepared once by gemm_lowp.h
 * (quantised per output channel, or rounded to bf16, and packed), kept by
 * the weight's address, and run by cpu_matmul_forward. An entry is dropped
 * when the backend writes over its weights (upload, copy, zero, release,
 * AdamW), so a model whose parameters change is prepared again on its next
 * forward, never run with stale weights. */
#include "backend/cpu/cpu.h"
#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/gemm_lowp.h"

#include "core/err.h"

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cpu_lowp_entry {
    const float *w, *b;
    int OC, C;
    gemm_lowp_layer *layer;
};

static gemm_lowp_kind kind_of(precision_kind p)
{
    return p == PREC_INT8 ? GEMM_LOWP_INT8 : GEMM_LOWP_BF16;
}

static cpu_kernel_family family_of(precision_kind p)
{
    return p == PREC_INT8 ? CPU_K_GEMM_INT8 : CPU_K_GEMM_BF16;
}

int cpu_answer_check(precision_kind p, char *kernel, size_t cap)
{
    if (kernel && cap) kernel[0] = 0;
    if (p == PREC_FP32 || p == PREC_AUTO) return 0;
    if (p != PREC_BF16 && p != PREC_INT8)
        return err_set(ERR_INPUT, "--precision %s: answers on the CPU are fp32, bf16 or int8",
                       p == PREC_TF32 ? "tf32" : p == PREC_FP16 ? "fp16" : "?");
    char why[256];
    const char *name = gemm_lowp_name(kind_of(p));
    if (!cpu_kernel_fast(family_of(p), why, sizeof why))
        return err_set(ERR_INPUT, "--precision %s: %s (answers in %s need %s; use --precision fp32)", name, why, name,
                       p == PREC_INT8 ? "AVX2" : "AVX512-BF16");
    if (kernel && cap) snprintf(kernel, cap, "%s", gemm_lowp_kernel(kind_of(p)));
    return 0;
}

void cpu_lowp_free(cpu_ctx *ctx)
{
    for (int i = 0; i < ctx->lowp_n; i++) gemm_lowp_free(ctx->lowp_cache[i].layer);
    free(ctx->lowp_cache);
    ctx->lowp_cache = NULL;
    ctx->lowp_n = ctx->lowp_cap = 0;
}

void cpu_lowp_forget(cpu_ctx *ctx, const void *p, size_t bytes)
{
    const char *lo = p, *hi = lo + bytes;
    for (int i = 0; i < ctx->lowp_n;) {
        const struct cpu_lowp_entry *e = &ctx->lowp_cache[i];
        const char *wlo = (const char *)e->w, *whi = wlo + (size_t)e->OC * e->C * sizeof(float);
        const char *blo = (const char *)e->b, *bhi = blo ? blo + (size_t)e->OC * sizeof(float) : blo;
        if ((lo < whi && wlo < hi) || (blo && lo < bhi && blo < hi)) {
            gemm_lowp_free(e->layer);
            ctx->lowp_cache[i] = ctx->lowp_cache[--ctx->lowp_n];
        } else i++;
    }
}

void cpu_lowp_forget_block(cpu_ctx *ctx, const void *p)
{
    if (ctx->lowp_n && p) cpu_lowp_forget(ctx, p, malloc_usable_size((void *)p));
}

int cpu_set_answer_precision(void *vctx, precision_kind p, char *kernel, size_t cap)
{
    int rc = cpu_answer_check(p, kernel, cap);
    if (rc) return rc;
    cpu_ctx *ctx = vctx;
    cpu_lowp_free(ctx);
    ctx->lowp = p == PREC_BF16 || p == PREC_INT8 ? (int)p : 0;
    return 0;
}

/* The prepared layer of (w, b), made on first use; NULL after recording a
 * failure. */
static const gemm_lowp_layer *layer_for(cpu_ctx *ctx, const float *w, const float *b, int OC, int C)
{
    for (int i = 0; i < ctx->lowp_n; i++) {
        const struct cpu_lowp_entry *e = &ctx->lowp_cache[i];
        if (e->w == w && e->b == b && e->OC == OC && e->C == C) return e->layer;
    }
    if (ctx->lowp_n == ctx->lowp_cap) {
        int cap = ctx->lowp_cap ? 2 * ctx->lowp_cap : 64;
        struct cpu_lowp_entry *n = realloc(ctx->lowp_cache, (size_t)cap * sizeof *n);
        if (!n) {
            cpu_fail(ctx, "cpu backend: out of memory for the prepared weights");
            return NULL;
        }
        ctx->lowp_cache = n;
        ctx->lowp_cap = cap;
    }
    gemm_lowp_layer *l = gemm_lowp_prepare(kind_of((precision_kind)ctx->lowp), w, C, b, OC, C);
    if (!l) {
        cpu_fail(ctx, "cpu backend: out of memory for the prepared weights");
        return NULL;
    }
    ctx->lowp_cache[ctx->lowp_n++] = (struct cpu_lowp_entry){w, b, OC, C, l};
    return l;
}

int cpu_lowp_matmul_n(cpu_ctx *ctx, int n, float *const *out, const float *inp, const float *const *w,
                      const float *const *b, int N, int C, int OC)
{
    if (!ctx->lowp || OC < CPU_LOWP_MIN_OC || C <= 0 || N <= 0 || n <= 0 || n > GEMM_LOWP_MAX_N) return 0;
    const gemm_lowp_layer *l[GEMM_LOWP_MAX_N];
    for (int i = 0; i < n; i++)
        if (!(l[i] = layer_for(ctx, w[i], b ? b[i] : NULL, OC, C))) return 1;
    gemm_lowp_n(l, n, N, inp, C, out, OC, ctx->nthreads);
    return 1;
}

int cpu_lowp_matmul(cpu_ctx *ctx, float *out, const float *inp, const float *w, const float *b, int N, int C, int OC)
{
    if (!ctx->lowp || OC < CPU_LOWP_MIN_OC || C <= 0 || N <= 0) return 0;
    const gemm_lowp_layer *l = layer_for(ctx, w, b, OC, C);
    if (l) gemm_lowp(l, N, inp, C, out, OC, ctx->nthreads);
    return 1;
}
