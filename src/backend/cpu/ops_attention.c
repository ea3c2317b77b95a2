/* Self-attention of one layer on the CPU, as transformers' eager attention
 * computes it, one (window, head) pair per loop iteration:
 *
 *   S  = (q k^T) * HS^-0.5 + (mask == 0 ? -FLT_MAX : 0)   (len,len)
 *   P  = softmax(S) over keys            saved in probs
 *   P' = P * dropout multipliers         (only when p > 0)
 *   out = P' v                           (len,HS), written into (N,C)
 *
 * A padded batch is the case of windows of length T at rows b*T with a key
 * mask; a packed one has no mask, each window over its own length. A masked
 * key contributes exp(-FLT_MAX - max) = 0 to the softmax's sum, in the same
 * lane as a packed window's missing key, so a packed window's probabilities
 * are those of its padded twin at every real position.
 *
 * q, k, v, out are (N,C) with head h in columns h*HS .. h*HS+HS-1, so the
 * GEMMs read them in place with leading dimension C. The (b,h) pairs are
 * handed to threads one at a time and the GEMMs run single-threaded inside
 * the parallel region (cpu_blas_serial_begin), so every output element has
 * one writer and a fixed summation order.
 *
 * Each (b,h) is done a block of rows at a time, so that the scores of a
 * block are still in cache when softmax and the second GEMM read them. With
 * dropout, P' exists only for the current block, in the thread's scratch:
 * the mask is a pure function of (rng, padded flat index into probs) and
 * backward draws it again. */
#include "backend/cpu/cpu_math.h"

#include "backend/cpu/cpu.h"

#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>

/* Adds the mask, then softmax in place as torch's vectorized kernel: max,
 * exp(x - max), a sum in 8 lanes combined pairwise, multiply by 1/sum. */
CPU_CLONES static void softmax_row(float *x, const int32_t *mask, int T)
{
    if (mask) {
#pragma omp simd
        for (int s = 0; s < T; s++) x[s] = x[s] + (mask[s] == 0 ? -FLT_MAX : 0.0f);
    }
    float mx[8];
    for (int l = 0; l < 8; l++) mx[l] = -INFINITY;
    int s = 0;
    for (; s + 8 <= T; s += 8)
        for (int l = 0; l < 8; l++) mx[l] = x[s + l] > mx[l] ? x[s + l] : mx[l];
    for (int l = 0; s + l < T; l++) mx[l] = x[s + l] > mx[l] ? x[s + l] : mx[l];
    float m = mx[0];
    for (int l = 1; l < 8; l++) m = mx[l] > m ? mx[l] : m;

#pragma omp simd
    for (int j = 0; j < T; j++) x[j] = cpu_expf(x[j] - m);

    float acc[8] = {0};
    for (s = 0; s + 8 <= T; s += 8)
        for (int l = 0; l < 8; l++) acc[l] += x[s + l];
    for (int l = 0; s + l < T; l++) acc[l] += x[s + l];
    float sum = ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
    float inv = 1.0f / sum;
#pragma omp simd
    for (int j = 0; j < T; j++) x[j] = x[j] * inv;
}

/* Softmax backward in place, as torch: dot = sum(dp * p) (8 lanes);
 * ds = (dp - dot) * p; then times the score scale. */
CPU_CLONES static void softmax_row_backward(float *ds, const float *p, int T, float scaling)
{
    float acc[8] = {0};
    int s = 0;
    for (; s + 8 <= T; s += 8)
        for (int l = 0; l < 8; l++) acc[l] += ds[s + l] * p[s + l];
    for (int l = 0; s + l < T; l++) acc[l] += ds[s + l] * p[s + l];
    float dot = ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
#pragma omp simd
    for (int j = 0; j < T; j++) ds[j] = ((ds[j] - dot) * p[j]) * scaling;
}

CPU_CLONES static void mul_rows(float *restrict dst, const float *restrict a, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) dst[i] = a[i] * dst[i];
}

/* Rows per block of a window of len rows: a block of scores (rows x len)
 * stays in the thread's scratch-sized share of L2 between the GEMM that
 * makes it and the loops that use it; blocks are made equal so none is a
 * sliver. The caller has reserved scratch for the longest window. */
static int rows_per_block(const cpu_ctx *ctx, int len)
{
    size_t rmax = ctx->scratch_floats / (size_t)len;
    if (rmax >= (size_t)len) return len;
    size_t nblk = ((size_t)len + rmax - 1) / rmax;
    return (int)(((size_t)len + nblk - 1) / nblk);
}

