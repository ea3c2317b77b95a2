/* report.html and its parts: the CSV reader, tick placement, SVG charts
 * (decimation keeps spikes), HTML escaping, and whole reports of synthetic
 * run dirs: a GPU run, a CPU-only run, damaged and hostile files, a very
 * long run. The page must stay self-contained (no script, no external
 * reference) whatever the files hold. */
#define _GNU_SOURCE
#include "testutil.h"
#include "core/err.h"
#include "core/fileio.h"
#include "obs/csv.h"
#include "obs/report.h"
#include "obs/svg.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static void write_file(const char *dir, const char *name, const char *text)
{
    char path[1024];
    path_join(path, sizeof path, dir, name);
    CHECK(file_write_atomic(path, text, strlen(text)) == 0, "write %s", path);
}

static void test_csv(void)
{
    char text[] = "a,b,\"c d\"\r\n"
                  "1,\"x, \"\"quoted\"\"\",3\r\n"
                  "\n"
                  "4,5\n"
                  "7,\"multi\nline\",9\n"
                  "  10 ,abc, nan\n"
                  "11,12,13,14\n"
                  "15,16,1";
    csv_table t;
    CHECK(csv_parse(text, strlen(text), 0, "mem", &t) == 0, "parse: %s", err_msg());
    printf("csv: %d cols, %zu rows, %zu bad (first line %zu)\n", t.ncols, t.nrows, t.bad_rows, t.first_bad_line);
    CHECK(t.ncols == 3 && !strcmp(t.names[2], "c d"), "header");
    CHECK(t.nrows == 4 && t.bad_rows == 2 && t.first_bad_line == 4, "rows %zu bad %zu line %zu", t.nrows, t.bad_rows,
          t.first_bad_line);
    CHECK(!strcmp(csv_cell(&t, 0, 1), "x, \"quoted\""), "quoted cell '%s'", csv_cell(&t, 0, 1));
    CHECK(!strcmp(csv_cell(&t, 1, 1), "multi\nline") && csv_num(&t, 1, 2) == 9, "multi-line cell");
    CHECK(csv_num(&t, 2, 0) == 10 && isnan(csv_num(&t, 2, 1)) && isnan(csv_num(&t, 2, 2)), "numbers, junk, nan");
    CHECK(csv_num(&t, 3, 2) == 1 && csv_num(&t, 0, 2) == 3, "last line without newline");
    CHECK(csv_col(&t, "b") == 1 && csv_col(&t, "z") == -1 && !*csv_cell(&t, 0, -1) && !*csv_cell(&t, 99, 0), "lookups");
    csv_free(&t);

    const char *bad[] = {"", "\n\n  \n", "a,,b\n1,2,3\n", "a,b,a\n1,2,3\n"};
    const char *why[] = {"empty", "empty", "no name", "column 'a' appears twice"};
    for (int i = 0; i < 4; i++) {
        char *c = strdup(bad[i]);
        int rc = csv_parse(c, strlen(c), 1, "bad.csv", &t);
        printf("bad csv %d: rc %d: %s\n", i, rc, err_msg());
        CHECK(rc == ERR_INPUT && strstr(err_msg(), why[i]) && strstr(err_msg(), "bad.csv"), "case %d: %s", i, err_msg());
    }
    /* too many columns */
    size_t n = 300 * 5;
    char *wide = malloc(n + 2);
    for (int i = 0; i < 300; i++) snprintf(wide + i * 5, 6, "c%03d,", i);
    wide[n - 1] = '\n';
    wide[n] = 0;
    CHECK(csv_parse(wide, n, 1, "wide.csv", &t) == ERR_INPUT && strstr(err_msg(), "at most 256"), "300 columns refused: %s",
          err_msg());
    CHECK(csv_read("/nonexistent/metrics.csv", &t) != 0 && strstr(err_msg(), "/nonexistent"), "missing file");
}

