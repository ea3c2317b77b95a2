/* oneDNN's sgemm, loaded with dlopen: the training GEMM at AVX2 and above where
 * the library is installed (Debian's libdnnl2), OpenBLAS's otherwise. The GEMM study
 * (bench/gemm/gemm_study.sh, bench/RESULTS.md) measured dnnl_sgemm at bertc's
 * shapes 8 % faster than OpenBLAS's best core on an AVX-512 CPU and as fast
 * or 3-4 % faster at the AVX2 level; no header or link-time dependency, so one
 * binary runs with or without it. */
#ifndef BERTC_BACKEND_CPU_ONEDNN_DL_H
#define BERTC_BACKEND_CPU_ONEDNN_DL_H

#include <stddef.h>
#include <stdint.h>

/* dnnl_sgemm: C (M,N) = alpha op(A) op(B) + beta C, all row-major; 0 on success. */
typedef int (*onednn_sgemm_fn)(char transa, char transb, int64_t M, int64_t N, int64_t K, float alpha,
                               const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                               int64_t ldc);

typedef struct {
    onednn_sgemm_fn sgemm;
    char version[32]; /* "2.6.3" */
    char isa[48];     /* the instructions its JIT uses: "avx512_core_bf16", "avx2" */
} onednn_lib;

/* Loads oneDNN (once per process: BERTC_ONEDNN_LIB, else libdnnl.so.3, then
 * libdnnl.so.2) with its JIT held to at most max_level
 * (a cpu_isa_level; the CPU's own level means no cap). 0 and *out, or -1 with
 * the reason in why. */
int onednn_load(onednn_lib *out, int max_level, char *why, size_t cap);

/* bf16 products (--precision bf16 on the CPU), through oneDNN 2's matmul
 * primitive: one primitive per (transa, transb, beta) with every size and
 * stride given at run time, so a new batch shape builds nothing. */

/* After onednn_load: loads the matmul calls, makes the engine and stream and
 * a first primitive, and checks oneDNN has a real kernel for it (not its
 * reference loops). Once per process; 0, or -1 with the reason in why. */
int onednn_bf16_init(char *why, size_t cap);
/* The kernel oneDNN runs the bf16 products with ("gemm:jit", "brg:avx512_core_amx"), after a successful init. */
const char *onednn_bf16_impl(void);
/* C (M,N) = op(A) op(B) + beta C, A and B bf16 (the high halves of floats),
 * C fp32, row-major, op(X) = X^T when trans; fp32 accumulation; beta 0 or 1.
 * Dense operands only (lda = K, or M when transa; ldb = N, or K; ldc = N).
 * Runs on omp_get_max_threads() threads. 0 on success, -1 on failure. */
int onednn_gemm_bf16(int transa, int transb, int64_t M, int64_t N, int64_t K, const uint16_t *A, int64_t lda,
                     const uint16_t *B, int64_t ldb, float beta, float *C, int64_t ldc);

#endif
