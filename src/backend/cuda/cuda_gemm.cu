/* GEMMs through cuBLASLt, the conversion of their inputs and deterministic
 * column sums: what the ops' products share (the linear layer in
 * cuda_dense.cu, attention's in cuda_attention.cu), as cpu_gemm is the CPU
 * ops'.
 *
 * fp16/bf16 GEMMs read 16-bit inputs (16-bit activations as they are,
 * fp32 arrays converted into the workspace first: cuda_ws.h says how
 * much), and cuBLASLt multiplies them on Tensor Cores with fp32
 * accumulation and an fp32 output or one of the inputs' type (cuBLASLt's
 * type rules: C and D of one type). tf32 feeds the fp32 arrays to TF32
 * Tensor Cores (CUBLAS_COMPUTE_32F_FAST_TF32), fp32 to plain fp32 GEMMs.
 *
 * Row-major [R, K] arrays are column-major [K, R] to cuBLAS; every call
 * states the column-major product it asks for. */
#include "backend/cuda/cuda_act.cuh"

#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------------------
 * Conversions. */

template <typename T> __global__ void convert_kernel(T *dst, const float *src, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = act_of<T>(src[i]);
}

void cuda_convert(cuda_ctx *ctx, void *dst, const float *src, size_t n, gemm_type t)
{
    if (ctx->error || n == 0) return;
    unsigned g = cuda_blocks(n, 256);
    if (t == GEMM_F16) CUDA_LAUNCH(convert_kernel<__half>, g, 256, 0, ctx->stream, (__half *)dst, src, n);
    else if (t == GEMM_BF16) CUDA_LAUNCH(convert_kernel<__nv_bfloat16>, g, 256, 0, ctx->stream,
        (__nv_bfloat16 *)dst, src, n);
    else CUDA_LAUNCH(convert_kernel<float>, g, 256, 0, ctx->stream, (float *)dst, src, n);
    CUDA_LAUNCHED(ctx);
}

/* ------------------------------------------------------------------------
 * Deterministic column sums: stage 1 sums fixed chunks of rows per column
 * (in double, rows in order), stage 2 adds the chunk sums in order. */

template <typename T> __global__ void colsum_stage1(float *part, const T *x, int N, int C)
{
    int c = blockIdx.y * blockDim.x + threadIdx.x;
    int chunk = blockIdx.x;
    if (c >= C) return;
    int r0 = chunk * CUDA_WS_COLSUM_ROWS, r1 = min(N, r0 + CUDA_WS_COLSUM_ROWS);
    double s = 0;
    for (int r = r0; r < r1; r++) s += act_f(x[(size_t)r * C + c]);
    part[(size_t)chunk * C + c] = (float)s;
}

__global__ void colsum_stage2(float *out, const float *part, int nchunks, int C)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    double s = 0;
    for (int k = 0; k < nchunks; k++) s += part[(size_t)k * C + c];
    out[c] = __fadd_rn(out[c], (float)s);
}

template <typename T> static void colsum_parts(cuda_ctx *ctx, float *part, const void *x, int N, int C, dim3 grid)
{
    CUDA_LAUNCH(colsum_stage1<T>, grid, 128, 0, ctx->stream, part, (const T *)x, N, C);
}

void cuda_colsum_add(cuda_ctx *ctx, float *out, const void *x, gemm_type t, int N, int C, float *part)
{
    if (ctx->error || N <= 0 || C <= 0) return;
    int nchunks = (int)cuda_ws_colsum_chunks((size_t)N);
    dim3 g1((unsigned)nchunks, (unsigned)((C + 127) / 128));
    ACT_DISPATCH(t, colsum_parts, ctx, part, x, N, C, g1);
    CUDA_LAUNCHED(ctx);
    CUDA_LAUNCH(colsum_stage2, (unsigned)((C + 127) / 128), 128, 0, ctx->stream, out, part, nchunks, C);
    CUDA_LAUNCHED(ctx);
}

/* ------------------------------------------------------------------------
 * cuBLASLt. */

