/* Data parallel (strategy.h): one process, or N ranks that each run a
 * fixed share of every step (dist_share) on a whole copy of the model and
 * sum their gradients in rank order, so that every rank holds the same
 * bytes and AdamW decides alike everywhere.
 *
 * The sum runs bucket by bucket during backward where the communicator
 * takes the gradients' memory (the CPU's, or a GPU's with NCCL): bert
 * backward calls the hook as each bucket (the QA head, layer L-1, ...,
 * layer 0, the embeddings) is final on the last backward of this rank's
 * share. On the CPU the fixed-order all-reduce runs there, while the
 * layers below wait, so there is no overlap, but the order and the buckets
 * are those of the GPUs, where NCCL sums the bucket on its own stream
 * while backward goes on (the bytes are those of one all-reduce of the
 * block: each float's sum is over the ranks in the same order whatever the
 * buckets). GPUs without NCCL sum the whole block through a host copy
 * after backward. */
#define _GNU_SOURCE
#include "train/run.h"

#include "core/clock.h"
#include "core/err.h"
#include "comm/comm.h"
#include "comm/dist.h"
#include "infer/qa_model.h"
#include "train/microbatch.h"
#include "train/step.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static run_dp_state *dp(run_ctx *c) { return c->strat_state; }

static int reduce_bucket(void *arg, size_t off, size_t n)
{
    run_ctx *c = arg;
    run_dp_state *s = dp(c);
    s->buckets_sent++;
    return s->bucket(c->rk.cm, bert_model_grads(c->qm.model) + off, n);
}

/* The forward and backward passes of this rank's rows of the step,
 * idx[first..first+len) of the step's `count`, in micro-batches of
 * c->plan.micro, into freshly zeroed gradients (train/step.h). */
static int run_micro_batches(run_ctx *c, const int32_t *idx, int first, int len, int count, float scale,
                             double *loss_out)
{
    train_step_opts so = {
        .model = c->qm.model,
        .f = &c->data.tf,
        .mb = &c->data.mb,
        .micro = c->plan.micro,
        .micro_batches = c->plan.micro_batches,
        .packing = c->qm.packing,
        .drop_hidden = c->plan.drop_hidden,
        .drop_attn = c->plan.drop_attn,
        .seed = (uint64_t)c->o->seed,
        .step = c->st.step,
        .scale = scale,
        .ready = dp(c)->bucketed ? reduce_bucket : NULL,
        .ready_arg = c,
    };
    return train_step_grads(&so, idx, first, len, count, loss_out);
}

/* The model again for micro-batches of micro rows (same T, recompute and
 * packing), with the parameters it holds now; the backend's working memory
 * is trimmed in between so that the larger micro-batch's workspace does not
 * stay. */
static int rebuild_model(run_ctx *c, int micro)
{
    int rc = bert_model_get_params(c->qm.model, c->qm.host_params);
    if (rc) return rc;
    bert_model_free(c->qm.model);
    c->qm.model = NULL;
    backend_mem_trim(&c->qm.be);
    return qa_model_start(&c->qm, &c->bo, micro, c->plan.T);
}

/* Out of memory during a step of one process: halve the micro-batch
 * (twice the micro-batches per step: the examples of the step and their
 * order stay), rebuild the model for it with the same parameters; the
 * caller redoes the step. */
