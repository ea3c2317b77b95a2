/* Self-attention on the GPU, as transformers' eager attention and the CPU
 * backend compute it:
 *
 *   S  = (q k^T) * HS^-0.5 + (mask == 0 ? -FLT_MAX : 0)   saved softmax in probs
 *   P' = softmax(S) * dropout multipliers (padded flat index into probs)
 *   out = P' v
 *
 * One op for both kinds of windows (backend_windows), two ways to run it.
 * Padded windows are B*NH products of one size: here, batched GEMMs over
 * (batch, head) plus softmax kernels, in the GEMM precision (Tensor Cores
 * for tf32/fp16/bf16). Packed windows are products of as many sizes as
 * there are lengths, which one strided-batched GEMM cannot take: the fp32
 * kernels of cuda_varlen.cu, which loop over each window's own keys.
 *
 * Padded: q, k, v arrive as (B,T,C) with heads interleaved; they are copied
 * once per call into per-head (B,NH,T,HS) arrays of the GEMM input type, so
 * each product is one strided-batched cuBLASLt call over B*NH. The
 * workspace (cuda_ws_attention) holds those copies, P' (or the score
 * gradient) in the GEMM input type, and one fp32 (B,NH,T,HS) GEMM output.
 *
 * fp16 and bf16 (cuda_ws_attention_lse: HS a multiple of 16 up to 64) run
 * neither: the flash kernels of cuda_flash.cu, padded and packed alike, on
 * Tensor Cores in 16 bits, with no T x T matrix in memory. probs then holds
 * what their backward needs (backend_attention_saved_floats): lse [NH,N]
 * fp32, then out [N,C] in 16 bits; scratch is not used.
 *
 * Activations (q, k, v, out, dout, dq, dk, dv) are of the context's type
 * (cuda_ctx.atype). 16-bit (atype = gtype, fp16 or bf16): the flash
 * kernels read q, k, v and dout where they are ([N,C], head h at column
 * h*HS), write out and its saved copy in one store, and add (+=, as every
 * backward op) dq, dk and dv in their last store, rounding the fp32 sum
 * once; their only working memory is backward's row terms dvec [NH,N] fp32
 * (cuda_ws_attention_flash16). Off flash (HS not a multiple of 16, or
 * above 64) the padded path's permutes read and write the 16-bit
 * activations, and the packed kernels are templated on the type; probs and
 * scratch stay fp32 there. fp32 activations in fp16/bf16 (before issue
 * 47's flip; a test may still set atype so): q, k, v (and dout) are converted to 16 bits
 * once per call into the workspace (cuda_ws_attention_flash), out back to
 * fp32, and backward's 16-bit gradients, which flash writes (=), are added
 * (+=) to the fp32 ones in one kernel. */
#include "backend/cuda/cuda_act.cuh"
#include "backend/cuda/cuda_flash.h"
#include "backend/cuda/cuda_internal.h"

#include <float.h>
#include <math.h>

#include <type_traits>

#define ATT_THREADS 128

// dst (B,NH,T,HS) = src (B,T,NH*HS) (an activation), converted
template <typename TT, typename TA>
__global__ void permute_in_kernel(TT *dst, const TA *src, int T, int NH, int HS, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        size_t d = i % (size_t)HS, r = i / (size_t)HS;
        size_t t = r % (size_t)T, bh = r / (size_t)T;
        size_t h = bh % (size_t)NH, b = bh / (size_t)NH;
        dst[i] = act_of<TT>(act_f(src[((b * T + t) * NH + h) * HS + d]));
    }
}

// dst (B,T,NH*HS) (an activation) (+)= src (B,NH,T,HS)
template <typename TA>
__global__ void permute_out_kernel(TA *dst, const float *src, int T, int NH, int HS, size_t n, int accumulate)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        size_t d = i % (size_t)HS, r = i / (size_t)HS;
        size_t h = r % (size_t)NH, bt = r / (size_t)NH;
        size_t t = bt % (size_t)T, b = bt / (size_t)T;
        float v = src[((b * NH + h) * T + t) * HS + d];
        dst[i] = act_of<TA>(accumulate ? __fadd_rn(act_f(dst[i]), v) : v);
    }
}

/* One block per row of probs (B*NH*T rows of T): add the mask, softmax in
 * place. */
