/* The monitor thread (see monitor.h). */
#define _GNU_SOURCE
#include "obs/monitor.h"
#include "core/alloc.h"
#include "core/clock.h"
#include "core/err.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char monitor_header[] =
    "unix_time,elapsed_s,step,gpu_util_pct,gpu_mem_util_pct,gpu_mem_used_mib,gpu_mem_total_mib,gpu_temp_c,"
    "sm_clock_mhz,mem_clock_mhz,power_w,power_limit_w,throttle,cpu_pct,rss_mib,mem_avail_mib\n";

enum { MAX_WARNED = 16 };

struct monitor {
    monitor_options o;
    FILE *csv;
    int csv_failed;
    nvml_lib *nv;
    char gpu_status[256];
    pthread_t thread;
    int thread_started;
    pthread_mutex_t lock;        /* guards stop and the published sample (g, p, have, nsamples) */
    pthread_mutex_t sample_lock; /* serialises sampling: NVML, /proc, the CSV */
    pthread_cond_t wake;
    int stop;
    _Atomic int64_t step;
    int64_t nsamples;
    double t0;
    proc_cpu_state pst;
    nvml_sample g;
    proc_sample p;
    int have;
    char warned[MAX_WARNED][96];
    int nwarned;
};

/* Logs a driver error the first time it is seen (by its query name), so a
 * board without a power sensor does not print a line per second. */
static void warn_once(monitor *m, const char *msg)
{
    char key[96];
    snprintf(key, sizeof key, "%.*s", (int)strcspn(msg, ":"), msg);
    for (int i = 0; i < m->nwarned; i++)
        if (!strcmp(m->warned[i], key)) return;
    if (m->nwarned < MAX_WARNED) snprintf(m->warned[m->nwarned++], sizeof m->warned[0], "%s", key);
    log_warn("monitor: GPU %d: %s (shown once; the value is left empty in monitor.csv)", m->o.gpu_index, msg);
}

/* Appends a number or, for NaN, nothing: an empty CSV cell. */
static size_t put_num(char *b, size_t cap, size_t n, double v, int decimals, int comma)
{
    if (n >= cap) return n;
    int w = isfinite(v) ? snprintf(b + n, cap - n, "%.*f", decimals, v) : 0;
    if (w < 0) w = 0;
    n += (size_t)w;
    if (comma && n < cap) b[n++] = ',';
    return n;
}

static int open_csv(monitor *m, const char *path)
{
    /* Append when the file is ours (a resumed run); a file with another
     * header is moved aside rather than mixed with rows it cannot hold. */
    FILE *old = fopen(path, "r");
    if (old) {
        char first[sizeof monitor_header + 8] = "";
        int same = fgets(first, sizeof first, old) && !strcmp(first, monitor_header);
        fclose(old);
        if (!same) {
            char aside[4200];
            snprintf(aside, sizeof aside, "%s.old", path);
            if (rename(path, aside) != 0)
                return err_set(ERR_RUNTIME, "monitor: %s has another header and cannot be moved aside: %s", path,
                               strerror(errno));
            log_warn("monitor: %s had another header; moved to %s", path, aside);
        } else {
            m->csv = fopen(path, "a");
            if (!m->csv) return err_set(ERR_RUNTIME, "monitor: %s: %s", path, strerror(errno));
            return 0;
        }
    }
    m->csv = fopen(path, "w");
    if (!m->csv) return err_set(ERR_RUNTIME, "monitor: %s: %s", path, strerror(errno));
    if (fputs(monitor_header, m->csv) == EOF || fflush(m->csv) != 0) {
        fclose(m->csv);
        m->csv = NULL;
        return err_set(ERR_RUNTIME, "monitor: %s: %s", path, strerror(errno));
    }
    return 0;
}

static void write_tb(monitor *m, const nvml_sample *g, const proc_sample *p, int64_t step, double t)
{
    tb_writer *tb = m->o.tb;
    const double gib = 1073741824.0;
    const struct { const char *tag; double v; } vals[] = {
        {"gpu/util_pct", g->util_pct},          {"gpu/mem_used_gib", g->mem_used / gib},
        {"gpu/temp_c", g->temp_c},              {"gpu/power_w", g->power_w},
        {"gpu/sm_clock_mhz", g->sm_clock_mhz},  {"cpu/process_pct", p->cpu_pct},
        {"cpu/rss_gib", p->rss / gib},          {"cpu/mem_available_gib", p->mem_avail / gib},
    };
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++)
        if (isfinite(vals[i].v) && tb_scalar(tb, step, vals[i].tag, (float)vals[i].v, t) != 0) return;
}

/* One sample; the caller holds m->sample_lock, not m->lock: a driver call
 * that hangs must not block the trainer's monitor_latest. */
