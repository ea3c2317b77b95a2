/* Self-attention on Tensor Cores in 16 bits: flash attention over packed or
 * padded windows (cuda_flash.h says what it computes). Each kernel sits
 * beside its launcher.
 *
 * Tiling. A block is FL_WARPS warps; each warp owns 16 rows (queries in
 * forward and in the dq kernel, keys in the dk/dv kernel), the block
 * FL_BQ = 16 * FL_WARPS rows of one (window, head). The other side is
 * walked in tiles of FL_BK rows staged in shared memory. Products are WMMA
 * 16 x 16 x 16 fragments (16-bit inputs, fp32 accumulation): Q K^T and
 * P V forward; K Q^T, V dO^T, P^T dO and dS^T Q for dk/dv; Q K^T, dO V^T
 * and dS K for dq. The softmax, its online rescaling, dropout and dS are
 * fp32, done per row in shared memory (a fragment's element-to-lane
 * mapping is CUDA's secret, so rows are worked on after a store); P and
 * dS are rounded to the 16-bit type to enter the next product.
 *
 * Forward keeps m (the running max) and l (the running sum) per row, and
 * the output rows in fp32 in shared memory, rescaled by exp(m_old - m_new)
 * at each key tile; it writes out = O / l and lse = m + log l. Backward
 * recomputes P = exp(s - lse) tile by tile. It is two kernels, so nothing
 * is summed across blocks (no atomics, deterministic): dk/dv (a block per
 * key tile, over every query tile) and dq (a block per query tile, over
 * every key tile); the second recomputes S and dP (7 products in all
 * instead of 5). D = rowsum(dO * O) comes first, from the 16-bit out.
 *
 * q, k, v and their gradients are rows ld apart (C for arrays of their
 * own, 3C for slices of one fused [N, 3C] QKV buffer); out and dout are C
 * apart.
 *
 * Rows past a window's end are loaded as zeros and never stored; keys past
 * it are left out of the softmax. A padded batch (cu_seqlens NULL) is B
 * windows of T rows with the mask's -FLT_MAX on padded keys, every row
 * computed, as the CPU backend's padded attention.
 *
 * Shared memory is carved from one dynamic buffer aligned to 128 bytes by
 * hand (CUDA promises 16; WMMA wants 32-byte aligned tiles); every tile
 * offset and leading dimension is a multiple of 32 bytes for HS % 16 == 0.
 * bf16 fragments need sm_80: on older cards the bf16 kernels trap (the
 * backend refuses bf16 there before any launch). */
#include "backend/cuda/cuda_flash.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#include <float.h>
#include <math.h>
#include <stdint.h>

#include <type_traits>

using namespace nvcuda;

/* The launch and dynamic shared memory, as cuda_internal.h spells them
 * (kept here so that this file stands alone). */
#ifdef CUDAEMU
#define FL_LAUNCH(kernel, grid, block, shared, stream, ...) CUDAEMU_LAUNCH(kernel, grid, block, shared, stream, __VA_ARGS__)
#define FL_DYN_SHARED(name) CUDAEMU_DYN_SHARED(unsigned char, name)
#else
#define FL_LAUNCH(kernel, grid, block, shared, stream, ...) kernel<<<grid, block, shared, stream>>>(__VA_ARGS__)
#define FL_DYN_SHARED(name) extern __shared__ unsigned char name[]
#endif

/* Full unrolling of the loops over a row's fragments (nvcc; the host
 * compiler has no such pragma). */
#ifdef CUDAEMU
#define FL_UNROLL
#else
#define FL_UNROLL _Pragma("unroll")
#endif

#define FL_WARPS 2
#define FL_THREADS (32 * FL_WARPS)
#define FL_BQ (16 * FL_WARPS) /* rows a block owns */
#define FL_BK 32              /* rows of the other side per tile */
#define FL_MAX_HS 64
#define FL_SHARED_MAX (48 * 1024)

/* bf16 fragments exist from sm_80; a bf16 kernel built for an older card
 * stops there. */
#ifdef CUDAEMU
#define FL_TRAP() cudaemu_fatal("a bf16 attention kernel on a card without bf16 Tensor Cores")
#else
#define FL_TRAP() __trap()
#endif
template <typename T> struct fl_arch_ok {
    static constexpr bool value = true;
};
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
template <> struct fl_arch_ok<__nv_bfloat16> {
    static constexpr bool value = false;
};
#endif

