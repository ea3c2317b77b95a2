/* What a training run tells (run.h): RUN/metrics.csv and RUN/eval.csv,
 * the observability hub (TensorBoard, monitor, report: obs/), the progress
 * line and the start-up report. */
#define _GNU_SOURCE
#include "train/run.h"

#include "backend/cpu_kernels.h"

#include "core/clock.h"
#include "core/err.h"
#include "core/fileio.h"
#include "obs/devices.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define METRICS_HEADER "step,epoch,loss,lr,grad_norm,loss_scale,examples_per_s,elapsed_s"
#define EVAL_HEADER "step,epoch,exact_match,f1"

void run_fmt_duration(char *buf, size_t cap, double s)
{
    if (!(s >= 0) || s > 1e8) snprintf(buf, cap, "?");
    else if (s >= 3600) snprintf(buf, cap, "%dh%02dm", (int)(s / 3600), (int)fmod(s / 60, 60));
    else if (s >= 60) snprintf(buf, cap, "%dm%02ds", (int)(s / 60), (int)fmod(s, 60));
    else snprintf(buf, cap, "%.0fs", s);
}

static void warn_once(int *warned, const char *what)
{
    if (!*warned) log_warn("%s: %s (training goes on without it)", what, err_msg());
    *warned = 1;
    err_clear();
}

static void options_line(const run_ctx *c, char *buf, size_t cap)
{
    const trainer_opts *o = c->o;
    snprintf(buf, cap,
             "max_seq_length=%d doc_stride=%d epochs=%g max_steps=%lld batch=%d lr=%g warmup=%g weight_decay=%g clip=%g "
             "dropout=%g seed=%lld shuffle=%d",
             c->plan.T, o->doc_stride, o->epochs, (long long)o->max_steps, o->batch, o->lr, o->warmup, o->weight_decay,
             o->clip, o->dropout, (long long)o->seed, o->shuffle);
    size_t n = strlen(buf);
    snprintf(buf + n, cap > n ? cap - n : 0, "%s", c->strat->options);
    if (o->version_2_with_negative) {
        n = strlen(buf);
        snprintf(buf + n, cap > n ? cap - n : 0, " version_2_with_negative=1 null_score_diff_threshold=%g",
                 o->null_score_diff_threshold);
    }
}

int run_log_open(run_ctx *c)
{
    const trainer_opts *o = c->o;
    c->log.tty = isatty(STDOUT_FILENO);
    char path[4096];
    int64_t keep = c->dir.resumed ? c->st.step : -1;
    int rc = runlog_open(&c->log.metrics, path_join(path, sizeof path, o->out_dir, "metrics.csv"), METRICS_HEADER, keep);
    /* A finished run started again evaluates again: its last row is redone. */
    if (!rc)
        rc = runlog_open(&c->log.evals, path_join(path, sizeof path, o->out_dir, "eval.csv"), EVAL_HEADER,
                         c->dir.resumed && c->st.step == c->plan.total ? keep - 1 : keep);
    if (rc) return rc;
    obs_options oo;
    obs_options_init(&oo);
    char opts[512];
    options_line(c, opts, sizeof opts);
    oo.monitor_interval_s = o->monitor_interval;
    oo.gpu_index = c->qm.info.is_cuda ? o->gpu : -1; /* -1: NVML is not loaded */
    oo.resume_step = c->dir.resumed ? c->st.step : 0;
    oo.model = o->model_dir;
    oo.train_data = o->train_path;
    oo.dev_data = o->dev_path;
    oo.options = opts;
    oo.http_port = o->http_port;
    oo.http_bind = o->http_bind;
    oo.http_api_key = o->http_api_key;
    if (obs_open(&c->log.obs, o->out_dir, &oo) != 0) {
        log_warn("%s (carrying on without TensorBoard, monitor and report)", err_msg());
        err_clear();
        c->log.obs = NULL;
    }
    obs_set_info(c->log.obs, "backend", c->qm.info.desc);
    char kern[512];
    obs_set_info(c->log.obs, "cpu_kernels", cpu_kernels_describe(kern, sizeof kern));
    run_log_skipped(c);
    return 0;
}

