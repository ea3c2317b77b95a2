/* Fused kernels for 16-bit activations (cuda_fused.h says what each
 * launcher replaces, what it saves and the conventions). Every kernel is a
 * template on the activation type T (float, __half, __nv_bfloat16): loads
 * convert to fp32, the arithmetic is fp32 in the CPU backend's order where
 * that is cheap (explicit __fadd_rn / __fmul_rn keep nvcc from fusing what
 * the CPU rounds twice), and a value is rounded to T once, where it is
 * stored. Row kernels: one warp per row, FUSED_WARPS rows per block; a lane
 * owns groups of 4 neighbouring columns (c = 4 lane + 128 j), loaded with
 * one 4-wide access where C % 4 == 0 and the pointers are 16-byte aligned,
 * and drawing one Philox block for its 4 dropout uniforms (the padded
 * index of a row starts at a multiple of C, so of 4). */
#include "backend/cuda/cuda_fused.h"
#include "backend/cuda/cuda_act.cuh"

#include "backend/adamw_consts.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define FUSED_WARPS 4
#define FUSED_THREADS (FUSED_WARPS * 32)

#define FUSED_GRID_STRIDE(i, n) \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

/* V neighbouring elements in one aligned access (16 bytes at most). */
template <typename T, int V> struct alignas(sizeof(T) * V) fused_pack {
    T v[V];
};

/* Columns c .. c+3 of a row (k = min(4, C - c) of them; the rest read 0). */
template <typename T> __device__ __forceinline__ void load4(float f[4], const T *p, int k, int vec)
{
    if (vec) {
        fused_pack<T, 4> a = *reinterpret_cast<const fused_pack<T, 4> *>(p);
        for (int l = 0; l < 4; l++) f[l] = act_f(a.v[l]);
    } else {
        for (int l = 0; l < 4; l++) f[l] = l < k ? act_f(p[l]) : 0.0f;
    }
}

template <typename T> __device__ __forceinline__ void store4(T *p, const float f[4], int k, int vec)
{
    if (vec) {
        fused_pack<T, 4> a;
        for (int l = 0; l < 4; l++) a.v[l] = act_of<T>(f[l]);
        *reinterpret_cast<fused_pack<T, 4> *>(p) = a;
    } else {
        for (int l = 0; l < k; l++) p[l] = act_of<T>(f[l]);
    }
}

__device__ __forceinline__ float fused_warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* The padded index of (row, column 0): row * C padded; packed, the row's
 * window b by bisection of cu_seqlens and (b T + t) C. */
__device__ __forceinline__ uint64_t fused_padded_base(const int32_t *cu, int B, int T, int C, int row)
{
    if (!cu) return (uint64_t)row * (uint64_t)C;
    int lo = 0, hi = B - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (cu[mid] <= row) lo = mid;
        else hi = mid - 1;
    }
    return ((uint64_t)lo * (uint64_t)T + (uint64_t)(row - cu[lo])) * (uint64_t)C;
}

/* Dropout multipliers (scale or 0) of columns c .. c+3 of a row whose
 * padded index starts at base: one Philox block when C % 4 == 0 (c4). */
__device__ __forceinline__ void drop4(float mul[4], philox_stream rng, uint64_t base, int c, int k, float p,
                                      float scale, int c4)
{
    if (c4) {
        float u[4];
        cuda_philox_uniform4(rng, (base + (uint64_t)c) >> 2, u);
        for (int l = 0; l < 4; l++) mul[l] = u[l] >= p ? scale : 0.0f;
    } else {
        for (int l = 0; l < 4; l++) mul[l] = l < k && philox_uniform(rng, base + (uint64_t)(c + l)) >= p ? scale : 0.0f;
    }
}

/* 4-wide accesses: C a multiple of 4 and every pointer 16-byte aligned. */
static int fused_vec_ok(int C, const void *const *ptrs, int n)
{
    if (C % 4) return 0;
    for (int i = 0; i < n; i++)
        if ((uintptr_t)ptrs[i] % 16) return 0;
    return 1;
}

#define FUSED_DISPATCH(at, fn, ...) ACT_DISPATCH(at, fn, __VA_ARGS__)

static unsigned fused_row_blocks(int N)
{
    return (unsigned)((N + FUSED_WARPS - 1) / FUSED_WARPS);
}

/* dw[c] += the sum of the nparts partials pw[k][c] (double), db the same:
 * the second stage of every LayerNorm parameter gradient. A block takes 32
 * columns; its 8 warps' lane c sums the parts k = warp, warp + 8, ... in
 * order, and the 8 slices are added in order: fixed by nparts alone. */
#define FUSED_S2_SLICES 8

__global__ void fused_colsum_stage2(float *dw, float *db, const float *pw, const float *pb, int nparts, int C)
{
    __shared__ double sw[FUSED_S2_SLICES][32], sb[FUSED_S2_SLICES][32];
    int lane = threadIdx.x % 32, slice = threadIdx.x / 32;
    int c = blockIdx.x * 32 + lane;
    double aw = 0, ab = 0;
    if (c < C)
        for (int k = slice; k < nparts; k += FUSED_S2_SLICES) {
            aw += pw[(size_t)k * C + c];
            ab += pb[(size_t)k * C + c];
        }
    sw[slice][lane] = aw;
    sb[slice][lane] = ab;
    __syncthreads();
    if (slice != 0 || c >= C) return;
    for (int j = 1; j < FUSED_S2_SLICES; j++) {
        aw += sw[j][lane];
        ab += sb[j][lane];
    }
    if (dw) dw[c] = __fadd_rn(dw[c], (float)aw);
    if (db) db[c] = __fadd_rn(db[c], (float)ab);
}

/* The LayerNorm backward kernels' rows and column sums. Block k takes rows
 * k R .. k R + R-1 (R = CUDA_FUSED_LN_ROWS), warp j of it every
 * FUSED_WARPS-th of them from j; each warp sums its rows' column terms
 * into its own accumulators aw, ab [C] of the shared acc (when pw; a lane
 * only its own columns: zeroed here), and at the end the block adds its
 * warps in order into its partial row of dw and db (a barrier first: every
 * warp's rows are in). A fixed order, whatever the GPU. */
struct fused_ln_rows {
    int lane, first, end; /* this warp's first row, the block's end */
    float *aw, *ab;
};

__device__ __forceinline__ fused_ln_rows fused_ln_rows_begin(float *acc, const float *pw, int N, int C)
{
    int warp = threadIdx.x / 32, r0 = blockIdx.x * CUDA_FUSED_LN_ROWS;
    fused_ln_rows r = {(int)threadIdx.x % 32, r0 + warp, min(N, r0 + CUDA_FUSED_LN_ROWS), acc + (size_t)warp * 2 * C,
                       NULL};
    r.ab = r.aw + C;
    if (pw)
        for (int c = r.lane * 4; c < C; c += 128)
            for (int l = 0; l < min(4, C - c); l++) r.aw[c + l] = r.ab[c + l] = 0.0f;
    return r;
}

