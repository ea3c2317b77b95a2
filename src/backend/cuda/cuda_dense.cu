/* Dense ops of the CUDA backend, as ops_dense.c on the CPU: embedding,
 * layernorm, matmul, dropout, add (GELU is cuda_fused.cu's); each kernel beside its launcher.
 * Letters and the =/+= convention are backend.h's. Each op does the CPU
 * backend's arithmetic in the same order where that is cheap (so several
 * agree bit for bit: embeddings, dropout, add); explicit __fadd_rn /
 * __fmul_rn keep nvcc from fusing a multiply and an add the CPU rounds
 * separately. Activations are of ctx->atype: the kernels are templates on
 * it (cuda_act.cuh), fp32 inside, rounding once where they store. */
#include "backend/cuda/cuda_act.cuh"

#include <cub/cub.cuh>

/* ------------------------------------------------------------------------
 * Embedding. As transformers: (word + token type) + position. */

template <typename T>
__global__ void embedding_forward_kernel(T *out, const int32_t *ids, const int32_t *types, const int32_t *pos,
                                         const float *wte, const float *wpe, const float *wtt, int Tw, int C, size_t n)
{
    GRID_STRIDE(i, n)
    {
        size_t row = i / (size_t)C;
        int c = (int)(i % (size_t)C);
        int t = pos ? pos[row] : (int)(row % (size_t)Tw);
        float we = wte[(size_t)ids[row] * C + c];
        float te = wtt[(size_t)(types ? types[row] : 0) * C + c];
        out[i] = act_of<T>(__fadd_rn(__fadd_rn(we, te), wpe[(size_t)t * C + c]));
    }
}

template <typename T>
static void embedding_forward(cuda_ctx *ctx, void *out, const int32_t *ids, const int32_t *types, const int32_t *pos,
                              const float *wte, const float *wpe, const float *wtt, int Tw, int C, size_t n)
{
    CUDA_LAUNCH(embedding_forward_kernel<T>, cuda_blocks(n, 256), 256, 0, ctx->stream,
        (T *)out, ids, types, pos, wte, wpe, wtt, Tw, C, n);
}

// out (N,C); ids, types, pos (N) (pos NULL: row % T); wte (V,C), wpe (P,C), wtt (TV,C)
void cuda_embedding_forward(void *vctx, backend_act *out, const int32_t *ids, const int32_t *types, const int32_t *pos,
                            const float *wte, const float *wpe, const float *wtt, int N, int T, int C)
{
    cuda_ctx *ctx = (cuda_ctx *)vctx;
    size_t n = (size_t)N * C;
    if (ctx->error || n == 0) return;
    ACT_DISPATCH(ctx->atype, embedding_forward, ctx, out, ids, types, pos, wte, wpe, wtt, T, C, n);
    CUDA_LAUNCHED(ctx);
}

__global__ void iota_kernel(int32_t *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = i;
}

/* A table's gradient from rows sorted by their key (token id, or position
 * in a packed batch): one block per position of the sorted rows; the first
 * position of each key sums that key's rows in row order (the sort is
 * stable), as the CPU backend does, so the sums agree bit for bit. A thread
 * per column. */
template <typename T>
__global__ void sorted_grad_kernel(float *dtab, const T *dout, const int32_t *sorted_keys, const int32_t *rows, int N,
                                   int C)
{
    int i = blockIdx.x;
    int key = sorted_keys[i];
    if (i > 0 && sorted_keys[i - 1] == key) return;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float g = dtab[(size_t)key * C + c];
        for (int j = i; j < N && sorted_keys[j] == key; j++) g = __fadd_rn(g, act_f(dout[(size_t)rows[j] * C + c]));
        dtab[(size_t)key * C + c] = g;
    }
}

/* Padded rows (B,Tw): dwpe[t, c] += dout[b, t, c] for b in order. */
template <typename T> __global__ void pos_grad_kernel(float *dwpe, const T *dout, int B, int Tw, int C)
{
    size_t n = (size_t)Tw * C;
    GRID_STRIDE(i, n)
    {
        float g = dwpe[i];
        for (int b = 0; b < B; b++) g = __fadd_rn(g, act_f(dout[(size_t)b * n + i]));
        dwpe[i] = g;
    }
}

/* Token types: which types occur, partial sums per chunk of rows and type,
 * then the chunks in order into the rows of the types that occur (only
 * those exist for certain: bert.c checks the ids against type_vocab_size,
 * which the op is not told). The flags: one block of CUDA_WS_MAX_TYPES
 * warps, warp w storing present[w] once (many threads storing the same 1
 * would be a data race in CUDA's memory model; the stand-in's race check
 * stops on it); warp 0 reports an id out of range. */
