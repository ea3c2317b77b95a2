/* Self-attention of packed windows on the GPU (cuda_attention.cu calls it
 * for windows with cu_seqlens), as the CPU backend (backend/cpu/
 * ops_attention.c) computes them: one block per (query row, head, window):
 * the scores of the row against its window's keys only, the row softmax
 * (saved in the packed probs), the dropout multipliers at the padded
 * layout's flat index, and the row of the context. Backward is two kernels:
 * per query row (dP, dS into scratch, dq) and per key row (dk and dv summed
 * over the window's query rows in order): no atomics, so the results are
 * deterministic. The math is fp32 whatever the GEMM precision; the
 * products are plain loops, not cuBLASLt (windows of many lengths are not
 * one strided batch). q, k, v, out and the gradients are activations of
 * the context's type (cuda_ctx.atype; the kernels are templated on it,
 * loading as fp32 and rounding once per stored element); probs and
 * scratch are fp32 (backend_attention_saved_floats' floats) in every
 * precision. The 16-bit runs of the models in use (HS 32, 64) take the
 * flash kernels instead: these serve head sizes that are not a multiple
 * of 16 or are above 64. The offset of a window's probs, NH sum_{b' < b}
 * len_b'^2, is summed by each block from cu_seqlens (B is small).
 *
 * Shared memory per block: (HS + max_len) floats forward and for the query
 * rows of backward, 2 max_len floats for the key rows. */
#include "backend/cuda/cuda_act.cuh"
#include "backend/cuda/cuda_internal.h"

#include <float.h>
#include <math.h>
#include <stdio.h>

#define VL_THREADS 128

/* The offset of window b's probs: NH sum_{b' < b} len_b'^2. */
__device__ size_t vl_probs_base(const int32_t *cu, int b, int NH)
{
    size_t s = 0;
    for (int j = 0; j < b; j++) {
        size_t l = (size_t)(cu[j + 1] - cu[j]);
        s += l * l;
    }
    return s * (size_t)NH;
}

/* The dropout multiplier of probs element (b, h, i, j). */
__device__ __forceinline__ float vl_mult(philox_stream rng, int b, int h, int NH, int Tp, int i, int j, float p,
                                         float dscale)
{
    uint64_t idx = (((uint64_t)b * (uint64_t)NH + (uint64_t)h) * (uint64_t)Tp + (uint64_t)i) * (uint64_t)Tp +
                   (uint64_t)j;
    return philox_uniform(rng, idx) >= p ? dscale : 0.0f;
}

template <typename TA> __device__ __forceinline__ float vl_dot(const float *a, const TA *b, int n)
{
    float s = 0;
    for (int d = 0; d < n; d++) s = fmaf(a[d], act_f(b[d]), s);
    return s;
}

/* sum_j w[j] m[r0 + j][col] over the T rows of a window, j in order. */
template <typename TA>
__device__ __forceinline__ float vl_col_dot(const float *w, const TA *m, int r0, int T, int C, size_t col)
{
    float acc = 0;
    for (int j = 0; j < T; j++) acc = fmaf(w[j], act_f(m[(size_t)(r0 + j) * C + col]), acc);
    return acc;
}

/* *o += x, rounded once to the activation type. */
template <typename TA> __device__ __forceinline__ void vl_add(TA *o, float x)
{
    *o = act_of<TA>(__fadd_rn(act_f(*o), x));
}

// grid (max_len, NH, B)
template <typename TA>
__global__ void att_varlen_fwd_kernel(TA *out, float *probs, const TA *q, const TA *k, const TA *v,
                                      const int32_t *cu, int NH, int HS, int Tp, float scaling, float p, float dscale,
                                      philox_stream rng)
{
    CUDA_DYN_SHARED(float, vl_sh);
    __shared__ float red[VL_THREADS / 32];
    int i = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
    int r0 = cu[b], T = cu[b + 1] - r0;
    if (i >= T) return;
    int C = NH * HS;
    float *qs = vl_sh, *pd = vl_sh + HS;
    for (int d = threadIdx.x; d < HS; d += VL_THREADS) qs[d] = act_f(q[(size_t)(r0 + i) * C + (size_t)h * HS + d]);
    __syncthreads();
    float *P = probs + vl_probs_base(cu, b, NH) + (size_t)h * T * T + (size_t)i * T;
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < T; j += VL_THREADS) {
        float s = __fmul_rn(vl_dot(qs, k + (size_t)(r0 + j) * C + (size_t)h * HS, HS), scaling);
        pd[j] = s;
        mx = fmaxf(mx, s);
    }
    float inv = cuda_block_exp_inv<VL_THREADS>(pd, T, mx, red);
    for (int j = threadIdx.x; j < T; j += VL_THREADS) {
        float pr = __fmul_rn(pd[j], inv);
        P[j] = pr;
        pd[j] = p > 0.0f ? __fmul_rn(pr, vl_mult(rng, b, h, NH, Tp, i, j, p, dscale)) : pr;
    }
    __syncthreads();
    for (int d = threadIdx.x; d < HS; d += VL_THREADS)
        out[(size_t)(r0 + i) * C + (size_t)h * HS + d] = act_of<TA>(vl_col_dot(pd, v, r0, T, C, (size_t)h * HS + d));
}