__global__ void softmax_forward_kernel(float *probs, const int32_t *mask, int T, int NH)
{
    __shared__ float sh[ATT_THREADS / 32];
    size_t row = blockIdx.x;
    float *x = probs + row * (size_t)T;
    const int32_t *mb = mask ? mask + (row / (size_t)T / (size_t)NH) * (size_t)T : NULL;
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < T; j += ATT_THREADS) {
        float v = x[j];
        if (mb && mb[j] == 0) v = __fadd_rn(v, -FLT_MAX);
        x[j] = v;
        mx = fmaxf(mx, v);
    }
    float inv = cuda_block_exp_inv<ATT_THREADS>(x, T, mx, sh);
    for (int j = threadIdx.x; j < T; j += ATT_THREADS) x[j] = __fmul_rn(x[j], inv);
}

/* dst = probs * dropout multipliers (p > 0) or probs, converted; one
 * Philox block per 4 elements of the flat index, as the CPU backend. */
template <typename TT>
__global__ void drop_convert_kernel(TT *dst, const float *probs, size_t n, float p, float scale, philox_stream rng)
{
    size_t nblk = (n + 3) / 4;
    for (size_t g = blockIdx.x * (size_t)blockDim.x + threadIdx.x; g < nblk; g += (size_t)gridDim.x * blockDim.x) {
        float u[4] = {1.0f, 1.0f, 1.0f, 1.0f};
        if (p > 0.0f) cuda_philox_uniform4(rng, g, u);
        for (int l = 0; l < 4; l++) {
            size_t i = g * 4 + (size_t)l;
            if (i >= n) break;
            float v = p > 0.0f ? __fmul_rn(probs[i], u[l] >= p ? scale : 0.0f) : probs[i];
            dst[i] = act_of<TT>(v);
        }
    }
}

/* Softmax backward, one block per row: dp holds dP' = dout v^T; with
 * dropout dP = dP' * multiplier; dot = sum(dP * P); dS = (dP - dot) * P *
 * scaling, written to ds (the GEMM input type; may be dp itself for fp32). */
template <typename TT>
__global__ void softmax_backward_kernel(TT *ds, float *dp, const float *probs, int T, float p, float dscale,
                                        float scaling, philox_stream rng)
{
    __shared__ float sh[ATT_THREADS / 32];
    size_t row = blockIdx.x;
    size_t base = row * (size_t)T;
    float *g = dp + base;
    const float *P = probs + base;
    float dot = 0;
    for (int j = threadIdx.x; j < T; j += ATT_THREADS) {
        float d = g[j];
        if (p > 0.0f) {
            d = __fmul_rn(d, philox_uniform(rng, base + (size_t)j) >= p ? dscale : 0.0f);
            g[j] = d;
        }
        dot += d * P[j];
    }
    dot = cuda_block_sum<ATT_THREADS>(dot, sh);
    TT *o = ds + base;
    for (int j = threadIdx.x; j < T; j += ATT_THREADS)
        o[j] = act_of<TT>(__fmul_rn(__fmul_rn(__fsub_rn(g[j], dot), P[j]), scaling));
}

typedef struct {
    void *qh, *kh, *vh, *dh; /* (B,NH,T,HS) in the GEMM input type */
    void *ph;                /* (B,NH,T,T) in the GEMM input type */
    float *oh;               /* (B,NH,T,HS) fp32 */
} att_ws;

static int att_workspace(cuda_ctx *ctx, att_ws *w, int B, int T, int NH, int HS)
{
    int low = ctx->gtype != GEMM_F32;
    char *cur = (char *)cuda_ws_get(ctx, cuda_ws_attention(low, (size_t)B, (size_t)T, (size_t)NH, (size_t)HS));
    if (!cur) return 1;
    size_t e = cuda_ws_elem(low), nc = (size_t)B * T * NH * HS, tt = (size_t)B * NH * T * T;
    w->qh = cuda_ws_take(&cur, nc * e);
    w->kh = cuda_ws_take(&cur, nc * e);
    w->vh = cuda_ws_take(&cur, nc * e);
    w->dh = cuda_ws_take(&cur, nc * e);
    w->ph = cuda_ws_take(&cur, tt * e);
    w->oh = (float *)cuda_ws_take(&cur, nc * 4);
    return 0;
}

/* dst (B,NH,T,HS) in the GEMM input type = the activation src (B,T,C). A
 * 16-bit activation is of the GEMM input type (cuda_ctx.atype). */
