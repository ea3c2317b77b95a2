/* Evaluation during and at the end of a training run (run.h): predictions
 * on --dev, EM/F1, optionally RUN/predictions.json (and, with
 * --version-2-with-negative, RUN/null_odds.json beside it), through
 * infer_run. The parallel mode's logits hook (strategy.h) computes the
 * logits with every rank; the writer answers, scores and writes. */
#include "train/run.h"

#include "core/clock.h"
#include "core/err.h"
#include "train/strategy.h"
#include "infer/infer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A rank not the writer: its part of the strategy's logits (collective). */
static int logits_part(run_ctx *c)
{
    const features *f = &c->data.df;
    size_t n = (size_t)f->n * (size_t)f->T;
    float *start = malloc((n ? n : 1) * sizeof *start), *end = malloc((n ? n : 1) * sizeof *end);
    if (!start || !end) { /* the hook still takes part in the collectives, and fails */
        free(start);
        free(end);
        start = end = NULL;
    }
    int rc = c->strat->logits(c, f, start, end);
    free(start);
    free(end);
    return rc;
}

int run_evaluate(run_ctx *c, const char *pred_path, int print)
{
    double t = clock_now_s();
    const trainer_opts *o = c->o;
    char odds[4096];
    snprintf(odds, sizeof odds, "%s/null_odds.json", o->out_dir);
    infer_params ip = {.model = &c->qm, .data = &c->data.dev, .f = &c->data.df,
                       .logits = c->strat->logits, .logits_arg = c,
                       .post = {.n_best = o->n_best, .max_answer_length = o->max_answer_length,
                                .version_2_with_negative = o->version_2_with_negative,
                                .null_score_diff_threshold = o->null_score_diff_threshold},
                       .pred_path = pred_path, .null_odds_path = pred_path && o->version_2_with_negative ? odds : NULL,
                       .score = 1, .stop = c->stop};
    infer_result r = {0};
    int rc;
    /* The evaluation computes as `bertc predict` does: each window's logits
     * independent of the batch it is in (and so of the rank count). */
    /* In --eval-precision: the weights prepared for it are dropped
     * afterwards, since the optimizer changes them. */
    backend_set_batch_invariant(&c->qm.be, 1);
    rc = backend_set_answer_precision(&c->qm.be, o->eval_precision, NULL, 0);
    if (!rc) /* the writer answers; a rank not the writer computes its part of the logits */
        rc = c->rk.writer ? infer_run(&ip, &r) : logits_part(c);
    backend_set_answer_precision(&c->qm.be, PREC_FP32, NULL, 0);
    backend_set_batch_invariant(&c->qm.be, 0);
    if (!rc && c->rk.writer) run_log_eval(c, &r.score, clock_now_s() - t, print);
    infer_result_free(&r);
    return rc;
}
