/* report.html from a run dir's files (see report.h). */
#define _GNU_SOURCE
#include "obs/report.h"
#include "obs/csv.h"
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
    csv_table t;
    int loaded;
} table_src;

typedef struct {
    const char *dir;
    table_src metrics, eval, monitor, info;
    sbuf notes;   /* <li> items: damaged files, missing data */
    sbuf charts;  /* the drawn charts */
    sbuf empty;   /* <li> items: charts left out and why */
    char first_err[512];
    int ncharts;
} report_ctx;

static const char *const palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"};

static void note(report_ctx *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(report_ctx *r, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    sb_puts(&r->notes, "<li>");
    sb_html(&r->notes, msg);
    sb_puts(&r->notes, "</li>\n");
}

/* Loads RUN/name when it exists; a file that cannot be parsed becomes a
 * note, so one damaged file never costs the whole report. */
static void load(report_ctx *r, const char *name, table_src *s)
{
    char path[4096];
    path_join(path, sizeof path, r->dir, name);
    if (!path_exists(path)) return;
    if (csv_read(path, &s->t) != 0) {
        if (!r->first_err[0]) snprintf(r->first_err, sizeof r->first_err, "%s", err_msg());
        note(r, "%s", err_msg());
        err_clear();
        return;
    }
    s->loaded = 1;
    if (s->t.bad_rows)
        note(r, "%s: %zu row(s) with the wrong number of cells skipped (first at line %zu)", name, s->t.bad_rows,
             s->t.first_bad_line);
}

/* A column as numbers (NaN where missing); NULL when the column is absent. */
static double *column(const table_src *s, const char *name)
{
    if (!s->loaded) return NULL;
    int c = csv_col(&s->t, name);
    if (c < 0) return NULL;
    double *v = xmalloc(sizeof(double) * (s->t.nrows ? s->t.nrows : 1));
    for (size_t i = 0; i < s->t.nrows; i++) v[i] = csv_num(&s->t, i, c);
    return v;
}

static double *column_any(const table_src *s, const char *const *names)
{
    for (; *names; names++) {
        double *v = column(s, *names);
        if (v) return v;
    }
    return NULL;
}

static size_t count_finite(const double *v, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; v && i < n; i++) k += isfinite(v[i]) != 0;
    return k;
}

static const char *info_get(const report_ctx *r, const char *key)
{
    const table_src *s = &r->info;
    if (!s->loaded) return NULL;
    int kc = csv_col(&s->t, "key"), vc = csv_col(&s->t, "value");
    if (kc < 0 || vc < 0) return NULL;
    const char *found = NULL;
    for (size_t i = 0; i < s->t.nrows; i++) /* the last one wins */
        if (!strcmp(csv_cell(&s->t, i, kc), key)) found = csv_cell(&s->t, i, vc);
    return found && *found ? found : NULL;
}

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

static void fmt_duration(char *buf, size_t cap, double s)
{
    if (!isfinite(s) || s < 0) snprintf(buf, cap, "unknown");
    else if (s < 60) snprintf(buf, cap, "%.1f s", s);
    else if (s < 3600) snprintf(buf, cap, "%d min %02d s", (int)(s / 60), (int)fmod(s, 60));
    else snprintf(buf, cap, "%d h %02d min", (int)(s / 3600), (int)fmod(s / 60, 60));
}

static void row(sbuf *b, const char *key, const char *value)
{
    sb_puts(b, "<tr><th>");
    sb_html(b, key);
    sb_puts(b, "</th><td>");
    sb_html(b, value);
    sb_puts(b, "</td></tr>\n");
}

static double last_finite(const double *v, size_t n)
{
    for (size_t i = n; v && i-- > 0;)
        if (isfinite(v[i])) return v[i];
    return NAN;
}

static double max_finite(const double *v, size_t n)
{
    double m = NAN;
    for (size_t i = 0; v && i < n; i++)
        if (isfinite(v[i]) && !(v[i] <= m)) m = v[i];
    return m;
}

