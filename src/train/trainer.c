/* The training loop (trainer.h): set-up, resume, steps with gradient
 * accumulation, logging, checkpoints, evaluation, export. */
#define _GNU_SOURCE
#include "train/trainer.h"
#include "train/trainer_impl.h"

#include "core/alloc.h"
#include "core/crc32c.h"
#include "core/err.h"
#include "core/fileio.h"
#include "data/loader.h"
#include "model/weights.h"
#include "obs/devices.h"
#include "obs/obs.h"
#include "train/ckpt.h"
#include "train/microbatch.h"
#include "train/optim.h"
#include "train/qa_model.h"
#include "train/runlog.h"
#include "train/state.h"
#include "train/train_ckpt.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>


#define MAX_NONFINITE_IN_A_ROW 20

static volatile sig_atomic_t g_stop;

static void warn_once(int *warned, const char *what)
{
    if (!*warned) log_warn("%s: %s (training goes on without it)", what, err_msg());
    *warned = 1;
    err_clear();
}
double trainer_g_last_em = -1, trainer_g_last_f1 = -1;

void trainer_last_eval(double *exact_match, double *f1)
{
    *exact_match = trainer_g_last_em;
    *f1 = trainer_g_last_f1;
}

/* The first SIGINT/SIGTERM asks for a clean stop; SA_RESETHAND puts the
 * default action back, so a second one ends the process at once (the last
 * complete checkpoint stays valid: its writes are atomic). */
static void on_signal(int sig) { g_stop = sig; }

double trainer_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void trainer_opts_default(trainer_opts *o)
{
    memset(o, 0, sizeof *o);
    o->max_seq_length = 384;
    o->doc_stride = 128;
    o->epochs = 2;
    o->batch = 12;
    o->lr = 3e-5;
    o->warmup = 0.1;
    o->weight_decay = 0.01;
    o->adam_eps = 1e-8;
    o->clip = 1.0;
    o->dropout = -1;
    o->seed = 42;
    o->shuffle = 1;
    o->device = "auto";
    o->precision = "auto";
    o->recompute = "none";
    o->save_every_minutes = 15;
    o->keep = 2;
    o->resume = "auto";
    o->log_every = 50;
    o->monitor_interval = 1;
    o->n_best = PREDICT_N_BEST;
    o->max_answer_length = PREDICT_MAX_ANSWER_LENGTH;
}

int trainer_opts_check(const trainer_opts *o)
{
    if (o->doc_stride >= o->max_seq_length)
        return err_set(ERR_INPUT, "train: --doc-stride %d must be below --max-seq-length %d", o->doc_stride, o->max_seq_length);
    const char *prec[] = {"auto", "fp32", "tf32", "fp16", "bf16"};
    int ok = 0;
    for (int i = 0; i < 5; i++) ok |= !strcmp(o->precision, prec[i]);
    if (!ok) return err_set(ERR_INPUT, "train --precision: '%s' is not one of auto, fp32, tf32, fp16, bf16", o->precision);
    /* Whether the device can compute in that precision is backend_select's
     * to say (trainer_setup asks it before reading the data). */
    device_kind dev;
    if (select_parse_device(o->device, &dev) != 0)
        return err_set(ERR_INPUT, "train --device: '%s' is not one of auto, cpu, cuda", o->device);
    if (o->gpu_mem_limit < 0) return err_set(ERR_INPUT, "train --gpu-mem-limit: negative size");
    if (strcmp(o->recompute, "none") != 0 && strcmp(o->recompute, "layer") != 0)
        return err_set(ERR_INPUT, "train --recompute: '%s' is not one of none, layer", o->recompute);
    if (o->micro_batch > o->batch)
        return err_set(ERR_INPUT, "train: --micro-batch %d is larger than --batch %d", o->micro_batch, o->batch);
    if (o->dropout >= 1) return err_set(ERR_INPUT, "train --dropout: %g must be below 1", o->dropout);
    return 0;
}

void trainer_fmt_duration(char *buf, size_t cap, double s)
{
    if (!(s >= 0) || s > 1e8) snprintf(buf, cap, "?");
    else if (s >= 3600) snprintf(buf, cap, "%dh%02dm", (int)(s / 3600), (int)fmod(s / 60, 60));
    else if (s >= 60) snprintf(buf, cap, "%dm%02ds", (int)(s / 60), (int)fmod(s, 60));
    else snprintf(buf, cap, "%.0fs", s);
}

