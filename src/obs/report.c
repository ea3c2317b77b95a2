/* report.html from a run dir's files (see report.h). */
#define _GNU_SOURCE
#include "obs/report.h"
#include "obs/csv.h"
#include "obs/live.h"
#include "obs/rundir.h"
#include "core/alloc.h"
#include "core/err.h"
#include "core/fileio.h"

#include <dirent.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    const rundir *d;
    sbuf charts;  /* the drawn charts */
    sbuf empty;   /* <li> items: charts left out and why */
    int ncharts;
} report_ctx;

static const char *const palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"};

static void chart(report_ctx *r, const char *id, const char *title, const char *xlabel, const char *ylabel,
                  double ymin, double ymax, int y_zero, const svg_series *s, int n, const char *why_empty)
{
    svg_chart c = {id, title, xlabel, ylabel, 0, 0, ymin, ymax, y_zero};
    sbuf one = {0};
    if (svg_line_chart(&one, &c, s, n) > 0) {
        sb_puts(&r->charts, "<div class=\"card\">\n");
        sb_puts(&r->charts, one.p);
        sb_puts(&r->charts, "</div>\n");
        r->ncharts++;
    } else {
        sb_puts(&r->empty, "<li>");
        sb_html(&r->empty, title);
        sb_puts(&r->empty, ": ");
        sb_html(&r->empty, why_empty);
        sb_puts(&r->empty, "</li>\n");
    }
    sb_free(&one);
}

static void row(sbuf *b, const char *key, const char *value)
{
    sb_puts(b, "<tr><th>");
    sb_html(b, key);
    sb_puts(b, "</th><td>");
    sb_html(b, value);
    sb_puts(b, "</td></tr>\n");
}

static void draw_charts(report_ctx *r)
{
    const rundir *s = r->d;
    const char *nom = s->metrics.loaded ? "no values in metrics.csv" : "no metrics.csv";
    const char *nomon = s->monitor.loaded ? "no GPU readings in monitor.csv (no GPU, or NVML not available)"
                                          : "no monitor.csv";
    svg_series a[3];
#define S(name_, x_, y_, n_, color_, mk_) ((svg_series){name_, x_, y_, (x_) && (y_) ? (n_) : 0, color_, mk_})
    a[0] = S("loss", s->step, s->loss, s->n, palette[0], 0);
    chart(r, "chart-loss", "Training loss", "step", "loss", 0, 0, 0, a, 1, nom);
    a[0] = S("lr", s->step, s->lr, s->n, palette[2], 0);
    chart(r, "chart-lr", "Learning rate", "step", "lr", 0, 0, 1, a, 1, nom);
    a[0] = S("examples/s", s->step, s->eps, s->n, palette[3], 0);
    chart(r, "chart-throughput", "Throughput", "step", "examples/s", 0, 0, 1, a, 1, nom);
    a[0] = S("grad norm", s->step, s->gnorm, s->n, palette[4], 0);
    chart(r, "chart-gradnorm", "Gradient norm (before clipping)", "step", "norm", 0, 0, 1, a, 1, nom);
    double smin = INFINITY, smax = -INFINITY;
    for (size_t i = 0; s->scale && i < s->n; i++)
        if (isfinite(s->scale[i])) {
            smin = fmin(smin, s->scale[i]);
            smax = fmax(smax, s->scale[i]);
        }
    if (smax > smin) { /* a constant scale (fp32, bf16) says nothing */
        a[0] = S("loss scale", s->step, s->scale, s->n, palette[5], 0);
        chart(r, "chart-lossscale", "Loss scale (fp16)", "step", "scale", 0, 0, 0, a, 1, nom);
    }
    a[0] = S("F1", s->estep, s->f1, s->ne, palette[0], 1);
    a[1] = S("EM", s->estep, s->em, s->ne, palette[1], 1);
    chart(r, "chart-eval", "Evaluation", "step", "score", 0, 0, 1, a, 2,
          "no evaluation rows (eval.csv or f1/exact_match columns in metrics.csv)");
    a[0] = S("SM busy %", s->t, s->util, s->nm, palette[0], 0);
    a[1] = S("memory bus %", s->t, s->mutil, s->nm, palette[2], 0);
    chart(r, "chart-gpu-util", "GPU utilisation", s->tunit, "%", 0, 100, 0, a, 2, nomon);
    a[0] = S("used", s->t, s->mused, s->nm, palette[3], 0);
    a[1] = S("total", s->t, s->mtotal, s->nm, "#7f7f7f", 0);
    chart(r, "chart-gpu-mem", "GPU memory", s->tunit, "GiB", 0, 0, 1, a, rundir_count(s->mused, s->nm) ? 2 : 0, nomon);
    a[0] = S("temperature", s->t, s->temp, s->nm, palette[1], 0);
    chart(r, "chart-gpu-temp", "GPU temperature", s->tunit, "\xc2\xb0" "C", 0, 0, 0, a, 1, nomon);
    a[0] = S("draw", s->t, s->power, s->nm, palette[4], 0);
    a[1] = S("limit", s->t, s->plimit, s->nm, "#7f7f7f", 0);
    chart(r, "chart-gpu-power", "GPU power", s->tunit, "W", 0, 0, 1, a, rundir_count(s->power, s->nm) ? 2 : 0, nomon);
    const char *nocpu = s->monitor.loaded ? "no CPU readings in monitor.csv" : "no monitor.csv";
    a[0] = S("process CPU %", s->t, s->cpu, s->nm, palette[2], 0);
    chart(r, "chart-cpu", "CPU use (100% = one core)", s->tunit, "%", 0, 0, 1, a, 1, nocpu);
    a[0] = S("RSS", s->t, s->rss, s->nm, palette[0], 0);
    a[1] = S("available", s->t, s->avail, s->nm, palette[2], 0);
    chart(r, "chart-mem", "Memory", s->tunit, "GiB", 0, 0, 1, a, 2, nocpu);
#undef S
}