__device__ __forceinline__ void fused_acc_store(float *pw, float *pb, const float *acc, int C)
{
    __syncthreads();
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float sw = 0, sb = 0;
        for (int j = 0; j < FUSED_WARPS; j++) {
            sw = __fadd_rn(sw, acc[(size_t)j * 2 * C + c]);
            sb = __fadd_rn(sb, acc[(size_t)j * 2 * C + C + c]);
        }
        pw[(size_t)blockIdx.x * C + c] = sw;
        pb[(size_t)blockIdx.x * C + c] = sb;
    }
}

/* The LayerNorm backward kernels' partials: one row of C floats per block
 * of CUDA_FUSED_LN_ROWS rows, for dw and for db, in the workspace. */
static int fused_ln_partials(cuda_ctx *ctx, int N, int C, float **pw, float **pb)
{
    char *cur = (char *)cuda_ws_get(ctx, cuda_ws_fused_ln_backward((size_t)N, (size_t)C));
    if (!cur) return -1;
    size_t parts = ((size_t)N + CUDA_FUSED_LN_ROWS - 1) / CUDA_FUSED_LN_ROWS;
    *pw = (float *)cuda_ws_take(&cur, parts * (size_t)C * 4);
    *pb = (float *)cuda_ws_take(&cur, parts * (size_t)C * 4);
    return 0;
}

static void fused_colsum_finish(cuda_ctx *ctx, float *dw, float *db, const float *pw, const float *pb, int nparts,
                                int C)
{
    CUDA_LAUNCH(fused_colsum_stage2, (unsigned)((C + 31) / 32), 32 * FUSED_S2_SLICES, 0, ctx->stream,
        dw, db, pw, pb, nparts, C);
    CUDA_LAUNCHED(ctx);
}

static int fused_check_c(cuda_ctx *ctx, int C, const char *func)
{
    if (C <= CUDA_FUSED_MAX_C) return 0;
    cuda_fail_at(ctx, "C <= CUDA_FUSED_MAX_C", __FILE__, __LINE__, func, "hidden size above CUDA_FUSED_MAX_C");
    return -1;
}

/* ------------------------------------------------------------------------
 * Residual add + dropout + LayerNorm. Forward: three passes over the row,
 * the first storing sum (rounded), the others reading it back (this
 * thread's own stores), so mean, rstd and out are of the stored sum. */

template <typename T>
__global__ void fused_residual_ln_fwd_kernel(T *out, T *sum, float *mean, float *rstd, const T *res, const T *x,
                                             const float *w, const float *b, const int32_t *cu, int B, int Tw, int N,
                                             int C, float eps, float p, float scale, philox_stream rng, int vec)
{
    int row = blockIdx.x * FUSED_WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N) return;
    size_t off = (size_t)row * C;
    uint64_t base = p > 0.0f ? fused_padded_base(cu, B, Tw, C, row) : 0;
    float s = 0;
    for (int c = lane * 4; c < C; c += 128) {
        int k = min(4, C - c);
        float xv[4], rv[4], mul[4], sv[4];
        load4(xv, x + off + c, k, vec);
        load4(rv, res + off + c, k, vec);
        if (p > 0.0f) drop4(mul, rng, base, c, k, p, scale, (C & 3) == 0);
        for (int l = 0; l < 4; l++) {
            float d = p > 0.0f ? __fmul_rn(xv[l], mul[l]) : xv[l];
            sv[l] = act_round<T>(__fadd_rn(rv[l], d));
        }
        store4(sum + off + c, sv, k, vec);
        for (int l = 0; l < k; l++) s += sv[l];
    }
    float m = fused_warp_sum(s) / (float)C;
    float v = 0;
    for (int c = lane * 4; c < C; c += 128) {
        int k = min(4, C - c);
        float sv[4];
        load4(sv, sum + off + c, k, vec);
        for (int l = 0; l < k; l++) {
            float d = sv[l] - m;
            v += d * d;
        }
    }
    float rs = 1.0f / sqrtf(fused_warp_sum(v) / (float)C + eps);
    for (int c = lane * 4; c < C; c += 128) {
        int k = min(4, C - c);
        float sv[4], wv[4], bv[4], o[4];
        load4(sv, sum + off + c, k, vec);
        load4(wv, w + c, k, vec);
        load4(bv, b + c, k, vec);
        for (int l = 0; l < 4; l++) o[l] = fmaf(__fmul_rn(__fsub_rn(sv[l], m), rs), wv[l], bv[l]);
        store4(out + off + c, o, k, vec);
    }
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = rs;
    }
}

template <typename T>
static void residual_ln_forward(cuda_ctx *ctx, void *out, void *sum, float *mean, float *rstd, const void *residual,
                                const void *x, const float *w, const float *b, const backend_windows *win, int C,
                                float eps, float p, philox_stream rng)
{
    const void *ptrs[] = {out, sum, residual, x, w, b};
    int vec = fused_vec_ok(C, ptrs, 6);
    CUDA_LAUNCH(fused_residual_ln_fwd_kernel<T>, fused_row_blocks(win->N), FUSED_THREADS, 0, ctx->stream,
        (T *)out, (T *)sum, mean, rstd, (const T *)residual, (const T *)x, w, b, win->cu_seqlens, win->B, win->T,
        win->N, C, eps, p, cuda_dropout_scale(p), rng, vec);
    CUDA_LAUNCHED(ctx);
}

// out, sum, residual, x (N,C) of type at; mean, rstd (N); w, b (C)
void cuda_fused_residual_ln_forward(void *vctx, gemm_type at, void *out, void *sum, float *mean, float *rstd,
                                    const void *residual, const void *x, const float *w, const float *b,
                                    const backend_windows *win, int C, float eps, float p, philox_stream rng)
{
    cuda_ctx *ctx = (cuda_ctx *)vctx;
    if (ctx->error || win->N <= 0 || C <= 0) return;
    FUSED_DISPATCH(at, residual_ln_forward, ctx, out, sum, mean, rstd, residual, x, w, b, win, C, eps, p, rng);
}

/* Backward: rows and column sums as fused_ln_rows (dout * xhat and dout
 * per column). */
