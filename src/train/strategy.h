/* How a training run spreads over its ranks: one strategy per parallel
 * mode, private to src/train/. run_step.c's step is the same for every
 * mode and calls the hooks below in this order:
 *
 *   pass     the step's forward and backward passes on this rank, into
 *            freshly zeroed gradients, with whatever is summed while
 *            backward runs (a bucket's all-reduce as it is final); a
 *            failure here is not agreed on yet: every collective below is
 *            still made, and the step's reduce tells every rank
 *   reduce   the gradient sums not made during pass (rc: pass's; the sums
 *            are made whatever it is, so that the ranks' collectives match)
 *   terms    this rank's part of the step's one reduce (run_step.c: the
 *            loss, a failure, signals, the writer's save clock, and what
 *            the mode adds: a squared norm summed over the ranks, times)
 *   updated  after AdamW (run_step.c's one optim_apply): what the mode
 *            must do with the update (the sharded optimizer's all-gather)
 *
 * (terms, updated and info may be NULL: nothing to add, do or tell)
 *
 * So a step makes one host collective besides the gradients' own sums: the
 * step's reduce, into which the agreement on a failure is folded (the
 * failing rank's message is fetched only when one failed).
 *
 * Before the run: check (bertc train's options against the job's ranks,
 * run_strategy_check). Around the steps: signal_line (before the set-up: what a rank prints when
 * it gets a signal; empty with one process), configure (this rank's place,
 * c->rk.lay and c->rk.replica, checked before the run dir is touched), start
 * (this rank's model and optimizer, once the host blocks hold the initial
 * or resumed parameters and moments), connect (after every rank's set-up,
 * collective: the communicator c->rk.cm), gather (the parameters, and the
 * Adam state with optimizer, into the writer's host blocks for a checkpoint
 * or the export; collective), logits (train's evaluation: the dev windows'
 * logits on the writer; collective), free; and what the run tells of the
 * mode (run_log.c): describe (its start-up lines), progress (what it adds
 * to the progress line at buf, cap bytes left), info (its keys of
 * RUN/info.csv), options (what it adds to the options line).
 *
 * A new mode is a new file defining a run_strategy, and one line in
 * run_strategy_pick (strategy.c). Each keeps its state in c->strat_state;
 * its communicator (comm/comm.h) is c->rk.cm. */
#ifndef BERTC_TRAIN_STRATEGY_H
#define BERTC_TRAIN_STRATEGY_H

#include "data/features.h"
#include "train/optim.h"
#include "train/state.h"
#include "train/trainer.h"

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
    const char *options; /* what it adds to the options line of the report ("" nothing) */
    /* The options against a job of `ranks` ranks (launched: under
     * mpirun/srun), before any set-up: ERR_INPUT naming the option, else 0
     * and *replicas, the data-parallel copies of the model. */
    int (*check)(const trainer_opts *o, int ranks, int launched, int *replicas);
    void (*signal_line)(const struct run_ctx *c, char *buf, size_t cap);
    int (*configure)(struct run_ctx *c);
    int (*start)(struct run_ctx *c);
    int (*connect)(struct run_ctx *c);
    int (*pass)(struct run_ctx *c, const int32_t *idx, int count, float scale, double *loss);
    int (*reduce)(struct run_ctx *c, int rc);
    void (*terms)(struct run_ctx *c, run_terms *t);
    int (*updated)(struct run_ctx *c, int rc, const optim_result *res);
    int (*gather)(struct run_ctx *c, int optimizer);
    /* infer.h's infer_logits_fn, arg the run_ctx (collective): the logits
     * of the dev windows f on the writer, in start and end (f->n * f->T
     * floats each, on every rank), every rank's share of the work done */
    int (*logits)(void *c, const features *f, float *start, float *end);
    void (*free)(struct run_ctx *c);
    void (*describe)(const struct run_ctx *c);
    void (*progress)(const struct run_ctx *c, char *buf, size_t cap);
    void (*info)(struct run_ctx *c);
    int agree_saves; /* the writer's checkpoint is agreed on by every rank (the stages' parts were gathered) */
} run_strategy;

/* How the job's ranks are laid out: what a strategy's configure decides
 * (and what a checkpoint records of the run that saved it). */
typedef struct {
    int ranks;          /* every rank of the job (1 without a launcher) */
    int replicas;       /* data-parallel copies of the model: ranks / stages */
    int stages;         /* pipeline stages of each copy (1: none) */
    int adam_ranks;     /* ranks the Adam state is spread over (--shard-optimizer: ranks; else 1) */
} run_layout;

/* strategy.c: the mode of o with `ranks` ranks. */
const run_strategy *run_strategy_pick(const trainer_opts *o, int ranks);
/* The options against a job of `ranks` ranks (launched: under a
 * launcher): the mode's check, then what every mode needs of its
 * data-parallel copies (ERR_INPUT naming the option). */
int run_strategy_check(const trainer_opts *o, int ranks, int launched);
/* The layout a checkpoint's state records (runs from before pipelines
 * recorded no stages: 1), this run's into the state, and what a resumed
 * run says when the two differ (stdout). */
run_layout run_layout_saved(const train_state *s);
void run_layout_record(train_state *s, const run_layout *l);
void run_layout_notes(const run_layout *was, const run_layout *now, int batch);

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

/* The line a rank prints when it gets a signal, with where (its stage:
 * "" or " (pipeline stage ...)"); empty with one rank. */
void run_signal_text(const struct run_ctx *c, const char *where, char *buf, size_t cap);
void run_dp_signal_line(const struct run_ctx *c, char *buf, size_t cap);
int run_dp_configure(struct run_ctx *c);
int run_dp_init(struct run_ctx *c, int (*bucket)(struct comm *cm, float *x, size_t n));
int run_dp_connect(struct run_ctx *c);
int run_dp_pass(struct run_ctx *c, const int32_t *idx, int count, float scale, double *loss);
/* GPUs without the device's communicator: the block to the host, each
 * bucket (off[k], len[k]; nb 0: the whole block) summed, back; rc: pass's
 * (the sums are made whatever it is). */
int run_dp_reduce_host(struct run_ctx *c, int rc, const size_t *off, const size_t *len, int nb);
void run_dp_free(struct run_ctx *c);
void run_dp_describe(const struct run_ctx *c);
void run_dp_progress(const struct run_ctx *c, char *buf, size_t cap);
/* The evaluation's windows split in N contiguous parts, each rank's logits
 * summed into every rank's (exact: zeros outside each part). */
int run_dp_logits(void *c, const features *f, float *start, float *end);

#endif
