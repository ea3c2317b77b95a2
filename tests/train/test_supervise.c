/* supervise.c without the trainer: the test binary is its own fake trainer.
 * supervise_run re-executes /proc/self/exe, which is this program; with
 * SUPTEST_MODE in the environment main() plays the child instead of running
 * the tests: it records its argv and attempt number under SUPTEST_DIR, then
 * crashes, exits with a given code or waits for a signal, as told. */
#define _GNU_SOURCE
#include "testutil.h"

#include "core/clock.h"
#include "core/err.h"
#include "core/fileio.h"
#include "train/supervise.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---------------- the fake trainer ---------------- */

static volatile sig_atomic_t g_nsig, g_firstsig;
static void child_on_signal(int sig)
{
    if (!g_nsig) g_firstsig = sig;
    g_nsig++;
}

static void child_write(const char *dir, const char *name, int attempt, const char *text)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.%d", dir, name, attempt);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static int child_main(const char *mode, int argc, char **argv)
{
    const char *dir = getenv("SUPTEST_DIR"), *att = getenv("BERTC_SUPERVISE_ATTEMPT");
    int attempt = att ? atoi(att) : 0;
    if (!dir) return 99;
    char text[8192] = "";
    for (int i = 1; i < argc; i++) {
        strncat(text, argv[i], sizeof text - strlen(text) - 2);
        strcat(text, "\n");
    }
    child_write(dir, "args", attempt, text);
    char path[4096];
    snprintf(path, sizeof path, "%s/attempts", dir);
    FILE *f = fopen(path, "a");
    if (f) {
        fprintf(f, "%d\n", attempt);
        fclose(f);
    }
    if (!strcmp(mode, "exit")) return atoi(getenv("SUPTEST_CODE") ? getenv("SUPTEST_CODE") : "0");
    if (!strcmp(mode, "crash")) {
        int crashes = atoi(getenv("SUPTEST_CRASHES") ? getenv("SUPTEST_CRASHES") : "0");
        const char *how = getenv("SUPTEST_HOW") ? getenv("SUPTEST_HOW") : "kill";
        if (attempt > crashes) return 0;
        if (!strcmp(how, "kill")) raise(SIGKILL);
        if (!strcmp(how, "abort")) {
            signal(SIGABRT, SIG_DFL);
            raise(SIGABRT);
        }
        if (!strcmp(how, "exit3")) return 3;
        /* an error line as main() passes it back: the same every time, or
         * one that names the attempt (a failure that moves on) */
        if (!strcmp(how, "same")) supervise_note_error("bad data at step 6");
        if (!strcmp(how, "moving")) {
            snprintf(text, sizeof text, "bad data at step %d", 6 * attempt);
            supervise_note_error(text);
        }
        return 1;
    }
    if (!strcmp(mode, "wait") || !strcmp(mode, "orphan")) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = child_on_signal;
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        char pg[64];
        snprintf(pg, sizeof pg, "%d %d\n", (int)getpid(), (int)getpgrp());
        child_write(dir, "ready", attempt, pg);
        for (int i = 0; i < 1000 && !g_nsig; i++) usleep(10000);
        if (!g_nsig) {
            child_write(dir, "signals", attempt, "timeout\n");
            return 1;
        }
        usleep(300000); /* a duplicate signal would arrive by now */
        snprintf(text, sizeof text, "%d %d\n", (int)g_nsig, (int)g_firstsig);
        child_write(dir, "signals", attempt, text);
        return 75;
    }
    return 98;
}

/* ---------------- helpers ---------------- */

static char g_dir[2048];
static int g_case;

/* A fresh record dir for one case; SUPTEST_DIR points at it. */
static const char *new_case(const char *mode)
{
    snprintf(g_dir, sizeof g_dir, "%s/case%02d", tu_tmpdir(), ++g_case);
    mkdir_p(g_dir);
    setenv("SUPTEST_DIR", g_dir, 1);
    setenv("SUPTEST_MODE", mode, 1);
    return g_dir;
}

static char *read_rec(const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    return tu_read_text(path);
}

static int wait_file(const char *name, double seconds)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    for (double t0 = clock_now_s(); clock_now_s() - t0 < seconds; usleep(10000))
        if (path_exists(path)) return 1;
    return 0;
}