template <typename T>
__global__ void fused_residual_ln_bwd_kernel(T *dres, T *dx, float *pw, float *pb, const T *dout, const T *sum,
                                             const float *mean, const float *rstd, const float *w, const int32_t *cu,
                                             int B, int Tw, int N, int C, float p, float scale, philox_stream rng,
                                             int vec)
{
    CUDA_DYN_SHARED(float, acc); /* [FUSED_WARPS][2][C] when pw */
    fused_ln_rows rows = fused_ln_rows_begin(acc, pw, N, C);
    for (int row = rows.first; row < rows.end; row += FUSED_WARPS) {
        size_t off = (size_t)row * C;
        float m = mean[row], rs = rstd[row];
        float sg = 0, sgx = 0;
        for (int c = rows.lane * 4; c < C; c += 128) {
            int k = min(4, C - c);
            float dv[4], sv[4], wv[4];
            load4(dv, dout + off + c, k, vec);
            load4(sv, sum + off + c, k, vec);
            load4(wv, w + c, k, vec);
            for (int l = 0; l < k; l++) {
                float g = __fmul_rn(dv[l], wv[l]);
                sg += g;
                sgx += g * __fmul_rn(__fsub_rn(sv[l], m), rs);
            }
        }
        float mg = fused_warp_sum(sg) / (float)C, mgx = fused_warp_sum(sgx) / (float)C;
        uint64_t base = dx && p > 0.0f ? fused_padded_base(cu, B, Tw, C, row) : 0;
        for (int c = rows.lane * 4; c < C; c += 128) {
            int k = min(4, C - c);
            float dv[4], sv[4], wv[4], ds[4];
            load4(dv, dout + off + c, k, vec);
            load4(sv, sum + off + c, k, vec);
            load4(wv, w + c, k, vec);
            for (int l = 0; l < 4; l++) {
                float xhat = __fmul_rn(__fsub_rn(sv[l], m), rs);
                float g = __fmul_rn(dv[l], wv[l]);
                ds[l] = __fmul_rn(rs, __fsub_rn(__fsub_rn(g, mg), __fmul_rn(xhat, mgx)));
                if (pw && l < k) {
                    rows.aw[c + l] = __fadd_rn(rows.aw[c + l], __fmul_rn(dv[l], xhat));
                    rows.ab[c + l] = __fadd_rn(rows.ab[c + l], dv[l]);
                }
            }
            if (dres) {
                float r[4];
                load4(r, dres + off + c, k, vec);
                for (int l = 0; l < 4; l++) r[l] = __fadd_rn(r[l], ds[l]);
                store4(dres + off + c, r, k, vec);
            }
            if (dx) {
                float r[4], mul[4];
                load4(r, dx + off + c, k, vec);
                if (p > 0.0f) {
                    drop4(mul, rng, base, c, k, p, scale, (C & 3) == 0);
                    for (int l = 0; l < 4; l++) r[l] = __fadd_rn(r[l], __fmul_rn(ds[l], mul[l]));
                } else {
                    for (int l = 0; l < 4; l++) r[l] = __fadd_rn(r[l], ds[l]);
                }
                store4(dx + off + c, r, k, vec);
            }
        }
    }
    if (pw) fused_acc_store(pw, pb, acc, C); /* pw: the same for every thread of the grid */
}

template <typename T>
static void residual_ln_backward(cuda_ctx *ctx, void *dres, void *dx, float *dw, float *db, const void *dout,
                                 const void *sum, const float *mean, const float *rstd, const float *w,
                                 const backend_windows *win, int C, float p, philox_stream rng)
{
    int N = win->N;
    float *pw = NULL, *pb = NULL;
    if ((dw || db) && fused_ln_partials(ctx, N, C, &pw, &pb)) return;
    const void *ptrs[] = {dres, dx, dout, sum, w};
    int vec = fused_vec_ok(C, ptrs, 5);
    unsigned nchunks = (unsigned)((N + CUDA_FUSED_LN_ROWS - 1) / CUDA_FUSED_LN_ROWS);
    size_t shared = pw ? (size_t)FUSED_WARPS * 2 * C * sizeof(float) : 0;
    CUDA_LAUNCH(fused_residual_ln_bwd_kernel<T>, nchunks, FUSED_THREADS, shared, ctx->stream,
        (T *)dres, (T *)dx, pw, pb, (const T *)dout, (const T *)sum, mean, rstd, w, win->cu_seqlens, win->B,
        win->T, N, C, p, cuda_dropout_scale(p), rng, vec);
    CUDA_LAUNCHED(ctx);
    if (pw) fused_colsum_finish(ctx, dw, db, pw, pb, (int)nchunks, C);
}

// dresidual, dx, dout, sum (N,C) of type at; dw, db, w (C); mean, rstd (N)
void cuda_fused_residual_ln_backward(void *vctx, gemm_type at, void *dresidual, void *dx, float *dw, float *db,
                                     const void *dout, const void *sum, const float *mean, const float *rstd,
                                     const float *w, const backend_windows *win, int C, float p, philox_stream rng)
{
    cuda_ctx *ctx = (cuda_ctx *)vctx;
    if (ctx->error || win->N <= 0 || C <= 0) return;
    if (!dresidual && !dx && !dw && !db) return;
    if (fused_check_c(ctx, C, __func__)) return;
    FUSED_DISPATCH(at, residual_ln_backward, ctx, dresidual, dx, dw, db, dout, sum, mean, rstd, w, win, C, p, rng);
}

/* The op table's entries (ops.def): the launchers on the context's
 * activation type. A hidden size the backward kernels do not take is
 * declined by forward and backward alike (the caller then runs the ops
 * they fuse, and a forward of one kind never meets a backward of the other). */
int cuda_residual_layernorm_forward(void *ctx, backend_act *out, backend_act *sum, float *mean, float *rstd,
                                    const backend_act *residual, const backend_act *x, const float *w, const float *b,
                                    const backend_windows *win, int C, float eps, float p, philox_stream rng)
{
    if (C > CUDA_FUSED_MAX_C) return 1;
    cuda_fused_residual_ln_forward(ctx, ((cuda_ctx *)ctx)->atype, out, sum, mean, rstd, residual, x, w, b, win, C, eps,
                                   p, rng);
    return 0;
}

int cuda_residual_layernorm_backward(void *ctx, backend_act *dresidual, backend_act *dx, float *dw, float *db,
                                     const backend_act *dout, const backend_act *sum, const float *mean,
                                     const float *rstd, const float *w, const backend_windows *win, int C, float p,
                                     philox_stream rng)
{
    if (C > CUDA_FUSED_MAX_C) return 1;
    cuda_fused_residual_ln_backward(ctx, ((cuda_ctx *)ctx)->atype, dresidual, dx, dw, db, dout, sum, mean, rstd, w,
                                    win, C, p, rng);
    return 0;
}

/* ------------------------------------------------------------------------
 * Embeddings + LayerNorm + dropout. The forward keeps its row of e in
 * shared memory (a warp's own row: no barrier); the backward gathers e
 * again in both passes (the same fp32 additions, so the same bits). */

