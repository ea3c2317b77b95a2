/* Self-attention on Tensor Cores in 16 bits (cuda_flash.cu): flash
 * attention over backend.h's windows, packed (cu_seqlens) or padded (every
 * window T long, keys masked by the attention mask), as the CPU backend's
 * attention_forward/attention_backward compute it, within 16-bit bands.
 *
 * Layouts are backend.h's: q, k, v, out and their gradients are rows of
 * C = NH * HS values with heads interleaved, of one 16-bit type
 * (CUDA_R_16F or CUDA_R_16BF; bf16 needs compute capability 8.0, as the
 * backend already requires). out and dout are [N, C]; q, k, v, dq, dk and
 * dv are rows ldqkv elements apart: C for arrays of their own, 3C for the
 * slices q = qkv, k = qkv + C, v = qkv + 2C of one fused [N, 3C] buffer (one
 * QKV GEMM forward and one backward). Scores are scaled by backend_score_scale(HS); padded
 * keys (mask 0) get -FLT_MAX added, as transformers adds finfo.min;
 * dropout with probability p keeps probability element (b, h, i, j) by
 * philox_keep(rng, ((b*NH + h)*T + i)*T + j, p), the padded layout's flat
 * index, the CPU backend's masks bit for bit.
 *
 * Forward saves no probabilities: only lse [NH, N] fp32, the log-sum-exp
 * of each row's scaled scores (lse[h * N + n], n the row). Backward
 * recomputes the probabilities from q, k and lse; it needs out (the
 * forward's output) for the row terms D = rowsum(dout * out), kept in
 * dvec [NH, N] fp32 (working memory of flash_attention_lse_floats).
 *
 * The gradients are written (=), or with accumulate 1 added (+=, as
 * backend.h's ops do) to what dq, dk and dv hold: the sum in fp32, rounded
 * once to the 16-bit type. Any of them may be NULL. Forward writes its
 * output to out and, where out2 is not NULL, the same bytes to out2 (the
 * backend's activation and the copy its backward reads).
 *
 * Supported: HS a multiple of 16 up to 64 (BERT-base/large: 64, MiniLM:
 * 32), ldqkv >= C; flash_attention_supported says. Otherwise the launchers return
 * cudaErrorInvalidValue and run nothing (the fp32 kernels remain for
 * those). Deterministic: no atomics; the same inputs give the same bytes.
 * They launch on `stream` and return cudaGetLastError() after the
 * launches (a configuration error), not waiting for the kernels. */
#ifndef BERTC_CUDA_FLASH_H
#define BERTC_CUDA_FLASH_H

extern "C" {
#include "backend/backend.h"
}

#include <cuda_runtime.h>
#include <library_types.h>

#include <stddef.h>

/* 1 when the kernels handle head size HS. */
int flash_attention_supported(int HS);

/* Floats of lse (and of dvec): NH * w->N. */
size_t flash_attention_lse_floats(const backend_windows *w, int NH);

/* out [N, C] (and out2, NULL or a second [N, C]) = softmax(q k^T * scale
 * + mask) with dropout, times v; lse [NH, N] saved for backward. t:
 * CUDA_R_16F or CUDA_R_16BF. */
cudaError_t flash_attention_forward(cudaStream_t stream, cudaDataType_t t, void *out, void *out2, float *lse,
                                    const void *q, const void *k, const void *v, const backend_windows *w, int NH,
                                    int HS, int ldqkv, float p, philox_stream rng);

/* dq, dk, dv [N, C] = (accumulate 0) or += (1) the gradients of the
 * forward's out for dout; dvec [NH, N] working memory; out and lse the
 * forward's. */
cudaError_t flash_attention_backward(cudaStream_t stream, cudaDataType_t t, void *dq, void *dk, void *dv, float *dvec,
                                     const void *dout, const void *out, const void *q, const void *k, const void *v,
                                     const float *lse, const backend_windows *w, int NH, int HS, int ldqkv,
                                     float p, philox_stream rng, int accumulate);

#endif
