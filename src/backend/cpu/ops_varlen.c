/* Packed (variable-length) micro-batches on the CPU: the readable
 * reference of backend.h's varlen ops. A packed batch holds only the real
 * tokens of its windows, concatenated (cu_seqlens as flash-attention's);
 * each op here does exactly what its padded counterpart does at the real
 * positions of a padded batch whose attention mask is a prefix of ones:
 *
 * - embedding_pos: the position of a row comes from pos[] instead of n % T;
 * - dropout_varlen: the element index is the padded one, (b Tp + t) C + c;
 * - attention_varlen: per (window, head), the same GEMMs and the same row
 *   softmax (ops_attention.c's) over the window's own length, no mask. A
 *   masked key contributes exp(-FLT_MAX - max) = 0 to the padded softmax's
 *   sum, in the same lane, so the probabilities are the padded ones;
 * - qa_loss_varlen: each window's softmax over its own positions.
 *
 * The per-(window, head) offsets of the packed probs are computed here from
 * cu_seqlens (host memory on this backend). */
#include "backend/cpu/cpu_math.h"

#include "backend/cpu/cpu.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

void cpu_embedding_pos_forward(void *vctx, float *out, const int32_t *ids, const int32_t *types, const int32_t *pos,
                               const float *wte, const float *wpe, const float *wtt, int N, int C)
{
    cpu_ctx *ctx = vctx;
#pragma omp parallel for num_threads(ctx->nthreads) if ((size_t)N * C >= CPU_PAR_MIN) schedule(dynamic, 64)
    for (int n = 0; n < N; n++) {
        float *o = out + (size_t)n * C;
        const float *we = wte + (size_t)ids[n] * C;
        const float *te = wtt + (size_t)(types ? types[n] : 0) * C;
        const float *pe = wpe + (size_t)pos[n] * C;
        for (int c = 0; c < C; c++) o[c] = (we[c] + te[c]) + pe[c];
    }
}

/* As cpu_embedding_backward: each thread owns a range of columns (a
 * multiple of 16) and walks the rows in order. */
void cpu_embedding_pos_backward(void *vctx, float *dwte, float *dwpe, float *dwtt, const float *dout,
                                const int32_t *ids, const int32_t *types, const int32_t *pos, int N, int C)
{
    cpu_ctx *ctx = vctx;
    int nthr = (size_t)N * C >= CPU_PAR_MIN ? ctx->nthreads : 1;
#pragma omp parallel num_threads(nthr)
    {
        int units = (C + 15) / 16, nt = omp_get_num_threads(), it = omp_get_thread_num();
        int per = units / nt, rem = units % nt;
        int u0 = it * per + (it < rem ? it : rem), u1 = u0 + per + (it < rem ? 1 : 0);
        int c0 = u0 * 16 < C ? u0 * 16 : C, c1 = u1 * 16 < C ? u1 * 16 : C;
        for (int n = 0; n < N && c0 < c1; n++) {
            const float *d = dout + (size_t)n * C;
            if (dwte) {
                float *g = dwte + (size_t)ids[n] * C;
                for (int c = c0; c < c1; c++) g[c] += d[c];
            }
            if (dwtt) {
                float *g = dwtt + (size_t)(types ? types[n] : 0) * C;
                for (int c = c0; c < c1; c++) g[c] += d[c];
            }
            if (dwpe) {
                float *g = dwpe + (size_t)pos[n] * C;
                for (int c = c0; c < c1; c++) g[c] += d[c];
            }
        }
    }
}

/* ------------------------------------------------------------------------
 * Dropout: window b's rows are contiguous and so are their padded indices
 * (b Tp C .. b Tp C + len C - 1), so each window is one run of the mask. */

#define VDROP_CHUNK 1024