int trainer_save_checkpoint(run_ctx *c)
{
    c->st.epoch = c->ld.epoch;
    c->st.cursor = c->ld.cursor;
    c->st.rng_counter = (uint64_t)c->st.step * (uint64_t)c->micro_batches;
    train_ckpt_put_scaler(&c->st, &c->ls);
    c->st.elapsed_s += trainer_now() - c->t0;
    c->t0 = trainer_now();
    int rc = bert_model_get_params(c->qm.model, c->host_params);
    if (!rc) rc = optim_get_state(c->opt, c->host_m, c->host_v, &c->st.adam_t, &c->st.skipped_steps);
    if (!rc) rc = runlog_sync(&c->metrics);
    if (!rc) rc = runlog_sync(&c->evals);
    if (!rc)
        rc = train_ckpt_save(c->o->out_dir, c->o->model_dir, &c->qm.cfg, &c->qm.table, c->host_params, c->host_m,
                             c->host_v, &c->st, c->o->keep);
    if (rc) return rc;
    c->last_saved_step = c->st.step;
    c->last_save_time = trainer_now();
    obs_report(c->obs);
    return 0;
}

int trainer_evaluate(run_ctx *c, const char *pred_path, int print)
{
    double t = trainer_now();
    qa_predictions p;
    int rc = qa_model_predict(&c->qm, &c->dev, &c->df, c->o->n_best, c->o->max_answer_length, &p, &g_stop);
    if (rc) return rc;
    eval_result r;
    rc = qa_predictions_eval(&c->dev, &p, &r);
    if (!rc && pred_path) rc = predictions_write_json(pred_path, &c->dev, &p);
    qa_predictions_free(&p);
    if (rc) return rc;
    double epoch = (double)c->st.step / (double)c->steps_per_epoch;
    if (runlog_row(&c->evals, "%lld,%.6f,%.6f,%.6f", (long long)c->st.step, epoch, r.exact_match, r.f1) != 0)
        warn_once(&c->log_warned, "eval.csv");
    obs_eval(c->obs, c->st.step, r.exact_match, r.f1);
    trainer_g_last_em = r.exact_match;
    trainer_g_last_f1 = r.f1;
    if (!c->o->quiet || print) {
        if (c->tty) printf("\n");
        printf("eval at step %lld: exact_match %.2f, f1 %.2f (%d questions, %.1fs)\n", (long long)c->st.step,
               r.exact_match, r.f1, r.total, trainer_now() - t);
        fflush(stdout);
    }
    return rc;
}

void trainer_note_skipped(run_ctx *c)
{
    if (!c->obs || !c->opt) return;
    char n[32];
    snprintf(n, sizeof n, "%lld", (long long)optim_skipped(c->opt));
    obs_set_info(c->obs, "skipped_steps", n);
}

static void progress(run_ctx *c, double loss, double lr, int force)
{
    if (c->o->quiet) return;
    double t = trainer_now();
    int64_t step = c->st.step;
    if (c->tty) {
        if (!force && t - c->last_progress < 0.25 && step < c->total) return;
    } else if (!force && step % c->o->log_every != 0 && step != c->total) {
        return;
    }
    c->last_progress = t;
    double rate = c->train_time > 0 ? (double)c->examples_here / c->train_time : 0;
    double eta = rate > 0 ? (double)(c->total - step) * c->o->batch / rate : -1;
    char etas[32], mon[160] = "";
    trainer_fmt_duration(etas, sizeof etas, eta);
    obs_progress(c->obs, mon, sizeof mon);
    char line[512];
    snprintf(line, sizeof line, "epoch %.2f | step %lld/%lld | loss %.4f (avg %.4f) | lr %.3g | %.1f ex/s | ETA %s%s%s",
             (double)step / (double)c->steps_per_epoch, (long long)step, (long long)c->total, loss, c->st.smoothed_loss,
             lr, rate, etas, mon[0] ? " | " : "", mon);
    if (c->tty) printf("\r%-120s", line);
    else printf("%s\n", line);
    fflush(stdout);
}

/* One optimizer step: micro-batches with accumulation, then AdamW. */
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

