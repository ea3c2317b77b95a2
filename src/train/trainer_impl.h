/* Private to the trainer (trainer.c: the loop; trainer_setup.c: loading,
 * resume, the start-up report, the end). */
#ifndef BERTC_TRAINER_IMPL_H
#define BERTC_TRAINER_IMPL_H

#include "data/loader.h"
#include "backend/select.h"
#include "obs/obs.h"
#include "train/lossscale.h"
#include "train/optim.h"
#include "train/qa_model.h"
#include "train/runlog.h"
#include "train/state.h"
#include "train/trainer.h"

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#define METRICS_HEADER "step,epoch,loss,lr,grad_norm,loss_scale,examples_per_s,elapsed_s"
#define EVAL_HEADER "step,epoch,exact_match,f1"

/* Everything trainer_run holds, so one cleanup frees it all. */
typedef struct {
    const trainer_opts *o;
    volatile sig_atomic_t *stop;
    qa_model qm;
    backend_opts bo;    /* --device, --precision, --gpu, --gpu-mem-limit, --threads */
    loss_scaler ls;     /* dynamic loss scaling (fp16); disabled: scale 1 */
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
    runlog metrics, evals;
    obs_run *obs;
    train_state st;
    int64_t total, steps_per_epoch, warmup;
    int micro, micro_batches;
    int backoffs;       /* micro-batch halvings after out-of-memory errors, this process */
    float drop_hidden, drop_attn;
    int64_t last_saved_step;
    double t0, last_save_time, train_time; /* train_time: this process, without evaluation */
    int64_t examples_here;
    int tty;
    int lock_fd;
    int log_warned; /* a CSV write failed (reported once) */
    double last_progress;
} run_ctx;

int trainer_setup(run_ctx *c);
int trainer_finish(run_ctx *c);
void trainer_cleanup(run_ctx *c);
int trainer_save_checkpoint(run_ctx *c);
/* Predictions on --dev, an eval.csv row; pred_path NULL: no predictions file. */
int trainer_evaluate(run_ctx *c, const char *pred_path, int print);
/* Puts the skipped-step count into RUN/info.csv (the report's summary). */
void trainer_note_skipped(run_ctx *c);
double trainer_now(void);
void trainer_fmt_duration(char *buf, size_t cap, double s);
extern double trainer_g_last_em, trainer_g_last_f1;

#endif
