/* The checks that test_gemm_int8 and test_gemm_bf16 share: a low-precision
 * linear layer of inference (backend/cpu/gemm_lowp.h) checked for the same
 * bits as its reference loop on every kernel and thread count, for batch
 * invariance, and measured against fp32 on BERT-like data. */
#ifndef BERTC_TESTS_LINEAR_CHECK_H
#define BERTC_TESTS_LINEAR_CHECK_H

#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/gemm_lowp.h"

#include <stddef.h>

/* A standard normal number (Box-Muller on tu_urand). */
double lc_gauss(void);
/* malloc or exit 2. */
void *lc_alloc(size_t bytes);

/* A layer on Gaussian operands: in N(0, 1), W N(0, 0.05^2), b N(0, 0.1^2),
 * prepared and run on 2 threads into out. */
typedef struct {
    int N, C, OC;
    float *in, *W, *b, *out;
    gemm_lowp_layer *w;
} lc_case;
/* 0, or -1 (a counted failure, nothing to free) when prepare fails. */
int lc_case_run(lc_case *c, gemm_lowp_kind L, int N, int C, int OC);
void lc_case_free(lc_case *c);

/* gemm_lowp against gemm_lowp_ref(), bit for bit, over shapes with N 1..65, C 32..1536
 * (odd ones too), OC 1..1536, on the CPU's kernel at 1, 2 and 3 threads and
 * on the scalar kernel; row strides wider than the rows, whose gaps in out
 * must stay untouched. */
void lc_check_bits(gemm_lowp_kind L);
/* Batch invariance: rows of N = 384 computed alone, inside 7 rows at
 * another position, at 1 and 2 threads, on the scalar kernel and from inside
 * an OpenMP region (nthreads 1): the same bits as in the whole batch. */
void lc_check_invariance(gemm_lowp_kind L);
/* gemm_lowp_n (three layers on one input, biased and not) against three
 * calls of gemm_lowp, bit for bit, at 1 and 2 threads. */
void lc_check_n(gemm_lowp_kind L);
/* Prints the kind's kernel, what cpu_isa.h says of it and whether it runs
 * fast here (cpu_kernel_fast, which must agree with the kernel running:
 * one of the space-separated fast_names); under BERTC_CPU_ISA=sse the
 * scalar kernel must run, under BERTC_CPU_ISA=avx2 no avx512 one. Returns
 * cpu_kernel_fast's answer. */
int lc_header(gemm_lowp_kind L, cpu_kernel_family f, const char *fast_names);
/* The relative error sqrt(sum (out - exact)^2 / sum exact^2) of the layer
 * against the exact product of the fp32 operands (in double), on BERT-like
 * data: "ln" a LayerNorm output (N(0,1) per channel times a gain near 1, two
 * outlier channels of gain 12) into C = 384, OC = 1536; "gelu" GELU
 * outputs into C = 1536, OC = 384. Weights N(0, 0.03^2), bias N(0, 0.02^2).
 * Prints both and returns the larger. */
double lc_bert_error(gemm_lowp_kind L);

/* The checks every kind shares: lc_check_bits, lc_check_invariance,
 * lc_check_n and lc_bert_error held under bound; returns tu_done()'s exit code. */
int lc_finish(gemm_lowp_kind L, double bound);

#endif
