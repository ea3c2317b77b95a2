/* The trainer's observability handle (see obs.h): TensorBoard, the monitor,
 * info.csv and the report, none of which may stop a training run. */
#define _GNU_SOURCE
#include "obs/obs.h"
#include "core/clock.h"
#include "obs/csv.h"
#include "obs/devices.h"
#include "obs/monitor.h"
#include "obs/obs_http.h"
#include "obs/report.h"
#include "obs/tb.h"
#include "core/alloc.h"
#include "core/err.h"
#include "core/fileio.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct obs_run {
    char dir[4096];
    tb_writer *tb;
    int tb_warned;
    monitor *mon;
    char **keys, **values;
    int ninfo;
    obs_http *http;
    pthread_mutex_t live_lock; /* guards live (obs_set_mirror comes from another thread) */
    live_status live;
    double loss_ring[10];
    int nloss;
    int64_t total_recorded;
};

/* Under live_lock: stamps and hands the numbers to the page. */
static void live_publish_locked(obs_run *r)
{
    r->live.updated_unix = clock_unix_s();
    obs_http_publish(r->http, &r->live);
}

void obs_options_init(obs_options *o)
{
    memset(o, 0, sizeof *o);
    o->monitor_interval_s = 1.0;
    o->gpu_index = 0;
    o->tensorboard = 1;
    o->http_port = -1;
}

/* The obs_* calls happen next to the trainer's own error handling (a failed
 * run still refreshes its report and closes obs), so they must not replace
 * a pending error message with one of theirs. */
typedef struct {
    int code;
    char msg[1024];
} err_saved;

static void err_save(err_saved *s)
{
    s->code = err_code();
    snprintf(s->msg, sizeof s->msg, "%s", s->code ? err_msg() : "");
}

static void err_restore(const err_saved *s)
{
    if (s->code) err_set(s->code, "%s", s->msg);
    else err_clear();
}

static const char *info_find(obs_run *r, const char *key)
{
    for (int i = 0; i < r->ninfo; i++)
        if (!strcmp(r->keys[i], key)) return r->values[i];
    return NULL;
}

static void info_put(obs_run *r, const char *key, const char *value)
{
    for (int i = 0; i < r->ninfo; i++)
        if (!strcmp(r->keys[i], key)) {
            free(r->values[i]);
            r->values[i] = xstrdup(value);
            return;
        }
    r->keys = xrealloc(r->keys, sizeof(char *) * (size_t)(r->ninfo + 1));
    r->values = xrealloc(r->values, sizeof(char *) * (size_t)(r->ninfo + 1));
    r->keys[r->ninfo] = xstrdup(key);
    r->values[r->ninfo] = xstrdup(value);
    r->ninfo++;
}

static int info_save(obs_run *r)
{
    char path[4200], *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return err_set(ERR_RUNTIME, "info.csv: out of memory");
    fputs("key,value\n", f);
    for (int i = 0; i < r->ninfo; i++) {
        csv_put_cell(f, r->keys[i]);
        fputc(',', f);
        csv_put_cell(f, r->values[i]);
        fputc('\n', f);
    }
    fclose(f);
    int rc = file_write_atomic(path_join(path, sizeof path, r->dir, "info.csv"), text, len);
    free(text);
    return rc;
}

/* What an earlier process of this run recorded. A damaged file is replaced:
 * it only holds descriptions. */
static void info_load(obs_run *r)
{
    char path[4200];
    path_join(path, sizeof path, r->dir, "info.csv");
    if (!path_exists(path)) return;
    csv_table t;
    if (csv_read(path, &t) != 0) {
        log_warn("%s (rewriting it)", err_msg());
        err_clear();
        return;
    }
    int kc = csv_col(&t, "key"), vc = csv_col(&t, "value");
    for (size_t i = 0; kc >= 0 && vc >= 0 && i < t.nrows; i++)
        if (*csv_cell(&t, i, kc)) info_put(r, csv_cell(&t, i, kc), csv_cell(&t, i, vc));
    csv_free(&t);
}

static void tb_failed(obs_run *r)
{
    if (r->tb_warned) return;
    r->tb_warned = 1;
    log_warn("TensorBoard events stop here: %s", err_msg());
    err_clear();
}

