/* The memory planner (DESIGN.md, Memory): the bytes of device memory that
 * training a model takes on the CUDA backend, by kind, for a micro-batch
 * size, a sequence length, a precision and a recompute mode, and the
 * largest micro-batch that fits a budget.
 *
 * It predicts what bertc itself allocates, from the same tables the
 * allocations come from: the parameter table (model/params.h), the
 * activation table of bert.c (bert_activation_bytes) and the CUDA backend's
 * workspace formulas (backend/cuda/cuda_ws.h). The CUDA context and the
 * allocator's rounding are outside it; memory_budget_for_card keeps a
 * reserve for them when the budget is a card's size.
 *
 * Usage:
 *   memory_plan p;
 *   memory_plan_compute(&cfg, micro, T, PREC_BF16, RECOMPUTE_NONE, &p);   // p.total bytes
 *   int mb = memory_largest_micro(&cfg, T, PREC_BF16, RECOMPUTE_NONE,
 *                                 memory_budget_for_card(16 * GiB), 256);  // 0: even 1 does not fit
 *
 * What is stored in which precision today: parameters, gradients, Adam m
 * and v in fp32 (the master copy), activations in fp32 (the backend op
 * table is fp32); fp16/bf16 change only the workspace (the GEMM input
 * copies). --recompute layer is bert.c's layout when it recomputes each
 * layer in backward: each layer's input kept, one layer's activations
 * live (bert_model_opts' recompute). */
#ifndef BERTC_MEMORY_H
#define BERTC_MEMORY_H

#include "backend/select.h"
#include "model/bert.h"
#include "model/config.h"

#include <stddef.h>
#include <stdint.h>

/* recompute_kind (model/bert.h) by name: "none" / "layer"; ERR_INPUT otherwise. */
int memory_parse_recompute(const char *s, recompute_kind *out);
const char *memory_recompute_name(recompute_kind r);

typedef struct {
    int64_t n_params;    /* parameters (elements) */
    int64_t params;      /* fp32 master weights */
    int64_t grads;       /* fp32 gradients */
    int64_t optimizer;   /* AdamW m and v, fp32 */
    int64_t activations; /* saved for backward, backward's buffers, the batch's token arrays */
    int64_t workspace;   /* the backend's working memory: cuBLASLt, GEMM input copies, attention */
    int64_t total;       /* the sum: the predicted peak of what bertc allocates */
} memory_plan;

/* The plan for micro-batches of `micro` rows of T tokens. ERR_INPUT for a
 * bad config or sizes (message names them); sizes that overflow give
 * INT64_MAX totals, never wrap. prec PREC_AUTO counts as bf16 (fp16 and
 * bf16 take the same memory). */
int memory_plan_compute(const bert_config *cfg, int micro, int T, precision_kind prec, recompute_kind rc,
                        memory_plan *out);

/* Packed micro-batches (--packing varlen): the plan for micro-batches of
 * up to `micro` windows and max_tokens real tokens in all, each window at
 * most T long (bert_model_opts' max_tokens). Memory follows the
 * tokens, not micro x T: the activations are bert_activation_bytes' for them,
 * the workspace that of the GEMMs and row ops on max_tokens rows (the
 * varlen attention kernel needs none). */
int memory_plan_compute_tokens(const bert_config *cfg, int micro, int T, int64_t max_tokens, precision_kind prec,
                               recompute_kind rc, memory_plan *out);
/* The largest max_tokens in [T, max_tokens_cap] whose packed plan (micro
 * windows) fits in budget; 0 when even T does not. */
int64_t memory_largest_tokens(const bert_config *cfg, int micro, int T, precision_kind prec, recompute_kind rc,
                              int64_t budget, int64_t max_tokens_cap);

/* The largest micro-batch in [1, max_micro] whose plan fits in budget
 * bytes; 0 when even 1 does not fit (or the arguments are bad). */
int memory_largest_micro(const bert_config *cfg, int T, precision_kind prec, recompute_kind rc, int64_t budget,
                         int max_micro);

