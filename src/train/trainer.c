/* The trainer (trainer.h): options, signals, and the run from start to
 * end. The stages it drives are in run.h: run_setup -> run_step (and
 * run_evaluate, run_save_checkpoint) per step -> the end (a last
 * checkpoint, the export, the last evaluation) -> run_cleanup. */
#define _GNU_SOURCE
#include "train/trainer.h"
#include "train/run.h"

#include "core/alloc.h"
#include "core/clock.h"
#include "core/err.h"
#include "comm/dist.h"
#include "train/ckpt.h"
#include "train/sigcatch.h"

#include <arpa/inet.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_NONFINITE_IN_A_ROW 20

static volatile sig_atomic_t g_stop;

/* The first SIGINT/SIGTERM asks for a clean stop; SA_RESETHAND puts the
 * default action back, so a second one ends the process at once (the last
 * complete checkpoint stays valid: its writes are atomic). */
static volatile sig_atomic_t g_sig;
static char g_sig_msg[384];
static size_t g_sig_len;
static void on_signal(int sig)
{
    /* Data parallel: only noted here; the ranks agree at the end of the
     * step (run_step.c) and all stop after the same one. If a peer died,
     * mpirun is what sends it: this line says so on every living rank. */
    if (g_sig_len) {
        g_sig = sig;
        ssize_t w = write(STDERR_FILENO, g_sig_msg, g_sig_len);
        (void)w;
    } else {
        g_stop = sig;
    }
}

void trainer_opts_default(trainer_opts *o)
{
    *o = (trainer_opts){
        /* the windows and the recipe: run_qa.py's defaults for SQuAD */
        .max_seq_length = 384, .doc_stride = 128, .epochs = 2, .batch = 12, .lr = 3e-5, .warmup = 0.1,
        .weight_decay = 0.01, .adam_eps = 1e-8, .clip = 1.0, .dropout = -1, .seed = 42, .shuffle = 1,
        /* where and how it computes */
        .device = DEVICE_AUTO, .precision = PREC_AUTO, .recompute = RECOMPUTE_NONE, .packing = PACKING_NONE,
        .pipeline_stages = 1,
        /* checkpoints, logs, evaluation, the live page */
        .save_every_minutes = 15, .keep = 2, .resume = RESUME_AUTO, .log_every = 50, .monitor_interval = 1,
        .n_best = PREDICT_N_BEST, .max_answer_length = PREDICT_MAX_ANSWER_LENGTH, .http_port = -1,
        .http_bind = "127.0.0.1", .mirror_keep = -1};
}

int trainer_opts_check(const trainer_opts *o)
{
    if (o->doc_stride >= o->max_seq_length)
        return err_set(ERR_INPUT, "train: --doc-stride %d must be below --max-seq-length %d", o->doc_stride, o->max_seq_length);
    /* Whether the device can compute in the precision is backend_select's
     * to say (run_setup asks it before reading the data). */
    if (o->gpu_mem_limit < 0) return err_set(ERR_INPUT, "train --gpu-mem-limit: negative size");
    if (o->resume == RESUME_PATH && !o->resume_path) return err_set(ERR_INPUT, "train: --resume: no checkpoint dir");
    if (o->max_tokens && o->packing != PACKING_VARLEN)
        return err_set(ERR_INPUT, "train: --max-tokens needs --packing varlen");
    if (o->max_tokens && o->max_tokens < o->max_seq_length)
        return err_set(ERR_INPUT, "train: --max-tokens %d is below --max-seq-length %d (a window must fit)",
                       o->max_tokens, o->max_seq_length);
    if (o->micro_batch > o->batch)
        return err_set(ERR_INPUT, "train: --micro-batch %d is larger than --batch %d", o->micro_batch, o->batch);
    if (o->dropout >= 1) return err_set(ERR_INPUT, "train --dropout: %g must be below 1", o->dropout);
    if (o->http_port >= 0 && o->http_bind && *o->http_bind) {
        unsigned char addr[16];
        if (inet_pton(AF_INET, o->http_bind, addr) != 1 && inet_pton(AF_INET6, o->http_bind, addr) != 1)
            return err_set(ERR_INPUT, "train --http-bind %s: not an IPv4 or IPv6 address", o->http_bind);
    }
    return 0;
}

int trainer_opts_check_job(const trainer_opts *o)
{
    return run_strategy_check(o, dist_size(), dist_launched());
}

/* Saves when --save-every or --save-every-minutes says so. A full disk or
 * a failing device must not end the run: the previous checkpoints are
 * intact, the next save tries again. */
static void save_if_due(run_ctx *c)
{
    const trainer_opts *o = c->o;
    /* the minutes by rank 0's clock, agreed in the step (sharded and
     * pipeline checkpoints are collective) */
    int minutes = c->rk.save_due;
    int due = (o->save_every > 0 && c->st.step % o->save_every == 0) || minutes;
    if (!due || c->st.step >= c->plan.total || run_save_checkpoint(c) == 0) return;
    log_warn("%s (training goes on; the previous checkpoints are intact; the next save tries again)", err_msg());
    err_clear();
    c->prog.last_save_time = clock_now_s();
}