static int back_off(run_ctx *c, int64_t step)
{
    char why[256];
    snprintf(why, sizeof why, "%s", err_msg());
    microbatch_plan mp = {c->o->batch, c->plan.micro, c->plan.micro_batches, c->plan.backoffs};
    int rc = microbatch_halve(&mp);
    if (rc) return err_wrap(rc, "step %lld (%s)", (long long)step, why);
    log_warn("step %lld: out of memory with micro-batch %d (%s): going on with micro-batch %d, %d per step of %d",
             (long long)step, c->plan.micro, why, mp.micro, mp.accum, c->o->batch);
    err_clear();
    /* packed: the micro-batch's tokens halve too */
    if (c->qm.packing == PACKING_VARLEN && c->qm.max_tokens > 0)
        c->qm.max_tokens = c->qm.max_tokens / 2 > c->plan.T ? c->qm.max_tokens / 2 : c->plan.T;
    rc = rebuild_model(c, mp.micro);
    if (rc) return err_wrap(rc, "step %lld: rebuilding the model for micro-batch %d", (long long)step, mp.micro);
    c->plan.micro = mp.micro;
    c->plan.micro_batches = mp.accum;
    c->plan.backoffs = mp.backoffs;
    char info[96];
    snprintf(info, sizeof info, "%d (after %d out-of-memory back-off%s)", c->plan.micro, c->plan.backoffs,
             c->plan.backoffs > 1 ? "s" : "");
    run_log_info(c, "micro_batch", info);
    return 0;
}

/* The model on the backend; when building it runs out of memory, halve
 * the micro-batch as a step would (back_off). */
static int start_model(run_ctx *c)
{
    for (;;) {
        int rc = qa_model_start(&c->qm, &c->bo, c->plan.micro, c->plan.T);
        if (!rc || !microbatch_is_oom(rc)) return rc;
        char why[256];
        snprintf(why, sizeof why, "%s", err_msg());
        microbatch_plan mp = {c->o->batch, c->plan.micro, c->plan.micro_batches, c->plan.backoffs};
        if ((rc = microbatch_halve(&mp))) return err_wrap(rc, "%s", why);
        log_warn("out of memory building the model for micro-batch %d (%s): trying %d", c->plan.micro, why, mp.micro);
        err_clear();
        c->plan.micro = mp.micro;
        c->plan.micro_batches = mp.accum;
        c->plan.backoffs = mp.backoffs;
    }
}

int run_dp_init(run_ctx *c, int (*bucket)(comm *cm, float *x, size_t n))
{
    run_dp_state *s = calloc(1, sizeof *s);
    if (!s) return err_set(ERR_RUNTIME, "out of memory");
    s->bucket = bucket;
    c->strat_state = s;
    int rc = start_model(c);
    if (rc || c->rk.ranks == 1 || !c->qm.info.is_cuda) return rc;
    size_t nf = c->qm.table.total;
    s->host_grads = malloc(nf * sizeof *s->host_grads);
    return s->host_grads ? 0 : err_set(ERR_RUNTIME, "out of memory for the gradient all-reduce (%zu floats)", nf);
}

static int dp_start(run_ctx *c)
{
    int rc = run_dp_init(c, comm_allreduce_begin);
    return rc ? rc : optim_start(&c->opt, &c->qm.be, &c->qm.table, c->dir.resumed ? c->host_m : NULL, c->host_v,
                                 c->st.adam_t, c->st.skipped_steps);
}

/* Any options and any number of ranks, each a replica. */
static int run_dp_check(const trainer_opts *o, int ranks, int launched, int *replicas)
{
    (void)o;
    (void)launched;
    *replicas = ranks;
    return 0;
}

/* Every rank a whole copy of the model. */
int run_dp_configure(run_ctx *c)
{
    c->rk.lay = (run_layout){.ranks = c->rk.ranks, .replicas = c->rk.ranks, .stages = 1, .adam_ranks = 1};
    c->rk.replica = c->rk.rank;
    return 0;
}

/* N ranks: "rank R of N" and what the mode adds (where: "" or " (pipeline
 * stage ...)"); one process: nothing (it stops at once). */
void run_signal_text(const run_ctx *c, const char *where, char *buf, size_t cap)
{
    buf[0] = 0;
    if (c->rk.ranks > 1)
        snprintf(buf, cap,
                 "bertc: rank %d of %d%s: got a signal: stopping after this step on every rank (when another rank "
                 "died the launcher ends the job now; the last complete checkpoint stays; run the same command to "
                 "resume)\n", c->rk.rank, c->rk.ranks, where);
}