static double mean_finite(const double *v, size_t n)
{
    double s = 0;
    size_t k = 0;
    for (size_t i = 0; v && i < n; i++)
        if (isfinite(v[i])) {
            s += v[i];
            k++;
        }
    return k ? s / (double)k : NAN;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median_finite(const double *v, size_t n)
{
    if (!v) return NAN;
    double *c = xmalloc(sizeof(double) * (n ? n : 1));
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(v[i])) c[k++] = v[i];
    qsort(c, k, sizeof(double), cmp_double);
    double m = k ? (k % 2 ? c[k / 2] : 0.5 * (c[k / 2 - 1] + c[k / 2])) : NAN;
    free(c);
    return m;
}

/* Checkpoint dirs step-N (complete ones: a .tmp dir is a write in progress). */
static int count_checkpoints(const char *dir, char *latest, size_t cap)
{
    char path[4096];
    path_join(path, sizeof path, dir, "checkpoints");
    latest[0] = 0;
    DIR *d = opendir(path);
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, "step-", 5) != 0 || strstr(e->d_name, ".tmp")) continue;
        char sub[4400];
        snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
        if (!path_is_dir(sub)) continue;
        n++;
        if (strcmp(e->d_name, latest) > 0) snprintf(latest, cap, "%s", e->d_name);
    }
    closedir(d);
    return n;
}

/* Rows of RUN/restarts.csv (written by the supervisor, train/supervise.c)
 * whose action column says the trainer was restarted. */
static long count_restarts(const char *dir)
{
    char path[4096], *data;
    size_t len;
    path_join(path, sizeof path, dir, "restarts.csv");
    if (!path_exists(path) || file_read_all(path, &data, &len)) {
        err_clear();
        return 0;
    }
    long n = 0;
    for (char *p = data; (p = strstr(p, ",restart,")) != NULL; p++) n++;
    free(data);
    return n;
}

typedef struct {
    double *step, *epoch, *loss, *lr, *gnorm, *scale, *eps, *elapsed, *skipped;
    size_t n;
    double *estep, *em, *f1;
    size_t ne;
    double *t, *util, *mutil, *mused, *mtotal, *temp, *power, *plimit, *cpu, *rss, *avail;
    size_t nm;
    const char *tunit;
} series;

static void series_free(series *s)
{
    double **all[] = {&s->step, &s->epoch, &s->loss, &s->lr, &s->gnorm, &s->scale, &s->eps, &s->elapsed,
                      &s->skipped, &s->estep, &s->em, &s->f1, &s->t, &s->util, &s->mutil, &s->mused,
                      &s->mtotal, &s->temp, &s->power, &s->plimit, &s->cpu, &s->rss, &s->avail};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        free(*all[i]);
        *all[i] = NULL;
    }
}

static double *index_column(size_t n)
{
    double *v = xmalloc(sizeof(double) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) v[i] = (double)i;
    return v;
}

static void scale_column(double *v, size_t n, double k)
{
    for (size_t i = 0; v && i < n; i++) v[i] *= k;
}