/* supervise_run in a process of its own, in its own process group (as a
 * shell's foreground job would be), so the test can signal it. */
static pid_t fork_supervisor(int max, int argc, char **argv, const char *run)
{
    fflush(NULL); /* or the copy in the child prints our buffered lines again */
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        int rc = supervise_run(max, argc, argv, run);
        fflush(NULL);
        _exit(rc);
    }
    setpgid(pid, pid);
    return pid;
}

static int wait_status(pid_t pid)
{
    int st = -1;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    return st;
}

/* The 9 cells of a restarts.csv row (up to its newline); returns how many. */
static int split_row(const char *line, char f[9][64])
{
    int n = 0, k = 0;
    for (const char *p = line;; p++) {
        if (*p == ',' || *p == '\n' || !*p) {
            if (n < 9) f[n][k] = 0;
            n++;
            k = 0;
            if (*p != ',') break;
        } else if (n < 9 && k < 63) {
            f[n][k++] = *p;
        }
    }
    return n;
}

/* ---------------- the cases ---------------- */

static void test_argv(void)
{
    char *a[] = {"train", "--model", "m", "--supervise", "3", "--resume", "never", "--out", "R", "--no-shuffle"};
    int n;
    char **c = supervise_child_argv("prog", 10, a, 0, &n);
    const char *want0[] = {"prog", "train", "--model", "m", "--resume", "never", "--out", "R", "--no-shuffle"};
    int ok = n == 9 && c[9] == NULL;
    for (int i = 0; ok && i < 9; i++) ok = !strcmp(c[i], want0[i]);
    CHECK(ok, "first attempt: %d args, want 9 (prog train --model m --resume never --out R --no-shuffle)", n);
    free(c);
    c = supervise_child_argv("prog", 10, a, 1, &n);
    const char *want1[] = {"prog", "train", "--model", "m", "--out", "R", "--no-shuffle", "--resume", "auto"};
    ok = n == 9 && c[9] == NULL;
    for (int i = 0; ok && i < 9; i++) ok = !strcmp(c[i], want1[i]);
    CHECK(ok, "restart: %d args, want 9 (... --no-shuffle --resume auto)", n);
    free(c);
    char *b[] = {"train", "--supervise=2", "--resume=x/step-1", "--out", "R", "--", "--resume", "pos"};
    c = supervise_child_argv("prog", 8, b, 1, &n);
    const char *want2[] = {"prog", "train", "--out", "R", "--resume", "auto", "--", "--resume", "pos"};
    ok = n == 9;
    for (int i = 0; ok && i < 9; i++) ok = !strcmp(c[i], want2[i]);
    CHECK(ok, "--opt=value forms and '--': %d args, want 9", n);
    free(c);
    printf("child argv: first attempt as given minus --supervise; restarts with --resume auto\n");
}

static void test_policy(void)
{
    double want[] = {1, 2, 4, 8, 16, 32, 60, 60};
    for (int k = 1; k <= 8; k++)
        CHECK(supervise_backoff(1, k) == want[k - 1], "backoff(1, %d) = %g, want %g", k, supervise_backoff(1, k),
              want[k - 1]);
    CHECK(supervise_backoff(0, 3) == 0 && supervise_backoff(0.5, 2) == 1 && supervise_backoff(1, 1000) == 60,
          "backoff base 0 / 0.5 / cap");
    /* waitpid statuses: exit code c is c << 8, a signal is its number. */
    struct {
        int status, restart, code;
    } cases[] = {{0 << 8, 0, 0}, {1 << 8, 1, 1}, {2 << 8, 0, 2}, {75 << 8, 0, 75}, {3 << 8, 1, 3},
                 {SIGKILL, 1, 137}, {SIGSEGV, 1, 139}, {SIGABRT, 1, 134}, {SIGTERM, 1, 143}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK(supervise_restartable(cases[i].status) == cases[i].restart, "status %#x: restartable %d, want %d",
              cases[i].status, supervise_restartable(cases[i].status), cases[i].restart);
        CHECK(supervise_exit_code(cases[i].status) == cases[i].code, "status %#x: code %d, want %d", cases[i].status,
              supervise_exit_code(cases[i].status), cases[i].code);
    }
    printf("back-off 1,2,4,...,60; restart on signals and exit codes other than 0, 2, 75\n");
    /* a repeat: the same exit code, error line and checkpoint; signals never */
    CHECK(supervise_same_failure(1 << 8, "e", 4, 1 << 8, "e", 4), "same code, line, checkpoint: a repeat");
    CHECK(supervise_same_failure(1 << 8, "e", -1, 1 << 8, "e", -1), "no checkpoint either time: a repeat");
    CHECK(!supervise_same_failure(1 << 8, "e", 4, 1 << 8, "e", 8), "a new checkpoint: no repeat");
    CHECK(!supervise_same_failure(1 << 8, "e", 4, 1 << 8, "f", 4), "another line: no repeat");
    CHECK(!supervise_same_failure(1 << 8, "e", 4, 3 << 8, "e", 4), "another code: no repeat");
    CHECK(!supervise_same_failure(1 << 8, "", 4, 1 << 8, "", 4), "no line: no repeat");
    CHECK(!supervise_same_failure(SIGKILL, "", 4, SIGKILL, "", 4), "SIGKILL twice: no repeat");
    CHECK(!supervise_same_failure(SIGSEGV, "e", 4, SIGSEGV, "e", 4), "SIGSEGV twice: no repeat");
    printf("repeat = same exit code, error line and newest checkpoint; never for signals\n");
}

