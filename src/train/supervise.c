/* The --supervise parent process (supervise.h). */
#define _GNU_SOURCE
#include "train/supervise.h"

#include "core/alloc.h"
#include "core/args.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/fileio.h"
#include "train/ckpt.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* Written by the signal handler, read by the loop. */
static volatile sig_atomic_t g_child;
static volatile sig_atomic_t g_stop_sig;

static void on_stop(int sig)
{
    int saved = errno;
    if (!g_stop_sig) g_stop_sig = sig;
    pid_t p = (pid_t)g_child;
    /* Every signal is passed on, so a second Ctrl-C ends the child at once,
     * as it would without a supervisor. SIGHUP (the terminal went away)
     * becomes SIGTERM, which the trainer turns into a clean save. */
    if (p > 0) kill(p, sig == SIGHUP ? SIGTERM : sig);
    errno = saved;
}

/* Ctrl-Z: the child is in its own process group, so the terminal's SIGTSTP
 * reached only us. Stop the child, stop ourselves the default way, and when
 * the shell continues us (fg, bg), continue the child. */
static void on_tstp(int sig)
{
    int saved = errno;
    pid_t p = (pid_t)g_child;
    if (p > 0) kill(p, SIGSTOP);
    struct sigaction dfl, mine;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, &mine);
    raise(sig); /* SA_NODEFER lets it in now: we stop here until SIGCONT */
    sigaction(sig, &mine, NULL);
    if (p > 0) kill(p, SIGCONT);
    errno = saved;
}

static const int k_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGTSTP};
#define N_SIGNALS 4

char **supervise_child_argv(const char *prog, int argc, char **argv, int restart, int *argc_out)
{
    char **out = xcalloc((size_t)argc + 4, sizeof *out);
    int n = 0, k = 0;
    out[n++] = (char *)prog;
    if (argc > 0) out[n++] = argv[k++];
    for (; k < argc; k++) {
        const char *a = argv[k];
        if (!strcmp(a, "--")) break;
        if (!strcmp(a, "--supervise") || (restart && !strcmp(a, "--resume"))) {
            k++; /* and its value */
            continue;
        }
        if (!strncmp(a, "--supervise=", 12) || (restart && !strncmp(a, "--resume=", 9))) continue;
        out[n++] = argv[k];
    }
    if (restart) {
        out[n++] = "--resume";
        out[n++] = "auto";
    }
    for (; k < argc; k++) out[n++] = argv[k];
    out[n] = NULL;
    *argc_out = n;
    return out;
}

int supervise_restartable(int status)
{
    if (WIFSIGNALED(status)) return 1;
    if (!WIFEXITED(status)) return 0;
    int code = WEXITSTATUS(status);
    return code != 0 && code != ERR_INPUT && code != ERR_STOPPED;
}

int supervise_exit_code(int status)
{
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

double supervise_backoff(double base, int k)
{
    if (!(base > 0) || k < 1) return 0;
    double d = base;
    for (int i = 1; i < k && d < SUPERVISE_BACKOFF_MAX_S; i++) d *= 2;
    return d < SUPERVISE_BACKOFF_MAX_S ? d : SUPERVISE_BACKOFF_MAX_S;
}

#define ERROR_FD_ENV "BERTC_SUPERVISE_ERROR_FD"
#define ERROR_LINE_MAX 1024

void supervise_note_error(const char *msg)
{
    const char *s = getenv(ERROR_FD_ENV);
    char *end;
    if (!s || !*s || !msg) return;
    long fd = strtol(s, &end, 10);
    if (*end || fd < 3 || fd > 1 << 20) return;
    char line[ERROR_LINE_MAX + 1];
    size_t n = strlen(msg) < ERROR_LINE_MAX ? strlen(msg) : ERROR_LINE_MAX;
    memcpy(line, msg, n);
    line[n++] = '\n';
    /* The pipe is non-blocking: a full pipe loses the line, never the exit. */
    ssize_t w = write((int)fd, line, n);
    (void)w;
}

int supervise_same_failure(int status_a, const char *msg_a, long long ckpt_a, int status_b, const char *msg_b,
                           long long ckpt_b)
{
    if (!WIFEXITED(status_a) || !WIFEXITED(status_b)) return 0;
    if (WEXITSTATUS(status_a) != WEXITSTATUS(status_b) || ckpt_a != ckpt_b) return 0;
    return msg_a && msg_b && msg_a[0] && !strcmp(msg_a, msg_b);
}

/* The last line the child wrote into the error pipe (read end, non-blocking,
 * the child gone): into buf, "" when none. */
static void read_error_line(int fd, char *buf, size_t cap)
{
    char chunk[ERROR_LINE_MAX + 1];
    buf[0] = 0;
    for (;;) {
        ssize_t r = read(fd, chunk, sizeof chunk - 1);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        chunk[r] = 0;
        /* one write() per line, so each read ends at a line end; keep the last */
        char *nl;
        while ((nl = strrchr(chunk, '\n')) && nl[1] == 0) *nl = 0;
        char *last = strrchr(chunk, '\n');
        snprintf(buf, cap, "%s", last ? last + 1 : chunk);
    }
}

static double backoff_base(void)
{
    const char *s = getenv("BERTC_SUPERVISE_BACKOFF_S");
    double v;
    if (!s || !*s) return 1;
    if (parse_double(s, 0, SUPERVISE_BACKOFF_MAX_S, "BERTC_SUPERVISE_BACKOFF_S", &v) != 0) {
        log_warn("supervise: %s; using 1 s", err_msg());
        err_clear();
        return 1;
    }
    return v;
}

static void describe(char *buf, size_t cap, int status)
{
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        const char *abbr = sigabbrev_np(sig);
        snprintf(buf, cap, "was killed by signal %d (SIG%s)", sig, abbr ? abbr : "?");
    } else {
        snprintf(buf, cap, "exited with code %d", supervise_exit_code(status));
    }
}

