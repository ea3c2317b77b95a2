/* The QA loss and the optimizer helpers of the CPU backend. */
#include "backend/cpu/cpu_math.h"

#include "backend/adamw_consts.h"
#include "backend/cpu/cpu.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------
 * BertForQuestionAnswering's loss: for start and for end separately,
 * CrossEntropyLoss(ignore_index=T) over the B windows after clamping the
 * labels to [0, T]; total = (start + end) / 2. Per side, the mean is over
 * the windows not ignored; when every window of a side is ignored torch's
 * mean is 0/0 = NaN, so the loss is NaN, while that side's gradient is 0
 * (nothing flows from an ignored window) and the other side's is as usual.
 * We do the same. Each window's softmax runs over its first len positions
 * (backend.h). Row sums run in double; each side's mean is rounded to
 * float and the two are averaged in float, as torch holds them. */

static int clamp_label(int32_t pos, int T)
{
    return pos < 0 ? 0 : pos > T ? T : (int)pos;
}

/* The positions window b's softmax runs over: a padded window with a mask,
 * the ones of its row; otherwise its length. */
static int loss_len(const backend_windows *w, int b)
{
    if (w->cu_seqlens || !w->mask) return cpu_window_len(w, b);
    const int32_t *m = w->mask + (size_t)b * w->T;
    int n = 0;
    for (int t = 0; t < w->T; t++) n += m[t] != 0;
    return n;
}

// loss (1); dlogits, logits (N,2) with start at [..,0] and end at [..,1]; start, end (B)
void cpu_qa_loss(void *vctx, float *loss, backend_act *vdlogits, const backend_act *vlogits, const int32_t *start,
                 const int32_t *end, const backend_windows *w, float grad_scale)
{
    float *dlogits = vdlogits;
    const float *logits = vlogits;
    (void)vctx;
    int B = w->B, T = w->T;
    float side_loss[2];
    if (dlogits && w->N > 0) memset(dlogits, 0, (size_t)w->N * 2 * sizeof(float));
    for (int side = 0; side < 2; side++) {
        const int32_t *pos = side ? end : start;
        int count = 0;
        for (int b = 0; b < B; b++) count += clamp_label(pos[b], T) != T;
        double sum = 0;
        /* d side_loss / d logit = (softmax - onehot) / count; the total
         * takes half of each side. */
        double g = count ? 0.5 * (double)grad_scale / count : 0.0;
        for (int b = 0; b < B; b++) {
            int target = clamp_label(pos[b], T), len = loss_len(w, b);
            if (target == T) continue;
            size_t row0 = cpu_window_row0(w, b);
            const float *x = logits + row0 * 2 + side;
            double mx = -INFINITY;
            for (int t = 0; t < len; t++) mx = x[2 * t] > mx ? x[2 * t] : mx;
            double se = 0;
            for (int t = 0; t < len; t++) se += exp(x[2 * t] - mx);
            double lse = mx + log(se);
            sum += target < len ? lse - x[2 * target] : INFINITY;
            if (!dlogits) continue;
            float *d = dlogits + row0 * 2 + side;
            for (int t = 0; t < len; t++) d[2 * t] = (float)((exp(x[2 * t] - lse) - (t == target)) * g);
        }
        side_loss[side] = count ? (float)(sum / count) : NAN;
    }
    if (loss) *loss = (side_loss[0] + side_loss[1]) / 2.0f;
}

/* ------------------------------------------------------------------------
 * sum_squares: fixed chunks, each summed in double in a fixed order, the
 * chunk sums added in order: the result depends on n only, not on the
 * thread count. */

#define SS_CHUNK 65536
#define SS_MAX_CHUNKS 1024

CPU_INLINE double chunk_sum_squares_code(const float *x, size_t n)
{
    double a[4] = {0, 0, 0, 0};
    size_t i = 0;
    for (; i + 4 <= n; i += 4)
        for (int l = 0; l < 4; l++) a[l] += (double)x[i + l] * x[i + l];
    for (int l = 0; i + l < n; l++) a[l] += (double)x[i + l] * x[i + l];
    return (a[0] + a[2]) + (a[1] + a[3]);
}
CPU_VARIANTS_RET(CPU_K_ADAM, double, chunk_sum_squares, (const float *x, size_t n), (x, n))

double cpu_sum_squares(void *vctx, const float *x, size_t n)
{
    cpu_ctx *ctx = vctx;
    if (n == 0) return 0;
    size_t chunk = SS_CHUNK;
    if ((n + chunk - 1) / chunk > SS_MAX_CHUNKS) chunk = (n + SS_MAX_CHUNKS - 1) / SS_MAX_CHUNKS;
    long nchunks = (long)((n + chunk - 1) / chunk);
    double part[SS_MAX_CHUNKS];
#pragma omp parallel for num_threads(ctx->nthreads) if (nchunks > 1) schedule(dynamic, 1)
    for (long c = 0; c < nchunks; c++) {
        size_t i0 = (size_t)c * chunk, len = n - i0 < chunk ? n - i0 : chunk;
        part[c] = chunk_sum_squares(x + i0, len);
    }
    double s = 0;
    for (long c = 0; c < nchunks; c++) s += part[c];
    return s;
}

/* ------------------------------------------------------------------------ */

#define EW_CHUNK 16384

