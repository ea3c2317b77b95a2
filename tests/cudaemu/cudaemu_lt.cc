/* cudaemu's cuBLASLt: matmul descriptors, layouts, preferences, the
 * heuristic and the matmul (cublasLt.h), on the CPU.
 *
 * Arguments are checked as cuBLASLt checks them: a NULL or malformed
 * argument, an attribute set with the wrong size, shapes that do not
 * chain, a batch count that differs between operands give
 * CUBLAS_STATUS_INVALID_VALUE; a type combination cuBLASLt has no kernel
 * for (mixed input types, a non-fp32 output or scale, a compute type that
 * does not fit the inputs) CUBLAS_STATUS_NOT_SUPPORTED. The heuristic's
 * algorithm assumes the alignment the preference promised (capped at 16
 * bytes, what cuBLASLt's kernels ask for at most); cublasLtMatmul refuses
 * operands that break the promise (INVALID_VALUE) rather than reading them
 * misaligned, as a real kernel would. The operands' device memory is
 * checked with cudaemu_check_device (a host, freed or too short buffer
 * stops the run) and the guard zones after the product.
 *
 * The product: per batch, the operands are converted to fp32 (fp16/bf16
 * exactly, fp32 rounded to tf32 for CUBLAS_COMPUTE_32F_FAST_TF32, as the
 * Tensor Cores see them), multiplied by OpenBLAS's sgemm (fp32
 * accumulation), and D = alpha * product + beta * C is formed elementwise
 * (C not read when beta is 0, as cuBLAS does). */
#include "cublasLt.h"
#include "cuda_bf16.h"
#include "cuda_fp16.h"
#include "cudaemu.h"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstring>
#include <vector>

struct cublasLtContext {
    int unused;
};

struct cublasLtMatmulDescOpaque {
    cublasComputeType_t compute;
    cudaDataType_t scale;
    int32_t transa, transb; /* cublasOperation_t */
};

struct cublasLtMatrixLayoutOpaque {
    cudaDataType_t type;
    uint64_t rows, cols;
    int64_t ld;
    int32_t batch;  /* >= 1 */
    int64_t stride; /* elements between batches, >= 0 */
};

struct cublasLtMatmulPreferenceOpaque {
    uint64_t max_workspace;
    uint32_t align[4]; /* A, B, C, D: bytes */
};

/* algo.data: a tag, the alignment assumed (bytes), the workspace needed,
 * and the compute and input types it was chosen for. */
enum { ALGO_TAG, ALGO_ALIGN, ALGO_WORKSPACE, ALGO_COMPUTE, ALGO_TYPE };
static const uint64_t LT_ALGO_TAG = 0x4c54756d65616475ull; /* "udaemuTL" */
/* The workspace an algorithm asks for (none: the product is on the CPU). */
static const size_t LT_WORKSPACE_NEED = 0;

static std::atomic<long long> lt_matmuls(0);

extern "C" long long cudaemu_lt_matmul_count(void)
{
    return lt_matmuls.load();
}

/* tf32: fp32 with 10 bits of mantissa, rounded to nearest even; inf and
 * NaN kept (a NaN keeps its top mantissa bits, so it stays a NaN). */
extern "C" float cudaemu_round_tf32(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) != 0x7f800000u) {
        u += 0xfffu + ((u >> 13) & 1u);
        u &= ~0x1fffu;
    }
    memcpy(&x, &u, 4);
    return x;
}

static size_t elem_size(cudaDataType_t t)
{
    return t == CUDA_R_32F ? 4 : 2;
}

static bool known_type(int t)
{
    return t == CUDA_R_32F || t == CUDA_R_16F || t == CUDA_R_16BF;
}

/* ------------------------------------------------------------------------
 * Handle, descriptors, layouts, preferences. */

extern "C" cublasStatus_t cublasLtCreate(cublasLtHandle_t *handle)
{
    if (!handle) return CUBLAS_STATUS_INVALID_VALUE;
    *handle = new cublasLtContext();
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle)
{
    if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
    delete handle;
    return CUBLAS_STATUS_SUCCESS;
}

/* Every handle's destroy: NULL refused, as the library refuses it. */
template <class H> static cublasStatus_t destroy(H *h)
{
    if (!h) return CUBLAS_STATUS_INVALID_VALUE;
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}

/* An attribute's value of exactly sizeof(T) bytes, or 0 (INVALID_VALUE). */
template <class T> static int attr_value(const void *buf, size_t size, T *out)
{
    if (size != sizeof *out) return 0;
    memcpy(out, buf, sizeof *out);
    return 1;
}

#define LT_DESTROY(name, handle_t) \
    extern "C" cublasStatus_t name(handle_t h) { return destroy(h); }