__global__ void type_present_kernel(int *present, int *dev_err, const int32_t *types, int N)
{
    int w = threadIdx.x / 32, lane = threadIdx.x % 32, found = 0, bad = 0;
    for (int i = lane; i < N; i += 32) {
        int t = types ? types[i] : 0;
        found |= t == w;
        bad |= t < 0 || t >= CUDA_WS_MAX_TYPES;
    }
    unsigned any = __ballot_sync(0xffffffffu, found), any_bad = __ballot_sync(0xffffffffu, bad);
    if (lane == 0) present[w] = any != 0;
    if (lane == 0 && w == 0 && any_bad) *dev_err = CUDA_DEV_ERR_TYPE_ID;
}

template <typename T> __global__ void type_grad_stage1(float *part, const T *dout, const int32_t *types, int N, int C)
{
    int c = blockIdx.y * blockDim.x + threadIdx.x;
    int chunk = blockIdx.x;
    if (c >= C) return;
    int r0 = chunk * CUDA_WS_COLSUM_ROWS, r1 = min(N, r0 + CUDA_WS_COLSUM_ROWS);
    float *p = part + (size_t)chunk * CUDA_WS_MAX_TYPES * C;
    for (int t = 0; t < CUDA_WS_MAX_TYPES; t++) p[(size_t)t * C + c] = 0.0f;
    for (int r = r0; r < r1; r++) {
        int t = types ? types[r] : 0;
        if (t < 0 || t >= CUDA_WS_MAX_TYPES) continue;
        p[(size_t)t * C + c] = __fadd_rn(p[(size_t)t * C + c], act_f(dout[(size_t)r * C + c]));
    }
}

__global__ void type_grad_stage2(float *dwtt, const float *part, const int *present, int nchunks, int C)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int t = blockIdx.y;
    if (c >= C || !present[t]) return;
    float g = dwtt[(size_t)t * C + c];
    for (int k = 0; k < nchunks; k++) g = __fadd_rn(g, part[((size_t)k * CUDA_WS_MAX_TYPES + t) * C + c]);
    dwtt[(size_t)t * C + c] = g;
}

/* rows sorted by keys[N] (stable: equal keys keep row order) into dtab
 * (keys x C) += dout rows; keys_out, vals_in, vals_out and sort_ws are
 * workspace, temp bytes of it for the sort. */
template <typename T>
static void sorted_grad(cuda_ctx *ctx, float *dtab, const T *dout, const int32_t *keys, int N, int C,
                        int32_t *keys_out, int32_t *vals_in, int32_t *vals_out, void *sort_ws, size_t temp)
{
    CUDA_LAUNCH(iota_kernel, (unsigned)((N + 255) / 256), 256, 0, ctx->stream, vals_in, N);
    CUDA_LAUNCHED(ctx);
    size_t tb = temp;
    CUDA_TRY(ctx, cub::DeviceRadixSort::SortPairs(sort_ws, tb, keys, keys_out, vals_in, vals_out, N, 0, 32,
                                                  ctx->stream));
    /* A thread per column: a frequent key (padding, [CLS], position 0) is
     * one long serial sum, so it should not also loop over columns. */
    unsigned wt = (unsigned)(C < 1024 ? (C + 31) / 32 * 32 : 1024);
    CUDA_LAUNCH(sorted_grad_kernel<T>, (unsigned)N, wt, 0, ctx->stream, dtab, dout, keys_out, vals_out, N, C);
    CUDA_LAUNCHED(ctx);
}