template <typename TA> static void permute_in_as(cuda_ctx *ctx, void *dst, const TA *src, int B, int T, int NH, int HS)
{
    size_t n = (size_t)B * T * NH * HS;
    unsigned g = cuda_blocks(n, 256);
    if constexpr (!std::is_same<TA, float>::value)
        CUDA_LAUNCH((permute_in_kernel<TA, TA>), g, 256, 0, ctx->stream, (TA *)dst, src, T, NH, HS, n);
    else if (ctx->gtype == GEMM_F16)
        CUDA_LAUNCH((permute_in_kernel<__half, float>), g, 256, 0, ctx->stream, (__half *)dst, src, T, NH, HS, n);
    else if (ctx->gtype == GEMM_BF16)
        CUDA_LAUNCH((permute_in_kernel<__nv_bfloat16, float>), g, 256, 0, ctx->stream, (__nv_bfloat16 *)dst, src, T,
            NH, HS, n);
    else CUDA_LAUNCH((permute_in_kernel<float, float>), g, 256, 0, ctx->stream, (float *)dst, src, T, NH, HS, n);
    CUDA_LAUNCHED(ctx);
}

static void permute_in(cuda_ctx *ctx, void *dst, const void *src, int B, int T, int NH, int HS)
{
    if (ctx->atype == GEMM_F16) permute_in_as(ctx, dst, (const __half *)src, B, T, NH, HS);
    else if (ctx->atype == GEMM_BF16) permute_in_as(ctx, dst, (const __nv_bfloat16 *)src, B, T, NH, HS);
    else permute_in_as(ctx, dst, (const float *)src, B, T, NH, HS);
}

// the activation dst (B,T,C) (+)= src (B,NH,T,HS) fp32
static void permute_out(cuda_ctx *ctx, void *dst, const float *src, int B, int T, int NH, int HS, int acc)
{
    size_t n = (size_t)B * T * NH * HS;
    unsigned g = cuda_blocks(n, 256);
    if (ctx->atype == GEMM_F16)
        CUDA_LAUNCH(permute_out_kernel<__half>, g, 256, 0, ctx->stream, (__half *)dst, src, T, NH, HS, n, acc);
    else if (ctx->atype == GEMM_BF16)
        CUDA_LAUNCH(permute_out_kernel<__nv_bfloat16>, g, 256, 0, ctx->stream, (__nv_bfloat16 *)dst, src, T, NH, HS,
            n, acc);
    else CUDA_LAUNCH(permute_out_kernel<float>, g, 256, 0, ctx->stream, (float *)dst, src, T, NH, HS, n, acc);
    CUDA_LAUNCHED(ctx);
}

/* P' (dropped-out probabilities) in the GEMM input type; returns the
 * pointer the next GEMM reads (probs itself for fp32 without dropout). */
static const void *dropped_probs(cuda_ctx *ctx, void *ph, const float *probs, size_t n, float p, philox_stream rng)
{
    if (ctx->gtype == GEMM_F32 && p <= 0.0f) return probs;
    unsigned g = cuda_blocks((n + 3) / 4, 256);
    float sc = cuda_dropout_scale(p);
    if (ctx->gtype == GEMM_F16)
        CUDA_LAUNCH(drop_convert_kernel<__half>, g, 256, 0, ctx->stream, (__half *)ph, probs, n, p, sc, rng);
    else if (ctx->gtype == GEMM_BF16)
        CUDA_LAUNCH(drop_convert_kernel<__nv_bfloat16>, g, 256, 0, ctx->stream,
            (__nv_bfloat16 *)ph, probs, n, p, sc, rng);
    else CUDA_LAUNCH(drop_convert_kernel<float>, g, 256, 0, ctx->stream, (float *)ph, probs, n, p, sc, rng);
    if (cudaPeekAtLastError() != cudaSuccess) {
        cuda_fail_at(ctx, "drop_convert_kernel", __FILE__, __LINE__, __func__, cudaGetErrorString(cudaGetLastError()));
        return NULL;
    }
    return ph;
}

