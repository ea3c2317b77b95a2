/* Packed (variable-length) micro-batches on the GPU: backend.h's varlen
 * ops, as the CPU reference (backend/cpu/ops_varlen.c) computes them.
 *
 * Attention is a variable-length kernel, one block per (query row, head,
 * window): the scores of the row against its window's keys only, the row
 * softmax (saved in the packed probs), the dropout multipliers at the
 * padded layout's flat index, and the row of the context. Backward is two
 * kernels: per query row (dP, dS into scratch, dq) and per key row (dk and
 * dv summed over the window's query rows in order): no atomics, so the
 * results are deterministic. Everything is fp32 whatever the GEMM
 * precision; the products are plain loops, not cuBLASLt (the padded path
 * keeps the GEMMs). The offset of a window's probs, NH sum_{b' < b}
 * len_b'^2, is summed by each block from cu_seqlens (B is small).
 *
 * Shared memory per block: (HS + max_len) floats forward and for the query
 * rows of backward, 2 max_len floats for the key rows. */
#include "backend/cuda/cuda_internal.h"

#include <cub/cub.cuh>

#include <float.h>
#include <math.h>
#include <stdio.h>

#define VL_THREADS 128

#define VL_STRIDE(i, n) \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

/* ------------------------------------------------------------------------
 * Embedding with explicit positions. */

__global__ void embedding_pos_kernel(float *out, const int32_t *ids, const int32_t *types, const int32_t *pos,
                                     const float *wte, const float *wpe, const float *wtt, int C, size_t n)
{
    VL_STRIDE(i, n)
    {
        size_t row = i / (size_t)C;
        int c = (int)(i % (size_t)C);
        float we = wte[(size_t)ids[row] * C + c];
        float te = wtt[(size_t)(types ? types[row] : 0) * C + c];
        out[i] = __fadd_rn(__fadd_rn(we, te), wpe[(size_t)pos[row] * C + c]);
    }
}

void cuda_embedding_pos_forward(void *vctx, float *out, const int32_t *ids, const int32_t *types, const int32_t *pos,
                                const float *wte, const float *wpe, const float *wtt, int N, int C)
{
    cuda_ctx *ctx = (cuda_ctx *)vctx;
    size_t n = (size_t)N * C;
    if (ctx->error || n == 0) return;
    embedding_pos_kernel<<<cuda_blocks(n, 256), 256, 0, ctx->stream>>>(out, ids, types, pos, wte, wpe, wtt, C, n);
    CUDA_LAUNCHED(ctx);
}

/* The backward of the word and type tables does not depend on positions:
 * cuda_embedding_backward with B = 1, T = N and no position table. The
 * position table as the word table there: the rows sorted by position
 * (a stable radix sort, so each position's rows stay in row order), then
 * one block per sorted row, the first of each position summing its rows in
 * order, as the CPU does. */
__global__ void vl_iota_kernel(int32_t *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = i;
}

__global__ void pos_grad_sorted_kernel(float *dwpe, const float *dout, const int32_t *sorted_pos, const int32_t *rows,
                                       int N, int C)
{
    int i = blockIdx.x;
    int t = sorted_pos[i];
    if (i > 0 && sorted_pos[i - 1] == t) return;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float g = dwpe[(size_t)t * C + c];
        for (int j = i; j < N && sorted_pos[j] == t; j++) g = __fadd_rn(g, dout[(size_t)rows[j] * C + c]);
        dwpe[(size_t)t * C + c] = g;
    }
}

