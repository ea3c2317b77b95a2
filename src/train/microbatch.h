/* Micro-batches: how one optimizer step of `batch` examples is cut into
 * micro-batches, and --micro-batch auto (DESIGN.md, Memory): take the
 * largest micro-batch the memory planner says fits, confirm it with one
 * step, and on an out-of-memory error halve it, so that the micro-batches
 * per step double while the examples per step and their order stay the
 * same and no example is lost.
 *
 * Usage in the trainer:
 *
 *   microbatch_plan mp;
 *   if (o->micro_batch > 0) rc = microbatch_fixed(&mp, o->batch, o->micro_batch);
 *   else {
 *       backend_mem mem;                                  // backend/select.h
 *       int64_t budget = backend_mem_query(&be, &mem) == 0 ? microbatch_budget(&mem) : cpu_budget;
 *       rc = microbatch_choose(&mp, &cfg, T, info.precision, recompute, budget, o->batch);
 *   }
 *   microbatch_env env = {run_ctx, build, trial};
 *   //   build(user, micro): frees the bert_model (keeping the parameters on the
 *   //       host), backend_mem_trim(&be), and creates the model again for
 *   //       micro-batches of `micro` rows;
 *   //   trial(user, micro): one forward + backward of `micro` real rows, then
 *   //       bert_zero_grad (nothing else changes: no optimizer step, no RNG use).
 *   rc = microbatch_auto(&mp, &env);        // with --micro-batch N: confirms N, halves on OOM too
 *
 *   each step (count = the loader's rows, <= batch):
 *   for (int k = 0; microbatch_slice(&mp, count, k, &at, &rows); k++)
 *       forward/backward rows idx[at .. at + rows) with grad_scale rows / count
 *   on an error during a step: if (microbatch_is_oom(rc)) { microbatch_halve(&mp),
 *       build(user, mp.micro), zero the gradients and redo the same step } else fail.
 *
 * The cut depends only on (count, micro), so a halving keeps the rows and
 * their order: micro-batch k of micro m becomes micro-batches 2k and 2k+1
 * of micro m/2 when m is even. The gradient of the step is the same mean
 * (up to float rounding) because each micro-batch is weighted by its
 * share of the rows. */
#ifndef BERTC_MICROBATCH_H
#define BERTC_MICROBATCH_H

#include "backend/select.h"
#include "model/config.h"
#include "model/memory.h"

#include <stdint.h>

typedef struct {
    int batch;    /* examples per optimizer step (--batch) */
    int micro;    /* rows per micro-batch */
    int accum;    /* micro-batches per full step: ceil(batch / micro) */
    int backoffs; /* halvings after out-of-memory errors */
} microbatch_plan;

/* --micro-batch N: ERR_INPUT unless 1 <= micro <= batch. */
int microbatch_fixed(microbatch_plan *p, int batch, int micro);
/* --micro-batch auto: the largest micro-batch (at most batch) whose
 * planned peak fits budget bytes; ERR_RUNTIME, naming the sizes and what
 * to try, when not even 1 fits. */
int microbatch_choose(microbatch_plan *p, const bert_config *cfg, int T, precision_kind prec, recompute_kind rc,
                      int64_t budget, int batch);
/* The budget for the planner from a backend's memory, queried right after
 * the backend is created (before the model): what bertc may hold in all
 * (what it holds now, which the plan counts too, plus what it may still
 * allocate), less a margin for the allocator's fragmentation (2 % or
 * 64 MiB, whichever is larger). */
int64_t microbatch_budget(const backend_mem *m);
/* After an out-of-memory error: micro = ceil(micro / 2), accum follows.
 * ERR_RUNTIME when micro is already 1. */
int microbatch_halve(microbatch_plan *p);
/* Micro-batch k of a step of count rows: rows [*at, *at + *rows). Returns 0
 * when there is no micro-batch k. */
int microbatch_slice(const microbatch_plan *p, int count, int k, int *at, int *rows);
/* 1 when rc is an out-of-memory failure: ERR_RUNTIME with "out of memory"
 * in the message (the backend contract of backend.h's alloc). */
int microbatch_is_oom(int rc);

typedef struct {
    void *user;
    int (*build)(void *user, int micro);
    int (*trial)(void *user, int micro);
} microbatch_env;

/* Builds and confirms p->micro; on out-of-memory errors halves and tries
 * again (one notice line each, through log_info). Returns 0 with p the
 * micro-batch that worked; an error that is not out-of-memory is returned
 * as it is; out of memory at micro-batch 1 is ERR_RUNTIME. */
int microbatch_auto(microbatch_plan *p, const microbatch_env *env);

#endif
