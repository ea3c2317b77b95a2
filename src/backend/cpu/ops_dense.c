/* Dense ops of the CPU backend: embedding, layernorm, matmul, gelu, dropout,
 * add. Letters and the =/+= convention are in cpu.h. Each op follows the
 * arithmetic of the PyTorch CPU kernel it stands for (noted per op), so
 * results agree with PyTorch to float rounding. */
#include "backend/cpu/cpu_math.h"

#include "backend/cpu/cpu.h"
#include "backend/cpu/bf16.h"
#include "backend/cpu/onednn_dl.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* Columns are split between threads in multiples of a cache line, so no two
 * threads write the same line of a gradient. */
#define COL_ALIGN 16

static void split_cols(int C, int nthr, int ithr, int *c0, int *c1)
{
    int units = (C + COL_ALIGN - 1) / COL_ALIGN;
    int per = units / nthr, rem = units % nthr;
    int u0 = ithr * per + (ithr < rem ? ithr : rem);
    int u1 = u0 + per + (ithr < rem ? 1 : 0);
    *c0 = u0 * COL_ALIGN < C ? u0 * COL_ALIGN : C;
    *c1 = u1 * COL_ALIGN < C ? u1 * COL_ALIGN : C;
}

/* ------------------------------------------------------------------------
 * Embedding. transformers adds (word + token type) first, then position. */

static inline size_t position_of(const int32_t *pos, int n, int T)
{
    return pos ? (size_t)pos[n] : (size_t)(n % T);
}

// out is (N,C); ids, types, pos are (N) (pos NULL: n % T); wte (V,C), wpe (P,C), wtt (TV,C)
void cpu_embedding_forward(void *vctx, backend_act *vout, const int32_t *ids, const int32_t *types, const int32_t *pos,
                           const float *wte, const float *wpe, const float *wtt, int N, int T, int C)
{
    float *out = vout;
    cpu_ctx *ctx = vctx;
#pragma omp parallel for num_threads(ctx->nthreads) if ((size_t)N * C >= CPU_PAR_MIN) schedule(dynamic, 64)
    for (int n = 0; n < N; n++) {
        float *o = out + (size_t)n * C;
        const float *we = wte + (size_t)ids[n] * C;
        const float *te = wtt + (size_t)(types ? types[n] : 0) * C;
        const float *pe = wpe + position_of(pos, n, T) * C;
        for (int c = 0; c < C; c++) o[c] = (we[c] + te[c]) + pe[c];
    }
}

/* Each thread owns a range of columns of all three tables and walks the
 * rows in order, so a repeated id sums in row order whatever the threads. */
void cpu_embedding_backward(void *vctx, float *dwte, float *dwpe, float *dwtt, const backend_act *vdout,
                            const int32_t *ids, const int32_t *types, const int32_t *pos, int N, int T, int C)
{
    const float *dout = vdout;
    cpu_ctx *ctx = vctx;
    int nthr = (size_t)N * C >= CPU_PAR_MIN ? ctx->nthreads : 1;
#pragma omp parallel num_threads(nthr)
    {
        int c0, c1;
        split_cols(C, omp_get_num_threads(), omp_get_thread_num(), &c0, &c1);
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
                float *g = dwpe + position_of(pos, n, T) * C;
                for (int c = c0; c < c1; c++) g[c] += d[c];
            }
        }
    }
}

/* ------------------------------------------------------------------------
 * LayerNorm. Mean and biased variance in double, two passes (torch uses a
 * float Welford; this agrees with it to an ulp or so and is never worse); then, as
 * torch's kernel: rstd = 1 / sqrt(var + eps) in float and
 * out = fma((x - mean) * rstd, w, b). */

/* Row sums in 4 double lanes (a fixed order, and 4 additions in flight
 * instead of one chain), lanes combined pairwise. */
