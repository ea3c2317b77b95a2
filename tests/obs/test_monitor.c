/* The monitor and NVML loading, with the fake NVML of tests/fakenvml so the
 * GPU code runs without a GPU: normal readings, a driver that fails some
 * queries, a driver that is not loaded, no library at all, a library that is
 * not NVML. Then the monitor thread, monitor.csv, the progress line, the
 * cost of one sample, and the obs_* API end to end as the trainer calls it
 * (BERTC_KEEP_RUN=DIR keeps that run dir for tools/tb_check.py). */
#define _GNU_SOURCE
#include "testutil.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/fileio.h"
#include "obs/csv.h"
#include "obs/monitor.h"
#include "obs/nvml_dl.h"
#include "obs/obs.h"

#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char fake_lib[1024];

static double thread_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* The build's fake NVML (tests/fakenvml/CMakeLists.txt), or one compiled
 * here when the build tree has none. */
static int find_fake_nvml(void)
{
    const char *build = getenv("BERTC_BUILD");
    snprintf(fake_lib, sizeof fake_lib, "%s/fakenvml/libnvidia-ml.so.1", build ? build : "build");
    if (access(fake_lib, R_OK) == 0) {
        printf("fake NVML: %s\n", fake_lib);
        return 0;
    }
    snprintf(fake_lib, sizeof fake_lib, "%s/libnvidia-ml.so.1", tu_tmpdir());
    char cmd[2048];
    const char *cc = getenv("CC");
    snprintf(cmd, sizeof cmd, "%s -shared -fPIC -O1 -o %s tests/fakenvml/fakenvml.c", cc && *cc ? cc : "cc", fake_lib);
    printf("fake NVML not in the build tree; compiling it: %s\n", cmd);
    return system(cmd) == 0 && access(fake_lib, R_OK) == 0 ? 0 : -1;
}

static void use_fake(const char *fail)
{
    setenv("BERTC_NVML_LIB", fake_lib, 1);
    unsetenv("FAKENVML_INIT");
    unsetenv("FAKENVML_DEVICES");
    if (fail) setenv("FAKENVML_FAIL", fail, 1);
    else unsetenv("FAKENVML_FAIL");
}