__device__ __forceinline__ float fl_f(__half x) { return __half2float(x); }
__device__ __forceinline__ float fl_f(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> __device__ __forceinline__ T fl_t(float x);
template <> __device__ __forceinline__ __half fl_t<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 fl_t<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

__device__ __forceinline__ unsigned char *fl_align(unsigned char *p)
{
    return (unsigned char *)(((uintptr_t)p + 127) & ~(uintptr_t)127);
}

/* Window b: its first row and its length. */
__device__ __forceinline__ void fl_window(const int32_t *cu, int T, int b, int *r0, int *L)
{
    if (cu) {
        *r0 = cu[b];
        *L = cu[b + 1] - cu[b];
    } else {
        *r0 = b * T;
        *L = T;
    }
}

/* A block's place: window b (its first row r0, its length L), head h, the
 * first x0 of the FL_BQ rows it owns, and the thread's warp and lane. */
struct fl_place {
    int b, h, x0, r0, L, tid, wp, lane;
};

/* The block's place; false when its rows start past the window's end (the
 * block has nothing to do). */
__device__ __forceinline__ bool fl_place_of(const int32_t *cu, int Tp, fl_place *at)
{
    at->b = (int)blockIdx.z;
    at->h = (int)blockIdx.y;
    at->x0 = (int)blockIdx.x * FL_BQ;
    fl_window(cu, Tp, at->b, &at->r0, &at->L);
    at->tid = (int)threadIdx.x;
    at->wp = at->tid / 32;
    at->lane = at->tid % 32;
    return at->x0 < at->L;
}

/* Score of query i against key j of window b: the scaled product, with
 * -FLT_MAX added where the padded batch's mask says padding. */
__device__ __forceinline__ float fl_score(float dot, float scale, const int32_t *mask, int b, int T, int j)
{
    float s = __fmul_rn(dot, scale);
    if (mask && !mask[(size_t)b * T + j]) s = __fadd_rn(s, -FLT_MAX);
    return s;
}

/* The dropout multiplier of probability (b, h, i, j): keep / (1 - p). */
__device__ __forceinline__ float fl_mult(philox_stream rng, int b, int h, int NH, int T, int i, int j, float p,
                                         float dscale)
{
    if (p <= 0.0f) return 1.0f;
    uint64_t idx = (((uint64_t)b * (uint64_t)NH + (uint64_t)h) * (uint64_t)T + (uint64_t)i) * (uint64_t)T +
                   (uint64_t)j;
    return philox_keep(rng, idx, p) ? dscale : 0.0f;
}

/* Rows r_first .. r_first + rows - 1 of window (r0, L), head h, into a
 * [rows, HS] tile; zeros past the window's end. */
template <typename T>
__device__ __forceinline__ void fl_load_rows(T *dst, const T *src, int r0, int L, int r_first, int rows, int C, int h,
                                             int HS)
{
    for (int x = (int)threadIdx.x; x < rows * HS; x += FL_THREADS) {
        int r = x / HS, d = x % HS, i = r_first + r;
        dst[x] = i < L ? src[(size_t)(r0 + i) * C + (size_t)h * HS + d] : fl_t<T>(0.0f);
    }
}

/* acc (16 x 16 per fragment, HS / 16 of them) into a warp's [16, HS] fp32
 * staging tile, then rows below L of it to dst as 16-bit. */
template <typename T>
__device__ __forceinline__ void fl_store_rows(T *dst, float *stage, wmma::fragment<wmma::accumulator, 16, 16, 16, float> *acc,
                                              int nd, int r0, int L, int r_first, int C, int h, int HS, int lane,
                                              int accumulate)
{
    FL_UNROLL
    for (int c = 0; c < nd; c++) wmma::store_matrix_sync(stage + c * 16, acc[c], HS, wmma::mem_row_major);
    __syncwarp();
    for (int x = lane; x < 16 * HS; x += 32) {
        int r = x / HS, d = x % HS, i = r_first + r;
        if (i >= L) continue;
        T *o = dst + (size_t)(r0 + i) * C + (size_t)h * HS + d;
        *o = fl_t<T>(accumulate ? __fadd_rn(fl_f(*o), stage[x]) : stage[x]);
    }
}

/* acc[c] += A B over `tiles` 16-wide steps of the inner dimension, c over
 * the HS / 16 column fragments: A a warp's [16, 16 tiles] tile (lda), B a
 * [16 tiles, HS] tile. */
template <typename T, int ND>
__device__ __forceinline__ void fl_mma_rows(wmma::fragment<wmma::accumulator, 16, 16, 16, float> *acc, const T *a,
                                            int lda, const T *b, int tiles)
{
    constexpr int HS = 16 * ND;
    FL_UNROLL
    for (int c = 0; c < ND; c++)
        for (int kk = 0; kk < tiles; kk++) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> af;
            wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> bf;
            wmma::load_matrix_sync(af, a + kk * 16, lda);
            wmma::load_matrix_sync(bf, b + kk * 16 * HS + c * 16, HS);
            wmma::mma_sync(acc[c], af, bf, acc[c]);
        }
}

