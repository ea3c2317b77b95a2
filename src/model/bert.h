/* BertForQuestionAnswering on a backend: parameters, gradients and
 * activations in backend memory, forward and backward orchestration.
 * The trainer and predictor use only this header (and optim.h). */
#ifndef BERTC_BERT_H
#define BERTC_BERT_H

#include "backend/backend.h"
#include "model/config.h"
#include "model/params.h"

#include <stdint.h>

/* Dropout sites and streams. Each site of each layer draws from its own
 * Philox stream (philox.h), so no two sites share a mask:
 *   embeddings                          stream 0
 *   encoder layer l (0-based), site s   stream (l + 1) * 16 + s
 * i.e. "layer" in philox.h's layer*16 + site counts the embeddings as layer
 * 0 and encoder layer l as l + 1. Site 0 of an encoder layer is unused. */
enum {
    DROPOUT_EMBEDDINGS = 0, /* stream 0 */
    DROPOUT_ATTN_PROBS = 1, /* attention probabilities, after softmax */
    DROPOUT_ATTN_OUT = 2,   /* attention.output.dense, before the residual */
    DROPOUT_FFN_OUT = 3,    /* output.dense, before the residual */
};

/* The stream of a site: layer -1 means the embeddings. */
static inline uint32_t bert_dropout_stream(int layer, int site)
{
    return layer < 0 ? 0u : (uint32_t)(layer + 1) * 16u + (uint32_t)site;
}

/* One micro-batch, host memory: B rows of T tokens. start/end may be NULL
 * (no loss: prediction).
 *
 * Packed (cu_seqlens not NULL): B windows of their real tokens only,
 * concatenated; window b is rows cu_seqlens[b] .. cu_seqlens[b+1] - 1 of
 * N = cu_seqlens[B] rows, each window 1 to T tokens long. input_ids and
 * token_type_ids are [N], attention_mask is not read, start/end are
 * positions in the window, and the logits come back as [N] (packed). T is
 * the padded length the batch stands for: dropout masks are drawn at the
 * padded layout's element indices, so a packed batch and the same windows
 * padded to T (with mask_loss) give the same loss, logits at real positions
 * and gradients, to float rounding. The QA loss takes each window's softmax
 * over its own tokens.
 *
 * mask_loss (padded batches): the QA loss's softmax over each row's real
 * tokens only (the attention mask must be ones then zeros), as the packed
 * path computes it; 0 keeps transformers' loss over all T positions. */
typedef struct {
    int B, T;
    const int32_t *input_ids, *token_type_ids, *attention_mask; /* [B*T] */
    const int32_t *start_positions, *end_positions;             /* [B] */
    const int32_t *cu_seqlens;                                  /* [B+1] packed, or NULL */
    int mask_loss;
} bert_batch;

typedef struct bert_model bert_model;

/* What a layer keeps for backward. */
typedef enum {
    RECOMPUTE_NONE = 0, /* every layer's activations */
    RECOMPUTE_LAYER,    /* each layer's input only; backward runs the layer's forward again */
} recompute_kind;

/* How a micro-batch holds its windows: padded to T, or packed (real
 * tokens only, model/pack.h; bert_batch's cu_seqlens). */
typedef enum {
    PACKING_NONE = 0,
    PACKING_VARLEN,
} packing_kind;

/* The model bert_model_create builds, and whose activations
 * bert_activation_bytes counts:
 *
 *   bert_model_create(&m, &(bert_model_opts){.cfg = &cfg, .be = &be, .max_B = 8, .T = 384});
 *
 * max_B: rows (windows) per micro-batch, T: tokens per window.
 * max_tokens: rows (tokens) a micro-batch holds in all, each window at most
 * T long; 0 is max_B * T. A packed batch needs max_tokens >= its N, a
 * padded one max_tokens >= B * T.
 * recompute: RECOMPUTE_LAYER keeps only each layer's input and one layer's
 * activations, and bert_backward runs each layer's forward again before
 * its backward (--recompute layer): less memory, one more forward of L - 1
 * layers, the same gradients bit for bit. */