void cuda_embedding_pos_backward(void *vctx, float *dwte, float *dwpe, float *dwtt, const float *dout,
                                 const int32_t *ids, const int32_t *types, const int32_t *pos, int N, int C)
{
    cuda_ctx *ctx = (cuda_ctx *)vctx;
    if (ctx->error || N <= 0 || C <= 0) return;
    cuda_embedding_backward(vctx, dwte, NULL, dwtt, dout, ids, types, 1, N, C);
    if (!dwpe || ctx->error) return;
    size_t sort_temp = 0;
    CUDA_TRY(ctx, cub::DeviceRadixSort::SortPairs(NULL, sort_temp, (const int32_t *)NULL, (int32_t *)NULL,
                                                  (const int32_t *)NULL, (int32_t *)NULL, N, 0, 32, ctx->stream));
    size_t bound = cuda_ws_sort_temp_bound((size_t)N);
    size_t temp = sort_temp > bound ? sort_temp : bound;
    char *cur = (char *)cuda_ws_get(ctx, cuda_ws_embedding_backward((size_t)N, (size_t)C, temp));
    if (!cur) return;
    int32_t *keys_out = (int32_t *)cuda_ws_take(&cur, (size_t)N * 4);
    int32_t *vals_in = (int32_t *)cuda_ws_take(&cur, (size_t)N * 4);
    int32_t *vals_out = (int32_t *)cuda_ws_take(&cur, (size_t)N * 4);
    (void)cuda_ws_take(&cur, CUDA_WS_MAX_TYPES * 4);
    void *sort_ws = cuda_ws_take(&cur, temp);
    vl_iota_kernel<<<(unsigned)((N + 255) / 256), 256, 0, ctx->stream>>>(vals_in, N);
    CUDA_LAUNCHED(ctx);
    size_t tb = sort_temp;
    CUDA_TRY(ctx, cub::DeviceRadixSort::SortPairs(sort_ws, tb, pos, keys_out, vals_in, vals_out, N, 0, 32, ctx->stream));
    unsigned wt = (unsigned)(C < 1024 ? (C + 31) / 32 * 32 : 1024);
    pos_grad_sorted_kernel<<<(unsigned)N, wt, 0, ctx->stream>>>(dwpe, dout, keys_out, vals_out, N, C);
    CUDA_LAUNCHED(ctx);
}

/* ------------------------------------------------------------------------
 * Dropout at the padded index (b Tp + t) C + c. */

__device__ __forceinline__ int vl_window_of(const int32_t *cu, int B, int row)
{
    int lo = 0, hi = B - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (cu[mid] <= row) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

__global__ void dropout_varlen_kernel(float *out, const float *inp, const int32_t *cu, int B, int Tp, int C, float p,
                                      float scale, philox_stream rng, int accumulate, size_t n)
{
    VL_STRIDE(i, n)
    {
        int row = (int)(i / (size_t)C), c = (int)(i % (size_t)C);
        int b = vl_window_of(cu, B, row);
        uint64_t idx = ((uint64_t)b * (uint64_t)Tp + (uint64_t)(row - cu[b])) * (uint64_t)C + (uint64_t)c;
        float v = __fmul_rn(inp[i], philox_uniform(rng, idx) >= p ? scale : 0.0f);
        out[i] = accumulate ? __fadd_rn(out[i], v) : v;
    }
}

__global__ void vl_add_kernel(float *out, const float *a, const float *b, size_t n)
{
    VL_STRIDE(i, n) out[i] = __fadd_rn(a[i], b[i]);
}

void cuda_dropout_varlen_forward(void *vctx, float *out, const float *inp, const int32_t *cu_seqlens, int B, int N,
                                 int Tp, int C, float p, philox_stream rng)
{
    cuda_ctx *ctx = (cuda_ctx *)vctx;
    if (ctx->error || B <= 0 || N <= 0) return;
    size_t n = (size_t)N * C;
    if (p <= 0.0f) {
        if (out != inp) CUDA_TRY(ctx, cudaMemcpyAsync(out, inp, n * sizeof(float), cudaMemcpyDeviceToDevice, ctx->stream));
        return;
    }
    dropout_varlen_kernel<<<cuda_blocks(n, 256), 256, 0, ctx->stream>>>(out, inp, cu_seqlens, B, Tp, C, p,
                                                                        cuda_dropout_scale(p), rng, 0, n);
    CUDA_LAUNCHED(ctx);
}

void cuda_dropout_varlen_backward(void *vctx, float *dinp, const float *dout, const int32_t *cu_seqlens, int B,
                                  int N, int Tp, int C, float p, philox_stream rng)
{
    cuda_ctx *ctx = (cuda_ctx *)vctx;
    if (ctx->error || B <= 0 || N <= 0 || !dinp) return;
    size_t n = (size_t)N * C;
    if (p <= 0.0f) {
        vl_add_kernel<<<cuda_blocks(n, 256), 256, 0, ctx->stream>>>(dinp, dinp, dout, n);
        CUDA_LAUNCHED(ctx);
        return;
    }
    dropout_varlen_kernel<<<cuda_blocks(n, 256), 256, 0, ctx->stream>>>(dinp, dout, cu_seqlens, B, Tp, C, p,
                                                                        cuda_dropout_scale(p), rng, 1, n);
    CUDA_LAUNCHED(ctx);
}

/* ------------------------------------------------------------------------
 * Attention. */

__device__ float vl_block_max(float v, float *sh)
{
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    int w = threadIdx.x / 32, lane = threadIdx.x % 32;
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    float m = sh[0];
    for (int i = 1; i < VL_THREADS / 32; i++) m = fmaxf(m, sh[i]);
    return m;
}

__device__ float vl_block_sum(float v, float *sh)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    int w = threadIdx.x / 32, lane = threadIdx.x % 32;
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    float s = 0;
    for (int i = 0; i < VL_THREADS / 32; i++) s += sh[i];
    return s;
}

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

