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
 * accumulation), and D = epilogue(alpha * product + beta * C) is formed
 * elementwise in fp32 (C not read when beta is 0, as cuBLAS does), then
 * rounded to D's type (fp32, or the inputs' 16-bit type).
 *
 * Epilogues (CUBLASLT_MATMUL_DESC_EPILOGUE), as cuBLASLt's header defines
 * them:
 *   BIAS            D = x + bias[row]; bias of D's type, one per row of D
 *   GELU[_BIAS]     D = gelu(x [+ bias]), tanh approximation
 *   GELU_AUX[_BIAS] the same, and aux = x [+ bias] (GELU's input, D's type)
 *   DGELU           D = x * gelu'(aux)
 *   DGELU_BGRAD     the same, and bias = the row sums of D (before rounding)
 *   BGRADA          bias[i] = sum_k op(A)[i, k] (one per row of D)
 *   BGRADB          bias[j] = sum_k op(B)[k, j] (one per column of D)
 * with x = alpha * product + beta * C. A bias gradient is written (=), not
 * added to. BGRADA only with A not transposed and BGRADB only with B
 * transposed: the reduced operand stored with the bias index contiguous,
 * the form NVIDIA's own code uses (apex's fused dense: the weight gradient
 * with BGRADB, transa N, transb T); the epilogues' descriptions checked
 * name no transposes, so the others are refused as unverified
 * (NOT_SUPPORTED, as a heuristic with no kernel for them answers). What
 * cuBLASLt refuses is refused: a bias epilogue without a
 * bias pointer or an aux epilogue without an aux pointer, an aux leading
 * dimension below D's rows or not a multiple of 8, an aux batch stride not
 * a multiple of 8, an aux type other than D's (INVALID_VALUE); a bias type
 * other than D's (NOT_SUPPORTED: cuBLASLt has such kernels only for int8
 * and fp8); a bias or aux pointer not aligned to its element, or less
 * aligned at the matmul than at the heuristic, which read the pointers to
 * choose (INVALID_VALUE). The ReLU epilogues are named but NOT_SUPPORTED
 * (bertc has no ReLU). With CUBLASLT_LOG_LEVEL at 1 or more (cuBLASLt's
 * own variable: errors), each of those epilogue refusals also says on
 * stderr what it refused and why. */
#include "cublasLt.h"
#include "cuda_bf16.h"
#include "cuda_fp16.h"
#include "cudaemu.h"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

struct cublasLtContext {
    int unused;
};

struct cublasLtMatmulDescOpaque {
    cublasComputeType_t compute;
    cudaDataType_t scale;
    int32_t transa, transb; /* cublasOperation_t */
    uint32_t epilogue;      /* cublasLtEpilogue_t */
    void *bias, *aux;
    int64_t bias_stride, aux_ld, aux_stride;
    int32_t bias_type, aux_type; /* -1: D's type */
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
 * the compute and input types it was chosen for, the epilogue, and the
 * alignment it assumed of the bias and aux pointers (bytes). */
enum { ALGO_TAG, ALGO_ALIGN, ALGO_WORKSPACE, ALGO_COMPUTE, ALGO_TYPE, ALGO_EPILOGUE, ALGO_BIAS_ALIGN, ALGO_AUX_ALIGN };
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
    *desc = new cublasLtMatmulDescOpaque{computeType, scaleType, CUBLAS_OP_N, CUBLAS_OP_N, CUBLASLT_EPILOGUE_DEFAULT,
                                         NULL, NULL, 0, 0, 0, -1, -1};
    return CUBLAS_STATUS_SUCCESS;
}