static void test_nvml(void)
{
    nvml_lib *nv;
    setenv("BERTC_NVML_LIB", "/nonexistent/libnvidia-ml.so.1", 1);
    int rc = nvml_open(&nv);
    printf("no library: rc %d: %s\n", rc, err_msg());
    CHECK(rc == ERR_RUNTIME && nv == NULL && strstr(err_msg(), "/nonexistent/libnvidia-ml.so.1"), "%s", err_msg());

    setenv("BERTC_NVML_LIB", "libm.so.6", 1);
    rc = nvml_open(&nv);
    printf("not NVML: rc %d: %s\n", rc, err_msg());
    CHECK(rc == ERR_RUNTIME && strstr(err_msg(), "nvmlInit"), "%s", err_msg());

    use_fake(NULL);
    setenv("FAKENVML_INIT", "9", 1);
    rc = nvml_open(&nv);
    printf("driver not loaded: rc %d: %s\n", rc, err_msg());
    CHECK(rc == ERR_RUNTIME && strstr(err_msg(), "Driver Not Loaded"), "%s", err_msg());

    use_fake(NULL);
    rc = nvml_open(&nv);
    CHECK(rc == 0, "fake NVML: %s", err_msg());
    if (rc) return;
    int count = -1;
    CHECK(nvml_device_count(nv, &count) == 0 && count == 1, "count %d", count);
    nvml_device_info info;
    CHECK(nvml_device_info_get(nv, 0, &info) == 0, "info: %s", err_msg());
    printf("GPU 0: %s cc %d.%d %.1f GiB limit %.0f W\n", info.name, info.cc_major, info.cc_minor,
           info.mem_total / 1073741824.0, info.power_limit_w);
    CHECK(!strcmp(info.name, "Fake Tesla T4") && info.cc_major == 7 && info.cc_minor == 5 &&
              info.mem_total == 15.0 * 1073741824.0 && info.power_limit_w == 70 && !info.err[0],
          "info %s %d.%d err '%s'", info.name, info.cc_major, info.cc_minor, info.err);
    nvml_sample s;
    CHECK(nvml_device_sample(nv, 0, &s) == 0, "sample");
    printf("sample: util %.0f%% mem %.0f/%.0f MiB %.0f C SM %.0f MHz mem %.0f MHz %.1f/%.1f W throttle %llx nerr %d\n",
           s.util_pct, s.mem_used / 1048576, s.mem_total / 1048576, s.temp_c, s.sm_clock_mhz, s.mem_clock_mhz,
           s.power_w, s.power_limit_w, (unsigned long long)s.throttle, s.nerr);
    CHECK(s.nerr == 0 && s.util_pct >= 0 && s.util_pct <= 100 && s.mem_used > 0 && s.mem_used <= s.mem_total &&
              s.temp_c >= 40 && s.temp_c < 70 && s.sm_clock_mhz == 1590 && s.mem_clock_mhz == 5000 &&
              s.power_w >= 30 && s.power_limit_w == 70 && s.throttle_ok,
          "sample values");
    char drv[96];
    int cuda;
    nvml_driver_versions(nv, drv, sizeof drv, &cuda);
    CHECK(!strcmp(drv, "535.104.05") && cuda == 12020, "driver %s cuda %d", drv, cuda);
    CHECK(nvml_device_sample(nv, 1, &s) == ERR_RUNTIME, "GPU 1 does not exist");
    nvml_close(nv);

    /* a driver that fails some queries: the others still read */
    use_fake("temperature,power=3,throttle=15");
    CHECK(nvml_open(&nv) == 0, "open");
    CHECK(nvml_device_sample(nv, 0, &s) == 0, "sample with failures");
    printf("failing queries: nerr %d, first '%s'\n", s.nerr, s.err);
    CHECK(s.nerr == 3 && isnan(s.temp_c) && isnan(s.power_w) && !s.throttle_ok && isfinite(s.util_pct) &&
              isfinite(s.mem_used) && isfinite(s.power_limit_w) && strstr(s.err, "temperature") &&
              strstr(s.err, "999"),
          "nerr %d err %s", s.nerr, s.err);
    nvml_close(nv);
    use_fake("handle=15");
    CHECK(nvml_open(&nv) == 0, "open");
    rc = nvml_device_sample(nv, 0, &s);
    printf("lost GPU: rc %d: %s\n", rc, err_msg());
    CHECK(rc == ERR_RUNTIME && strstr(err_msg(), "GPU is lost"), "%s", err_msg());
    CHECK(nvml_device_info_get(nv, 0, &info) == ERR_RUNTIME, "info of a lost GPU");
    nvml_close(nv);
    use_fake(NULL);
    setenv("FAKENVML_DEVICES", "3", 1);
    CHECK(nvml_open(&nv) == 0 && nvml_device_count(nv, &count) == 0 && count == 3, "three GPUs: %d", count);
    CHECK(nvml_device_sample(nv, 2, &s) == 0 && nvml_device_sample(nv, 3, &s) == ERR_RUNTIME, "index 2 ok, 3 not");
    nvml_close(nv);

    char b[128];
    CHECK(!strcmp(nvml_throttle_names(0, b, sizeof b), "none"), "%s", b);
    CHECK(!strcmp(nvml_throttle_names(0x44, b, sizeof b), "sw_power_cap+hw_thermal"), "%s", b);
    CHECK(!strcmp(nvml_throttle_names(0x1ull << 40 | 1, b, sizeof b), "idle+0x10000000000"), "%s", b);
    nvml_throttle_names(0x1ff, b, 20);
    CHECK(strlen(b) < 20, "truncated safely: %s", b);
}

static void read_csv(const char *path, csv_table *t)
{
    CHECK(csv_read(path, t) == 0, "csv_read %s: %s", path, err_msg());
}

/* csv = TMPDIR/name, with the fake NVML of use_fake(fail). */
static void fake_csv(char *csv, size_t cap, const char *name, const char *fail)
{
    snprintf(csv, cap, "%s/%s", tu_tmpdir(), name);
    use_fake(fail);
}