static void summary(const rundir *s, sbuf *b)
{
    char v[1024], d[64];
    static const struct { const char *key, *label; } keys[] = {
        {"model", "Model"}, {"train", "Training data"}, {"dev", "Evaluation data"},
        {"options", "Options"}, {"hardware", "Hardware"}, {"started", "Started"},
    };
    sb_puts(b, "<table class=\"summary\">\n");
    row(b, "Run", s->dir);
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const char *x = rundir_info(s, keys[i].key);
        row(b, keys[i].label, x ? x : "not recorded");
    }
    double dur = rundir_max(s->elapsed, s->n);
    /* without elapsed_s, the monitor's span (its time column is rescaled, so read unix_time again) */
    if (!isfinite(dur) && s->monitor.loaded) {
        const double *t = s->unix_t;
        double a = NAN, z = NAN;
        for (size_t i = 0; t && i < s->nm; i++)
            if (isfinite(t[i])) {
                if (!isfinite(a)) a = t[i];
                z = t[i];
            }
        dur = z - a;
    }
    live_fmt_duration(d, sizeof d, dur);
    row(b, "Duration", d);
    double last_step = rundir_last(s->step, s->n), last_epoch = rundir_last(s->epoch, s->n);
    if (isfinite(last_step)) {
        if (isfinite(last_epoch)) snprintf(v, sizeof v, "%.0f (epoch %.2f)", last_step, last_epoch);
        else snprintf(v, sizeof v, "%.0f", last_step);
    } else {
        snprintf(v, sizeof v, "none logged");
    }
    row(b, "Steps", v);
    /* the mean of the last ten logged losses: one step's loss is noisy */
    int k;
    double avg = rundir_tail_mean(s->loss, s->n, 10, &k);
    if (k) snprintf(v, sizeof v, "%.4f (mean of the last %d logged)", avg, k);
    else snprintf(v, sizeof v, "none logged");
    row(b, "Final loss", v);
    size_t best = (size_t)-1;
    for (size_t i = 0; s->f1 && i < s->ne; i++)
        if (isfinite(s->f1[i]) && (best == (size_t)-1 || s->f1[i] > s->f1[best])) best = i;
    if (best != (size_t)-1) {
        double em = s->em ? s->em[best] : NAN;
        snprintf(v, sizeof v, "%.2f (EM %.2f) at step %.0f; %zu evaluation(s)", s->f1[best], em, s->estep[best],
                 rundir_count(s->f1, s->ne));
    } else {
        snprintf(v, sizeof v, "no evaluation recorded");
    }
    row(b, "Best F1", v);
    double med = rundir_median(s->eps, s->n);
    if (isfinite(med)) snprintf(v, sizeof v, "%.2f examples/s (median)", med);
    else snprintf(v, sizeof v, "not logged");
    row(b, "Throughput", v);
    char latest[256];
    int nck = rundir_checkpoints(s->dir, latest, sizeof latest);
    if (nck) snprintf(v, sizeof v, "%d (latest %s)", nck, latest);
    else snprintf(v, sizeof v, "none");
    row(b, "Checkpoints", v);
    const char *sk = rundir_info(s, "skipped_steps");
    double skc = rundir_max(s->skipped, s->n);
    if (sk) snprintf(v, sizeof v, "%s", sk);
    else if (isfinite(skc)) snprintf(v, sizeof v, "%.0f", skc);
    else snprintf(v, sizeof v, "none recorded");
    row(b, "Skipped steps", v);
    const char *res = rundir_info(s, "resumes");
    row(b, "Resumed", res ? res : "0");
    long rs = rundir_restarts(s->dir);
    snprintf(v, sizeof v, "%ld", rs < 0 ? 0 : rs);
    row(b, "Restarts (supervisor)", v);
    if (rundir_count(s->util, s->nm) || rundir_count(s->mused, s->nm)) {
        int thr_col = s->monitor.loaded ? csv_col(&s->monitor.t, "throttle") : -1;
        size_t nthr = 0, nknown = 0;
        for (size_t i = 0; thr_col >= 0 && i < s->nm; i++) {
            const char *c = csv_cell(&s->monitor.t, i, thr_col);
            if (!*c) continue;
            nknown++;
            nthr += strcmp(c, "none") && strcmp(c, "idle");
        }
        snprintf(v, sizeof v, "mean utilisation %.0f%%, peak memory %.1f / %.1f GiB, max %.0f\xc2\xb0" "C, throttled in %.0f%% of samples",
                 rundir_mean(s->util, s->nm), rundir_max(s->mused, s->nm), rundir_max(s->mtotal, s->nm),
                 rundir_max(s->temp, s->nm), nknown ? 100.0 * (double)nthr / (double)nknown : 0.0);
    } else {
        snprintf(v, sizeof v, "no GPU readings");
    }
    row(b, "GPU", v);
    if (rundir_count(s->cpu, s->nm) || rundir_count(s->rss, s->nm))
        snprintf(v, sizeof v, "mean %.0f%% (100%% = one core), peak RSS %.2f GiB", rundir_mean(s->cpu, s->nm),
                 rundir_max(s->rss, s->nm));
    else snprintf(v, sizeof v, "no readings");
    row(b, "CPU", v);
    /* the other info keys, as they are */
    if (s->info.loaded) {
        int kc = csv_col(&s->info.t, "key"), vc = csv_col(&s->info.t, "value");
        for (size_t i = 0; kc >= 0 && vc >= 0 && i < s->info.t.nrows; i++) {
            const char *key = csv_cell(&s->info.t, i, kc);
            int known = !strcmp(key, "skipped_steps") || !strcmp(key, "resumes");
            for (size_t j = 0; j < sizeof keys / sizeof keys[0]; j++) known |= !strcmp(key, keys[j].key);
            if (!known && *key) row(b, key, csv_cell(&s->info.t, i, vc));
        }
    }
    sb_puts(b, "</table>\n");
}