extern "C" cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *desc, cublasComputeType_t computeType,
                                                   cudaDataType_t scaleType)
{
    if (!desc) return CUBLAS_STATUS_INVALID_VALUE;
    if (computeType != CUBLAS_COMPUTE_32F && computeType != CUBLAS_COMPUTE_32F_FAST_TF32 &&
        computeType != CUBLAS_COMPUTE_32F_FAST_16F && computeType != CUBLAS_COMPUTE_32F_FAST_16BF)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (!known_type(scaleType)) return CUBLAS_STATUS_INVALID_VALUE;
    *desc = new cublasLtMatmulDescOpaque{computeType, scaleType, CUBLAS_OP_N, CUBLAS_OP_N};
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                                                         cublasLtMatmulDescAttributes_t attr, const void *buf,
                                                         size_t sizeInBytes)
{
    if (!desc || !buf) return CUBLAS_STATUS_INVALID_VALUE;
    if (attr != CUBLASLT_MATMUL_DESC_TRANSA && attr != CUBLASLT_MATMUL_DESC_TRANSB) return CUBLAS_STATUS_INVALID_VALUE;
    int32_t op;
    if (!attr_value(buf, sizeInBytes, &op) || (op != CUBLAS_OP_N && op != CUBLAS_OP_T)) return CUBLAS_STATUS_INVALID_VALUE;
    (attr == CUBLASLT_MATMUL_DESC_TRANSA ? desc->transa : desc->transb) = op;
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *layout, cudaDataType_t type,
                                                     uint64_t rows, uint64_t cols, int64_t ld)
{
    if (!layout || !known_type(type)) return CUBLAS_STATUS_INVALID_VALUE;
    /* column-major: a column's rows fit before the next column starts */
    if (ld < 1 || (uint64_t)ld < rows) return CUBLAS_STATUS_INVALID_VALUE;
    *layout = new cublasLtMatrixLayoutOpaque{type, rows, cols, ld, 1, 0};
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout,
                                                           cublasLtMatrixLayoutAttribute_t attr, const void *buf,
                                                           size_t sizeInBytes)
{
    if (!layout || !buf) return CUBLAS_STATUS_INVALID_VALUE;
    if (attr == CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT) {
        int32_t v;
        if (!attr_value(buf, sizeInBytes, &v) || v < 1) return CUBLAS_STATUS_INVALID_VALUE;
        layout->batch = v;
        return CUBLAS_STATUS_SUCCESS;
    }
    if (attr == CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET) {
        int64_t v;
        if (!attr_value(buf, sizeInBytes, &v) || v < 0) return CUBLAS_STATUS_INVALID_VALUE;
        layout->stride = v;
        return CUBLAS_STATUS_SUCCESS;
    }
    return CUBLAS_STATUS_INVALID_VALUE;
}

extern "C" cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref)
{
    if (!pref) return CUBLAS_STATUS_INVALID_VALUE;
    *pref = new cublasLtMatmulPreferenceOpaque{0, {256, 256, 256, 256}};
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                               cublasLtMatmulPreferenceAttributes_t attr,
                                                               const void *buf, size_t sizeInBytes)
{
    if (!pref || !buf) return CUBLAS_STATUS_INVALID_VALUE;
    if (attr == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES) {
        return attr_value(buf, sizeInBytes, &pref->max_workspace) ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
    }
    if (attr >= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES && attr <= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES) {
        uint32_t *a = &pref->align[attr - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES];
        return attr_value(buf, sizeInBytes, a) ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
    }
    return CUBLAS_STATUS_INVALID_VALUE;
}

/* Every handle is destroyed alike. */
LT_DESTROY(cublasLtMatmulDescDestroy, cublasLtMatmulDesc_t)
LT_DESTROY(cublasLtMatrixLayoutDestroy, cublasLtMatrixLayout_t)
LT_DESTROY(cublasLtMatmulPreferenceDestroy, cublasLtMatmulPreference_t)

/* ------------------------------------------------------------------------
 * The problem a descriptor and four layouts describe. */

struct problem {
    int m, n, k, batch;
};

