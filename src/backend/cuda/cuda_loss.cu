/* The QA loss and the optimizer helpers of the CUDA backend: sum_squares
 * (a fixed-order block reduction: the result depends on n only), scale,
 * all_finite and the fused AdamW on fp32 master weights. */
#include "backend/adamw_consts.h"
#include "backend/cuda/cuda_act.cuh"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* ------------------------------------------------------------------------
 * BertForQuestionAnswering's loss, as the CPU backend: per side, the mean
 * cross-entropy over the windows whose clamped label is not T (ignored),
 * NaN when every window is ignored; total (start + end) / 2; each window's
 * softmax over its first len positions (backend.h). One warp per (window,
 * side) writes that window's gradient and loss; then one thread sums the
 * window losses in order, so the result does not depend on scheduling.
 * logits and dlogits are activations (ctx->atype): read exactly, the math
 * in double, each gradient rounded to fp32 and then to the activation type
 * where it is stored; the loss is fp32. */

#define QA_THREADS 256

__device__ __forceinline__ int clamp_label(int32_t pos, int T)
{
    return pos < 0 ? 0 : pos > T ? T : (int)pos;
}

/* Window b's length for the loss (the whole warp calls it): packed, its
 * rows; padded with a mask, the ones of its mask row; else T. */
__device__ int loss_len(const int32_t *cu, const int32_t *mask, int b, int T, int lane)
{
    if (cu) return cu[b + 1] - cu[b];
    if (!mask) return T;
    int c = 0;
    for (int t = lane; t < T; t += 32) c += mask[(size_t)b * T + t] != 0;
    for (int o = 16; o > 0; o >>= 1) c += __shfl_xor_sync(0xffffffffu, c, o);
    return c;
}

template <typename A>
__global__ void qa_loss_kernel(float *loss, A *dlogits, const A *logits, const int32_t *start, const int32_t *end,
                               const int32_t *cu, const int32_t *mask, int B, int T, float grad_scale, double *rowloss)
{
    __shared__ int count[2];
    if (threadIdx.x < 2) {
        const int32_t *pos = threadIdx.x ? end : start;
        int c = 0;
        for (int b = 0; b < B; b++) c += clamp_label(pos[b], T) != T;
        count[threadIdx.x] = c;
    }
    __syncthreads();
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nwarps = blockDim.x / 32;
    for (int pair = warp; pair < 2 * B; pair += nwarps) {
        int b = pair / 2, side = pair % 2;
        const int32_t *pos = side ? end : start;
        int target = clamp_label(pos[b], T);
        if (target == T) {
            if (lane == 0) rowloss[pair] = 0.0;
            continue; /* dlogits was zeroed */
        }
        int len = loss_len(cu, mask, b, T, lane);
        size_t row0 = cu ? (size_t)cu[b] : (size_t)b * T;
        const A *x = logits + row0 * 2 + side;
        A *d = dlogits ? dlogits + row0 * 2 + side : NULL;
        double mx = -INFINITY;
        for (int t = lane; t < len; t += 32) mx = fmax(mx, (double)act_f(x[2 * t]));
        for (int o = 16; o > 0; o >>= 1) mx = fmax(mx, __shfl_xor_sync(0xffffffffu, mx, o));
        double se = 0;
        for (int t = lane; t < len; t += 32) se += exp((double)act_f(x[2 * t]) - mx);
        for (int o = 16; o > 0; o >>= 1) se += __shfl_xor_sync(0xffffffffu, se, o);
        double lse = mx + log(se);
        double g = 0.5 * (double)grad_scale / count[side];
        if (d)
            for (int t = lane; t < len; t += 32)
                d[2 * t] = act_of<A>((float)((exp((double)act_f(x[2 * t]) - lse) - (t == target)) * g));
        if (lane == 0) rowloss[pair] = target < len ? lse - (double)act_f(x[2 * target]) : INFINITY;
    }
    __syncthreads();
    if (threadIdx.x == 0 && loss) {
        float side_loss[2];
        for (int side = 0; side < 2; side++) {
            double s = 0;
            for (int b = 0; b < B; b++) s += rowloss[2 * b + side];
            side_loss[side] = count[side] ? (float)(s / count[side]) : NAN;
        }
        *loss = (side_loss[0] + side_loss[1]) / 2.0f;
    }
}