const char report_css[] =
    "body{font-family:sans-serif;margin:24px;color:#222;background:#f6f7f9}"
    "h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:24px 0 8px}.sub{color:#666;font-size:13px}"
    "table.summary{border-collapse:collapse;background:#fff;font-size:13px;max-width:1160px}"
    "table.summary th{text-align:left;padding:4px 12px;background:#eef0f3;white-space:nowrap;vertical-align:top}"
    "table.summary td{padding:4px 12px;border-bottom:1px solid #eee;word-break:break-word}"
    ".grid{display:flex;flex-wrap:wrap;gap:12px}.card{background:#fff;border:1px solid #ddd;border-radius:4px}"
    "svg text{font-family:sans-serif;font-size:11px;fill:#333}svg .ct{font-size:13px;font-weight:bold}"
    "svg .yt{text-anchor:end}svg .xt,svg .xl,svg .yl{text-anchor:middle}"
    "svg .grid{stroke:#e5e5e5;stroke-width:1}svg .tick,svg .axis{stroke:#444;fill:none;stroke-width:1}"
    "ul{font-size:13px}";

void report_charts(const rundir *d, sbuf *charts, sbuf *empty)
{
    report_ctx r;
    memset(&r, 0, sizeof r);
    r.d = d;
    draw_charts(&r);
    sb_puts(charts, r.charts.p ? r.charts.p : "");
    if (empty) sb_puts(empty, r.empty.p ? r.empty.p : "");
    sb_free(&r.charts);
    sb_free(&r.empty);
}