__device__ __forceinline__ void embed4(float e[4], const float *we, const float *te, const float *pe, int c, int k,
                                       int vec)
{
    float a[4], t[4], q[4];
    load4(a, we + c, k, vec);
    load4(t, te + c, k, vec);
    load4(q, pe + c, k, vec);
    for (int l = 0; l < 4; l++) e[l] = __fadd_rn(__fadd_rn(a[l], t[l]), q[l]);
}

template <typename T>
__global__ void fused_embed_ln_fwd_kernel(T *out, float *mean, float *rstd, const int32_t *ids, const int32_t *types,
                                          const int32_t *pos, const float *wte, const float *wpe, const float *wtt,
                                          const float *w, const float *b, const int32_t *cu, int B, int Tw, int N,
                                          int C, float eps, float p, float scale, philox_stream rng, int vec)
{
    CUDA_DYN_SHARED(float, sh); /* [FUSED_WARPS][C] */
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int row = blockIdx.x * FUSED_WARPS + warp;
    if (row >= N) return;
    float *e = sh + (size_t)warp * C;
    const float *we = wte + (size_t)ids[row] * C;
    const float *te = wtt + (size_t)(types ? types[row] : 0) * C;
    const float *pe = wpe + (size_t)(pos ? pos[row] : row % Tw) * C;
    float s = 0;
    for (int c = lane * 4; c < C; c += 128) {
        int k = min(4, C - c);
        float ev[4];
        embed4(ev, we, te, pe, c, k, vec);
        for (int l = 0; l < k; l++) {
            e[c + l] = ev[l];
            s += ev[l];
        }
    }
    float m = fused_warp_sum(s) / (float)C;
    float v = 0;
    for (int c = lane * 4; c < C; c += 128)
        for (int l = 0; l < min(4, C - c); l++) {
            float d = e[c + l] - m;
            v += d * d;
        }
    float rs = 1.0f / sqrtf(fused_warp_sum(v) / (float)C + eps);
    size_t off = (size_t)row * C;
    uint64_t base = p > 0.0f ? fused_padded_base(cu, B, Tw, C, row) : 0;
    for (int c = lane * 4; c < C; c += 128) {
        int k = min(4, C - c);
        float wv[4], bv[4], o[4], mul[4];
        load4(wv, w + c, k, vec);
        load4(bv, b + c, k, vec);
        if (p > 0.0f) drop4(mul, rng, base, c, k, p, scale, (C & 3) == 0);
        for (int l = 0; l < 4; l++) {
            float ev = l < k ? e[c + l] : 0.0f;
            o[l] = fmaf(__fmul_rn(__fsub_rn(ev, m), rs), wv[l], bv[l]);
            if (p > 0.0f) o[l] = __fmul_rn(o[l], mul[l]);
        }
        store4(out + off + c, o, k, vec);
    }
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = rs;
    }
}

template <typename T>
static void embed_ln_forward(cuda_ctx *ctx, void *out, float *mean, float *rstd, const int32_t *ids,
                             const int32_t *types, const int32_t *pos, const float *wte, const float *wpe,
                             const float *wtt, const float *w, const float *b, const backend_windows *win, int C,
                             float eps, float p, philox_stream rng)
{
    const void *ptrs[] = {out, wte, wpe, wtt, w, b};
    int vec = fused_vec_ok(C, ptrs, 6);
    size_t shared = (size_t)FUSED_WARPS * C * sizeof(float);
    CUDA_LAUNCH(fused_embed_ln_fwd_kernel<T>, fused_row_blocks(win->N), FUSED_THREADS, shared, ctx->stream,
        (T *)out, mean, rstd, ids, types, pos, wte, wpe, wtt, w, b, win->cu_seqlens, win->B, win->T, win->N, C, eps, p,
        cuda_dropout_scale(p), rng, vec);
    CUDA_LAUNCHED(ctx);
}

// out (N,C) of type at; mean, rstd, ids, types, pos (N); wte (V,C), wpe (P,C), wtt (TV,C); w, b (C)
void cuda_fused_embed_ln_forward(void *vctx, gemm_type at, void *out, float *mean, float *rstd, const int32_t *ids,
                                 const int32_t *types, const int32_t *pos, const float *wte, const float *wpe,
                                 const float *wtt, const float *w, const float *b, const backend_windows *win, int C,
                                 float eps, float p, philox_stream rng)
{
    cuda_ctx *ctx = (cuda_ctx *)vctx;
    if (ctx->error || win->N <= 0 || C <= 0) return;
    if (fused_check_c(ctx, C, __func__)) return;
    FUSED_DISPATCH(at, embed_ln_forward, ctx, out, mean, rstd, ids, types, pos, wte, wpe, wtt, w, b, win, C, eps, p,
                   rng);
}

/* dy = dout * multiplier; demb = rstd (g - mean(g) - xhat mean(g xhat)),
 * g = dy w; the partials of dw (dy xhat) and db (dy) as the residual
 * kernel's. */
template <typename T>
__global__ void fused_embed_ln_bwd_kernel(float *demb, float *pw, float *pb, const T *dout, const int32_t *ids,
                                          const int32_t *types, const int32_t *pos, const float *mean,
                                          const float *rstd, const float *wte, const float *wpe, const float *wtt,
                                          const float *w, const int32_t *cu, int B, int Tw, int N, int C, float p,
                                          float scale, philox_stream rng, int vec)
{
    CUDA_DYN_SHARED(float, acc); /* [FUSED_WARPS][2][C] when pw */
    fused_ln_rows rows = fused_ln_rows_begin(acc, pw, N, C);
    for (int row = rows.first; row < rows.end; row += FUSED_WARPS) {
        size_t off = (size_t)row * C;
        float m = mean[row], rs = rstd[row];
        const float *we = wte + (size_t)ids[row] * C;
        const float *te = wtt + (size_t)(types ? types[row] : 0) * C;
        const float *pe = wpe + (size_t)(pos ? pos[row] : row % Tw) * C;
        uint64_t base = p > 0.0f ? fused_padded_base(cu, B, Tw, C, row) : 0;
        float sg = 0, sgx = 0;
        for (int c = rows.lane * 4; c < C; c += 128) {
            int k = min(4, C - c);
            float dv[4], ev[4], wv[4], mul[4];
            load4(dv, dout + off + c, k, vec);
            embed4(ev, we, te, pe, c, k, vec);
            load4(wv, w + c, k, vec);
            if (p > 0.0f) drop4(mul, rng, base, c, k, p, scale, (C & 3) == 0);
            for (int l = 0; l < k; l++) {
                float dy = p > 0.0f ? __fmul_rn(dv[l], mul[l]) : dv[l];
                float g = __fmul_rn(dy, wv[l]);
                sg += g;
                sgx += g * __fmul_rn(__fsub_rn(ev[l], m), rs);
            }
        }
        float mg = fused_warp_sum(sg) / (float)C, mgx = fused_warp_sum(sgx) / (float)C;
        for (int c = rows.lane * 4; c < C; c += 128) {
            int k = min(4, C - c);
            float dv[4], ev[4], wv[4], mul[4], de[4];
            load4(dv, dout + off + c, k, vec);
            embed4(ev, we, te, pe, c, k, vec);
            load4(wv, w + c, k, vec);
            if (p > 0.0f) drop4(mul, rng, base, c, k, p, scale, (C & 3) == 0);
            for (int l = 0; l < 4; l++) {
                float dy = p > 0.0f ? __fmul_rn(dv[l], mul[l]) : dv[l];
                float xhat = __fmul_rn(__fsub_rn(ev[l], m), rs);
                float g = __fmul_rn(dy, wv[l]);
                de[l] = __fmul_rn(rs, __fsub_rn(__fsub_rn(g, mg), __fmul_rn(xhat, mgx)));
                if (pw && l < k) {
                    rows.aw[c + l] = __fadd_rn(rows.aw[c + l], __fmul_rn(dy, xhat));
                    rows.ab[c + l] = __fadd_rn(rows.ab[c + l], dy);
                }
            }
            store4(demb + off + c, de, k, vec);
        }
    }
    if (pw) fused_acc_store(pw, pb, acc, C);
}

