/* gpu_check: the device checks of tests/gpu/run.sh, one program with a
 * subcommand per check (it needs a GPU; tests/gpu/CMakeLists.txt builds it
 * against bertc_lib):
 *
 *   gpu_check ops       --out DIR   every op of the CUDA backend against the CPU backend
 *   gpu_check model     --out DIR   the whole model: the PyTorch reference (tests/ref/tiny)
 *                                   and CPU vs CUDA on a minilm-shaped random model
 *   gpu_check train     --out DIR   200 steps of a small model in fp32, bf16, fp16: loss curves
 *   gpu_check memory    --out DIR   the planner against the measured peak
 *   gpu_check oom       --out DIR   out-of-memory back-off under a memory limit
 *   gpu_check bench     [options]   one benchmark configuration, a JSON line
 *   gpu_check maxbatch  [options]   the largest micro-batch that trains under a limit
 *   gpu_check varlen    --out DIR   packed micro-batches against the CPU and padded
 *   gpu_check nccl      --out DIR   the bucketed NCCL calls on a one-rank communicator
 *
 * Any check takes --small (gc_small). Every check prints what it compared, the measured figure and the bound,
 * and appends "PASS|FAIL check: ..." lines to DIR/results.txt; the exit
 * status is 1 when anything failed. */
#ifndef BERTC_GPU_CHECK_H
#define BERTC_GPU_CHECK_H

#include "backend/backend.h"
#include "backend/select.h"
#include "model/bert.h"
#include "model/config.h"
#include "model/memory.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

extern const char *gc_out_dir;
extern int gc_failures;
/* --small: the emulated card's sizes (tests/cudaemu runs the checks on the
 * CPU): memory and oom use minilm at sequence length 128 instead of
 * BERT-base at 384. */
extern int gc_small;

/* Records one result line (stdout and DIR/results.txt); ok = 0 counts a failure. */
void gc_result(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Opens DIR/name for writing (NULL on failure, reported). */
FILE *gc_open(const char *name);

/* ||a - b|| / max(||b||, floor), and the largest |a - b|. */
double gc_rel_l2(const float *a, const float *b, size_t n, double floor, double *max_abs);
/* Uniform in [lo, hi) from a 64-bit state. */
float gc_uniform(uint64_t *s, float lo, float hi);

/* A CUDA backend of this precision (and memory limit, 0 = none). */
int gc_cuda(backend *be, precision_kind p, int64_t limit);
/* The precisions this GPU runs (bf16 from compute capability 8.0). */
int gc_precisions(precision_kind *out);

/* A random batch: ids in 1..V-1, every other row padded over its last
 * quarter, types 1 after the first quarter, labels inside the row. */
typedef struct {
    int B, T;
    int32_t *ids, *types, *mask, *sp, *ep;
} gc_batch;
void gc_batch_init(gc_batch *b, int B, int T, int V, uint64_t seed);
/* gpu_model.c: MiniLM's config and parameter table, and its parameters
 * drawn from seed (malloc'ed). */
float *gc_minilm(bert_config *cfg, param_table *t, uint64_t seed);
void gc_batch_free(gc_batch *b);
bert_batch gc_bert_batch(const gc_batch *b);


int gc_ops(int argc, char **argv);
int gc_model(int argc, char **argv);
int gc_train(int argc, char **argv);
int gc_memory(int argc, char **argv);
int gc_oom(int argc, char **argv);
int gc_bench(int argc, char **argv);
int gc_maxbatch(int argc, char **argv);
/* gpu_varlen.c: packed micro-batches, CUDA vs CPU and packed vs padded. */
int gc_varlen(int argc, char **argv);
int gc_nccl(int argc, char **argv);

#endif