/* Crashes K times, then succeeds: K restarts, the log, the arguments. */
static void test_crash_then_done(const char *how, const char *signame, int code)
{
    new_case("crash");
    setenv("SUPTEST_CRASHES", "2", 1);
    setenv("SUPTEST_HOW", how, 1);
    char run[4200];
    snprintf(run, sizeof run, "%s/run", g_dir); /* not there yet: the supervisor makes it to log */
    char *a[] = {"train", "--model", "m", "--supervise", "3", "--resume", "never", "--out", run};
    double t0 = clock_now_s();
    err_clear();
    int rc = supervise_run(3, 9, a, run);
    double dt = clock_now_s() - t0;
    char *att = read_rec("attempts"), *a1 = read_rec("args.1"), *a3 = read_rec("args.3");
    printf("crash by %s twice, then done: rc %d, %d attempts in %.2f s\n", how, rc, tu_count_lines(att), dt);
    CHECK(rc == 0 && err_code() == 0, "rc %d (err '%s'), want 0", rc, err_msg());
    CHECK(att && !strcmp(att, "1\n2\n3\n"), "attempts '%s', want 1 2 3", att ? att : "(none)");
    CHECK(dt >= 0.05 + 0.1 - 0.01, "back-off 0.05 s then 0.1 s, but all took %.3f s", dt);
    CHECK(a1 && strstr(a1, "--resume\nnever\n") && !strstr(a1, "--supervise") && !strstr(a1, "\n3\n"),
          "attempt 1 args: %s", a1 ? a1 : "(none)");
    CHECK(a3 && strstr(a3, "--resume\nauto\n") && !strstr(a3, "never") && !strstr(a3, "--supervise"),
          "attempt 3 args: %s", a3 ? a3 : "(none)");
    char path[4300], *log = NULL;
    size_t len;
    snprintf(path, sizeof path, "%s/%s", run, SUPERVISE_LOG);
    int have = file_read_all(path, &log, &len) == 0;
    err_clear();
    printf("%s", have ? log : "(no restarts.csv)\n");
    CHECK(have && tu_count_lines(log) == 4, "restarts.csv: %d lines, want header + 3", have ? tu_count_lines(log) : 0);
    if (have) {
        char *l1 = strchr(log, '\n') + 1, *l2 = strchr(l1, '\n') + 1, *l3 = strchr(l2, '\n') + 1;
        CHECK(!strncmp(log, SUPERVISE_HEADER "\n", strlen(SUPERVISE_HEADER) + 1), "header");
        char f[9][64];
        int nf = split_row(l1, f);
        CHECK(nf == 9 && !strcmp(f[1], "1") && atoi(f[3]) == code && !strcmp(f[4], signame) && !strcmp(f[6], "-1") &&
                  !strcmp(f[7], "restart") && atof(f[8]) == 0.05 && atof(f[5]) >= 0,
              "row 1: '%.*s' (%d fields)", (int)(l2 - l1 - 1), l1, nf);
        CHECK(strstr(l2, ",2,") && strstr(l2, ",restart,0.100"), "row 2: %.*s", (int)(l3 - l2 - 1), l2);
        CHECK(strstr(l3, ",3,") && strstr(l3, ",0,,") && strstr(l3, ",done,"), "row 3: %s", l3);
    }
    free(log);
    free(att);
    free(a1);
    free(a3);
}