// out (B,T,C); probs (B,NH,T,T) fp32; q, k, v (B,T,C); mask (B,T) or NULL
static void attention_padded_forward(cuda_ctx *ctx, void *out, float *probs, const void *q, const void *k,
                                     const void *v, const int32_t *mask, int B, int T, int NH, int HS, float p,
                                     philox_stream rng)
{
    att_ws w;
    if (att_workspace(ctx, &w, B, T, NH, HS)) return;
    int BH = B * NH;
    long long sq = (long long)T * HS, st = (long long)T * T;
    permute_in(ctx, w.qh, q, B, T, NH, HS);
    permute_in(ctx, w.kh, k, B, T, NH, HS);
    permute_in(ctx, w.vh, v, B, T, NH, HS);
    // S^T (T_k x T_q) = k (stored HS x T_k, transposed) * q^T (HS x T_q), scaled
    if (cuda_gemm(ctx, 1, 0, T, T, HS, w.kh, HS, sq, w.qh, HS, sq, probs, T, st, BH, backend_score_scale(HS), 0.0f,
                  ctx->gtype))
        return;
    CUDA_LAUNCH(softmax_forward_kernel, (unsigned)((size_t)BH * T), ATT_THREADS, 0, ctx->stream, probs, mask, T, NH);
    CUDA_LAUNCHED(ctx);
    const void *P = dropped_probs(ctx, w.ph, probs, (size_t)BH * T * T, p, rng);
    if (!P) return;
    // O^T (HS x T_q) = v^T (HS x T_k) * P'^T (stored T_k x T_q)
    if (cuda_gemm(ctx, 0, 0, HS, T, T, w.vh, HS, sq, P, T, st, w.oh, HS, sq, BH, 1.0f, 0.0f, ctx->gtype)) return;
    permute_out(ctx, out, w.oh, B, T, NH, HS, 0);
}

/* Masked scores pass their gradient through unchanged (P is 0 there): the
 * mask is not needed. */
// dq, dk, dv (B,T,C) +=; scratch (B,NH,T,T) fp32; dout, q, k, v (B,T,C); probs (B,NH,T,T) fp32
static void attention_padded_backward(cuda_ctx *ctx, void *dq, void *dk, void *dv, float *scratch, const void *dout,
                                      const void *q, const void *k, const void *v, const float *probs, int B, int T, int NH, int HS, float p, philox_stream rng)
{
    att_ws w;
    if (att_workspace(ctx, &w, B, T, NH, HS)) return;
    int BH = B * NH;
    long long sq = (long long)T * HS, st = (long long)T * T;
    size_t ntt = (size_t)BH * T * T;
    permute_in(ctx, w.dh, dout, B, T, NH, HS);
    permute_in(ctx, w.qh, q, B, T, NH, HS);
    permute_in(ctx, w.kh, k, B, T, NH, HS);
    permute_in(ctx, w.vh, v, B, T, NH, HS);
    // dP'^T (T_k x T_q) = v (stored HS x T_k, transposed) * dout^T (HS x T_q)
    if (cuda_gemm(ctx, 1, 0, T, T, HS, w.vh, HS, sq, w.dh, HS, sq, scratch, T, st, BH, 1.0f, 0.0f, ctx->gtype))
        return;
    if (dv) {
        const void *P = dropped_probs(ctx, w.ph, probs, ntt, p, rng);
        if (!P) return;
        // dV^T (HS x T_k) = dout^T (HS x T_q) * P' (stored T_k x T_q, transposed)
        if (cuda_gemm(ctx, 0, 1, HS, T, T, w.dh, HS, sq, P, T, st, w.oh, HS, sq, BH, 1.0f, 0.0f, ctx->gtype)) return;
        permute_out(ctx, dv, w.oh, B, T, NH, HS, 1);
    }
    if (!dq && !dk) return;
    const void *dS;
    float sc = cuda_dropout_scale(p), scaling = backend_score_scale(HS);
    unsigned rows = (unsigned)((size_t)BH * T);
    if (ctx->gtype == GEMM_F16) {
        CUDA_LAUNCH(softmax_backward_kernel<__half>, rows, ATT_THREADS, 0, ctx->stream,
            (__half *)w.ph, scratch, probs, T, p, sc, scaling, rng);
        dS = w.ph;
    } else if (ctx->gtype == GEMM_BF16) {
        CUDA_LAUNCH(softmax_backward_kernel<__nv_bfloat16>, rows, ATT_THREADS, 0, ctx->stream,
            (__nv_bfloat16 *)w.ph, scratch, probs, T, p, sc, scaling, rng);
        dS = w.ph;
    } else {
        CUDA_LAUNCH(softmax_backward_kernel<float>, rows, ATT_THREADS, 0, ctx->stream,
            scratch, scratch, probs, T, p, sc, scaling, rng);
        dS = scratch;
    }
    CUDA_LAUNCHED(ctx);
    if (dq) {
        // dQ^T (HS x T_q) = k^T (HS x T_k) * dS^T (stored T_k x T_q)
        if (cuda_gemm(ctx, 0, 0, HS, T, T, w.kh, HS, sq, dS, T, st, w.oh, HS, sq, BH, 1.0f, 0.0f, ctx->gtype)) return;
        permute_out(ctx, dq, w.oh, B, T, NH, HS, 1);
    }
    if (dk) {
        // dK^T (HS x T_k) = q^T (HS x T_q) * dS (stored T_k x T_q, transposed)
        if (cuda_gemm(ctx, 0, 1, HS, T, T, w.qh, HS, sq, dS, T, st, w.oh, HS, sq, BH, 1.0f, 0.0f, ctx->gtype)) return;
        permute_out(ctx, dk, w.oh, B, T, NH, HS, 1);
    }
}