CPU_INLINE void layernorm_row_code(float *out, float *mean, float *rstd, const float *x, const float *w,
                                   const float *b, int C, float eps)
{
    double s[4] = {0, 0, 0, 0}, v[4] = {0, 0, 0, 0};
    int c4 = C & ~3;
    for (int c = 0; c < c4; c += 4)
        for (int l = 0; l < 4; l++) s[l] += x[c + l];
    for (int c = c4; c < C; c++) s[c - c4] += x[c];
    double md = ((s[0] + s[2]) + (s[1] + s[3])) / C;
    for (int c = 0; c < c4; c += 4)
        for (int l = 0; l < 4; l++) {
            double d = x[c + l] - md;
            v[l] += d * d;
        }
    for (int c = c4; c < C; c++) {
        double d = x[c] - md;
        v[c - c4] += d * d;
    }
    float m = (float)md;
    float rs = 1.0f / sqrtf((float)(((v[0] + v[2]) + (v[1] + v[3])) / C) + eps);
#pragma omp simd
    for (int c = 0; c < C; c++) out[c] = fmaf((x[c] - m) * rs, w[c], b[c]);
    *mean = m;
    *rstd = rs;
}
CPU_VARIANTS(CPU_K_LAYERNORM, layernorm_row, (float *out, float *mean, float *rstd, const float *x, const float *w,
             const float *b, int C, float eps), (out, mean, rstd, x, w, b, C, eps))

// out is (N,C); mean, rstd (N); inp (N,C); w, b (C)
void cpu_layernorm_forward(void *vctx, backend_act *vout, float *mean, float *rstd, const backend_act *vinp,
                           const float *w, const float *b, int N, int C, float eps)
{
    float *out = vout;
    const float *inp = vinp;
    cpu_ctx *ctx = vctx;
#pragma omp parallel for num_threads(ctx->nthreads) if ((size_t)N * C >= CPU_PAR_MIN) schedule(dynamic, 64)
    for (int n = 0; n < N; n++)
        layernorm_row(out + (size_t)n * C, mean + n, rstd + n, inp + (size_t)n * C, w, b, C, eps);
}

/* dinp = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dout * w, with
 * the two row means in double. */
CPU_INLINE void layernorm_row_backward_code(float *dinp, const float *dout, const float *x, const float *w,
                                            float mean, float rstd, int C)
{
    double sg[4] = {0, 0, 0, 0}, sgx[4] = {0, 0, 0, 0};
    int c4 = C & ~3;
    for (int c = 0; c < c4; c += 4)
        for (int l = 0; l < 4; l++) {
            float g = dout[c + l] * w[c + l];
            sg[l] += g;
            sgx[l] += (double)g * ((x[c + l] - mean) * rstd);
        }
    for (int c = c4; c < C; c++) {
        float g = dout[c] * w[c];
        sg[c - c4] += g;
        sgx[c - c4] += (double)g * ((x[c] - mean) * rstd);
    }
    float mg = (float)(((sg[0] + sg[2]) + (sg[1] + sg[3])) / C);
    float mgx = (float)(((sgx[0] + sgx[2]) + (sgx[1] + sgx[3])) / C);
#pragma omp simd
    for (int c = 0; c < C; c++) {
        float xhat = (x[c] - mean) * rstd;
        dinp[c] += rstd * (dout[c] * w[c] - mg - xhat * mgx);
    }
}
CPU_VARIANTS(CPU_K_LAYERNORM, layernorm_row_backward, (float *dinp, const float *dout, const float *x, const float *w,
             float mean, float rstd, int C), (dinp, dout, x, w, mean, rstd, C))

/* Column block [0, nc) of dw += sum_n dout * xhat and db += sum_n dout,
 * rows in order, accumulated in double. */
#define COL_BLOCK 256

