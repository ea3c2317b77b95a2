/* Self-attention of one layer on the CPU, as transformers' eager attention
 * computes it, one (batch, head) pair per loop iteration:
 *
 *   S  = (q k^T) * HS^-0.5 + (mask == 0 ? -FLT_MAX : 0)   (T,T)
 *   P  = softmax(S) over keys            saved in probs
 *   P' = P * dropout multipliers         (only when p > 0)
 *   out = P' v                           (T,HS), written into (B,T,C)
 *
 * q, k, v, out are (B,T,C) with head h in columns h*HS .. h*HS+HS-1, so the
 * GEMMs read them in place with leading dimension C. The (b,h) pairs are
 * handed to threads one at a time and OpenBLAS runs single-threaded inside
 * the parallel region (the OpenMP build does so by itself; a pthreads build
 * is told to, see cpu_blas_serial_begin), so every output element has one
 * writer and a fixed summation order.
 *
 * Each (b,h) is done a block of rows at a time, so that the scores of a
 * block are still in cache when softmax and the second GEMM read them. With
 * dropout, P' exists only for the current block, in the thread's scratch:
 * the mask is a pure function of (rng, flat index into probs) and backward
 * draws it again. */
#include "backend/cpu/cpu_math.h"

#include "backend/cpu/cpu.h"

#include <cblas.h>
#include <float.h>
#include <math.h>
#include <omp.h>

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

/* torch multiplies by HS ** -0.5 computed in double, rounded to float. */
static float score_scale(int HS)
{
    return (float)(1.0 / sqrt((double)HS));
}

/* Rows per block: a block of scores (rows x T) stays in the thread's
 * scratch-sized share of L2 between the GEMM that makes it and the loops
 * that use it; blocks are made equal so none is a sliver. 0 after a failure
 * (recorded in ctx). */
static int rows_per_block(cpu_ctx *ctx, int T)
{
    if (cpu_scratch_reserve(ctx, (size_t)T) != 0) return 0;
    size_t rmax = ctx->scratch_floats / (size_t)T;
    if (rmax >= (size_t)T) return T;
    size_t nblk = ((size_t)T + rmax - 1) / rmax;
    return (int)(((size_t)T + nblk - 1) / nblk);
}

// out (B,T,C); probs (B,NH,T,T); q, k, v (B,T,C); mask (B,T) or NULL
void cpu_attention_forward(void *vctx, float *out, float *probs, const float *q, const float *k, const float *v,
                           const int32_t *mask, int B, int T, int NH, int HS, float p, philox_stream rng)
{
    cpu_ctx *ctx = vctx;
    if (B <= 0 || T <= 0 || NH <= 0 || HS <= 0) return;
    int C = NH * HS;
    float scaling = score_scale(HS);
    float dscale = cpu_dropout_scale(p);
    int R = rows_per_block(ctx, T);
    if (R == 0) {
        for (size_t i = 0; i < (size_t)B * T * C; i++) out[i] = NAN;
        return;
    }
    int nbh = B * NH;
    cpu_blas_serial_begin(ctx);
#pragma omp parallel for num_threads(ctx->nthreads) schedule(dynamic, 1)
    for (int bh = 0; bh < nbh; bh++) {
        int b = bh / NH, h = bh % NH;
        size_t off = (size_t)b * T * C + (size_t)h * HS;
        const float *qb = q + off, *kb = k + off, *vb = v + off;
        float *ob = out + off;
        const int32_t *mb = mask ? mask + (size_t)b * T : NULL;
        float *buf = ctx->scratch + (size_t)omp_get_thread_num() * ctx->scratch_floats;
        for (int r0 = 0; r0 < T; r0 += R) {
            int rows = T - r0 < R ? T - r0 : R;
            size_t n = (size_t)rows * T, at = (size_t)bh * T * T + (size_t)r0 * T;
            float *P = probs + at;
            // P (rows,T) = qb[r0:] (rows,HS) @ kb^T (HS,T) * scaling
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, T, HS, scaling, qb + (size_t)r0 * C, C, kb, C,
                        0.0f, P, T);
            for (int t = 0; t < rows; t++) softmax_row(P + (size_t)t * T, mb, T);
            const float *Pd = P;
            if (p > 0.0f) {
                cpu_dropout_mask(buf, rng, at, n, p, dscale);
                mul_rows(buf, P, n);
                Pd = buf;
            }
            // ob[r0:] (rows,HS) = P' (rows,T) @ vb (T,HS)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, HS, T, 1.0f, Pd, T, vb, C, 0.0f,
                        ob + (size_t)r0 * C, C);
        }
    }
    cpu_blas_serial_end(ctx);
}