/* ---- 16 bits: the flash kernels ---- */

template <typename TT> static cudaDataType_t att_flash_type();
template <> cudaDataType_t att_flash_type<__half>() { return CUDA_R_16F; }
template <> cudaDataType_t att_flash_type<__nv_bfloat16>() { return CUDA_R_16BF; }

// d_i (n) = s_i converted, for the s_i not NULL: up to four tensors in one pass
template <typename TT>
__global__ void att_to16_kernel(TT *d0, TT *d1, TT *d2, TT *d3, const float *s0, const float *s1, const float *s2,
                                const float *s3, size_t n)
{
    GRID_STRIDE(i, n) {
        if (s0) d0[i] = act_of<TT>(s0[i]);
        if (s1) d1[i] = act_of<TT>(s1[i]);
        if (s2) d2[i] = act_of<TT>(s2[i]);
        if (s3) d3[i] = act_of<TT>(s3[i]);
    }
}

// d (n) = s converted to fp32
template <typename TT> __global__ void att_from16_kernel(float *d, const TT *s, size_t n)
{
    GRID_STRIDE(i, n) d[i] = act_f(s[i]);
}

// d_i (n) += s_i, for the d_i not NULL: the three gradients in one pass
template <typename TT>
__global__ void att_add16_kernel(float *d0, float *d1, float *d2, const TT *s0, const TT *s1, const TT *s2, size_t n)
{
    GRID_STRIDE(i, n) {
        if (d0) d0[i] = __fadd_rn(d0[i], act_f(s0[i]));
        if (d1) d1[i] = __fadd_rn(d1[i], act_f(s1[i]));
        if (d2) d2[i] = __fadd_rn(d2[i], act_f(s2[i]));
    }
}

/* The workspace of the 16-bit path with fp32 activations: q, k, v, dout,
 * dq, dk, dv in 16 bits [N,C], dvec [NH,N] fp32 (cuda_ws_attention_flash). */
typedef struct {
    void *q, *k, *v, *dout, *dq, *dk, *dv;
    float *dvec;
} flash_ws;

static int flash_workspace(cuda_ctx *ctx, flash_ws *f, const backend_windows *w, int NH, int HS)
{
    size_t N = (size_t)w->N, nc = N * (size_t)NH * HS;
    char *cur = (char *)cuda_ws_get(ctx, cuda_ws_attention_flash(N, (size_t)NH, (size_t)HS));
    if (!cur) return 1;
    f->q = cuda_ws_take(&cur, nc * 2);
    f->k = cuda_ws_take(&cur, nc * 2);
    f->v = cuda_ws_take(&cur, nc * 2);
    f->dout = cuda_ws_take(&cur, nc * 2);
    f->dq = cuda_ws_take(&cur, nc * 2);
    f->dk = cuda_ws_take(&cur, nc * 2);
    f->dv = cuda_ws_take(&cur, nc * 2);
    f->dvec = (float *)cuda_ws_take(&cur, N * (size_t)NH * 4);
    return 0;
}

/* The saved out [N,C] in 16 bits, after lse in saved
 * (backend_attention_saved_floats); NULL (and the context failed) where
 * saved is NULL. */