template <typename T>
static void embedding_backward(cuda_ctx *ctx, float *dwte, float *dwpe, float *dwtt, const void *vdout,
                               const int32_t *ids, const int32_t *types, const int32_t *pos, int N, int Tw, int C)
{
    const T *dout = (const T *)vdout;
    size_t sort_temp = 0;
    if (dwte || (dwpe && pos)) {
        cudaError_t e = cub::DeviceRadixSort::SortPairs(NULL, sort_temp, (const int32_t *)NULL, (int32_t *)NULL,
                                                        (const int32_t *)NULL, (int32_t *)NULL, N, 0, 32, ctx->stream);
        CUDA_TRY(ctx, e);
    }
    /* The planner counts the bound; use it unless CUB wants more. */
    size_t bound = cuda_ws_sort_temp_bound((size_t)N);
    size_t temp = sort_temp > bound ? sort_temp : bound;
    char *cur = (char *)cuda_ws_get(ctx, cuda_ws_embedding_backward((size_t)N, (size_t)C, temp));
    if (!cur) return;
    int32_t *keys_out = (int32_t *)cuda_ws_take(&cur, (size_t)N * 4);
    int32_t *vals_in = (int32_t *)cuda_ws_take(&cur, (size_t)N * 4);
    int32_t *vals_out = (int32_t *)cuda_ws_take(&cur, (size_t)N * 4);
    int *present = (int *)cuda_ws_take(&cur, CUDA_WS_MAX_TYPES * 4);
    void *sort_ws = cuda_ws_take(&cur, temp);
    float *part = (float *)cur;

    if (dwte) sorted_grad(ctx, dwte, dout, ids, N, C, keys_out, vals_in, vals_out, sort_ws, sort_temp);
    if (dwpe && pos && !ctx->error) {
        /* the workspace again: the stream runs the word sort's kernels first */
        sorted_grad(ctx, dwpe, dout, pos, N, C, keys_out, vals_in, vals_out, sort_ws, sort_temp);
    } else if (dwpe && !ctx->error) {
        CUDA_LAUNCH(pos_grad_kernel<T>, cuda_blocks((size_t)Tw * C, 256), 256, 0, ctx->stream, dwpe, dout, N / Tw, Tw,
            C);
        CUDA_LAUNCHED(ctx);
    }
    if (dwtt && !ctx->error) {
        CUDA_TRY(ctx, cudaMemsetAsync(present, 0, CUDA_WS_MAX_TYPES * 4, ctx->stream));
        CUDA_LAUNCH(type_present_kernel, 1, CUDA_WS_MAX_TYPES * 32, 0, ctx->stream,
            present, ctx->dev_err, types, N);
        CUDA_LAUNCHED(ctx);
        int nchunks = (int)cuda_ws_colsum_chunks((size_t)N);
        dim3 g1((unsigned)nchunks, (unsigned)((C + 127) / 128));
        CUDA_LAUNCH(type_grad_stage1<T>, g1, 128, 0, ctx->stream, part, dout, types, N, C);
        CUDA_LAUNCHED(ctx);
        dim3 g2((unsigned)((C + 127) / 128), (unsigned)CUDA_WS_MAX_TYPES);
        CUDA_LAUNCH(type_grad_stage2, g2, 128, 0, ctx->stream, dwtt, part, present, nchunks, C);
        CUDA_LAUNCHED(ctx);
    }
}

void cuda_embedding_backward_as(cuda_ctx *ctx, gemm_type at, float *dwte, float *dwpe, float *dwtt, const void *dout,
                                const int32_t *ids, const int32_t *types, const int32_t *pos, int N, int T, int C)
{
    if (ctx->error || N <= 0 || C <= 0) return;
    ACT_DISPATCH(at, embedding_backward, ctx, dwte, dwpe, dwtt, dout, ids, types, pos, N, T, C);
}

void cuda_embedding_backward(void *vctx, float *dwte, float *dwpe, float *dwtt, const backend_act *dout,
                             const int32_t *ids, const int32_t *types, const int32_t *pos, int N, int T, int C)
{
    cuda_ctx *ctx = (cuda_ctx *)vctx;
    cuda_embedding_backward_as(ctx, ctx->atype, dwte, dwpe, dwtt, dout, ids, types, pos, N, T, C);
}

/* ------------------------------------------------------------------------
 * LayerNorm: one warp per row. Two passes for the mean and the biased
 * variance; out = fma((x - mean) * rstd, w, b) as the CPU backend. */

__device__ __forceinline__ float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

template <typename T>
__global__ void layernorm_forward_kernel(T *out, float *mean, float *rstd, const T *inp, const float *w, const float *b,
                                         int N, int C, float eps)
{
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (row >= N) return;
    const T *x = inp + (size_t)row * C;
    float s = 0;
    for (int c = lane; c < C; c += 32) s += act_f(x[c]);
    float m = warp_sum(s) / (float)C;
    float v = 0;
    for (int c = lane; c < C; c += 32) {
        float d = act_f(x[c]) - m;
        v += d * d;
    }
    float rs = 1.0f / sqrtf(warp_sum(v) / (float)C + eps);
    T *o = out + (size_t)row * C;
    for (int c = lane; c < C; c += 32) o[c] = act_of<T>(fmaf(__fmul_rn(__fsub_rn(act_f(x[c]), m), rs), w[c], b[c]));
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = rs;
    }
}