/* A fresh case whose fake trainer always fails the way SUPTEST_HOW says:
 * supervise_run(max_restarts) on "train --out RUN" (g_run); the attempts
 * record and restarts.csv (NULL when absent) come back malloc'ed. */
static char g_run[4200];
static int always_failing(const char *how, int max_restarts, char **att, char **log)
{
    new_case("crash");
    setenv("SUPTEST_CRASHES", "100", 1);
    setenv("SUPTEST_HOW", how, 1);
    snprintf(g_run, sizeof g_run, "%s/run", g_dir);
    char *a[] = {"train", "--out", g_run};
    err_clear();
    int rc = supervise_run(max_restarts, 3, a, g_run);
    /* reading the records must not change the error the caller checks */
    char msg[1024];
    int code = err_code();
    snprintf(msg, sizeof msg, "%s", err_msg());
    *att = read_rec("attempts");
    *log = read_rec("run/" SUPERVISE_LOG);
    err_clear();
    if (code) err_set(code, "%s", msg);
    return rc;
}

static void test_gives_up(void)
{
    char *att, *log;
    int rc = always_failing("exit1", 2, &att, &log);
    printf("always exit 1, --supervise 2: rc %d, '%s', %d attempts\n", rc, err_msg(), tu_count_lines(att));
    CHECK(rc == 1 && err_code() == ERR_RUNTIME && strstr(err_msg(), "giving up after 2 restarts") &&
              strstr(err_msg(), "attempt 3 exited with code 1"),
          "rc %d, message '%s'", rc, err_msg());
    CHECK(tu_count_lines(att) == 3, "%d attempts, want 3", tu_count_lines(att));
    CHECK(log && tu_count_lines(log) == 4 && strstr(log, ",restart,") && strstr(log, ",3,") && strstr(log, ",gave-up,"),
          "restarts.csv:\n%s", log ? log : "(none)");
    free(att);
    free(log);

    /* --supervise 0: one attempt, its signal as 128+N, no log. */
    rc = always_failing("kill", 0, &att, &log);
    printf("SIGKILL, --supervise 0: rc %d, '%s'\n", rc, err_msg());
    CHECK(rc == 137 && strstr(err_msg(), "signal 9 (SIGKILL)") && strstr(err_msg(), "giving up after 0 restarts"),
          "rc %d, '%s'", rc, err_msg());
    CHECK(tu_count_lines(att) == 1 && !path_exists(g_run), "%d attempts, run dir %s", tu_count_lines(att),
          path_exists(g_run) ? "made" : "absent");
    free(att);
    free(log);
}

/* The same error line twice: stop after 2 attempts, not max + 1. An error
 * that changes is restarted as before. */
static void test_repeat(void)
{
    char *att, *log;
    int rc = always_failing("same", 5, &att, &log);
    printf("the same error every time, --supervise 5: rc %d, %d attempts, '%s'\n", rc, tu_count_lines(att), err_msg());
    CHECK(rc == 1 && err_code() == ERR_RUNTIME && strstr(err_msg(), "attempt 2 failed as attempt 1 did") &&
              strstr(err_msg(), "(4 restarts left): bad data at step 6"),
          "rc %d, message '%s'", rc, err_msg());
    CHECK(tu_count_lines(att) == 2, "%d attempts, want 2", tu_count_lines(att));
    CHECK(log && tu_count_lines(log) == 3 && strstr(log, ",1,,") && strstr(log, ",restart,") &&
              strstr(log, ",repeated,"),
          "restarts.csv:\n%s", log ? log : "(none)");
    free(att);
    free(log);

    rc = always_failing("moving", 3, &att, &log);
    printf("an error that changes, --supervise 3: rc %d, %d attempts, '%s'\n", rc, tu_count_lines(att), err_msg());
    CHECK(rc == 1 && tu_count_lines(att) == 4 && strstr(err_msg(), "giving up after 3 restarts"),
          "rc %d, %d attempts, '%s'", rc, tu_count_lines(att), err_msg());
    free(att);
    free(log);
    unsetenv("SUPTEST_CRASHES");
    unsetenv("SUPTEST_HOW");
}