/* Pipeline stages and the sharded optimizer (bertc plan --pipeline-stages
 * S, --shard-optimizer --ranks D). Stage s of S holds the encoder layers
 * [s*L/S, (s+1)*L/S), stage 0 also the embeddings and stage S-1 the QA
 * head (or the layers of the layout's split); under the 1F1B schedule stage s keeps the saved activations of up
 * to S - s micro-batches in flight (stage 0: S), and one backward's working
 * buffers. Its parameters, gradients and Adam state are its tensors'. With
 * D data-parallel ranks sharding the optimizer (ZeRO stage 1) each rank
 * keeps its piece (dist_piece) of each gradient bucket's Adam m and v: the
 * figure is the most a rank holds (the last's: n/D plus the n mod D left,
 * per bucket). Parameters and gradients stay whole. The activations are
 * bert.c's table grouped by stage (one stage with every layer is exactly
 * bert_activation_bytes); the workspace is the whole model's. */
typedef struct {
    int stages;       /* 1: the whole model on each device */
    int shard_ranks;  /* 1: every rank keeps the whole optimizer state */
    const int *split; /* the stages + 1 layer boundaries (0 = split[0] < ... < split[S] = L);
                       * NULL: memory_stage_layers' even split */
} memory_layout;

typedef struct {
    int layer_first, layer_end; /* encoder layers [first, end) */
    int embeddings, qa_head;    /* 1: the stage holds them */
    int in_flight;              /* micro-batches whose activations the stage keeps */
    memory_plan plan;           /* the stage's figures (n_params: its parameters) */
} memory_stage;

/* Stage s's layers [*first, *end) of L among S stages, as even as whole
 * layers allow. */
void memory_stage_layers(int L, int stages, int stage, int *first, int *end);
/* The plan of one stage of a layout (ERR_INPUT: bad sizes, stages outside
 * 1..L, ranks below 1, a split that does not run from 0 to L in increasing
 * boundaries). Layout {1, 1}: memory_plan_compute's figures. */
int memory_plan_stage(const bert_config *cfg, int micro, int T, precision_kind prec, recompute_kind rc,
                      const memory_layout *lay, int stage, memory_stage *out);
/* The largest micro-batch in [1, max_micro] whose every stage fits in
 * budget; 0 when even 1 does not. */
int memory_largest_micro_layout(const bert_config *cfg, int T, precision_kind prec, recompute_kind rc,
                                const memory_layout *lay, int64_t budget, int max_micro);
/* The FLOPs of one window of T tokens through a stage holding layers
 * [first, end) (with the embeddings when embeddings, the QA head when
 * qa_head), forward and backward: per layer bertc bench's count (every
 * weight matmul 6 x its parameters a token, attention 12 T^2 C a window),
 * the QA head's matmul 6 x 2C a token, the embeddings' three-row sum and
 * LayerNorm 30 C a token (10 forward, 20 backward: lookups are free). */
double memory_stage_flops(const bert_config *cfg, int T, int first, int end, int embeddings, int qa_head);
/* The default pipeline split (bertc train --pipeline-stages S, bertc plan
 * --pipeline-stages S): of the contiguous splits of the L layers into S
 * stages, the one whose largest stage time (memory_stage_flops) is the
 * smallest; among those, the one whose largest stage peak
 * (memory_plan_stage at micro-batches of micro x T, the optimizer
 * unsharded) is the smallest (a dynamic programme over the boundaries;
 * equal peaks: the smaller boundary, last stage first). The time does not
 * depend on micro, the peaks do: the split is chosen for the micro-batch a
 * run uses. split gets S + 1 boundaries. ERR_INPUT: S outside 1..L, bad
 * sizes. */
int memory_stage_split(const bert_config *cfg, int micro, int T, precision_kind prec, recompute_kind rc, int stages,
                       int *split);
/* The bytes of AdamW's m and v on the rank that holds the most with the
 * optimizer sharded over `ranks` (1: the whole, memory_plan's optimizer). */
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