CPU_INLINE void layernorm_param_grads_code(float *dw, float *db, const float *dout, const float *x,
                                           const float *mean, const float *rstd, int N, int C, int nc)
{
    double aw[COL_BLOCK], ab[COL_BLOCK];
    for (int j = 0; j < nc; j++) aw[j] = ab[j] = 0;
    for (int n = 0; n < N; n++) {
        const float *d = dout + (size_t)n * C, *xr = x + (size_t)n * C;
        float m = mean[n], r = rstd[n];
#pragma omp simd
        for (int j = 0; j < nc; j++) {
            aw[j] += (double)d[j] * ((xr[j] - m) * r);
            ab[j] += d[j];
        }
    }
    for (int j = 0; j < nc; j++) {
        if (dw) dw[j] += (float)aw[j];
        if (db) db[j] += (float)ab[j];
    }
}
CPU_VARIANTS(CPU_K_LAYERNORM, layernorm_param_grads, (float *dw, float *db, const float *dout, const float *x,
             const float *mean, const float *rstd, int N, int C, int nc), (dw, db, dout, x, mean, rstd, N, C, nc))

/* Column block [0, nc) of db += sum_n dout, rows in order, in double. */
CPU_INLINE void column_sums_code(float *db, const float *dout, int N, int OC, int nc)
{
    double acc[COL_BLOCK];
    for (int j = 0; j < nc; j++) acc[j] = 0;
    for (int n = 0; n < N; n++) {
        const float *d = dout + (size_t)n * OC;
#pragma omp simd
        for (int j = 0; j < nc; j++) acc[j] += d[j];
    }
    for (int j = 0; j < nc; j++) db[j] += (float)acc[j];
}
CPU_VARIANTS(CPU_K_ELEMENTWISE, column_sums, (float *db, const float *dout, int N, int OC, int nc), (db, dout, N, OC,
             nc))

void cpu_layernorm_backward(void *vctx, backend_act *vdinp, float *dw, float *db, const backend_act *vdout,
                            const backend_act *vinp, const float *w, const float *mean, const float *rstd, int N, int C)
{
    float *dinp = vdinp;
    const float *dout = vdout;
    const float *inp = vinp;
    cpu_ctx *ctx = vctx;
    int par = (size_t)N * C >= CPU_PAR_MIN;
    if (dinp) {
#pragma omp parallel for num_threads(ctx->nthreads) if (par) schedule(dynamic, 64)
        for (int n = 0; n < N; n++)
            layernorm_row_backward(dinp + (size_t)n * C, dout + (size_t)n * C, inp + (size_t)n * C, w, mean[n],
                                   rstd[n], C);
    }
    if (!dw && !db) return;
    /* dw = sum over rows of dout * xhat, db = sum of dout: each thread owns
     * columns and sums all rows in order, in double. */
#pragma omp parallel num_threads(par ? ctx->nthreads : 1)
    {
        int c0, c1;
        split_cols(C, omp_get_num_threads(), omp_get_thread_num(), &c0, &c1);
        for (int cb = c0; cb < c1; cb += COL_BLOCK) {
            int nc = c1 - cb < COL_BLOCK ? c1 - cb : COL_BLOCK;
            layernorm_param_grads(dw ? dw + cb : NULL, db ? db + cb : NULL, dout + cb, inp + cb, mean, rstd, N, C, nc);
        }
    }
}

/* ------------------------------------------------------------------------
 * Matmul (nn.Linear): out = inp @ w^T + b, as torch's addmm: the bias is
 * copied into out and the GEMM accumulates onto it (beta = 1). */

/* --precision bf16 (ctx->bf16): the operands are rounded to bf16 into
 * ctx->bf16_buf and oneDNN multiplies them with fp32 accumulation onto the
 * fp32 output (beta 1 accumulates, as the fp32 path). */
static int use_bf16(const cpu_ctx *ctx)
{
    return ctx->bf16 && !ctx->batch_invariant;
}

static void bf16_gemm(cpu_ctx *ctx, int ta, int tb, int M, int N, int K, const uint16_t *A, int lda, const uint16_t *B,
                      int ldb, float beta, float *C, int ldc)
{
    if (onednn_gemm_bf16(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc) != 0)
        cpu_fail(ctx, "cpu backend: oneDNN's bf16 matmul failed");
}

static void matmul_forward_bf16(cpu_ctx *ctx, float *out, const float *inp, const float *w, int N, int C, int OC,
                                float beta)
{
    size_t ni = (size_t)N * C, nw = (size_t)OC * C;
    uint16_t *buf = cpu_bf16_reserve(ctx, ni + nw);
    if (!buf) return;
    bf16_from_float(buf, inp, ni, ctx->nthreads);
    bf16_from_float(buf + ni, w, nw, ctx->nthreads);
    bf16_gemm(ctx, 0, 1, N, OC, C, buf, C, buf + ni, C, beta, out, OC);
}