template <typename T>
static void layernorm_forward(cuda_ctx *ctx, void *out, float *mean, float *rstd, const void *inp, const float *w,
                              const float *b, int N, int C, float eps)
{
    CUDA_LAUNCH(layernorm_forward_kernel<T>, (unsigned)((N + 3) / 4), 128, 0, ctx->stream,
        (T *)out, mean, rstd, (const T *)inp, w, b, N, C, eps);
}

// out (N,C); mean, rstd (N); inp (N,C); w, b (C)
void cuda_layernorm_forward(void *vctx, backend_act *out, float *mean, float *rstd, const backend_act *inp,
                            const float *w, const float *b, int N, int C, float eps)
{
    cuda_ctx *ctx = (cuda_ctx *)vctx;
    if (ctx->error || N <= 0 || C <= 0) return;
    ACT_DISPATCH(ctx->atype, layernorm_forward, ctx, out, mean, rstd, inp, w, b, N, C, eps);
    CUDA_LAUNCHED(ctx);
}

/* dinp += rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dout * w */
template <typename T>
__global__ void layernorm_backward_kernel(T *dinp, const T *dout, const T *inp, const float *w, const float *mean,
                                          const float *rstd, int N, int C)
{
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (row >= N) return;
    const T *x = inp + (size_t)row * C, *d = dout + (size_t)row * C;
    float m = mean[row], rs = rstd[row];
    float sg = 0, sgx = 0;
    for (int c = lane; c < C; c += 32) {
        float g = act_f(d[c]) * w[c];
        sg += g;
        sgx += g * ((act_f(x[c]) - m) * rs);
    }
    float mg = warp_sum(sg) / (float)C, mgx = warp_sum(sgx) / (float)C;
    T *di = dinp + (size_t)row * C;
    for (int c = lane; c < C; c += 32) {
        float xhat = __fmul_rn(__fsub_rn(act_f(x[c]), m), rs);
        float g = __fmul_rn(act_f(d[c]), w[c]);
        di[c] = act_of<T>(__fadd_rn(act_f(di[c]), __fmul_rn(rs, __fsub_rn(__fsub_rn(g, mg), __fmul_rn(xhat, mgx)))));
    }
}

/* dw, db partials: per chunk of rows, column sums of dout * xhat and dout. */
template <typename T>
__global__ void layernorm_param_stage1(float *pw, float *pb, const T *dout, const T *inp, const float *mean,
                                       const float *rstd, int N, int C)
{
    int c = blockIdx.y * blockDim.x + threadIdx.x;
    int chunk = blockIdx.x;
    if (c >= C) return;
    int r0 = chunk * CUDA_WS_COLSUM_ROWS, r1 = min(N, r0 + CUDA_WS_COLSUM_ROWS);
    double aw = 0, ab = 0;
    for (int r = r0; r < r1; r++) {
        float d = act_f(dout[(size_t)r * C + c]);
        float xhat = __fmul_rn(__fsub_rn(act_f(inp[(size_t)r * C + c]), mean[r]), rstd[r]);
        aw += (double)d * xhat;
        ab += d;
    }
    pw[(size_t)chunk * C + c] = (float)aw;
    pb[(size_t)chunk * C + c] = (float)ab;
}

__global__ void layernorm_param_stage2(float *dw, float *db, const float *pw, const float *pb, int nchunks, int C)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    double aw = 0, ab = 0;
    for (int k = 0; k < nchunks; k++) {
        aw += pw[(size_t)k * C + c];
        ab += pb[(size_t)k * C + c];
    }
    if (dw) dw[c] = __fadd_rn(dw[c], (float)aw);
    if (db) db[c] = __fadd_rn(db[c], (float)ab);
}

template <typename T>
static void layernorm_dinp(cuda_ctx *ctx, void *dinp, const void *dout, const void *inp, const float *w,
                           const float *mean, const float *rstd, int N, int C)
{
    CUDA_LAUNCH(layernorm_backward_kernel<T>, (unsigned)((N + 3) / 4), 128, 0, ctx->stream,
        (T *)dinp, (const T *)dout, (const T *)inp, w, mean, rstd, N, C);
}

template <typename T>
static void layernorm_params(cuda_ctx *ctx, float *pw, float *pb, const void *dout, const void *inp,
                             const float *mean, const float *rstd, int N, int C, dim3 grid)
{
    CUDA_LAUNCH(layernorm_param_stage1<T>, grid, 128, 0, ctx->stream,
        pw, pb, (const T *)dout, (const T *)inp, mean, rstd, N, C);
}