typedef struct {
    const bert_config *cfg;
    backend *be;            /* not read by bert_activation_bytes */
    int max_B, T;
    int64_t max_tokens;
    recompute_kind recompute;
    /* A pipeline stage: encoder layers [stage_lo, stage_hi) (stage_hi 0:
     * L), with the embeddings when stage_lo == 0 and the QA head and loss
     * when stage_hi == L; `sets` activation sets (0: one), one per
     * micro-batch in flight (bert_stage_forward). Its parameter and
     * gradient blocks hold only its tensors, the floats [offset, offset +
     * stage table's total) of the whole table (bert_model_stage);
     * bert_model_set_params / get_params still take the whole host block
     * and copy that slice. The defaults (all 0) are the whole model. */
    int stage_lo, stage_hi, sets;
    /* Answers only: no gradient block (bert_model_grads NULL,
     * bert_backward ERR_RUNTIME), and the activations are not written up
     * front (their pages are touched by the forwards that use them). */
    int forward_only;
    /* bert_activation_bytes only (bert_model_create asks o->be,
     * backend_attention_saves_lse): 1 when the backend's attention saves the
     * log-sum-exp instead of the probabilities, so probs per layer are
     * backend_attention_saved_floats and backward has no scratch (the CUDA
     * backend in fp16/bf16, cuda_ws_attention_lse). */
    int att_lse;
    /* bert_activation_bytes only (bert_model_create asks o->be,
     * backend_act_size): bytes of an activation, 2 where the backend keeps
     * them in fp16 / bf16; 0 is fp32's 4. */
    size_t act_bytes;
} bert_model_opts;

/* Allocates parameters, gradients and activations on o->be. Parameters
 * start at zero. */
int bert_model_create(bert_model **out, const bert_model_opts *o);
void bert_model_free(bert_model *m);

/* Bytes of backend memory bert_model_create takes for activations (saved
 * for backward, plus backward's working buffers and the batch's int
 * arrays) for o; parameters, gradients and optimizer state not included.
 * SIZE_MAX when it overflows; 0 for a stage that does not fit the model. */
size_t bert_activation_bytes(const bert_model_opts *o);

const bert_config *bert_model_config(const bert_model *m);
int bert_model_max_batch(const bert_model *m);
/* Rows (tokens) a micro-batch may hold: max_tokens, or max_B * T. */
int64_t bert_model_max_tokens(const bert_model *m);
int bert_model_seq_len(const bert_model *m);
recompute_kind bert_model_recompute(const bert_model *m);
const param_table *bert_model_table(const bert_model *m);
/* The tensors this model holds, offsets counted from its first (the whole
 * table for a whole model): what its optimizer works on. */
const param_table *bert_model_stage_table(const bert_model *m);
/* Its layers [*lo, *hi) and the offset (floats) of its slice in the whole
 * table (0 for a whole model); any pointer may be NULL. */
void bert_model_stage(const bert_model *m, int *lo, int *hi, size_t *param_offset);
backend *bert_model_backend(bert_model *m);
/* Backend memory of the parameter block and the gradient block (the stage
 * table's total floats each: the whole table's for a whole model). */
float *bert_model_params(bert_model *m);
float *bert_model_grads(bert_model *m);

/* Host <-> backend copies of the parameters: host is the whole block
 * (table order), of which a stage copies its slice. */
int bert_model_set_params(bert_model *m, const float *host);
int bert_model_get_params(bert_model *m, float *host);

/* Forward of one micro-batch. dropout_hidden / dropout_attn are the
 * probabilities (0 in evaluation); rng.seed and rng.step select the masks
 * (rng.stream is set per site inside). When the batch has labels, *loss
 * receives the loss. start_logits / end_logits, when not NULL, receive
 * [B*T] floats on the host. The batch is checked first (1 <= B <= max_B,
 * 1 <= T <= the model's T, ids and token types inside the vocabularies,
 * mask 0 or 1; ERR_INPUT naming the row and column otherwise). */