static void matmul_backward_bf16(cpu_ctx *ctx, float *dinp, float *dw, const float *dout, const float *inp,
                                 const float *w, int N, int C, int OC)
{
    size_t nd = (size_t)N * OC, nw = dinp ? (size_t)OC * C : 0, ni = dw ? (size_t)N * C : 0;
    uint16_t *buf = cpu_bf16_reserve(ctx, nd + nw + ni);
    if (!buf) return;
    uint16_t *dout_b = buf, *w_b = buf + nd, *inp_b = buf + nd + nw;
    bf16_from_float(dout_b, dout, nd, ctx->nthreads);
    if (dinp) {
        bf16_from_float(w_b, w, nw, ctx->nthreads);
        bf16_gemm(ctx, 0, 0, N, C, OC, dout_b, OC, w_b, C, 1.0f, dinp, C);
    }
    if (dw) {
        bf16_from_float(inp_b, inp, ni, ctx->nthreads);
        bf16_gemm(ctx, 1, 0, OC, C, N, dout_b, OC, inp_b, C, 1.0f, dw, C);
    }
}

// out is (N,OC); inp (N,C); w (OC,C); b (OC) or NULL
void cpu_matmul_forward(void *vctx, backend_act *vout, const backend_act *vinp, const float *w, const float *b, int N,
                        int C, int OC)
{
    float *out = vout;
    const float *inp = vinp;
    cpu_ctx *ctx = vctx;
    if (N <= 0 || OC <= 0) return;
    if (cpu_lowp_matmul(ctx, out, inp, w, b, N, C, OC)) return;
    if (b) {
#pragma omp parallel for num_threads(ctx->nthreads) if ((size_t)N * OC >= CPU_PAR_MIN) schedule(static)
        for (int n = 0; n < N; n++) memcpy(out + (size_t)n * OC, b, (size_t)OC * sizeof(float));
    }
    if (C <= 0) {
        if (!b) memset(out, 0, (size_t)N * OC * sizeof(float));
        return;
    }
    cpu_set_threads(ctx);
    if (use_bf16(ctx)) matmul_forward_bf16(ctx, out, inp, w, N, C, OC, b ? 1.0f : 0.0f);
    else cpu_gemm(ctx, 0, 1, N, OC, C, 1.0f, inp, C, w, C, b ? 1.0f : 0.0f, out, OC);
}

/* n products of one input (Q, K, V): in one pass where answers run in bf16
 * or int8 (the input's rows quantised or rounded once), else one by one. */
void cpu_matmul_forward_n(void *vctx, int n, backend_act *const *vout, const backend_act *vinp, const float *const *w,
                          const float *const *b, int N, int C, int OC)
{
    float *const *out = (float *const *)vout;
    const float *inp = vinp;
    if (N <= 0 || OC <= 0 || cpu_lowp_matmul_n(vctx, n, out, inp, w, b, N, C, OC)) return;
    for (int i = 0; i < n; i++) cpu_matmul_forward(vctx, out[i], inp, w[i], b ? b[i] : NULL, N, C, OC);
}