/* BERTC_DEBUG_OOM=N or N@S: from step S on (1-based; 1 when not given),
 * a micro-batch of more than N rows fails as the CUDA backend does when it
 * runs out of memory, to test the back-off where no GPU is. */
static int debug_oom(int64_t step, int rows)
{
    const char *s = getenv("BERTC_DEBUG_OOM");
    long long n, from = 1;
    if (!s || sscanf(s, "%lld@%lld", &n, &from) < 1) return 0;
    if (step < from || rows <= n) return 0;
    return err_set(ERR_RUNTIME, "debug: out of memory (BERTC_DEBUG_OOM=%s, a micro-batch of %d rows)", s, rows);
}

/* The forward and backward passes of one step's rows idx[0..count), in
 * micro-batches of c->micro, into freshly zeroed gradients. */
static int run_micro_batches(run_ctx *c, const int32_t *idx, int count, float scale, double *loss_out)
{
    bert_zero_grad(c->qm.model);
    double loss = 0;
    for (int k = 0, at = 0; at < count; k++, at += c->micro) {
        int B = count - at < c->micro ? count - at : c->micro;
        loader_gather(&c->mb, &c->tf, idx + at, B);
        bert_batch b = {B, c->mb.T, c->mb.input_ids, c->mb.token_type_ids, c->mb.attention_mask, c->mb.start_positions,
                        c->mb.end_positions};
        philox_stream rng = {(uint64_t)c->o->seed, (uint32_t)((uint64_t)c->st.step * (uint64_t)c->micro_batches + (uint64_t)k), 0};
        float l = 0;
        int rc = debug_oom(c->st.step + 1, B);
        if (!rc) rc = bert_forward(c->qm.model, &b, c->drop_hidden, c->drop_attn, rng, &l, NULL, NULL);
        /* Each micro-batch's mean loss weighted by its share of the step's
         * rows: the step's gradient is that of the mean over all its rows,
         * whatever the micro-batch size (with equal micro-batches this is
         * the usual division by their number). */
        float w = (float)B / (float)count;
        if (!rc) rc = bert_backward(c->qm.model, w * scale);
        if (rc) return rc;
        loss += (double)w * (double)l;
    }
    *loss_out = loss;
    return 0;
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
    rc = qa_model_resize(&c->qm, mp.micro);
    if (rc) return err_wrap(rc, "step %lld: rebuilding the model for micro-batch %d", (long long)step, mp.micro);
    c->micro = mp.micro;
    c->micro_batches = mp.accum;
    c->backoffs = mp.backoffs;
    char info[96];
    snprintf(info, sizeof info, "%d (after %d out-of-memory back-off%s)", c->micro, c->backoffs,
             c->backoffs > 1 ? "s" : "");
    obs_set_info(c->obs, "micro_batch", info);
    return 0;
}