template <typename T>
static void embed_ln_backward(cuda_ctx *ctx, float *dwte, float *dwpe, float *dwtt, float *dw, float *db, float *demb,
                              const void *dout, const int32_t *ids, const int32_t *types, const int32_t *pos,
                              const float *mean, const float *rstd, const float *wte, const float *wpe,
                              const float *wtt, const float *w, const backend_windows *win, int C, float p,
                              philox_stream rng)
{
    int N = win->N;
    float *pw = NULL, *pb = NULL;
    if ((dw || db) && fused_ln_partials(ctx, N, C, &pw, &pb)) return;
    const void *ptrs[] = {demb, dout, wte, wpe, wtt, w};
    int vec = fused_vec_ok(C, ptrs, 6);
    unsigned nchunks = (unsigned)((N + CUDA_FUSED_LN_ROWS - 1) / CUDA_FUSED_LN_ROWS);
    size_t shared = pw ? (size_t)FUSED_WARPS * 2 * C * sizeof(float) : 0;
    CUDA_LAUNCH(fused_embed_ln_bwd_kernel<T>, nchunks, FUSED_THREADS, shared, ctx->stream,
        demb, pw, pb, (const T *)dout, ids, types, pos, mean, rstd, wte, wpe, wtt, w, win->cu_seqlens, win->B, win->T,
        N, C, p, cuda_dropout_scale(p), rng, vec);
    CUDA_LAUNCHED(ctx);
    if (pw) fused_colsum_finish(ctx, dw, db, pw, pb, (int)nchunks, C);
    /* The tables' sums, deterministic (a stable sort by id; the workspace
     * again: the stream has run the kernels above first). */
    if (dwte || dwpe || dwtt) /* demb is fp32 whatever the activations */
        cuda_embedding_backward_as(ctx, GEMM_F32, dwte, dwpe, dwtt, demb, ids, types, pos, N, win->T, C);
}

void cuda_fused_embed_ln_backward(void *vctx, gemm_type at, float *dwte, float *dwpe, float *dwtt, float *dw, float *db,
                                  float *demb, const void *dout, const int32_t *ids, const int32_t *types,
                                  const int32_t *pos, const float *mean, const float *rstd, const float *wte,
                                  const float *wpe, const float *wtt, const float *w, const backend_windows *win,
                                  int C, float p, philox_stream rng)
{
    cuda_ctx *ctx = (cuda_ctx *)vctx;
    if (ctx->error || win->N <= 0 || C <= 0) return;
    if (!dwte && !dwpe && !dwtt && !dw && !db) return;
    if (fused_check_c(ctx, C, __func__)) return;
    FUSED_DISPATCH(at, embed_ln_backward, ctx, dwte, dwpe, dwtt, dw, db, demb, dout, ids, types, pos, mean, rstd, wte,
                   wpe, wtt, w, win, C, p, rng);
}

/* The op table's entries, as the residual ones above. */
int cuda_embedding_layernorm_forward(void *ctx, backend_act *out, float *mean, float *rstd, const int32_t *ids,
                                     const int32_t *types, const int32_t *pos, const float *wte, const float *wpe,
                                     const float *wtt, const float *w, const float *b, const backend_windows *win,
                                     int C, float eps, float p, philox_stream rng)
{
    if (C > CUDA_FUSED_MAX_C) return 1;
    cuda_fused_embed_ln_forward(ctx, ((cuda_ctx *)ctx)->atype, out, mean, rstd, ids, types, pos, wte, wpe, wtt, w, b,
                                win, C, eps, p, rng);
    return 0;
}

int cuda_embedding_layernorm_backward(void *ctx, float *dwte, float *dwpe, float *dwtt, float *dw, float *db,
                                      float *scratch, const backend_act *dout, const int32_t *ids, const int32_t *types,
                                      const int32_t *pos, const float *mean, const float *rstd, const float *wte,
                                      const float *wpe, const float *wtt, const float *w, const backend_windows *win,
                                      int C, float p, philox_stream rng)
{
    if (C > CUDA_FUSED_MAX_C) return 1;
    cuda_fused_embed_ln_backward(ctx, ((cuda_ctx *)ctx)->atype, dwte, dwpe, dwtt, dw, db, scratch, dout, ids, types,
                                 pos, mean, rstd, wte, wpe, wtt, w, win, C, p, rng);
    return 0;
}

/* ------------------------------------------------------------------------
 * Multi-tensor AdamW. A block per chunk of CUDA_MT_CHUNK elements of one
 * tensor; it finds its tensor by bisection of the chunk0 column. */

#define MT_THREADS 256

int64_t cuda_mt_table_prepare(cuda_mt_tensor *tab, int n)
{
    int64_t chunks = 0;
    for (int i = 0; i < n; i++) {
        tab[i].chunk0 = chunks;
        chunks += (tab[i].n + CUDA_MT_CHUNK - 1) / CUDA_MT_CHUNK;
    }
    return chunks;
}

/* The last tensor whose chunk0 <= chunk (tensors of no elements own no
 * chunk and are passed over). */