/* Each window's first row, length and offset in probs, computed once per
 * call, with scratch reserved for a row of the longest window; NULL after
 * recording the failure in ctx. */
typedef struct {
    size_t row0, probs;
    int len;
} att_window;

static att_window *att_windows(cpu_ctx *ctx, const backend_windows *w, int NH)
{
    att_window *aw = malloc((size_t)w->B * sizeof *aw);
    if (!aw) {
        cpu_fail(ctx, "attention: out of memory");
        return NULL;
    }
    size_t at = 0;
    int longest = 1;
    for (int b = 0; b < w->B; b++) {
        int len = cpu_window_len(w, b);
        aw[b].row0 = cpu_window_row0(w, b);
        aw[b].len = len;
        aw[b].probs = at;
        at += (size_t)NH * (size_t)(len > 0 ? len : 0) * (size_t)(len > 0 ? len : 0);
        if (len > longest) longest = len;
    }
    if (cpu_scratch_reserve(ctx, (size_t)longest) != 0) {
        free(aw);
        return NULL;
    }
    return aw;
}

/* mul (rows,len) for rows r0 .. r0+rows-1 of (b,h): row t's multipliers
 * start at padded index ((b NH + h) T + r0 + t) T; with len = T the rows
 * are one run. */
static void probs_mask(float *mul, philox_stream rng, int b, int h, int NH, int T, int r0, int rows, int len,
                       float p, float scale)
{
    uint64_t first = (((uint64_t)b * (uint64_t)NH + (uint64_t)h) * (uint64_t)T + (uint64_t)r0) * (uint64_t)T;
    if (len == T) {
        cpu_dropout_mask(mul, rng, first, (size_t)rows * (size_t)len, p, scale);
        return;
    }
    for (int t = 0; t < rows; t++)
        cpu_dropout_mask(mul + (size_t)t * len, rng, first + (uint64_t)t * (uint64_t)T, (size_t)len, p, scale);
}

static void fill_nan(float *x, size_t n)
{
    if (!x) return;
    for (size_t i = 0; i < n; i++) x[i] = NAN;
}

// out (N,C); probs (NH sum len^2); q, k, v (N,C); w->mask (B,T) or NULL
void cpu_attention_forward(void *vctx, float *out, float *probs, const float *q, const float *k, const float *v,
                           const backend_windows *w, int NH, int HS, float p, philox_stream rng)
{
    cpu_ctx *ctx = vctx;
    if (w->B <= 0 || w->max_len <= 0 || NH <= 0 || HS <= 0) return;
    int C = NH * HS, T = w->T;
    float scaling = backend_score_scale(HS);
    float dscale = cpu_dropout_scale(p);
    att_window *aw = att_windows(ctx, w, NH);
    if (!aw) {
        fill_nan(out, (size_t)w->N * C);
        return;
    }
    int nbh = w->B * NH;
    cpu_blas_serial_begin(ctx);
#pragma omp parallel for num_threads(ctx->nthreads) schedule(dynamic, 1)
    for (int bh = 0; bh < nbh; bh++) {
        int b = bh / NH, h = bh % NH, len = aw[b].len;
        if (len <= 0) continue;
        int R = rows_per_block(ctx, len);
        size_t off = aw[b].row0 * C + (size_t)h * HS;
        const float *qb = q + off, *kb = k + off, *vb = v + off;
        float *ob = out + off;
        const int32_t *mb = w->mask ? w->mask + (size_t)b * T : NULL;
        float *buf = ctx->scratch + (size_t)omp_get_thread_num() * ctx->scratch_floats;
        for (int r0 = 0; r0 < len; r0 += R) {
            int rows = len - r0 < R ? len - r0 : R;
            size_t n = (size_t)rows * len;
            float *P = probs + aw[b].probs + (size_t)h * len * len + (size_t)r0 * len;
            // P (rows,len) = qb[r0:] (rows,HS) @ kb^T (HS,len) * scaling
            cpu_gemm(ctx, 0, 1, rows, len, HS, scaling, qb + (size_t)r0 * C, C, kb, C, 0.0f, P, len);
            for (int t = 0; t < rows; t++) softmax_row(P + (size_t)t * len, mb, len);
            const float *Pd = P;
            if (p > 0.0f) {
                probs_mask(buf, rng, b, h, NH, T, r0, rows, len, p, dscale);
                mul_rows(buf, P, n);
                Pd = buf;
            }
            // ob[r0:] (rows,HS) = P' (rows,len) @ vb (len,HS)
            cpu_gemm(ctx, 0, 0, rows, HS, len, 1.0f, Pd, len, vb, C, 0.0f, ob + (size_t)r0 * C, C);
        }
    }
    cpu_blas_serial_end(ctx);
    free(aw);
}

