/* The int8 kind of gemm_lowp.h (GEMM_LOWP_INT8): how it rounds, and what
 * its tests look into.
 *
 * W is quantised once (gemm_lowp_prepare): per output channel o, symmetric,
 * scale s_o = max_k |W[o][k]| / 127 and q_o[k] = rne(W[o][k] * (127 / max))
 * in [-127, 127] (gemm_int8_quantize; a zero row, or one whose largest
 * magnitude is below 2^-100: scale 0, q 0). The rows of
 * in are quantised the same way in every call, per row (token) i: scale r_i,
 * q_i[k]. Then
 *   acc[i][o] = sum_k q_i[k] * q_o[k]            (int32, exact)
 *   out[i][o] = fmaf((float)acc, r_i * s_o, b[o])  (fp32: the product r_i * s_o
 *                                                rounded, then one fused
 *                                                multiply-add, b = 0 without bias)
 * The sum is exact in any order and each row has its own scale, so a row's
 * bits depend only on that row, W and b: not on N, the other rows, the
 * thread count or the kernel. Inputs must be finite (a NaN or inf in a row
 * makes its scale meaningless).
 *
 * The fast kernel is AVX512-VNNI's VPDPBUSD (unsigned x signed bytes): the
 * activations go in shifted by +128 (as u8 in [1, 255]) and each channel's
 * accumulator starts at -128 * sum_k q_o[k], which the shift adds back, so
 * the int32 result is the same. At cpu_isa.h's avx2 level the kernel is
 * AVX-VNNI's VPDPBUSD on ymm (the same shift) where the CPU has it, else
 * AVX2's VPMADDUBSW on |q_i| and q_o with q_i's sign (gemm_int8.c says why
 * not the shift there: it would saturate). The scalar kernel computes the
 * same words in portable C. Every kernel gives the same int32 sums, so the
 * same bits. */
#ifndef BERTC_BACKEND_CPU_GEMM_INT8_H
#define BERTC_BACKEND_CPU_GEMM_INT8_H

#include "backend/cpu/gemm_lowp.h"

#include <stdint.h>

/* Quantises x[0 .. n) as above into q; returns the scale. */
float gemm_int8_quantize(const float *x, int n, int8_t *q);
/* The quantised weight q_o[k] and the scale s_o of an int8 layer. */
int gemm_int8_weight(const gemm_lowp_layer *w, int o, int k);
float gemm_int8_weight_scale(const gemm_lowp_layer *w, int o);
/* Nonzero: at the avx2 level, AVX2's VPMADDUBSW kernel runs even where the
 * CPU has AVX-VNNI (for the tests: the same bits). */
void gemm_int8_force_avx2(int on);

#endif