static cudaDataType_t lt_type(gemm_type t)
{
    return t == GEMM_F16 ? CUDA_R_16F : t == GEMM_BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

#define LT_TRY(stmt)                                                                                         \
    do {                                                                                                     \
        cublasStatus_t s_ = (stmt);                                                                          \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                                   \
            cuda_fail_at(ctx, #stmt, __FILE__, __LINE__, __func__, cuda_cublas_status_text(s_));             \
            goto done;                                                                                       \
        }                                                                                                    \
    } while (0)

static gemm_cache_entry *cache_find(cuda_ctx *ctx, const int *key, const long long *strides)
{
    for (int i = 0; i < GEMM_CACHE_SIZE; i++) {
        gemm_cache_entry *e = &ctx->cache[i];
        if (e->used && !memcmp(e->key, key, sizeof e->key) && !memcmp(e->strides, strides, sizeof e->strides))
            return e;
    }
    return NULL;
}

int cuda_gemm(cuda_ctx *ctx, int ta, int tb, int m, int n, int k, const void *A, int lda, long long sA,
              const void *B, int ldb, long long sB, float *D, int ldd, long long sD, int batch, float alpha,
              float beta, gemm_type t)
{
    return cuda_gemm_epi(ctx, ta, tb, m, n, k, A, lda, sA, B, ldb, sB, D, ldd, sD, batch, alpha, beta, t, GEMM_F32,
                         GEMM_EPI_NONE, NULL, 0);
}

static cublasLtEpilogue_t lt_epilogue(gemm_epi e)
{
    return e == GEMM_EPI_BIAS ? CUBLASLT_EPILOGUE_BIAS : e == GEMM_EPI_BGRADB ? CUBLASLT_EPILOGUE_BGRADB
                                                                                : CUBLASLT_EPILOGUE_DEFAULT;
}

int cuda_gemm_epi(cuda_ctx *ctx, int ta, int tb, int m, int n, int k, const void *A, int lda, long long sA,
                  const void *B, int ldb, long long sB, void *D, int ldd, long long sD, int batch, float alpha,
                  float beta, gemm_type t, gemm_type dt, gemm_epi epi, void *bias, long long sbias)
{
    if (ctx->error) return 1;
    if (m <= 0 || n <= 0 || batch <= 0) return 0;
    cublasLtMatmulDesc_t op = NULL;
    cublasLtMatrixLayout_t la = NULL, lb = NULL, ld = NULL;
    cublasLtMatmulPreference_t pref = NULL;
    cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    cudaDataType_t at = lt_type(t), ot = lt_type(dt);
    cublasComputeType_t ct = (t == GEMM_F32 && ctx->prec == PREC_TF32) ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    int ok = 0;
    size_t esz = act_size(t), dsz = act_size(dt);
    uint32_t ua = cuda_operand_align(A, lda, sA, batch, esz), ub = cuda_operand_align(B, ldb, sB, batch, esz);
    uint32_t ud = cuda_operand_align(D, ldd, sD, batch, dsz);
    /* cuBLASLt's heuristic reads the bias pointer: its alignment is part
     * of the answer, so of the key. */
    uint32_t ubias = epi ? cuda_operand_align(bias, 0, epi == GEMM_EPI_BIAS ? sbias : 0, batch, dsz) : 0;
    cublasLtEpilogue_t lepi = lt_epilogue(epi);
    int key[20] = {ta, tb, m, n, k, lda, ldb, ldd, batch, (int)t, (int)ct, (int)ua, (int)ub, (int)ud,
                   (int)epi, (int)ubias, (int)dt, 0};
    long long strides[3] = {sA, sB, sD};
    size_t wsb = CUDA_WS_CUBLASLT;
    gemm_cache_entry *hit = cache_find(ctx, key, strides);
    if (k <= 0 && epi) {
        cuda_fail_at(ctx, "cuda_gemm_epi", __FILE__, __LINE__, __func__, "an epilogue over an empty sum (k 0)");
        return 1;
    }
    if (k <= 0) {
        /* An empty sum: D = beta D, which cuBLASLt may not accept. */
        if (beta == 0.0f) {
            for (int i = 0; i < batch; i++)
                if (cudaMemsetAsync((char *)D + (size_t)i * sD * dsz, 0, (size_t)ldd * n * dsz, ctx->stream) !=
                    cudaSuccess)
                    cuda_fail_at(ctx, "cudaMemsetAsync", __FILE__, __LINE__, __func__, "failed");
        }
        return ctx->error;
    }

    LT_TRY(cublasLtMatmulDescCreate(&op, ct, CUDA_R_32F));
    LT_TRY(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
    LT_TRY(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
    if (epi) {
        /* the bias (gradient) is of D's type (cuBLASLt has other bias
         * types only for int8 and fp8 outputs) */
        int32_t bt = ot;
        LT_TRY(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &lepi, sizeof lepi));
        LT_TRY(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
        LT_TRY(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt));
        if (batch > 1) {
            int64_t sb = sbias;
            LT_TRY(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &sb, sizeof sb));
        }
    }
    /* Stored shapes: A is m x k (k x m when transposed), B is k x n (n x k). */
    LT_TRY(cublasLtMatrixLayoutCreate(&la, at, ta ? k : m, ta ? m : k, lda));
    LT_TRY(cublasLtMatrixLayoutCreate(&lb, at, tb ? n : k, tb ? k : n, ldb));
    LT_TRY(cublasLtMatrixLayoutCreate(&ld, ot, m, n, ldd));
    if (batch > 1) {
        LT_TRY(cublasLtMatrixLayoutSetAttribute(la, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch));
        LT_TRY(cublasLtMatrixLayoutSetAttribute(la, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sA, sizeof sA));
        LT_TRY(cublasLtMatrixLayoutSetAttribute(lb, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch));
        LT_TRY(cublasLtMatrixLayoutSetAttribute(lb, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sB, sizeof sB));
        LT_TRY(cublasLtMatrixLayoutSetAttribute(ld, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch));
        LT_TRY(cublasLtMatrixLayoutSetAttribute(ld, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sD, sizeof sD));
    }
    if (!hit) {
        cublasLtMatmulHeuristicResult_t res;
        int nres = 0;
        memset(&res, 0, sizeof res);
        LT_TRY(cublasLtMatmulPreferenceCreate(&pref));
        LT_TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb));
        LT_TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &ua, sizeof ua));
        LT_TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &ub, sizeof ub));
        LT_TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &ud, sizeof ud));
        LT_TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &ud, sizeof ud));
        LT_TRY(cublasLtMatmulAlgoGetHeuristic(ctx->lt, op, la, lb, ld, ld, pref, 1, &res, &nres));
        if (nres < 1 || res.state != CUBLAS_STATUS_SUCCESS) {
            char what[192];
            snprintf(what, sizeof what,
                     "no cuBLASLt algorithm for m %d n %d k %d batch %d (type %d, output %d, compute %d, "
                     "epilogue %d)",
                     m, n, k, batch, (int)t, (int)dt, (int)ct, (int)lepi);
            cuda_fail_at(ctx, "cublasLtMatmulAlgoGetHeuristic", __FILE__, __LINE__, __func__, what);
            goto done;
        }
        hit = &ctx->cache[ctx->cache_next];
        ctx->cache_next = (ctx->cache_next + 1) % GEMM_CACHE_SIZE;
        memcpy(hit->key, key, sizeof hit->key);
        memcpy(hit->strides, strides, sizeof hit->strides);
        hit->algo = res.algo;
        hit->used = 1;
    }
    LT_TRY(cublasLtMatmul(ctx->lt, op, &alpha, A, la, B, lb, &beta, D, ld, D, ld, &hit->algo, ctx->lt_ws, wsb,
                          ctx->stream));
    ok = 1;
done:
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (ld) cublasLtMatrixLayoutDestroy(ld);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (op) cublasLtMatmulDescDestroy(op);
    return ok ? 0 : 1;
}
