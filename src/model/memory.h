/* The memory planner (DESIGN.md, Memory): the bytes of device memory that
 * training a model takes on the CUDA backend, by kind, for a micro-batch
 * size, a sequence length, a precision and a recompute mode, and the
 * largest micro-batch that fits a budget.
 *
 * It predicts what bertc itself allocates, from the same tables the
 * allocations come from: the parameter table (model/params.h), the
 * activation table of bert.c (bert_activation_bytes) and the CUDA backend's
 * workspace formulas (backend/workspace_rules.h). The CUDA context and the
 * allocator's rounding are outside it; memory_budget_for_card keeps a
 * reserve for them when the budget is a card's size.
 *
 * Usage:
 *   memory_query q = {.cfg = &cfg, .micro = micro, .T = T, .prec = PREC_BF16};
 *   memory_answer a;
 *   memory_plan(&q, &a);                                             // a.total bytes
 *   int mb = (int)memory_largest(&q, MEMORY_FIT_MICRO,
 *                                memory_budget_for_card(16 * GiB), 256); // 0: even 1 does not fit
 *
 * What is stored in which precision: parameters, gradients, Adam m and v
 * in fp32 (the master copy); activations in the backend's activation type
 * (memory_act_bytes: 16 bits in fp16/bf16, as the CUDA backend keeps
 * them; fp32 in fp32/tf32), their statistics fp32; fp16/bf16 add the
 * 16-bit copy of the parameters the GEMMs read (2 bytes each) and change
 * the workspace (the GEMM input copies) and attention's saved tensors (the flash kernels' lse instead of the
 * probabilities, where cuda_ws_attention_lse says). --recompute layer is bert.c's layout when it recomputes each
 * layer in backward: each layer's input kept, one layer's activations
 * live (bert_model_opts' recompute). */
#ifndef BERTC_MEMORY_H
#define BERTC_MEMORY_H

#include "backend/select.h"
#include "model/bert.h"
#include "model/config.h"

#include <stddef.h>
#include <stdint.h>

/* bert_model_opts.att_lse for the CUDA backend in prec: 1 where its
 * attention saves the lse, not the probabilities (fp16/bf16, and auto, on
 * the flash kernels, cuda_ws_attention_lse). The planner's activations are
 * bert_activation_bytes' with it. */
int memory_attention_lse(const bert_config *cfg, precision_kind prec);

/* bert_model_opts.act_bytes for the CUDA backend in prec: the bytes of an
 * activation (cuda_ws_act_elem: 2 in fp16/bf16, 4 otherwise). */
size_t memory_act_bytes(precision_kind prec);

/* recompute_kind (model/bert.h) by name: "none" / "layer"; ERR_INPUT otherwise. */
int memory_parse_recompute(const char *s, recompute_kind *out);
const char *memory_recompute_name(recompute_kind r);

/* The question: micro-batches of `micro` windows of T tokens, trained in
 * `prec` with `recompute`, on one device of a layout. Zero fields take
 * their defaults, so {.cfg, .micro, .T} is the whole model on one device,
 * padded, unsharded.
 *
 * Packed micro-batches (--packing varlen, max_tokens > 0): up to `micro`
 * windows and max_tokens real tokens in all (T..micro x T), each window at
 * most T long (bert_model_opts' max_tokens). Memory follows the tokens,
 * not micro x T: the activations are bert_activation_bytes' for them, the
 * workspace that of the GEMMs and row ops on max_tokens rows (the varlen
 * attention kernel needs none). Planned for the whole model only.
 *
 * Pipeline stages and the sharded optimizer (bertc plan --pipeline-stages
 * S, --shard-optimizer --ranks D). Stage s of S holds the encoder layers
 * of the split (NULL: [s*L/S, (s+1)*L/S)), stage 0 also the embeddings and
 * stage S-1 the QA head; under the 1F1B schedule stage s keeps the saved
 * activations of S - s micro-batches in flight, and one backward's working
 * buffers. Its parameters, gradients and Adam state are its tensors'. With
 * D data-parallel ranks sharding the optimizer (ZeRO stage 1) each rank
 * keeps its piece (core/piece.h) of each gradient bucket's Adam m and v: the
 * figure is the most a rank holds (the last's: n/D plus the n mod D left,
 * per bucket). Parameters and gradients stay whole. The activations are
 * bert.c's table grouped by stage (one stage with every layer is exactly
 * bert_activation_bytes); the workspace is the whole model's. */