/* Backward per block of rows, with dS in the caller's scratch (each (b,h)
 * has its own T x T there):
 *   dP'  = dout vb^T                     (rows,T)
 *   dv  += P'^T dout                     P' = P * mul, in thread scratch
 *   dP   = dP' * mul;  dS = (dP - sum(dP P)) P * scaling
 *   dq  += dS kb;  dk += dS^T qb                                           */
// dq, dk, dv (B,T,C) +=; scratch (B,NH,T,T); dout, q, k, v (B,T,C); probs (B,NH,T,T)
void cpu_attention_backward(void *vctx, float *dq, float *dk, float *dv, float *scratch, const float *dout,
                            const float *q, const float *k, const float *v, const float *probs,
                            const int32_t *mask, int B, int T, int NH, int HS, float p, philox_stream rng)
{
    cpu_ctx *ctx = vctx;
    (void)mask; /* masked scores pass their gradient through unchanged */
    if (B <= 0 || T <= 0 || NH <= 0 || HS <= 0) return;
    int C = NH * HS;
    float scaling = score_scale(HS);
    float dscale = cpu_dropout_scale(p);
    int R = rows_per_block(ctx, T);
    if (R == 0) {
        size_t n = (size_t)B * T * C;
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
        int b = bh / NH, h = bh % NH;
        size_t off = (size_t)b * T * C + (size_t)h * HS;
        const float *qb = q + off, *kb = k + off, *vb = v + off;
        float *buf = ctx->scratch + (size_t)omp_get_thread_num() * ctx->scratch_floats;
        for (int r0 = 0; r0 < T; r0 += R) {
            int rows = T - r0 < R ? T - r0 : R;
            size_t n = (size_t)rows * T, at = (size_t)bh * T * T + (size_t)r0 * T;
            const float *P = probs + at, *dob = dout + off + (size_t)r0 * C;
            float *ds = scratch + at;
            // dP' (rows,T) = dob (rows,HS) @ vb^T (HS,T)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, T, HS, 1.0f, dob, C, vb, C, 0.0f, ds, T);
            const float *Pd = P;
            if (p > 0.0f) {
                cpu_dropout_mask(buf, rng, at, n, p, dscale);
                mul_rows(ds, buf, n);
                mul_rows(buf, P, n);
                Pd = buf;
            }
            // dv (T,HS) += P'^T (T,rows) @ dob (rows,HS)
            if (dv)
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, HS, rows, 1.0f, Pd, T, dob, C, 1.0f, dv + off,
                            C);
            for (int t = 0; t < rows; t++) softmax_row_backward(ds + (size_t)t * T, P + (size_t)t * T, T, scaling);
            // dq[r0:] (rows,HS) += dS (rows,T) @ kb (T,HS);  dk (T,HS) += dS^T (T,rows) @ qb[r0:] (rows,HS)
            if (dq)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, HS, T, 1.0f, ds, T, kb, C, 1.0f,
                            dq + off + (size_t)r0 * C, C);
            if (dk)
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, HS, rows, 1.0f, ds, T, qb + (size_t)r0 * C, C,
                            1.0f, dk + off, C);
        }
    }
    cpu_blas_serial_end(ctx);
}

/* For ops_varlen.c: the same row softmax, so packed and padded attention
 * agree bit for bit at every real position. */
void cpu_softmax_row(float *x, const int32_t *mask, int T)
{
    softmax_row(x, mask, T);
}

void cpu_softmax_row_backward(float *ds, const float *p, int T, float scaling)
{
    softmax_row_backward(ds, p, T, scaling);
}