/* Newest checkpoint dir by name; -1 when none (a listing, no CRC check:
 * the child verifies when it resumes). */
static long long newest_checkpoint(const char *run_dir)
{
    if (!run_dir) return -1;
    int64_t *steps = NULL;
    int n = 0;
    if (ckpt_list(run_dir, &steps, &n) != 0) {
        err_clear();
        return -1;
    }
    long long s = n > 0 ? (long long)steps[n - 1] : -1;
    free(steps);
    return s;
}

/* One row of RUN/restarts.csv, appended and synced. A failure here is a
 * warning: losing the log must not stop the training it records. */
static void log_row(const char *run_dir, int attempt, pid_t pid, int status, double runtime, long long ckpt,
                    const char *action, double backoff)
{
    if (!run_dir) return;
    if (mkdir_p(run_dir) != 0) {
        log_warn("supervise: %s (restart not logged)", err_msg());
        err_clear();
        return;
    }
    char path[4096], stamp[32] = "", sig[32] = "";
    path_join(path, sizeof path, run_dir, SUPERVISE_LOG);
    time_t t = time(NULL);
    struct tm tm;
    if (gmtime_r(&t, &tm)) strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
    if (WIFSIGNALED(status)) {
        const char *abbr = sigabbrev_np(WTERMSIG(status));
        snprintf(sig, sizeof sig, "SIG%s", abbr ? abbr : "?");
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
        log_warn("supervise: %s: %s (restart not logged)", path, strerror(errno));
        return;
    }
    char row[512];
    int len = 0;
    off_t end = lseek(fd, 0, SEEK_END);
    if (end == 0) len = snprintf(row, sizeof row, "%s\n", SUPERVISE_HEADER);
    len += snprintf(row + len, sizeof row - (size_t)len, "%s,%d,%ld,%d,%s,%.3f,%lld,%s,%.3f\n", stamp, attempt,
                    (long)pid, supervise_exit_code(status), sig, runtime, ckpt, action, backoff);
    /* One write of the whole row: O_APPEND keeps rows whole. */
    if (write(fd, row, (size_t)len) != (ssize_t)len || fsync(fd) != 0)
        log_warn("supervise: %s: %s (restart not logged)", path, strerror(errno));
    close(fd);
}

/* envp for the child: ours, with BERTC_SUPERVISE_ATTEMPT replaced. Built
 * before fork so the child only calls async-signal-safe functions. */
static char **child_env(int attempt, char *slot, size_t cap, int error_fd, char *fd_slot, size_t fd_cap)
{
    size_t n = 0;
    while (environ && environ[n]) n++;
    char **env = xcalloc(n + 3, sizeof *env);
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "BERTC_SUPERVISE_ATTEMPT=", 24) != 0 &&
            strncmp(environ[i], ERROR_FD_ENV "=", sizeof ERROR_FD_ENV) != 0)
            env[m++] = environ[i];
    snprintf(slot, cap, "BERTC_SUPERVISE_ATTEMPT=%d", attempt);
    env[m++] = slot;
    if (error_fd >= 0) {
        snprintf(fd_slot, fd_cap, ERROR_FD_ENV "=%d", error_fd);
        env[m++] = fd_slot;
    }
    env[m] = NULL;
    return env;
}