static void test_ticks(void)
{
    double t[32];
    int n = svg_ticks(0, 1, 5, t, 32);
    CHECK(n == 6 && t[0] == 0 && fabs(t[5] - 1) < 1e-12 && fabs(t[1] - 0.2) < 1e-12, "[0,1]: %d ticks", n);
    n = svg_ticks(0.5, 3.7, 5, t, 32);
    CHECK(n == 7 && t[0] == 0.5 && t[6] == 3.5, "[0.5,3.7]: %d ticks from %g to %g", n, t[0], t[n - 1]);
    n = svg_ticks(1e-5, 5e-5, 5, t, 32);
    CHECK(n == 5 && fabs(t[0] - 1e-5) < 1e-18, "lr range: %d ticks from %g", n, t[0]);
    n = svg_ticks(-30, 20, 5, t, 32);
    int has0 = 0;
    for (int i = 0; i < n; i++) has0 |= t[i] == 0;
    CHECK(n == 6 && has0 && t[0] == -30, "[-30,20]: %d ticks, zero %d", n, has0);
    CHECK(svg_ticks(1, 1, 5, t, 32) == 0 && svg_ticks(NAN, 1, 5, t, 32) == 0 && svg_ticks(0, INFINITY, 5, t, 32) == 0,
          "degenerate ranges give no ticks");
    CHECK(svg_ticks(0, 1e6, 5, t, 3) == 3, "cap respected");
}

/* The y pixel coordinates of the first polyline in s. */
static int poly_points(const char *s, double *ys, int cap)
{
    const char *p = strstr(s, "<polyline");
    if (!p || !(p = strstr(p, "points=\""))) return -1;
    p += 8;
    int n = 0;
    while (*p && *p != '"') {
        double x, y;
        int used;
        if (sscanf(p, "%lf,%lf%n", &x, &y, &used) != 2) return -1;
        if (n < cap) ys[n] = y;
        n++;
        p += used;
        while (*p == ' ') p++;
    }
    return n;
}

static void test_svg(void)
{
    sbuf b = {0};
    sb_html(&b, "<script>alert('x') & \"y\"</script>\x01\x1f ok");
    printf("escaped: %s\n", b.p);
    CHECK(!strcmp(b.p, "&lt;script&gt;alert(&#39;x&#39;) &amp; &quot;y&quot;&lt;/script&gt; ok"), "%s", b.p);
    sb_free(&b);

    size_t n = tu_sanitized() ? 20000 : 200000;
    double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    for (size_t i = 0; i < n; i++) {
        x[i] = (double)i;
        y[i] = 1.0 + 0.1 * sin((double)i * 0.01);
    }
    y[n / 3] = 50; /* one spike among many points */
    y[n / 2] = NAN;
    x[n / 2 + 1] = INFINITY;
    svg_series s = {"loss", x, y, n, "#000", 0};
    svg_chart c = {"chart-t", "T <1>", "step", "loss", 0, 0, 0, 0, 0};
    size_t drawn = svg_line_chart(&b, &c, &s, 1);
    double ys[4096];
    int np = poly_points(b.p, ys, 4096);
    double top = 1e9;
    for (int i = 0; i < np && i < 4096; i++) top = fmin(top, ys[i]);
    printf("chart of %zu points: %zu drawn, polyline of %d points, %zu bytes, top y %.1f\n", n, drawn, np, b.n, top);
    CHECK(drawn == (size_t)np && np > 400 && np <= 2 * 560, "decimated to %d points", np);
    CHECK(fabs(top - 30) < 0.6, "the spike reaches the top of the plot (y %.1f)", top);
    CHECK(b.n < 40000 && strstr(b.p, "id=\"chart-t\"") && strstr(b.p, "T &lt;1&gt;"), "size %zu, id, escaped title", b.n);
    sb_free(&b);

    for (size_t i = 0; i < n; i++) y[i] = NAN;
    CHECK(svg_line_chart(&b, &c, &s, 1) == 0 && b.n == 0, "nothing finite: no svg (%zu bytes)", b.n);
    y[5] = 3;
    CHECK(svg_line_chart(&b, &c, &s, 1) == 1 && strstr(b.p, "<polyline"), "a single point still draws");
    sb_free(&b);
    free(x);
    free(y);
}