CPU_INLINE void scale_chunk_code(float *x, size_t n, float s)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) x[i] = x[i] * s;
}
CPU_VARIANTS(CPU_K_ADAM, scale_chunk, (float *x, size_t n, float s), (x, n, s))

void cpu_scale(void *vctx, float *x, size_t n, float s)
{
    cpu_ctx *ctx = vctx;
    long nchunks = (long)((n + EW_CHUNK - 1) / EW_CHUNK);
#pragma omp parallel for num_threads(ctx->nthreads) if (n >= CPU_PAR_MIN) schedule(dynamic, 1)
    for (long c = 0; c < nchunks; c++) {
        size_t i0 = (size_t)c * EW_CHUNK, len = n - i0 < EW_CHUNK ? n - i0 : EW_CHUNK;
        scale_chunk(x + i0, len, s);
    }
}

CPU_INLINE int chunk_all_finite_code(const float *x, size_t n)
{
    uint32_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, x + i, sizeof u);
        bad |= (u & 0x7f800000u) == 0x7f800000u;
    }
    return !bad;
}
CPU_VARIANTS_RET(CPU_K_ADAM, int, chunk_all_finite, (const float *x, size_t n), (x, n))

int cpu_all_finite(void *vctx, const float *x, size_t n)
{
    cpu_ctx *ctx = vctx;
    long nchunks = (long)((n + EW_CHUNK - 1) / EW_CHUNK);
    int ok = 1;
    /* An AND of flags: the same whatever order the threads combine in. */
#pragma omp parallel for num_threads(ctx->nthreads) if (n >= CPU_PAR_MIN) schedule(dynamic, 1) reduction(&& : ok)
    for (long c = 0; c < nchunks; c++) {
        size_t i0 = (size_t)c * EW_CHUNK, len = n - i0 < EW_CHUNK ? n - i0 : EW_CHUNK;
        ok = ok && chunk_all_finite(x + i0, len);
    }
    return ok;
}

/* ------------------------------------------------------------------------
 * AdamW as torch.optim.AdamW's single-tensor path (the CPU default), op by
 * op, with torch's roundings: the Python-side scalars are doubles (see
 * adamw_as_typed in backend/adamw_consts.h), rounded to float where an op takes them.
 *   param.mul_(1 - lr*wd)                        (when wd != 0)
 *   exp_avg.lerp_(grad, 1 - b1)                  torch's vector lerp: one fma
 *   exp_avg_sq.mul_(b2).addcmul_(grad, grad, value=1 - b2)    one fma too
 *   denom = (exp_avg_sq.sqrt() / sqrt(1 - b2^t)).add_(eps)
 *   param.addcdiv_(exp_avg, denom, value=-lr / (1 - b1^t))                */

CPU_INLINE void adamw_chunk_code(float *p, const float *g, float *m, float *v, size_t n, adamw_consts k)
{
    /* lerp: fma(w, g - m, m) for a small weight, else fma(w - 1, g - m, g) */
    float coeff = fabsf(k.w1) < 0.5f ? k.w1 : k.w1 - 1.0f;
    float from_m = fabsf(k.w1) < 0.5f ? 1.0f : 0.0f;
    /* times 1 is exact: one loop serves tensors with and without decay */
    float decay = k.has_decay ? k.decay : 1.0f;
    float root[512];
    for (size_t i0 = 0; i0 < n; i0 += 512) {
        size_t len = n - i0 < 512 ? n - i0 : 512;
        float *pb = p + i0, *mb = m + i0, *vb = v + i0;
        const float *gb = g + i0;
#pragma omp simd
        for (size_t i = 0; i < len; i++) {
            float gi = gb[i] * k.grad_scale;
            pb[i] = pb[i] * decay;
            float mi = fmaf(coeff, gi - mb[i], from_m != 0.0f ? mb[i] : gi);
            /* addcmul: torch's vector kernel fuses the add: fma(c2 * g, g, v * b2) */
            vb[i] = fmaf(k.c2 * gi, gi, vb[i] * k.b2);
            mb[i] = mi;
        }
        cpu_sqrt_array(root, vb, len);
#pragma omp simd
        for (size_t i = 0; i < len; i++) pb[i] = pb[i] + k.neg_step * mb[i] / (root[i] / k.bc2_sqrt + k.eps);
    }
}
CPU_VARIANTS(CPU_K_ADAM, adamw_chunk, (float *p, const float *g, float *m, float *v, size_t n, adamw_consts k),
             (p, g, m, v, n, k))

void cpu_adamw(void *vctx, float *p, const float *g, float *m, float *v, size_t n, float lr, float b1, float b2,
               float eps, float wd, int64_t t, float grad_scale)
{
    cpu_ctx *ctx = vctx;
    cpu_lowp_forget(ctx, p, n * sizeof(float));
    adamw_consts k = adamw_consts_make(lr, b1, b2, eps, wd, t, grad_scale);
    long nchunks = (long)((n + EW_CHUNK - 1) / EW_CHUNK);
#pragma omp parallel for num_threads(ctx->nthreads) if (n >= CPU_PAR_MIN) schedule(dynamic, 1)
    for (long c = 0; c < nchunks; c++) {
        size_t i0 = (size_t)c * EW_CHUNK, len = n - i0 < EW_CHUNK ? n - i0 : EW_CHUNK;
        adamw_chunk(p + i0, g + i0, m + i0, v + i0, len, k);
    }
}