typedef struct {
    const bert_config *cfg;
    int micro;                /* windows a micro-batch (>= 1) */
    int T;                    /* tokens a window (>= 1) */
    int64_t max_tokens;       /* packed: real tokens a micro-batch; 0: padded, micro x T */
    precision_kind prec;      /* PREC_AUTO counts as bf16 (fp16 and bf16 take the same memory) */
    recompute_kind recompute; /* RECOMPUTE_NONE */
    int stages;               /* 0 or 1: the whole model on each device */
    const int *split;         /* the stages + 1 layer boundaries (0 = split[0] < ... < split[S] = L);
                               * NULL: the even split */
    int stage;                /* the stage asked about, 0..stages-1 */
    int shard_ranks;          /* 0 or 1: every rank keeps the whole optimizer state */
} memory_query;

/* The answer: bytes by kind on the device the query names, and what its
 * stage holds. */
typedef struct {
    int64_t n_params;           /* parameters (elements) */
    int64_t params;             /* fp32 master weights */
    int64_t grads;              /* fp32 gradients */
    int64_t optimizer;          /* AdamW m and v, fp32 (the most one rank keeps) */
    int64_t activations;        /* saved for backward, backward's buffers, the batch's token arrays */
    int64_t workspace;          /* the backend's working memory: cuBLASLt, GEMM input copies (fp16/bf16: the
                                 * stage's parameters in 16 bits among them), attention */
    int64_t total;              /* the sum: the predicted peak of what bertc allocates */
    int layer_first, layer_end; /* encoder layers [first, end) */
    int embeddings, qa_head;    /* 1: the stage holds them */
    int in_flight;              /* micro-batches whose activations the stage keeps */
} memory_answer;

/* ERR_INPUT for a bad config, sizes, layout (stages outside 1..L, a split
 * that does not run from 0 to L in increasing boundaries, a stage outside
 * it, ranks below 0) or max_tokens outside T..micro x T (message names
 * them); sizes that overflow give INT64_MAX totals, never wrap. */
int memory_plan(const memory_query *q, memory_answer *out);

typedef enum {
    MEMORY_FIT_MICRO,  /* q->micro in [1, cap] */
    MEMORY_FIT_TOKENS, /* q->max_tokens in [q->T, cap] (packed) */
} memory_fit;

/* The largest value of the field `what` names for which every stage of
 * q's layout fits in budget bytes (q->stage and the field itself
 * ignored); 0 when even the smallest does not (or the query is bad). */
int64_t memory_largest(const memory_query *q, memory_fit what, int64_t budget, int64_t cap);

/* The default pipeline split of q->stages stages (bertc train
 * --pipeline-stages S, bertc plan --pipeline-stages S): of the contiguous
 * splits of the L layers into S stages, the one whose largest stage time
 * (bert_stage_flops, model/config.h) is the smallest; among those, the one
 * whose largest stage peak (memory_plan at q's micro-batches, the
 * optimizer unsharded) is the smallest (a dynamic programme over the
 * boundaries; equal peaks: the smaller boundary, last stage first). The
 * time does not depend on micro, the peaks do: the split is chosen for the
 * micro-batch a run uses. split gets S + 1 boundaries; q's split, stage,
 * shard_ranks and max_tokens are ignored. ERR_INPUT: S outside 1..L, bad
 * sizes. */
int memory_split(const memory_query *q, int *split);

/* The bytes of AdamW's m and v on the rank that holds the most with the
 * optimizer sharded over `ranks` (1: the whole): memory_plan's optimizer,
 * which depends on nothing but the model. */
int64_t memory_optimizer_bytes_per_rank(const bert_config *cfg, int ranks);

/* Bytes kept back from a card's memory for the CUDA context, cuBLASLt's
 * kernels and the allocator's rounding (an estimate that tests/gpu/run.sh
 * measures). */
#define MEMORY_CONTEXT_RESERVE ((int64_t)640 << 20)
/* The budget of bertc's allocations on a card of gpu_mem bytes (>= 0). */
int64_t memory_budget_for_card(int64_t gpu_mem);

/* "1.50 GiB", "512.0 MiB", "900 B" into buf; returns buf. */
char *memory_fmt_bytes(char *buf, size_t cap, int64_t bytes);

#endif