void cpu_matmul_backward(void *vctx, backend_act *vdinp, float *dw, float *db, const backend_act *vdout,
                         const backend_act *vinp, const float *w, int N, int C, int OC)
{
    float *dinp = vdinp;
    const float *dout = vdout;
    const float *inp = vinp;
    cpu_ctx *ctx = vctx;
    if (N <= 0 || OC <= 0 || C < 0) return;
    cpu_set_threads(ctx);
    if (C > 0 && (dinp || dw) && use_bf16(ctx)) {
        matmul_backward_bf16(ctx, dinp, dw, dout, inp, w, N, C, OC);
    } else if (C > 0) {
        // dinp (N,C) += dout (N,OC) @ w (OC,C)
        if (dinp) cpu_gemm(ctx, 0, 0, N, C, OC, 1.0f, dout, OC, w, C, 1.0f, dinp, C);
        // dw (OC,C) += dout^T (OC,N) @ inp (N,C)
        if (dw) cpu_gemm(ctx, 1, 0, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f, dw, C);
    }
    if (!db) return;
    /* db = column sums of dout: columns split between threads, rows summed
     * in order in double. */
#pragma omp parallel num_threads((size_t)N * OC >= CPU_PAR_MIN ? ctx->nthreads : 1)
    {
        int c0, c1;
        split_cols(OC, omp_get_num_threads(), omp_get_thread_num(), &c0, &c1);
        for (int cb = c0; cb < c1; cb += COL_BLOCK)
            column_sums(db + cb, dout + cb, N, OC, c1 - cb < COL_BLOCK ? c1 - cb : COL_BLOCK);
    }
}

/* ------------------------------------------------------------------------
 * GELU, exact (erf) form (cpu_erff, within ~1 ulp of erff), in torch's
 * order of operations:
 *   out = x * 0.5 * (1 + erf(x * sqrt(1/2)))
 *   dinp = dout * (cdf + x * pdf), cdf = 0.5 * (1 + erf(x * sqrt(1/2))),
 *          pdf = (2/sqrt(pi)) * sqrt(1/2) * 0.5 * exp(-0.5 * x * x) */

#define GELU_ALPHA 0.70710678118654752440f /* M_SQRT1_2 */
#define GELU_BETA 0.39894228040143267794f  /* M_2_SQRTPI * M_SQRT1_2 * 0.5 */

CPU_INLINE void gelu_chunk_code(float *out, const float *inp, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        out[i] = x * 0.5f * (1.0f + cpu_erff(x * GELU_ALPHA));
    }
}
CPU_VARIANTS(CPU_K_GELU, gelu_chunk, (float *out, const float *inp, size_t n), (out, inp, n))

CPU_INLINE void gelu_backward_chunk_code(float *dinp, const float *inp, const float *dout, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        float cdf = 0.5f * (1.0f + cpu_erff(x * GELU_ALPHA));
        float pdf = GELU_BETA * cpu_expf(x * x * -0.5f);
        dinp[i] += dout[i] * (cdf + x * pdf);
    }
}
CPU_VARIANTS(CPU_K_GELU, gelu_backward_chunk, (float *dinp, const float *inp, const float *dout, size_t n), (dinp, inp,
             dout, n))

#ifdef CPU_HAVE_AVX2_MATH
/* The same with cpu_erff8 and cpu_expf8 on whole vectors: the same
 * operations in the same order; returns where it stopped. */
__attribute__((target("avx2"))) static size_t gelu_avx2(float *out, const float *inp, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(inp + i);
        __m256 e = cpu_erff8(_mm256_mul_ps(x, CPU_SET8(GELU_ALPHA)));
        _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(x, CPU_SET8(0.5f)), _mm256_add_ps(CPU_SET8(1.0f), e)));
    }
    return i;
}

__attribute__((target("avx2"))) static size_t gelu_backward_avx2(float *dinp, const float *inp, const float *dout,
                                                                 size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(inp + i);
        __m256 e = cpu_erff8(_mm256_mul_ps(x, CPU_SET8(GELU_ALPHA)));
        __m256 cdf = _mm256_mul_ps(CPU_SET8(0.5f), _mm256_add_ps(CPU_SET8(1.0f), e));
        __m256 pdf = _mm256_mul_ps(CPU_SET8(GELU_BETA), cpu_expf8(_mm256_mul_ps(_mm256_mul_ps(x, x), CPU_SET8(-0.5f))));
        __m256 g = _mm256_mul_ps(_mm256_loadu_ps(dout + i), _mm256_add_ps(cdf, _mm256_mul_ps(x, pdf)));
        _mm256_storeu_ps(dinp + i, _mm256_add_ps(_mm256_loadu_ps(dinp + i), g));
    }
    return i;
}
#endif

