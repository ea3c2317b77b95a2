/* How a training run spreads over its ranks: one strategy per parallel
 * mode, private to src/train/. run_step.c's step is the same for every
 * mode and calls the hooks below in this order:
 *
 *   pass     the step's forward and backward passes on this rank, into
 *            freshly zeroed gradients, with whatever is summed while
 *            backward runs (a bucket's all-reduce as it is final); a
 *            failure on any rank ends every rank (agreed here)
 *   reduce   the gradient sums not made during pass
 *   terms    this rank's part of the step's one reduce (run_step.c: the
 *            loss, signals, the writer's save clock, and what the mode
 *            adds: a squared norm summed over the ranks, times)
 *   updated  after AdamW (run_step.c's one optim_apply): what the mode
 *            must do with the update (the sharded optimizer's all-gather)
 *
 * (terms and updated may be NULL: nothing to add, nothing to do)
 *
 * and around the steps: start (this rank's model and optimizer, once the
 * host blocks hold the initial or resumed parameters and moments), connect
 * (after every rank's set-up, collective: the communicator), gather (the
 * parameters, and the Adam state with optimizer, into the writer's host
 * blocks for a checkpoint or the export; collective, agreed), free; and
 * what the run tells of the mode (run_log.c): describe (its start-up
 * lines), progress (what it adds to the progress line at buf, cap bytes
 * left), info (its keys of RUN/info.csv; NULL: none).
 *
 * A new mode is a new file defining a run_strategy, and one line in
 * strategy_pick (run_setup.c). Each keeps its state in c->strat_state (the
 * pipeline in c->pipe); its communicator (comm/comm.h) is c->cm. */
#ifndef BERTC_TRAIN_STRATEGY_H
#define BERTC_TRAIN_STRATEGY_H

#include "infer/predict.h"
#include "train/optim.h"

#include <stddef.h>
#include <stdint.h>

struct run_ctx;
struct comm;

/* What one rank adds to the step's reduce: sums over the ranks in rank
 * order, back in place once summed. */
typedef struct {
    double loss;     /* in: pass's loss on this rank */
    double sumsq;    /* this rank's part of the global squared gradient norm */
    int norm_summed; /* 1: AdamW takes sumsq's sum as the norm; 0: the norm of this rank's whole gradients */
    double *extra;   /* more doubles to sum with them (NULL: none) */
    int nextra;
} run_terms;

typedef struct run_strategy {
    const char *name;
    int (*start)(struct run_ctx *c);
    int (*connect)(struct run_ctx *c);
    int (*pass)(struct run_ctx *c, const int32_t *idx, int count, float scale, double *loss);
    int (*reduce)(struct run_ctx *c);
    void (*terms)(struct run_ctx *c, run_terms *t);
    int (*updated)(struct run_ctx *c, int rc, const optim_result *res);
    int (*gather)(struct run_ctx *c, int optimizer);
    void (*free)(struct run_ctx *c);
    void (*describe)(const struct run_ctx *c);
    void (*progress)(const struct run_ctx *c, char *buf, size_t cap);
    void (*info)(struct run_ctx *c);
    /* train's evaluation with N ranks (infer.h's infer_predict_fn, arg the
     * run_ctx; collective): the answers on the writer, every rank's share of
     * the work done. With one rank the evaluation is infer_run's own. */
    int (*predict)(void *c, const postprocess_opts *po, qa_predictions *out);
    int agree_saves; /* the writer's checkpoint is agreed on by every rank (the stages' parts were gathered) */
} run_strategy;

extern const run_strategy run_strategy_data_parallel; /* run_dp.c: one process, or N ranks summing gradients */
extern const run_strategy run_strategy_sharded;       /* run_shard.c: --shard-optimizer */
extern const run_strategy run_strategy_pipeline;      /* run_pipe.c: --pipeline-stages */

/* run_dp.c, shared with run_shard.c (the sharded optimizer is data
 * parallel with another bucket collective): the model, this rank's share of
 * the step, and the host staging of a GPU's gradients. bucket: the
 * collective that sums a bucket (comm_allreduce_begin or
 * comm_reduce_scatter_begin). run_dp_init: the state and the model. */
typedef struct {
    int (*bucket)(struct comm *cm, float *x, size_t n);
    float *host_grads;   /* GPUs whose communicator is the host's: the gradients' host copy */
    int bucketed;        /* buckets summed during backward (CPU, NCCL) */
    int buckets_sent;    /* this step's, so far */
    void *mode;          /* the mode's own (run_shard.c's pieces) */
} run_dp_state;

int run_dp_init(struct run_ctx *c, int (*bucket)(struct comm *cm, float *x, size_t n));
int run_dp_connect(struct run_ctx *c);
int run_dp_pass(struct run_ctx *c, const int32_t *idx, int count, float scale, double *loss);
/* GPUs without the device's communicator: the block to the host, each
 * bucket (off[k], len[k]; nb 0: the whole block) summed, back. */
int run_dp_reduce_host(struct run_ctx *c, const size_t *off, const size_t *len, int nb);
void run_dp_free(struct run_ctx *c);
void run_dp_describe(const struct run_ctx *c);
void run_dp_progress(const struct run_ctx *c, char *buf, size_t cap);
/* The evaluation's windows split in N contiguous parts, each rank's logits
 * summed into the writer's (exact: zeros outside each part). */
int run_dp_predict(void *c, const postprocess_opts *po, qa_predictions *out);

#endif