__device__ __forceinline__ float vl_dot(const float *a, const float *b, int n)
{
    float s = 0;
    for (int d = 0; d < n; d++) s = fmaf(a[d], b[d], s);
    return s;
}

// grid (max_len, NH, B)
__global__ void att_varlen_fwd_kernel(float *out, float *probs, const float *q, const float *k, const float *v,
                                      const int32_t *cu, int NH, int HS, int Tp, float scaling, float p, float dscale,
                                      philox_stream rng)
{
    extern __shared__ float vl_sh[];
    __shared__ float red[VL_THREADS / 32];
    int i = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
    int r0 = cu[b], T = cu[b + 1] - r0;
    if (i >= T) return;
    int C = NH * HS;
    float *qs = vl_sh, *pd = vl_sh + HS;
    for (int d = threadIdx.x; d < HS; d += VL_THREADS) qs[d] = q[(size_t)(r0 + i) * C + (size_t)h * HS + d];
    __syncthreads();
    float *P = probs + vl_probs_base(cu, b, NH) + (size_t)h * T * T + (size_t)i * T;
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < T; j += VL_THREADS) {
        float s = __fmul_rn(vl_dot(qs, k + (size_t)(r0 + j) * C + (size_t)h * HS, HS), scaling);
        pd[j] = s;
        mx = fmaxf(mx, s);
    }
    mx = vl_block_max(mx, red);
    float sum = 0;
    for (int j = threadIdx.x; j < T; j += VL_THREADS) {
        float e = expf(__fsub_rn(pd[j], mx));
        pd[j] = e;
        sum += e;
    }
    float inv = 1.0f / vl_block_sum(sum, red);
    for (int j = threadIdx.x; j < T; j += VL_THREADS) {
        float pr = __fmul_rn(pd[j], inv);
        P[j] = pr;
        pd[j] = p > 0.0f ? __fmul_rn(pr, vl_mult(rng, b, h, NH, Tp, i, j, p, dscale)) : pr;
    }
    __syncthreads();
    for (int d = threadIdx.x; d < HS; d += VL_THREADS) {
        float acc = 0;
        for (int j = 0; j < T; j++) acc = fmaf(pd[j], v[(size_t)(r0 + j) * C + (size_t)h * HS + d], acc);
        out[(size_t)(r0 + i) * C + (size_t)h * HS + d] = acc;
    }
}

