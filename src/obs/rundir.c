/* Reading a run dir's files (see rundir.h). */
#define _GNU_SOURCE
#include "obs/rundir.h"
#include "core/alloc.h"
#include "core/err.h"
#include "core/fileio.h"

#include <dirent.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Loads dir/name when it exists; a file that cannot be parsed becomes a
 * note, so one damaged file never costs the whole view. */
static void load(rundir *r, const char *name, rundir_table *s)
{
    char path[4096];
    path_join(path, sizeof path, r->dir, name);
    if (!path_exists(path)) return;
    if (csv_read(path, &s->t) != 0) {
        if (!r->first_err[0]) snprintf(r->first_err, sizeof r->first_err, "%s", err_msg());
        sb_printf(&r->notes, "%s\n", err_msg());
        err_clear();
        return;
    }
    s->loaded = 1;
    if (s->t.bad_rows)
        sb_printf(&r->notes, "%s: %zu row(s) with the wrong number of cells skipped (first at line %zu)\n", name,
                  s->t.bad_rows, s->t.first_bad_line);
}

double *rundir_column(const rundir_table *s, const char *name)
{
    if (!s->loaded) return NULL;
    int c = csv_col(&s->t, name);
    if (c < 0) return NULL;
    double *v = xmalloc(sizeof(double) * (s->t.nrows ? s->t.nrows : 1));
    for (size_t i = 0; i < s->t.nrows; i++) v[i] = csv_num(&s->t, i, c);
    return v;
}

static double *column_any(const rundir_table *s, const char *const *names)
{
    for (; *names; names++) {
        double *v = rundir_column(s, *names);
        if (v) return v;
    }
    return NULL;
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

size_t rundir_count(const double *v, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; v && i < n; i++) k += isfinite(v[i]) != 0;
    return k;
}

double rundir_last(const double *v, size_t n)
{
    for (size_t i = n; v && i-- > 0;)
        if (isfinite(v[i])) return v[i];
    return NAN;
}

double rundir_max(const double *v, size_t n)
{
    double m = NAN;
    for (size_t i = 0; v && i < n; i++)
        if (isfinite(v[i]) && !(v[i] <= m)) m = v[i];
    return m;
}

double rundir_tail_mean(const double *v, size_t n, int want, int *count)
{
    double sum = 0;
    int k = 0;
    for (size_t j = n; v && j-- > 0 && k < want;)
        if (isfinite(v[j])) {
            sum += v[j];
            k++;
        }
    *count = k;
    return k ? sum / k : 0;
}

double rundir_mean(const double *v, size_t n)
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

double rundir_median(const double *v, size_t n)
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

const char *rundir_info(const rundir *r, const char *key)
{
    const rundir_table *s = &r->info;
    if (!s->loaded) return NULL;
    int kc = csv_col(&s->t, "key"), vc = csv_col(&s->t, "value");
    if (kc < 0 || vc < 0) return NULL;
    const char *found = NULL;
    for (size_t i = 0; i < s->t.nrows; i++) /* the last one wins */
        if (!strcmp(csv_cell(&s->t, i, kc), key)) found = csv_cell(&s->t, i, vc);
    return found && *found ? found : NULL;
}

int rundir_checkpoints(const char *dir, char *latest, size_t cap)
{
    char path[4096];
    path_join(path, sizeof path, dir, "checkpoints");
    if (cap) latest[0] = 0;
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
        if (cap && strcmp(e->d_name, latest) > 0) snprintf(latest, cap, "%s", e->d_name);
    }
    closedir(d);
    return n;
}

long rundir_restarts(const char *dir)
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

/* The columns read by name alone: of metrics.csv (table 0) or of
 * monitor.csv (table 1), each into its rundir field. */
typedef struct {
    int table;
    size_t off;
    const char *name;
} rundir_col;

#define RC(table, field, name) {table, offsetof(rundir, field), name}
static const rundir_col plain_cols[] = {
    RC(0, epoch, "epoch"), RC(0, loss, "loss"), RC(0, lr, "lr"), RC(0, gnorm, "grad_norm"),
    RC(0, scale, "loss_scale"), RC(0, eps, "examples_per_s"), RC(0, elapsed, "elapsed_s"),
    RC(1, util, "gpu_util_pct"), RC(1, mutil, "gpu_mem_util_pct"), RC(1, mused, "gpu_mem_used_mib"),
    RC(1, mtotal, "gpu_mem_total_mib"), RC(1, temp, "gpu_temp_c"), RC(1, power, "power_w"),
    RC(1, plimit, "power_limit_w"), RC(1, cpu, "cpu_pct"), RC(1, rss, "rss_mib"), RC(1, avail, "mem_avail_mib"),
};
#undef RC

