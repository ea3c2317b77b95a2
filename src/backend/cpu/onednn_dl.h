/* oneDNN's sgemm, loaded with dlopen: the training GEMM at AVX2 and above where
 * the library is installed (Debian's libdnnl2), OpenBLAS's otherwise. The GEMM study
 * (bench/gemm_study.sh, bench/RESULTS.md) measured dnnl_sgemm at bertc's
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

#endif