static bool known_epilogue(uint32_t e)
{
    switch (e) {
    case CUBLASLT_EPILOGUE_DEFAULT: case CUBLASLT_EPILOGUE_RELU: case CUBLASLT_EPILOGUE_RELU_AUX:
    case CUBLASLT_EPILOGUE_BIAS: case CUBLASLT_EPILOGUE_RELU_BIAS: case CUBLASLT_EPILOGUE_RELU_AUX_BIAS:
    case CUBLASLT_EPILOGUE_DRELU: case CUBLASLT_EPILOGUE_DRELU_BGRAD: case CUBLASLT_EPILOGUE_GELU:
    case CUBLASLT_EPILOGUE_GELU_AUX: case CUBLASLT_EPILOGUE_GELU_BIAS: case CUBLASLT_EPILOGUE_GELU_AUX_BIAS:
    case CUBLASLT_EPILOGUE_DGELU: case CUBLASLT_EPILOGUE_DGELU_BGRAD: case CUBLASLT_EPILOGUE_BGRADA:
    case CUBLASLT_EPILOGUE_BGRADB: return true;
    default: return false;
    }
}

/* What an epilogue reads and writes. */
static bool epi_reads_bias(uint32_t e)
{
    return e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_GELU_BIAS || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}
static bool epi_bgrad(uint32_t e)
{
    return e == CUBLASLT_EPILOGUE_BGRADA || e == CUBLASLT_EPILOGUE_BGRADB || e == CUBLASLT_EPILOGUE_DGELU_BGRAD;
}
static bool epi_gelu(uint32_t e)
{
    return e == CUBLASLT_EPILOGUE_GELU || e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_BIAS ||
           e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}
static bool epi_writes_aux(uint32_t e)
{
    return e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}
static bool epi_dgelu(uint32_t e)
{
    return e == CUBLASLT_EPILOGUE_DGELU || e == CUBLASLT_EPILOGUE_DGELU_BGRAD;
}
static bool epi_relu(uint32_t e)
{
    return e == CUBLASLT_EPILOGUE_RELU || e == CUBLASLT_EPILOGUE_RELU_AUX || e == CUBLASLT_EPILOGUE_RELU_BIAS ||
           e == CUBLASLT_EPILOGUE_RELU_AUX_BIAS || e == CUBLASLT_EPILOGUE_DRELU || e == CUBLASLT_EPILOGUE_DRELU_BGRAD;
}

