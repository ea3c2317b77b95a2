/* A row-major SGEMM whose every output element is computed in one fixed
 * order, so that a row of the result does not depend on the batch around it.
 *
 * C = alpha * op(A) @ op(B) + beta * C, row-major, op = transpose when trans
 * != 0: op(A) is M x K, op(B) is K x N, C is M x N.
 * Each C[i][j]'s sum over k is one chain of fused multiply-adds,
 * k = 0 .. K-1 ascending, starting at 0.0f; then
 * out = (alpha == 1 ? s : alpha * s), and when beta != 0,
 * out = out + (beta == 1 ? C : beta * C); when beta == 0, C is not read.
 * So the bits of row i of C depend only on row i of op(A), on op(B), K,
 * alpha, beta and C's old row i: not on M, not on the other rows, not on the
 * thread count, not on the ISA (a vector FMA lane and fmaf round
 * identically).
 *
 * nthreads <= 1 runs on the calling thread and opens no OpenMP parallel
 * region (the inference path calls it from inside one); so does a product
 * too small to share. Working memory (the packed op(B) and, per thread, a
 * block of op(A)) is one buffer per calling thread, kept for the next call
 * and freed when the thread exits; if it cannot be allocated the product is
 * computed by a plain loop in the same order (same bits, slower). */
#ifndef BERTC_BACKEND_CPU_GEMM_FIXED_H
#define BERTC_BACKEND_CPU_GEMM_FIXED_H

void gemm_fixed(int transa, int transb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                int ldb, float beta, float *C, int ldc, int nthreads);

/* The micro-kernels: SCALAR is portable C (fmaf on 16-float arrays, the same
 * tile shape and code as the AVX-512 kernel); AVX2 needs AVX2 + FMA;
 * AVX512 needs AVX-512F with the OS saving its registers. */
enum gemm_isa { GEMM_ISA_SCALAR, GEMM_ISA_AVX2, GEMM_ISA_AVX512 };

/* Caps the kernel used by calls from now on (default: no cap beyond the
 * one cpu_isa.h decided). Every kernel gives the same bits, so this changes
 * speed only; a call already running keeps its kernel. */
void gemm_fixed_set_isa(enum gemm_isa max);
/* The kernel that runs now: the cap, lowered to cpu_kernel_level(CPU_K_GEMM_FIXED). */
enum gemm_isa gemm_fixed_isa(void);
/* "scalar", "avx2" or "avx512". */
const char *gemm_isa_name(enum gemm_isa isa);

#endif
