/* One optimizer step of a training run (run.h): the loader's next rows,
 * their forward and backward passes (train/step.h), data parallel's sums,
 * the out-of-memory back-off, the loss scale, AdamW. */
#define _GNU_SOURCE
#include "train/run.h"

#include "core/clock.h"
#include "core/err.h"
#include "dist/dist.h"
#ifdef BERTC_HAVE_CUDA
#include "backend/cuda_module.h"
#endif
#include "train/microbatch.h"
#include "train/step.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* BERTC_DEBUG_NONFINITE=FIRST:COUNT: steps FIRST..FIRST+COUNT-1 (1-based,
 * the step numbers of metrics.csv) get a NaN loss and gradient, to test the
 * handling of non-finite steps (a tiny fp32 model does not produce them). */
static int debug_nonfinite(int64_t step)
{
    const char *s = getenv("BERTC_DEBUG_NONFINITE");
    long long first, count;
    if (!s || sscanf(s, "%lld:%lld", &first, &count) != 2) return 0;
    return step >= first && step < first + count;
}

/* Data parallel, bucketed (c->bucketed): bert_backward calls this as each
 * gradient bucket (the QA head, layer L-1, ..., layer 0, the embeddings) is
 * final on the last backward of this rank's share of the step, and the
 * bucket's sum over the ranks starts at once: on the CPU the fixed-order
 * all-reduce (dist.h) runs here, while the layers below wait, so there is
 * no overlap, but the order and the buckets are those of the GPUs, where
 * NCCL sums the bucket on its own stream while backward goes on (the bytes
 * are the same as one all-reduce of the block: the sum of each float is
 * over the ranks in the same order whatever the buckets). */
static int reduce_bucket(void *arg, size_t off, size_t n)
{
    run_ctx *c = arg;
    float *g = bert_model_grads(c->qm.model);
    c->buckets_sent++;
    if (c->shard) return run_shard_reduce_bucket(c, g + off, n);
#ifdef BERTC_HAVE_CUDA
    if (c->nccl) return cuda_module_loaded()->nccl_allreduce_begin(bert_model_backend(c->qm.model)->ctx, g + off, n);
#endif
    return dist_allreduce_sum_fixed(g + off, n);
}

/* The forward and backward passes of this rank's rows of the step,
 * idx[first..first+len) of the step's `count`, in micro-batches of
 * c->micro, into freshly zeroed gradients (train/step.h). One process:
 * first 0, len count. */