__device__ __forceinline__ int fused_mt_find(const cuda_mt_tensor *tab, int ntens, int64_t chunk)
{
    int lo = 0, hi = ntens - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (tab[mid].chunk0 <= chunk) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

__global__ void fused_mt_sumsq_kernel(double *part, const cuda_mt_tensor *tab, int ntens)
{
    __shared__ double sh[MT_THREADS];
    int64_t chunk = blockIdx.x;
    const cuda_mt_tensor *e = tab + fused_mt_find(tab, ntens, chunk);
    int64_t i0 = (chunk - e->chunk0) * CUDA_MT_CHUNK, i1 = min((long long)e->n, (long long)(i0 + CUDA_MT_CHUNK));
    const float *g = e->g;
    double a = 0;
    for (int64_t i = i0 + threadIdx.x; i < i1; i += MT_THREADS) a += (double)g[i] * g[i];
    double s = cuda_block_tree_sum<MT_THREADS>(a, sh);
    if (threadIdx.x == 0) part[chunk] = s;
}

/* optim_apply's decision from st->sum_squares, in the same double
 * arithmetic. */
__device__ void fused_mt_decide(cuda_mt_status *st, float grad_unscale, double max_norm)
{
    double norm = sqrt(st->sum_squares) * fabs((double)grad_unscale);
    double clip = 1.0;
    int skip = !isfinite(norm);
    if (!skip && max_norm > 0) {
        clip = max_norm / (norm + 1e-6);
        if (clip > 1.0) clip = 1.0;
    }
    st->norm = norm;
    st->clip_coef = clip;
    st->grad_scale = (float)((double)grad_unscale * clip);
    st->skipped = skip;
}

/* The parts added with a fixed tree into st->sum_squares; then, when
 * decide is set, the decision. */
__global__ void fused_mt_finish_kernel(cuda_mt_status *st, const double *part, int64_t nparts, int decide,
                                       float grad_unscale, double max_norm)
{
    __shared__ double sh[MT_THREADS];
    double a = 0;
    for (int64_t i = threadIdx.x; i < nparts; i += MT_THREADS) a += part[i];
    double s = cuda_block_tree_sum<MT_THREADS>(a, sh);
    if (threadIdx.x != 0) return;
    st->sum_squares = s;
    if (decide) fused_mt_decide(st, grad_unscale, max_norm);
}

__global__ void fused_mt_decide_kernel(cuda_mt_status *st, float grad_unscale, double max_norm)
{
    fused_mt_decide(st, grad_unscale, max_norm);
}

static void mt_sum_squares(cuda_ctx *ctx, cuda_mt_status *status, double *part, const cuda_mt_tensor *tab, int ntens,
                           int64_t nchunks, int decide, float grad_unscale, double max_norm)
{
    if (ctx->error || ntens <= 0) return;
    if (nchunks > 0) {
        CUDAEMU_ANNOTATE_TABLE(tab, ntens, cuda_mt_tensor, g, n, sizeof(float));
        CUDA_LAUNCH(fused_mt_sumsq_kernel, (unsigned)nchunks, MT_THREADS, 0, ctx->stream, part, tab, ntens);
        CUDA_LAUNCHED(ctx);
    }
    CUDA_LAUNCH(fused_mt_finish_kernel, 1, MT_THREADS, 0, ctx->stream,
        status, part, nchunks, decide, grad_unscale, max_norm);
    CUDA_LAUNCHED(ctx);
}

void cuda_mt_grad_norm(void *vctx, cuda_mt_status *status, double *part, const cuda_mt_tensor *tab, int ntens,
                       int64_t nchunks, float grad_unscale, double max_norm)
{
    mt_sum_squares((cuda_ctx *)vctx, status, part, tab, ntens, nchunks, 1, grad_unscale, max_norm);
}

void cuda_mt_sum_squares(void *vctx, cuda_mt_status *status, double *part, const cuda_mt_tensor *tab, int ntens,
                         int64_t nchunks)
{
    mt_sum_squares((cuda_ctx *)vctx, status, part, tab, ntens, nchunks, 0, 1.0f, 0.0);
}

void cuda_mt_decide(void *vctx, cuda_mt_status *status, float grad_unscale, double max_norm)
{
    cuda_ctx *ctx = (cuda_ctx *)vctx;
    if (ctx->error) return;
    CUDA_LAUNCH(fused_mt_decide_kernel, 1, 1, 0, ctx->stream, status, grad_unscale, max_norm);
    CUDA_LAUNCHED(ctx);
}

/* cuda_loss.cu's adamw_kernel, element for element, on one chunk. */
template <typename W>
__global__ void fused_mt_adamw_kernel(const cuda_mt_tensor *tab, int ntens, const cuda_mt_status *st, adamw_consts kd,
                                      adamw_consts kn)
{
    if (st->skipped) return;
    float gs = st->grad_scale;
    int64_t chunk = blockIdx.x;
    const cuda_mt_tensor *e = tab + fused_mt_find(tab, ntens, chunk);
    int64_t i0 = (chunk - e->chunk0) * CUDA_MT_CHUNK, i1 = min((long long)e->n, (long long)(i0 + CUDA_MT_CHUNK));
    const adamw_consts k = e->decay ? kd : kn;
    float *p = e->p, *m = e->m, *v = e->v;
    const float *g = e->g;
    W *p16 = (W *)e->p16;
    int small = fabsf(k.w1) < 0.5f;
    float coeff = small ? k.w1 : __fsub_rn(k.w1, 1.0f);
    for (int64_t i = i0 + threadIdx.x; i < i1; i += MT_THREADS) {
        float gi = __fmul_rn(g[i], gs);
        float pi = k.has_decay ? __fmul_rn(p[i], k.decay) : p[i];
        float mi = fmaf(coeff, __fsub_rn(gi, m[i]), small ? m[i] : gi);
        float vi = fmaf(__fmul_rn(k.c2, gi), gi, __fmul_rn(v[i], k.b2));
        float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), k.bc2_sqrt), k.eps);
        float pn = __fadd_rn(pi, __fdiv_rn(__fmul_rn(k.neg_step, mi), denom));
        p[i] = pn;
        m[i] = mi;
        v[i] = vi;
        if (p16) p16[i] = act_of<W>(pn);
    }
}