/* 0, 2 and 75 end the supervisor with no restart, no log and no message. */
static void test_no_restart(void)
{
    int codes[] = {0, 2, 75};
    for (int i = 0; i < 3; i++) {
        new_case("exit");
        char c[8], run[4200];
        snprintf(c, sizeof c, "%d", codes[i]);
        setenv("SUPTEST_CODE", c, 1);
        snprintf(run, sizeof run, "%s/run", g_dir);
        char *a[] = {"train", "--out", run, "--supervise=5"};
        err_set(ERR_RUNTIME, "stale");
        int rc = supervise_run(5, 4, a, run);
        char *att = read_rec("attempts"), *a1 = read_rec("args.1");
        printf("exit %d: rc %d, %d attempt(s), run dir %s\n", codes[i], rc, tu_count_lines(att),
               path_exists(run) ? "made" : "absent");
        CHECK(rc == codes[i] && err_code() == 0, "rc %d err %d, want %d and no message", rc, err_code(), codes[i]);
        CHECK(tu_count_lines(att) == 1, "exit %d was restarted: %d attempts", codes[i], tu_count_lines(att));
        CHECK(!path_exists(run), "exit %d: the supervisor made %s", codes[i], run);
        CHECK(a1 && !strstr(a1, "--supervise"), "args %s", a1 ? a1 : "(none)");
        free(att);
        free(a1);
    }
}

/* SIGTERM to the supervisor, and SIGINT to its whole process group (a
 * Ctrl-C): the child gets exactly one, the run ends with 75, no restart. */
static void test_forwarding(int sig, int to_group)
{
    new_case("wait");
    char run[4200];
    snprintf(run, sizeof run, "%s/run", g_dir);
    char *a[] = {"train", "--out", run};
    pid_t sup = fork_supervisor(3, 3, a, run);
    int ready = wait_file("ready.1", 20);
    char *pg = read_rec("ready.1");
    int cpid = 0, cpgrp = 0;
    if (pg) sscanf(pg, "%d %d", &cpid, &cpgrp);
    CHECK(ready && cpgrp == cpid && cpgrp != (int)sup, "child %d in group %d (supervisor %d)", cpid, cpgrp, (int)sup);
    kill(to_group ? -sup : sup, sig);
    int st = wait_status(sup);
    char *got = read_rec("signals.1"), *att = read_rec("attempts");
    int n = 0, first = 0;
    if (got) sscanf(got, "%d %d", &n, &first);
    printf("signal %d to the supervisor%s: exit %d, child got %d signal(s), first %d, %d attempt(s)\n", sig,
           to_group ? "'s group" : "", WIFEXITED(st) ? WEXITSTATUS(st) : -1, n, first, tu_count_lines(att));
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 75, "supervisor status %#x, want exit 75", st);
    CHECK(n == 1 && first == sig, "child got %d signals, first %d; want exactly one %d", n, first, sig);
    CHECK(tu_count_lines(att) == 1 && !path_exists(run), "stopped on purpose but restarted (%d attempts)",
          tu_count_lines(att));
    free(pg);
    free(got);
    free(att);
}

/* The supervisor dies by SIGKILL: the child is told (SIGTERM) and stops. */
static void test_orphan(void)
{
    new_case("orphan");
    char *a[] = {"train"};
    pid_t sup = fork_supervisor(3, 1, a, NULL);
    int ready = wait_file("ready.1", 20);
    kill(sup, SIGKILL);
    wait_status(sup);
    int told = wait_file("signals.1", 20);
    char *got = read_rec("signals.1");
    int n = 0, first = 0;
    if (got) sscanf(got, "%d %d", &n, &first);
    printf("supervisor SIGKILLed: child told %s (%d signal(s), first %d)\n", told ? "yes" : "no", n, first);
    CHECK(ready && told && n == 1 && first == SIGTERM, "child after the supervisor died: %s", got ? got : "(nothing)");
    free(got);
}