/* The avx512 variant: cpu_erff16 on whole vectors of 16 (the answers'
 * GELU over N x intermediate was 11 % of an int8 predict with GCC's
 * vectorisation of the C), the C for the rest. */
CPU_TARGET_AVX512 static void gelu_chunk_avx512(float *out, const float *inp, size_t n)
{
    size_t i = 0;
#ifdef CPU_HAVE_AVX2_MATH
    for (; i + 16 <= n; i += 16) {
        __m512 x = _mm512_loadu_ps(inp + i);
        __m512 e = cpu_erff16(_mm512_mul_ps(x, CPU_SET16(GELU_ALPHA)));
        _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_mul_ps(x, CPU_SET16(0.5f)), _mm512_add_ps(CPU_SET16(1.0f), e)));
    }
#endif
    gelu_chunk_code(out + i, inp + i, n - i);
}
CPU_TARGET_AVX512 static void gelu_backward_chunk_avx512(float *dinp, const float *inp, const float *dout, size_t n)
{
    gelu_backward_chunk_code(dinp, inp, dout, n);
}

/* The avx2 variant: the intrinsics for the whole vectors, the C for the rest. */
static void gelu_run(float *out, const float *inp, size_t n)
{
    if (cpu_kernel_level(CPU_K_GELU) >= CPU_ISA_AVX512) {
        gelu_chunk_avx512(out, inp, n);
        return;
    }
    if (cpu_kernel_level(CPU_K_GELU) < CPU_ISA_AVX2) {
        gelu_chunk_sse(out, inp, n);
        return;
    }
    size_t i = 0;
#ifdef CPU_HAVE_AVX2_MATH
    i = gelu_avx2(out, inp, n);
#endif
    gelu_chunk_avx2(out + i, inp + i, n - i);
}

static void gelu_backward_run(float *dinp, const float *inp, const float *dout, size_t n)
{
    if (cpu_kernel_level(CPU_K_GELU) >= CPU_ISA_AVX512) {
        gelu_backward_chunk_avx512(dinp, inp, dout, n);
        return;
    }
    if (cpu_kernel_level(CPU_K_GELU) < CPU_ISA_AVX2) {
        gelu_backward_chunk_sse(dinp, inp, dout, n);
        return;
    }
    size_t i = 0;
#ifdef CPU_HAVE_AVX2_MATH
    i = gelu_backward_avx2(dinp, inp, dout, n);
#endif
    gelu_backward_chunk_avx2(dinp + i, inp + i, dout + i, n - i);
}

#define CHUNK 256

/* GELU over n elements in chunks: forward (dout NULL: out = gelu(inp)) or
 * backward (out += gelu'(inp) dout). */
static void gelu_chunks(cpu_ctx *ctx, float *out, const float *inp, const float *dout, size_t n)
{
    long nchunks = (long)((n + CHUNK - 1) / CHUNK);
#pragma omp parallel for num_threads(ctx->nthreads) if (n >= CPU_PAR_MIN) schedule(dynamic, 16)
    for (long k = 0; k < nchunks; k++) {
        size_t i0 = (size_t)k * CHUNK, len = n - i0 < CHUNK ? n - i0 : CHUNK;
        if (dout) gelu_backward_run(out + i0, inp + i0, dout + i0, len);
        else gelu_run(out + i0, inp + i0, len);
    }
}

void cpu_gelu_forward(void *vctx, backend_act *out, const backend_act *inp, size_t n)
{
    gelu_chunks(vctx, out, inp, NULL, n);
}

void cpu_gelu_backward(void *vctx, backend_act *dinp, const backend_act *inp, const backend_act *dout, size_t n)
{
    gelu_chunks(vctx, dinp, inp, dout, n);
}

/* ------------------------------------------------------------------------
 * Dropout. torch multiplies the input by a mask of 0 and 1/(1-p), so a
 * dropped inf or NaN gives NaN there too: the multiplier is applied to every
 * element, never a select. */

float cpu_dropout_scale(float p)
{
    return p >= 1.0f ? 0.0f : 1.0f / (1.0f - p);
}

