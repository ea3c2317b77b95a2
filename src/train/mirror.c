/* Copying checkpoints to a second place in the background (see mirror.h). */
#define _GNU_SOURCE
#include "train/mirror.h"
#include "core/clock.h"
#include "train/ckpt.h"
#include "core/alloc.h"
#include "core/err.h"
#include "core/fileio.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { MIRROR_TRIES = 5 };

struct mirror {
    char dir[CKPT_PATH_MAX];
    char log_path[CKPT_PATH_MAX + 16];
    int keep;
    obs_run *obs;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;   /* work arrived, stop asked, or a copy finished */
    char pending[CKPT_PATH_MAX];
    int64_t pending_step;
    int has_pending, busy, stop;
    int copied, failed;
    int in_streak;         /* failures since the last success */
    int delay_ms, backoff_ms;
    int fail_left;         /* test hook: attempts that fail on purpose */
};

static mirror *g_left; /* a mirror whose thread outlived mirror_stop: kept reachable */

static void report(mirror *m, int64_t step, const char *result, const char *detail)
{
    char line[1400];
    snprintf(line, sizeof line, "step-%08" PRId64 " %s%s%s", step, result, *detail ? (strncmp(detail, "to ", 3) ? ": " : " ") : "", detail);
    pthread_mutex_lock(&m->lock);
    obs_run *obs = m->obs;
    if (obs) obs_set_mirror(obs, line); /* under the lock: mirror_stop may take obs away */
    pthread_mutex_unlock(&m->lock);
    FILE *f = fopen(m->log_path, "a");
    if (f) {
        fprintf(f, "%.3f %s\n", clock_unix_s(), line);
        fclose(f);
    }
}

static int copy_file(const char *src, const char *dst, int delay_ms, uint64_t *bytes)
{
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0) return err_set(ERR_RUNTIME, "%s: %s", src, strerror(errno));
    int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out < 0) {
        int e = errno;
        close(in);
        return err_set(ERR_RUNTIME, "%s: %s", dst, strerror(e));
    }
    if (delay_ms > 0) usleep((useconds_t)delay_ms * 1000);
    size_t cap = 1 << 20;
    char *buf = xmalloc(cap);
    int rc = 0;
    for (;;) {
        ssize_t r = read(in, buf, cap);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            rc = err_set(ERR_RUNTIME, "%s: %s", src, strerror(errno));
            break;
        }
        if (r == 0) break;
        for (ssize_t off = 0; off < r;) {
            ssize_t w = write(out, buf + off, (size_t)(r - off));
            if (w < 0 && errno == EINTR) continue;
            if (w < 0) {
                rc = err_set(ERR_RUNTIME, "%s: %s", dst, strerror(errno));
                break;
            }
            off += w;
        }
        if (rc) break;
        *bytes += (uint64_t)r;
    }
    free(buf);
    if (!rc && fsync(out) != 0) rc = err_set(ERR_RUNTIME, "%s: fsync: %s", dst, strerror(errno));
    if (close(out) != 0 && !rc) rc = err_set(ERR_RUNTIME, "%s: %s", dst, strerror(errno));
    close(in);
    return rc;
}

/* One attempt: 0 copied; -1 the source is gone or damaged (not retried);
 * an error code otherwise (err_msg says what). */
