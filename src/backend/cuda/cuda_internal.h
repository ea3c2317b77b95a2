/* The CUDA backend, inside (CUDA C++ only): the context, the error-check
 * macros, the workspace and the ops, split over these files:
 *   cuda_ctx.cu        the context's services: failures, the allocator
 *                      (limit, peak), the workspace
 *   cuda_gemm.cu       cuBLASLt GEMMs, conversions, column sums (the ops' products)
 *   cuda_act.cuh       the activation type in kernels (ctx->atype: load, store)
 *   cuda_weights.cu    the 16-bit weight copies the GEMMs read in fp16/bf16
 * and the ops by job, as the CPU backend's ops_*.c, each kernel beside its
 * launcher:
 *   cuda_dense.cu      embedding, layernorm, matmul, dropout, add
 *   cuda_attention.cu  self-attention: padded windows (batched GEMMs), and
 *                      the dispatch to packed windows and the flash kernels
 *   cuda_varlen.cu     self-attention of packed windows (fp32 kernels)
 *   cuda_flash.cu      self-attention on Tensor Cores in 16 bits (cuda_flash.h)
 *   cuda_loss.cu       QA loss, sum_squares, scale, all_finite, AdamW
 *   cuda_fused.cu      fused ops: GELU, residual + dropout + LayerNorm,
 *                      embeddings + LayerNorm, adamw_multi (cuda_fused.h)
 * and above them cuda_backend.cu: the memory ops, the op table, creation
 * and the probe. Calls go one way, down this list's layers: the table calls
 * the ops, the ops call the services and the products, and nothing calls
 * the table (scripts/house_check.sh checks the objects' calls).
 *
 * Letters and the =/+= convention are backend.h's. Ops run in order on the
 * context's stream; they return nothing, so a failure (a CUDA error, an
 * allocation past --gpu-mem-limit) is recorded in the context (the first
 * one wins), every later op returns at once, and the next sync reports it.
 *
 * Determinism: no float atomics. Every reduction has an order fixed by the
 * sizes (column sums in two stages of fixed chunks, the word-embedding
 * gradient through a stable sort), so the same inputs give the same bytes
 * on the same GPU and cuBLASLt version. */
#ifndef BERTC_CUDA_INTERNAL_H
#define BERTC_CUDA_INTERNAL_H

extern "C" {
#include "backend/backend.h"
#include "backend/select.h"
#include "core/err.h"
}
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_ws.h"
#include "backend/cuda_module.h"

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <stddef.h>
#include <stdint.h>

/* Every kernel launch: CUDA_LAUNCH(kernel, grid, block, shared bytes,
 * stream, arguments...) is kernel<<<grid, block, shared, stream>>>(arguments)
 * under nvcc. tests/cudaemu compiles these files with the host compiler, and
 * there it is the CPU stand-in's launcher (CUDAEMU_LAUNCH), which checks the
 * configuration and every pointer argument and runs the grid. Likewise
 * CUDA_DYN_SHARED(type, name) declares the block's dynamic shared memory. */
#ifdef CUDAEMU
#define CUDA_LAUNCH(kernel, grid, block, shared, stream, ...)                                                  \
    CUDAEMU_LAUNCH(kernel, grid, block, shared, stream, __VA_ARGS__)
#define CUDA_DYN_SHARED(type, name) CUDAEMU_DYN_SHARED(type, name)
#else
#define CUDA_LAUNCH(kernel, grid, block, shared, stream, ...) kernel<<<grid, block, shared, stream>>>(__VA_ARGS__)
#define CUDA_DYN_SHARED(type, name) extern __shared__ type name[]
/* Tells the stand-in's race check where a tensor carved out of a larger
 * allocation ends (docs/cudaemu.md); nothing on a GPU. */
#define CUDAEMU_ANNOTATE_SUBBUFFER(p, bytes, name) ((void)0)
/* Tells it which tensors the next launch reaches through a table in
 * device memory (count entries of type, each one's pointer field to its
 * int64_t nfield elements of elem bytes); nothing on a GPU. */
#define CUDAEMU_ANNOTATE_TABLE(tab, count, type, field, nfield, elem) ((void)0)
#endif

/* The element type of GEMM inputs. */
typedef enum { GEMM_F32 = 0, GEMM_F16, GEMM_BF16 } gemm_type;