static int sample_locked(monitor *m)
{
    nvml_sample g;
    memset(&g, 0, sizeof g);
    g.util_pct = g.mem_util_pct = g.mem_used = g.mem_total = g.temp_c = NAN;
    g.sm_clock_mhz = g.mem_clock_mhz = g.power_w = g.power_limit_w = NAN;
    if (m->nv) {
        if (nvml_device_sample(m->nv, m->o.gpu_index, &g) != 0) {
            snprintf(g.err, sizeof g.err, "%s", err_msg());
            g.nerr++;
        }
        if (g.err[0]) warn_once(m, g.err);
    }
    proc_sample p;
    proc_sample_read(&m->pst, &p);
    double t = clock_unix_s();
    int64_t step = atomic_load(&m->step);

    if (m->csv && !m->csv_failed) {
        char line[512], thr[128] = "";
        const double mib = 1048576.0;
        if (g.throttle_ok) nvml_throttle_names(g.throttle, thr, sizeof thr);
        size_t n = (size_t)snprintf(line, sizeof line, "%.3f,%.3f,%lld,", t, t - m->t0, (long long)step);
        n = put_num(line, sizeof line, n, g.util_pct, 0, 1);
        n = put_num(line, sizeof line, n, g.mem_util_pct, 0, 1);
        n = put_num(line, sizeof line, n, g.mem_used / mib, 1, 1);
        n = put_num(line, sizeof line, n, g.mem_total / mib, 1, 1);
        n = put_num(line, sizeof line, n, g.temp_c, 0, 1);
        n = put_num(line, sizeof line, n, g.sm_clock_mhz, 0, 1);
        n = put_num(line, sizeof line, n, g.mem_clock_mhz, 0, 1);
        n = put_num(line, sizeof line, n, g.power_w, 2, 1);
        n = put_num(line, sizeof line, n, g.power_limit_w, 2, 1);
        if (n < sizeof line) n += (size_t)snprintf(line + n, sizeof line - n, "%s,", thr);
        n = put_num(line, sizeof line, n, p.cpu_pct, 1, 1);
        n = put_num(line, sizeof line, n, p.rss / mib, 1, 1);
        n = put_num(line, sizeof line, n, p.mem_avail / mib, 1, 0);
        if (n < sizeof line - 1) {
            line[n++] = '\n';
            if (fwrite(line, 1, n, m->csv) != n || fflush(m->csv) != 0) {
                m->csv_failed = 1;
                log_warn("monitor: writing %s failed (%s); monitor.csv stops here", m->o.csv_path, strerror(errno));
            }
        }
    }
    if (m->o.tb) write_tb(m, &g, &p, step, t);
    pthread_mutex_lock(&m->lock);
    m->g = g;
    m->p = p;
    m->have = 1;
    m->nsamples++;
    pthread_mutex_unlock(&m->lock);
    return 0;
}

int monitor_sample_now(monitor *m)
{
    pthread_mutex_lock(&m->sample_lock);
    int rc = sample_locked(m);
    pthread_mutex_unlock(&m->sample_lock);
    return rc;
}

static void *monitor_main(void *arg)
{
    monitor *m = arg;
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    pthread_mutex_lock(&m->lock);
    while (!m->stop) {
        pthread_mutex_unlock(&m->lock);
        monitor_sample_now(m);
        pthread_mutex_lock(&m->lock);
        /* Deadlines advance by whole intervals so sampling does not drift;
         * missed ones (a slow driver, a suspended VM) are skipped, not made
         * up in a burst. */
        double iv = m->o.interval_s;
        long sec = (long)iv;
        long nsec = (long)((iv - (double)sec) * 1e9);
        next.tv_sec += sec;
        next.tv_nsec += nsec;
        if (next.tv_nsec >= 1000000000L) {
            next.tv_sec++;
            next.tv_nsec -= 1000000000L;
        }
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec > next.tv_sec || (now.tv_sec == next.tv_sec && now.tv_nsec > next.tv_nsec)) next = now;
        while (!m->stop) {
            int r = pthread_cond_timedwait(&m->wake, &m->lock, &next);
            if (r == ETIMEDOUT) break;
        }
    }
    pthread_mutex_unlock(&m->lock);
    return NULL;
}