extern "C" cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                                                         cublasLtMatmulDescAttributes_t attr, const void *buf,
                                                         size_t sizeInBytes)
{
    if (!desc || !buf) return CUBLAS_STATUS_INVALID_VALUE;
    const cublasStatus_t OK = CUBLAS_STATUS_SUCCESS, BAD = CUBLAS_STATUS_INVALID_VALUE;
    switch (attr) {
    case CUBLASLT_MATMUL_DESC_EPILOGUE: {
        uint32_t e;
        if (!attr_value(buf, sizeInBytes, &e) || !known_epilogue(e)) return BAD;
        desc->epilogue = e;
        return OK;
    }
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: return attr_value(buf, sizeInBytes, &desc->bias) ? OK : BAD;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: return attr_value(buf, sizeInBytes, &desc->aux) ? OK : BAD;
    case CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE: return attr_value(buf, sizeInBytes, &desc->bias_stride) ? OK : BAD;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: return attr_value(buf, sizeInBytes, &desc->aux_ld) ? OK : BAD;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE:
        return attr_value(buf, sizeInBytes, &desc->aux_stride) ? OK : BAD;
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: return attr_value(buf, sizeInBytes, &desc->bias_type) ? OK : BAD;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE: return attr_value(buf, sizeInBytes, &desc->aux_type) ? OK : BAD;
    case CUBLASLT_MATMUL_DESC_TRANSA: case CUBLASLT_MATMUL_DESC_TRANSB: break;
    default: return BAD;
    }
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

/* The lowest set bit of an address (up to 16): the alignment a kernel can
 * assume of it. */
static uint32_t ptr_align(const void *x, int64_t ld_bytes)
{
    uintptr_t a = (uintptr_t)x | (uintptr_t)ld_bytes | 16u;
    return (uint32_t)(a & (~a + 1));
}

/* An epilogue refusal: s, and under CUBLASLT_LOG_LEVEL >= 1 its reason
 * on stderr. */
static cublasStatus_t refuse(cublasStatus_t s, uint32_t epilogue, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static cublasStatus_t refuse(cublasStatus_t s, uint32_t epilogue, const char *fmt, ...)
{
    const char *lv = getenv("CUBLASLT_LOG_LEVEL");
    if (!lv || atoi(lv) < 1) return s;
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    fprintf(stderr, "cudaemu: cuBLASLt [Error]: epilogue %u refused (%s): %s\n", epilogue,
            s == CUBLAS_STATUS_NOT_SUPPORTED ? "CUBLAS_STATUS_NOT_SUPPORTED" : "CUBLAS_STATUS_INVALID_VALUE", why);
    return s;
}

/* The epilogue's arguments, as cuBLASLt checks them (the file's comment). */
static cublasStatus_t check_epilogue(const cublasLtMatmulDescOpaque *desc, const cublasLtMatrixLayoutOpaque *D,
                                     const problem &p)
{
    const cublasStatus_t INVALID = CUBLAS_STATUS_INVALID_VALUE, UNSUPPORTED = CUBLAS_STATUS_NOT_SUPPORTED;
    uint32_t e = desc->epilogue;
    size_t esz = elem_size(D->type);
    if (epi_relu(e)) return refuse(UNSUPPORTED, e, "the ReLU epilogues are not emulated");
    if ((e == CUBLASLT_EPILOGUE_BGRADA && desc->transa != CUBLAS_OP_N) ||
        (e == CUBLASLT_EPILOGUE_BGRADB && desc->transb != CUBLAS_OP_T))
        return refuse(UNSUPPORTED, e, "BGRADA only with A not transposed, BGRADB only with B transposed");
    if (epi_reads_bias(e) || epi_bgrad(e)) {
        if (!desc->bias) return refuse(INVALID, e, "no bias pointer");
        if (desc->bias_type != -1 && desc->bias_type != (int32_t)D->type)
            return refuse(UNSUPPORTED, e, "bias type %d is not D's type %d", (int)desc->bias_type, (int)D->type);
        if ((uintptr_t)desc->bias % esz) return refuse(INVALID, e, "bias pointer not aligned to its %zu bytes", esz);
        if (p.batch > 1 && desc->bias_stride < 0) return refuse(INVALID, e, "batched, and no bias batch stride");
    }
    if (epi_writes_aux(e) || epi_dgelu(e)) {
        if (!desc->aux) return refuse(INVALID, e, "no aux pointer");
        if (desc->aux_ld < p.m || desc->aux_ld % 8)
            return refuse(INVALID, e, "aux leading dimension %lld: not at least D's %d rows and a multiple of 8",
                          (long long)desc->aux_ld, p.m);
        if (p.batch > 1 && (desc->aux_stride < 0 || desc->aux_stride % 8))
            return refuse(INVALID, e, "aux batch stride %lld: not a multiple of 8", (long long)desc->aux_stride);
        if (desc->aux_type != -1 && desc->aux_type != (int32_t)D->type)
            return refuse(INVALID, e, "aux type %d is not D's type %d", (int)desc->aux_type, (int)D->type);
        if ((uintptr_t)desc->aux % esz) return refuse(INVALID, e, "aux pointer not aligned to its %zu bytes", esz);
    }
    return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t check_problem(cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t A, cublasLtMatrixLayout_t B,
                                    cublasLtMatrixLayout_t C, cublasLtMatrixLayout_t D, problem *p)
{
    if (!desc || !A || !B || !C || !D) return CUBLAS_STATUS_INVALID_VALUE;
    uint64_t m = desc->transa ? A->cols : A->rows, ka = desc->transa ? A->rows : A->cols;
    uint64_t kb = desc->transb ? B->cols : B->rows, n = desc->transb ? B->rows : B->cols;
    if (ka != kb || C->rows != m || C->cols != n || D->rows != m || D->cols != n) return CUBLAS_STATUS_INVALID_VALUE;
    if (B->batch != A->batch || C->batch != A->batch || D->batch != A->batch) return CUBLAS_STATUS_INVALID_VALUE;
    /* the kernels there are: fp32 scale; fp32 inputs with fp32 or tf32
     * compute and fp32 output; fp16/bf16 inputs (both the same) with fp32
     * compute and fp32 output or output of the inputs' type; C of D's type */
    if (A->type != B->type || C->type != D->type || (D->type != CUDA_R_32F && D->type != A->type) ||
        desc->scale != CUDA_R_32F)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    if (A->type == CUDA_R_32F ? desc->compute != CUBLAS_COMPUTE_32F && desc->compute != CUBLAS_COMPUTE_32F_FAST_TF32
                              : desc->compute != CUBLAS_COMPUTE_32F)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    /* OpenBLAS takes int sizes */
    if (m > INT_MAX || n > INT_MAX || ka > INT_MAX || A->ld > INT_MAX || B->ld > INT_MAX || C->ld > INT_MAX ||
        D->ld > INT_MAX)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    *p = problem{(int)m, (int)n, (int)ka, A->batch};
    return check_epilogue(desc, D, *p);
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
    r->algo.data[ALGO_EPILOGUE] = desc->epilogue;
    r->algo.data[ALGO_BIAS_ALIGN] = ptr_align(desc->bias, 0);
    r->algo.data[ALGO_AUX_ALIGN] = ptr_align(desc->aux, desc->aux_ld * (int64_t)elem_size(Ddesc->type));
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

/* Element idx of a D-typed buffer, as fp32; and a value rounded into one. */
static float load_elem(const void *x, cudaDataType_t t, size_t idx)
{
    if (t == CUDA_R_16F) return cudaemu_h2f_bits(((const uint16_t *)x)[idx]);
    if (t == CUDA_R_16BF) return cudaemu_bf2f_bits(((const uint16_t *)x)[idx]);
    return ((const float *)x)[idx];
}

static void store_elem(void *x, cudaDataType_t t, size_t idx, float v)
{
    if (t == CUDA_R_16F) ((uint16_t *)x)[idx] = cudaemu_f2h_bits(v);
    else if (t == CUDA_R_16BF) ((uint16_t *)x)[idx] = cudaemu_f2bf_bits(v);
    else ((float *)x)[idx] = v;
}

/* cuBLASLt's GELU: the tanh approximation (not transformers' erf GELU),
 * and its derivative. */
static float gelu_tanh(float x)
{
    const float c = 0.7978845608028654f; /* sqrt(2 / pi) */
    return 0.5f * x * (1.0f + tanhf(c * (x + 0.044715f * x * x * x)));
}

static float dgelu_tanh(float x)
{
    const float c = 0.7978845608028654f;
    float t = tanhf(c * (x + 0.044715f * x * x * x));
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * c * (1.0f + 3.0f * 0.044715f * x * x);
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
        if (algo->data[ALGO_EPILOGUE] != desc->epilogue) return CUBLAS_STATUS_INVALID_VALUE;
        int64_t aux_ld_bytes = desc->aux_ld * (int64_t)elem_size(Ddesc->type);
        if (ptr_align(desc->bias, 0) < algo->data[ALGO_BIAS_ALIGN] ||
            ptr_align(desc->aux, aux_ld_bytes) < algo->data[ALGO_AUX_ALIGN])
            return CUBLAS_STATUS_INVALID_VALUE;
    }

    const char *who = "cublasLtMatmul";
    size_t ea = extent(Adesc), eb = extent(Bdesc), ec = extent(Cdesc), ed = extent(Ddesc);
    if (ea) cudaemu_check_device(A, ea, who, "A");
    if (eb) cudaemu_check_device(B, eb, who, "B");
    if (ec && read_c) cudaemu_check_device(C, ec, who, "C");
    if (ed) cudaemu_check_device(D, ed, who, "D");
    if (workspace && workspaceSizeInBytes) cudaemu_check_device(workspace, workspaceSizeInBytes, who, "workspace");
    uint32_t epi = desc->epilogue;
    cudaDataType_t dt = Ddesc->type;
    size_t esz = elem_size(dt);
    size_t blen = epi == CUBLASLT_EPILOGUE_BGRADB ? (size_t)p.n : (size_t)p.m;
    if (epi_reads_bias(epi) || epi_bgrad(epi))
        cudaemu_check_device(desc->bias, ((size_t)(p.batch - 1) * (size_t)desc->bias_stride + blen) * esz, who,
                             "the bias (CUBLASLT_MATMUL_DESC_BIAS_POINTER)");
    if ((epi_writes_aux(epi) || epi_dgelu(epi)) && p.m > 0 && p.n > 0)
        cudaemu_check_device(desc->aux,
                             ((size_t)(p.batch - 1) * (size_t)desc->aux_stride + (size_t)(p.n - 1) * desc->aux_ld + p.m) *
                                 esz,
                             who, "the aux matrix (CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER)");

    if (p.m > 0 && p.n > 0) {
        bool tf32 = desc->compute == CUBLAS_COMPUTE_32F_FAST_TF32;
        std::vector<float> abuf, bbuf, prod((size_t)p.m * p.n), grad(blen);
        for (int b = 0; b < p.batch; b++) {
            int lda = 1, ldb = 1;
            const float *a = NULL, *bm = NULL;
            if (p.k > 0) {
                a = as_fp32(A, Adesc, b, tf32, abuf, &lda);
                bm = as_fp32(B, Bdesc, b, tf32, bbuf, &ldb);
                cblas_sgemm(CblasColMajor, desc->transa ? CblasTrans : CblasNoTrans,
                            desc->transb ? CblasTrans : CblasNoTrans, p.m, p.n, p.k, 1.0f, a, lda, bm, ldb, 0.0f,
                            prod.data(), p.m);
            } else {
                std::fill(prod.begin(), prod.end(), 0.0f);
            }
            size_t oc = (size_t)b * (size_t)Cdesc->stride, od = (size_t)b * (size_t)Ddesc->stride;
            size_t ob = (size_t)b * (size_t)desc->bias_stride, ox = (size_t)b * (size_t)desc->aux_stride;
            std::fill(grad.begin(), grad.end(), 0.0f);
            /* element by element, so C == D (in place) is fine */
            for (size_t j = 0; j < (size_t)p.n; j++)
                for (size_t i = 0; i < (size_t)p.m; i++) {
                    float v = fa * prod[j * p.m + i];
                    if (read_c) v += fb * load_elem(C, dt, oc + j * (size_t)Cdesc->ld + i);
                    if (epi_reads_bias(epi)) v += load_elem(desc->bias, dt, ob + i);
                    if (epi_writes_aux(epi)) store_elem(desc->aux, dt, ox + j * (size_t)desc->aux_ld + i, v);
                    if (epi_gelu(epi)) v = gelu_tanh(v);
                    if (epi_dgelu(epi)) v *= dgelu_tanh(load_elem(desc->aux, dt, ox + j * (size_t)desc->aux_ld + i));
                    if (epi == CUBLASLT_EPILOGUE_DGELU_BGRAD) grad[i] += v;
                    store_elem(D, dt, od + j * (size_t)Ddesc->ld + i, v);
                }
            /* the bias gradients from the inputs as the product saw them */
            if (epi == CUBLASLT_EPILOGUE_BGRADA)
                for (int i = 0; i < p.m; i++)
                    for (int q = 0; q < p.k; q++)
                        grad[i] += desc->transa ? a[(size_t)i * lda + q] : a[(size_t)q * lda + i];
            if (epi == CUBLASLT_EPILOGUE_BGRADB)
                for (int j = 0; j < p.n; j++)
                    for (int q = 0; q < p.k; q++)
                        grad[j] += desc->transb ? bm[(size_t)q * ldb + j] : bm[(size_t)j * ldb + q];
            if (epi_bgrad(epi))
                for (size_t i = 0; i < blen; i++) store_elem(desc->bias, dt, ob + i, grad[i]);
        }
    }
    if (ed) cudaemu_mark_written(D, ed); /* for the race check's "never written" */
    if (epi_bgrad(epi) && p.m > 0 && p.n > 0)
        cudaemu_mark_written(desc->bias, ((size_t)(p.batch - 1) * (size_t)desc->bias_stride + blen) * esz);
    if (epi_writes_aux(epi) && p.m > 0 && p.n > 0)
        cudaemu_mark_written(desc->aux, ((size_t)(p.batch - 1) * (size_t)desc->aux_stride +
                                         (size_t)(p.n - 1) * desc->aux_ld + p.m) * esz);
    cudaemu_check_guards(who);
    lt_matmuls++;
    return CUBLAS_STATUS_SUCCESS;
}