int obs_open(obs_run **out, const char *run_dir, const obs_options *o)
{
    *out = NULL;
    if (mkdir_p(run_dir)) return err_wrap(ERR_RUNTIME, "obs_open");
    obs_run *r = xcalloc(1, sizeof *r);
    snprintf(r->dir, sizeof r->dir, "%s", run_dir);
    pthread_mutex_init(&r->live_lock, NULL);
    live_init(&r->live);
    snprintf(r->live.state, sizeof r->live.state, "starting");
    info_load(r);
    char buf[1024];
    if (!info_find(r, "started")) {
        time_t now = time(NULL);
        struct tm tmv;
        strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S %z", localtime_r(&now, &tmv));
        info_put(r, "started", buf);
    }
    const struct { const char *key, *value; } given[] = {
        {"model", o->model}, {"train", o->train_data}, {"dev", o->dev_data}, {"options", o->options},
        {"hardware", o->hardware},
    };
    for (size_t i = 0; i < sizeof given / sizeof given[0]; i++)
        if (given[i].value) info_put(r, given[i].key, given[i].value);
    if (!info_find(r, "hardware")) info_put(r, "hardware", devices_hardware_line(buf, sizeof buf));
    if (gethostname(buf, sizeof buf - 1) == 0) {
        buf[sizeof buf - 1] = 0;
        info_put(r, "host", buf);
    }
    info_put(r, "bertc", BERTC_VERSION);
    info_put(r, "state", "training"); /* obs_state says otherwise at the end; a killed run stays "training" */
    if (o->resume_step > 0) {
        const char *prev = info_find(r, "resumes");
        snprintf(buf, sizeof buf, "%ld", (prev ? atol(prev) : 0) + 1);
        info_put(r, "resumes", buf);
        snprintf(buf, sizeof buf, "%lld", (long long)o->resume_step);
        info_put(r, "last_resume_step", buf);
    }
    if (info_save(r)) {
        log_warn("%s", err_msg());
        err_clear();
    }

    char path[4200];
    if (o->tensorboard) {
        if (tb_open(&r->tb, path_join(path, sizeof path, r->dir, "tb")) != 0) {
            log_warn("no TensorBoard events: %s", err_msg());
            err_clear();
        } else if (o->resume_step > 0 && tb_session_start(r->tb, o->resume_step + 1) != 0) {
            tb_failed(r);
        }
    }
    if (o->monitor_interval_s > 0) {
        monitor_options mo = {o->monitor_interval_s, o->gpu_index, path_join(path, sizeof path, r->dir, "monitor.csv"),
                              r->tb, o->resume_step > 0 ? o->resume_step : 0};
        if (monitor_start(&r->mon, &mo) != 0) {
            log_warn("no monitor: %s", err_msg());
            err_clear();
        } else if (!monitor_has_gpu(r->mon) && o->gpu_index >= 0) {
            log_info("monitor: %s", monitor_gpu_status(r->mon));
        }
    }
    if (o->http_port >= 0) {
        if (obs_http_start(&r->http, o->http_bind, o->http_port, r->dir, r->mon, o->http_api_key) != 0) {
            log_warn("%s; training goes on without the live page", err_msg());
            err_clear();
        } else {
            const char *b = o->http_bind && *o->http_bind ? o->http_bind : "127.0.0.1";
            int v6 = strchr(b, ':') != NULL;
            log_info("live page: http://%s%s%s:%d/ (also /api/status, /metrics)%s", v6 ? "[" : "", b, v6 ? "]" : "",
                     obs_http_port(r->http), o->http_api_key ? "; it needs the API key: open /?key=KEY" : "");
            obs_http_publish(r->http, &r->live);
        }
    }
    *out = r;
    return 0;
}

static void put(obs_run *r, int64_t step, const char *tag, double v)
{
    if (!r->tb || !isfinite(v)) return;
    if (tb_scalar(r->tb, step, tag, (float)v, 0) != 0) tb_failed(r);
}

void obs_step(obs_run *r, const obs_step_metrics *m)
{
    if (!r) return;
    err_saved e;
    err_save(&e);
    if (r->mon) monitor_set_step(r->mon, m->step);
    put(r, m->step, "train/loss", m->loss);
    put(r, m->step, "train/lr", m->lr);
    put(r, m->step, "train/grad_norm", m->grad_norm);
    put(r, m->step, "train/loss_scale", m->loss_scale);
    put(r, m->step, "train/examples_per_s", m->examples_per_s);
    put(r, m->step, "train/epoch", m->epoch);
    pthread_mutex_lock(&r->live_lock);
    live_status *l = &r->live;
    l->step = (double)m->step;
    l->epoch = m->epoch;
    l->loss = m->loss;
    l->lr = m->lr;
    l->grad_norm = m->grad_norm;
    l->loss_scale = m->loss_scale;
    l->examples_per_s = m->examples_per_s;
    if (isfinite(m->loss)) r->loss_ring[r->nloss++ % 10] = m->loss;
    int k = r->nloss < 10 ? r->nloss : 10;
    double sum = 0;
    for (int i = 0; i < k; i++) sum += r->loss_ring[i];
    l->loss_avg = k ? sum / k : NAN;
    if (strcmp(l->state, "training") != 0 && strcmp(l->state, "evaluating") != 0)
        snprintf(l->state, sizeof l->state, "training");
    live_publish_locked(r);
    pthread_mutex_unlock(&r->live_lock);
    err_restore(&e);
}

