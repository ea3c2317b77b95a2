/* The trainer: `bertc train` as a library call (the demo calls it too).
 *
 * trainer_run loads the model dir, the data and its features (cached in
 * RUN/cache/), resumes from the newest valid checkpoint of RUN when there is
 * one (--resume auto), trains with micro-batches and gradient accumulation,
 * writes RUN/metrics.csv (one row per optimizer step: step, epoch, loss, lr,
 * grad_norm, loss_scale, examples_per_s, elapsed_s; loss_scale is the factor
 * the step's loss gradient was multiplied by: 1 unless fp16 scales it) and
 * RUN/eval.csv (step, epoch, exact_match, f1: one row per evaluation on
 * --dev), checkpoints, and at the end exports RUN/final/ (a Hugging Face
 * model dir) and, with a dev set, RUN/predictions.json and a last
 * evaluation.
 *
 * Settings that must not change across a resume (they change the result):
 * the model files, the training data, --max-seq-length, --doc-stride,
 * --max-query-length, --epochs, --max-steps, --batch, --lr, --warmup,
 * --weight-decay, --adam-eps, --clip, --dropout, --seed, --no-shuffle and
 * the precision (as resolved: --precision auto is bf16 or fp16 on a GPU,
 * fp32 on the CPU). Those that may (they change only speed, logging or
 * bookkeeping): --threads (the result is bit-identical only with the same
 * count), --micro-batch (the same mathematics; dropout masks and rounding
 * differ), --save-every, --save-every-minutes, --keep, --eval-every, --dev,
 * --log-every, --recompute, --device (a fp32 run may move between the
 * CPU and a GPU), --gpu, --gpu-mem-limit, --shard-optimizer (checkpoints
 * hold the whole Adam moments either way).
 *
 * The backend is chosen by backend_select (--device, --precision, --gpu,
 * --gpu-mem-limit, --threads) before the data is read; the start-up report
 * names it. With fp16 the loss is scaled dynamically (train/lossscale.h):
 * its state is in every checkpoint, a step whose gradients overflow is
 * skipped like any non-finite step, and RUN/info.csv's skipped_steps (the
 * report's summary) follows the count. The test hook
 * BERTC_DEBUG_LOSS_SCALE=1 turns the scaler on in any precision (exact in
 * fp32: such a run ends with the same weights as one without it).
 *
 * Return: 0 done; ERR_INPUT (2) bad input or a run dir with other settings;
 * ERR_RUNTIME (1); ERR_STOPPED (75) after SIGINT/SIGTERM once a checkpoint
 * is saved. */
#ifndef BERTC_TRAINER_H
#define BERTC_TRAINER_H

#include "backend/select.h"
#include "model/bert.h"
#include "train/pipeline.h"

#include <stdint.h>

/* --resume */
typedef enum {
    RESUME_AUTO = 0, /* the newest valid checkpoint of RUN (or of --mirror), else start */
    RESUME_NEVER,    /* start over: RUN's old checkpoints are removed */
    RESUME_PATH,     /* the checkpoint dir resume_path */
} resume_kind;

typedef struct {
    const char *model_dir, *train_path, *dev_path, *out_dir;
    int max_seq_length, doc_stride, max_query_length;
    double epochs;
    int64_t max_steps;      /* > 0 overrides epochs */
    int batch;              /* examples (features) per optimizer step */
    int micro_batch;        /* 0 = auto */
    double lr, warmup, weight_decay, adam_eps, clip;
    double dropout;         /* < 0: the config's probabilities */
    int64_t seed;
    int shuffle;
    device_kind device;     /* --device (backend/select.h) */
    precision_kind precision; /* --precision */
    int gpu;                /* CUDA device ordinal */
    int64_t gpu_mem_limit;  /* bytes the CUDA backend may allocate; 0 = no limit */
    recompute_kind recompute; /* --recompute (model/bert.h) */
    int64_t save_every;     /* steps; 0 = off */
    double save_every_minutes; /* 0 = off */
    int keep;               /* checkpoints kept; 0 = all */
    resume_kind resume;     /* --resume */
    const char *resume_path; /* RESUME_PATH: RUN/checkpoints/step-N */
    int64_t eval_every;     /* steps; 0 = only at the end */
    /* --eval-precision: the evaluation's linear layers on the CPU
     * (backend_set_answer_precision): PREC_AUTO (fp32), PREC_BF16,
     * PREC_INT8; checked when the backend is chosen, before training. */
    precision_kind eval_precision;
    int threads;            /* 0 = all cores */
    int64_t log_every;      /* steps between plain progress lines */
    double monitor_interval; /* seconds; 0 = no monitor thread */
    int n_best, max_answer_length;
    int quiet;              /* no start-up report and progress (tests) */
    /* --packing: PACKING_NONE (padded, transformers' loss) or
     * PACKING_VARLEN (each micro-batch's windows packed, real tokens only;
     * the QA loss's softmax over each window's own tokens); --max-tokens:
     * real tokens per micro-batch with varlen (0: micro-batch x T, or the
     * planner's on a GPU with --micro-batch auto). */
    packing_kind packing;
    int max_tokens;
    /* SQuAD 2.0 (--version-2-with-negative, as run_qa.py): is_impossible
     * questions are trained at [CLS] (features.h); the dev evaluation takes
     * the null answer when its score beats the best span's by more than
     * null_score_diff_threshold (infer/predict.h), scores with the
     * evaluate-v2.0.py metric (exact, f1) and writes RUN/null_odds.json next
     * to RUN/predictions.json. version_2_with_negative is part of the resume
     * fingerprint; the threshold (evaluation only) is not. */
    int version_2_with_negative;
    double null_score_diff_threshold;
    /* the live page and the mirror (obs/obs_http.h, train/mirror.h) */
    int http_port;          /* --http PORT; -1 = no page, 0 = any free port */
    const char *http_bind;  /* --http-bind ADDR; default 127.0.0.1 */
    const char *http_api_key; /* --api-key...: the page's key; NULL = open. Not in the fingerprint */
    const char *mirror_dir; /* --mirror DIR; NULL = none. --resume auto also looks there */
    int mirror_keep;        /* checkpoints kept in the mirror; -1 = as --keep */
    /* --shard-optimizer: with N > 1 data-parallel ranks, each keeps the
     * AdamW moments of 1/N of the parameters (ZeRO stage 1; train/run_shard.c).
     * Not part of the resume fingerprint: checkpoints hold the whole
     * moments either way. Refused with --pipeline-stages > 1
     * (trainer_opts_check_job). */
    int shard_optimizer;
    /* Pipeline model parallelism (train/pipeline.h, under mpirun/srun):
     * --pipeline-stages S (1: none) splits the encoder layers into S
     * stages, one per rank, the ranks S x D (D data-parallel replicas of
     * the pipeline); --pipeline-split the S + 1 layer boundaries
     * (pipeline_split_n of them; 0: memory_split's, bertc plan's). */
    int pipeline_stages;
    int pipeline_split[PIPE_MAX_STAGES + 1];
    int pipeline_split_n;
} trainer_opts;

void trainer_opts_default(trainer_opts *o);
/* Checks the options against each other (ERR_INPUT naming the option). */
int trainer_opts_check(const trainer_opts *o);
/* Checks the options against this job's ranks and launcher, as the
 * parallel mode they ask for needs them (train/strategy.h; ERR_INPUT
 * naming the option). */
int trainer_opts_check_job(const trainer_opts *o);
int trainer_run(const trainer_opts *o);

#endif