/* Backward per block of rows, with dS in the caller's scratch (laid out as
 * probs):
 *   dP'  = dout vb^T                     (rows,len)
 *   dv  += P'^T dout                     P' = P * mul, in thread scratch
 *   dP   = dP' * mul;  dS = (dP - sum(dP P)) P * scaling
 *   dq  += dS kb;  dk += dS^T qb
 * Masked keys need nothing: their probabilities are exactly 0, so their
 * scores pass no gradient. */
// dq, dk, dv (N,C) +=; scratch as probs; dout, q, k, v (N,C); probs (NH sum len^2)
void cpu_attention_backward(void *vctx, float *dq, float *dk, float *dv, float *scratch, const float *dout,
                            const float *q, const float *k, const float *v, const float *probs,
                            const backend_windows *w, int NH, int HS, float p, philox_stream rng)
{
    cpu_ctx *ctx = vctx;
    if (w->B <= 0 || w->max_len <= 0 || NH <= 0 || HS <= 0) return;
    int C = NH * HS, T = w->T;
    float scaling = backend_score_scale(HS);
    float dscale = cpu_dropout_scale(p);
    att_window *aw = att_windows(ctx, w, NH);
    if (!aw) {
        size_t n = (size_t)w->N * C;
        fill_nan(dq, n);
        fill_nan(dk, n);
        fill_nan(dv, n);
        return;
    }
    int nbh = w->B * NH;
    cpu_blas_serial_begin(ctx);
#pragma omp parallel for num_threads(ctx->nthreads) schedule(dynamic, 1)
    for (int bh = 0; bh < nbh; bh++) {
        int b = bh / NH, h = bh % NH, len = aw[b].len;
        if (len <= 0) continue;
        int R = rows_per_block(ctx, len);
        size_t off = aw[b].row0 * C + (size_t)h * HS;
        const float *qb = q + off, *kb = k + off, *vb = v + off;
        float *buf = ctx->scratch + (size_t)omp_get_thread_num() * ctx->scratch_floats;
        for (int r0 = 0; r0 < len; r0 += R) {
            int rows = len - r0 < R ? len - r0 : R;
            size_t n = (size_t)rows * len, at = aw[b].probs + (size_t)h * len * len + (size_t)r0 * len;
            const float *P = probs + at, *dob = dout + off + (size_t)r0 * C;
            float *ds = scratch + at;
            // dP' (rows,len) = dob (rows,HS) @ vb^T (HS,len)
            cpu_gemm(ctx, 0, 1, rows, len, HS, 1.0f, dob, C, vb, C, 0.0f, ds, len);
            const float *Pd = P;
            if (p > 0.0f) {
                probs_mask(buf, rng, b, h, NH, T, r0, rows, len, p, dscale);
                mul_rows(ds, buf, n);
                mul_rows(buf, P, n);
                Pd = buf;
            }
            // dv (len,HS) += P'^T (len,rows) @ dob (rows,HS)
            if (dv) cpu_gemm(ctx, 1, 0, len, HS, rows, 1.0f, Pd, len, dob, C, 1.0f, dv + off, C);
            for (int t = 0; t < rows; t++)
                softmax_row_backward(ds + (size_t)t * len, P + (size_t)t * len, len, scaling);
            // dq[r0:] (rows,HS) += dS (rows,len) @ kb (len,HS);  dk (len,HS) += dS^T (len,rows) @ qb[r0:] (rows,HS)
            if (dq) cpu_gemm(ctx, 0, 0, rows, HS, len, 1.0f, ds, len, kb, C, 1.0f, dq + off + (size_t)r0 * C, C);
            if (dk) cpu_gemm(ctx, 1, 0, len, HS, rows, 1.0f, ds, len, qb + (size_t)r0 * C, C, 1.0f, dk + off, C);
        }
    }
    cpu_blas_serial_end(ctx);
    free(aw);
}
