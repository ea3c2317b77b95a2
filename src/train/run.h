/* One training run, private to src/train/: the state that `bertc train`
 * holds from start to end, and the stages that act on it. trainer.c (the
 * public trainer_run) drives them in one direction:
 *
 *   trainer.c   options, signals, the step loop, the end of the run
 *     -> run_setup.c  model, backend, data, features, resume, micro-batch size
 *     -> run_step.c   one optimizer step, the same for every parallel mode: the
 *                     loader's rows, the strategy's passes and sums, the step's one
 *                     reduce, the loss scale, AdamW
 *          -> the strategy (train/strategy.h), one file per mode:
 *             run_dp.c     data parallel (one process, or N ranks): step.c's
 *                          micro-batches, the out-of-memory back-off
 *             run_shard.c  --shard-optimizer's pieces and collectives
 *             run_pipe.c   --pipeline-stages: 1F1B over the stages
 *             each over its communicator (comm/comm.h: the host's or NCCL)
 *     -> run_eval.c   predictions and EM/F1 on --dev
 *     -> run_save.c   checkpoints and the exported final/ model dir
 *          -> run_log.c  what the run tells: metrics.csv, eval.csv, the
 *                        observability hub (obs/), the progress line, the
 *                        start-up report
 *
 * No stage calls trainer.c, and run_log.c calls no other stage. */
#ifndef BERTC_TRAIN_RUN_H
#define BERTC_TRAIN_RUN_H

#include "backend/select.h"
#include "data/loader.h"
#include "infer/qa_model.h"
#include "obs/obs.h"
#include "train/lossscale.h"
#include "train/optim.h"
#include "train/runlog.h"
#include "train/state.h"
#include "train/strategy.h"
#include "train/trainer.h"

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

typedef struct run_ctx {
    const trainer_opts *o;
    volatile sig_atomic_t *stop; /* non-zero once SIGINT/SIGTERM asked for a clean stop */
    qa_model qm;
    backend_opts bo;    /* --device, --precision, --gpu, --gpu-mem-limit, --threads */
    loss_scaler ls;     /* dynamic loss scaling (fp16); disabled: scale 1 */
    int T;              /* window length: --max-seq-length, or max_position_embeddings when smaller */
    squad_data train, dev;
    int have_train, have_dev;
    features tf, df;
    int have_tf, have_df;
    int32_t *trainable; /* feature index of each trainable window */
    int ntrainable;
    loader ld;
    loader_batch mb;
    optim *opt;
    float *host_params, *host_m, *host_v;
    train_state st;
    int64_t total, steps_per_epoch, warmup;
    int micro, micro_batches;
    int backoffs;       /* micro-batch halvings after out-of-memory errors, this process */
    float drop_hidden, drop_attn;
    int64_t last_saved_step;
    double t0, last_save_time, train_time; /* train_time: this process, without evaluation */
    int64_t examples_here;
    int lock_fd;
    int resumed;        /* started from a checkpoint */
    char resumed_from[4096];
    /* run_log.c's */
    runlog metrics, evals;
    obs_run *obs;
    int tty;
    int log_warned;     /* a CSV write failed (reported once) */
    double last_progress;
    /* The ranks (src/comm): this process is rank `rank` of `ranks` (1
     * without mpirun); only the writer (rank 0) touches the run dir. sig:
     * the signal this rank received, which the ranks agree on at the end of
     * each step before *stop is set (on every rank at once). */
    int rank, ranks, writer;
    volatile sig_atomic_t *sig;
    const run_strategy *strat; /* the parallel mode (strategy.h) */
    void *strat_state;         /* its own state (data parallel, sharded) */
    struct comm *cm;           /* its communicator, after connect */
    int dist_micro;     /* rank 0's micro-batch, broadcast to the others */
    int64_t prev_ranks; /* the rank count of the checkpoint resumed from */
    int64_t prev_stages; /* its pipeline stages */
    double comm_s;      /* seconds in the steps' collectives (all-reduces, agreement; waits included) */
    double wait_s;      /* of which: waiting at the end of the forward/backward passes for the slowest rank */
    int save_due;       /* N ranks: rank 0's clock says --save-every-minutes is due (agreed in run_step) */
    int shard;          /* --shard-optimizer with N ranks (run_shard.c) */
    int prev_shard;     /* the checkpoint resumed from was saved by a sharded run */
    /* run_save.c's: the --mirror copier (NULL: none) */
    struct mirror *mir;
    /* Pipeline (run_pipe.c): this rank is stage `stage` of `stages` (1, 0
     * without one) in data-parallel replica `replica` of `replicas`
     * (rank = stage * replicas + replica), holding encoder layers
     * [split[stage], split[stage + 1]); its slice of the parameter block is
     * the pipeline's own state. The run dir, checkpoints and evaluation
     * stay the writer's (rank 0, stage 0), which gathers the stages' parts. */
    int stages, stage, replicas, replica;
    int split[PIPE_MAX_STAGES + 1];
    struct pipe_run *pipe; /* the pipeline's own state */
} run_ctx;