/* Backward's two products of a warp's 16 rows against `tiles` x 16 rows
 * of the other side, both as column-major B: s1 = A1 B1^T (scores) and
 * s2 = A2 B2^T (dP), fp32 into s1 (ld1) and s2 (ld2). */
template <typename T, int ND>
__device__ __forceinline__ void fl_two_products(const wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> *a1,
                                                const wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> *a2,
                                                const T *b1, const T *b2, int tiles, float *s1, int ld1, float *s2,
                                                int ld2)
{
    constexpr int HS = 16 * ND;
    for (int n = 0; n < tiles; n++) {
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> sa, ga;
        wmma::fill_fragment(sa, 0.0f);
        wmma::fill_fragment(ga, 0.0f);
        FL_UNROLL
        for (int d = 0; d < ND; d++) {
            wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> f1, f2;
            wmma::load_matrix_sync(f1, b1 + n * 16 * HS + d * 16, HS);
            wmma::load_matrix_sync(f2, b2 + n * 16 * HS + d * 16, HS);
            wmma::mma_sync(sa, a1[d], f1, sa);
            wmma::mma_sync(ga, a2[d], f2, ga);
        }
        wmma::store_matrix_sync(s1 + n * 16, sa, ld1, wmma::mem_row_major);
        wmma::store_matrix_sync(s2 + n * 16, ga, ld2, wmma::mem_row_major);
    }
}

/* lse and D of query rows q0 .. q0 + FL_BQ - 1 (0 past the window's end). */
__device__ __forceinline__ void fl_load_row_terms(float *sLse, float *sDv, const float *lse, const float *dvec, int q0,
                                                  int r0, int L, int N, int h)
{
    for (int r = (int)threadIdx.x; r < FL_BQ; r += FL_THREADS) {
        int i = q0 + r;
        sLse[r] = i < L ? lse[(size_t)h * N + r0 + i] : 0.0f;
        sDv[r] = i < L ? dvec[(size_t)h * N + r0 + i] : 0.0f;
    }
}

static int fl_grid_ok(const backend_windows *w, int NH)
{
    return w && w->B > 0 && w->B <= 65535 && NH > 0 && NH <= 65535 && w->max_len > 0 && w->T > 0 && w->N > 0 &&
           (w->cu_seqlens || (w->max_len == w->T && w->N == w->B * w->T));
}

/* f(std::integral_constant<int, HS / 16>): the kernels are compiled per
 * head size, so that a warp's fragments of a row (HS / 16 of them) are
 * registers, not local memory. */
template <typename F> static cudaError_t fl_by_hs(int HS, F f)
{
    switch (HS) {
    case 16: return f(std::integral_constant<int, 1>());
    case 32: return f(std::integral_constant<int, 2>());
    case 48: return f(std::integral_constant<int, 3>());
    case 64: return f(std::integral_constant<int, 4>());
    default: return cudaErrorInvalidValue;
    }
}

int flash_attention_supported(int HS)
{
    return HS >= 16 && HS <= FL_MAX_HS && HS % 16 == 0;
}

size_t flash_attention_lse_floats(const backend_windows *w, int NH)
{
    return (size_t)NH * (size_t)w->N;
}

/* ------------------------------------------------------------------------
 * Forward. */

static size_t fl_fwd_shared(int HS)
{
    int SW = HS > FL_BK ? HS : FL_BK;
    return 128 + (size_t)FL_BQ * HS * 2 + (size_t)2 * FL_BK * HS * 2 + (size_t)FL_BQ * FL_BK * 2 +
           (size_t)FL_BQ * SW * 4 + (size_t)FL_BQ * HS * 4 + (size_t)2 * FL_BQ * 4;
}