/* State letter of a process from /proc (R, S, T stopped, Z...), '?' if gone. */
static char proc_state(int pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return '?';
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    return p && p[1] == ' ' ? p[2] : '?';
}

static int wait_state(int pid, int stopped, double seconds)
{
    for (double t0 = clock_now_s(); clock_now_s() - t0 < seconds; usleep(5000))
        if ((proc_state(pid) == 'T') == stopped) return 1;
    return 0;
}

/* Ctrl-Z (SIGTSTP to the supervisor's group) stops the child too; SIGCONT
 * (fg) continues both; the run then ends normally on SIGTERM. */
static void test_job_control(void)
{
    new_case("wait");
    char *a[] = {"train"};
    pid_t sup = fork_supervisor(3, 1, a, NULL);
    int ready = wait_file("ready.1", 20);
    char *pg = read_rec("ready.1");
    int cpid = 0;
    if (pg) sscanf(pg, "%d", &cpid);
    kill(-sup, SIGTSTP);
    int both_stopped = wait_state(cpid, 1, 5) && wait_state(sup, 1, 5);
    kill(-sup, SIGCONT);
    int both_running = wait_state(cpid, 0, 5) && wait_state(sup, 0, 5);
    kill(sup, SIGTERM);
    int st = wait_status(sup);
    char *got = read_rec("signals.1");
    int n = 0, first = 0;
    if (got) sscanf(got, "%d %d", &n, &first);
    printf("Ctrl-Z: child and supervisor stopped %s, continued %s; then SIGTERM: exit %d, child got %d signal(s)\n",
           both_stopped ? "yes" : "no", both_running ? "yes" : "no", WIFEXITED(st) ? WEXITSTATUS(st) : -1, n);
    CHECK(ready && cpid > 0 && both_stopped, "SIGTSTP did not stop child %d (%c) and supervisor %d (%c)", cpid,
          proc_state(cpid), (int)sup, proc_state(sup));
    CHECK(both_running, "SIGCONT did not continue both");
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 75 && n == 1 && first == SIGTERM, "status %#x, %d signals", st, n);
    free(pg);
    free(got);
}

/* A signal while waiting to restart: 75 at once, no new attempt. */
static void test_stop_in_backoff(void)
{
    new_case("crash");
    setenv("SUPTEST_CRASHES", "100", 1);
    setenv("SUPTEST_HOW", "exit1", 1);
    setenv("BERTC_SUPERVISE_BACKOFF_S", "30", 1);
    char run[4200];
    snprintf(run, sizeof run, "%s/run", g_dir);
    char *a[] = {"train", "--out", run};
    pid_t sup = fork_supervisor(3, 3, a, run);
    int logged = wait_file("run/" SUPERVISE_LOG, 20);
    double t0 = clock_now_s();
    kill(sup, SIGTERM);
    int st = wait_status(sup);
    double dt = clock_now_s() - t0;
    char *att = read_rec("attempts");
    printf("SIGTERM during a 30 s back-off: exit %d after %.2f s, %d attempt(s)\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1,
           dt, tu_count_lines(att));
    CHECK(logged && WIFEXITED(st) && WEXITSTATUS(st) == 75 && dt < 5, "status %#x after %.2f s", st, dt);
    CHECK(tu_count_lines(att) == 1, "%d attempts, want 1", tu_count_lines(att));
    free(att);
    setenv("BERTC_SUPERVISE_BACKOFF_S", "0.05", 1);
}

int main(int argc, char **argv)
{
    const char *mode = getenv("SUPTEST_MODE");
    if (mode) return child_main(mode, argc, argv);
    setenv("BERTC_SUPERVISE_BACKOFF_S", "0.05", 1);
    test_argv();
    test_policy();
    test_crash_then_done("kill", "SIGKILL", 137);
    test_crash_then_done("exit1", "", 1);
    test_crash_then_done("abort", "SIGABRT", 134);
    test_crash_then_done("exit3", "", 3);
    test_gives_up();
    test_repeat();
    test_no_restart();
    test_forwarding(SIGTERM, 0);
    test_forwarding(SIGINT, 1);
    test_orphan();
    test_job_control();
    test_stop_in_backoff();
    unsetenv("SUPTEST_MODE");
    return tu_done();
}