typedef struct {
    void *p;
    size_t bytes;
} cuda_alloc_rec;

/* The 16-bit copy of an fp32 allocation that GEMMs read weights from, in
 * fp16 and bf16 (cuda_weights.cu): GEMMs have read the floats [read_lo,
 * read_hi) of it (the span the copy holds; none when read_lo >= read_hi),
 * and [stale_lo, stale_hi), inside that span, were written since its last
 * refresh (none when stale_lo >= stale_hi). */
typedef struct {
    const char *base; /* the fp32 allocation */
    size_t nf;        /* its floats (its rounded bytes / 4) */
    void *p16;        /* nf elements of the context's gtype */
    size_t read_lo, read_hi;
    size_t stale_lo, stale_hi;
} cuda_wcopy;

/* One cached cuBLASLt heuristic answer, keyed by everything it depends on. */
typedef struct {
    int key[20];
    long long strides[3];
    cublasLtMatmulAlgo_t algo;
    int used;
} gemm_cache_entry;

#define GEMM_CACHE_SIZE 128

typedef struct {
    int device;
    precision_kind prec; /* resolved */
    gemm_type gtype;     /* GEMM input type of prec */
    gemm_type atype;     /* element type of activation memory (backend_act): gtype in fp16 and bf16,
                          * GEMM_F32 in fp32 and tf32 (cuda_ws_act_elem) */
    int sm_count;
    cudaStream_t stream;
    cublasLtHandle_t lt;
    void *lt_ws;
    double *red;         /* CUDA_WS_REDUCE_BLOCKS partial sums, then result slots */
    int *flag;           /* all_finite's result */
    int *dev_err;        /* bad input a kernel met (CUDA_DEV_ERR_*), checked by sync */
    void *ws;            /* the grown workspace */
    size_t ws_bytes;
    /* Allocator bookkeeping: every live allocation, bytes in use, peak, limit. */
    cuda_alloc_rec *recs;
    int nrecs, caprecs;
    int64_t used, peak, limit;
    int error;
    char error_msg[512];
    gemm_cache_entry cache[GEMM_CACHE_SIZE];
    int cache_next;
    /* adamw_multi's tensor table (cuda_fused.cu): on the device, and the
     * host copy it was uploaded from (uploaded again when it changes). */
    void *mt_dev, *mt_host;
    int mt_n, mt_cap;
    /* The 16-bit weight copies (cuda_weights.cu; none in fp32 and tf32),
     * and how many conversion launches have refreshed them. */
    cuda_wcopy *wc;
    int nwc, capwc;
    int64_t wc_refreshes;
} cuda_ctx;

/* Codes kernels store in ctx->dev_err (a plain store: order-free). */
#define CUDA_DEV_ERR_TYPE_ID 1 /* a token type id outside 0..CUDA_WS_MAX_TYPES-1 */

/* Records the first failure: "file:line function: statement: what". */
void cuda_fail_at(cuda_ctx *ctx, const char *stmt, const char *file, int line, const char *func, const char *what);

/* In an op (returns void): checks a CUDA runtime call or the last launch. */
#define CUDA_TRY(ctx, stmt)                                                                        \
    do {                                                                                           \
        cudaError_t e_ = (stmt);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            cuda_fail_at((ctx), #stmt, __FILE__, __LINE__, __func__, cudaGetErrorString(e_));      \
            return;                                                                                \
        }                                                                                          \
    } while (0)
#define CUDA_LAUNCHED(ctx) CUDA_TRY(ctx, cudaGetLastError())

/* In a function returning an error code: err_set with the same four parts. */
#define CUDA_CHECK(stmt)                                                                           \
    do {                                                                                           \
        cudaError_t e_ = (stmt);                                                                   \
        if (e_ != cudaSuccess)                                                                     \
            return err_set(ERR_RUNTIME, "%s:%d %s: %s: %s", __FILE__, __LINE__, __func__, #stmt,   \
                           cudaGetErrorString(e_));                                                \
    } while (0)

/* cuBLASLt status as text; "out of memory" for an allocation failure so
 * that --micro-batch auto recognises it. */
const char *cuda_cublas_status_text(cublasStatus_t s);

/* Allocation through the bookkeeping (limit, peak); NULL with the error set
 * (err_set, "out of memory" in the message) on failure. */