// grid (ceil(max_len / FL_BQ), NH, B), FL_THREADS: query rows q0 .. q0 + FL_BQ - 1 of window b, head h.
template <typename T, int ND>
__global__ void flash_fwd_kernel(T *out, T *out2, float *lse, const T *q, const T *k, const T *v, const int32_t *cu,
                                 const int32_t *mask, int N, int Tp, int NH, int ld, float scale, float p,
                                 float dscale, philox_stream rng)
{
    if constexpr (!fl_arch_ok<T>::value) {
        FL_TRAP();
    } else {
        FL_DYN_SHARED(fl_raw);
        fl_place at;
        if (!fl_place_of(cu, Tp, &at)) return;
        int b = at.b, h = at.h, q0 = at.x0, r0 = at.r0, L = at.L, tid = at.tid, wp = at.wp, lane = at.lane;
        constexpr int HS = 16 * ND, nd = ND, SW = HS > FL_BK ? HS : FL_BK;
        int C = NH * HS;
        T *sQ = (T *)fl_align(fl_raw), *sK = sQ + FL_BQ * HS, *sV = sK + FL_BK * HS, *sP = sV + FL_BK * HS;
        float *sS = (float *)(sP + FL_BQ * FL_BK), *sO = sS + FL_BQ * SW, *sM = sO + FL_BQ * HS, *sL = sM + FL_BQ;

        fl_load_rows(sQ, q, r0, L, q0, FL_BQ, ld, h, HS);
        for (int x = tid; x < FL_BQ * HS; x += FL_THREADS) sO[x] = 0.0f;
        for (int r = tid; r < FL_BQ; r += FL_THREADS) {
            sM[r] = -INFINITY;
            sL[r] = 0.0f;
        }
        __syncthreads();
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> qf[FL_MAX_HS / 16];
        FL_UNROLL
        for (int d = 0; d < nd; d++) wmma::load_matrix_sync(qf[d], sQ + wp * 16 * HS + d * 16, HS);
        T *sPw = sP + wp * 16 * FL_BK;
        float *sSw = sS + wp * 16 * SW, *sOw = sO + wp * 16 * HS;

        for (int k0 = 0; k0 < L; k0 += FL_BK) {
            __syncthreads(); /* the last tile's K and V are read */
            fl_load_rows(sK, k, r0, L, k0, FL_BK, ld, h, HS);
            fl_load_rows(sV, v, r0, L, k0, FL_BK, ld, h, HS);
            __syncthreads();
            /* S_w = Q_w K^T: K's rows are the columns of a column-major B */
            for (int n = 0; n < FL_BK / 16; n++) {
                wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
                wmma::fill_fragment(acc, 0.0f);
                FL_UNROLL
                for (int d = 0; d < nd; d++) {
                    wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> kf;
                    wmma::load_matrix_sync(kf, sK + n * 16 * HS + d * 16, HS);
                    wmma::mma_sync(acc, qf[d], kf, acc);
                }
                wmma::store_matrix_sync(sSw + n * 16, acc, SW, wmma::mem_row_major);
            }
            __syncwarp();
            /* the online softmax, one row per lane */
            if (lane < 16) {
                int r = wp * 16 + lane, i = q0 + r, nk = min(FL_BK, L - k0);
                float *srow = sSw + lane * SW;
                T *prow = sPw + lane * FL_BK;
                if (i >= L) {
                    for (int j = 0; j < FL_BK; j++) prow[j] = fl_t<T>(0.0f);
                } else {
                    float mold = sM[r], mx = mold;
                    for (int j = 0; j < nk; j++) {
                        float s = fl_score(srow[j], scale, mask, b, Tp, k0 + j);
                        srow[j] = s;
                        mx = fmaxf(mx, s);
                    }
                    float alpha = expf(mold - mx), sum = 0.0f;
                    for (int j = 0; j < FL_BK; j++) {
                        float e = 0.0f;
                        if (j < nk) {
                            e = expf(srow[j] - mx);
                            sum += e;
                            e = __fmul_rn(e, fl_mult(rng, b, h, NH, Tp, i, k0 + j, p, dscale));
                        }
                        prow[j] = fl_t<T>(e);
                    }
                    sL[r] = __fadd_rn(__fmul_rn(sL[r], alpha), sum);
                    sM[r] = mx;
                    for (int d = 0; d < HS; d++) sOw[lane * HS + d] *= alpha;
                }
            }
            __syncwarp();
            /* O_w += P_w V */
            FL_UNROLL
            for (int c = 0; c < nd; c++) {
                wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
                wmma::load_matrix_sync(acc, sOw + c * 16, HS, wmma::mem_row_major);
                for (int kk = 0; kk < FL_BK / 16; kk++) {
                    wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> pf;
                    wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> vf;
                    wmma::load_matrix_sync(pf, sPw + kk * 16, FL_BK);
                    wmma::load_matrix_sync(vf, sV + kk * 16 * HS + c * 16, HS);
                    wmma::mma_sync(acc, pf, vf, acc);
                }
                wmma::store_matrix_sync(sOw + c * 16, acc, HS, wmma::mem_row_major);
            }
            __syncwarp();
        }
        for (int x = lane; x < 16 * HS; x += 32) {
            int r = wp * 16 + x / HS, d = x % HS, i = q0 + r;
            if (i >= L) continue;
            size_t off = (size_t)(r0 + i) * C + (size_t)h * HS + d;
            T o = fl_t<T>(sOw[x] / sL[r]);
            out[off] = o;
            if (out2) out2[off] = o;
        }
        if (lane < 16) {
            int r = wp * 16 + lane, i = q0 + r;
            if (i < L) lse[(size_t)h * N + r0 + i] = sM[r] + logf(sL[r]);
        }
    }
}