/* Samples taken by hand: columns, values, the progress line. */
static void test_monitor_samples(void)
{
    char csv[600];
    fake_csv(csv, sizeof csv, "mon1.csv", NULL);
    monitor *m;
    monitor_options o = {0, 0, csv, NULL, 7};
    CHECK(monitor_start(&m, &o) == 0, "monitor_start: %s", err_msg());
    if (!m) return;
    CHECK(monitor_has_gpu(m), "GPU seen: %s", monitor_gpu_status(m));
    char line[160];
    monitor_latest(m, line, sizeof line);
    CHECK(line[0] == 0, "no line before a sample: '%s'", line);
    for (int i = 0; i < 5; i++) {
        monitor_set_step(m, 100 + i);
        CHECK(monitor_sample_now(m) == 0, "sample");
    }
    monitor_latest(m, line, sizeof line);
    printf("progress line: %s\n", line);
    CHECK(!strncmp(line, "GPU ", 4) && strstr(line, "/15.0 GiB") && strstr(line, "\xc2\xb0" "C") &&
              strstr(line, "| CPU") && strstr(line, "RSS"),
          "line '%s'", line);
    char small[12];
    monitor_latest(m, small, sizeof small);
    CHECK(strlen(small) == 11, "truncated progress line '%s'", small);
    monitor_stop(m);
    csv_table t;
    read_csv(csv, &t);
    CHECK(t.ncols == 16 && t.nrows == 5 && t.bad_rows == 0, "cols %d rows %zu", t.ncols, t.nrows);
    int cu = csv_col(&t, "gpu_util_pct"), cs = csv_col(&t, "step"), ct = csv_col(&t, "throttle"),
        cr = csv_col(&t, "rss_mib"), cm = csv_col(&t, "gpu_mem_total_mib"), cp = csv_col(&t, "cpu_pct");
    for (size_t i = 0; i < t.nrows; i++) {
        CHECK(csv_num(&t, i, cs) == 100 + (double)i, "step %s", csv_cell(&t, i, cs));
        CHECK(csv_num(&t, i, cu) >= 0 && csv_num(&t, i, cu) <= 100, "util %s", csv_cell(&t, i, cu));
        CHECK(csv_num(&t, i, cm) == 15360, "mem total %s", csv_cell(&t, i, cm));
        const char *thr = csv_cell(&t, i, ct);
        CHECK(!strcmp(thr, "none") || !strcmp(thr, "sw_power_cap"), "throttle '%s'", thr);
        CHECK(csv_num(&t, i, cr) > 1 && csv_num(&t, i, cp) >= 0, "rss %s cpu %s", csv_cell(&t, i, cr), csv_cell(&t, i, cp));
    }
    csv_free(&t);

    /* reopened (a resumed run): appended under the same header */
    CHECK(monitor_start(&m, &o) == 0, "restart");
    monitor_sample_now(m);
    monitor_stop(m);
    read_csv(csv, &t);
    CHECK(t.nrows == 6 && t.bad_rows == 0, "appended: rows %zu", t.nrows);
    csv_free(&t);
    /* a foreign file is moved aside, not mixed */
    file_write_atomic(csv, "a,b\n1,2\n", 8);
    CHECK(monitor_start(&m, &o) == 0, "start over a foreign file");
    monitor_sample_now(m);
    monitor_stop(m);
    char old[700];
    snprintf(old, sizeof old, "%s.old", csv);
    read_csv(csv, &t);
    CHECK(t.nrows == 1 && t.ncols == 16 && path_exists(old), "new file with 1 row, old kept");
    csv_free(&t);
}

