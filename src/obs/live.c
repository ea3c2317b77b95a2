/* The live numbers of a run and their three forms (see live.h). */
#define _GNU_SOURCE
#include "obs/live.h"
#include "core/err.h"
#include "core/fileio.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

void live_init(live_status *s)
{
    memset(s, 0, sizeof *s);
    snprintf(s->state, sizeof s->state, "unknown");
    double *nums[] = {&s->step, &s->total, &s->epoch, &s->loss, &s->loss_avg, &s->lr, &s->grad_norm,
                      &s->loss_scale, &s->examples_per_s, &s->elapsed_s, &s->eta_s, &s->eval_step,
                      &s->exact_match, &s->f1, &s->best_f1, &s->best_step, &s->ckpt_step, &s->gpu_util_pct,
                      &s->gpu_mem_used_gib, &s->gpu_mem_total_gib, &s->gpu_temp_c, &s->gpu_power_w, &s->cpu_pct,
                      &s->rss_gib, &s->updated_unix};
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) *nums[i] = NAN;
    s->checkpoints = -1;
}

void live_fmt_duration(char *buf, size_t cap, double s)
{
    if (!isfinite(s) || s < 0) snprintf(buf, cap, "unknown");
    else if (s < 60) snprintf(buf, cap, "%.1f s", s);
    else if (s < 3600) snprintf(buf, cap, "%d min %02d s", (int)(s / 60), (int)fmod(s, 60));
    else snprintf(buf, cap, "%d h %02d min", (int)(s / 3600), (int)fmod(s / 60, 60));
}

static double mtime_of(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) return NAN;
    return (double)st.st_mtim.tv_sec + st.st_mtim.tv_nsec * 1e-9;
}

void live_from_rundir(live_status *s, const rundir *r)
{
    live_init(s);
    const char *tot = rundir_info(r, "total_steps");
    if (tot) s->total = strtod(tot, NULL);
    /* the last metrics row */
    if (r->n) {
        size_t i = r->n - 1;
        s->step = r->step ? r->step[i] : NAN;
        s->epoch = r->epoch ? r->epoch[i] : NAN;
        s->loss = r->loss ? r->loss[i] : NAN;
        s->lr = r->lr ? r->lr[i] : NAN;
        s->grad_norm = r->gnorm ? r->gnorm[i] : NAN;
        s->loss_scale = r->scale ? r->scale[i] : NAN;
        s->examples_per_s = r->eps ? r->eps[i] : NAN;
        s->elapsed_s = r->elapsed ? r->elapsed[i] : NAN;
        double sum = 0;
        int k = 0;
        for (size_t j = r->n; r->loss && j-- > 0 && k < 10;)
            if (isfinite(r->loss[j])) {
                sum += r->loss[j];
                k++;
            }
        if (k) s->loss_avg = sum / k;
        /* ETA from the rate of the last (up to) 50 rows, wall-clock */
        if (r->elapsed && isfinite(s->total) && isfinite(s->step)) {
            size_t j0 = r->n > 50 ? r->n - 50 : 0;
            double ds = r->step[i] - r->step[j0], dt = r->elapsed[i] - r->elapsed[j0];
            if (ds > 0 && dt > 0) s->eta_s = (s->total - s->step) * dt / ds;
            if (s->step >= s->total) s->eta_s = 0;
        }
    }
    if (r->ne && r->f1) {
        size_t i = r->ne - 1;
        s->eval_step = r->estep ? r->estep[i] : NAN;
        s->exact_match = r->em ? r->em[i] : NAN;
        s->f1 = r->f1[i];
        for (size_t j = 0; j < r->ne; j++)
            if (isfinite(r->f1[j]) && !(r->f1[j] <= s->best_f1)) {
                s->best_f1 = r->f1[j];
                s->best_step = r->estep ? r->estep[j] : NAN;
            }
    }
    if (r->nm) {
        size_t i = r->nm - 1;
        s->gpu_util_pct = r->util ? r->util[i] : NAN;
        s->gpu_mem_used_gib = r->mused ? r->mused[i] : NAN;
        s->gpu_mem_total_gib = r->mtotal ? r->mtotal[i] : NAN;
        s->gpu_temp_c = r->temp ? r->temp[i] : NAN;
        s->gpu_power_w = r->power ? r->power[i] : NAN;
        s->cpu_pct = r->cpu ? r->cpu[i] : NAN;
        s->rss_gib = r->rss ? r->rss[i] : NAN;
    }
    char latest[256], path[4600];
    s->checkpoints = rundir_checkpoints(r->dir, latest, sizeof latest);
    if (latest[0]) {
        snprintf(s->ckpt, sizeof s->ckpt, "%s/checkpoints/%s", r->dir, latest);
        s->ckpt_step = strtod(latest + 5, NULL);
    }
    /* the state, as far as files tell: final/ is written at the end */
    snprintf(path, sizeof path, "%s/final/model.safetensors", r->dir);
    const char *st = rundir_info(r, "state");
    if (path_exists(path)) snprintf(s->state, sizeof s->state, "done");
    else if (st) snprintf(s->state, sizeof s->state, "%s", st);
    else if (r->n) snprintf(s->state, sizeof s->state, "training");
    const char *names[] = {"metrics.csv", "monitor.csv", "eval.csv"};
    for (size_t i = 0; i < 3; i++) {
        double t = mtime_of(path_join(path, sizeof path, r->dir, names[i]));
        if (isfinite(t) && !(t <= s->updated_unix)) s->updated_unix = t;
    }
    /* the mirror's last line: "unix_time step-N result detail" */
    char *log;
    size_t len;
    path_join(path, sizeof path, r->dir, "mirror.log");
    if (path_exists(path) && file_read_all(path, &log, &len) == 0) {
        while (len && log[len - 1] == '\n') log[--len] = 0;
        char *line = strrchr(log, '\n');
        line = line ? line + 1 : log;
        char *sp = strchr(line, ' ');
        snprintf(s->mirror, sizeof s->mirror, "%s", sp ? sp + 1 : line);
        free(log);
    }
    err_clear();
}