template <typename T, int ND>
static cudaError_t fl_forward(cudaStream_t s, T *out, T *out2, float *lse, const T *q, const T *k, const T *v,
                              const backend_windows *w, int NH, int HS, int ld, float p, philox_stream rng)
{
    size_t shared = fl_fwd_shared(HS);
    dim3 grid((unsigned)((w->max_len + FL_BQ - 1) / FL_BQ), (unsigned)NH, (unsigned)w->B);
    float dscale = p >= 1.0f ? 0.0f : 1.0f / (1.0f - p);
    FL_LAUNCH((flash_fwd_kernel<T, ND>), grid, FL_THREADS, shared, s, out, out2, lse, q, k, v, w->cu_seqlens, w->mask, w->N,
              w->T, NH, ld, backend_score_scale(HS), p, dscale, rng);
    return cudaGetLastError();
}

cudaError_t flash_attention_forward(cudaStream_t stream, cudaDataType_t t, void *out, void *out2, float *lse,
                                    const void *q, const void *k, const void *v, const backend_windows *w, int NH,
                                    int HS, int ldqkv, float p, philox_stream rng)
{
    if (!flash_attention_supported(HS) || !fl_grid_ok(w, NH) || ldqkv < NH * HS ||
        fl_fwd_shared(HS) > FL_SHARED_MAX)
        return cudaErrorInvalidValue;
    if (t == CUDA_R_16F)
        return fl_by_hs(HS, [&](auto nd) {
            typedef __half H;
            return fl_forward<H, decltype(nd)::value>(stream, (H *)out, (H *)out2, lse, (const H *)q, (const H *)k,
                                                      (const H *)v, w, NH, HS, ldqkv, p, rng);
        });
    if (t == CUDA_R_16BF)
        return fl_by_hs(HS, [&](auto nd) {
            typedef __nv_bfloat16 B16;
            return fl_forward<B16, decltype(nd)::value>(stream, (B16 *)out, (B16 *)out2, lse, (const B16 *)q, (const B16 *)k,
                                                        (const B16 *)v, w, NH, HS, ldqkv, p, rng);
        });
    return cudaErrorInvalidValue;
}

/* ------------------------------------------------------------------------
 * Backward: D = rowsum(dO * O), then dk/dv, then dq. */

// grid ceil(N * NH / 256), 256 threads: dvec[h * N + n] = sum_d dout[n, h*HS + d] * out[n, h*HS + d].
template <typename T>
__global__ void flash_dvec_kernel(float *dvec, const T *dout, const T *out, int N, int NH, int HS)
{
    size_t x = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= (size_t)N * NH) return;
    int n = (int)(x / NH), h = (int)(x % NH);
    size_t at = (size_t)n * NH * HS + (size_t)h * HS;
    float s = 0.0f;
    for (int d = 0; d < HS; d++) s = fmaf(fl_f(dout[at + d]), fl_f(out[at + d]), s);
    dvec[(size_t)h * N + n] = s;
}

/* P, the kept P' and dS of one (query i, key j) pair from its raw products
 * s = q.k and g = dO.v: P = exp(s scaled - lse), P' = P m, dS = (g m - D)
 * P scale, m the dropout multiplier (the CPU backend's order). */
__device__ __forceinline__ void fl_grad_pair(float s, float g, float lse_i, float d_i, float scale, float m,
                                             const int32_t *mask, int b, int T, int j, float *pk, float *ds)
{
    float pr = expf(fl_score(s, scale, mask, b, T, j) - lse_i);
    *pk = __fmul_rn(pr, m);
    *ds = __fmul_rn(__fmul_rn(__fsub_rn(__fmul_rn(g, m), d_i), pr), scale);
}