// grid (max_len, NH, B): query row i. dS into scratch, dq +=.
__global__ void att_varlen_bwd_rows_kernel(float *dq, float *scratch, const float *dout, const float *k,
                                           const float *v, const float *probs, const int32_t *cu, int NH, int HS,
                                           int Tp, float scaling, float p, float dscale, philox_stream rng)
{
    extern __shared__ float vl_sh[];
    __shared__ float red[VL_THREADS / 32];
    int i = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
    int r0 = cu[b], T = cu[b + 1] - r0;
    if (i >= T) return;
    int C = NH * HS;
    float *dos = vl_sh, *ds = vl_sh + HS;
    for (int d = threadIdx.x; d < HS; d += VL_THREADS) dos[d] = dout[(size_t)(r0 + i) * C + (size_t)h * HS + d];
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
    dot = vl_block_sum(dot, red);
    for (int j = threadIdx.x; j < T; j += VL_THREADS) {
        float s = __fmul_rn(__fmul_rn(__fsub_rn(ds[j], dot), P[j]), scaling);
        ds[j] = s;
        scratch[at + j] = s;
    }
    __syncthreads();
    if (!dq) return;
    for (int d = threadIdx.x; d < HS; d += VL_THREADS) {
        float acc = 0;
        for (int j = 0; j < T; j++) acc = fmaf(ds[j], k[(size_t)(r0 + j) * C + (size_t)h * HS + d], acc);
        float *o = dq + (size_t)(r0 + i) * C + (size_t)h * HS + d;
        *o = __fadd_rn(*o, acc);
    }
}

// grid (max_len, NH, B): key row j. dk += sum_i dS[i][j] q_i, dv += sum_i P'[i][j] dout_i.
__global__ void att_varlen_bwd_cols_kernel(float *dk, float *dv, const float *scratch, const float *dout,
                                           const float *q, const float *probs, const int32_t *cu, int NH, int HS,
                                           int Tp, float p, float dscale, philox_stream rng)
{
    extern __shared__ float vl_sh[];
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
            ak = fmaf(sc[i], q[row], ak);
            av = fmaf(pd[i], dout[row], av);
        }
        size_t o = (size_t)(r0 + j) * C + (size_t)h * HS + d;
        if (dk) dk[o] = __fadd_rn(dk[o], ak);
        if (dv) dv[o] = __fadd_rn(dv[o], av);
    }
}

static float vl_score_scale(int HS)
{
    return (float)(1.0 / sqrt((double)HS));
}

static int vl_launch_ok(cuda_ctx *ctx, int B, int max_len, int NH, size_t shared)
{
    if (B > 65535 || NH > 65535 || shared > 48 * 1024) {
        char what[160];
        snprintf(what, sizeof what, "%d windows, %d heads, longest %d: beyond the kernel's grid or shared memory", B,
                 NH, max_len);
        cuda_fail_at(ctx, "attention_varlen", __FILE__, __LINE__, __func__, what);
        return 0;
    }
    return 1;
}

void cuda_attention_varlen_forward(void *vctx, float *out, float *probs, const float *q, const float *k,
                                   const float *v, const int32_t *cu_seqlens, int B, int max_len, int NH, int HS,
                                   int Tp, float p, philox_stream rng)
{
    cuda_ctx *ctx = (cuda_ctx *)vctx;
    if (ctx->error || B <= 0 || max_len <= 0 || NH <= 0 || HS <= 0) return;
    size_t shared = (size_t)(HS + max_len) * sizeof(float);
    if (!vl_launch_ok(ctx, B, max_len, NH, shared)) return;
    dim3 grid((unsigned)max_len, (unsigned)NH, (unsigned)B);
    att_varlen_fwd_kernel<<<grid, VL_THREADS, shared, ctx->stream>>>(out, probs, q, k, v, cu_seqlens, NH, HS, Tp,
                                                                     vl_score_scale(HS), p, cuda_dropout_scale(p), rng);
    CUDA_LAUNCHED(ctx);
}

