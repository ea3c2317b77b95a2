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

/* Bytes kept back from a card's memory for the CUDA context, cuBLASLt's
 * kernels and the allocator's rounding (an estimate that tests/gpu/run.sh
 * measures). */
#define MEMORY_CONTEXT_RESERVE ((int64_t)640 << 20)
/* The budget of bertc's allocations on a card of gpu_mem bytes (>= 0). */
int64_t memory_budget_for_card(int64_t gpu_mem);

/* "1.50 GiB", "512.0 MiB", "900 B" into buf; returns buf. */
char *memory_fmt_bytes(char *buf, size_t cap, int64_t bytes);

#endif