static int copy_once(mirror *m, const char *src, int64_t step, uint64_t *bytes)
{
    *bytes = 0;
    if (!path_is_dir(src)) return -1;
    if (ckpt_verify(src) != 0) {
        err_clear();
        return -1;
    }
    if (m->fail_left > 0) {
        m->fail_left--;
        return err_set(ERR_RUNTIME, "BERTC_DEBUG_MIRROR_FAIL: a failure on purpose");
    }
    char final_dir[CKPT_PATH_MAX], tmp[CKPT_PATH_MAX + 8];
    ckpt_dir_name(final_dir, sizeof final_dir, m->dir, step);
    snprintf(tmp, sizeof tmp, "%s.tmp", final_dir);
    int rc = ckpt_clean_tmp(m->dir);
    if (!rc) rc = remove_tree(tmp);
    if (rc) return rc;
    if (mkdir(tmp, 0755) != 0) return err_set(ERR_RUNTIME, "%s: %s", tmp, strerror(errno));
    DIR *d = opendir(src);
    if (!d) {
        rc = err_set(ERR_RUNTIME, "%s: %s", src, strerror(errno));
        goto fail;
    }
    struct dirent *e;
    while (!rc && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char a[CKPT_PATH_MAX + 256], b[CKPT_PATH_MAX + 264];
        snprintf(a, sizeof a, "%s/%s", src, e->d_name);
        snprintf(b, sizeof b, "%s/%s", tmp, e->d_name);
        struct stat st;
        if (stat(a, &st) != 0) {
            rc = err_set(ERR_RUNTIME, "%s: %s", a, strerror(errno));
            break;
        }
        if (!S_ISREG(st.st_mode)) continue;
        rc = copy_file(a, b, m->delay_ms, bytes);
    }
    closedir(d);
    if (rc) goto fail;
    if ((rc = fsync_path(tmp)) != 0) goto fail;
    if (path_exists(final_dir) && (rc = remove_tree(final_dir)) != 0) goto fail;
    if (rename(tmp, final_dir) != 0) {
        rc = err_set(ERR_RUNTIME, "rename %s: %s", tmp, strerror(errno));
        goto fail;
    }
    if ((rc = fsync_parent_dir(final_dir)) != 0) return rc;
    if ((rc = ckpt_verify(final_dir)) != 0) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", err_msg());
        remove_tree(final_dir);
        return err_set(ERR_RUNTIME, "the copy does not verify: %s", msg);
    }
    if ((rc = ckpt_prune(m->dir, m->keep)) != 0) return rc;
    return 0;
fail:
    remove_tree(tmp);
    err_clear();
    return rc ? rc : ERR_RUNTIME;
}

static void copy_with_retries(mirror *m, const char *src, int64_t step)
{
    double t0 = clock_unix_s();
    for (int attempt = 1; attempt <= MIRROR_TRIES; attempt++) {
        uint64_t bytes;
        char msg[1024] = "";
        int rc = copy_once(m, src, step, &bytes);
        if (rc) snprintf(msg, sizeof msg, "%s", err_msg());
        err_clear();
        if (rc == 0) {
            char d[CKPT_PATH_MAX + 128];
            snprintf(d, sizeof d, "to %s (%.1f MiB in %.1f s%s)", m->dir, (double)bytes / 1048576.0, clock_unix_s() - t0,
                     attempt > 1 ? ", after retries" : "");
            report(m, step, "copied", d);
            if (m->in_streak) log_info("mirror: step-%08" PRId64 " copied to %s; the mirror works again", step, m->dir);
            pthread_mutex_lock(&m->lock);
            m->copied++;
            m->in_streak = 0;
            pthread_mutex_unlock(&m->lock);
            return;
        }
        if (rc == -1) {
            report(m, step, "skipped", "the checkpoint left the run dir (pruned) or does not verify before the copy");
            return;
        }
        pthread_mutex_lock(&m->lock);
        m->failed++;
        int first = m->in_streak++ == 0;
        int newer = m->has_pending;
        pthread_mutex_unlock(&m->lock);
        char d[1400];
        snprintf(d, sizeof d, "try %d of %d: %s", attempt, MIRROR_TRIES, msg);
        report(m, step, "failed", d);
        if (first)
            log_warn("mirror: copying step-%08" PRId64 " to %s failed: %s; retrying in the background, training goes on",
                     step, m->dir, msg);
        if (newer || attempt == MIRROR_TRIES) return;
        /* back off, but wake for a newer checkpoint or a stop */
        double wait = (double)m->backoff_ms / 1000.0 * (double)(1 << (attempt - 1));
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += (time_t)wait;
        until.tv_nsec += (long)((wait - (double)(time_t)wait) * 1e9);
        if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
        pthread_mutex_lock(&m->lock);
        while (!m->has_pending && !m->stop)
            if (pthread_cond_timedwait(&m->cond, &m->lock, &until) == ETIMEDOUT) break;
        int give_up = m->has_pending;
        pthread_mutex_unlock(&m->lock);
        if (give_up) return;
    }
}

static void *worker(void *arg)
{
    mirror *m = arg;
    for (;;) {
        pthread_mutex_lock(&m->lock);
        while (!m->has_pending && !m->stop) pthread_cond_wait(&m->cond, &m->lock);
        if (!m->has_pending) {
            pthread_mutex_unlock(&m->lock);
            break;
        }
        char src[CKPT_PATH_MAX];
        snprintf(src, sizeof src, "%s", m->pending);
        int64_t step = m->pending_step;
        m->has_pending = 0;
        m->busy = 1;
        pthread_mutex_unlock(&m->lock);
        copy_with_retries(m, src, step);
        pthread_mutex_lock(&m->lock);
        m->busy = 0;
        pthread_cond_broadcast(&m->cond);
        pthread_mutex_unlock(&m->lock);
    }
    return NULL;
}