static cublasStatus_t check_problem(cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t A, cublasLtMatrixLayout_t B,
                                    cublasLtMatrixLayout_t C, cublasLtMatrixLayout_t D, problem *p)
{
    if (!desc || !A || !B || !C || !D) return CUBLAS_STATUS_INVALID_VALUE;
    uint64_t m = desc->transa ? A->cols : A->rows, ka = desc->transa ? A->rows : A->cols;
    uint64_t kb = desc->transb ? B->cols : B->rows, n = desc->transb ? B->rows : B->cols;
    if (ka != kb || C->rows != m || C->cols != n || D->rows != m || D->cols != n) return CUBLAS_STATUS_INVALID_VALUE;
    if (B->batch != A->batch || C->batch != A->batch || D->batch != A->batch) return CUBLAS_STATUS_INVALID_VALUE;
    /* the kernels there are: fp32 output and scale; fp32 inputs with fp32 or
     * tf32 compute; fp16/bf16 inputs (both the same) with fp32 compute */
    if (A->type != B->type || C->type != CUDA_R_32F || D->type != CUDA_R_32F || desc->scale != CUDA_R_32F)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    if (A->type == CUDA_R_32F ? desc->compute != CUBLAS_COMPUTE_32F && desc->compute != CUBLAS_COMPUTE_32F_FAST_TF32
                              : desc->compute != CUBLAS_COMPUTE_32F)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    /* OpenBLAS takes int sizes */
    if (m > INT_MAX || n > INT_MAX || ka > INT_MAX || A->ld > INT_MAX || B->ld > INT_MAX || C->ld > INT_MAX ||
        D->ld > INT_MAX)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    *p = problem{(int)m, (int)n, (int)ka, A->batch};
    return CUBLAS_STATUS_SUCCESS;
}

/* The alignment an algorithm may assume: what the preference promised for
 * every operand, at most 16 bytes, as a power of two. */
static uint32_t assumed_align(const cublasLtMatmulPreferenceOpaque *pref)
{
    uint32_t a = 16;
    for (uint32_t x : pref->align)
        if (x < a) a = x;
    uint32_t p = 1;
    while (p * 2 <= a) p *= 2;
    return p;
}

/* Whether every address operand X reaches (each column, each batch) is a
 * multiple of al bytes. */
static bool aligned(const void *x, const cublasLtMatrixLayoutOpaque *L, uint32_t al)
{
    size_t e = elem_size(L->type);
    uintptr_t a = (uintptr_t)x | (uintptr_t)(L->ld * e);
    if (L->batch > 1) a |= (uintptr_t)(L->stride * e);
    return a % al == 0;
}

/* The bytes operand X reaches from its base, over all batches. */
static size_t extent(const cublasLtMatrixLayoutOpaque *L)
{
    if (!L->rows || !L->cols) return 0;
    size_t n = (size_t)(L->batch - 1) * (size_t)L->stride + (size_t)(L->cols - 1) * (size_t)L->ld + L->rows;
    return n * elem_size(L->type);
}

extern "C" cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                                         cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                                                         cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                                                         cublasLtMatmulPreference_t pref, int requestedAlgoCount,
                                                         cublasLtMatmulHeuristicResult_t heuristicResultsArray[],
                                                         int *returnAlgoCount)
{
    if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!pref || requestedAlgoCount < 1 || !heuristicResultsArray || !returnAlgoCount)
        return CUBLAS_STATUS_INVALID_VALUE;
    *returnAlgoCount = 0;
    problem p;
    cublasStatus_t s = check_problem(desc, Adesc, Bdesc, Cdesc, Ddesc, &p);
    if (s != CUBLAS_STATUS_SUCCESS) return s;
    if (LT_WORKSPACE_NEED > pref->max_workspace) return CUBLAS_STATUS_NOT_SUPPORTED;
    cublasLtMatmulHeuristicResult_t *r = &heuristicResultsArray[0];
    memset(r, 0, sizeof *r);
    r->algo.data[ALGO_TAG] = LT_ALGO_TAG;
    r->algo.data[ALGO_ALIGN] = assumed_align(pref);
    r->algo.data[ALGO_WORKSPACE] = LT_WORKSPACE_NEED;
    r->algo.data[ALGO_COMPUTE] = (uint64_t)desc->compute;
    r->algo.data[ALGO_TYPE] = (uint64_t)Adesc->type;
    r->workspaceSize = LT_WORKSPACE_NEED;
    r->state = CUBLAS_STATUS_SUCCESS;
    r->wavesCount = 1.0f;
    *returnAlgoCount = 1;
    return CUBLAS_STATUS_SUCCESS;
}

/* ------------------------------------------------------------------------
 * The matmul. */

/* Batch b of operand X as fp32 column-major, and its leading dimension:
 * fp32 as it is (tf32: a rounded copy), fp16/bf16 converted into buf. */
static const float *as_fp32(const void *x, const cublasLtMatrixLayoutOpaque *L, int b, bool tf32,
                            std::vector<float> &buf, int *ld)
{
    size_t off = (size_t)b * (size_t)L->stride, rows = L->rows, cols = L->cols;
    if (L->type == CUDA_R_32F && !tf32) {
        *ld = (int)L->ld;
        return (const float *)x + off;
    }
    buf.resize(rows * cols);
    for (size_t j = 0; j < cols; j++)
        for (size_t i = 0; i < rows; i++) {
            size_t at = off + j * (size_t)L->ld + i;
            float v;
            if (L->type == CUDA_R_16F) v = cudaemu_h2f_bits(((const uint16_t *)x)[at]);
            else if (L->type == CUDA_R_16BF) v = cudaemu_bf2f_bits(((const uint16_t *)x)[at]);
            else v = cudaemu_round_tf32(((const float *)x)[at]);
            buf[j * rows + i] = v;
        }
    *ld = rows ? (int)rows : 1;
    return buf.data();
}

