#include "train/sigcatch.h"

#include "core/err.h"

#include <errno.h>
#include <omp.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

static void stop_set(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
}

/* The same mask operation on every thread of the OpenMP pool (the threads
 * that run OpenBLAS's and oneDNN's kernels), the caller included. */
static void pool_mask(int how, const sigset_t *set)
{
    int n = omp_get_max_threads();
#pragma omp parallel num_threads(n)
    pthread_sigmask(how, set, NULL);
}

static void *catcher_main(void *arg)
{
    int fd = (int)(long)arg;
    sigset_t set;
    stop_set(&set);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    char b;
    for (;;) {
        ssize_t r = read(fd, &b, 1);
        if (r < 0 && errno == EINTR) continue; /* the handler ran here */
        break;                                 /* end of file: sigcatch_end */
    }
    close(fd);
    return NULL;
}

int sigcatch_begin(sigcatch *s, void (*handler)(int), int sa_flags)
{
    memset(s, 0, sizeof *s);
    s->pipe_w = -1;
    int pfd[2];
    if (pipe(pfd) != 0) return err_set(ERR_RUNTIME, "signals: pipe: %s", strerror(errno)), -1;
    sigset_t set;
    stop_set(&set);
    pthread_sigmask(SIG_BLOCK, &set, &s->old_mask);
    pool_mask(SIG_BLOCK, &set);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sa.sa_flags = sa_flags;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &s->old_int);
    sigaction(SIGTERM, &sa, &s->old_term);
    pthread_t t;
    int r = pthread_create(&t, NULL, catcher_main, (void *)(long)pfd[0]);
    if (r != 0) {
        close(pfd[0]);
        close(pfd[1]);
        sigaction(SIGINT, &s->old_int, NULL);
        sigaction(SIGTERM, &s->old_term, NULL);
        pool_mask(SIG_SETMASK, &s->old_mask);
        pthread_sigmask(SIG_SETMASK, &s->old_mask, NULL);
        return err_set(ERR_RUNTIME, "signals: cannot start the signal thread: %s", strerror(r)), -1;
    }
    s->thread = t;
    s->pipe_w = pfd[1];
    s->started = 1;
    return 0;
}

void sigcatch_end(sigcatch *s)
{
    if (!s->started) return;
    close(s->pipe_w);
    pthread_join(s->thread, NULL);
    s->started = 0;
    sigaction(SIGINT, &s->old_int, NULL);
    sigaction(SIGTERM, &s->old_term, NULL);
    pool_mask(SIG_SETMASK, &s->old_mask);
    pthread_sigmask(SIG_SETMASK, &s->old_mask, NULL);
}
