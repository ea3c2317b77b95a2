/* cudaemu's cuBLASLt (C): the matmul surface bertc's CUDA backend uses
 * (cuda_gemm.cu), with cuBLASLt's names, types, enum values and attribute
 * sizes. The product runs on the CPU (cudaemu_lt.cc): operands converted
 * to fp32 (tf32 rounded for CUBLAS_COMPUTE_32F_FAST_TF32), multiplied by
 * OpenBLAS, fp32 accumulation; D in fp32, or in the inputs' 16-bit type;
 * the epilogues (bias, bias gradient, GELU) on the fp32 result before it
 * is rounded to D's type. Arguments are checked as cuBLASLt checks them,
 * and the operands' device memory as cudaemu checks a kernel's. */
#ifndef CUDAEMU_CUBLASLT_H
#define CUDAEMU_CUBLASLT_H

#include "cuda_runtime_api.h"
#include "library_types.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    CUBLAS_STATUS_SUCCESS = 0,
    CUBLAS_STATUS_NOT_INITIALIZED = 1,
    CUBLAS_STATUS_ALLOC_FAILED = 3,
    CUBLAS_STATUS_INVALID_VALUE = 7,
    CUBLAS_STATUS_ARCH_MISMATCH = 8,
    CUBLAS_STATUS_MAPPING_ERROR = 11,
    CUBLAS_STATUS_EXECUTION_FAILED = 13,
    CUBLAS_STATUS_INTERNAL_ERROR = 14,
    CUBLAS_STATUS_NOT_SUPPORTED = 15
} cublasStatus_t;

typedef enum {
    CUBLAS_OP_N = 0,
    CUBLAS_OP_T = 1
} cublasOperation_t;

typedef enum {
    CUBLAS_COMPUTE_32F = 68,
    CUBLAS_COMPUTE_32F_FAST_16F = 74,
    CUBLAS_COMPUTE_32F_FAST_16BF = 75,
    CUBLAS_COMPUTE_32F_FAST_TF32 = 77
} cublasComputeType_t;

/* Attributes, each with the type (and so the size) cuBLASLt gives it. */
typedef enum {
    CUBLASLT_MATMUL_DESC_TRANSA = 3,                   /* int32_t (cublasOperation_t) */
    CUBLASLT_MATMUL_DESC_TRANSB = 4,                   /* int32_t (cublasOperation_t) */
    CUBLASLT_MATMUL_DESC_EPILOGUE = 7,                 /* uint32_t (cublasLtEpilogue_t), default DEFAULT */
    CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8,             /* void *: bias (read) or bias gradient (written) */
    CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE = 10,       /* int64_t elements, default 0 */
    CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER = 11,    /* void *: GELU input (GELU_AUX written, DGELU read) */
    CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD = 12,         /* int64_t elements: >= D's rows, a multiple of 8 */
    CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE = 13, /* int64_t elements, a multiple of 8 */
    CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE = 22,  /* int32_t (cudaDataType_t), default -1: D's type */
    CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE = 26           /* int32_t (cudaDataType_t), default -1: D's type */
} cublasLtMatmulDescAttributes_t;

/* Epilogues (the values of cuBLASLt's cublasLtEpilogue_t). The stand-in
 * runs DEFAULT, BIAS, the GELU family (cuBLASLt's GELU is the tanh
 * approximation, so is the stand-in's) and the bias gradients; the ReLU
 * family is named but refused (NOT_SUPPORTED: bertc has no ReLU). */