static int env_int(const char *name, int dflt)
{
    const char *s = getenv(name);
    return s && *s ? atoi(s) : dflt;
}

int mirror_start(mirror **out, const char *dir, int keep, const char *run_dir, obs_run *obs)
{
    *out = NULL;
    if (!path_is_dir(dir))
        return err_set(ERR_RUNTIME, "--mirror %s: no such directory (is the disk mounted?)", dir);
    char sub[CKPT_PATH_MAX + 16], probe[CKPT_PATH_MAX + 64];
    snprintf(sub, sizeof sub, "%s/checkpoints", dir);
    if (mkdir_p(sub) != 0) return err_wrap(ERR_RUNTIME, "--mirror %s", dir);
    snprintf(probe, sizeof probe, "%s/.bertc-write-test", sub);
    int fd = open(probe, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return err_set(ERR_RUNTIME, "--mirror %s: cannot write there: %s", dir, strerror(errno));
    close(fd);
    unlink(probe);
    mirror *m = xcalloc(1, sizeof *m);
    snprintf(m->dir, sizeof m->dir, "%s", dir);
    path_join(m->log_path, sizeof m->log_path, run_dir, "mirror.log");
    m->keep = keep;
    m->obs = obs;
    m->delay_ms = env_int("BERTC_DEBUG_MIRROR_DELAY_MS", 0);
    m->backoff_ms = env_int("BERTC_DEBUG_MIRROR_BACKOFF_MS", 1000);
    m->fail_left = env_int("BERTC_DEBUG_MIRROR_FAIL", 0);
    pthread_mutex_init(&m->lock, NULL);
    pthread_cond_init(&m->cond, NULL);
    if (pthread_create(&m->thread, NULL, worker, m) != 0) {
        pthread_mutex_destroy(&m->lock);
        pthread_cond_destroy(&m->cond);
        free(m);
        return err_set(ERR_RUNTIME, "--mirror: cannot start its thread");
    }
    *out = m;
    return 0;
}

void mirror_submit(mirror *m, const char *src, int64_t step)
{
    if (!m) return;
    pthread_mutex_lock(&m->lock);
    int replaced = m->has_pending;
    int64_t old = m->pending_step;
    snprintf(m->pending, sizeof m->pending, "%s", src);
    m->pending_step = step;
    m->has_pending = 1;
    pthread_cond_broadcast(&m->cond);
    pthread_mutex_unlock(&m->lock);
    if (replaced) report(m, old, "skipped", "a newer checkpoint came while the mirror was busy");
}

void mirror_counts(mirror *m, int *copied, int *failed)
{
    if (!m) {
        *copied = *failed = 0;
        return;
    }
    pthread_mutex_lock(&m->lock);
    *copied = m->copied;
    *failed = m->failed;
    pthread_mutex_unlock(&m->lock);
}

void mirror_stop(mirror *m, double wait_s)
{
    if (!m) return;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += (time_t)wait_s;
    pthread_mutex_lock(&m->lock);
    m->stop = 1;
    pthread_cond_broadcast(&m->cond);
    int late = 0;
    while ((m->busy || m->has_pending) && !late)
        late = pthread_cond_timedwait(&m->cond, &m->lock, &until) == ETIMEDOUT;
    late = m->busy || m->has_pending;
    if (late) m->obs = NULL; /* the trainer closes obs next */
    pthread_mutex_unlock(&m->lock);
    if (late) {
        log_warn("mirror: a copy to %s is still running after %.0f s; leaving it (the mirror keeps its older checkpoints)",
                 m->dir, wait_s);
        pthread_detach(m->thread);
        g_left = m;
        return;
    }
    pthread_join(m->thread, NULL);
    pthread_mutex_destroy(&m->lock);
    pthread_cond_destroy(&m->cond);
    free(m);
}

int mirror_find_latest(const char *dir, char *ckdir, size_t cap, int64_t *step)
{
    return ckpt_find_latest(dir, ckdir, cap, step, NULL);
}