/* A driver failing some queries, and no driver at all: empty cells. */
static void test_monitor_degraded(void)
{
    char csv[600];
    fake_csv(csv, sizeof csv, "mon2.csv", "temperature,power=3");
    monitor *m;
    monitor_options o = {0, 0, csv, NULL, 0};
    CHECK(monitor_start(&m, &o) == 0, "start");
    for (int i = 0; i < 3; i++) monitor_sample_now(m);
    char line[160];
    monitor_latest(m, line, sizeof line);
    printf("progress line, failing temperature: %s\n", line);
    CHECK(!strncmp(line, "GPU ", 4) && !strstr(line, "\xc2\xb0" "C"), "'%s'", line);
    monitor_stop(m);
    csv_table t;
    read_csv(csv, &t);
    int ctemp = csv_col(&t, "gpu_temp_c"), cpow = csv_col(&t, "power_w"), cu = csv_col(&t, "gpu_util_pct");
    for (size_t i = 0; i < t.nrows; i++)
        CHECK(!*csv_cell(&t, i, ctemp) && !*csv_cell(&t, i, cpow) && isfinite(csv_num(&t, i, cu)),
              "row %zu: temp '%s' power '%s' util '%s'", i, csv_cell(&t, i, ctemp), csv_cell(&t, i, cpow),
              csv_cell(&t, i, cu));
    csv_free(&t);

    setenv("BERTC_NVML_LIB", "/nonexistent/libnvidia-ml.so.1", 1);
    snprintf(csv, sizeof csv, "%s/mon3.csv", tu_tmpdir());
    CHECK(monitor_start(&m, &o) == 0, "start without NVML");
    printf("without NVML: %s\n", monitor_gpu_status(m));
    CHECK(!monitor_has_gpu(m) && strstr(monitor_gpu_status(m), "cannot load"), "%s", monitor_gpu_status(m));
    monitor_sample_now(m);
    monitor_latest(m, line, sizeof line);
    printf("progress line without GPU: %s\n", line);
    CHECK(!strncmp(line, "CPU", 3), "'%s'", line);
    monitor_stop(m);
    read_csv(csv, &t);
    CHECK(t.nrows == 1 && !*csv_cell(&t, 0, csv_col(&t, "gpu_util_pct")) &&
              csv_num(&t, 0, csv_col(&t, "mem_avail_mib")) > 0,
          "CPU-only row");
    csv_free(&t);

    use_fake(NULL);
    monitor_options bad = {0.001, 0, NULL, NULL, 0};
    CHECK(monitor_start(&m, &bad) == ERR_INPUT, "interval below 10 ms refused");
    snprintf(csv, sizeof csv, "%s/nodir/x/mon.csv", tu_tmpdir());
    monitor_options nodir = {0, 0, csv, NULL, 0};
    CHECK(monitor_start(&m, &nodir) == ERR_RUNTIME && strstr(err_msg(), "nodir"), "unwritable csv: %s", err_msg());
}

static void test_monitor_thread(void)
{
    char csv[600];
    fake_csv(csv, sizeof csv, "mon4.csv", NULL);
    monitor *m;
    monitor_options o = {0.02, 0, csv, NULL, 0};
    CHECK(monitor_start(&m, &o) == 0, "start thread");
    /* busy for 0.3 s: the process CPU use must show it (as much as this
     * thread got of a core on a shared machine) */
    double t0 = clock_now_s(), c0 = thread_cpu();
    volatile double x = 0;
    while (clock_now_s() - t0 < 0.3) x += 1e-9;
    double ts = clock_now_s(), busy = 100 * (thread_cpu() - c0) / (ts - t0);
    monitor_stop(m);
    double stop_s = clock_now_s() - ts;
    csv_table t;
    read_csv(csv, &t);
    double maxcpu = 0;
    for (size_t i = 0; i < t.nrows; i++) maxcpu = fmax(maxcpu, csv_num(&t, i, csv_col(&t, "cpu_pct")));
    printf("thread at 20 ms: %zu samples in 0.3 s, peak process CPU %.0f%% (the busy thread got %.0f%%), stop took "
           "%.1f ms\n", t.nrows, maxcpu, busy, stop_s * 1e3);
    CHECK(t.nrows >= 5 && t.nrows <= 20, "samples %zu", t.nrows);
    CHECK(maxcpu > 0.5 * busy && maxcpu > 5, "a busy loop shows as CPU use: %.0f%% (busy %.0f%%)", maxcpu, busy);
    csv_free(&t);

    /* a driver call that takes 300 ms must not hold up the progress line */
    setenv("FAKENVML_DELAY_MS", "300", 1);
    monitor_options slowdrv = {0.02, 0, NULL, NULL, 0};
    CHECK(monitor_start(&m, &slowdrv) == 0, "start with a slow driver");
    for (int i = 0; i < 200 && monitor_samples(m) < 1; i++) sleep_s(0.01);
    sleep_s(0.05); /* the thread is inside the next, slow, sample now */
    char line[160];
    double worst = 0;
    for (int i = 0; i < 20; i++) {
        ts = clock_now_s();
        monitor_latest(m, line, sizeof line);
        worst = fmax(worst, clock_now_s() - ts);
        sleep_s(0.005);
    }
    monitor_stop(m);
    unsetenv("FAKENVML_DELAY_MS");
    printf("slow driver (300 ms a query): monitor_latest took at most %.3f ms: %s\n", worst * 1e3, line);
    CHECK(worst < 0.05 && !strncmp(line, "GPU ", 4), "monitor_latest waited %.3f s for the driver", worst);

    /* a long interval must not delay stopping */
    monitor_options slow = {30, -1, NULL, NULL, 0};
    CHECK(monitor_start(&m, &slow) == 0, "start slow");
    sleep_s(0.02);
    ts = clock_now_s();
    monitor_stop(m);
    stop_s = clock_now_s() - ts;
    printf("stop with a 30 s interval took %.1f ms\n", stop_s * 1e3);
    CHECK(stop_s < 0.5, "stop took %.3f s", stop_s);
}