static void dropout_varlen(cpu_ctx *ctx, float *out, const float *inp, const int32_t *cu, int B, int Tp, int C,
                           float p, philox_stream rng, int backward)
{
    float scale = cpu_dropout_scale(p);
    size_t n = (size_t)cu[B] * C;
    long nchunks = (long)((n + VDROP_CHUNK - 1) / VDROP_CHUNK);
    /* chunks of the packed array; each finds its window by bisection */
#pragma omp parallel for num_threads(ctx->nthreads) if (n >= CPU_PAR_MIN / 4) schedule(dynamic, 4)
    for (long k = 0; k < nchunks; k++) {
        float mul[VDROP_CHUNK];
        size_t i0 = (size_t)k * VDROP_CHUNK, i1 = n - i0 < VDROP_CHUNK ? n : i0 + VDROP_CHUNK;
        int lo = 0, hi = B - 1;
        while (lo < hi) {
            int mid = (lo + hi + 1) / 2;
            if ((size_t)cu[mid] * C <= i0) lo = mid;
            else hi = mid - 1;
        }
        for (int b = lo; b < B && i0 < i1; b++) {
            size_t w1 = (size_t)cu[b + 1] * C;
            if (w1 <= i0) continue;
            size_t e = w1 < i1 ? w1 : i1, len = e - i0;
            uint64_t first = ((uint64_t)b * (uint64_t)Tp) * (uint64_t)C + (i0 - (size_t)cu[b] * C);
            cpu_dropout_mask(mul, rng, first, len, p, scale);
            if (backward)
                for (size_t j = 0; j < len; j++) out[i0 + j] += inp[i0 + j] * mul[j];
            else
                for (size_t j = 0; j < len; j++) out[i0 + j] = inp[i0 + j] * mul[j];
            i0 = e;
        }
    }
}

void cpu_dropout_varlen_forward(void *vctx, float *out, const float *inp, const int32_t *cu_seqlens, int B, int N,
                                int Tp, int C, float p, philox_stream rng)
{
    (void)N; /* cu_seqlens[B] */
    if (B <= 0) return;
    if (p <= 0.0f) {
        size_t n = (size_t)cu_seqlens[B] * C;
        if (out != inp && n) memmove(out, inp, n * sizeof(float));
        return;
    }
    dropout_varlen(vctx, out, inp, cu_seqlens, B, Tp, C, p, rng, 0);
}

void cpu_dropout_varlen_backward(void *vctx, float *dinp, const float *dout, const int32_t *cu_seqlens, int B, int N,
                                 int Tp, int C, float p, philox_stream rng)
{
    (void)N;
    if (!dinp || B <= 0) return;
    if (p <= 0.0f) {
        cpu_add(vctx, dinp, dinp, dout, (size_t)cu_seqlens[B] * C);
        return;
    }
    dropout_varlen(vctx, dinp, dout, cu_seqlens, B, Tp, C, p, rng, 1);
}

/* ------------------------------------------------------------------------
 * Attention. One (window, head) pair per loop iteration, a block of rows at
 * a time, as cpu_attention_forward; the dropout mask of a row of probs is
 * one run at its padded index. */

/* Offsets of each window's probs (NH len^2 floats per window); NULL after
 * recording the failure. */
static size_t *probs_offsets(cpu_ctx *ctx, const int32_t *cu, int B, int NH)
{
    size_t *off = malloc(((size_t)B + 1) * sizeof *off);
    if (!off) {
        cpu_fail(ctx, "attention_varlen: out of memory");
        return NULL;
    }
    off[0] = 0;
    for (int b = 0; b < B; b++) {
        size_t len = (size_t)(cu[b + 1] - cu[b]);
        off[b + 1] = off[b] + (size_t)NH * len * len;
    }
    return off;
}

static int varlen_rows_per_block(cpu_ctx *ctx, int max_len)
{
    if (cpu_scratch_reserve(ctx, (size_t)max_len) != 0) return 0;
    size_t rmax = ctx->scratch_floats / (size_t)max_len;
    return rmax >= (size_t)max_len ? max_len : (int)rmax;
}

static float varlen_score_scale(int HS)
{
    return (float)(1.0 / sqrt((double)HS));
}