/* A plausible fine-tuning run: 600 steps, evaluations, a GPU monitor. */
static void make_run(const char *dir, int gpu, int steps)
{
    mkdir_p(dir);
    char path[1024];
    FILE *f = fopen(path_join(path, sizeof path, dir, "metrics.csv"), "w");
    fputs("step,epoch,loss,lr,grad_norm,loss_scale,examples_per_s,elapsed_s,exact_match,f1\n", f);
    for (int s = 1; s <= steps; s++) {
        double loss = 5.5 * exp(-s / 120.0) + 0.9 + 0.15 * sin(s * 1.7);
        double lr = s < 60 ? 5e-5 * s / 60 : 5e-5 * (steps - s) / (steps - 60.0);
        if (s == 77) fprintf(f, "%d,%.4f,nan,%.6g,inf,65536,30.1,%.2f,,\n", s, s / 300.0, lr, s * 0.5);
        else fprintf(f, "%d,%.4f,%.5f,%.6g,%.4f,%g,%.2f,%.2f,,\n", s, s / 300.0, loss, lr, 2 + sin(s),
                     s < 300 ? 65536.0 : 32768.0, 31 + 2 * sin(s / 9.0), s * 0.5);
        if (s % 200 == 0) fprintf(f, "%d,%.4f,,,,,,%.2f,%.2f,%.2f\n", s, s / 300.0, s * 0.5, 40 + s / 20.0, 55 + s / 25.0);
    }
    fclose(f);
    f = fopen(path_join(path, sizeof path, dir, "monitor.csv"), "w");
    fputs("unix_time,elapsed_s,step,gpu_util_pct,gpu_mem_util_pct,gpu_mem_used_mib,gpu_mem_total_mib,gpu_temp_c,"
          "sm_clock_mhz,mem_clock_mhz,power_w,power_limit_w,throttle,cpu_pct,rss_mib,mem_avail_mib\n", f);
    for (int i = 0; i < 300; i++) {
        if (gpu)
            fprintf(f, "%.3f,%d,%d,%d,%d,%.1f,15360.0,%d,1590,5000,%.2f,70.00,%s,%.1f,%.1f,%.1f\n", 1.7e9 + i, i, i * 2,
                    90 + i % 9, 40 + i % 5, 12000 + 10.0 * (i % 20), 60 + i / 20, 65 + (i % 7) * 0.5,
                    i % 10 ? "none" : "sw_power_cap", 99.5, 2100.0 + i, 9000.0 - i);
        else
            fprintf(f, "%.3f,%d,%d,,,,,,,,,,,%.1f,%.1f,%.1f\n", 1.7e9 + i, i, i * 2, 180.0 + i % 20, 2100.0 + i, 9000.0 - i);
    }
    fclose(f);
    write_file(dir, "info.csv",
               "key,value\nmodel,\"models/minilm, <b>bold</b>\"\noptions,\"lr=5e-05 \"\"quoted\"\"\"\n"
               "evil,<script>alert(1)</script>\nresumes,1\n");
    char ck[1024];
    snprintf(ck, sizeof ck, "%s/checkpoints/step-00000200", dir);
    mkdir_p(ck);
    snprintf(ck, sizeof ck, "%s/checkpoints/step-00000400", dir);
    mkdir_p(ck);
    snprintf(ck, sizeof ck, "%s/checkpoints/step-00000600.tmp", dir);
    mkdir_p(ck);
    /* RUN/restarts.csv as train/supervise.c writes it: two restarts, then the final attempt's row. */
    write_file(dir, "restarts.csv",
               "time,attempt,pid,exit_code,signal,runtime_s,checkpoint_step,action,backoff_s\n"
               "2024-01-01T00:00:00Z,1,100,137,9,12.5,20,restart,1\n"
               "2024-01-01T00:01:00Z,2,101,1,0,3.0,20,restart,2\n"
               "2024-01-01T00:02:00Z,3,102,0,0,40.0,40,done,0\n");
}

static const char *const all_charts[] = {"chart-loss", "chart-lr", "chart-throughput", "chart-gradnorm",
                                         "chart-lossscale", "chart-eval", "chart-gpu-util", "chart-gpu-mem",
                                         "chart-gpu-temp", "chart-gpu-power", "chart-cpu", "chart-mem"};

/* Every drawn chart has a polyline with points; returns how many charts. */
static int count_charts(const char *html)
{
    int n = 0;
    for (const char *p = html; (p = strstr(p, "<svg ")) != NULL; p++) {
        const char *end = strstr(p, "</svg>");
        const char *pl = strstr(p, "<polyline");
        CHECK(end && pl && pl < end && strstr(pl, "points=\"") && pl[strlen("<polyline")] != '"',
              "chart at offset %td has a polyline", p - html);
        const char *pts = pl ? strstr(pl, "points=\"") : NULL;
        CHECK(pts && pts[8] != '"', "non-empty points");
        n++;
    }
    return n;
}