template <typename A>
static void qa_loss(cuda_ctx *ctx, float *loss, void *dlogits, const void *logits, const int32_t *start,
                    const int32_t *end, const backend_windows *w, float grad_scale, double *rowloss)
{
    CUDA_LAUNCH(qa_loss_kernel<A>, 1, QA_THREADS, 0, ctx->stream, loss, (A *)dlogits, (const A *)logits, start, end,
        w->cu_seqlens, w->mask, w->B, w->T, grad_scale, rowloss);
}

// loss (1); dlogits, logits (w->N,2); start, end (w->B)
void cuda_qa_loss(void *vctx, float *loss, backend_act *dlogits, const backend_act *logits, const int32_t *start,
                  const int32_t *end, const backend_windows *w, float grad_scale)
{
    cuda_ctx *ctx = (cuda_ctx *)vctx;
    if (ctx->error || w->B <= 0 || w->N <= 0) return;
    char *cur = (char *)cuda_ws_get(ctx, cuda_ws_qa_loss((size_t)w->B));
    if (!cur) return;
    /* taken as a part, so that the race check knows its extent (cuda_ws_take) */
    double *rowloss = (double *)cuda_ws_take(&cur, 2 * (size_t)w->B * sizeof(double)); /* start, end per window */
    if (dlogits)
        CUDA_TRY(ctx, cudaMemsetAsync(dlogits, 0, (size_t)w->N * 2 * act_size(ctx->atype), ctx->stream));
    ACT_DISPATCH(ctx->atype, qa_loss, ctx, loss, dlogits, logits, start, end, w, grad_scale, rowloss);
    CUDA_LAUNCHED(ctx);
}

/* ------------------------------------------------------------------------
 * sum_squares: block b sums chunk b (a size fixed by n) in double with a
 * fixed tree; one block then adds the partial sums with the same tree. */

#define SS_THREADS 256
#define SS_MIN_CHUNK 4096

__global__ void sum_squares_stage1(double *part, const float *x, size_t n, size_t chunk)
{
    __shared__ double sh[SS_THREADS];
    size_t i0 = blockIdx.x * chunk, i1 = i0 + chunk < n ? i0 + chunk : n;
    double a = 0;
    for (size_t i = i0 + threadIdx.x; i < i1; i += SS_THREADS) a += (double)x[i] * x[i];
    double s = cuda_block_tree_sum<SS_THREADS>(a, sh);
    if (threadIdx.x == 0) part[blockIdx.x] = s;
}

__global__ void sum_squares_stage2(double *out, const double *part, int nparts)
{
    __shared__ double sh[SS_THREADS];
    double a = 0;
    for (int i = threadIdx.x; i < nparts; i += SS_THREADS) a += part[i];
    double s = cuda_block_tree_sum<SS_THREADS>(a, sh);
    if (threadIdx.x == 0) *out = s;
}

unsigned cuda_sum_squares_parts(cuda_ctx *ctx, double *part, const float *x, size_t n)
{
    if (n == 0) return 0;
    size_t chunk = SS_MIN_CHUNK;
    if ((n + chunk - 1) / chunk > CUDA_WS_REDUCE_BLOCKS) chunk = (n + CUDA_WS_REDUCE_BLOCKS - 1) / CUDA_WS_REDUCE_BLOCKS;
    unsigned nparts = (unsigned)((n + chunk - 1) / chunk);
    CUDA_LAUNCH(sum_squares_stage1, nparts, SS_THREADS, 0, ctx->stream, part, x, n, chunk);
    return nparts;
}

double cuda_sum_squares(void *vctx, const float *x, size_t n)
{
    cuda_ctx *ctx = (cuda_ctx *)vctx;
    if (ctx->error) return NAN;
    if (n == 0) return 0;
    double *result = ctx->red + CUDA_WS_REDUCE_BLOCKS;
    unsigned nparts = cuda_sum_squares_parts(ctx, ctx->red, x, n);
    CUDA_LAUNCH(sum_squares_stage2, 1, SS_THREADS, 0, ctx->stream, result, ctx->red, (int)nparts);
    double s = NAN;
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) e = cudaMemcpyAsync(&s, result, sizeof s, cudaMemcpyDeviceToHost, ctx->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(ctx->stream);
    if (e != cudaSuccess) {
        cuda_fail_at(ctx, "sum_squares", __FILE__, __LINE__, __func__, cudaGetErrorString(e));
        return NAN;
    }
    return s;
}