/* run_setup.c: everything before the first step; ERR_INPUT for bad input
 * (nothing in the run dir touched), ERR_RUNTIME. run_cleanup frees what
 * run_setup made, also after a failure half-way. */
int run_setup(run_ctx *c);
void run_cleanup(run_ctx *c);
/* The optimizer of the parameters in t (the whole table, or a stage's
 * from float off of the block), with a resumed run's moments. */
int run_optim_start(run_ctx *c, const param_table *t, size_t off);

/* run_step.c: one optimizer step on the loader's next batch (idx: room for
 * --batch indices); *loss_out the step's mean loss, *scale_out the loss
 * scale it used, *res what AdamW did. */
int run_step(run_ctx *c, int32_t *idx, double *loss_out, float *scale_out, optim_result *res);

/* run_eval.c: predictions on --dev and EM/F1, an eval.csv row; pred_path
 * NULL: no predictions file; print: the result line even when quiet.
 * ERR_STOPPED when a signal came during it. */
int run_evaluate(run_ctx *c, const char *pred_path, int print);

/* run_save.c: a checkpoint of the current step (state, weights, optimizer),
 * and the export of RUN/final/. */
int run_save_checkpoint(run_ctx *c);
int run_export_final(run_ctx *c, char *final_dir, size_t cap);
/* --mirror: starts the copier (a mirror that cannot start is one warning,
 * the run goes on without it); stop waits for the last copy (bounded). */
void run_mirror_start(run_ctx *c);
void run_mirror_stop(run_ctx *c);

/* run_pipe.c: pipeline stages (--pipeline-stages; train/pipeline.h).
 * configure: the split and this rank's place, checked (ERR_INPUT) before
 * the run dir is touched. */
int run_pipe_configure(run_ctx *c);

/* run_log.c */
void run_fmt_duration(char *buf, size_t cap, double s);
/* Opens metrics.csv and eval.csv (keeping the rows of a resumed run up to
 * its step) and the observability hub; a hub that cannot start is one
 * warning, the run goes on without it. */
int run_log_open(run_ctx *c);
void run_log_startup(const run_ctx *c, int train_hit, int dev_hit);
/* A finished step: metrics.csv, the hub, the skipped-step warning. */
void run_log_step(run_ctx *c, double loss, float scale, const optim_result *res);
void run_log_eval(run_ctx *c, const eval_result *r, double seconds, int print);
/* The progress line: on a terminal at most 4 times a second, elsewhere
 * every --log-every steps; force: now. */
void run_log_progress(run_ctx *c, double loss, double lr, int force);
/* RUN/info.csv's skipped_steps (the report's summary). */
void run_log_skipped(run_ctx *c);
void run_log_info(run_ctx *c, const char *key, const char *value);
/* fsync of the CSV files, before a checkpoint names their rows as saved. */
int run_log_sync(run_ctx *c);
/* The report, rebuilt (after checkpoints and at the end). */
void run_log_report(run_ctx *c);
void run_log_close(run_ctx *c);

#endif