/* Starts one attempt; returns its pid, or -1 with an error set. */
static pid_t start_child(char **cargv, char **cenv, const sigset_t *old_mask, int error_fd)
{
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) != 0) return err_set(ERR_RUNTIME, "supervise: pipe: %s", strerror(errno)), -1;
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        close(pfd[0]);
        close(pfd[1]);
        return err_set(ERR_RUNTIME, "supervise: fork: %s", strerror(errno)), -1;
    }
    if (pid == 0) {
        /* Only async-signal-safe calls from here to exec. */
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent) _exit(ERR_STOPPED); /* the supervisor is already gone */
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        for (int i = 0; i < N_SIGNALS; i++) {
            struct sigaction cur;
            if (sigaction(k_signals[i], NULL, &cur) == 0 && (cur.sa_handler == on_stop || cur.sa_handler == on_tstp))
                sigaction(k_signals[i], &dfl, NULL);
        }
        sigprocmask(SIG_SETMASK, old_mask, NULL);
        if (error_fd >= 0) fcntl(error_fd, F_SETFD, 0); /* the one descriptor the trainer inherits */
        execve("/proc/self/exe", cargv, cenv);
        int e = errno;
        ssize_t w = write(pfd[1], &e, sizeof e);
        (void)w;
        _exit(127);
    }
    /* Both sides set the group, so it is in place whichever runs first. */
    setpgid(pid, pid);
    close(pfd[1]);
    int e = 0;
    ssize_t r;
    do r = read(pfd[0], &e, sizeof e);
    while (r < 0 && errno == EINTR);
    close(pfd[0]);
    if (r == (ssize_t)sizeof e) {
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {}
        return err_set(ERR_RUNTIME, "supervise: cannot run /proc/self/exe: %s", strerror(e)), -1;
    }
    return pid;
}

/* Sleeps up to s seconds; returns early (1) when a stop signal came. */
static int backoff_sleep(double s)
{
    double until = clock_now_s() + s;
    while (!g_stop_sig) {
        double left = until - clock_now_s();
        if (left <= 0) return 0;
        struct timespec ts = {(time_t)left, (long)((left - floor(left)) * 1e9)};
        nanosleep(&ts, NULL); /* a signal cuts it short: EINTR */
    }
    return 1;
}

/* Installs the handlers with the signals blocked (*block, the mask before
 * in *old_mask); a signal that was ignored when we started (nohup, a
 * background job) stays ignored. */
static void install_handlers(sigset_t *block, sigset_t *old_mask, struct sigaction *old_sa)
{
    sigemptyset(block);
    for (int i = 0; i < N_SIGNALS; i++) sigaddset(block, k_signals[i]);
    sigprocmask(SIG_BLOCK, block, old_mask);
    for (int i = 0; i < N_SIGNALS; i++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = k_signals[i] == SIGTSTP ? on_tstp : on_stop;
        sa.sa_flags = SA_RESTART | (k_signals[i] == SIGTSTP ? SA_NODEFER : 0);
        sigemptyset(&sa.sa_mask);
        sigaction(k_signals[i], NULL, &old_sa[i]);
        if (old_sa[i].sa_handler != SIG_IGN) sigaction(k_signals[i], &sa, NULL);
    }
}

/* One attempt, from the start of the child to its end: *pid, its wait
 * status, its run time and the error line it sent back (msg). ERR_RUNTIME
 * when it could not start or be waited for. */
static int run_attempt(int attempt, int argc, char **argv, const sigset_t *block, const sigset_t *old_mask,
                       pid_t *pid_out, int *status_out, double *runtime, char *msg, size_t cap)
{
    int cargc;
    char slot[64], fd_slot[64];
    /* The child's error line comes back through this pipe (both ends
     * non-blocking: a child never waits on it). Without one, repeats go
     * unseen and every failure is restarted, as before. */
    int efd[2] = {-1, -1};
    if (pipe2(efd, O_CLOEXEC | O_NONBLOCK) != 0) efd[0] = efd[1] = -1;
    char **cargv = supervise_child_argv(program_invocation_name, argc, argv, attempt > 1, &cargc);
    char **cenv = child_env(attempt, slot, sizeof slot, efd[1], fd_slot, sizeof fd_slot);
    double t0 = clock_now_s();
    pid_t pid = start_child(cargv, cenv, old_mask, efd[1]);
    free(cargv);
    free(cenv);
    if (efd[1] >= 0) close(efd[1]);
    *pid_out = pid;
    if (pid < 0) {
        if (efd[0] >= 0) close(efd[0]);
        return ERR_RUNTIME;
    }
    /* A stop signal that came since the block is pending: its handler
     * runs on the unblock and passes it on to this child. */
    g_child = (sig_atomic_t)pid;
    sigprocmask(SIG_SETMASK, old_mask, NULL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno == EINTR) continue;
        status = -1;
        break;
    }
    sigprocmask(SIG_BLOCK, block, NULL);
    g_child = 0;
    *runtime = clock_now_s() - t0;
    *status_out = status;
    if (status == -1) {
        if (efd[0] >= 0) close(efd[0]);
        return err_set(ERR_RUNTIME, "supervise: waitpid: %s", strerror(errno));
    }
    msg[0] = 0;
    if (efd[0] >= 0) {
        read_error_line(efd[0], msg, cap);
        close(efd[0]);
    }
    return 0;
}