typedef enum {
    CUBLASLT_EPILOGUE_DEFAULT = 1,
    CUBLASLT_EPILOGUE_RELU = 2,
    CUBLASLT_EPILOGUE_RELU_AUX = (CUBLASLT_EPILOGUE_RELU | 128),
    CUBLASLT_EPILOGUE_BIAS = 4,
    CUBLASLT_EPILOGUE_RELU_BIAS = (CUBLASLT_EPILOGUE_RELU | CUBLASLT_EPILOGUE_BIAS),
    CUBLASLT_EPILOGUE_RELU_AUX_BIAS = (CUBLASLT_EPILOGUE_RELU_AUX | CUBLASLT_EPILOGUE_BIAS),
    CUBLASLT_EPILOGUE_DRELU = 8 | 128,
    CUBLASLT_EPILOGUE_DRELU_BGRAD = CUBLASLT_EPILOGUE_DRELU | 16,
    CUBLASLT_EPILOGUE_GELU = 32,
    CUBLASLT_EPILOGUE_GELU_AUX = (CUBLASLT_EPILOGUE_GELU | 128),
    CUBLASLT_EPILOGUE_GELU_BIAS = (CUBLASLT_EPILOGUE_GELU | CUBLASLT_EPILOGUE_BIAS),
    CUBLASLT_EPILOGUE_GELU_AUX_BIAS = (CUBLASLT_EPILOGUE_GELU_AUX | CUBLASLT_EPILOGUE_BIAS),
    CUBLASLT_EPILOGUE_DGELU = 64 | 128,
    CUBLASLT_EPILOGUE_DGELU_BGRAD = CUBLASLT_EPILOGUE_DGELU | 16,
    /* the bias gradient from op(A): one per row of D, summed over k */
    CUBLASLT_EPILOGUE_BGRADA = 256,
    /* the bias gradient from op(B): one per column of D, summed over k */
    CUBLASLT_EPILOGUE_BGRADB = 512
} cublasLtEpilogue_t;

typedef enum {
    CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT = 5,          /* int32_t, default 1 */
    CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET = 6  /* int64_t elements, default 0 */
} cublasLtMatrixLayoutAttribute_t;

typedef enum {
    CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,  /* uint64_t, default 0 */
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5, /* uint32_t, default 256 */
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8
} cublasLtMatmulPreferenceAttributes_t;

typedef struct cublasLtContext *cublasLtHandle_t;
typedef struct cublasLtMatmulDescOpaque *cublasLtMatmulDesc_t;
typedef struct cublasLtMatrixLayoutOpaque *cublasLtMatrixLayout_t;
typedef struct cublasLtMatmulPreferenceOpaque *cublasLtMatmulPreference_t;

/* An algorithm as the heuristic chose it (opaque to the caller). */
typedef struct {
    uint64_t data[8];
} cublasLtMatmulAlgo_t;

typedef struct {
    cublasLtMatmulAlgo_t algo;
    size_t workspaceSize;
    cublasStatus_t state;
    float wavesCount;
    int reserved[4];
} cublasLtMatmulHeuristicResult_t;

cublasStatus_t cublasLtCreate(cublasLtHandle_t *handle);
cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle);

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *desc, cublasComputeType_t computeType,
                                        cudaDataType_t scaleType);
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc);
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                              const void *buf, size_t sizeInBytes);

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *layout, cudaDataType_t type, uint64_t rows,
                                          uint64_t cols, int64_t ld);
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout);
cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr,
                                                const void *buf, size_t sizeInBytes);

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref);
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref);
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void *buf,
                                                    size_t sizeInBytes);

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                              cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                                              cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                                              cublasLtMatmulPreference_t pref, int requestedAlgoCount,
                                              cublasLtMatmulHeuristicResult_t heuristicResultsArray[],
                                              int *returnAlgoCount);

/* D = epilogue(alpha op(A) op(B) + beta C), column-major; alpha and beta
 * are host floats; C is not read when beta is 0. */
cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void *alpha, const void *A,
                              cublasLtMatrixLayout_t Adesc, const void *B, cublasLtMatrixLayout_t Bdesc,
                              const void *beta, const void *C, cublasLtMatrixLayout_t Cdesc, void *D,
                              cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t *algo, void *workspace,
                              size_t workspaceSizeInBytes, cudaStream_t stream);

/* cudaemu's own, for the tests: the number of cublasLtMatmul calls that
 * succeeded. */
long long cudaemu_lt_matmul_count(void);

#ifdef __cplusplus
}
#endif

#endif