/* ------------------------------------------------------------------------ */

__global__ void scale_kernel(float *x, size_t n, float s)
{
    GRID_STRIDE(i, n) x[i] = __fmul_rn(x[i], s);
}

void cuda_scale(void *vctx, float *x, size_t n, float s)
{
    cuda_ctx *ctx = (cuda_ctx *)vctx;
    if (ctx->error || n == 0) return;
    cuda_weights_wrote(ctx, x, n * sizeof(float));
    CUDA_LAUNCH(scale_kernel, cuda_blocks(n, 256), 256, 0, ctx->stream, x, n, s);
    CUDA_LAUNCHED(ctx);
}

/* Any thread that meets an inf or NaN stores 1: a plain store, so the
 * answer does not depend on which thread wins. */
__global__ void nonfinite_kernel(int *flag, const float *x, size_t n)
{
    GRID_STRIDE(i, n)
    {
        if ((__float_as_uint(x[i]) & 0x7f800000u) == 0x7f800000u) *flag = 1;
    }
}

int cuda_all_finite(void *vctx, const float *x, size_t n)
{
    cuda_ctx *ctx = (cuda_ctx *)vctx;
    if (ctx->error) return 0;
    if (n == 0) return 1;
    int bad = 1;
    cudaError_t e = cudaMemsetAsync(ctx->flag, 0, sizeof(int), ctx->stream);
    if (e == cudaSuccess) {
        CUDA_LAUNCH(nonfinite_kernel, cuda_blocks(n, 256), 256, 0, ctx->stream, ctx->flag, x, n);
        e = cudaGetLastError();
    }
    if (e == cudaSuccess) e = cudaMemcpyAsync(&bad, ctx->flag, sizeof bad, cudaMemcpyDeviceToHost, ctx->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(ctx->stream);
    if (e != cudaSuccess) {
        cuda_fail_at(ctx, "all_finite", __FILE__, __LINE__, __func__, cudaGetErrorString(e));
        return 0;
    }
    return !bad;
}

/* ------------------------------------------------------------------------
 * AdamW as torch.optim.AdamW and the CPU backend, with the same constants
 * (computed on the host from the hyperparameters as the user typed them)
 * and the same roundings, fused into one pass over p, g, m, v:
 *   p *= 1 - lr*wd;  m = lerp(m, g, 1 - b1);  v = v*b2 + (1-b2) g^2;
 *   p += -lr/(1 - b1^t) * m / (sqrt(v)/sqrt(1 - b2^t) + eps)            */

__global__ void adamw_kernel(float *p, const float *g, float *m, float *v, size_t n, adamw_consts k)
{
    int small = fabsf(k.w1) < 0.5f;
    float coeff = small ? k.w1 : __fsub_rn(k.w1, 1.0f);
    GRID_STRIDE(i, n)
    {
        float gi = __fmul_rn(g[i], k.grad_scale);
        float pi = k.has_decay ? __fmul_rn(p[i], k.decay) : p[i];
        float mi = fmaf(coeff, __fsub_rn(gi, m[i]), small ? m[i] : gi);
        float vi = fmaf(__fmul_rn(k.c2, gi), gi, __fmul_rn(v[i], k.b2));
        float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), k.bc2_sqrt), k.eps);
        p[i] = __fadd_rn(pi, __fdiv_rn(__fmul_rn(k.neg_step, mi), denom));
        m[i] = mi;
        v[i] = vi;
    }
}

void cuda_adamw(void *vctx, float *p, const float *g, float *m, float *v, size_t n, float lr, float b1, float b2,
                float eps, float wd, int64_t t, float grad_scale)
{
    cuda_ctx *ctx = (cuda_ctx *)vctx;
    if (ctx->error || n == 0) return;
    adamw_consts k = adamw_consts_make(lr, b1, b2, eps, wd, t, grad_scale);
    cuda_weights_wrote(ctx, p, n * sizeof(float)); /* adamw_multi writes the 16-bit copy; this one does not */
    CUDA_LAUNCH(adamw_kernel, cuda_blocks(n, 256), 256, 0, ctx->stream, p, g, m, v, n, k);
    CUDA_LAUNCHED(ctx);
}