/* The steps from where the run stands to the planned total, or to a
 * signal. */
static int step_loop(run_ctx *c)
{
    const trainer_opts *o = c->o;
    int32_t *idx = xmalloc((size_t)o->batch * sizeof *idx);
    double loss = NAN, lr = 0;
    int rc = 0;
    c->prog.t0 = c->prog.last_save_time = clock_now_s();
    while (c->st.step < c->plan.total && !g_stop) {
        double t = clock_now_s();
        optim_result res;
        float scale = 1;
        rc = run_step(c, idx, &loss, &scale, &res);
        if (rc) break;
        c->prog.train_time += clock_now_s() - t;
        lr = res.lr;
        if (isfinite(loss))
            c->st.smoothed_loss = !isfinite(c->st.smoothed_loss) ? loss : 0.98 * c->st.smoothed_loss + 0.02 * loss;
        run_log_step(c, loss, scale, &res);
        if (res.skipped && c->ls.skipped_in_row >= MAX_NONFINITE_IN_A_ROW) {
            rc = err_set(ERR_RUNTIME,
                         "%d steps in a row (%lld to %lld) had a non-finite loss or gradient; stopping (the "
                         "checkpoints hold the weights of the last good step; try a lower --lr)",
                         MAX_NONFINITE_IN_A_ROW, (long long)c->st.step - MAX_NONFINITE_IN_A_ROW + 1,
                         (long long)c->st.step);
            break;
        }
        run_log_progress(c, loss, lr, 0);
        ckpt_debug_kill("step", c->st.step);
        if (g_stop) break;
        save_if_due(c);
        if (c->data.have_dev && o->eval_every > 0 && c->st.step % o->eval_every == 0 && c->st.step < c->plan.total) {
            rc = run_evaluate(c, NULL, 0);
            if (rc == ERR_STOPPED) rc = 0; /* the signal is handled by the caller */
            if (rc) break;
        }
    }
    free(idx);
    if (!rc && !g_stop && c->log.tty && !o->quiet) {
        run_log_progress(c, loss, lr, 1);
        printf("\n");
    }
    return rc;
}

/* A signal stopped the loop: save the step reached, exit 75. */
static int stop_on_signal(run_ctx *c)
{
    if (c->log.tty) printf("\n");
    int rc = 0;
    if (c->prog.last_saved_step != c->st.step) rc = run_save_checkpoint(c);
    if (rc) return rc;
    obs_state(c->log.obs, "stopped");
    printf("stopped by signal %d at step %lld; checkpoint saved; run the same command to resume\n", (int)g_stop,
           (long long)c->st.step);
    fflush(stdout);
    return ERR_STOPPED;
}

/* The planned steps are done: a last checkpoint, RUN/final/, the last
 * evaluation with RUN/predictions.json. */
static int finish(run_ctx *c)
{
    const trainer_opts *o = c->o;
    if (c->prog.last_saved_step != c->st.step && run_save_checkpoint(c) != 0) {
        log_warn("%s (going on with the export)", err_msg());
        err_clear();
    }
    char final[4096];
    int rc = run_export_final(c, final, sizeof final);
    if (rc) return rc;
    if (c->data.have_dev) {
        char pred[4096];
        snprintf(pred, sizeof pred, "%s/predictions.json", o->out_dir);
        rc = run_evaluate(c, pred, 1);
        if (rc == ERR_STOPPED) {
            printf("stopped by a signal during the final evaluation; the model is in %s\n", final);
            return rc;
        }
        if (rc) return rc;
    }
    obs_state(c->log.obs, "done");
    if (!o->quiet) {
        char d[32];
        run_fmt_duration(d, sizeof d, c->st.elapsed_s + (clock_now_s() - c->prog.t0));
        printf("done: %lld steps, %s in all; final model in %s\n", (long long)c->st.step, d, final);
        fflush(stdout);
    }
    return 0;
}

int trainer_run(const trainer_opts *o)
{
    run_ctx *c = xcalloc(1, sizeof *c);
    c->o = o;
    c->dir.lock_fd = -1;
    c->stop = &g_stop;
    c->rk.sig = &g_sig;
    g_stop = g_sig = 0;
    /* N ranks: the line each prints on a signal (empty: one process,
     * which stops at once) */
    run_place(c);
    c->strat->signal_line(c, g_sig_msg, sizeof g_sig_msg);
    g_sig_len = strlen(g_sig_msg);
    /* The handler runs on a thread of its own (train/sigcatch.h says why). */
    sigcatch sc;
    int rc = sigcatch_begin(&sc, on_signal, SA_RESETHAND);
    if (rc) {
        free(c);
        return err_code();
    }
    rc = run_setup(c);
    if (!rc) rc = step_loop(c);
    if (!rc) rc = g_stop ? stop_on_signal(c) : finish(c);
    sigcatch_end(&sc);
    run_cleanup(c);
    free(c);
    return rc;
}