/* The cost of one sample (NVML queries, /proc reads, a CSV row, 8 TensorBoard
 * records), which the training loop pays once per interval. */
static void test_cost(void)
{
    char csv[600], tbdir[600];
    snprintf(csv, sizeof csv, "%s/cost.csv", tu_tmpdir());
    snprintf(tbdir, sizeof tbdir, "%s/cost-tb", tu_tmpdir());
    use_fake(NULL);
    tb_writer *tb;
    CHECK(tb_open(&tb, tbdir) == 0, "tb_open");
    const int n = tu_sanitized() ? 200 : 2000;
    const char *names[2] = {"fake GPU + CPU", "CPU only"};
    for (int k = 0; k < 2; k++) {
        if (k == 1) setenv("BERTC_NVML_LIB", "/nonexistent/libnvidia-ml.so.1", 1);
        monitor *m;
        monitor_options o = {0, 0, csv, tb, 0};
        if (monitor_start(&m, &o) != 0) {
            CHECK(0, "start: %s", err_msg());
            continue;
        }
        monitor_sample_now(m); /* warm the page cache and stdio buffers */
        double t0 = clock_now_s(), c0 = thread_cpu();
        for (int i = 0; i < n; i++) monitor_sample_now(m);
        double us = (clock_now_s() - t0) / n * 1e6, cpu_us = (thread_cpu() - c0) / n * 1e6;
        monitor_stop(m);
        printf("monitor sample cost (%s, CSV + TensorBoard): %.1f us CPU, %.1f us wall per sample (%d samples) = "
               "%.2f%% of a 20 ms step; at a 1 s interval the thread takes %.4f%% of one core\n",
               names[k], cpu_us, us, n, cpu_us / 2e4 * 100, cpu_us / 1e6 * 100);
        /* The budget: 1% of a tiny model's step (tens of ms): 200 us for a
         * 20 ms step. CPU time, because wall time on a shared 2-core machine
         * also counts waiting for a core. ASan multiplies the cost. */
        CHECK(cpu_us < (tu_sanitized() ? 2000 : 200), "%s: %.1f us CPU per sample", names[k], cpu_us);
    }
    tb_close(tb);
}

static void write_metrics_row(FILE *f, int step, double loss, double lr, double eps, double elapsed)
{
    fprintf(f, "%d,%.4f,%.6f,%.8g,%.4f,1,%.3f,%.3f\n", step, step / 100.0, loss, lr, 1.0 + 0.5 * loss, eps, elapsed);
    fflush(f);
}

/* The obs API as the trainer calls it, including a resume: metrics.csv and
 * eval.csv written here as the trainer writes them, the rest by obs. */