int supervise_run(int max_restarts, int argc, char **argv, const char *run_dir)
{
    if (max_restarts < 0 || max_restarts > SUPERVISE_MAX_RESTARTS)
        return err_set(ERR_INPUT, "--supervise %d: must be 0..%d", max_restarts, SUPERVISE_MAX_RESTARTS);
    double base = backoff_base();
    g_child = 0;
    g_stop_sig = 0;

    sigset_t block, old_mask;
    struct sigaction old_sa[N_SIGNALS];
    install_handlers(&block, &old_mask, old_sa);

    int rc = 0, restarts = 0;
    /* the previous failed attempt, to see a failure repeat */
    int prev_status = 0;
    long long prev_ckpt = -1;
    char prev_msg[ERROR_LINE_MAX + 1] = "", msg[ERROR_LINE_MAX + 1];
    for (int attempt = 1;; attempt++) {
        pid_t pid;
        int status = 0;
        double runtime = 0;
        rc = run_attempt(attempt, argc, argv, &block, &old_mask, &pid, &status, &runtime, msg, sizeof msg);
        if (rc) break;
        rc = supervise_exit_code(status);
        char what[96];
        describe(what, sizeof what, status);
        long long ckpt = newest_checkpoint(run_dir);

        if (g_stop_sig || !supervise_restartable(status)) {
            const char *action = rc == 0                                ? "done"
                                 : g_stop_sig || rc == ERR_STOPPED     ? "stopped"
                                                                        : "not-restartable";
            if (restarts > 0) log_row(run_dir, attempt, pid, status, runtime, ckpt, action, 0);
            /* The child said what went wrong; nothing to add. */
            err_clear();
            break;
        }
        if (attempt > 1 && supervise_same_failure(prev_status, prev_msg, prev_ckpt, status, msg, ckpt)) {
            log_row(run_dir, attempt, pid, status, runtime, ckpt, "repeated", 0);
            char newest[48] = "no checkpoint";
            if (ckpt >= 0) snprintf(newest, sizeof newest, "newest checkpoint step %lld", ckpt);
            err_set(ERR_RUNTIME,
                    "supervise: attempt %d failed as attempt %d did (exit %d, %s, the same error), so a restart "
                    "would fail again; not restarting (%d restart%s left): %s",
                    attempt, attempt - 1, rc, newest, max_restarts - restarts, max_restarts - restarts == 1 ? "" : "s",
                    msg);
            break;
        }
        prev_status = status;
        prev_ckpt = ckpt;
        snprintf(prev_msg, sizeof prev_msg, "%s", msg);
        if (restarts >= max_restarts) {
            if (restarts > 0) log_row(run_dir, attempt, pid, status, runtime, ckpt, "gave-up", 0);
            err_set(ERR_RUNTIME, "supervise: attempt %d %s after %.1f s; giving up after %d restart%s", attempt, what, runtime,
                    restarts, restarts == 1 ? "" : "s");
            break;
        }
        restarts++;
        double wait = supervise_backoff(base, restarts);
        log_row(run_dir, attempt, pid, status, runtime, ckpt, "restart", wait);
        char newest[48] = "none yet";
        if (ckpt >= 0) snprintf(newest, sizeof newest, "step %lld", ckpt);
        log_warn("supervise: attempt %d %s after %.1f s; restart %d of %d in %.3g s with --resume auto (newest checkpoint: %s)",
                 attempt, what, runtime, restarts, max_restarts, wait, newest);
        sigprocmask(SIG_SETMASK, &old_mask, NULL);
        int stopped = backoff_sleep(wait);
        sigprocmask(SIG_BLOCK, &block, NULL);
        if (stopped || g_stop_sig) {
            log_warn("supervise: stopped by signal %d during the back-off; run the same command to resume",
                     (int)g_stop_sig);
            err_clear();
            rc = ERR_STOPPED;
            break;
        }
    }

    for (int i = 0; i < N_SIGNALS; i++)
        if (old_sa[i].sa_handler != SIG_IGN) sigaction(k_signals[i], &old_sa[i], NULL);
    sigprocmask(SIG_SETMASK, &old_mask, NULL);
    return rc;
}