void live_text(const live_status *s, sbuf *o)
{
    char eta[48], el[48];
    live_fmt_duration(eta, sizeof eta, s->eta_s);
    live_fmt_duration(el, sizeof el, s->elapsed_s);
    sb_printf(o, "state %s", s->state);
    if (isfinite(s->updated_unix)) {
        double ago = (double)time(NULL) - s->updated_unix;
        if (ago > 5) {
            char a[48];
            live_fmt_duration(a, sizeof a, ago);
            sb_printf(o, " (last update %s ago)", a);
        }
    }
    sb_puts(o, "\n");
    if (isfinite(s->step)) {
        sb_printf(o, "step %.0f", s->step);
        if (isfinite(s->total) && s->total > 0) sb_printf(o, "/%.0f (%.1f%%)", s->total, 100 * s->step / s->total);
        if (isfinite(s->epoch)) sb_printf(o, " | epoch %.2f", s->epoch);
        if (isfinite(s->loss)) sb_printf(o, " | loss %.4f", s->loss);
        if (isfinite(s->loss_avg)) sb_printf(o, " (avg %.4f)", s->loss_avg);
        if (isfinite(s->lr)) sb_printf(o, " | lr %.3g", s->lr);
        if (isfinite(s->examples_per_s)) sb_printf(o, " | %.1f ex/s", s->examples_per_s);
        sb_printf(o, " | elapsed %s | ETA %s\n", el, eta);
    } else {
        sb_puts(o, "no step logged yet\n");
    }
    if (isfinite(s->f1)) {
        sb_printf(o, "eval at step %.0f: EM %.2f F1 %.2f", s->eval_step, s->exact_match, s->f1);
        if (isfinite(s->best_f1)) sb_printf(o, " (best F1 %.2f at step %.0f)", s->best_f1, s->best_step);
        sb_puts(o, "\n");
    } else {
        sb_puts(o, "eval: none yet\n");
    }
    if (s->ckpt[0]) sb_printf(o, "checkpoint step %.0f: %s\n", s->ckpt_step, s->ckpt);
    else sb_puts(o, "checkpoint: none yet\n");
    int any = 0;
    if (isfinite(s->gpu_util_pct) || isfinite(s->gpu_mem_used_gib)) {
        sb_puts(o, "GPU");
        if (isfinite(s->gpu_util_pct)) sb_printf(o, " %.0f%%", s->gpu_util_pct);
        if (isfinite(s->gpu_mem_used_gib)) sb_printf(o, " %.1f/%.1f GiB", s->gpu_mem_used_gib, s->gpu_mem_total_gib);
        if (isfinite(s->gpu_temp_c)) sb_printf(o, " %.0f\xc2\xb0" "C", s->gpu_temp_c);
        if (isfinite(s->gpu_power_w)) sb_printf(o, " %.0f W", s->gpu_power_w);
        any = 1;
    }
    if (isfinite(s->cpu_pct) || isfinite(s->rss_gib)) {
        sb_printf(o, "%sCPU", any ? " | " : "");
        if (isfinite(s->cpu_pct)) sb_printf(o, " %.0f%%", s->cpu_pct);
        if (isfinite(s->rss_gib)) sb_printf(o, " RSS %.2f GiB", s->rss_gib);
        any = 1;
    }
    if (any) sb_puts(o, "\n");
    if (s->mirror[0]) sb_printf(o, "mirror: %s\n", s->mirror);
}