static void test_obs_api(void)
{
    const char *keep = getenv("BERTC_KEEP_RUN");
    char run[600], path[700];
    snprintf(run, sizeof run, "%s", keep && *keep ? keep : "");
    if (!run[0]) snprintf(run, sizeof run, "%s/run", tu_tmpdir());
    remove_tree(run);
    use_fake(NULL);
    obs_options oo;
    obs_options_init(&oo);
    oo.monitor_interval_s = 0.02;
    oo.model = "tests/fake-model";
    oo.train_data = "train.json";
    oo.dev_data = "dev.json";
    oo.options = "lr=5e-05, batch=16";
    obs_run *r;
    CHECK(obs_open(&r, run, &oo) == 0, "obs_open: %s", err_msg());
    FILE *mf = fopen(path_join(path, sizeof path, run, "metrics.csv"), "w");
    FILE *ef = fopen(path_join(path, sizeof path, run, "eval.csv"), "w");
    if (!mf || !ef) {
        CHECK(0, "cannot write the run's CSVs");
        return;
    }
    fputs("step,epoch,loss,lr,grad_norm,loss_scale,examples_per_s,elapsed_s\n", mf);
    fputs("step,exact_match,f1\n", ef);
    double t0 = clock_now_s();
    for (int step = 1; step <= 60; step++) {
        double loss = 4.0 / (1 + 0.05 * step), lr = 5e-5 * (1 - step / 100.0), eps = 20 + step % 7;
        write_metrics_row(mf, step, loss, lr, eps, clock_now_s() - t0);
        obs_step(r, &(obs_step_metrics){step, step / 100.0, loss, lr, 1.0 + 0.5 * loss, 1, eps});
        if (step % 20 == 0) {
            double em = 30 + step / 2.0, f1 = 40 + step / 2.0;
            fprintf(ef, "%d,%.2f,%.2f\n", step, em, f1);
            fflush(ef);
            obs_eval(r, step, em, f1);
        }
        if (step == 30) CHECK(obs_report(r) == 0, "report at a checkpoint: %s", err_msg());
        sleep_s(0.005);
    }
    char line[160];
    obs_progress(r, line, sizeof line);
    printf("obs progress: %s\n", line);
    CHECK(!strncmp(line, "GPU ", 4), "'%s'", line);
    CHECK(obs_set_info(r, "skipped_steps", "2") == 0, "set info");
    obs_close(r);
    fclose(mf);
    fclose(ef);

    /* resume from the checkpoint of step 40: the trainer keeps its rows up to 40 */
    csv_table t;
    read_csv(path_join(path, sizeof path, run, "metrics.csv"), &t);
    mf = fopen(path, "w");
    fputs("step,epoch,loss,lr,grad_norm,loss_scale,examples_per_s,elapsed_s\n", mf);
    for (size_t i = 0; i < t.nrows && csv_num(&t, i, 0) <= 40; i++) {
        for (int c = 0; c < t.ncols; c++) fprintf(mf, "%s%s", c ? "," : "", csv_cell(&t, i, c));
        fputc('\n', mf);
    }
    csv_free(&t);
    oo.resume_step = 40;
    oo.model = NULL; /* kept from the first open */
    CHECK(obs_open(&r, run, &oo) == 0, "obs_open (resume): %s", err_msg());
    ef = fopen(path_join(path, sizeof path, run, "eval.csv"), "w");
    fputs("step,exact_match,f1\n20,40.00,50.00\n40,50.00,60.00\n", ef);
    for (int step = 41; step <= 80; step++) {
        /* the resumed process logs other values than the killed one did */
        double loss = 3.0 / (1 + 0.05 * step), lr = 5e-5 * (1 - step / 100.0), eps = 25 + step % 5;
        write_metrics_row(mf, step, loss, lr, eps, 0.4 + step * 0.01);
        obs_step(r, &(obs_step_metrics){step, step / 100.0, loss, lr, 1.0 + 0.5 * loss, 1, eps});
        if (step % 20 == 0) {
            fprintf(ef, "%d,%.2f,%.2f\n", step, 40 + step / 2.0, 52 + step / 2.0);
            obs_eval(r, step, 40 + step / 2.0, 52 + step / 2.0);
        }
        sleep_s(0.003);
    }
    fclose(mf);
    fclose(ef);
    CHECK(obs_report(r) == 0, "final report: %s", err_msg());
    obs_close(r);
    obs_close(NULL);
    obs_step(NULL, &(obs_step_metrics){1, 0, 0, 0, 0, 0, 0});

    read_csv(path_join(path, sizeof path, run, "info.csv"), &t);
    int kc = csv_col(&t, "key"), vc = csv_col(&t, "value");
    int seen = 0;
    for (size_t i = 0; i < t.nrows; i++) {
        const char *k = csv_cell(&t, i, kc), *v = csv_cell(&t, i, vc);
        if (!strcmp(k, "model")) seen += !strcmp(v, "tests/fake-model");
        if (!strcmp(k, "options")) seen += !strcmp(v, "lr=5e-05, batch=16");
        if (!strcmp(k, "resumes")) seen += !strcmp(v, "1");
        if (!strcmp(k, "skipped_steps")) seen += !strcmp(v, "2");
        if (!strcmp(k, "hardware")) seen += strstr(v, "Fake Tesla T4") != NULL;
    }
    CHECK(seen == 5, "info.csv holds model, options, resumes, skipped_steps, hardware: %d of 5", seen);
    csv_free(&t);
    read_csv(path_join(path, sizeof path, run, "monitor.csv"), &t);
    printf("obs run: %zu monitor rows\n", t.nrows);
    CHECK(t.nrows >= 5, "monitor rows %zu", t.nrows);
    csv_free(&t);
    char *html;
    size_t len;
    CHECK(file_read_all(path_join(path, sizeof path, run, "report.html"), &html, &len) == 0, "report.html");
    if (len) {
        CHECK(strstr(html, "id=\"chart-loss\"") && strstr(html, "id=\"chart-gpu-util\"") &&
                  strstr(html, "60.00 (EM 50.00) at step 40") == NULL && strstr(html, "92.00 (EM 80.00) at step 80"),
              "report content");
        free(html);
    }
    if (keep && *keep) printf("run dir kept at %s (check it with: python3 tools/tb_check.py %s)\n", run, run);
}