void *cuda_mem_alloc(cuda_ctx *ctx, size_t bytes);
void cuda_mem_release(cuda_ctx *ctx, void *p);

/* The workspace, at least `bytes` long; NULL after recording the failure. */
void *cuda_ws_get(cuda_ctx *ctx, size_t bytes);
/* Carves aligned parts out of a workspace: p = cuda_ws_take(&cur, bytes). */
static inline void *cuda_ws_take(char **cur, size_t bytes)
{
    void *p = *cur;
    *cur += cuda_ws_round(bytes);
    CUDAEMU_ANNOTATE_SUBBUFFER(p, bytes, "a workspace part (cuda_ws_take)");
    return p;
}

/* A grid-stride loop of i over [0, n). */
#define GRID_STRIDE(i, n) \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

/* Blocks for n threads of `threads`, at least 1, capped for a grid-stride loop. */
static inline unsigned cuda_blocks(size_t n, unsigned threads)
{
    size_t b = (n + threads - 1) / threads;
    if (b < 1) b = 1;
    if (b > 65535u * 16u) b = 65535u * 16u;
    return (unsigned)b;
}

/* D (fp32, m x n, column-major, ldd) = alpha op(A) op(B) + beta D, batched
 * with strides (elements); A and B of the GEMM input type t. Records a
 * failure in ctx and returns non-zero on error. */
int cuda_gemm(cuda_ctx *ctx, int ta, int tb, int m, int n, int k, const void *A, int lda, long long sA,
              const void *B, int ldb, long long sB, float *D, int ldd, long long sD, int batch, float alpha,
              float beta, gemm_type t);
/* sum_squares's first stage on x[n] (cuda_loss.cu): the partial sums in
 * part, whose count it returns (at most CUDA_WS_REDUCE_BLOCKS, 0 for n 0);
 * adding them with cuda_block_tree_sum over 256 threads gives
 * cuda_sum_squares's result, bit for bit. */
unsigned cuda_sum_squares_parts(cuda_ctx *ctx, double *part, const float *x, size_t n);
/* cuda_gemm with D of type dt (GEMM_F32, or t's 16-bit type with 16-bit
 * inputs: cuBLASLt's rule) and cuBLASLt's epilogues the linear layer uses.
 * GEMM_EPI_BIAS: D = alpha op(A) op(B) + beta D + bias[i] (bias[m] of D's
 * type, batch b's at bias + b * sbias). GEMM_EPI_BGRADB: as plain, and
 * bias[j] = sum_k op(B)[k, j] (n elements of D's type, written, not added
 * to), with B transposed (tb = 1: the one form NVIDIA's own code uses; the
 * stand-in refuses the others). */
typedef enum { GEMM_EPI_NONE = 0, GEMM_EPI_BIAS, GEMM_EPI_BGRADB } gemm_epi;
int cuda_gemm_epi(cuda_ctx *ctx, int ta, int tb, int m, int n, int k, const void *A, int lda, long long sA,
                  const void *B, int ldb, long long sB, void *D, int ldd, long long sD, int batch, float alpha,
                  float beta, gemm_type t, gemm_type dt, gemm_epi epi, void *bias, long long sbias);
/* fp32 -> GEMM input type, n elements (a copy for GEMM_F32). */
void cuda_convert(cuda_ctx *ctx, void *dst, const float *src, size_t n, gemm_type t);
/* The 16-bit weight copies (cuda_weights.cu says how they stay right).
 * cuda_weights16: the copy of w[0, n) a GEMM reads (ctx->gtype), its stale
 * part refreshed first in one conversion launch; the copy of w's
 * allocation is made at the first read. NULL with the failure recorded.
 * cuda_weights_copy_of: the copy of p[0, n) as it is (current or not), or
 * NULL where p's allocation has none: adamw_multi writes it beside p.
 * cuda_weights_wrote: every op that writes fp32 memory a weight may live
 * in calls it with what it writes (before or after queueing the write);
 * nothing without copies. cuda_weights_release: drops the copy of the
 * allocation at p, which the table's release calls before freeing p. */
const void *cuda_weights16(cuda_ctx *ctx, const float *w, size_t n);
void *cuda_weights_copy_of(cuda_ctx *ctx, const float *p, size_t n);
void cuda_weights_wrote(cuda_ctx *ctx, const void *p, size_t bytes);
void cuda_weights_release(cuda_ctx *ctx, const void *p);
/* out[c] += sum over the N rows of x[r * C + c] (x of type t),
 * deterministically; part is workspace of cuda_ws_colsum_chunks(N) * C
 * floats. */