/* Nothing that loads or runs anything. */
static void check_self_contained(const char *html)
{
    const char *banned[] = {"<script", "<link", "<img", "<iframe", "@import", "src=", "https:", "href="};
    for (size_t i = 0; i < sizeof banned / sizeof banned[0]; i++)
        CHECK(!strcasestr(html, banned[i]), "report contains '%s'", banned[i]);
    for (const char *p = html; (p = strstr(p, "http:")) != NULL; p++)
        CHECK(!strncmp(p, "http://www.w3.org/2000/svg", 26), "only the SVG namespace may be a URL: %.40s", p);
    for (const char *p = html; (p = strstr(p, "url(")) != NULL; p++)
        CHECK(p[4] == '#', "url() only to local clip paths: %.20s", p);
}

/* Makes the run TMPDIR/name (make_run) in dir and renders it into html;
 * returns its number of charts, or -1 when nothing was rendered. */
static int render_run(char *dir, size_t cap, const char *name, int gpu, int steps, sbuf *html)
{
    snprintf(dir, cap, "%s/%s", tu_tmpdir(), name);
    make_run(dir, gpu, steps);
    CHECK(report_render(dir, html) == 0, "render: %s", err_msg());
    if (!html->n) return -1;
    return count_charts(html->p);
}

static void test_report_gpu(void)
{
    char dir[600];
    sbuf html = {0};
    int n = render_run(dir, sizeof dir, "gpurun", 1, 600, &html);
    if (n < 0) return;
    printf("GPU run: %d charts, %zu bytes of HTML\n", n, html.n);
    CHECK(n == 12, "12 charts, got %d", n);
    for (size_t i = 0; i < sizeof all_charts / sizeof all_charts[0]; i++) {
        char id[64];
        snprintf(id, sizeof id, "id=\"%s\"", all_charts[i]);
        CHECK(strstr(html.p, id), "chart %s present", all_charts[i]);
    }
    check_self_contained(html.p);
    const char *want[] = {"79.00 (EM 70.00) at step 600; 3 evaluation(s)", "2 (latest step-00000400)",
                          "Restarts (supervisor)</th><td>2<", "Resumed</th><td>1<", "&lt;script&gt;alert(1)",
                          "models/minilm, &lt;b&gt;bold&lt;/b&gt;", "lr=5e-05 &quot;quoted&quot;",
                          "600 (epoch 2.00)", "peak memory 11.9 / 15.0 GiB", "throttled in 10% of samples",
                          "Duration</th><td>5 min 00 s<"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) CHECK(strstr(html.p, want[i]), "summary has '%s'", want[i]);
    CHECK(!strstr(html.p, "Not charted"), "every chart drawn");
    sb_free(&html);

    /* report_write puts it in RUN/report.html atomically */
    char path[700];
    CHECK(report_write(dir, NULL) == 0, "report_write: %s", err_msg());
    CHECK(path_exists(path_join(path, sizeof path, dir, "report.html")), "report.html written");
    CHECK(report_write(dir, "/nonexistent/dir/report.html") == ERR_RUNTIME, "unwritable output: %s", err_msg());
}

static void test_report_cpu(void)
{
    char dir[600];
    sbuf html = {0};
    int n = render_run(dir, sizeof dir, "cpurun", 0, 150, &html);
    if (n < 0) return;
    printf("CPU run: %d charts\n", n);
    /* loss, lr, throughput, grad norm, CPU, memory; a constant loss scale
     * and no evaluation before step 200 */
    CHECK(n == 6, "6 charts, got %d", n);
    CHECK(strstr(html.p, "<li>GPU utilisation: no GPU readings in monitor.csv") &&
              strstr(html.p, "<li>Evaluation: no evaluation rows") && strstr(html.p, "GPU</th><td>no GPU readings"),
          "reasons for the missing charts");
    check_self_contained(html.p);
    sb_free(&html);
}