/* `omp simd`: out may be a (same index), which carries no dependence. */
CPU_INLINE void mul_chunk_code(float *out, const float *a, const float *m, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) out[i] = a[i] * m[i];
}
CPU_VARIANTS(CPU_K_DROPOUT, mul_chunk, (float *out, const float *a, const float *m, size_t n), (out, a, m, n))

CPU_INLINE void mul_acc_chunk_code(float *out, const float *a, const float *m, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) out[i] += a[i] * m[i];
}
CPU_VARIANTS(CPU_K_DROPOUT, mul_acc_chunk, (float *out, const float *a, const float *m, size_t n), (out, a, m, n))

#define DROP_CHUNK 1024

/* One call of dropout_rows: with bits (the call's keep bits, element i at
 * bit i of the N*C), each chunk draws its bits first when draw is 1, then
 * multiplies; without, it draws multipliers as it goes. */
typedef struct {
    float *out;
    const float *inp;
    uint64_t *bits;
    int draw, backward;
    float p, scale;
    philox_stream rng;
} drop_job;

/* Keep bits of padded elements first .. first+len-1 ORed into words from bit
 * off on, len <= DROP_CHUNK; words past the last bit of the run are not
 * touched (they may be another chunk's). */
static void bits_at(uint64_t *words, size_t off, philox_stream rng, uint64_t first, size_t len, float p)
{
    uint64_t tmp[DROP_CHUNK / 64 + 1];
    cpu_dropout_bits(tmp, rng, first, len, p);
    uint64_t *w = words + off / 64;
    unsigned sh = (unsigned)(off % 64);
    for (size_t k = 0; k < (len + 63) / 64; k++) {
        w[k] |= tmp[k] << sh;
        uint64_t hi = sh ? tmp[k] >> (64 - sh) : 0;
        if (hi) w[k + 1] |= hi;
    }
}

/* Elements i0 .. i0+len-1, one run of the padded index from first, in the
 * chunk that starts at element c0. */
static void drop_piece(const drop_job *j, size_t c0, size_t i0, uint64_t first, size_t len, float *mul)
{
    if (j->bits) {
        if (j->draw) bits_at(j->bits + c0 / 64, i0 - c0, j->rng, first, len, j->p);
        return;
    }
    cpu_dropout_mask(mul, j->rng, first, len, j->p, j->scale);
    if (j->backward) mul_acc_chunk(j->out + i0, j->inp + i0, mul, len);
    else mul_chunk(j->out + i0, j->inp + i0, mul, len);
}

/* Chunks of the N*C rows' elements; in a packed batch a chunk finds its
 * first window by bisection and is cut where a window ends, so that each
 * piece is one run of the padded index (window b's elements are padded
 * elements b T C .. b T C + len C - 1). A padded batch is one run from 0. */
static void dropout_chunks(cpu_ctx *ctx, const drop_job *j, const backend_windows *w, int C)
{
    const int32_t *cu = w->cu_seqlens;
    int B = w->B;
    size_t n = (size_t)w->N * C, TC = (size_t)w->T * C;
    long nchunks = (long)((n + DROP_CHUNK - 1) / DROP_CHUNK);
#pragma omp parallel for num_threads(ctx->nthreads) if (n >= CPU_PAR_MIN / 4) schedule(dynamic, 4)
    for (long k = 0; k < nchunks; k++) {
        float mul[DROP_CHUNK];
        size_t c0 = (size_t)k * DROP_CHUNK, i0 = c0, i1 = n - i0 < DROP_CHUNK ? n : i0 + DROP_CHUNK;
        if (j->draw) memset(j->bits + c0 / 64, 0, (i1 - c0 + 63) / 64 * sizeof *j->bits);
        int b = 0;
        if (cu) {
            int hi = B - 1;
            while (b < hi) {
                int mid = (b + hi + 1) / 2;
                if ((size_t)cu[mid] * C <= i0) b = mid;
                else hi = mid - 1;
            }
        }
        while (i0 < i1) {
            size_t e = i1, first = i0;
            if (cu) {
                size_t w0 = (size_t)cu[b] * C, w1 = (size_t)cu[b + 1] * C;
                if (w1 <= i0) {
                    b++;
                    continue;
                }
                e = w1 < i1 ? w1 : i1;
                first = (size_t)b * TC + (i0 - w0);
            }
            drop_piece(j, c0, i0, first, e - i0, mul);
            i0 = e;
        }
        if (!j->bits) continue;
        const uint64_t *cb = j->bits + c0 / 64;
        if (j->backward) cpu_dropout_apply_bits_acc(j->out + c0, j->inp + c0, cb, i1 - c0, j->scale);
        else cpu_dropout_apply_bits(j->out + c0, j->inp + c0, cb, i1 - c0, j->scale);
    }
}