void obs_eval(obs_run *r, int64_t step, double exact_match, double f1)
{
    if (!r) return;
    err_saved e;
    err_save(&e);
    put(r, step, "eval/exact_match", exact_match);
    put(r, step, "eval/f1", f1);
    if (r->tb && tb_flush(r->tb) != 0) tb_failed(r);
    pthread_mutex_lock(&r->live_lock);
    live_status *l = &r->live;
    l->eval_step = (double)step;
    l->exact_match = exact_match;
    l->f1 = f1;
    if (isfinite(f1) && !(f1 <= l->best_f1)) {
        l->best_f1 = f1;
        l->best_step = (double)step;
    }
    live_publish_locked(r);
    pthread_mutex_unlock(&r->live_lock);
    err_restore(&e);
}

void obs_live_progress(obs_run *r, int64_t step, int64_t total, double elapsed_s, double eta_s)
{
    if (!r) return;
    pthread_mutex_lock(&r->live_lock);
    r->live.step = (double)step;
    r->live.total = (double)total;
    r->live.elapsed_s = elapsed_s;
    r->live.eta_s = eta_s;
    live_publish_locked(r);
    pthread_mutex_unlock(&r->live_lock);
    if (total != r->total_recorded) {
        r->total_recorded = total;
        char v[32];
        snprintf(v, sizeof v, "%lld", (long long)total);
        obs_set_info(r, "total_steps", v);
    }
}

void obs_checkpoint(obs_run *r, int64_t step, const char *dir)
{
    if (!r) return;
    pthread_mutex_lock(&r->live_lock);
    r->live.ckpt_step = (double)step;
    snprintf(r->live.ckpt, sizeof r->live.ckpt, "%s", dir);
    live_publish_locked(r);
    pthread_mutex_unlock(&r->live_lock);
}

/* Copies text into a string field of r->live and publishes it. */
static void live_set_text(obs_run *r, char *field, size_t cap, const char *text)
{
    pthread_mutex_lock(&r->live_lock);
    snprintf(field, cap, "%s", text);
    live_publish_locked(r);
    pthread_mutex_unlock(&r->live_lock);
}

void obs_state(obs_run *r, const char *state)
{
    if (!r) return;
    live_set_text(r, r->live.state, sizeof r->live.state, state);
    obs_set_info(r, "state", state);
}

void obs_set_mirror(obs_run *r, const char *text)
{
    if (r) live_set_text(r, r->live.mirror, sizeof r->live.mirror, text);
}

int obs_http_port_of(obs_run *r) { return r ? obs_http_port(r->http) : 0; }

void obs_scalar(obs_run *r, int64_t step, const char *tag, double value)
{
    if (!r) return;
    err_saved e;
    err_save(&e);
    put(r, step, tag, value);
    err_restore(&e);
}

void obs_progress(obs_run *r, char *line, size_t cap)
{
    if (cap) line[0] = 0;
    if (r && r->mon) monitor_latest(r->mon, line, cap);
}

int obs_set_info(obs_run *r, const char *key, const char *value)
{
    if (!r) return 0;
    err_saved e;
    err_save(&e);
    info_put(r, key, value);
    int rc = info_save(r);
    if (rc) log_warn("%s", err_msg());
    err_restore(&e);
    return rc;
}

int obs_report(obs_run *r)
{
    if (!r) return 0;
    err_saved e;
    err_save(&e);
    if (r->tb && tb_flush(r->tb) != 0) tb_failed(r);
    int rc = report_write(r->dir, NULL);
    if (rc) log_warn("report.html not refreshed: %s", err_msg());
    err_restore(&e);
    return rc;
}

void obs_close(obs_run *r)
{
    if (!r) return;
    err_saved e;
    err_save(&e);
    obs_http_stop(r->http); /* first: its threads read the monitor */
    monitor_stop(r->mon);   /* then: the monitor thread writes to r->tb */
    pthread_mutex_destroy(&r->live_lock);
    if (r->tb && tb_close(r->tb) != 0) tb_failed(r);
    for (int i = 0; i < r->ninfo; i++) {
        free(r->keys[i]);
        free(r->values[i]);
    }
    free(r->keys);
    free(r->values);
    free(r);
    err_restore(&e);
}