static void *flash_saved_out(cuda_ctx *ctx, const float *saved, const backend_windows *w, int NH)
{
    if (saved) return (void *)(saved + backend_attention_lse_part((size_t)w->N, NH));
    cuda_fail_at(ctx, "attention", __FILE__, __LINE__, __func__, "probs NULL (its backward's lse)");
    return NULL;
}

// out (N,C) fp32; saved: lse (NH,N), out (N,C) 16-bit; q, k, v (N,C) fp32
template <typename TT>
static void flash_forward(cuda_ctx *ctx, void *out, float *saved, const void *q, const void *k, const void *v,
                          const backend_windows *w, int NH, int HS, float p, philox_stream rng)
{
    flash_ws f;
    TT *oh = (TT *)flash_saved_out(ctx, saved, w, NH);
    if (!oh || flash_workspace(ctx, &f, w, NH, HS)) return;
    size_t nc = (size_t)w->N * NH * HS;
    unsigned g = cuda_blocks(nc, 256);
    CUDA_LAUNCH(att_to16_kernel<TT>, g, 256, 0, ctx->stream, (TT *)f.q, (TT *)f.k, (TT *)f.v, (TT *)NULL,
        (const float *)q, (const float *)k, (const float *)v, (const float *)NULL, nc);
    CUDA_LAUNCHED(ctx);
    CUDA_TRY(ctx, flash_attention_forward(ctx->stream, att_flash_type<TT>(), oh, NULL, saved, f.q, f.k, f.v, w, NH,
                                          HS, NH * HS, p, rng));
    CUDA_LAUNCH(att_from16_kernel<TT>, g, 256, 0, ctx->stream, (float *)out, (const TT *)oh, nc);
    CUDA_LAUNCHED(ctx);
}

// dq, dk, dv (N,C) fp32 +=; dout, q, k, v (N,C) fp32; saved as flash_forward's
template <typename TT>
static void flash_backward(cuda_ctx *ctx, void *dq, void *dk, void *dv, const void *dout, const void *q,
                           const void *k, const void *v, const float *saved, const backend_windows *w, int NH, int HS,
                           float p, philox_stream rng)
{
    flash_ws f;
    const void *oh = flash_saved_out(ctx, saved, w, NH);
    if (!oh || flash_workspace(ctx, &f, w, NH, HS)) return;
    size_t nc = (size_t)w->N * NH * HS;
    unsigned g = cuda_blocks(nc, 256);
    CUDA_LAUNCH(att_to16_kernel<TT>, g, 256, 0, ctx->stream, (TT *)f.q, (TT *)f.k, (TT *)f.v, (TT *)f.dout,
        (const float *)q, (const float *)k, (const float *)v, (const float *)dout, nc);
    CUDA_LAUNCHED(ctx);
    CUDA_TRY(ctx, flash_attention_backward(ctx->stream, att_flash_type<TT>(), dq ? f.dq : NULL, dk ? f.dk : NULL,
                                           dv ? f.dv : NULL, f.dvec, f.dout, oh, f.q, f.k, f.v, saved, w, NH, HS,
                                           NH * HS, p, rng, 0));
    CUDA_LAUNCH(att_add16_kernel<TT>, g, 256, 0, ctx->stream, (float *)dq, (float *)dk, (float *)dv,
        (const TT *)f.dq, (const TT *)f.dk, (const TT *)f.dv, nc);
    CUDA_LAUNCHED(ctx);
}

/* 16-bit activations: the flash kernels on them, in place. Forward writes
 * out and the saved copy in one store. */
static void flash16_forward(cuda_ctx *ctx, void *out, float *saved, const void *q, const void *k, const void *v,
                            const backend_windows *w, int NH, int HS, float p, philox_stream rng)
{
    void *oh = flash_saved_out(ctx, saved, w, NH);
    if (!oh) return;
    cudaDataType_t t = ctx->atype == GEMM_F16 ? CUDA_R_16F : CUDA_R_16BF;
    CUDA_TRY(ctx, flash_attention_forward(ctx->stream, t, out, oh, saved, q, k, v, w, NH, HS, NH * HS, p, rng));
}

/* Backward adds to dq, dk, dv in the kernels' last store; dvec is the
 * workspace (cuda_ws_attention_flash16). */