int bert_forward(bert_model *m, const bert_batch *b, float dropout_hidden, float dropout_attn, philox_stream rng,
                 float *loss, float *start_logits, float *end_logits);
/* Backward of the last forward (which had labels): accumulates (+=) into
 * the gradient block the gradient of grad_scale * loss (grad_scale =
 * 1/micro-batches for gradient accumulation). As transformers builds
 * word_embeddings with padding_idx = pad_token_id, that row's gradient
 * stays 0. ERR_RUNTIME when the last forward had no labels or failed. */
int bert_backward(bert_model *m, float grad_scale);
void bert_zero_grad(bert_model *m);

/* Pipeline stages. bert_stage_forward is bert_forward into activation set
 * `set` (0 .. sets - 1), whose tensors stay for bert_stage_backward of the
 * same set while other sets run forward and backward. A stage that is not
 * the first reads its input x[lo] from bert_stage_x_in(set), which the
 * caller fills first (N rows of C activations: N = B * T padded, cu_seqlens[B]
 * packed); every stage leaves its output x[hi] in bert_stage_x_out(set); a
 * stage that is not the last computes no loss and no logits (loss and the
 * logits are left alone). bert_stage_backward of a stage that is not the
 * last starts from d(x[hi]) in bert_stage_dx_out(set), filled by the caller
 * first, and one that is not the first ends with d(x[lo]) in
 * bert_stage_dx_in(set); grad_scale matters on the last stage only (it
 * scales the loss's gradient). The batch's ids, mask, cu_seqlens and labels
 * are given to every stage (each reads what it needs), and the dropout
 * masks are drawn per global layer index, so the stages of a split model
 * compute what the whole model computes, bit for bit. All four buffers are
 * backend memory of the set, stable until the set's next forward, N x C
 * activations of the backend's type (bert_model_act_size bytes each). */
int bert_stage_forward(bert_model *m, int set, const bert_batch *b, float dropout_hidden, float dropout_attn,
                       philox_stream rng, float *loss, float *start_logits, float *end_logits);
int bert_stage_backward(bert_model *m, int set, float grad_scale);
backend_act *bert_stage_x_in(bert_model *m, int set);
const backend_act *bert_stage_x_out(bert_model *m, int set);
backend_act *bert_stage_dx_out(bert_model *m, int set);
const backend_act *bert_stage_dx_in(bert_model *m, int set);
/* Bytes of one activation of the model (backend_act_size of its backend). */
size_t bert_model_act_size(const bert_model *m);
int bert_model_sets(const bert_model *m);

/* Gradient buckets, for data-parallel training that sums gradients across
 * processes while backward still runs (train/run_dp.c): the gradient block
 * is cut into L + 2 contiguous ranges in the order backward finishes them:
 * the QA head, encoder layer L-1, ..., layer 0, the embeddings. With a hook
 * set, bert_backward calls fn(arg, offset, count) (in floats, into the
 * gradient block) for each range as soon as the backend has queued the last
 * op that writes it, in that order; a non-zero return ends backward with
 * that code. The hook stays set until cleared with fn = NULL. A pipeline
 * stage reports its own ranges only, as offsets into its own block.
 * bert_grad_buckets_emit calls it for ranges from, from + 1, ..., L + 1 in
 * that order without a backward (a process with no examples in the step,
 * or one whose backward stopped half-way). */
typedef int (*bert_grads_ready_fn)(void *arg, size_t offset, size_t count);
void bert_model_set_grads_ready(bert_model *m, bert_grads_ready_fn fn, void *arg);
int bert_grad_buckets_emit(bert_model *m, int from);
/* How many ranges (L + 2). */
int bert_grad_bucket_count(const bert_model *m);

#endif