int monitor_start(monitor **out, const monitor_options *o)
{
    *out = NULL;
    if (!(o->interval_s >= 0) || o->interval_s > 86400)
        return err_set(ERR_INPUT, "monitor: interval %g s is out of range [0, 86400]", o->interval_s);
    if (o->interval_s > 0 && o->interval_s < 0.01)
        return err_set(ERR_INPUT, "monitor: interval %g s is below the 0.01 s minimum", o->interval_s);
    monitor *m = xcalloc(1, sizeof *m);
    m->o = *o;
    atomic_store(&m->step, o->step);
    m->t0 = clock_unix_s();
    pthread_mutex_init(&m->lock, NULL);
    pthread_mutex_init(&m->sample_lock, NULL);
    clock_cond_init(&m->wake);
    proc_sample p;
    proc_sample_read(&m->pst, &p); /* primes the CPU-use rate */

    if (o->gpu_index < 0) {
        snprintf(m->gpu_status, sizeof m->gpu_status, "GPU monitoring off");
    } else if (nvml_open(&m->nv) != 0) {
        snprintf(m->gpu_status, sizeof m->gpu_status, "no GPU readings: %s", err_msg());
    } else {
        int count = 0;
        if (nvml_device_count(m->nv, &count) != 0)
            snprintf(m->gpu_status, sizeof m->gpu_status, "no GPU readings: %s", err_msg());
        else if (o->gpu_index >= count)
            snprintf(m->gpu_status, sizeof m->gpu_status, "no GPU readings: NVML sees %d GPU(s), none with index %d",
                     count, o->gpu_index);
        if (m->gpu_status[0]) {
            nvml_close(m->nv);
            m->nv = NULL;
        }
    }
    err_clear(); /* a missing GPU is a state, not an error of monitor_start */
    m->o.csv_path = o->csv_path ? xstrdup(o->csv_path) : NULL;
    if (m->o.csv_path && open_csv(m, m->o.csv_path) != 0) {
        int rc = err_code();
        monitor_stop(m);
        return rc;
    }
    if (o->interval_s > 0) {
        /* Signals go to the trainer's thread, which owns the SIGINT logic. */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        int r = pthread_create(&m->thread, NULL, monitor_main, m);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (r != 0) {
            monitor_stop(m);
            return err_set(ERR_RUNTIME, "monitor: cannot start the thread: %s", strerror(r));
        }
        m->thread_started = 1;
    }
    *out = m;
    return 0;
}

void monitor_stop(monitor *m)
{
    if (!m) return;
    if (m->thread_started) {
        pthread_mutex_lock(&m->lock);
        m->stop = 1;
        pthread_cond_signal(&m->wake);
        pthread_mutex_unlock(&m->lock);
        pthread_join(m->thread, NULL);
    }
    if (m->csv) fclose(m->csv);
    if (m->nv) nvml_close(m->nv);
    free((char *)m->o.csv_path);
    pthread_cond_destroy(&m->wake);
    pthread_mutex_destroy(&m->lock);
    pthread_mutex_destroy(&m->sample_lock);
    free(m);
}

void monitor_set_step(monitor *m, int64_t step) { atomic_store(&m->step, step); }

void monitor_latest(monitor *m, char *line, size_t cap)
{
    if (!cap) return;
    line[0] = 0;
    pthread_mutex_lock(&m->lock);
    nvml_sample g = m->g;
    proc_sample p = m->p;
    int have = m->have;
    pthread_mutex_unlock(&m->lock);
    if (!have) return;
    const double gib = 1073741824.0;
    size_t n = 0;
    int w;
#define ADD(...)                                                      \
    do {                                                              \
        if (n < cap && (w = snprintf(line + n, cap - n, __VA_ARGS__)) > 0) \
            n = n + (size_t)w < cap ? n + (size_t)w : cap - 1;        \
    } while (0)
    if (m->nv) {
        ADD("GPU");
        if (isfinite(g.util_pct)) ADD(" %.0f%%", g.util_pct);
        if (isfinite(g.mem_used) && isfinite(g.mem_total)) ADD(" %.1f/%.1f GiB", g.mem_used / gib, g.mem_total / gib);
        if (isfinite(g.temp_c)) ADD(" %.0f\xc2\xb0" "C", g.temp_c);
        if (!isfinite(g.util_pct) && !isfinite(g.mem_used) && !isfinite(g.temp_c)) ADD(" n/a");
        ADD(" | ");
    }
    ADD("CPU");
    if (isfinite(p.cpu_pct)) ADD(" %.0f%%", p.cpu_pct);
    if (isfinite(p.rss)) ADD(" RSS %.1f GiB", p.rss / gib);
#undef ADD
}

int monitor_has_gpu(const monitor *m) { return m->nv != NULL; }
const char *monitor_gpu_status(const monitor *m) { return m->gpu_status; }

int64_t monitor_samples(const monitor *m)
{
    pthread_mutex_lock((pthread_mutex_t *)&m->lock);
    int64_t n = m->nsamples;
    pthread_mutex_unlock((pthread_mutex_t *)&m->lock);
    return n;
}

void monitor_last_sample(monitor *m, nvml_sample *g, proc_sample *p)
{
    pthread_mutex_lock(&m->lock);
    if (g) *g = m->g;
    if (p) *p = m->p;
    pthread_mutex_unlock(&m->lock);
}
