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

/* The parts of a run, each with one job; the model, the optimizer and
 * the host blocks sit beside them in run_ctx. */

/* The questions, their windows, and the loader's order over them. */
typedef struct {
    squad_data train, dev;
    int have_train, have_dev;
    features tf, df;
    int have_tf, have_df;
    int32_t *trainable; /* feature index of each trainable window */
    int ntrainable;
    loader ld;
    loader_batch mb;
} run_data;

/* The plan of the steps. */
typedef struct {
    int T;              /* window length: --max-seq-length, or max_position_embeddings when smaller */
    int64_t total, steps_per_epoch, warmup;
    int micro, micro_batches;
    int backoffs;       /* micro-batch halvings after out-of-memory errors, this process */
    float drop_hidden, drop_attn;
} run_plan;

/* Where the run stands in time. */
typedef struct {
    int64_t last_saved_step;
    double t0, last_save_time, train_time; /* train_time: this process, without evaluation */
    int64_t examples_here;
} run_progress;

/* The run dir: the lock, the checkpoint resumed from, the --mirror copier. */
typedef struct {
    int lock_fd;
    int resumed;        /* started from a checkpoint */
    char resumed_from[4096];
    run_layout prev;    /* the layout of the run that saved it */
    struct mirror *mir; /* run_save.c's (NULL: none) */
} run_dir;

/* run_log.c's. */
typedef struct {
    runlog metrics, evals;
    obs_run *obs;
    int tty;
    int warned;         /* a CSV write failed (reported once) */
    double last_progress;
} run_logs;

/* This process among the job's ranks (src/comm). Only the writer (rank 0)
 * touches the run dir. sig: the signal this rank received, which the ranks
 * agree on in each step's reduce before *stop is set (on every rank at
 * once). */
typedef struct {
    int rank, ranks, writer;
    run_layout lay;     /* the strategy's (configure) */
    int replica;        /* this rank's data-parallel copy */
    volatile sig_atomic_t *sig;
    struct comm *cm;    /* the strategy's communicator, after connect */
    int micro0;         /* rank 0's micro-batch, shared with the others */
    double comm_s;      /* seconds in the steps' collectives (all-reduces, agreement; waits included) */
    double wait_s;      /* of which: the step's reduce, where the ranks wait for the slowest one's passes */
    int save_due;       /* rank 0's clock says --save-every-minutes is due (agreed in run_step's reduce) */
} run_ranks;

typedef struct run_ctx {
    const trainer_opts *o;
    volatile sig_atomic_t *stop; /* non-zero once SIGINT/SIGTERM asked for a clean stop */
    qa_model qm;
    backend_opts bo;    /* --device, --precision, --gpu, --gpu-mem-limit, --threads */
    loss_scaler ls;     /* dynamic loss scaling (fp16); disabled: scale 1 */
    optim *opt;
    float *host_params, *host_m, *host_v;
    train_state st;
    run_data data;
    run_plan plan;
    run_progress prog;
    run_dir dir;
    run_logs log;
    run_ranks rk;
    const run_strategy *strat; /* the parallel mode (strategy.h) */
    void *strat_state;         /* its own state */
} run_ctx;

/* run_setup.c: everything before the first step; ERR_INPUT for bad input
 * (nothing in the run dir touched), ERR_RUNTIME. run_cleanup frees what
 * run_setup made, also after a failure half-way. */
int run_setup(run_ctx *c);
void run_cleanup(run_ctx *c);
/* Before the set-up: this process's rank and the strategy (strategy.h). */
void run_place(run_ctx *c);

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
