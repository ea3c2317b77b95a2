/* bertc watch RUN: the live numbers of a run as text, refreshed, from the
 * run dir's files alone (obs/rundir.h, obs/live.h): works for a run started
 * without --http, on another machine that sees the same disk, and for a
 * finished run (printed once). */
#define _GNU_SOURCE
#include "cli/options.h"
#include "core/args.h"
#include "core/err.h"
#include "core/fileio.h"
#include "obs/live.h"
#include "obs/rundir.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

const char cmd_watch_summary[] = "follow a training run in the terminal: progress, ETA, eval, checkpoints, GPU/CPU";

static volatile sig_atomic_t g_quit;

static void on_signal(int sig)
{
    (void)sig;
    g_quit = 1;
}

/* The last `width` values of v as block characters, low to high. */
static void sparkline(sbuf *o, const double *v, size_t n, int width)
{
    static const char *const blocks[] = {"\xe2\x96\x81", "\xe2\x96\x82", "\xe2\x96\x83", "\xe2\x96\x84",
                                         "\xe2\x96\x85", "\xe2\x96\x86", "\xe2\x96\x87", "\xe2\x96\x88"};
    size_t from = n > (size_t)width ? n - (size_t)width : 0;
    double lo = INFINITY, hi = -INFINITY;
    for (size_t i = from; i < n; i++)
        if (isfinite(v[i])) lo = fmin(lo, v[i]), hi = fmax(hi, v[i]);
    if (!(hi >= lo)) return;
    for (size_t i = from; i < n; i++) {
        if (!isfinite(v[i])) {
            sb_puts(o, " ");
            continue;
        }
        int k = hi > lo ? (int)((v[i] - lo) / (hi - lo) * 7.999) : 3;
        sb_puts(o, blocks[k < 0 ? 0 : k > 7 ? 7 : k]);
    }
    sb_printf(o, "  %.4g .. %.4g", lo, hi);
}

/* One frame; *done set when the run has finished. */
static int frame(const char *run, double interval, int tty, int *done)
{
    rundir d;
    int rc = rundir_load(&d, run);
    if (rc) return err_wrap(ERR_INPUT, "watch");
    live_status s;
    live_from_rundir(&s, &d);
    sbuf o = {0};
    char when[32];
    time_t now = time(NULL);
    struct tm tmv;
    strftime(when, sizeof when, "%H:%M:%S", localtime_r(&now, &tmv));
    if (tty) sb_puts(&o, "\x1b[H\x1b[2J");
    sb_printf(&o, "bertc watch %s  %s", run, when);
    if (interval > 0) sb_printf(&o, "  (every %g s, Ctrl-C to quit)", interval);
    sb_puts(&o, "\n");
    if (!d.metrics.loaded && !d.monitor.loaded) sb_puts(&o, "no metrics.csv or monitor.csv yet\n");
    live_text(&s, &o);
    if (d.loss && d.n > 1) {
        sb_puts(&o, "loss  ");
        sparkline(&o, d.loss, d.n, 48);
        sb_puts(&o, "\n");
    }
    if (d.f1 && d.ne > 1) {
        sb_puts(&o, "F1    ");
        sparkline(&o, d.f1, d.ne, 48);
        sb_puts(&o, "\n");
    }
    if (d.notes.n) sb_printf(&o, "note: %s", d.notes.p);
    if (!tty) sb_puts(&o, "\n");
    fwrite(o.p, 1, o.n, stdout);
    fflush(stdout);
    *done = !strcmp(s.state, "done");
    sb_free(&o);
    rundir_free(&d);
    return 0;
}

int cmd_watch(int argc, char **argv)
{
    double interval = 2;
    int once = 0;
    int64_t count = 0;
    const arg_spec specs[] = {
        {"interval", ARG_DOUBLE, &interval, "S", "seconds between refreshes", .min = 0.1, .max = 86400},
        {"once", ARG_FLAG, &once, NULL, "print once and exit", .min = 0},
        {"count", ARG_I64, &count, "N", "exit after N refreshes (0 = until the run is done or Ctrl-C)", .min = 0, .max = 1e12},
        {0},
    };
    const char *run;
    int rc = cli_parse_run("watch", "bertc watch RUN [--interval S] [--once]", specs, argc, argv, &run);
    if (rc) return rc == ARGS_HELP ? 0 : rc;
    if (!path_is_dir(run)) return err_set(ERR_INPUT, "watch: %s is not a run directory", run);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    int tty = isatty(STDOUT_FILENO);
    for (int64_t i = 1; !g_quit; i++) {
        int done = 0;
        rc = frame(run, once ? 0 : interval, tty && !once, &done);
        if (rc || once || done || (count > 0 && i >= count)) break;
        /* sleep in small slices so Ctrl-C quits at once */
        for (double t = 0; t < interval && !g_quit; t += 0.1) usleep(100000);
    }
    return rc;
}