void cuda_layernorm_backward(void *vctx, backend_act *dinp, float *dw, float *db, const backend_act *dout,
                             const backend_act *inp, const float *w, const float *mean, const float *rstd, int N,
                             int C)
{
    cuda_ctx *ctx = (cuda_ctx *)vctx;
    if (ctx->error || N <= 0 || C <= 0) return;
    if (dinp) {
        ACT_DISPATCH(ctx->atype, layernorm_dinp, ctx, dinp, dout, inp, w, mean, rstd, N, C);
        CUDA_LAUNCHED(ctx);
    }
    if (!dw && !db) return;
    char *cur = (char *)cuda_ws_get(ctx, cuda_ws_layernorm_backward((size_t)N, (size_t)C));
    if (!cur) return;
    int nchunks = (int)cuda_ws_colsum_chunks((size_t)N);
    float *pw = (float *)cuda_ws_take(&cur, (size_t)nchunks * C * 4);
    float *pb = (float *)cuda_ws_take(&cur, (size_t)nchunks * C * 4);
    dim3 g1((unsigned)nchunks, (unsigned)((C + 127) / 128));
    ACT_DISPATCH(ctx->atype, layernorm_params, ctx, pw, pb, dout, inp, mean, rstd, N, C, g1);
    CUDA_LAUNCHED(ctx);
    CUDA_LAUNCH(layernorm_param_stage2, (unsigned)((C + 127) / 128), 128, 0, ctx->stream, dw, db, pw, pb, nchunks, C);
    CUDA_LAUNCHED(ctx);
}

/* ------------------------------------------------------------------------
 * The linear layer: one cuBLASLt call forward, the bias in its epilogue
 * (CUBLASLT_EPILOGUE_BIAS, of the output's type); backward the weight
 * gradient's GEMM carries the bias gradient (CUBLASLT_EPILOGUE_BGRADB, of
 * dout as the GEMM reads it: cuda_matmul_backward says when). fp32/tf32
 * hand the arrays to cuBLASLt as they are. fp16/bf16 read the weights (and
 * a 16-bit output's bias) from their 16-bit copy (matmul_weight,
 * cuda_weights.cu); with fp32 activations they convert inp (and dout) into
 * the workspace, and the GEMMs write fp32; with 16-bit activations
 * (ctx->atype, the same type as ctx->gtype) the GEMMs read inp and dout as
 * they are and write out and dinp in 16 bits (cuBLASLt's D type, rounded
 * once from the fp32 accumulator, the bias of that type as the epilogue
 * wants it); the weight gradient stays an fp32 output.
 *
 * The epilogue adds the bias after the product (torch's addmm, and the CPU
 * backend, start from the bias): the sums differ in rounding, within the
 * bands tests/gpu holds the backend to. BGRADB writes its sum where bertc
 * accumulates (+=) over micro-batches, so it goes to a workspace vector
 * added to db afterwards. cuBLASLt's GELU epilogues are the tanh
 * approximation (not BERT's erf GELU), so GELU stays a kernel. */

/* out[r, c] = b[c] over N rows of OC: only for C = 0 (no product to carry
 * an epilogue). */
template <typename T> __global__ void bias_fill_kernel(T *out, const float *b, size_t N, int OC)
{
    size_t n = N * (size_t)OC;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = act_of<T>(b[i % (size_t)OC]);
}

template <typename T> static void bias_fill(cuda_ctx *ctx, void *out, const float *b, size_t N, int OC)
{
    CUDA_LAUNCH(bias_fill_kernel<T>, cuda_blocks(N * (size_t)OC, 256), 256, 0, ctx->stream, (T *)out, b, N, OC);
}

/* out[i] += x[i] over n */
__global__ void vec_add_kernel(float *out, const float *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = __fadd_rn(out[i], x[i]);
}

static int low_precision(const cuda_ctx *ctx)
{
    return ctx->gtype != GEMM_F32;
}

/* Whether activations are 16-bit: the GEMMs then read and write them as
 * they are (the contract makes atype gtype or fp32). */
static int act16(const cuda_ctx *ctx)
{
    return ctx->atype != GEMM_F32;
}

/* The weight w (n floats) as the GEMMs read it: itself in fp32/tf32; in
 * fp16/bf16 its 16-bit copy (cuda_weights.cu: converted only where a write
 * since the last read made it stale; the optimizer's pass keeps it
 * current), NULL with the failure recorded. The one place a GEMM's weight
 * (or a 16-bit output's bias) is prepared. */
static const void *matmul_weight(cuda_ctx *ctx, const float *w, size_t n)
{
    return low_precision(ctx) ? cuda_weights16(ctx, w, n) : w;
}