void run_log_startup(const run_ctx *c, int train_hit, int dev_hit)
{
    const trainer_opts *o = c->o;
    const bert_config *g = &c->qm.cfg;
    char hw[512], saves[128] = "";
    devices_hardware_line(hw, sizeof hw);
    printf("bertc train %s\n", BERTC_VERSION);
    printf("  model     %s: L%d H%d A%d I%d, vocab %d, %.1fM parameters%s\n", o->model_dir, g->num_hidden_layers,
           g->hidden_size, g->num_attention_heads, g->intermediate_size, g->vocab_size, (double)c->qm.table.total / 1e6,
           c->qm.qa_initialised ? "; qa_outputs initialised (the model had no QA head)" : "");
    printf("  hardware  %s\n", hw);
    if (!c->qm.info.is_cuda) {
        char kern[512];
        printf("  kernels   %s\n", cpu_kernels_describe(kern, sizeof kern));
    }
    printf("  backend   %s", c->qm.info.desc);
    if (c->ls.enabled) printf("; dynamic loss scaling, scale %g", (double)lossscale_scale(&c->ls));
    printf("\n");
    printf("  train     %s: %d questions -> %d windows, %d trainable (features %s)\n", o->train_path, c->data.train.n, c->data.tf.n,
           c->data.ntrainable, train_hit ? "from cache" : "built");
    if (c->data.have_dev)
        printf("  dev       %s: %d questions -> %d windows (features %s)\n", o->dev_path, c->data.dev.n, c->data.df.n,
               dev_hit ? "from cache" : "built");
    c->strat->describe(c);
    if (o->version_2_with_negative) {
        int nimp = 0;
        for (int i = 0; i < c->data.train.n; i++) nimp += c->data.train.ex[i].is_impossible || c->data.train.ex[i].n_answers == 0;
        printf("  squad 2.0 --version-2-with-negative: %d unanswerable training questions, trained at [CLS]; dev: the null "
               "answer when it beats the best span by more than %g, evaluate-v2.0.py's exact/f1\n",
               nimp, o->null_score_diff_threshold);
    }
    printf("  plan      %lld steps (%.4g epochs of %lld steps); batch %d = %d micro-batch%s of %d; T %d, stride %d\n",
           (long long)c->plan.total, (double)c->plan.total / (double)c->plan.steps_per_epoch, (long long)c->plan.steps_per_epoch, o->batch,
           c->plan.micro_batches, c->plan.micro_batches > 1 ? "es" : "", c->plan.micro, c->plan.T, o->doc_stride);
    if (c->qm.recompute == RECOMPUTE_LAYER)
        printf("  memory    --recompute layer: each layer's input kept, one layer's activations recomputed in backward\n");
    printf("  optimizer AdamW lr %g, warm-up %lld steps then linear decay, weight decay %g, eps %g, clip %g; dropout %g/%g; seed %lld%s\n",
           o->lr, (long long)c->plan.warmup, o->weight_decay, o->adam_eps, o->clip, (double)c->plan.drop_hidden,
           (double)c->plan.drop_attn, (long long)o->seed, o->shuffle ? "" : ", no shuffle");
    if (o->save_every > 0) snprintf(saves, sizeof saves, "every %lld steps", (long long)o->save_every);
    if (o->save_every_minutes > 0)
        snprintf(saves + strlen(saves), sizeof saves - strlen(saves), "%severy %g min", saves[0] ? " and " : "",
                 o->save_every_minutes);
    printf("  checkpoints %s/checkpoints %s, keep %d%s\n", o->out_dir, saves[0] ? saves : "at the end only",
           o->keep, o->keep ? "" : " (all)");
    if (c->dir.resumed)
        printf("  resume    from %s (step %lld of %lld, restart %lld)\n", c->dir.resumed_from, (long long)c->st.step,
               (long long)c->plan.total, (long long)c->st.restarts);
    else
        printf("  resume    none: a new run\n");
    fflush(stdout);
}

void run_log_step(run_ctx *c, double loss, float scale, const optim_result *res)
{
    if (!c->rk.writer) return; /* rank 0 alone tells (data parallel) */
    double rate = c->prog.train_time > 0 ? (double)c->prog.examples_here / c->prog.train_time : 0;
    double epoch = (double)c->st.step / (double)c->plan.steps_per_epoch;
    double elapsed = c->st.elapsed_s + (clock_now_s() - c->prog.t0);
    if (runlog_row(&c->log.metrics, "%lld,%.6f,%.9g,%.9g,%.9g,%.9g,%.2f,%.2f", (long long)c->st.step, epoch, loss, res->lr,
                   res->grad_norm, (double)scale, rate, elapsed) != 0)
        warn_once(&c->log.warned, "metrics.csv");
    obs_step(c->log.obs, &(obs_step_metrics){c->st.step, epoch, loss, res->lr, res->grad_norm, scale, rate});
    obs_live_progress(c->log.obs, c->st.step, c->plan.total, elapsed,
                      rate > 0 ? (double)(c->plan.total - c->st.step) * c->o->batch / rate : NAN);
    if (!res->skipped) return;
    if (c->ls.enabled)
        log_warn("step %lld: non-finite loss or gradient at loss scale %g, update skipped; loss scale now %g "
                 "(%lld skipped in all)",
                 (long long)c->st.step, (double)scale, (double)lossscale_scale(&c->ls),
                 (long long)optim_skipped(c->opt));
    else
        log_warn("step %lld: non-finite loss or gradient, update skipped (%lld skipped in all)", (long long)c->st.step,
                 (long long)optim_skipped(c->opt));
    run_log_skipped(c);
}