/* mul[t*T + j] for rows r0 .. r0+rows-1 of (b, h): each row one run */
static void probs_mask(float *mul, philox_stream rng, int b, int h, int NH, int Tp, int r0, int rows, int T, float p,
                       float scale)
{
    for (int t = 0; t < rows; t++) {
        uint64_t first = (((uint64_t)b * (uint64_t)NH + (uint64_t)h) * (uint64_t)Tp + (uint64_t)(r0 + t)) *
                         (uint64_t)Tp;
        cpu_dropout_mask(mul + (size_t)t * T, rng, first, (size_t)T, p, scale);
    }
}

void cpu_attention_varlen_forward(void *vctx, float *out, float *probs, const float *q, const float *k, const float *v,
                                  const int32_t *cu_seqlens, int B, int max_len, int NH, int HS, int Tp, float p,
                                  philox_stream rng)
{
    cpu_ctx *ctx = vctx;
    if (B <= 0 || max_len <= 0 || NH <= 0 || HS <= 0) return;
    int C = NH * HS;
    float scaling = varlen_score_scale(HS), dscale = cpu_dropout_scale(p);
    int R = varlen_rows_per_block(ctx, max_len);
    size_t *poff = R ? probs_offsets(ctx, cu_seqlens, B, NH) : NULL;
    if (!poff) {
        for (size_t i = 0; i < (size_t)cu_seqlens[B] * C; i++) out[i] = NAN;
        return;
    }
    int nbh = B * NH;
    cpu_blas_serial_begin(ctx);
#pragma omp parallel for num_threads(ctx->nthreads) schedule(dynamic, 1)
    for (int bh = 0; bh < nbh; bh++) {
        int b = bh / NH, h = bh % NH, T = cu_seqlens[b + 1] - cu_seqlens[b];
        if (T <= 0) continue;
        size_t off = (size_t)cu_seqlens[b] * C + (size_t)h * HS;
        const float *qb = q + off, *kb = k + off, *vb = v + off;
        float *ob = out + off;
        float *buf = ctx->scratch + (size_t)omp_get_thread_num() * ctx->scratch_floats;
        for (int r0 = 0; r0 < T; r0 += R) {
            int rows = T - r0 < R ? T - r0 : R;
            size_t n = (size_t)rows * T;
            float *P = probs + poff[b] + (size_t)h * T * T + (size_t)r0 * T;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, T, HS, scaling, qb + (size_t)r0 * C, C, kb, C,
                        0.0f, P, T);
            for (int t = 0; t < rows; t++) cpu_softmax_row(P + (size_t)t * T, NULL, T);
            const float *Pd = P;
            if (p > 0.0f) {
                probs_mask(buf, rng, b, h, NH, Tp, r0, rows, T, p, dscale);
                for (size_t i = 0; i < n; i++) buf[i] = P[i] * buf[i];
                Pd = buf;
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, HS, T, 1.0f, Pd, T, vb, C, 0.0f,
                        ob + (size_t)r0 * C, C);
        }
    }
    cpu_blas_serial_end(ctx);
    free(poff);
}

