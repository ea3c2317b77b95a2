/* Where the trainer's SIGINT/SIGTERM handler runs.
 *
 * A handler runs on the stack of whichever thread the kernel picks, and the
 * kernel writes the signal frame just below that thread's stack pointer.
 * oneDNN 2.x's JIT sgemm kernels point rsp into a heap workspace while they
 * run (oneDNN issue #4845, fixed upstream in 2026 by PR #4855, after the 2.6
 * that Debian ships): a handler that lands there corrupts the heap, and the
 * run aborts later in free(). So while training, SIGINT and SIGTERM are
 * blocked in the calling thread and in every OpenMP worker (all threads
 * started later inherit the block), and one small thread that runs no
 * numerics keeps them open: the handler always runs on its stack. The
 * handler and its SA_RESETHAND semantics (a second signal ends the process
 * at once) are unchanged. */
#ifndef BERTC_TRAIN_SIGCATCH_H
#define BERTC_TRAIN_SIGCATCH_H

#include <pthread.h>
#include <signal.h>

typedef struct sigcatch {
    struct sigaction old_int, old_term;
    sigset_t old_mask;
    int pipe_w; /* closing it ends the catcher thread */
    int started;
    pthread_t thread;
} sigcatch;

/* Installs handler for SIGINT and SIGTERM with sa_flags, blocks both in the
 * calling thread and the OpenMP workers, starts the catcher thread. Returns
 * 0, or -1 with err set (nothing is left changed). */
int sigcatch_begin(sigcatch *s, void (*handler)(int), int sa_flags);
/* Stops the catcher, puts back the old handlers and the old signal mask
 * (a signal still pending is then delivered the old way). */
void sigcatch_end(sigcatch *s);

#endif