void run_log_eval(run_ctx *c, const eval_result *r, double seconds, int print)
{
    if (!c->rk.writer) return; /* rank 0 alone tells (data parallel) */
    double epoch = (double)c->st.step / (double)c->plan.steps_per_epoch;
    if (runlog_row(&c->log.evals, "%lld,%.6f,%.6f,%.6f", (long long)c->st.step, epoch, r->exact_match, r->f1) != 0)
        warn_once(&c->log.warned, "eval.csv");
    obs_eval(c->log.obs, c->st.step, r->exact_match, r->f1);
    if (!c->o->quiet || print) {
        if (c->log.tty) printf("\n");
        printf("eval at step %lld: exact_match %.2f, f1 %.2f (%d questions, %.1fs)\n", (long long)c->st.step,
               r->exact_match, r->f1, r->total, seconds);
        fflush(stdout);
    }
}

void run_log_progress(run_ctx *c, double loss, double lr, int force)
{
    if (!c->rk.writer) return; /* rank 0 alone tells (data parallel) */
    if (c->o->quiet) return;
    double t = clock_now_s();
    int64_t step = c->st.step;
    if (c->log.tty) {
        if (!force && t - c->log.last_progress < 0.25 && step < c->plan.total) return;
    } else if (!force && step % c->o->log_every != 0 && step != c->plan.total) {
        return;
    }
    c->log.last_progress = t;
    double rate = c->prog.train_time > 0 ? (double)c->prog.examples_here / c->prog.train_time : 0;
    double eta = rate > 0 ? (double)(c->plan.total - step) * c->o->batch / rate : -1;
    char etas[32], mon[160] = "";
    run_fmt_duration(etas, sizeof etas, eta);
    obs_progress(c->log.obs, mon, sizeof mon);
    char line[512];
    snprintf(line, sizeof line, "epoch %.2f | step %lld/%lld | loss %.4f (avg %.4f) | lr %.3g | %.1f ex/s | ETA %s%s%s",
             (double)step / (double)c->plan.steps_per_epoch, (long long)step, (long long)c->plan.total, loss, c->st.smoothed_loss,
             lr, rate, etas, mon[0] ? " | " : "", mon);
    size_t l = strlen(line);
    c->strat->progress(c, line + l, sizeof line - l);
    if (c->log.tty) printf("\r%-120s", line);
    else printf("%s\n", line);
    fflush(stdout);
}

void run_log_skipped(run_ctx *c)
{
    if (!c->log.obs || !c->opt) return;
    char n[32];
    snprintf(n, sizeof n, "%lld", (long long)optim_skipped(c->opt));
    obs_set_info(c->log.obs, "skipped_steps", n);
}

void run_log_info(run_ctx *c, const char *key, const char *value) { obs_set_info(c->log.obs, key, value); }

int run_log_sync(run_ctx *c)
{
    if (!c->rk.writer) return 0;
    int rc = runlog_sync(&c->log.metrics);
    if (!rc) rc = runlog_sync(&c->log.evals);
    return rc;
}

/* RUN/info.csv's ranks and comm_s (the report's summary), and the
 * parallel mode's own keys. */
static void dist_info(run_ctx *c)
{
    if (!c->log.obs) return;
    char v[64];
    snprintf(v, sizeof v, "%d", c->rk.ranks);
    obs_set_info(c->log.obs, "ranks", v);
    snprintf(v, sizeof v, "%.3f", c->rk.comm_s);
    obs_set_info(c->log.obs, "comm_s", v);
    snprintf(v, sizeof v, "%.3f", c->rk.wait_s);
    obs_set_info(c->log.obs, "comm_wait_s", v);
    if (c->strat->info) c->strat->info(c);
}

void run_log_report(run_ctx *c)
{
    dist_info(c);
    obs_report(c->log.obs);
}

void run_log_close(run_ctx *c)
{
    if (c->log.obs) {
        run_log_skipped(c);
        dist_info(c);
        obs_report(c->log.obs);
        obs_close(c->log.obs);
        c->log.obs = NULL;
    }
    runlog_close(&c->log.metrics);
    runlog_close(&c->log.evals);
}
