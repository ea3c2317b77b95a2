/* The CUDA backend's working memory, as formulas: how many bytes each op
 * needs besides its arguments. Plain C, no CUDA, and no part of the CUDA
 * backend's private headers: the backend sizes its workspace with these
 * (backend/cuda/cuda_ws.h includes this) and the memory planner
 * (model/memory.c) predicts it with the same functions, so the two cannot
 * drift apart.
 *
 * The backend holds one workspace buffer, grown (freed, then allocated
 * again) to the largest need an op has asked for, and a few fixed buffers
 * made at creation (CUDA_WS_FIXED). Every part of a workspace starts on a
 * CUDA_WS_ALIGN boundary, which cuBLASLt's Tensor Core kernels want.
 *
 * Letters as in backend.h. "Low precision" (fp16, bf16) converts GEMM
 * inputs to 2-byte types (the weights once, into a copy the optimizer
 * keeps current: cuda_ws_weight_copy); fp32 and tf32 feed fp32 to the GEMMs directly,
 * except attention, which always works on per-head copies. Sizes
 * saturate (core/sat.h). */
#ifndef BERTC_BACKEND_WORKSPACE_RULES_H
#define BERTC_BACKEND_WORKSPACE_RULES_H

#include "core/sat.h"

#include <stddef.h>
#include <stdint.h>

#define CUDA_WS_ALIGN ((size_t)256)
/* Rows per partial sum of the deterministic column sums (bias and
 * LayerNorm parameter gradients, token-type embeddings). */
#define CUDA_WS_COLSUM_ROWS 128
/* cuBLASLt's workspace (32 MiB: what NVIDIA recommends for Hopper). */
#define CUDA_WS_CUBLASLT ((size_t)32 << 20)
/* Partial sums of sum_squares (at most this many blocks) and the flags. */
#define CUDA_WS_REDUCE_BLOCKS 1024
/* Everything allocated at creation: cuBLASLt's workspace, the reduction
 * partials (doubles) and the result slots. */
#define CUDA_WS_FIXED (CUDA_WS_CUBLASLT + CUDA_WS_REDUCE_BLOCKS * sizeof(double) + CUDA_WS_ALIGN)
/* Bytes of one entry of adamw_multi's tensor table on the device
 * (cuda_mt_tensor, cuda_fused.h); the table is allocated once, for the
 * ranges of the parameter block that the optimizer updates. */
#define CUDA_WS_MT_ENTRY ((size_t)64)

/* n bytes rounded up to the alignment (saturating). */
static inline size_t cuda_ws_round(size_t n)
{
    return sat_round_up(n, CUDA_WS_ALIGN);
}

/* Bytes of a part of `count` elements of `size` bytes, aligned. */
static inline size_t cuda_ws_part(size_t count, size_t size)
{
    return cuda_ws_round(sat_mul(count, size));
}

/* Element size of GEMM inputs: low = 1 for fp16/bf16, 0 for fp32/tf32. */
static inline size_t cuda_ws_elem(int low)
{
    return low ? 2 : 4;
}

static inline size_t cuda_ws_colsum_chunks(size_t N)
{
    return (N + CUDA_WS_COLSUM_ROWS - 1) / CUDA_WS_COLSUM_ROWS;
}

/* The 16-bit copy of the weights that low-precision GEMMs read (not
 * workspace the ops take, but the backend's working memory all the same):
 * 2 bytes per float of the allocation the weights live in, n_floats of
 * them (the parameter block), rounded as the allocator rounds both. */
static inline size_t cuda_ws_weight_copy(int low, size_t n_floats)
{
    return low ? cuda_ws_round(cuda_ws_round(sat_mul(n_floats, 4)) / 2) : 0;
}

/* matmul_forward_n over n layers (Q, K, V: 3) in one GEMM: a low-precision
 * copy of inp, which they share, with fp32 activations (a16 0); 16-bit
 * activations (a16 1, cuda_ws_act_elem) are read as they are and take none
 * of it. The weights, and the biases the epilogue reads in 16 bits, are
 * read from their 16-bit copy (cuda_ws_weight_copy). */
static inline size_t cuda_ws_matmul_forward_n(int low, int a16, size_t n, size_t N, size_t C, size_t OC)
{
    (void)n, (void)OC;
    return low && !a16 ? cuda_ws_part(sat_mul(N, C), 2) : 0;
}

/* matmul_forward: as matmul_forward_n for one layer. */
static inline size_t cuda_ws_matmul_forward(int low, int a16, size_t N, size_t C, size_t OC)
{
    return cuda_ws_matmul_forward_n(low, a16, 1, N, C, OC);
}

/* matmul_backward: the partial column sums of the bias gradient where no
 * weight gradient is asked for, or else the bias gradient the
 * weight-gradient GEMM writes (CUBLASLT_EPILOGUE_BGRADB, OC floats) before
 * it is added to db: the same part, at least OC floats for N >= 1. With
 * fp32 activations in a low precision (a16 0) also the low-precision
 * copies of dout and inp; 16-bit activations are the GEMM's inputs as
 * they are. */
static inline size_t cuda_ws_matmul_backward(int low, int a16, size_t N, size_t C, size_t OC)
{
    size_t ws = cuda_ws_part(sat_mul(cuda_ws_colsum_chunks(N), OC), 4);
    if (low && !a16) {
        ws = sat_add(ws, cuda_ws_part(sat_mul(N, OC), 2));
        ws = sat_add(ws, cuda_ws_part(sat_mul(N, C), 2));
    }
    return ws;
}