static void plain_columns(rundir *r, int table, const rundir_table *t)
{
    for (size_t k = 0; k < sizeof plain_cols / sizeof plain_cols[0]; k++)
        if (plain_cols[k].table == table)
            *(double **)((char *)r + plain_cols[k].off) = rundir_column(t, plain_cols[k].name);
}

static void collect(rundir *r)
{
    static const char *const em_names[] = {"exact_match", "em", "EM", "exact", NULL};
    static const char *const f1_names[] = {"f1", "F1", NULL};
    static const char *const skip_names[] = {"skipped_steps", "skipped", NULL};
    if (r->metrics.loaded) {
        r->n = r->metrics.t.nrows;
        r->step = rundir_column(&r->metrics, "step");
        if (!r->step) r->step = index_column(r->n);
        plain_columns(r, 0, &r->metrics);
        r->skipped = column_any(&r->metrics, skip_names);
    }
    /* evaluation: eval.csv, or the evaluation columns of metrics.csv */
    rundir_table *ev = r->eval.loaded ? &r->eval : &r->metrics;
    if (ev->loaded) {
        double *f1 = column_any(ev, f1_names);
        if (f1) {
            r->ne = ev->t.nrows;
            r->f1 = f1;
            r->em = column_any(ev, em_names);
            r->estep = rundir_column(ev, "step");
            if (!r->estep) r->estep = index_column(r->ne);
        }
    }
    if (r->monitor.loaded) {
        r->nm = r->monitor.t.nrows;
        r->unix_t = rundir_column(&r->monitor, "unix_time");
        r->t = rundir_column(&r->monitor, "unix_time");
        if (!r->t) r->t = rundir_column(&r->monitor, "elapsed_s");
        if (!r->t) r->t = index_column(r->nm);
        plain_columns(r, 1, &r->monitor);
        scale_column(r->mused, r->nm, 1.0 / 1024);
        scale_column(r->mtotal, r->nm, 1.0 / 1024);
        scale_column(r->rss, r->nm, 1.0 / 1024);
        scale_column(r->avail, r->nm, 1.0 / 1024);
        /* time since the first sample, in a unit that suits the span */
        double t0 = NAN, t1 = NAN;
        for (size_t i = 0; i < r->nm; i++)
            if (isfinite(r->t[i])) {
                if (!isfinite(t0)) t0 = r->t[i];
                t1 = r->t[i];
            }
        double span = t1 - t0, k = 1;
        r->tunit = "time since start (s)";
        if (span > 3 * 3600) {
            k = 1.0 / 3600;
            r->tunit = "time since start (h)";
        } else if (span > 180) {
            k = 1.0 / 60;
            r->tunit = "time since start (min)";
        }
        for (size_t i = 0; i < r->nm; i++) r->t[i] = (r->t[i] - t0) * k;
    }
}

int rundir_load(rundir *r, const char *dir)
{
    memset(r, 0, sizeof *r);
    r->dir = dir;
    if (!path_is_dir(dir)) return err_set(ERR_INPUT, "%s is not a run directory", dir);
    load(r, "metrics.csv", &r->metrics);
    load(r, "eval.csv", &r->eval);
    load(r, "monitor.csv", &r->monitor);
    load(r, "info.csv", &r->info);
    collect(r);
    return 0;
}

void rundir_free(rundir *r)
{
    double **all[] = {&r->step, &r->epoch, &r->loss, &r->lr, &r->gnorm, &r->scale, &r->eps, &r->elapsed,
                      &r->skipped, &r->estep, &r->em, &r->f1, &r->t, &r->unix_t, &r->util, &r->mutil, &r->mused,
                      &r->mtotal, &r->temp, &r->power, &r->plimit, &r->cpu, &r->rss, &r->avail};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        free(*all[i]);
        *all[i] = NULL;
    }
    csv_free(&r->metrics.t);
    csv_free(&r->eval.t);
    csv_free(&r->monitor.t);
    csv_free(&r->info.t);
    sb_free(&r->notes);
}
