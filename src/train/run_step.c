/* One optimizer step of a training run (run.h), the same for every
 * parallel mode: the loader's next rows, the strategy's forward and
 * backward passes and gradient sums (train/strategy.h), the step's one
 * reduce over the ranks, the loss scale, AdamW. */
#define _GNU_SOURCE
#include "train/run.h"

#include "core/clock.h"
#include "core/err.h"
#include "comm/comm.h"

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

/* Test hook (BERTC_DEBUG_NONFINITE): this step's loss and one gradient are NaN. */
static int poison(run_ctx *c, double *loss)
{
    float nan = NAN;
    backend *be = bert_model_backend(c->qm.model);
    *loss = NAN;
    return be->i->upload(be->ctx, bert_model_grads(c->qm.model), &nan, sizeof nan);
}

/* The step's one reduce: one fixed-order sum over the ranks of every
 * rank's loss, whether its step failed, whether it got a signal, the
 * strategy's terms (a squared norm, times) and whether rank 0's clock says
 * --save-every-minutes is due (a collective checkpoint must be saved by
 * every rank at the same step); the same doubles on every rank. rc: this
 * rank's step so far; when any rank failed, every rank returns the lowest
 * failing rank's error (its message fetched then: the agreement costs a
 * second collective only on a failed step). With one rank the sum is the
 * rank's own. */
static int reduce_step(run_ctx *c, run_terms *t, int rc)
{
    enum { FIXED = 5 };
    double local[FIXED + 16], *red = local;
    if (t->nextra > 16 && !(red = malloc((FIXED + (size_t)t->nextra) * sizeof *red))) {
        rc = rc ? rc : err_set(ERR_RUNTIME, "out of memory");
        red = local;
        t->nextra = 0;
    }
    red[0] = t->loss;
    red[1] = c->rk.sig && *c->rk.sig ? 1.0 : 0.0;
    red[2] = t->sumsq;
    red[3] = c->rk.writer && c->o->save_every_minutes > 0 &&
             clock_now_s() - c->prog.last_save_time >= 60 * c->o->save_every_minutes;
    rc = comm_deferred(c->rk.cm, rc); /* a failure kept from the last step's update */
    red[4] = rc != 0;
    if (t->nextra) memcpy(red + FIXED, t->extra, (size_t)t->nextra * sizeof *red);
    double c0 = comm_seconds(c->rk.cm);
    int src = comm_sum_f64(c->rk.cm, red, FIXED + t->nextra);
    /* where the ranks wait for the slowest one's passes */
    c->rk.comm_s += comm_seconds(c->rk.cm) - c0;
    c->rk.wait_s += comm_seconds(c->rk.cm) - c0;
    if (src) {
        rc = err_wrap(src, "step %lld", (long long)c->st.step + 1);
    } else if (red[4] > 0) {
        rc = comm_agree(c->rk.cm, rc);
    } else {
        t->loss = red[0];
        t->sumsq = red[2];
        c->rk.save_due = red[3] > 0;
        if (t->nextra) memcpy(t->extra, red + FIXED, (size_t)t->nextra * sizeof *red);
        if (red[1] > 0 && !*c->stop) *c->stop = c->rk.sig && *c->rk.sig ? *c->rk.sig : SIGTERM;
    }
    if (red != local) free(red);
    return rc;
}

int run_step(run_ctx *c, int32_t *idx, double *loss_out, float *scale_out, optim_result *res)
{
    const run_strategy *S = c->strat;
    int count;
    int64_t epoch;
    loader_next(&c->data.ld, idx, &count, &epoch);
    for (int i = 0; i < count; i++) idx[i] = c->data.trainable[idx[i]];
    /* fp16: the loss gradient is multiplied by the scale (so that small
     * gradients survive fp16), and optim_step divides it out again before
     * the norm, the clipping and the update. Disabled, the scale is 1. */
    float scale = lossscale_scale(&c->ls);
    run_terms t = {0};
    int rc = S->pass(c, idx, count, scale, &t.loss);
    if (!rc && debug_nonfinite(c->st.step + 1)) rc = poison(c, &t.loss);
    /* The sums every rank takes alike, so that clipping, the NaN guard, the
     * loss scaler and AdamW decide alike everywhere; a failure on any rank
     * ends every rank, with its message. */
    int prc = rc;
    rc = S->reduce(c, rc);
    if (rc && !prc) err_wrap(rc, "step %lld", (long long)c->st.step + 1);
    if (S->terms) S->terms(c, &t); /* on every rank: the reduce's doubles must match */
    rc = reduce_step(c, &t, rc);
    if (rc) return rc;
    optim_config oc = optim_config_default();
    oc.lr = c->o->lr;
    oc.eps = c->o->adam_eps;
    oc.weight_decay = c->o->weight_decay;
    oc.max_grad_norm = c->o->clip;
    oc.warmup_steps = c->plan.warmup;
    oc.total_steps = c->plan.total;
    float *g = bert_model_grads(c->qm.model);
    float *p = bert_model_params(c->qm.model);
    float unscale = lossscale_unscale(&c->ls);
    *res = (optim_result){0}; /* as it is where the update fails (a deferred failure goes on to the next step) */
    rc = t.norm_summed ? optim_apply(c->opt, p, g, &oc, c->st.step, unscale, t.sumsq, res)
                       : optim_step(c->opt, p, g, &oc, c->st.step, unscale, res);
    if (S->updated) rc = S->updated(c, rc, res);
    if (rc) return rc;
    /* An overflow (or any non-finite gradient) skipped the update: the
     * scaler halves its scale and counts the step, as optim does. */
    lossscale_update(&c->ls, res->skipped);
    c->st.step++;
    c->st.examples_seen += count;
    c->prog.examples_here += count;
    *loss_out = t.loss;
    *scale_out = scale;
    return 0;
}