void run_dp_signal_line(const run_ctx *c, char *buf, size_t cap) { run_signal_text(c, "", buf, cap); }

/* GPUs: the gradients are summed by NCCL on the devices when every rank
 * can load it; else through the host over MPI (one warning). Buckets are
 * summed during backward where the communicator takes the gradients'
 * memory. */
int run_dp_connect(run_ctx *c)
{
    run_dp_state *s = dp(c);
    int rc = comm_open(&c->rk.cm, &(comm_opts){.rank = c->rk.rank,
                                            .ranks = c->rk.ranks,
                                            .gpu = c->bo.gpu,
                                            .dev_ctx = c->qm.info.is_cuda ? c->qm.be.ctx : NULL,
                                            .fallback = "summing the gradients through the host over MPI instead"});
    if (!rc) s->bucketed = c->rk.ranks > 1 && (!s->host_grads || comm_on_device(c->rk.cm));
    return rc;
}

/* N ranks: this rank's fixed share of the step (comm/dist.h). No
 * out-of-memory back-off across ranks: every rank must keep the same
 * micro-batch. A failure here is told to the others by the step's reduce. */
static int pass_ranks(run_ctx *c, const int32_t *idx, int count, float scale, double *loss)
{
    run_dp_state *s = dp(c);
    int first, len;
    dist_share(count, c->plan.micro, c->rk.ranks, c->rk.rank, &first, &len);
    s->buckets_sent = 0;
    double cb = comm_seconds(c->rk.cm);
    int rc = run_micro_batches(c, idx, first, len, count, scale, loss);
    if (s->bucketed) {
        /* Every rank sends every bucket in the same order, whatever
         * happened here: one with no examples in this step, or whose step
         * failed, sends what it has not sent (the collectives must match; a
         * failure is then agreed on in the step's reduce). */
        bert_model_set_grads_ready(c->qm.model, reduce_bucket, c);
        int brc = bert_grad_buckets_emit(c->qm.model, s->buckets_sent);
        bert_model_set_grads_ready(c->qm.model, NULL, NULL);
        if (!brc) brc = comm_wait(c->rk.cm);
        if (!rc) rc = brc;
    }
    c->rk.comm_s += comm_seconds(c->rk.cm) - cb;
    if (rc && microbatch_is_oom(rc))
        err_wrap(rc, "out of memory with %d ranks (no back-off across ranks: give a smaller --micro-batch)",
                 c->rk.ranks);
    return rc ? err_wrap(rc, "step %lld", (long long)c->st.step + 1) : 0;
}

int run_dp_pass(run_ctx *c, const int32_t *idx, int count, float scale, double *loss)
{
    if (c->rk.ranks > 1) return pass_ranks(c, idx, count, scale, loss);
    for (;;) {
        int rc = run_micro_batches(c, idx, 0, count, count, scale, loss);
        if (!rc) return 0;
        if (!microbatch_is_oom(rc)) return err_wrap(rc, "step %lld", (long long)c->st.step + 1);
        if ((rc = back_off(c, c->st.step + 1))) return rc;
    }
}

int run_dp_reduce_host(run_ctx *c, int rc, const size_t *off, const size_t *len, int nb)
{
    run_dp_state *s = dp(c);
    if (c->rk.ranks == 1 || s->bucketed) return rc;
    size_t n = c->qm.table.total;
    float *g = bert_model_grads(c->qm.model), *h = s->host_grads ? s->host_grads : g;
    backend *be = bert_model_backend(c->qm.model);
    double c0 = comm_seconds(c->rk.cm);
    /* the sums are made whatever failed here (the collectives must match) */
    int own = h != g ? be->i->download(be->ctx, h, g, n * sizeof *h) : 0, crc = 0;
    if (nb == 0) crc = s->bucket(c->rk.cm, h, n);
    for (int k = 0; k < nb && !crc; k++) crc = s->bucket(c->rk.cm, h + off[k], len[k]);
    if (!crc) crc = comm_wait(c->rk.cm);
    if (!own) own = crc;
    if (!own && h != g) own = be->i->upload(be->ctx, g, h, n * sizeof *h);
    c->rk.comm_s += comm_seconds(c->rk.cm) - c0;
    return rc ? rc : own;
}