static int run_micro_batches(run_ctx *c, const int32_t *idx, int first, int len, int count, float scale,
                             double *loss_out)
{
    train_step_opts so = {
        .model = c->qm.model,
        .f = &c->tf,
        .mb = &c->mb,
        .micro = c->micro,
        .micro_batches = c->micro_batches,
        .packing = c->qm.packing,
        .drop_hidden = c->drop_hidden,
        .drop_attn = c->drop_attn,
        .seed = (uint64_t)c->o->seed,
        .step = c->st.step,
        .scale = scale,
        .ready = c->bucketed ? reduce_bucket : NULL,
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
    return qa_model_start(&c->qm, &c->bo, micro, c->T);
}

/* Out of memory during a step: halve the micro-batch (twice the
 * micro-batches per step: the examples of the step and their order stay),
 * rebuild the model for it with the same parameters; the caller redoes the
 * step. */
static int back_off(run_ctx *c, int64_t step)
{
    char why[256];
    snprintf(why, sizeof why, "%s", err_msg());
    microbatch_plan mp = {c->o->batch, c->micro, c->micro_batches, c->backoffs};
    int rc = microbatch_halve(&mp);
    if (rc) return err_wrap(rc, "step %lld (%s)", (long long)step, why);
    log_warn("step %lld: out of memory with micro-batch %d (%s): going on with micro-batch %d, %d per step of %d",
             (long long)step, c->micro, why, mp.micro, mp.accum, c->o->batch);
    err_clear();
    /* packed: the micro-batch's tokens halve too */
    if (c->qm.packing == PACKING_VARLEN && c->qm.max_tokens > 0)
        c->qm.max_tokens = c->qm.max_tokens / 2 > c->T ? c->qm.max_tokens / 2 : c->T;
    rc = rebuild_model(c, mp.micro);
    if (rc) return err_wrap(rc, "step %lld: rebuilding the model for micro-batch %d", (long long)step, mp.micro);
    c->micro = mp.micro;
    c->micro_batches = mp.accum;
    c->backoffs = mp.backoffs;
    char info[96];
    snprintf(info, sizeof info, "%d (after %d out-of-memory back-off%s)", c->micro, c->backoffs,
             c->backoffs > 1 ? "s" : "");
    run_log_info(c, "micro_batch", info);
    return 0;
}

int run_step(run_ctx *c, int32_t *idx, double *loss_out, float *scale_out, optim_result *res)
{
    int count;
    int64_t epoch;
    loader_next(&c->ld, idx, &count, &epoch);
    for (int i = 0; i < count; i++) idx[i] = c->trainable[idx[i]];
    /* fp16: the loss gradient is multiplied by the scale (so that small
     * gradients survive fp16), and optim_step divides it out again before
     * the norm, the clipping and the update. Disabled, the scale is 1. */
    float scale = lossscale_scale(&c->ls);
    double loss = 0, sumsq = 0;
    if (c->stages > 1) {
        /* Pipeline stages (run_pipe.c): no back-off either. */
        int rc = run_pipe_pass(c, idx, count, scale, &loss);
        if (rc) return rc;
    } else if (c->ranks > 1) {
        /* This rank's fixed share of the step (dist.h). No out-of-memory
         * back-off with N ranks: every rank must keep the same micro-batch. */
        int first, len;
        dist_share(count, c->micro, c->ranks, c->rank, &first, &len);
        c->buckets_sent = 0;
        double cb = dist_comm_seconds();
        int rc = run_micro_batches(c, idx, first, len, count, scale, &loss);
        if (c->bucketed) {
            /* Every rank sends every bucket in the same order, whatever
             * happened here: one with no examples in this step, or whose
             * step failed, sends what it has not sent (the collectives must
             * match; a failure is then agreed on below). */
            bert_model_set_grads_ready(c->qm.model, reduce_bucket, c);
            int brc = bert_grad_buckets_emit(c->qm.model, c->buckets_sent);
            bert_model_set_grads_ready(c->qm.model, NULL, NULL);
#ifdef BERTC_HAVE_CUDA
            double tn = clock_now_s();
            if (c->nccl && !brc) brc = cuda_module_loaded()->nccl_allreduce_wait();
            c->comm_s += clock_now_s() - tn;
#endif
            if (!rc) rc = brc;
        }
        c->comm_s += dist_comm_seconds() - cb;
        double c0 = dist_comm_seconds();
        if (rc && microbatch_is_oom(rc))
            err_wrap(rc, "out of memory with %d ranks (no back-off across ranks: give a smaller --micro-batch)",
                     c->ranks);
        if (rc) err_wrap(rc, "step %lld", (long long)c->st.step + 1);
        /* A failure on any rank ends every rank, with its message. */
        rc = dist_agree(rc);
        c->comm_s += dist_comm_seconds() - c0;
        c->wait_s += dist_comm_seconds() - c0;
        if (rc) return rc;
    }
    for (; c->ranks == 1;) {
        int rc = run_micro_batches(c, idx, 0, count, count, scale, &loss);
        if (!rc) break;
        if (!microbatch_is_oom(rc)) return err_wrap(rc, "step %lld", (long long)c->st.step + 1);
        if ((rc = back_off(c, c->st.step + 1))) return rc;
    }
    if (debug_nonfinite(c->st.step + 1)) {
        /* Test hook (BERTC_DEBUG_NONFINITE): this step's loss and one gradient are NaN. */
        float nan = NAN;
        backend *be = bert_model_backend(c->qm.model);
        int rc = be->i->upload(be->ctx, bert_model_grads(c->qm.model), &nan, sizeof nan);
        if (rc) return rc;
        loss = NAN;
    }
    if (c->stages > 1) {
        int rc = run_pipe_reduce(c, &loss, &sumsq);
        if (rc) return err_wrap(rc, "step %lld", (long long)c->st.step + 1);
    } else if (c->ranks > 1) {
        /* The gradients summed over the ranks in rank order (the same bytes
         * on every rank, so clipping, the NaN guard, the loss scaler and
         * AdamW decide alike everywhere); the loss and whether a rank got a
         * signal with them. */
        size_t n = c->qm.table.total;
        double c0 = dist_comm_seconds();
        float *g = bert_model_grads(c->qm.model);
        backend *be = bert_model_backend(c->qm.model);
        float *h = c->host_grads ? c->host_grads : g; /* the CPU backend's memory is the host's */
        int rc = 0;
        if (!c->bucketed) {
            /* GPUs without NCCL: the block through the host, after backward. */
            rc = h != g ? be->i->download(be->ctx, h, g, n * sizeof *h) : 0;
            if (!rc) rc = c->shard ? run_shard_reduce_host(c, h) : dist_allreduce_sum_fixed(h, n);
            if (!rc && h != g) rc = be->i->upload(be->ctx, g, h, n * sizeof *h);
        }
        /* With the loss: whether a rank got a signal, the squared gradient
         * norm of the sharded optimizer's pieces, and whether rank 0's clock
         * says --save-every-minutes is due (a sharded checkpoint is
         * collective, so every rank must save at the same step). */
        double red[4] = {loss, c->sig && *c->sig ? 1.0 : 0.0, 0.0, 0.0};
        if (!rc && c->shard) red[2] = optim_sum_squares(c->opt, g);
        if (c->writer && c->o->save_every_minutes > 0 && clock_now_s() - c->last_save_time >= 60 * c->o->save_every_minutes)
            red[3] = 1.0;
        if (!rc) rc = dist_allreduce_sum_f64(red, 4);
        c->comm_s += dist_comm_seconds() - c0;
        if (rc) return err_wrap(rc, "step %lld", (long long)c->st.step + 1);
        loss = red[0];
        if (red[1] > 0 && !*c->stop) *c->stop = c->sig && *c->sig ? *c->sig : SIGTERM;
        sumsq = red[2];
        c->save_due = red[3] > 0;
    }
    optim_config oc = optim_config_default();
    oc.lr = c->o->lr;
    oc.eps = c->o->adam_eps;
    oc.weight_decay = c->o->weight_decay;
    oc.max_grad_norm = c->o->clip;
    oc.warmup_steps = c->warmup;
    oc.total_steps = c->total;
    /* Sharded: this rank's pieces; a pipeline stage: its tensors; either
     * way with the global norm summed above. */
    float *g = bert_model_grads(c->qm.model);
    double ss = c->shard || c->stages > 1 ? sumsq : optim_sum_squares(c->opt, g);
    int rc = optim_apply(c->opt, bert_model_params(c->qm.model), g, &oc, c->st.step, lossscale_unscale(&c->ls), ss, res);
    if (c->shard) {
        /* then every rank's pieces to all; a rank whose update failed (a
         * device error) must not leave the others in the all-gather */
        double c0 = dist_comm_seconds(), t0 = clock_now_s();
        rc = dist_agree(rc);
        if (!rc && !res->skipped) rc = run_shard_allgather_params(c);
        c->comm_s += c->nccl ? clock_now_s() - t0 : dist_comm_seconds() - c0;
        if (rc) return err_wrap(rc, "step %lld", (long long)c->st.step + 1);
    }
    if (rc) return rc;
    /* An overflow (or any non-finite gradient) skipped the update: the
     * scaler halves its scale and counts the step, as optim does. */
    lossscale_update(&c->ls, res->skipped);
    c->st.step++;
    c->st.examples_seen += count;
    c->examples_here += count;
    *loss_out = loss;
    *scale_out = scale;
    return 0;
}