static void collect(report_ctx *r, series *s)
{
    static const char *const em_names[] = {"exact_match", "em", "EM", "exact", NULL};
    static const char *const f1_names[] = {"f1", "F1", NULL};
    static const char *const skip_names[] = {"skipped_steps", "skipped", NULL};
    memset(s, 0, sizeof *s);
    if (r->metrics.loaded) {
        s->n = r->metrics.t.nrows;
        s->step = column(&r->metrics, "step");
        if (!s->step) s->step = index_column(s->n);
        s->epoch = column(&r->metrics, "epoch");
        s->loss = column(&r->metrics, "loss");
        s->lr = column(&r->metrics, "lr");
        s->gnorm = column(&r->metrics, "grad_norm");
        s->scale = column(&r->metrics, "loss_scale");
        s->eps = column(&r->metrics, "examples_per_s");
        s->elapsed = column(&r->metrics, "elapsed_s");
        s->skipped = column_any(&r->metrics, skip_names);
    }
    /* evaluation: eval.csv, or the evaluation columns of metrics.csv */
    table_src *ev = r->eval.loaded ? &r->eval : &r->metrics;
    if (ev->loaded) {
        double *f1 = column_any(ev, f1_names);
        if (f1) {
            s->ne = ev->t.nrows;
            s->f1 = f1;
            s->em = column_any(ev, em_names);
            s->estep = column(ev, "step");
            if (!s->estep) s->estep = index_column(s->ne);
        }
    }
    if (r->monitor.loaded) {
        s->nm = r->monitor.t.nrows;
        s->t = column(&r->monitor, "unix_time");
        if (!s->t) s->t = column(&r->monitor, "elapsed_s");
        if (!s->t) s->t = index_column(s->nm);
        s->util = column(&r->monitor, "gpu_util_pct");
        s->mutil = column(&r->monitor, "gpu_mem_util_pct");
        s->mused = column(&r->monitor, "gpu_mem_used_mib");
        s->mtotal = column(&r->monitor, "gpu_mem_total_mib");
        s->temp = column(&r->monitor, "gpu_temp_c");
        s->power = column(&r->monitor, "power_w");
        s->plimit = column(&r->monitor, "power_limit_w");
        s->cpu = column(&r->monitor, "cpu_pct");
        s->rss = column(&r->monitor, "rss_mib");
        s->avail = column(&r->monitor, "mem_avail_mib");
        scale_column(s->mused, s->nm, 1.0 / 1024);
        scale_column(s->mtotal, s->nm, 1.0 / 1024);
        scale_column(s->rss, s->nm, 1.0 / 1024);
        scale_column(s->avail, s->nm, 1.0 / 1024);
        /* time since the first sample, in a unit that suits the span */
        double t0 = NAN, t1 = NAN;
        for (size_t i = 0; i < s->nm; i++)
            if (isfinite(s->t[i])) {
                if (!isfinite(t0)) t0 = s->t[i];
                t1 = s->t[i];
            }
        double span = t1 - t0, k = 1;
        s->tunit = "time since start (s)";
        if (span > 3 * 3600) {
            k = 1.0 / 3600;
            s->tunit = "time since start (h)";
        } else if (span > 180) {
            k = 1.0 / 60;
            s->tunit = "time since start (min)";
        }
        for (size_t i = 0; i < s->nm; i++) s->t[i] = (s->t[i] - t0) * k;
    }
}

static void draw_charts(report_ctx *r, const series *s)
{
    const char *nom = r->metrics.loaded ? "no values in metrics.csv" : "no metrics.csv";
    const char *nomon = r->monitor.loaded ? "no GPU readings in monitor.csv (no GPU, or NVML not available)"
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
    chart(r, "chart-gpu-mem", "GPU memory", s->tunit, "GiB", 0, 0, 1, a, count_finite(s->mused, s->nm) ? 2 : 0, nomon);
    a[0] = S("temperature", s->t, s->temp, s->nm, palette[1], 0);
    chart(r, "chart-gpu-temp", "GPU temperature", s->tunit, "\xc2\xb0" "C", 0, 0, 0, a, 1, nomon);
    a[0] = S("draw", s->t, s->power, s->nm, palette[4], 0);
    a[1] = S("limit", s->t, s->plimit, s->nm, "#7f7f7f", 0);
    chart(r, "chart-gpu-power", "GPU power", s->tunit, "W", 0, 0, 1, a, count_finite(s->power, s->nm) ? 2 : 0, nomon);
    const char *nocpu = r->monitor.loaded ? "no CPU readings in monitor.csv" : "no monitor.csv";
    a[0] = S("process CPU %", s->t, s->cpu, s->nm, palette[2], 0);
    chart(r, "chart-cpu", "CPU use (100% = one core)", s->tunit, "%", 0, 0, 1, a, 1, nocpu);
    a[0] = S("RSS", s->t, s->rss, s->nm, palette[0], 0);
    a[1] = S("available", s->t, s->avail, s->nm, palette[2], 0);
    chart(r, "chart-mem", "Memory", s->tunit, "GiB", 0, 0, 1, a, 2, nocpu);
#undef S
}