typedef struct {
    const char *name, *help;
    double v;
} live_num;

static int live_nums(const live_status *s, live_num *out)
{
    live_num n[] = {
        {"step", "optimizer steps done", s->step},
        {"total_steps", "optimizer steps planned", s->total},
        {"epoch", "epochs done", s->epoch},
        {"loss", "training loss of the last logged step", s->loss},
        {"loss_avg", "mean of the last logged losses", s->loss_avg},
        {"lr", "learning rate", s->lr},
        {"grad_norm", "gradient norm before clipping", s->grad_norm},
        {"loss_scale", "fp16 loss scale", s->loss_scale},
        {"examples_per_s", "training throughput", s->examples_per_s},
        {"elapsed_s", "training time so far", s->elapsed_s},
        {"eta_s", "estimated time to the end of training", s->eta_s},
        {"eval_step", "step of the latest evaluation", s->eval_step},
        {"exact_match", "EM of the latest evaluation", s->exact_match},
        {"f1", "F1 of the latest evaluation", s->f1},
        {"best_f1", "best F1 so far", s->best_f1},
        {"best_f1_step", "step of the best F1", s->best_step},
        {"checkpoint_step", "step of the latest checkpoint", s->ckpt_step},
        {"gpu_util_pct", "GPU SM busy percent", s->gpu_util_pct},
        {"gpu_mem_used_gib", "GPU memory used", s->gpu_mem_used_gib},
        {"gpu_mem_total_gib", "GPU memory total", s->gpu_mem_total_gib},
        {"gpu_temp_c", "GPU temperature", s->gpu_temp_c},
        {"gpu_power_w", "GPU power draw", s->gpu_power_w},
        {"cpu_pct", "process CPU use, 100 = one core", s->cpu_pct},
        {"rss_gib", "process resident memory", s->rss_gib},
        {"updated_unix", "when the numbers last changed", s->updated_unix},
    };
    int k = (int)(sizeof n / sizeof n[0]);
    memcpy(out, n, sizeof n);
    return k;
}

void live_json(const live_status *s, sbuf *o)
{
    live_num n[40];
    int k = live_nums(s, n);
    sb_puts(o, "{\"state\":");
    sb_json_string(o, s->state, SB_JSON_UNICODE);
    for (int i = 0; i < k; i++)
        if (isfinite(n[i].v)) sb_printf(o, ",\"%s\":%.10g", n[i].name, n[i].v);
    sb_puts(o, ",\"checkpoint\":");
    sb_json_string(o, s->ckpt, SB_JSON_UNICODE);
    sb_puts(o, ",\"mirror\":");
    sb_json_string(o, s->mirror, SB_JSON_UNICODE);
    sbuf t = {0};
    live_text(s, &t);
    sb_puts(o, ",\"text\":");
    sb_json_string(o, t.p ? t.p : "", SB_JSON_UNICODE);
    sb_free(&t);
    sb_puts(o, "}\n");
}

void live_prometheus(const live_status *s, sbuf *o)
{
    live_num n[40];
    int k = live_nums(s, n);
    for (int i = 0; i < k; i++) {
        if (!isfinite(n[i].v)) continue;
        sb_printf(o, "# HELP bertc_%s %s\n# TYPE bertc_%s gauge\nbertc_%s %.10g\n", n[i].name, n[i].help, n[i].name,
                  n[i].name, n[i].v);
    }
    sb_printf(o, "# HELP bertc_training 1 while the run trains or evaluates\n# TYPE bertc_training gauge\nbertc_training %d\n",
              !strcmp(s->state, "training") || !strcmp(s->state, "evaluating"));
}