void cpu_attention_varlen_backward(void *vctx, float *dq, float *dk, float *dv, float *scratch, const float *dout,
                                   const float *q, const float *k, const float *v, const float *probs,
                                   const int32_t *cu_seqlens, int B, int max_len, int NH, int HS, int Tp, float p,
                                   philox_stream rng)
{
    cpu_ctx *ctx = vctx;
    if (B <= 0 || max_len <= 0 || NH <= 0 || HS <= 0) return;
    int C = NH * HS;
    float scaling = varlen_score_scale(HS), dscale = cpu_dropout_scale(p);
    int R = varlen_rows_per_block(ctx, max_len);
    size_t *poff = R ? probs_offsets(ctx, cu_seqlens, B, NH) : NULL;
    if (!poff) {
        size_t n = (size_t)cu_seqlens[B] * C;
        for (size_t i = 0; i < n; i++) {
            if (dq) dq[i] = NAN;
            if (dk) dk[i] = NAN;
            if (dv) dv[i] = NAN;
        }
        return;
    }
    int nbh = B * NH;
    cpu_blas_serial_begin(ctx);
#pragma omp parallel for num_threads(ctx->nthreads) schedule(dynamic, 1)
    for (int bh = 0; bh < nbh; bh++) {
        int b = bh / NH, h = bh % NH, T = cu_seqlens[b + 1] - cu_seqlens[b];
        if (T <= 0) continue;
        size_t off = (size_t)cu_seqlens[b] * C + (size_t)h * HS;
        const float *qb = q + off, *kb = k + off, *vb = v + off;
        float *buf = ctx->scratch + (size_t)omp_get_thread_num() * ctx->scratch_floats;
        for (int r0 = 0; r0 < T; r0 += R) {
            int rows = T - r0 < R ? T - r0 : R;
            size_t n = (size_t)rows * T, at = poff[b] + (size_t)h * T * T + (size_t)r0 * T;
            const float *P = probs + at, *dob = dout + off + (size_t)r0 * C;
            float *ds = scratch + at;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, T, HS, 1.0f, dob, C, vb, C, 0.0f, ds, T);
            const float *Pd = P;
            if (p > 0.0f) {
                probs_mask(buf, rng, b, h, NH, Tp, r0, rows, T, p, dscale);
                for (size_t i = 0; i < n; i++) ds[i] = buf[i] * ds[i];
                for (size_t i = 0; i < n; i++) buf[i] = P[i] * buf[i];
                Pd = buf;
            }
            if (dv)
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, HS, rows, 1.0f, Pd, T, dob, C, 1.0f, dv + off,
                            C);
            for (int t = 0; t < rows; t++) cpu_softmax_row_backward(ds + (size_t)t * T, P + (size_t)t * T, T, scaling);
            if (dq)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, HS, T, 1.0f, ds, T, kb, C, 1.0f,
                            dq + off + (size_t)r0 * C, C);
            if (dk)
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, HS, rows, 1.0f, ds, T, qb + (size_t)r0 * C, C,
                            1.0f, dk + off, C);
        }
    }
    cpu_blas_serial_end(ctx);
    free(poff);
}

/* ------------------------------------------------------------------------
 * The QA loss over windows of their own lengths: cpu_qa_loss's arithmetic
 * (row sums in double, each side's mean rounded to float) with the softmax
 * of window b over its len[b] positions. */

static int clamp_pos(int32_t pos, int Tp)
{
    return pos < 0 ? 0 : pos > Tp ? Tp : (int)pos;
}

void cpu_qa_loss_varlen(void *vctx, float *loss, float *dlogits, const float *logits, const int32_t *row0,
                        const int32_t *len, const int32_t *start, const int32_t *end, int B, int N, int Tp,
                        float grad_scale)
{
    (void)vctx;
    float side_loss[2];
    if (dlogits && N > 0) memset(dlogits, 0, (size_t)N * 2 * sizeof(float));
    for (int side = 0; side < 2; side++) {
        const int32_t *pos = side ? end : start;
        int count = 0;
        for (int b = 0; b < B; b++) count += clamp_pos(pos[b], Tp) != Tp;
        double sum = 0;
        double g = count ? 0.5 * (double)grad_scale / count : 0.0;
        for (int b = 0; b < B; b++) {
            int target = clamp_pos(pos[b], Tp), T = len[b];
            if (target == Tp) continue;
            const float *x = logits + (size_t)row0[b] * 2 + side;
            double mx = -INFINITY;
            for (int t = 0; t < T; t++) mx = x[2 * t] > mx ? x[2 * t] : mx;
            double se = 0;
            for (int t = 0; t < T; t++) se += exp(x[2 * t] - mx);
            double lse = mx + log(se);
            sum += target < T ? lse - x[2 * target] : INFINITY;
            if (!dlogits) continue;
            float *d = dlogits + (size_t)row0[b] * 2 + side;
            for (int t = 0; t < T; t++) d[2 * t] = (float)((exp(x[2 * t] - lse) - (t == target)) * g);
        }
        side_loss[side] = count ? (float)(sum / count) : NAN;
    }
    if (loss) *loss = (side_loss[0] + side_loss[1]) / 2.0f;
}