/* C = 0: out = the bias rows, or 0 (no product to carry an epilogue). */
static void linear_empty(cuda_ctx *ctx, int n, char *out, long long sout, const float *b, long long sb, int N, int OC)
{
    size_t nout = (size_t)N * OC, es = act_size(ctx->atype);
    for (int i = 0; i < n && !ctx->error; i++) {
        char *o = out + (size_t)i * sout * es;
        if (b) {
            ACT_DISPATCH(ctx->atype, bias_fill, ctx, o, b + (size_t)i * sb, (size_t)N, OC);
            CUDA_LAUNCHED(ctx);
        } else {
            CUDA_TRY(ctx, cudaMemsetAsync(o, 0, nout * es, ctx->stream));
        }
    }
}

/* The product of n linear layers on one input (n = 1: a plain one). w[i]
 * and b[i] are equally spaced (sw, sb floats apart) as are out[i] (sout
 * elements): one strided-batched GEMM, the input shared (stride 0). */
static void linear_forward(cuda_ctx *ctx, int n, void *out, long long sout, const void *inp, const float *w,
                           long long sw, const float *b, long long sb, int N, int C, int OC)
{
    if (C <= 0) {
        linear_empty(ctx, n, (char *)out, sout, b, sb, N, OC);
        return;
    }
    const void *A = w, *B = inp;
    void *bias = (void *)b;
    long long sA = sw, sbias = sb;
    if (low_precision(ctx)) {
        /* the n weights (and biases) in their 16-bit copy, as far apart as in w (and b) */
        A = matmul_weight(ctx, w, (size_t)(n - 1) * (size_t)sw + (size_t)OC * C);
        if (!A) return;
        if (!act16(ctx)) {
            char *cur = (char *)cuda_ws_get(ctx, cuda_ws_matmul_forward_n(1, 0, (size_t)n, (size_t)N, (size_t)C, (size_t)OC));
            if (!cur) return;
            char *xl = (char *)cuda_ws_take(&cur, (size_t)N * C * 2);
            cuda_convert(ctx, xl, (const float *)inp, (size_t)N * C, ctx->gtype);
            B = xl;
        } else if (b && !(bias = (void *)matmul_weight(ctx, b, (size_t)(n - 1) * (size_t)sb + (size_t)OC))) {
            return;
        }
    }
    // out^T (OC x N) = w (stored C x OC, transposed) * inp^T (C x N) [+ b]
    cuda_gemm_epi(ctx, 1, 0, OC, N, C, A, C, sA, B, C, 0, out, OC, sout, n, 1.0f, 0.0f, ctx->gtype, ctx->atype,
                  b ? GEMM_EPI_BIAS : GEMM_EPI_NONE, b ? bias : NULL, sbias);
}

// out (N,OC) = inp (N,C) @ w (OC,C)^T + b (OC)
void cuda_matmul_forward(void *vctx, backend_act *out, const backend_act *inp, const float *w, const float *b, int N,
                         int C, int OC)
{
    cuda_ctx *ctx = (cuda_ctx *)vctx;
    if (ctx->error || N <= 0 || OC <= 0) return;
    linear_forward(ctx, 1, out, 0, inp, w, 0, b, 0, N, C, OC);
}

/* Q, K and V in one GEMM when their weights, biases and outputs are each
 * equally spaced (params.c lays q_w, q_b, k_w, ... out in that order, so
 * the weights are C*C + C floats apart, and bert.c's q, k, v are arrays of
 * one size); otherwise one GEMM each. */
void cuda_matmul_forward_n(void *vctx, int n, backend_act *const *vout, const backend_act *inp,
                           const float *const *w, const float *const *b, int N, int C, int OC)
{
    cuda_ctx *ctx = (cuda_ctx *)vctx;
    if (ctx->error || N <= 0 || OC <= 0 || n <= 0) return;
    /* the outputs' spacing in elements of the activation type */
    long long es = (long long)act_size(ctx->atype);
    char *const *out = (char *const *)vout;
    long long sout = n > 1 ? (out[1] - out[0]) / es : 0, sw = n > 1 ? w[1] - w[0] : 0;
    long long sb = b && n > 1 ? b[1] - b[0] : 0;
    int strided = 1;
    for (int i = 1; i < n; i++)
        strided &= out[i] - out[i - 1] == sout * es && w[i] - w[i - 1] == sw && (!b || b[i] - b[i - 1] == sb);
    /* outputs apart by at least one output, weights by one weight */
    strided &= n == 1 || (sout >= (long long)N * OC && sw >= (long long)OC * C && (!b || sb >= OC));
    if (strided) {
        linear_forward(ctx, n, out[0], sout, inp, w[0], sw, b ? b[0] : NULL, sb, N, C, OC);
        return;
    }
    for (int i = 0; i < n; i++) linear_forward(ctx, 1, out[i], 0, inp, w[i], 0, b ? b[i] : NULL, 0, N, C, OC);
}