int report_render(const char *run_dir, sbuf *html)
{
    if (!path_is_dir(run_dir)) return err_set(ERR_INPUT, "report: %s is not a run directory", run_dir);
    rundir d;
    int rc = rundir_load(&d, run_dir);
    if (rc) return err_wrap(ERR_INPUT, "report");
    if (!d.metrics.loaded && !d.monitor.loaded) {
        rc = err_set(ERR_INPUT, "report: %s has neither a readable metrics.csv nor monitor.csv%s%s%s", run_dir,
                     d.first_err[0] ? " (" : "", d.first_err, d.first_err[0] ? ")" : "");
        rundir_free(&d);
        return rc;
    }
    sbuf charts = {0}, empty = {0};
    report_charts(&d, &charts, &empty);

    char when[64];
    time_t now = time(NULL);
    struct tm tmv;
    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S %z", localtime_r(&now, &tmv));
    sb_puts(html, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>bertc run report: ");
    sb_html(html, run_dir);
    sb_printf(html, "</title>\n<style>%s</style>\n</head>\n<body>\n<h1>bertc run report</h1>\n<div class=\"sub\">", report_css);
    sb_html(html, run_dir);
    sb_printf(html, " &middot; generated %s by bertc %s</div>\n<h2>Summary</h2>\n", when, BERTC_VERSION);
    summary(&d, html);
    if (d.notes.n) {
        sb_puts(html, "<h2>Notes</h2>\n<ul class=\"notes\">\n");
        for (char *p = d.notes.p; *p;) {
            char *e = strchr(p, '\n');
            size_t len = e ? (size_t)(e - p) : strlen(p);
            char *line = xmalloc(len + 1);
            memcpy(line, p, len);
            line[len] = 0;
            sb_puts(html, "<li>");
            sb_html(html, line);
            sb_puts(html, "</li>\n");
            free(line);
            p += len + (e != NULL);
        }
        sb_puts(html, "</ul>\n");
    }
    sb_printf(html, "<h2>Charts</h2>\n<div class=\"grid\">\n%s</div>\n", charts.p ? charts.p : "");
    if (empty.n) {
        sb_puts(html, "<h2>Not charted</h2>\n<ul class=\"empty\">\n");
        sb_puts(html, empty.p);
        sb_puts(html, "</ul>\n");
    }
    sb_puts(html, "</body>\n</html>\n");
    sb_free(&charts);
    sb_free(&empty);
    rundir_free(&d);
    return 0;
}

int report_write(const char *run_dir, const char *out_path)
{
    char path[4096];
    if (!out_path) out_path = path_join(path, sizeof path, run_dir, "report.html");
    sbuf html = {0};
    int rc = report_render(run_dir, &html);
    if (!rc && file_write_atomic(out_path, html.p, html.n)) rc = err_wrap(ERR_RUNTIME, "report");
    sb_free(&html);
    return rc;
}