void cuda_mt_adamw(void *vctx, const cuda_mt_tensor *tab, int ntens, int64_t nchunks, const cuda_mt_status *status,
                   gemm_type copy, float lr, float b1, float b2, float eps, float wd, int64_t t)
{
    cuda_ctx *ctx = (cuda_ctx *)vctx;
    if (ctx->error || ntens <= 0 || nchunks <= 0) return;
    /* grad_scale is the device's (status); the constants' own is unused */
    adamw_consts kd = adamw_consts_make(lr, b1, b2, eps, wd, t, 1.0f);
    adamw_consts kn = adamw_consts_make(lr, b1, b2, eps, 0.0f, t, 1.0f);
    /* the tensors the kernel reaches through the table (the stand-in's race check) */
    CUDAEMU_ANNOTATE_TABLE(tab, ntens, cuda_mt_tensor, p, n, sizeof(float));
    CUDAEMU_ANNOTATE_TABLE(tab, ntens, cuda_mt_tensor, g, n, sizeof(float));
    CUDAEMU_ANNOTATE_TABLE(tab, ntens, cuda_mt_tensor, m, n, sizeof(float));
    CUDAEMU_ANNOTATE_TABLE(tab, ntens, cuda_mt_tensor, v, n, sizeof(float));
    CUDAEMU_ANNOTATE_TABLE(tab, ntens, cuda_mt_tensor, p16, n, copy == GEMM_F32 ? sizeof(float) : sizeof(__half));
    if (copy == GEMM_F16)
        CUDA_LAUNCH(fused_mt_adamw_kernel<__half>, (unsigned)nchunks, MT_THREADS, 0, ctx->stream,
            tab, ntens, status, kd, kn);
    else if (copy == GEMM_BF16)
        CUDA_LAUNCH(fused_mt_adamw_kernel<__nv_bfloat16>, (unsigned)nchunks, MT_THREADS, 0, ctx->stream,
            tab, ntens, status, kd, kn);
    else
        CUDA_LAUNCH(fused_mt_adamw_kernel<float>, (unsigned)nchunks, MT_THREADS, 0, ctx->stream,
            tab, ntens, status, kd, kn);
    CUDA_LAUNCHED(ctx);
}

/* ------------------------------------------------------------------------
 * adamw_multi (ops.def): the table from the ranges, the norm and the
 * decision on the device, one AdamW launch, the result read back once. */

static_assert(sizeof(cuda_mt_tensor) == CUDA_WS_MT_ENTRY, "the planner counts CUDA_WS_MT_ENTRY bytes per tensor");
static_assert(sizeof(cuda_mt_status) <= CUDA_WS_ALIGN - 2 * sizeof(double),
              "the status lives in the result slots of ctx->red");

/* The caller's sum of squares (over ranks, say), then the decision. */
__global__ void fused_mt_given_kernel(cuda_mt_status *st, double sum_squares, float grad_unscale, double max_norm)
{
    st->sum_squares = sum_squares;
    fused_mt_decide(st, grad_unscale, max_norm);
}

/* The device table for these ranges, uploaded when they changed (the
 * first step, or another optimizer on this context). */
static const cuda_mt_tensor *mt_table(cuda_ctx *ctx, float *params, const float *grads, float *m, float *v,
                                      const backend_adamw_range *r, int nr, int *ntens, int64_t *nchunks)
{
    cuda_mt_tensor *tab = (cuda_mt_tensor *)calloc(nr > 0 ? (size_t)nr : 1, sizeof *tab);
    if (!tab) {
        cuda_fail_at(ctx, "calloc", __FILE__, __LINE__, __func__, "out of host memory");
        return NULL;
    }
    int n = 0;
    for (int i = 0; i < nr; i++) {
        if (!r[i].len) continue;
        cuda_mt_tensor *e = tab + n++;
        e->p = params + r[i].off;
        e->g = grads + r[i].off;
        e->m = m + r[i].state;
        e->v = v + r[i].state;
        /* the 16-bit copy the GEMMs read, written in the same pass: a current
         * copy stays current, a stale one stays as stale as it was */
        e->p16 = cuda_weights_copy_of(ctx, e->p, r[i].len);
        if (!e->p16) cuda_weights_wrote(ctx, e->p, r[i].len * sizeof(float));
        e->n = (int64_t)r[i].len;
        e->decay = r[i].decay;
    }
    *ntens = n;
    *nchunks = cuda_mt_table_prepare(tab, n);
    size_t bytes = (size_t)n * sizeof *tab;
    if (n == ctx->mt_n && ctx->mt_host && !memcmp(tab, ctx->mt_host, bytes)) {
        free(tab);
        return (const cuda_mt_tensor *)ctx->mt_dev;
    }
    if (n > ctx->mt_cap) {
        if (ctx->mt_dev) cuda_mem_release(ctx, ctx->mt_dev);
        ctx->mt_cap = 0;
        ctx->mt_dev = cuda_mem_alloc(ctx, bytes);
        if (!ctx->mt_dev) {
            free(tab);
            return NULL;
        }
        ctx->mt_cap = n;
    }
    free(ctx->mt_host);
    ctx->mt_host = tab;
    ctx->mt_n = -1; /* valid again once uploaded */
    cudaError_t e = n ? cudaMemcpyAsync(ctx->mt_dev, tab, bytes, cudaMemcpyHostToDevice, ctx->stream) : cudaSuccess;
    if (e != cudaSuccess) {
        cuda_fail_at(ctx, "cudaMemcpyAsync", __FILE__, __LINE__, __func__, cudaGetErrorString(e));
        return NULL;
    }
    ctx->mt_n = n;
    return (const cuda_mt_tensor *)ctx->mt_dev;
}

int cuda_adamw_multi(void *vctx, backend_adamw_result *res, float *params, const float *grads, float *m,
                     float *v, const backend_adamw_range *r, int nr, const backend_adamw_args *a)
{
    cuda_ctx *ctx = (cuda_ctx *)vctx;
    if (ctx->error) return err_set(ERR_RUNTIME, "adamw_multi: %s", ctx->error_msg);
    if (!a->sum_given)
        for (int i = 1; i < nr; i++)
            if (r[i].off != r[i - 1].off + r[i - 1].len)
                return err_set(ERR_INPUT, "adamw_multi: range %d starts at %zu, not where range %d ends", i,
                               r[i].off, i - 1);
    int ntens = 0;
    int64_t nchunks = 0;
    const cuda_mt_tensor *tab = mt_table(ctx, params, grads, m, v, r, nr, &ntens, &nchunks);
    if (!tab && ntens) return err_set(ERR_RUNTIME, "adamw_multi: %s", ctx->error_msg);
    /* after sum_squares's sum and the flags, in the same allocation */
    cuda_mt_status *st = (cuda_mt_status *)(ctx->red + CUDA_WS_REDUCE_BLOCKS + 2);
    if (a->sum_given || nr == 0) {
        CUDA_LAUNCH(fused_mt_given_kernel, 1, 1, 0, ctx->stream,
            st, a->sum_given ? a->sum_squares : 0.0, a->grad_unscale, a->max_norm);
    } else {
        /* sum_squares's two stages over the span, bit for bit, and the
         * decision in the second */
        size_t n = r[nr - 1].off + r[nr - 1].len - r[0].off;
        unsigned nparts = cuda_sum_squares_parts(ctx, ctx->red, grads + r[0].off, n);
        CUDA_LAUNCH(fused_mt_finish_kernel, 1, MT_THREADS, 0, ctx->stream,
            st, ctx->red, (int64_t)nparts, 1, a->grad_unscale, a->max_norm);
    }
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess && ntens)
        cuda_mt_adamw(ctx, tab, ntens, nchunks, st, ctx->gtype, a->lr, a->b1, a->b2, a->eps, a->wd, a->t);
    cuda_mt_status h;
    if (e == cudaSuccess && !ctx->error) e = cudaMemcpyAsync(&h, st, sizeof h, cudaMemcpyDeviceToHost, ctx->stream);
    if (e == cudaSuccess && !ctx->error) e = cudaStreamSynchronize(ctx->stream);
    if (e != cudaSuccess) cuda_fail_at(ctx, "adamw_multi", __FILE__, __LINE__, __func__, cudaGetErrorString(e));
    if (ctx->error) return err_set(ERR_RUNTIME, "adamw_multi: %s", ctx->error_msg);
    res->sum_squares = h.sum_squares;
    res->norm = h.norm;
    res->clip_coef = h.clip_coef;
    res->skipped = h.skipped;
    return 0;
}