static void test_report_damaged(void)
{
    char dir[600], path[700];
    snprintf(dir, sizeof dir, "%s/damaged", tu_tmpdir());
    mkdir_p(dir);
    sbuf html = {0};
    int rc = report_render(dir, &html);
    printf("empty run dir: rc %d: %s\n", rc, err_msg());
    CHECK(rc == ERR_INPUT && strstr(err_msg(), "neither"), "%s", err_msg());
    write_file(dir, "metrics.csv", "");
    rc = report_render(dir, &html);
    printf("empty metrics.csv: rc %d: %s\n", rc, err_msg());
    CHECK(rc == ERR_INPUT, "empty metrics: rc %d", rc);
    /* a killed run's half-written last line */
    write_file(dir, "metrics.csv", "step,loss\n1,2.0\n2,1.5\n3");
    write_file(dir, "monitor.csv", "unix_time,cpu_pct\n");
    CHECK(report_render(dir, &html) == 0, "render: %s", err_msg());
    CHECK(html.n && strstr(html.p, "metrics.csv: 1 row(s) with the wrong number of cells skipped (first at line 4)"),
          "the cut line is noted");
    CHECK(html.n && count_charts(html.p) == 1, "one chart (loss)");
    sb_free(&html);
    write_file(dir, "metrics.csv", "step,loss\n1,2.0\n2,1.5,9\n3,1.0\n");
    CHECK(report_render(dir, &html) == 0, "render");
    CHECK(html.n && strstr(html.p, "metrics.csv: 1 row(s) with the wrong number of cells skipped (first at line 3)"),
          "bad row noted");
    sb_free(&html);
    CHECK(report_render(path_join(path, sizeof path, dir, "metrics.csv"), &html) == ERR_INPUT, "a file is not a run dir");
    CHECK(report_render("/nonexistent/run", &html) == ERR_INPUT && strstr(err_msg(), "/nonexistent/run"), "%s", err_msg());

    /* random bytes in every file: no crash, a page or a clean error */
    unsigned seed = 12345;
    int iters = tu_sanitized() ? 60 : 300, pages = 0;
    const char *names[] = {"metrics.csv", "monitor.csv", "eval.csv", "info.csv"};
    for (int it = 0; it < iters; it++) {
        for (int k = 0; k < 4; k++) {
            size_t len = (size_t)(rand_r(&seed) % 600);
            char *junk = malloc(len + 1);
            for (size_t i = 0; i < len; i++) {
                int r = rand_r(&seed) % 100;
                /* mostly CSV-ish bytes, some anything (NUL included) */
                junk[i] = r < 30 ? ',' : r < 40 ? '\n' : r < 45 ? '"' : r < 75 ? (char)('0' + r % 10)
                        : r < 85 ? "steplosnix_"[r % 11] : (char)rand_r(&seed);
            }
            char p[800];
            path_join(p, sizeof p, dir, names[k]);
            FILE *f = fopen(p, "wb");
            fwrite(junk, 1, len, f);
            fclose(f);
            free(junk);
        }
        err_clear();
        rc = report_render(dir, &html);
        CHECK(rc == 0 || rc == ERR_INPUT, "junk %d: rc %d", it, rc);
        if (rc == 0) {
            pages++;
            check_self_contained(html.p);
        }
        sb_free(&html);
    }
    printf("random files: %d of %d runs gave a page, the rest a clean error\n", pages, iters);
}

static void test_report_long(void)
{
    char dir[600], path[700];
    snprintf(dir, sizeof dir, "%s/long", tu_tmpdir());
    mkdir_p(dir);
    int steps = tu_sanitized() ? 20000 : 200000;
    FILE *f = fopen(path_join(path, sizeof path, dir, "metrics.csv"), "w");
    fputs("step,epoch,loss,lr,grad_norm,loss_scale,examples_per_s,elapsed_s\n", f);
    for (int s = 1; s <= steps; s++)
        fprintf(f, "%d,%.3f,%.4f,%.3g,%.3f,1,%.1f,%.1f\n", s, s / 1e4, 1 + 3.0 / (1 + s / 100.0) + 0.2 * sin(s * 0.3),
                3e-5 * (1 - (double)s / steps), 1.5, 40.0, s * 0.3);
    fclose(f);
    clock_t t0 = clock();
    CHECK(report_write(dir, NULL) == 0, "long run: %s", err_msg());
    double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
    struct stat st;
    stat(path_join(path, sizeof path, dir, "report.html"), &st);
    printf("report of %d steps: %.2f s CPU, %lld bytes\n", steps, secs, (long long)st.st_size);
    CHECK(st.st_size < 200000, "report.html stays small: %lld bytes", (long long)st.st_size);
}

int main(void)
{
    test_csv();
    test_ticks();
    test_svg();
    test_report_gpu();
    test_report_cpu();
    test_report_damaged();
    test_report_long();
    return tu_done();
}