void cuda_colsum_add(cuda_ctx *ctx, float *out, const void *x, gemm_type t, int N, int C, float *part);

/* embedding_backward (cuda_dense.cu) with dout of type `at`: the op passes
 * ctx->atype, the fused embedding LayerNorm backward its fp32 scratch. */
void cuda_embedding_backward_as(cuda_ctx *ctx, gemm_type at, float *dwte, float *dwpe, float *dwtt, const void *dout,
                                const int32_t *ids, const int32_t *types, const int32_t *pos, int N, int T, int C);
/* The ops: cuda_NAME for every line of backend/ops.def, and the optional
 * ones this backend has. */
#define BACKEND_OP(name, ret, params) ret cuda_##name params;
#define BACKEND_OPT(name, cpu, cuda, ret, params) BACKEND_IF_##cuda(ret cuda_##name params;)
#include "backend/ops.def"

/* cuda_varlen.cu: attention over packed windows (w->cu_seqlens set), called
 * by cuda_attention_forward and _backward off the flash kernels;
 * activations of ctx->atype, probs and scratch fp32. */
void cuda_attention_packed_forward(cuda_ctx *ctx, void *out, float *probs, const void *q, const void *k,
                                   const void *v, const backend_windows *w, int NH, int HS, float p,
                                   philox_stream rng);
void cuda_attention_packed_backward(cuda_ctx *ctx, void *dq, void *dk, void *dv, float *scratch, const void *dout,
                                    const void *q, const void *k, const void *v, const float *probs,
                                    const backend_windows *w, int NH, int HS, float p, philox_stream rng);

/* Dropout's multiplier for uniform u: torch multiplies by a 0/1 mask
 * divided by (1 - p); 0 when p >= 1. */
static inline float cuda_dropout_scale(float p)
{
    return p >= 1.0f ? 0.0f : 1.0f / (1.0f - p);
}

/* The four uniforms of Philox block `blk` of a stream, as philox_uniform
 * draws them (24 bits each). */
__device__ __forceinline__ void cuda_philox_uniform4(philox_stream s, uint64_t blk, float u[4])
{
    philox_u32x4 r = philox4x32((uint32_t)blk, (uint32_t)(blk >> 32), s.stream, s.step, (uint32_t)s.seed,
                                (uint32_t)(s.seed >> 32));
    for (int l = 0; l < 4; l++) u[l] = (float)(r.v[l] >> 8) * (1.0f / 16777216.0f);
}

/* Block-wide max and sum of v over NT threads (a multiple of 32); sh holds
 * NT / 32 floats. Every thread gets the result. */
template <int NT> __device__ __forceinline__ float cuda_block_max(float v, float *sh)
{
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    int w = threadIdx.x / 32, lane = threadIdx.x % 32;
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    float m = sh[0];
    for (int i = 1; i < NT / 32; i++) m = fmaxf(m, sh[i]);
    return m;
}

template <int NT> __device__ __forceinline__ float cuda_block_sum(float v, float *sh)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    int w = threadIdx.x / 32, lane = threadIdx.x % 32;
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    float s = 0;
    for (int i = 0; i < NT / 32; i++) s += sh[i];
    return s;
}

/* The sum of v over a block of NT threads (a power of two) in double, in
 * one fixed tree (the same bits for the same inputs); sh holds NT doubles.
 * Every thread gets the result. */
template <int NT> __device__ __forceinline__ double cuda_block_tree_sum(double v, double *sh)
{
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int s = NT / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
        __syncthreads();
    }
    return sh[0];
}

/* The middle of a row softmax over n values x spread over NT threads, mx
 * this thread's max of them: x[j] = exp(x[j] - block max) in place; returns
 * 1 / the block's sum of those. */
template <int NT> __device__ __forceinline__ float cuda_block_exp_inv(float *x, int n, float mx, float *sh)
{
    mx = cuda_block_max<NT>(mx, sh);
    float s = 0;
    for (int j = threadIdx.x; j < n; j += NT) {
        float e = expf(__fsub_rn(x[j], mx));
        x[j] = e;
        s += e;
    }
    return 1.0f / cuda_block_sum<NT>(s, sh);
}

#endif
