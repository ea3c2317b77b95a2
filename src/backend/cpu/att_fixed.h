/* Attention's two products in the batch-invariant forward (answers), for
 * head sizes that are a multiple of 16, computed without packing the
 * operands and with the bits gemm_fixed.h defines (each output one chain of
 * fused multiply-adds, k ascending from 0.0f, then times alpha when alpha
 * != 1): the same results as gemm_fixed, faster at these shapes, where K
 * (the head size) is small and packing the scores for P V cost as much as
 * the product (a quarter of an int8 predict at minilm's 12 heads of 32).
 *
 *   S (rows x len)  = alpha * Q (rows x HS) K^T        att_fixed_scores
 *   O (rows x HS)   = P (rows x len) V (len x HS)      att_fixed_pv
 *
 * Row strides are given (Q, K, V, O are rows of the [N, C] tensors). Both
 * run on the calling thread. att_fixed_ok says whether this CPU and the
 * gemm_fixed level run them (AVX-512F; otherwise the caller uses
 * gemm_fixed). */
#ifndef BERTC_BACKEND_CPU_ATT_FIXED_H
#define BERTC_BACKEND_CPU_ATT_FIXED_H

int att_fixed_ok(int HS);
/* kt: scratch of HS * (len rounded up to 16) floats (64-byte aligned). */
void att_fixed_scores(float *S, int lds, const float *q, int ldq, const float *k, int ldk, int rows, int len, int HS,
                      float alpha, float *kt);
void att_fixed_pv(float *o, int ldo, const float *p, int ldp, const float *v, int ldv, int rows, int len, int HS);

#endif