// grid (max_len, NH, B): query row i. dS into scratch, dq +=.
template <typename TA>
__global__ void att_varlen_bwd_rows_kernel(TA *dq, float *scratch, const TA *dout, const TA *k, const TA *v,
                                           const float *probs, const int32_t *cu, int NH, int HS,
                                           int Tp, float scaling, float p, float dscale, philox_stream rng)
{
    CUDA_DYN_SHARED(float, vl_sh);
    int i = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
    int r0 = cu[b], T = cu[b + 1] - r0, C = NH * HS;
    if (i >= T) return;
    __shared__ float red[VL_THREADS / 32];
    float *dos = vl_sh, *ds = vl_sh + HS;
    for (int d = threadIdx.x; d < HS; d += VL_THREADS) dos[d] = act_f(dout[(size_t)(r0 + i) * C + (size_t)h * HS + d]);
    __syncthreads();
    size_t at = vl_probs_base(cu, b, NH) + (size_t)h * T * T + (size_t)i * T;
    const float *P = probs + at;
    float dot = 0;
    for (int j = threadIdx.x; j < T; j += VL_THREADS) {
        float g = vl_dot(dos, v + (size_t)(r0 + j) * C + (size_t)h * HS, HS);
        if (p > 0.0f) g = __fmul_rn(g, vl_mult(rng, b, h, NH, Tp, i, j, p, dscale));
        ds[j] = g;
        dot += g * P[j];
    }
    dot = cuda_block_sum<VL_THREADS>(dot, red);
    for (int j = threadIdx.x; j < T; j += VL_THREADS) {
        float s = __fmul_rn(__fmul_rn(__fsub_rn(ds[j], dot), P[j]), scaling);
        ds[j] = s;
        scratch[at + j] = s;
    }
    __syncthreads();
    if (!dq) return;
    for (int d = threadIdx.x; d < HS; d += VL_THREADS)
        vl_add(dq + (size_t)(r0 + i) * C + (size_t)h * HS + d, vl_col_dot(ds, k, r0, T, C, (size_t)h * HS + d));
}

// grid (max_len, NH, B): key row j. dk += sum_i dS[i][j] q_i, dv += sum_i P'[i][j] dout_i.
template <typename TA>
__global__ void att_varlen_bwd_cols_kernel(TA *dk, TA *dv, const float *scratch, const TA *dout, const TA *q,
                                           const float *probs, const int32_t *cu, int NH, int HS,
                                           int Tp, float p, float dscale, philox_stream rng)
{
    CUDA_DYN_SHARED(float, vl_sh);
    int j = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
    int r0 = cu[b], T = cu[b + 1] - r0;
    if (j >= T) return;
    int C = NH * HS;
    float *sc = vl_sh, *pd = vl_sh + T;
    size_t base = vl_probs_base(cu, b, NH) + (size_t)h * T * T;
    for (int i = threadIdx.x; i < T; i += VL_THREADS) {
        size_t at = base + (size_t)i * T + j;
        sc[i] = scratch[at];
        float pr = probs[at];
        pd[i] = p > 0.0f ? __fmul_rn(pr, vl_mult(rng, b, h, NH, Tp, i, j, p, dscale)) : pr;
    }
    __syncthreads();
    for (int d = threadIdx.x; d < HS; d += VL_THREADS) {
        float ak = 0, av = 0;
        for (int i = 0; i < T; i++) {
            size_t row = (size_t)(r0 + i) * C + (size_t)h * HS + d;
            ak = fmaf(sc[i], act_f(q[row]), ak);
            av = fmaf(pd[i], act_f(dout[row]), av);
        }
        size_t o = (size_t)(r0 + j) * C + (size_t)h * HS + d;
        if (dk) vl_add(dk + o, ak);
        if (dv) vl_add(dv + o, av);
    }
}