static size_t fl_kv_shared(int HS)
{
    int SW = HS > FL_BQ ? HS : FL_BQ;
    return 128 + (size_t)4 * FL_BQ * HS * 2 + (size_t)2 * FL_BQ * SW * 4 + (size_t)2 * FL_BQ * FL_BQ * 2 +
           (size_t)2 * FL_BQ * 4;
}

/* The scalars both backward kernels take (their pointers are arguments
 * of their own, which the stand-in's bounds checks see): the rows N, the
 * padded length Tp, the heads, out's row stride C = NH * HS, q/k/v's
 * row stride, the constants, and
 * whether to add to the gradients. */
struct fl_bwd_consts {
    int N, Tp, NH, C, ld;
    float scale, p, dscale;
    philox_stream rng;
    int accumulate;
};

// grid (ceil(max_len / FL_BQ), NH, B), FL_THREADS: key rows j0 .. j0 + FL_BQ - 1; over every query tile
// (FL_BQ rows): dv = P'^T dO, dk = dS^T Q.
template <typename T, int ND>
__global__ void flash_bwd_kv_kernel(T *dk, T *dv, const T *dout, const T *q, const T *k, const T *v, const float *lse,
                                    const float *dvec, const int32_t *cu, const int32_t *mask, fl_bwd_consts a)
{
    if constexpr (!fl_arch_ok<T>::value) {
        FL_TRAP();
    } else {
        FL_DYN_SHARED(fl_raw);
        fl_place at;
        if (!fl_place_of(cu, a.Tp, &at)) return;
        int b = at.b, h = at.h, j0 = at.x0, r0 = at.r0, L = at.L, wp = at.wp, lane = at.lane;
        constexpr int HS = 16 * ND, nd = ND, SW = HS > FL_BQ ? HS : FL_BQ;
        T *sK = (T *)fl_align(fl_raw), *sV = sK + FL_BQ * HS, *sQ = sV + FL_BQ * HS, *sO = sQ + FL_BQ * HS;
        float *sS = (float *)(sO + FL_BQ * HS), *sG = sS + FL_BQ * SW;
        T *sP = (T *)(sG + FL_BQ * SW), *sD = sP + FL_BQ * FL_BQ;
        float *sLse = (float *)(sD + FL_BQ * FL_BQ), *sDv = sLse + FL_BQ;

        fl_load_rows(sK, k, r0, L, j0, FL_BQ, a.ld, h, HS);
        fl_load_rows(sV, v, r0, L, j0, FL_BQ, a.ld, h, HS);
        __syncthreads();
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> kf[FL_MAX_HS / 16], vf[FL_MAX_HS / 16];
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> dka[FL_MAX_HS / 16], dva[FL_MAX_HS / 16];
        FL_UNROLL
        for (int d = 0; d < nd; d++) {
            wmma::load_matrix_sync(kf[d], sK + wp * 16 * HS + d * 16, HS);
            wmma::load_matrix_sync(vf[d], sV + wp * 16 * HS + d * 16, HS);
            wmma::fill_fragment(dka[d], 0.0f);
            wmma::fill_fragment(dva[d], 0.0f);
        }
        float *sSw = sS + wp * 16 * SW, *sGw = sG + wp * 16 * SW;
        T *sPw = sP + wp * 16 * FL_BQ, *sDw = sD + wp * 16 * FL_BQ;

        for (int q0 = 0; q0 < L; q0 += FL_BQ) {
            __syncthreads(); /* the last tile's Q and dO are read */
            fl_load_rows(sQ, q, r0, L, q0, FL_BQ, a.ld, h, HS);
            fl_load_rows(sO, dout, r0, L, q0, FL_BQ, a.C, h, HS);
            fl_load_row_terms(sLse, sDv, lse, dvec, q0, r0, L, a.N, h);
            __syncthreads();
            /* S^T_w = K_w Q^T and dP'^T_w = V_w dO^T: 16 keys x FL_BQ queries */
            fl_two_products<T, ND>(kf, vf, sQ, sO, FL_BQ / 16, sSw, SW, sGw, SW);
            __syncwarp();
            for (int x = lane; x < 16 * FL_BQ; x += 32) {
                int r = x / FL_BQ, c = x % FL_BQ, j = j0 + wp * 16 + r, i = q0 + c;
                float pk = 0.0f, ds = 0.0f;
                if (i < L && j < L)
                    fl_grad_pair(sSw[r * SW + c], sGw[r * SW + c], sLse[c], sDv[c], a.scale,
                                 fl_mult(a.rng, b, h, a.NH, a.Tp, i, j, a.p, a.dscale), mask, b, a.Tp, j, &pk, &ds);
                sPw[x] = fl_t<T>(pk);
                sDw[x] = fl_t<T>(ds);
            }
            __syncwarp();
            /* dV_w += P'^T_w dO, dK_w += dS^T_w Q */
            fl_mma_rows<T, ND>(dva, sPw, FL_BQ, sO, FL_BQ / 16);
            fl_mma_rows<T, ND>(dka, sDw, FL_BQ, sQ, FL_BQ / 16);
        }
        __syncwarp();
        if (dk) fl_store_rows(dk, sSw, dka, nd, r0, L, j0 + wp * 16, a.ld, h, HS, lane, a.accumulate);
        __syncwarp();
        if (dv) fl_store_rows(dv, sSw, dva, nd, r0, L, j0 + wp * 16, a.ld, h, HS, lane, a.accumulate);
    }
}