static void summary(report_ctx *r, const series *s, sbuf *b)
{
    char v[1024], d[64];
    static const struct { const char *key, *label; } keys[] = {
        {"model", "Model"}, {"train", "Training data"}, {"dev", "Evaluation data"},
        {"options", "Options"}, {"hardware", "Hardware"}, {"started", "Started"},
    };
    sb_puts(b, "<table class=\"summary\">\n");
    row(b, "Run", r->dir);
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const char *x = info_get(r, keys[i].key);
        row(b, keys[i].label, x ? x : "not recorded");
    }
    double dur = max_finite(s->elapsed, s->n);
    /* without elapsed_s, the monitor's span (its time column is rescaled, so read unix_time again) */
    if (!isfinite(dur) && r->monitor.loaded) {
        double *t = column(&r->monitor, "unix_time");
        double a = NAN, z = NAN;
        for (size_t i = 0; t && i < s->nm; i++)
            if (isfinite(t[i])) {
                if (!isfinite(a)) a = t[i];
                z = t[i];
            }
        dur = z - a;
        free(t);
    }
    fmt_duration(d, sizeof d, dur);
    row(b, "Duration", d);
    double last_step = last_finite(s->step, s->n), last_epoch = last_finite(s->epoch, s->n);
    if (isfinite(last_step)) {
        if (isfinite(last_epoch)) snprintf(v, sizeof v, "%.0f (epoch %.2f)", last_step, last_epoch);
        else snprintf(v, sizeof v, "%.0f", last_step);
    } else {
        snprintf(v, sizeof v, "none logged");
    }
    row(b, "Steps", v);
    /* the mean of the last ten logged losses: one step's loss is noisy */
    double sum = 0;
    int k = 0;
    for (size_t i = s->n; s->loss && i-- > 0 && k < 10;)
        if (isfinite(s->loss[i])) {
            sum += s->loss[i];
            k++;
        }
    if (k) snprintf(v, sizeof v, "%.4f (mean of the last %d logged)", sum / k, k);
    else snprintf(v, sizeof v, "none logged");
    row(b, "Final loss", v);
    size_t best = (size_t)-1;
    for (size_t i = 0; s->f1 && i < s->ne; i++)
        if (isfinite(s->f1[i]) && (best == (size_t)-1 || s->f1[i] > s->f1[best])) best = i;
    if (best != (size_t)-1) {
        double em = s->em ? s->em[best] : NAN;
        snprintf(v, sizeof v, "%.2f (EM %.2f) at step %.0f; %zu evaluation(s)", s->f1[best], em, s->estep[best],
                 count_finite(s->f1, s->ne));
    } else {
        snprintf(v, sizeof v, "no evaluation recorded");
    }
    row(b, "Best F1", v);
    double med = median_finite(s->eps, s->n);
    if (isfinite(med)) snprintf(v, sizeof v, "%.2f examples/s (median)", med);
    else snprintf(v, sizeof v, "not logged");
    row(b, "Throughput", v);
    char latest[256];
    int nck = count_checkpoints(r->dir, latest, sizeof latest);
    if (nck) snprintf(v, sizeof v, "%d (latest %s)", nck, latest);
    else snprintf(v, sizeof v, "none");
    row(b, "Checkpoints", v);
    const char *sk = info_get(r, "skipped_steps");
    double skc = max_finite(s->skipped, s->n);
    if (sk) snprintf(v, sizeof v, "%s", sk);
    else if (isfinite(skc)) snprintf(v, sizeof v, "%.0f", skc);
    else snprintf(v, sizeof v, "none recorded");
    row(b, "Skipped steps", v);
    const char *res = info_get(r, "resumes");
    row(b, "Resumed", res ? res : "0");
    long rs = count_restarts(r->dir);
    snprintf(v, sizeof v, "%ld", rs < 0 ? 0 : rs);
    row(b, "Restarts (supervisor)", v);
    if (count_finite(s->util, s->nm) || count_finite(s->mused, s->nm)) {
        int thr_col = r->monitor.loaded ? csv_col(&r->monitor.t, "throttle") : -1;
        size_t nthr = 0, nknown = 0;
        for (size_t i = 0; thr_col >= 0 && i < s->nm; i++) {
            const char *c = csv_cell(&r->monitor.t, i, thr_col);
            if (!*c) continue;
            nknown++;
            nthr += strcmp(c, "none") && strcmp(c, "idle");
        }
        snprintf(v, sizeof v, "mean utilisation %.0f%%, peak memory %.1f / %.1f GiB, max %.0f\xc2\xb0" "C, throttled in %.0f%% of samples",
                 mean_finite(s->util, s->nm), max_finite(s->mused, s->nm), max_finite(s->mtotal, s->nm),
                 max_finite(s->temp, s->nm), nknown ? 100.0 * (double)nthr / (double)nknown : 0.0);
    } else {
        snprintf(v, sizeof v, "no GPU readings");
    }
    row(b, "GPU", v);
    if (count_finite(s->cpu, s->nm) || count_finite(s->rss, s->nm))
        snprintf(v, sizeof v, "mean %.0f%% (100%% = one core), peak RSS %.2f GiB", mean_finite(s->cpu, s->nm),
                 max_finite(s->rss, s->nm));
    else snprintf(v, sizeof v, "no readings");
    row(b, "CPU", v);
    /* the other info keys, as they are */
    if (r->info.loaded) {
        int kc = csv_col(&r->info.t, "key"), vc = csv_col(&r->info.t, "value");
        for (size_t i = 0; kc >= 0 && vc >= 0 && i < r->info.t.nrows; i++) {
            const char *key = csv_cell(&r->info.t, i, kc);
            int known = !strcmp(key, "skipped_steps") || !strcmp(key, "resumes");
            for (size_t j = 0; j < sizeof keys / sizeof keys[0]; j++) known |= !strcmp(key, keys[j].key);
            if (!known && *key) row(b, key, csv_cell(&r->info.t, i, vc));
        }
    }
    sb_puts(b, "</table>\n");
}