/* attention forward and backward: q, k, v and dout as per-head
 * [B,NH,T,HS] copies in the GEMM input type, the dropped-out
 * probabilities (or the score gradient) [B,NH,T,T] in the GEMM input type,
 * and one fp32 [B,NH,T,HS] GEMM output. */
static inline size_t cuda_ws_attention(int low, size_t B, size_t T, size_t NH, size_t HS)
{
    size_t e = cuda_ws_elem(low);
    size_t nc = sat_mul(sat_mul(B, T), sat_mul(NH, HS));
    size_t tt = sat_mul(sat_mul(B, NH), sat_mul(T, T));
    size_t ws = sat_mul(4, cuda_ws_part(nc, e));
    ws = sat_add(ws, cuda_ws_part(tt, e));
    return sat_add(ws, cuda_ws_part(nc, 4));
}

/* Whether attention runs the 16-bit flash kernels (cuda_flash.h) and saves
 * the log-sum-exp instead of the probabilities (backend.h,
 * backend_attention_saved_floats): fp16/bf16 with HS a multiple of 16 up
 * to 64 (flash_attention_supported; tests/cudaemu/test_flash.cc checks that
 * the two agree). The CUDA backend's door (attention_saves_lse) and the
 * memory planner both ask this. */
static inline int cuda_ws_attention_lse(int low, size_t HS)
{
    return low && HS >= 16 && HS <= 64 && HS % 16 == 0;
}

/* Bytes of an activation (backend_act, cuda_ctx.atype): 16 bits in
 * fp16/bf16 (low 1, issue 47's 16-bit activations), fp32 in fp32/tf32. The
 * CUDA backend sets ctx->atype from it and the memory planner sizes the
 * activations by it, so the two cannot disagree. */
static inline size_t cuda_ws_act_elem(int low)
{
    return cuda_ws_elem(low); /* the GEMMs' input type */
}

/* attention on the flash kernels with fp32 activations, N rows (padded
 * B*T, or the packed tokens): 16-bit copies of q, k, v and dout, the 16-bit
 * dq, dk and dv, and backward's row terms dvec [NH,N] fp32. */
static inline size_t cuda_ws_attention_flash(size_t N, size_t NH, size_t HS)
{
    size_t nc = sat_mul(N, sat_mul(NH, HS));
    return sat_add(sat_mul(7, cuda_ws_part(nc, 2)), cuda_ws_part(sat_mul(NH, N), 4));
}

/* attention on the flash kernels with 16-bit activations (the backend's
 * atype fp16/bf16): they read and write the activations in place, so
 * forward needs nothing and backward only its row terms dvec [NH,N] fp32. */
static inline size_t cuda_ws_attention_flash16(size_t N, size_t NH)
{
    return cuda_ws_part(sat_mul(NH, N), 4);
}

/* layernorm_backward: partial column sums for dw and db. */
static inline size_t cuda_ws_layernorm_backward(size_t N, size_t C)
{
    return sat_mul(2, cuda_ws_part(sat_mul(cuda_ws_colsum_chunks(N), C), 4));
}

/* The fused LayerNorm backwards (residual_layernorm_backward,
 * embedding_layernorm_backward; cuda_fused.h): a partial row of dw and one
 * of db per CUDA_WS_FUSED_LN_ROWS rows, which a second launch adds in order. */
#define CUDA_WS_FUSED_LN_ROWS 32
static inline size_t cuda_ws_fused_ln_backward(size_t N, size_t C)
{
    size_t parts = (N + CUDA_WS_FUSED_LN_ROWS - 1) / CUDA_WS_FUSED_LN_ROWS;
    return sat_mul(2, cuda_ws_part(sat_mul(parts, C), 4));
}

/* An upper bound of CUB's radix sort temporary storage for N int pairs:
 * its alternate key and value buffers plus histograms and tile state. The
 * backend asks CUB for the exact figure and uses that when it is larger. */
static inline size_t cuda_ws_sort_temp_bound(size_t N)
{
    return sat_add(cuda_ws_part(N, 8), (size_t)1 << 20);
}

/* Token-type rows the embedding gradient covers: the op does not know the
 * config's type_vocab_size (BERT's is 2); a larger id is reported as an
 * error at the next sync. */
#define CUDA_WS_MAX_TYPES 16

/* embedding_backward: the sorted ids and the (row) values in and out, the
 * flags of the token types present, CUB's sort storage, and the token-type
 * partial sums. */
static inline size_t cuda_ws_embedding_backward(size_t N, size_t C, size_t sort_temp)
{
    size_t ws = sat_mul(3, cuda_ws_part(N, 4));
    ws = sat_add(ws, cuda_ws_part(CUDA_WS_MAX_TYPES, 4));
    ws = sat_add(ws, cuda_ws_round(sort_temp));
    size_t parts = sat_mul(cuda_ws_colsum_chunks(N), sat_mul(CUDA_WS_MAX_TYPES, C));
    return sat_add(ws, cuda_ws_part(parts, 4));
}

/* qa_loss: the loss of every (row, side), summed afterwards in order. */
static inline size_t cuda_ws_qa_loss(size_t B)
{
    return cuda_ws_part(sat_mul(2, B), sizeof(double));
}

#endif
