/* The int8 linear layer of inference: out[N][OC] = in[N][C] @ W[OC][C]^T + b
 * (W in PyTorch's layout, as backend.h's matmul), products in int8 with
 * exact int32 sums.
 *
 * W is quantised once (gemm_int8_prepare): per output channel o, symmetric,
 * scale s_o = max_k |W[o][k]| / 127 and q_o[k] = rne(W[o][k] * (127 / max))
 * in [-127, 127] (gemm_int8_quantize; a zero row: scale 0, q 0). The rows of
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
 * the int32 result is the same. The scalar kernel computes the same words
 * in portable C; gemm_int8_ref is the definition as plain loops. Which kernel
 * runs: cpu_kernel_level(CPU_K_GEMM_INT8) (cpu_isa.h: avx512 needs
 * AVX512-VNNI), and cpu_kernel_fast says whether this CPU runs it fast.
 *
 * nthreads <= 1 (or a small product) runs on the calling thread without an
 * OpenMP region. Working memory (the quantised rows, a scratch tile per
 * thread) is gemm_ws.h's per-thread buffer. */
#ifndef BERTC_BACKEND_CPU_GEMM_INT8_H
#define BERTC_BACKEND_CPU_GEMM_INT8_H

#include <stddef.h>
#include <stdint.h>

typedef struct gemm_int8_weights gemm_int8_weights;

/* Quantises W (OC rows of C floats, row stride ldw) and keeps bias (OC
 * floats; NULL: none), packed for the kernels. NULL on out of memory. */
gemm_int8_weights *gemm_int8_prepare(const float *W, long ldw, const float *bias, int OC, int C);
void gemm_int8_free(gemm_int8_weights *w);
/* The bytes it holds (the packed int8 weights are about OC x C). */
size_t gemm_int8_bytes(const gemm_int8_weights *w);

/* out (N rows, row stride ldout) = the layer applied to in (N rows of C,
 * row stride ldin), as above. */
void gemm_int8(const gemm_int8_weights *w, int N, const float *in, long ldin, float *out, long ldout, int nthreads);
/* The same bits by plain loops: the definition, and the path when working
 * memory runs out. */
void gemm_int8_ref(const gemm_int8_weights *w, int N, const float *in, long ldin, float *out, long ldout);

/* Quantises x[0 .. n) as above into q; returns the scale. */
float gemm_int8_quantize(const float *x, int n, int8_t *q);
/* The quantised weight q_o[k] and the scale s_o of a prepared layer. */
int gemm_int8_weight(const gemm_int8_weights *w, int o, int k);
float gemm_int8_weight_scale(const gemm_int8_weights *w, int o);

/* Nonzero: calls from now on run the scalar kernel (the same bits; for the
 * tests). */
void gemm_int8_force_scalar(int on);
/* The kernel calls run now: "avx512vnni" or "scalar". */
const char *gemm_int8_kernel(void);

#endif