/* *scale_out: the loss scale this step used (metrics.csv's loss_scale). */
static int train_step(run_ctx *c, int32_t *idx, double *loss_out, float *scale_out, optim_result *res)
{
    int count;
    int64_t epoch;
    loader_next(&c->ld, idx, &count, &epoch);
    for (int i = 0; i < count; i++) idx[i] = c->trainable[idx[i]];
    /* fp16: the loss gradient is multiplied by the scale (so that small
     * gradients survive fp16), and optim_step divides it out again before
     * the norm, the clipping and the update. Disabled, the scale is 1. */
    float scale = lossscale_scale(&c->ls);
    double loss = 0;
    for (;;) {
        int rc = run_micro_batches(c, idx, count, scale, &loss);
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
    optim_config oc = optim_config_default();
    oc.lr = c->o->lr;
    oc.eps = c->o->adam_eps;
    oc.weight_decay = c->o->weight_decay;
    oc.max_grad_norm = c->o->clip;
    oc.warmup_steps = c->warmup;
    oc.total_steps = c->total;
    int rc = optim_step(c->opt, bert_model_params(c->qm.model), bert_model_grads(c->qm.model), &oc, c->st.step,
                        lossscale_unscale(&c->ls), res);
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

int trainer_run(const trainer_opts *o)
{
    run_ctx *c = xcalloc(1, sizeof *c);
    c->o = o;
    c->lock_fd = -1;
    g_stop = 0;
    trainer_g_last_em = trainer_g_last_f1 = -1;
    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);

    c->stop = &g_stop;
    int rc = trainer_setup(c);
    if (rc) goto done;
    int32_t *idx = xmalloc((size_t)o->batch * sizeof *idx);
    c->t0 = c->last_save_time = trainer_now();
    double loss = NAN, lr = 0;
    while (!rc && c->st.step < c->total) {
        if (g_stop) break;
        double t = trainer_now();
        optim_result res;
        float scale = 1;
        rc = train_step(c, idx, &loss, &scale, &res);
        if (rc) break;
        c->train_time += trainer_now() - t;
        lr = res.lr;
        if (isfinite(loss))
            c->st.smoothed_loss = !isfinite(c->st.smoothed_loss) ? loss : 0.98 * c->st.smoothed_loss + 0.02 * loss;
        double rate = c->train_time > 0 ? (double)c->examples_here / c->train_time : 0;
        double epoch = (double)c->st.step / (double)c->steps_per_epoch;
        double elapsed = c->st.elapsed_s + (trainer_now() - c->t0);
        if (runlog_row(&c->metrics, "%lld,%.6f,%.9g,%.9g,%.9g,%.9g,%.2f,%.2f", (long long)c->st.step, epoch, loss,
                       res.lr, res.grad_norm, (double)scale, rate, elapsed) != 0)
            warn_once(&c->log_warned, "metrics.csv");
        obs_step(c->obs, &(obs_step_metrics){c->st.step, epoch, loss, res.lr, res.grad_norm, scale, rate});
        if (res.skipped) {
            if (c->ls.enabled)
                log_warn("step %lld: non-finite loss or gradient at loss scale %g, update skipped; loss scale now %g "
                         "(%lld skipped in all)",
                         (long long)c->st.step, (double)scale, (double)lossscale_scale(&c->ls),
                         (long long)optim_skipped(c->opt));
            else
                log_warn("step %lld: non-finite loss or gradient, update skipped (%lld skipped in all)",
                         (long long)c->st.step, (long long)optim_skipped(c->opt));
            trainer_note_skipped(c);
            if (c->ls.skipped_in_row >= MAX_NONFINITE_IN_A_ROW) {
                rc = err_set(ERR_RUNTIME,
                             "%d steps in a row (%lld to %lld) had a non-finite loss or gradient; stopping (the "
                             "checkpoints hold the weights of the last good step; try a lower --lr)",
                             MAX_NONFINITE_IN_A_ROW, (long long)c->st.step - MAX_NONFINITE_IN_A_ROW + 1,
                             (long long)c->st.step);
                break;
            }
        }
        progress(c, loss, lr, 0);
        ckpt_debug_kill("step", c->st.step);
        if (g_stop) break;
        int due = (o->save_every > 0 && c->st.step % o->save_every == 0) ||
                  (o->save_every_minutes > 0 && trainer_now() - c->last_save_time >= 60 * o->save_every_minutes);
        if (due && c->st.step < c->total && trainer_save_checkpoint(c) != 0) {
            /* A full disk or a failing device must not end the run: the
             * previous checkpoints are intact, the next save tries again. */
            log_warn("%s (training goes on; the previous checkpoints are intact; the next save tries again)",
                     err_msg());
            err_clear();
            c->last_save_time = trainer_now();
        }
        if (!rc && c->have_dev && o->eval_every > 0 && c->st.step % o->eval_every == 0 && c->st.step < c->total) {
            rc = trainer_evaluate(c, NULL, 0);
            if (rc == ERR_STOPPED) rc = 0; /* the signal is handled below */
        }
    }
    free(idx);
    if (rc) goto done;
    if (g_stop) {
        if (c->tty) printf("\n");
        if (c->last_saved_step != c->st.step) rc = trainer_save_checkpoint(c);
        if (!rc) {
            printf("stopped by signal %d at step %lld; checkpoint saved; run the same command to resume\n", (int)g_stop,
                   (long long)c->st.step);
            fflush(stdout);
            rc = ERR_STOPPED;
        }
        goto done;
    }
    if (c->tty && !o->quiet) {
        progress(c, loss, lr, 1);
        printf("\n");
    }
    rc = trainer_finish(c);
done:
    if (c->obs) {
        trainer_note_skipped(c);
        obs_report(c->obs);
        obs_close(c->obs);
    }
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    trainer_cleanup(c);
    free(c);
    return rc;
}