/* dinp += dout w, dw += dout^T inp, db += the column sums of dout. The
 * bias gradient rides on the weight gradient's GEMM (BGRADB) where that
 * sums exactly what the op is given: fp32 inputs, or 16-bit activations
 * (dout is then the 16-bit array itself, and the sum is fp32 as the
 * GEMM's output, as torch's autocast sums its fp16 gradient). With fp32
 * activations in tf32/fp16/bf16 the GEMM reads a rounded dout, and a bias
 * gradient that cancels, as qa_outputs' does, would lose its digits
 * (cudaemu_model's PyTorch reference): there, and with no weight-gradient
 * GEMM to carry it, the fp32 column sums. */
void cuda_matmul_backward(void *vctx, backend_act *dinp, float *dw, float *db, const backend_act *dout,
                          const backend_act *inp, const float *w, int N, int C, int OC)
{
    cuda_ctx *ctx = (cuda_ctx *)vctx;
    if (ctx->error || N <= 0 || OC <= 0 || C < 0) return;
    int low = low_precision(ctx), a16 = act16(ctx);
    char *cur = (char *)cuda_ws_get(ctx, cuda_ws_matmul_backward(low, a16, (size_t)N, (size_t)C, (size_t)OC));
    if (!cur) return;
    /* the column sums' partials, or BGRADB's vector (OC floats: fewer) */
    float *part = (float *)cuda_ws_take(&cur, cuda_ws_colsum_chunks((size_t)N) * (size_t)OC * sizeof(float));
    int bgrad = db && dw && C > 0 && (a16 || (ctx->gtype == GEMM_F32 && ctx->prec != PREC_TF32));
    if (db && !bgrad) cuda_colsum_add(ctx, db, dout, ctx->atype, N, OC, part);
    if (C == 0 || (!dinp && !dw)) return;
    const void *D = dout, *W = w, *X = inp;
    void *xl = NULL;
    if (low && !a16) { /* fp32 activations: dout's and inp's 16-bit copies */
        void *dl = cuda_ws_take(&cur, (size_t)N * OC * 2);
        xl = cuda_ws_take(&cur, (size_t)N * C * 2);
        cuda_convert(ctx, dl, (const float *)dout, (size_t)N * OC, ctx->gtype);
        D = dl;
    }
    if (low && dinp && !(W = matmul_weight(ctx, w, (size_t)OC * C))) return;
    if (xl) {
        if (dw) cuda_convert(ctx, xl, (const float *)inp, (size_t)N * C, ctx->gtype);
        X = xl;
    }
    // dinp^T (C x N) += w^T (stored C x OC) * dout^T (stored OC x N)
    if (dinp)
        cuda_gemm_epi(ctx, 0, 0, C, N, OC, W, C, 0, D, OC, 0, dinp, C, 0, 1, 1.0f, 1.0f, ctx->gtype, ctx->atype,
                      GEMM_EPI_NONE, NULL, 0);
    // dw^T (C x OC) += inp^T (stored C x N) * dout (stored OC x N, transposed); part[j] = sum_n dout[n, j]
    if (bgrad) {
        cuda_gemm_epi(ctx, 0, 1, C, OC, N, X, C, 0, D, OC, 0, dw, C, 0, 1, 1.0f, 1.0f, ctx->gtype, GEMM_F32,
                      GEMM_EPI_BGRADB, part, 0);
        if (ctx->error) return;
        CUDA_LAUNCH(vec_add_kernel, (unsigned)((OC + 255) / 256), 256, 0, ctx->stream, db, part, OC);
        CUDA_LAUNCHED(ctx);
    } else if (dw) {
        cuda_gemm(ctx, 0, 1, C, OC, N, X, C, 0, D, OC, 0, dw, C, 0, 1, 1.0f, 1.0f, ctx->gtype);
    }
}

/* ------------------------------------------------------------------------
 * Dropout: the same draws and the same multiply as the CPU backend (a
 * dropped inf or NaN gives NaN, as torch). A padded batch's index is the
 * flat one: one Philox block per 4 elements. A packed batch's element finds
 * its window by bisection and draws its own uniform at the padded index. */