void cuda_attention_varlen_backward(void *vctx, float *dq, float *dk, float *dv, float *scratch, const float *dout,
                                    const float *q, const float *k, const float *v, const float *probs,
                                    const int32_t *cu_seqlens, int B, int max_len, int NH, int HS, int Tp, float p,
                                    philox_stream rng)
{
    cuda_ctx *ctx = (cuda_ctx *)vctx;
    if (ctx->error || B <= 0 || max_len <= 0 || NH <= 0 || HS <= 0) return;
    size_t shared1 = (size_t)(HS + max_len) * sizeof(float), shared2 = (size_t)2 * max_len * sizeof(float);
    if (!vl_launch_ok(ctx, B, max_len, NH, shared1 > shared2 ? shared1 : shared2)) return;
    dim3 grid((unsigned)max_len, (unsigned)NH, (unsigned)B);
    float dscale = cuda_dropout_scale(p);
    att_varlen_bwd_rows_kernel<<<grid, VL_THREADS, shared1, ctx->stream>>>(
        dq, scratch, dout, k, v, probs, cu_seqlens, NH, HS, Tp, vl_score_scale(HS), p, dscale, rng);
    CUDA_LAUNCHED(ctx);
    if (!dk && !dv) return;
    att_varlen_bwd_cols_kernel<<<grid, VL_THREADS, shared2, ctx->stream>>>(dk, dv, scratch, dout, q, probs, cu_seqlens,
                                                                           NH, HS, Tp, p, dscale, rng);
    CUDA_LAUNCHED(ctx);
}

/* ------------------------------------------------------------------------
 * QA loss over each window's own positions: cuda_qa_loss's kernel with row
 * offsets and lengths. */

#define VL_QA_THREADS 256

__device__ __forceinline__ int vl_clamp(int32_t pos, int T)
{
    return pos < 0 ? 0 : pos > T ? T : (int)pos;
}

__global__ void qa_loss_varlen_kernel(float *loss, float *dlogits, const float *logits, const int32_t *row0,
                                      const int32_t *len, const int32_t *start, const int32_t *end, int B, int Tp,
                                      float grad_scale, double *rowloss)
{
    __shared__ int count[2];
    if (threadIdx.x < 2) {
        const int32_t *pos = threadIdx.x ? end : start;
        int c = 0;
        for (int b = 0; b < B; b++) c += vl_clamp(pos[b], Tp) != Tp;
        count[threadIdx.x] = c;
    }
    __syncthreads();
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nwarps = blockDim.x / 32;
    for (int pair = warp; pair < 2 * B; pair += nwarps) {
        int b = pair / 2, side = pair % 2, T = len[b];
        const int32_t *pos = side ? end : start;
        int target = vl_clamp(pos[b], Tp);
        const float *x = logits + (size_t)row0[b] * 2 + side;
        float *d = dlogits ? dlogits + (size_t)row0[b] * 2 + side : NULL;
        if (target == Tp) {
            if (lane == 0) rowloss[pair] = 0.0;
            continue; /* dlogits was zeroed */
        }
        double mx = -INFINITY;
        for (int t = lane; t < T; t += 32) mx = fmax(mx, (double)x[2 * t]);
        for (int o = 16; o > 0; o >>= 1) mx = fmax(mx, __shfl_xor_sync(0xffffffffu, mx, o));
        double se = 0;
        for (int t = lane; t < T; t += 32) se += exp((double)x[2 * t] - mx);
        for (int o = 16; o > 0; o >>= 1) se += __shfl_xor_sync(0xffffffffu, se, o);
        double lse = mx + log(se);
        double g = 0.5 * (double)grad_scale / count[side];
        if (d)
            for (int t = lane; t < T; t += 32) d[2 * t] = (float)((exp((double)x[2 * t] - lse) - (t == target)) * g);
        if (lane == 0) rowloss[pair] = target < T ? lse - (double)x[2 * target] : INFINITY;
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

void cuda_qa_loss_varlen(void *vctx, float *loss, float *dlogits, const float *logits, const int32_t *row0,
                         const int32_t *len, const int32_t *start, const int32_t *end, int B, int N, int Tp,
                         float grad_scale)
{
    cuda_ctx *ctx = (cuda_ctx *)vctx;
    if (ctx->error || B <= 0 || N <= 0) return;
    double *rowloss = (double *)cuda_ws_get(ctx, cuda_ws_qa_loss((size_t)B));
    if (!rowloss) return;
    if (dlogits) CUDA_TRY(ctx, cudaMemsetAsync(dlogits, 0, (size_t)N * 2 * sizeof(float), ctx->stream));
    qa_loss_varlen_kernel<<<1, VL_QA_THREADS, 0, ctx->stream>>>(loss, dlogits, logits, row0, len, start, end, B, Tp,
                                                                grad_scale, rowloss);
    CUDA_LAUNCHED(ctx);
}