static int dp_reduce(run_ctx *c, int rc) { return run_dp_reduce_host(c, rc, NULL, NULL, 0); }

/* Every rank holds the whole model and its moments: the writer's are saved. */
static int dp_gather(run_ctx *c, int optimizer)
{
    if (!optimizer || !c->rk.writer) return 0;
    return optim_get_state(c->opt, c->host_m, c->host_v, &c->st.adam_t, &c->st.skipped_steps);
}

void run_dp_free(run_ctx *c)
{
    run_dp_state *s = dp(c);
    comm_close(c->rk.cm);
    c->rk.cm = NULL;
    if (!s) return;
    free(s->host_grads);
    free(s);
    c->strat_state = NULL;
}

void run_dp_describe(const run_ctx *c)
{
    if (c->rk.ranks > 1)
        printf("  ranks     %d data-parallel ranks (MPI): each step's %d examples split in fixed shares of whole "
               "micro-batches, gradients summed in rank order\n", c->rk.ranks, c->o->batch);
}

/* The ranks, and the share of the training time this rank spent in the
 * all-reduces (communication and waiting). */
void run_dp_progress(const run_ctx *c, char *buf, size_t cap)
{
    if (c->rk.ranks > 1)
        snprintf(buf, cap, " | %d ranks, comm %.1fs (%.0f%%, waiting %.1fs)", c->rk.ranks, c->rk.comm_s,
                 c->prog.train_time > 0 ? 100 * c->rk.comm_s / c->prog.train_time : 0, c->rk.wait_s);
}

int run_dp_logits(void *arg, const features *f, float *start, float *end)
{
    run_ctx *c = arg;
    size_t n = (size_t)f->n * (size_t)f->T;
    int lo = (int)((int64_t)f->n * c->rk.rank / c->rk.ranks), hi = (int)((int64_t)f->n * (c->rk.rank + 1) / c->rk.ranks);
    size_t off = (size_t)lo * (size_t)f->T;
    int rc = start && end ? 0 : err_set(ERR_RUNTIME, "out of memory for the logits of %d windows", f->n);
    if (!rc) {
        features part = *f;
        part.n = hi - lo;
        part.input_ids += off;
        part.token_type_ids += off;
        part.attention_mask += off;
        memset(start, 0, n * sizeof *start);
        memset(end, 0, n * sizeof *end);
        /* N ranks: no stop check inside (the ranks agree on signals
         * between steps); one process: a signal stops it */
        rc = qa_model_logits(&c->qm, &part, start + off, end + off, c->rk.ranks > 1 ? NULL : c->stop);
    }
    rc = comm_agree(c->rk.cm, rc);
    if (!rc) rc = comm_host_sum(c->rk.cm, start, n);
    if (!rc) rc = comm_host_sum(c->rk.cm, end, n);
    return rc;
}

const run_strategy run_strategy_data_parallel = {
    .name = "data parallel", .options = "", .check = run_dp_check,
    /* the step (run_step.c) */
    .pass = run_dp_pass, .reduce = dp_reduce,
    /* around the steps */
    .signal_line = run_dp_signal_line, .configure = run_dp_configure, .start = dp_start,
    .connect = run_dp_connect, .gather = dp_gather, .logits = run_dp_logits, .free = run_dp_free,
    /* what the run tells of the mode */
    .describe = run_dp_describe, .progress = run_dp_progress,
};
