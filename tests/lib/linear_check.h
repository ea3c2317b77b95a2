/* The checks that test_gemm_int8 and test_gemm_bf16 share: a linear layer of
 * inference (out[N][OC] = in[N][C] @ W[OC][C]^T + b, weights prepared once)
 * seen through a table of its functions, checked for the same bits as its
 * reference loop on every kernel and thread count, for batch invariance, and
 * measured against fp32 on BERT-like data. */
#ifndef BERTC_TESTS_LINEAR_CHECK_H
#define BERTC_TESTS_LINEAR_CHECK_H

#include <stddef.h>

typedef struct {
    const char *name; /* "int8", "bf16" */
    void *(*prepare)(const float *W, long ldw, const float *bias, int OC, int C);
    void (*free)(void *w);
    void (*run)(const void *w, int N, const float *in, long ldin, float *out, long ldout, int nthreads);
    void (*ref)(const void *w, int N, const float *in, long ldin, float *out, long ldout);
    void (*force_scalar)(int on);
    const char *(*kernel)(void); /* the kernel run() uses now */
} lc_layer;

/* A standard normal number (Box-Muller on tu_urand). */
double lc_gauss(void);
/* malloc or exit 2. */
void *lc_alloc(size_t bytes);

/* run() against ref(), bit for bit, over shapes with N 1..65, C 32..1536
 * (odd ones too), OC 1..1536, on the CPU's kernel at 1, 2 and 3 threads and
 * on the scalar kernel; row strides wider than the rows, whose gaps in out
 * must stay untouched. */
void lc_check_bits(const lc_layer *L);
/* Batch invariance: rows of N = 384 computed alone, inside 7 rows at
 * another position, at 1 and 2 threads, on the scalar kernel and from inside
 * an OpenMP region (nthreads 1): the same bits as in the whole batch. */
void lc_check_invariance(const lc_layer *L);
/* The relative error sqrt(sum (out - exact)^2 / sum exact^2) of the layer
 * against the exact product of the fp32 operands (in double), on BERT-like
 * data: "ln" a LayerNorm output (N(0,1) per channel times a gain near 1, two
 * outlier channels of gain 12) into C = 384, OC = 1536; "gelu" GELU
 * outputs into C = 1536, OC = 384. Weights N(0, 0.03^2), bias N(0, 0.02^2).
 * Prints both and returns the larger. */
double lc_bert_error(const lc_layer *L);

#endif