template <typename T>
__global__ void dropout_kernel(T *out, const T *inp, size_t n, float p, float scale, philox_stream rng, int accumulate)
{
    size_t nblk = (n + 3) / 4;
    GRID_STRIDE(g, nblk)
    {
        float u[4];
        cuda_philox_uniform4(rng, g, u);
        for (int l = 0; l < 4; l++) {
            size_t i = g * 4 + (size_t)l;
            if (i >= n) break;
            float v = __fmul_rn(act_f(inp[i]), u[l] >= p ? scale : 0.0f);
            out[i] = act_of<T>(accumulate ? __fadd_rn(act_f(out[i]), v) : v);
        }
    }
}

__device__ __forceinline__ int window_of(const int32_t *cu, int B, int row)
{
    int lo = 0, hi = B - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (cu[mid] <= row) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

template <typename T>
__global__ void dropout_packed_kernel(T *out, const T *inp, const int32_t *cu, int B, int Tw, int C, float p,
                                      float scale, philox_stream rng, int accumulate, size_t n)
{
    GRID_STRIDE(i, n)
    {
        int row = (int)(i / (size_t)C), c = (int)(i % (size_t)C);
        int b = window_of(cu, B, row);
        uint64_t idx = ((uint64_t)b * (uint64_t)Tw + (uint64_t)(row - cu[b])) * (uint64_t)C + (uint64_t)c;
        float v = __fmul_rn(act_f(inp[i]), philox_uniform(rng, idx) >= p ? scale : 0.0f);
        out[i] = act_of<T>(accumulate ? __fadd_rn(act_f(out[i]), v) : v);
    }
}

template <typename T>
static void dropout_launch(cuda_ctx *ctx, void *vout, const void *vinp, const backend_windows *w, int C, float p,
                           philox_stream rng, int accumulate)
{
    T *out = (T *)vout;
    const T *inp = (const T *)vinp;
    size_t n = (size_t)w->N * C;
    float scale = cuda_dropout_scale(p);
    if (w->cu_seqlens)
        CUDA_LAUNCH(dropout_packed_kernel<T>, cuda_blocks(n, 256), 256, 0, ctx->stream,
            out, inp, w->cu_seqlens, w->B, w->T, C, p, scale, rng, accumulate, n);
    else
        CUDA_LAUNCH(dropout_kernel<T>, cuda_blocks((n + 3) / 4, 256), 256, 0, ctx->stream,
            out, inp, n, p, scale, rng, accumulate);
}

// out, inp (w->N, C); out may equal inp
void cuda_dropout_forward(void *vctx, backend_act *out, const backend_act *inp, const backend_windows *w, int C,
                          float p, philox_stream rng)
{
    cuda_ctx *ctx = (cuda_ctx *)vctx;
    size_t n = (size_t)w->N * C;
    if (ctx->error || n == 0) return;
    if (p <= 0.0f) {
        if (out != inp)
            CUDA_TRY(ctx, cudaMemcpyAsync(out, inp, n * act_size(ctx->atype), cudaMemcpyDeviceToDevice, ctx->stream));
        return;
    }
    ACT_DISPATCH(ctx->atype, dropout_launch, ctx, out, inp, w, C, p, rng, 0);
    CUDA_LAUNCHED(ctx);
}

/* p = 0: dinp += dout, as cuda_add. */
void cuda_dropout_backward(void *vctx, backend_act *dinp, const backend_act *dout, const backend_windows *w, int C,
                           float p, philox_stream rng)
{
    cuda_ctx *ctx = (cuda_ctx *)vctx;
    size_t n = (size_t)w->N * C;
    if (ctx->error || n == 0 || !dinp) return;
    if (p <= 0.0f) {
        cuda_add(vctx, dinp, dinp, dout, n);
        return;
    }
    ACT_DISPATCH(ctx->atype, dropout_launch, ctx, dinp, dout, w, C, p, rng, 1);
    CUDA_LAUNCHED(ctx);
}

template <typename T> __global__ void add_kernel(T *out, const T *a, const T *b, size_t n)
{
    GRID_STRIDE(i, n) out[i] = act_of<T>(__fadd_rn(act_f(a[i]), act_f(b[i])));
}

template <typename T> static void add_launch(cuda_ctx *ctx, void *out, const void *a, const void *b, size_t n)
{
    CUDA_LAUNCH(add_kernel<T>, cuda_blocks(n, 256), 256, 0, ctx->stream, (T *)out, (const T *)a, (const T *)b, n);
}

// out = a + b (n); out may alias a or b
void cuda_add(void *vctx, backend_act *out, const backend_act *a, const backend_act *b, size_t n)
{
    cuda_ctx *ctx = (cuda_ctx *)vctx;
    if (ctx->error || n == 0) return;
    ACT_DISPATCH(ctx->atype, add_launch, ctx, out, a, b, n);
    CUDA_LAUNCHED(ctx);
}