extern "C" cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void *alpha,
                                         const void *A, cublasLtMatrixLayout_t Adesc, const void *B,
                                         cublasLtMatrixLayout_t Bdesc, const void *beta, const void *C,
                                         cublasLtMatrixLayout_t Cdesc, void *D, cublasLtMatrixLayout_t Ddesc,
                                         const cublasLtMatmulAlgo_t *algo, void *workspace,
                                         size_t workspaceSizeInBytes, cudaStream_t stream)
{
    (void)stream; /* synchronous */
    if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!alpha || !beta) return CUBLAS_STATUS_INVALID_VALUE;
    problem p;
    cublasStatus_t s = check_problem(desc, Adesc, Bdesc, Cdesc, Ddesc, &p);
    if (s != CUBLAS_STATUS_SUCCESS) return s;
    float fa, fb;
    memcpy(&fa, alpha, 4);
    memcpy(&fb, beta, 4);
    bool read_c = fb != 0.0f;

    /* The heuristic's algorithm: for this compute and input type, with the
     * alignment and the workspace it assumed. Without one, cuBLASLt picks
     * its own for the pointers as they are. */
    if (algo) {
        if (algo->data[ALGO_TAG] != LT_ALGO_TAG) return CUBLAS_STATUS_INVALID_VALUE;
        if (algo->data[ALGO_COMPUTE] != (uint64_t)desc->compute || algo->data[ALGO_TYPE] != (uint64_t)Adesc->type)
            return CUBLAS_STATUS_NOT_SUPPORTED;
        if (workspaceSizeInBytes < algo->data[ALGO_WORKSPACE]) return CUBLAS_STATUS_INVALID_VALUE;
        uint32_t al = (uint32_t)algo->data[ALGO_ALIGN];
        if (!aligned(A, Adesc, al) || !aligned(B, Bdesc, al) || (read_c && !aligned(C, Cdesc, al)) ||
            !aligned(D, Ddesc, al))
            return CUBLAS_STATUS_INVALID_VALUE;
    }

    const char *who = "cublasLtMatmul";
    size_t ea = extent(Adesc), eb = extent(Bdesc), ec = extent(Cdesc), ed = extent(Ddesc);
    if (ea) cudaemu_check_device(A, ea, who, "A");
    if (eb) cudaemu_check_device(B, eb, who, "B");
    if (ec && read_c) cudaemu_check_device(C, ec, who, "C");
    if (ed) cudaemu_check_device(D, ed, who, "D");
    if (workspace && workspaceSizeInBytes) cudaemu_check_device(workspace, workspaceSizeInBytes, who, "workspace");

    if (p.m > 0 && p.n > 0) {
        bool tf32 = desc->compute == CUBLAS_COMPUTE_32F_FAST_TF32;
        std::vector<float> abuf, bbuf, prod((size_t)p.m * p.n);
        const float *cf = (const float *)C;
        float *df = (float *)D;
        for (int b = 0; b < p.batch; b++) {
            if (p.k > 0) {
                int lda, ldb;
                const float *a = as_fp32(A, Adesc, b, tf32, abuf, &lda);
                const float *bm = as_fp32(B, Bdesc, b, tf32, bbuf, &ldb);
                cblas_sgemm(CblasColMajor, desc->transa ? CblasTrans : CblasNoTrans,
                            desc->transb ? CblasTrans : CblasNoTrans, p.m, p.n, p.k, 1.0f, a, lda, bm, ldb, 0.0f,
                            prod.data(), p.m);
            } else {
                std::fill(prod.begin(), prod.end(), 0.0f);
            }
            /* element by element, so C == D (in place) is fine */
            size_t oc = (size_t)b * (size_t)Cdesc->stride, od = (size_t)b * (size_t)Ddesc->stride;
            for (size_t j = 0; j < (size_t)p.n; j++)
                for (size_t i = 0; i < (size_t)p.m; i++) {
                    float v = fa * prod[j * p.m + i];
                    if (read_c) v += fb * cf[oc + j * (size_t)Cdesc->ld + i];
                    df[od + j * (size_t)Ddesc->ld + i] = v;
                }
        }
    }
    if (ed) cudaemu_mark_written(D, ed); /* for the race check's "never written" */
    cudaemu_check_guards(who);
    lt_matmuls++;
    return CUBLAS_STATUS_SUCCESS;
}