static size_t fl_q_shared(int HS)
{
    int SW = HS > FL_BK ? HS : FL_BK;
    return 128 + (size_t)2 * FL_BQ * HS * 2 + (size_t)2 * FL_BK * HS * 2 + (size_t)FL_BQ * SW * 4 +
           (size_t)FL_BQ * FL_BK * 4 + (size_t)FL_BQ * FL_BK * 2 + (size_t)2 * FL_BQ * 4;
}

// grid (ceil(max_len / FL_BQ), NH, B), FL_THREADS: query rows q0 .. q0 + FL_BQ - 1; over every key tile:
// dq = dS K.
template <typename T, int ND>
__global__ void flash_bwd_q_kernel(T *dq, const T *dout, const T *q, const T *k, const T *v, const float *lse,
                                   const float *dvec, const int32_t *cu, const int32_t *mask, fl_bwd_consts a)
{
    if constexpr (!fl_arch_ok<T>::value) {
        FL_TRAP();
    } else {
        FL_DYN_SHARED(fl_raw);
        fl_place at;
        if (!fl_place_of(cu, a.Tp, &at)) return;
        int b = at.b, h = at.h, q0 = at.x0, r0 = at.r0, L = at.L, wp = at.wp, lane = at.lane;
        constexpr int HS = 16 * ND, nd = ND, SW = HS > FL_BK ? HS : FL_BK;
        T *sQ = (T *)fl_align(fl_raw), *sO = sQ + FL_BQ * HS, *sK = sO + FL_BQ * HS, *sV = sK + FL_BK * HS;
        float *sS = (float *)(sV + FL_BK * HS), *sG = sS + FL_BQ * SW;
        T *sD = (T *)(sG + FL_BQ * FL_BK);
        float *sLse = (float *)(sD + FL_BQ * FL_BK), *sDv = sLse + FL_BQ;

        fl_load_rows(sQ, q, r0, L, q0, FL_BQ, a.ld, h, HS);
        fl_load_rows(sO, dout, r0, L, q0, FL_BQ, a.C, h, HS);
        fl_load_row_terms(sLse, sDv, lse, dvec, q0, r0, L, a.N, h);
        __syncthreads();
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> qf[FL_MAX_HS / 16], of[FL_MAX_HS / 16];
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> dqa[FL_MAX_HS / 16];
        FL_UNROLL
        for (int d = 0; d < nd; d++) {
            wmma::load_matrix_sync(qf[d], sQ + wp * 16 * HS + d * 16, HS);
            wmma::load_matrix_sync(of[d], sO + wp * 16 * HS + d * 16, HS);
            wmma::fill_fragment(dqa[d], 0.0f);
        }
        float *sSw = sS + wp * 16 * SW, *sGw = sG + wp * 16 * FL_BK;
        T *sDw = sD + wp * 16 * FL_BK;

        for (int k0 = 0; k0 < L; k0 += FL_BK) {
            __syncthreads(); /* the last tile's K and V are read */
            fl_load_rows(sK, k, r0, L, k0, FL_BK, a.ld, h, HS);
            fl_load_rows(sV, v, r0, L, k0, FL_BK, a.ld, h, HS);
            __syncthreads();
            /* S_w = Q_w K^T and dP'_w = dO_w V^T: 16 queries x FL_BK keys */
            fl_two_products<T, ND>(qf, of, sK, sV, FL_BK / 16, sSw, SW, sGw, FL_BK);
            __syncwarp();
            for (int x = lane; x < 16 * FL_BK; x += 32) {
                int r = x / FL_BK, c = x % FL_BK, i = q0 + wp * 16 + r, j = k0 + c;
                float pk = 0.0f, ds = 0.0f;
                if (i < L && j < L)
                    fl_grad_pair(sSw[r * SW + c], sGw[x], sLse[wp * 16 + r], sDv[wp * 16 + r], a.scale,
                                 fl_mult(a.rng, b, h, a.NH, a.Tp, i, j, a.p, a.dscale), mask, b, a.Tp, j, &pk, &ds);
                sDw[x] = fl_t<T>(ds);
            }
            __syncwarp();
            /* dQ_w += dS_w K */
            fl_mma_rows<T, ND>(dqa, sDw, FL_BK, sK, FL_BK / 16);
        }
        __syncwarp();
        fl_store_rows(dq, sSw, dqa, nd, r0, L, q0 + wp * 16, a.ld, h, HS, lane, a.accumulate);
    }
}