static void flash16_backward(cuda_ctx *ctx, void *dq, void *dk, void *dv, const void *dout, const void *q,
                             const void *k, const void *v, const float *saved, const backend_windows *w, int NH,
                             int HS, float p, philox_stream rng)
{
    const void *oh = flash_saved_out(ctx, saved, w, NH);
    char *cur = (char *)cuda_ws_get(ctx, cuda_ws_attention_flash16((size_t)w->N, (size_t)NH));
    if (!oh || !cur) return;
    /* taken as a part, so that the race check knows its extent (cuda_ws_take) */
    float *dvec = (float *)cuda_ws_take(&cur, (size_t)w->N * (size_t)NH * sizeof(float));
    cudaDataType_t t = ctx->atype == GEMM_F16 ? CUDA_R_16F : CUDA_R_16BF;
    CUDA_TRY(ctx, flash_attention_backward(ctx->stream, t, dq, dk, dv, dvec, dout, oh, q, k, v, saved, w, NH, HS,
                                           NH * HS, p, rng, 1));
}

static int att_flash(const cuda_ctx *ctx, int HS)
{
    return cuda_ws_attention_lse(ctx->gtype != GEMM_F32, (size_t)HS);
}

/* 1 when there is work and the types are ones this file knows: fp32
 * activations, or 16-bit ones of the GEMM input type (issue 47's rule). */
static int att_ready(cuda_ctx *ctx, const backend_windows *w, int NH, int HS)
{
    if (ctx->error || w->B <= 0 || w->max_len <= 0 || NH <= 0 || HS <= 0) return 0;
    if (ctx->atype == GEMM_F32 || ctx->atype == ctx->gtype) return 1;
    cuda_fail_at(ctx, "attention", __FILE__, __LINE__, __func__, "16-bit activations of another type than the GEMMs'");
    return 0;
}

void cuda_attention_forward(void *vctx, backend_act *out, backend_act *probs, const backend_act *q,
                            const backend_act *k, const backend_act *v, const backend_windows *w, int NH, int HS,
                            float p, philox_stream rng)
{
    cuda_ctx *ctx = (cuda_ctx *)vctx;
    float *saved = (float *)probs; /* fp32 probabilities, or lse and a 16-bit out (flash) */
    if (!att_ready(ctx, w, NH, HS)) return;
    if (!att_flash(ctx, HS)) {
        if (w->cu_seqlens) cuda_attention_packed_forward(ctx, out, saved, q, k, v, w, NH, HS, p, rng);
        else attention_padded_forward(ctx, out, saved, q, k, v, w->mask, w->B, w->T, NH, HS, p, rng);
    } else if (ctx->atype != GEMM_F32) flash16_forward(ctx, out, saved, q, k, v, w, NH, HS, p, rng);
    else if (ctx->gtype == GEMM_F16) flash_forward<__half>(ctx, out, saved, q, k, v, w, NH, HS, p, rng);
    else flash_forward<__nv_bfloat16>(ctx, out, saved, q, k, v, w, NH, HS, p, rng);
}

void cuda_attention_backward(void *vctx, backend_act *dq, backend_act *dk, backend_act *dv, backend_act *scratch,
                             const backend_act *dout, const backend_act *q, const backend_act *k,
                             const backend_act *v, const backend_act *probs, const backend_windows *w, int NH, int HS,
                             float p, philox_stream rng)
{
    cuda_ctx *ctx = (cuda_ctx *)vctx;
    const float *saved = (const float *)probs;
    if (!att_ready(ctx, w, NH, HS) || (!dq && !dk && !dv)) return;
    if (!att_flash(ctx, HS)) {
        if (w->cu_seqlens)
            cuda_attention_packed_backward(ctx, dq, dk, dv, (float *)scratch, dout, q, k, v, saved, w, NH, HS, p, rng);
        else
            attention_padded_backward(ctx, dq, dk, dv, (float *)scratch, dout, q, k, v, saved, w->B, w->T, NH, HS, p,
                                      rng);
    } else if (ctx->atype != GEMM_F32) flash16_backward(ctx, dq, dk, dv, dout, q, k, v, saved, w, NH, HS, p, rng);
    else if (ctx->gtype == GEMM_F16) flash_backward<__half>(ctx, dq, dk, dv, dout, q, k, v, saved, w, NH, HS, p, rng);
    else flash_backward<__nv_bfloat16>(ctx, dq, dk, dv, dout, q, k, v, saved, w, NH, HS, p, rng);
}