static int count_in_file(const char *path, const char *needle)
{
    char *text;
    size_t len;
    int n = 0;
    if (file_read_all(path, &text, &len)) return -1;
    for (const char *p = text; (p = strstr(p, needle)) != NULL; p++) n++;
    free(text);
    return n;
}

/* A disk that fills during training (RLIMIT_FSIZE in a child): obs_* keep
 * returning, TensorBoard and monitor.csv each warn once, nothing crashes. */
static void test_obs_full_disk(void)
{
    char run[600], errpath[700];
    snprintf(run, sizeof run, "%s/fullrun", tu_tmpdir());
    snprintf(errpath, sizeof errpath, "%s/fullrun.stderr", tu_tmpdir());
    use_fake(NULL);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, 2);
        signal(SIGXFSZ, SIG_IGN);
        obs_options oo;
        obs_options_init(&oo);
        oo.monitor_interval_s = 0.01;
        obs_run *r;
        /* a monitor.csv already near the limit, so its next row fails too */
        char mpath[700], row[200];
        mkdir_p(run);
        FILE *mf = fopen(path_join(mpath, sizeof mpath, run, "monitor.csv"), "w");
        fputs("unix_time,elapsed_s,step,gpu_util_pct,gpu_mem_util_pct,gpu_mem_used_mib,gpu_mem_total_mib,gpu_temp_c,"
              "sm_clock_mhz,mem_clock_mhz,power_w,power_limit_w,throttle,cpu_pct,rss_mib,mem_avail_mib\n", mf);
        snprintf(row, sizeof row, "1700000000.000,0.000,0,50,25,1024.0,15360.0,50,1590,5000,40.00,70.00,none,99.0,100.0,9000.0\n");
        for (size_t n = 0; n < 16384; n += strlen(row)) fputs(row, mf);
        fclose(mf);
        if (obs_open(&r, run, &oo) != 0) _exit(10);
        struct rlimit rl = {16384, 16384};
        setrlimit(RLIMIT_FSIZE, &rl);
        char line[160];
        for (int step = 1; step <= 3000; step++) {
            obs_step(r, &(obs_step_metrics){step, step / 1e3, 1.0, 1e-5, 1.0, 1, 30});
            obs_progress(r, line, sizeof line);
        }
        obs_eval(r, 3000, 50, 60);
        sleep_s(0.1);
        err_set(ERR_INPUT, "the trainer's own error");
        int rc = obs_report(r);
        obs_close(r);
        printf("full disk under obs: obs_report rc %d; the caller's error after obs_report and obs_close: '%s'\n", rc,
               err_msg());
        fflush(stdout);
        _exit(rc == ERR_RUNTIME && err_code() == ERR_INPUT && !strcmp(err_msg(), "the trainer's own error") ? 0 : 12);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
    int tbw = count_in_file(errpath, "TensorBoard events stop here"), monw = count_in_file(errpath, "monitor: writing");
    printf("full disk under obs: %d TensorBoard warning(s), %d monitor.csv warning(s)\n", tbw, monw);
    CHECK(tbw == 1 && monw == 1, "one warning each: %d %d", tbw, monw);
}

int main(void)
{
    log_quiet(1);
    if (find_fake_nvml() != 0) {
        CHECK(0, "no fake NVML library and no C compiler to build one");
        return tu_done();
    }
    test_nvml();
    test_monitor_samples();
    test_monitor_degraded();
    test_monitor_thread();
    test_cost();
    test_obs_api();
    test_obs_full_disk();
    return tu_done();
}