template <typename T, int ND>
static cudaError_t fl_backward(cudaStream_t s, T *dq, T *dk, T *dv, float *dvec, const T *dout, const T *out,
                               const T *q, const T *k, const T *v, const float *lse, const backend_windows *w, int NH,
                               int HS, int ld, float p, philox_stream rng, int accumulate)
{
    dim3 grid((unsigned)((w->max_len + FL_BQ - 1) / FL_BQ), (unsigned)NH, (unsigned)w->B);
    float dscale = p >= 1.0f ? 0.0f : 1.0f / (1.0f - p), scale = backend_score_scale(HS);
    size_t rows = (size_t)w->N * NH;
    FL_LAUNCH(flash_dvec_kernel<T>, (unsigned)((rows + 255) / 256), 256, 0, s, dvec, dout, out, w->N, NH, HS);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
    fl_bwd_consts a = {w->N, w->T, NH, NH * HS, ld, scale, p, dscale, rng, accumulate};
    if (dk || dv) {
        FL_LAUNCH((flash_bwd_kv_kernel<T, ND>), grid, FL_THREADS, fl_kv_shared(HS), s, dk, dv, dout, q, k, v, lse, dvec,
                  w->cu_seqlens, w->mask, a);
        if ((e = cudaGetLastError()) != cudaSuccess) return e;
    }
    if (dq) {
        FL_LAUNCH((flash_bwd_q_kernel<T, ND>), grid, FL_THREADS, fl_q_shared(HS), s, dq, dout, q, k, v, lse, dvec, w->cu_seqlens,
                  w->mask, a);
        e = cudaGetLastError();
    }
    return e;
}

cudaError_t flash_attention_backward(cudaStream_t stream, cudaDataType_t t, void *dq, void *dk, void *dv, float *dvec,
                                     const void *dout, const void *out, const void *q, const void *k, const void *v,
                                     const float *lse, const backend_windows *w, int NH, int HS, int ldqkv,
                                     float p, philox_stream rng, int accumulate)
{
    if (!flash_attention_supported(HS) || !fl_grid_ok(w, NH) || ldqkv < NH * HS ||
        fl_kv_shared(HS) > FL_SHARED_MAX || fl_q_shared(HS) > FL_SHARED_MAX)
        return cudaErrorInvalidValue;
    if (t == CUDA_R_16F)
        return fl_by_hs(HS, [&](auto nd) {
            typedef __half H;
            return fl_backward<H, decltype(nd)::value>(stream, (H *)dq, (H *)dk, (H *)dv, dvec, (const H *)dout,
                                                       (const H *)out, (const H *)q, (const H *)k, (const H *)v, lse,
                                                       w, NH, HS, ldqkv, p, rng, accumulate);
        });
    if (t == CUDA_R_16BF)
        return fl_by_hs(HS, [&](auto nd) {
            typedef __nv_bfloat16 B16;
            return fl_backward<B16, decltype(nd)::value>(stream, (B16 *)dq, (B16 *)dk, (B16 *)dv, dvec,
                                                         (const B16 *)dout, (const B16 *)out, (const B16 *)q,
                                                         (const B16 *)k, (const B16 *)v, lse, w, NH, HS, ldqkv, p, rng,
                                                         accumulate);
        });
    return cudaErrorInvalidValue;
}