static const char css[] =
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

int report_render(const char *run_dir, sbuf *html)
{
    if (!path_is_dir(run_dir)) return err_set(ERR_INPUT, "report: %s is not a run directory", run_dir);
    report_ctx r;
    memset(&r, 0, sizeof r);
    r.dir = run_dir;
    load(&r, "metrics.csv", &r.metrics);
    load(&r, "eval.csv", &r.eval);
    load(&r, "monitor.csv", &r.monitor);
    load(&r, "info.csv", &r.info);
    int rc = 0;
    if (!r.metrics.loaded && !r.monitor.loaded) {
        rc = err_set(ERR_INPUT, "report: %s has neither a readable metrics.csv nor monitor.csv%s%s%s", run_dir,
                     r.first_err[0] ? " (" : "", r.first_err, r.first_err[0] ? ")" : "");
        goto done;
    }
    series s;
    collect(&r, &s);
    draw_charts(&r, &s);

    char when[64];
    time_t now = time(NULL);
    struct tm tmv;
    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S %z", localtime_r(&now, &tmv));
    sb_puts(html, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>bertc run report: ");
    sb_html(html, run_dir);
    sb_printf(html, "</title>\n<style>%s</style>\n</head>\n<body>\n<h1>bertc run report</h1>\n<div class=\"sub\">", css);
    sb_html(html, run_dir);
    sb_printf(html, " &middot; generated %s by bertc %s</div>\n<h2>Summary</h2>\n", when, BERTC_VERSION);
    summary(&r, &s, html);
    if (r.notes.n) {
        sb_puts(html, "<h2>Notes</h2>\n<ul class=\"notes\">\n");
        sb_puts(html, r.notes.p);
        sb_puts(html, "</ul>\n");
    }
    sb_printf(html, "<h2>Charts</h2>\n<div class=\"grid\">\n%s</div>\n", r.charts.p ? r.charts.p : "");
    if (r.empty.n) {
        sb_puts(html, "<h2>Not charted</h2>\n<ul class=\"empty\">\n");
        sb_puts(html, r.empty.p);
        sb_puts(html, "</ul>\n");
    }
    sb_puts(html, "</body>\n</html>\n");
    series_free(&s);
done:
    csv_free(&r.metrics.t);
    csv_free(&r.eval.t);
    csv_free(&r.monitor.t);
    csv_free(&r.info.t);
    sb_free(&r.notes);
    sb_free(&r.charts);
    sb_free(&r.empty);
    return rc;
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
