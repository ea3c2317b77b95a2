/* The activation table: the bytes of each activation tensor bert.c keeps,
 * for the largest micro-batch a model holds. The one home of that rule:
 * bert.c sizes and binds its activation block from it, and the memory
 * planner (memory.c) groups the same sizes by what a pipeline stage keeps,
 * so a tensor added or resized here is planned too.
 *
 * Letters as in bert.c: B windows, T tokens a window, C hidden, I
 * intermediate, NH heads, L layers. A micro-batch has N rows: B x T padded,
 * or max_tokens (> 0) packed rows whose windows are at most T long, so that
 * attention's NH sum len^2 <= NH N T. Every tensor is rounded up to 64
 * bytes; sizes saturate (core/sat.h).
 *
 * Element sizes (act_elem_bytes, the one home of that rule): the
 * statistics (mean, rstd) and the loss are fp32; the other tensors are
 * activations of the backend's type, abytes each (backend_act_size: 4 for
 * fp32, 2 for fp16 / bf16; 0 counts as 4), except probs and attention
 * backward's scratch, counted in floats in every type (ops.def: the
 * probabilities, or under att_lse what the attention saves,
 * backend_attention_saved_floats).
 *
 * A tensor's scope says how many of it a stage of layers [lo, hi) of a
 * model of L layers holds: the embeddings' on the first stage (lo 0), one x
 * per layer boundary (hi - lo + 1), the per-layer tensors one per layer (one
 * slot in all with recompute), the QA head's on the last stage (hi L),
 * backward's working buffers once, and the gradients a pipeline stage
 * sends its neighbours: to the previous stage (not on the first) and from
 * the next (not on the last). */
#ifndef BERTC_ACT_SIZES_H
#define BERTC_ACT_SIZES_H

#include "model/config.h"

#include <stddef.h>
#include <stdint.h>

/* The tensors, in bert.c's bert_acts order. */
typedef enum {
    ACT_EMB, ACT_EMB_MEAN, ACT_EMB_RSTD,
    ACT_X,
    ACT_Q, ACT_K, ACT_V, ACT_CTX, ACT_PROBS, ACT_RES1, ACT_LN1_MEAN, ACT_LN1_RSTD,
    ACT_H1, ACT_FFN_PRE, ACT_FFN_ACT, ACT_RES2, ACT_LN2_MEAN, ACT_LN2_RSTD,
    ACT_LOGITS, ACT_DLOGITS, ACT_LOSS,
    ACT_D_X, ACT_D_H1, ACT_D_A, ACT_D_CTX, ACT_D_Q, ACT_D_K, ACT_D_V, ACT_D_FFN_ACT, ACT_D_FFN_PRE, ACT_D_SCRATCH,
    ACT_D_OUT, ACT_D_IN,
    ACT_COUNT
} act_id;

typedef enum {
    ACT_SCOPE_EMB,       /* the embeddings' (first stage) */
    ACT_SCOPE_BOUNDARY,  /* one per layer boundary: x */
    ACT_SCOPE_LAYER,     /* one per layer (one slot with recompute) */
    ACT_SCOPE_HEAD,      /* the QA head's (last stage) */
    ACT_SCOPE_WORK,      /* backward's working buffers, once */
    ACT_SCOPE_FROM_NEXT, /* the gradient of x[hi] from the next stage (not the last) */
    ACT_SCOPE_TO_PREV,   /* the gradient of x[lo] for the previous stage (not the first) */
} act_scope;

act_scope act_scope_of(act_id i);

/* Element size in bytes of tensor i (see the top). */
size_t act_elem_bytes(act_id i, size_t abytes);

/* Per-layer tensors are stored with this stride (bytes) between layers.
 * att_lse (every function's below): the backend's attention saves the
 * log-sum-exp, not the probabilities (bert_model_opts.att_lse): probs are
 * backend_attention_saved_floats' and backward's scratch none. */
typedef struct {
    size_t nc, ni, n1, att; /* N*C, N*I, N (fp32), NH*N*T (or the lse's) for the largest batch, rounded */
    size_t scr;             /* attention backward's scratch: att, or 0 with the lse */
} act_strides;

/* Rows a micro-batch holds: B x T, or max_tokens (> 0). */
size_t act_rows(int B, int T, int64_t max_tokens);
/* Attention probabilities' floats per layer: NH x rows x T. */
size_t act_att(const bert_config *cfg, int B, int T, int64_t max_tokens);
act_strides act_strides_for(const bert_config *cfg, int B, int T, int64_t max_tokens, int att_lse, size_t abytes);

/* unit[i]: the bytes of one tensor i (one layer's, one boundary's). */
void act_units(size_t unit[ACT_COUNT], const bert_config *cfg, int B, int T, int64_t max_tokens, int att_lse,
               size_t abytes);

/* sizes[i]: the bytes of tensor i that a stage of layers [lo, hi) holds
 * (0, L: the whole model); recompute 1: the per-layer tensors other than x
 * have one layer's slot. */
void act_sizes(size_t sizes[ACT_COUNT], const bert_config *cfg, int B, int T, int64_t max_tokens, int att_lse,
               size_t abytes, int recompute, int lo, int hi);

/* 1 for the tensors every activation set (one per micro-batch in flight)
 * has its own of: those saved for backward (the per-layer ones only
 * without recompute) and the stage's ends; 0 for backward's working
 * buffers, which the sets share. */
int act_per_set(act_id i, int recompute);

/* Bytes of a stage's activations with `sets` sets: set 0 whole, and the
 * per-set part of each other. */
size_t act_total(const bert_config *cfg, int B, int T, int64_t max_tokens, int att_lse, size_t abytes, int recompute,
                 int lo, int hi, int sets);

/* The batch's int32 values one set holds: ids, types, mask, pos (rows
 * each), start, end (B each), cu (B + 1). */
size_t act_int_count(int B, size_t rows);

#endif