/* ------------------------------------------------------------------------
 * GELU, exact (the op table's, and the CPU backend's arithmetic): out = x/2 (1 + erf(x / sqrt 2)),
 * dinp += dout (cdf + x pdf). 16 bytes per access (4 floats, 8 halves)
 * where every pointer is 16-byte aligned, else one element. */

#define FUSED_GELU_ALPHA 0.70710678118654752440f
#define FUSED_GELU_BETA 0.39894228040143267794f

__device__ __forceinline__ float fused_gelu(float x)
{
    return __fmul_rn(__fmul_rn(x, 0.5f), __fadd_rn(1.0f, erff(__fmul_rn(x, FUSED_GELU_ALPHA))));
}

__device__ __forceinline__ float fused_gelu_grad(float x)
{
    float cdf = __fmul_rn(0.5f, __fadd_rn(1.0f, erff(__fmul_rn(x, FUSED_GELU_ALPHA))));
    float pdf = __fmul_rn(FUSED_GELU_BETA, expf(__fmul_rn(__fmul_rn(x, x), -0.5f)));
    return __fadd_rn(cdf, __fmul_rn(x, pdf));
}

/* Elements [0, nv V) in 16-byte packs (vec), the rest one by one. */
template <typename T> __global__ void fused_gelu_fwd_kernel(T *out, const T *inp, size_t n, int vec)
{
    const int V = 16 / sizeof(T);
    typedef fused_pack<T, 16 / sizeof(T)> pack;
    size_t nv = vec ? n / V : 0;
    FUSED_GRID_STRIDE(i, nv)
    {
        pack a = reinterpret_cast<const pack *>(inp)[i], o;
        for (int l = 0; l < V; l++) o.v[l] = act_of<T>(fused_gelu(act_f(a.v[l])));
        reinterpret_cast<pack *>(out)[i] = o;
    }
    FUSED_GRID_STRIDE(j, n - nv * V) out[nv * V + j] = act_of<T>(fused_gelu(act_f(inp[nv * V + j])));
}

template <typename T> __global__ void fused_gelu_bwd_kernel(T *dinp, const T *inp, const T *dout, size_t n, int vec)
{
    const int V = 16 / sizeof(T);
    typedef fused_pack<T, 16 / sizeof(T)> pack;
    size_t nv = vec ? n / V : 0;
    FUSED_GRID_STRIDE(i, nv)
    {
        pack x = reinterpret_cast<const pack *>(inp)[i];
        pack d = reinterpret_cast<const pack *>(dout)[i];
        pack o = reinterpret_cast<const pack *>(dinp)[i];
        for (int l = 0; l < V; l++)
            o.v[l] = act_of<T>(__fadd_rn(act_f(o.v[l]), __fmul_rn(act_f(d.v[l]), fused_gelu_grad(act_f(x.v[l])))));
        reinterpret_cast<pack *>(dinp)[i] = o;
    }
    FUSED_GRID_STRIDE(j, n - nv * V)
    {
        size_t i = nv * V + j;
        dinp[i] = act_of<T>(__fadd_rn(act_f(dinp[i]), __fmul_rn(act_f(dout[i]), fused_gelu_grad(act_f(inp[i])))));
    }
}

template <typename T> static void gelu_forward(cuda_ctx *ctx, void *out, const void *inp, size_t n)
{
    const void *ptrs[] = {out, inp};
    int vec = fused_vec_ok(0, ptrs, 2);
    size_t work = vec ? n / (16 / sizeof(T)) + 1 : n;
    CUDA_LAUNCH(fused_gelu_fwd_kernel<T>, cuda_blocks(work, 256), 256, 0, ctx->stream,
        (T *)out, (const T *)inp, n, vec);
    CUDA_LAUNCHED(ctx);
}

template <typename T> static void gelu_backward(cuda_ctx *ctx, void *dinp, const void *inp, const void *dout, size_t n)
{
    const void *ptrs[] = {dinp, inp, dout};
    int vec = fused_vec_ok(0, ptrs, 3);
    size_t work = vec ? n / (16 / sizeof(T)) + 1 : n;
    CUDA_LAUNCH(fused_gelu_bwd_kernel<T>, cuda_blocks(work, 256), 256, 0, ctx->stream,
        (T *)dinp, (const T *)inp, (const T *)dout, n, vec);
    CUDA_LAUNCHED(ctx);
}

// out, inp (n) of type at
void cuda_fused_gelu_forward(void *vctx, gemm_type at, void *out, const void *inp, size_t n)
{
    cuda_ctx *ctx = (cuda_ctx *)vctx;
    if (ctx->error || n == 0) return;
    FUSED_DISPATCH(at, gelu_forward, ctx, out, inp, n);
}

void cuda_fused_gelu_backward(void *vctx, gemm_type at, void *dinp, const void *inp, const void *dout, size_t n)
{
    cuda_ctx *ctx = (cuda_ctx *)vctx;
    if (ctx->error || n == 0 || !dinp) return;
    FUSED_DISPATCH(at, gelu_backward, ctx, dinp, inp, dout, n);
}

/* The op table's GELU (ops.def): the kernels above on ctx->atype (the same
 * arithmetic element by element on every type, so fp32 gives the bits an
 * fp32 kernel of its own would). */
void cuda_gelu_forward(void *vctx, backend_act *out, const backend_act *inp, size_t n)
{
    cuda_fused_gelu_forward(vctx, ((cuda_ctx *)vctx)->atype, out, inp, n);
}

void cuda_gelu_backward(void *vctx, backend_act *dinp, const backend_act *inp, const backend_act *dout, size_t n)
{
    cuda_fused_gelu_backward(vctx, ((cuda_ctx *)vctx)->atype, dinp, inp, dout, n);
}