/* Through the mask cache: the forward keeps its mask as keep bits (when
 * the cache takes it), the backward reads them, or draws as before. */
static void dropout_rows(cpu_ctx *ctx, float *out, const float *inp, const backend_windows *w, int C, float p,
                         philox_stream rng, int backward)
{
    drop_job j = {.out = out, .inp = inp, .backward = backward, .p = p, .scale = cpu_dropout_scale(p), .rng = rng};
    size_t words = ((size_t)w->N * C + 63) / 64;
    cpu_mask_key key;
    cpu_mask_key_init(&key, rng, p, w, 0, C);
    int32_t *lens = malloc((size_t)(w->B > 0 ? w->B : 1) * sizeof *lens);
    int slot = -1;
    if (lens && w->B > 0) {
        for (int b = 0; b < w->B; b++) lens[b] = cpu_window_len(w, b);
        slot = cpu_mask_find(ctx, &key, lens, words);
        if (slot < 0 && !backward) {
            slot = cpu_mask_claim(ctx, &key, lens, words);
            j.draw = slot >= 0;
        }
    }
    free(lens);
    if (slot >= 0) j.bits = ctx->masks[slot].bits;
    dropout_chunks(ctx, &j, w, C);
    if (j.draw) cpu_mask_publish(ctx, slot);
    else if (backward) cpu_mask_drop(ctx, slot);
}

// out, inp are (w->N, C); out may equal inp
void cpu_dropout_forward(void *vctx, backend_act *vout, const backend_act *vinp, const backend_windows *w, int C,
                         float p, philox_stream rng)
{
    float *out = vout;
    const float *inp = vinp;
    size_t n = (size_t)w->N * C;
    if (p <= 0.0f) {
        if (out != inp && n) memmove(out, inp, n * sizeof(float));
        return;
    }
    dropout_rows(vctx, out, inp, w, C, p, rng, 0);
}

void cpu_dropout_backward(void *vctx, backend_act *vdinp, const backend_act *vdout, const backend_windows *w, int C,
                          float p, philox_stream rng)
{
    float *dinp = vdinp;
    const float *dout = vdout;
    if (!dinp) return;
    if (p <= 0.0f) {
        cpu_add(vctx, dinp, dinp, dout, (size_t)w->N * C);
        return;
    }
    dropout_rows(vctx, dinp, dout, w, C, p, rng, 1);
}

/* ------------------------------------------------------------------------ */

CPU_INLINE void add_chunk_code(float *out, const float *a, const float *b, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}
CPU_VARIANTS(CPU_K_ELEMENTWISE, add_chunk, (float *out, const float *a, const float *b, size_t n), (out, a, b, n))

// out = a + b over n; out may alias a or b
void cpu_add(void *vctx, backend_act *vout, const backend_act *va, const backend_act *vb, size_t n)
{
    float *out = vout;
    const float *a = va;
    const float *b = vb;
    cpu_ctx *ctx = vctx;
    long nchunks = (long)((n + 4095) / 4096);
#pragma omp parallel for num_threads(ctx->nthreads) if (n >= CPU_PAR_MIN) schedule(dynamic, 1)
    for (long k = 0; k < nchunks; k++) {
        size_t i0 = (size_t)k * 4096, len = n - i0 < 4096 ? n - i0 : 4096;
        add_chunk(out + i0, a + i0, b + i0, len);
    }
}