static int vl_launch_ok(cuda_ctx *ctx, int B, int max_len, int NH, size_t shared)
{
    if (B > 65535 || NH > 65535 || shared > 48 * 1024) {
        char what[160];
        snprintf(what, sizeof what, "%d windows, %d heads, longest %d: beyond the kernel's grid or shared memory", B,
                 NH, max_len);
        cuda_fail_at(ctx, "attention (packed windows)", __FILE__, __LINE__, __func__, what);
        return 0;
    }
    return 1;
}

template <typename TA>
static void vl_forward(cuda_ctx *ctx, void *out, float *probs, const void *q, const void *k, const void *v,
                       const backend_windows *w, int NH, int HS, float p, philox_stream rng)
{
    int B = w->B, max_len = w->max_len;
    size_t shared = (size_t)(HS + max_len) * sizeof(float);
    if (!vl_launch_ok(ctx, B, max_len, NH, shared)) return;
    dim3 grid((unsigned)max_len, (unsigned)NH, (unsigned)B);
    CUDA_LAUNCH(att_varlen_fwd_kernel<TA>, grid, VL_THREADS, shared, ctx->stream, (TA *)out, probs, (const TA *)q,
        (const TA *)k, (const TA *)v, w->cu_seqlens, NH, HS, w->T, backend_score_scale(HS), p, cuda_dropout_scale(p),
        rng);
    CUDA_LAUNCHED(ctx);
}

template <typename TA>
static void vl_backward(cuda_ctx *ctx, void *dq, void *dk, void *dv, float *scratch, const void *dout, const void *q,
                        const void *k, const void *v, const float *probs, const backend_windows *w, int NH, int HS,
                        float p, philox_stream rng)
{
    int B = w->B, max_len = w->max_len;
    size_t shared1 = (size_t)(HS + max_len) * sizeof(float), shared2 = (size_t)2 * max_len * sizeof(float);
    if (!vl_launch_ok(ctx, B, max_len, NH, shared1 > shared2 ? shared1 : shared2)) return;
    dim3 grid((unsigned)max_len, (unsigned)NH, (unsigned)B);
    float dscale = cuda_dropout_scale(p);
    CUDA_LAUNCH(att_varlen_bwd_rows_kernel<TA>, grid, VL_THREADS, shared1, ctx->stream, (TA *)dq, scratch,
        (const TA *)dout, (const TA *)k, (const TA *)v, probs, w->cu_seqlens, NH, HS, w->T, backend_score_scale(HS), p,
        dscale, rng);
    CUDA_LAUNCHED(ctx);
    if (!dk && !dv) return;
    CUDA_LAUNCH(att_varlen_bwd_cols_kernel<TA>, grid, VL_THREADS, shared2, ctx->stream, (TA *)dk, (TA *)dv, scratch,
        (const TA *)dout, (const TA *)q, probs, w->cu_seqlens, NH, HS, w->T, p, dscale, rng);
    CUDA_LAUNCHED(ctx);
}

void cuda_attention_packed_forward(cuda_ctx *ctx, void *out, float *probs, const void *q, const void *k,
                                   const void *v, const backend_windows *w, int NH, int HS, float p,
                                   philox_stream rng)
{
    if (ctx->atype == GEMM_F16) vl_forward<__half>(ctx, out, probs, q, k, v, w, NH, HS, p, rng);
    else if (ctx->atype == GEMM_BF16) vl_forward<__nv_bfloat16>(ctx, out, probs, q, k, v, w, NH, HS, p, rng);
    else vl_forward<float>(ctx, out, probs, q, k, v, w, NH, HS, p, rng);
}

void cuda_attention_packed_backward(cuda_ctx *ctx, void *dq, void *dk, void *dv, float *scratch, const void *dout,
                                    const void *q, const void *k, const void *v, const float *probs,
                                    const backend_windows *w, int NH, int HS, float p, philox_stream rng)
{
    if (ctx->atype == GEMM_F16)
        vl_backward<__half>(ctx, dq, dk, dv, scratch, dout, q, k, v, probs, w, NH, HS, p, rng);
    else if (ctx->atype == GEMM_BF16)
        vl_backward<__nv_bfloat16>(ctx, dq, dk, dv, scratch, dout, q, k, v, probs, w, NH, HS, p, rng);
    else vl_backward<float>(ctx, dq, dk, dv, scratch, dout, q, k, v, probs, w, NH, HS, p, rng);
}
