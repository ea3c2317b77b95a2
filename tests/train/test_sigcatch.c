/* train/sigcatch: while the trainer's handler is installed, SIGINT/SIGTERM
 * run it on the catcher thread only, never on a thread that runs GEMM
 * kernels (oneDNN 2.x's JIT sgemm points rsp into the heap, where a signal
 * frame corrupts it). A sender thread fires SIGTERMs at the process while
 * the calling thread and the OpenMP workers multiply matrices with the
 * sgemm bertc uses (oneDNN where it is loaded); every handler run is
 * checked against the working threads' ids, and the products against a
 * plain loop. Then sigcatch_end must put the old handler and mask back. */
#define _GNU_SOURCE
#include "testutil.h"

#include "backend/cpu_kernels.h"
#include "train/sigcatch.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAX_WORKERS 256
static pid_t g_work_tid[MAX_WORKERS];
static int g_n_work;
static volatile sig_atomic_t g_runs, g_on_worker;

static pid_t tid(void) { return (pid_t)syscall(SYS_gettid); }

static void on_sig(int sig)
{
    (void)sig;
    pid_t me = tid();
    for (int i = 0; i < g_n_work; i++)
        if (g_work_tid[i] == me) g_on_worker = 1;
    g_runs++;
}

static atomic_int g_sending;
static int g_sent;
static void *sender(void *arg)
{
    (void)arg;
    struct timespec ts = {0, 200 * 1000};
    while (atomic_load(&g_sending)) {
        kill(getpid(), SIGTERM);
        g_sent++;
        nanosleep(&ts, NULL);
    }
    return NULL;
}

typedef onednn_sgemm_fn sgemm_fn;

static void gemm(sgemm_fn dn, int M, int N, int K, const float *A, const float *B, float *C)
{
    if (dn) dn('N', 'N', M, N, K, 1.0f, A, K, B, N, 0.0f, C, N);
    else cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, A, K, B, N, 0.0f, C, N);
}

static int blocks_term(void)
{
    sigset_t cur;
    pthread_sigmask(SIG_BLOCK, NULL, &cur);
    return sigismember(&cur, SIGTERM);
}

int main(void)
{
    omp_set_num_threads(2);
    char gname[128];
    printf("gemm: %s\n", cpu_kernels_gemm(gname, sizeof gname));
    sgemm_fn dn = cpu_kernels_onednn_sgemm();

    enum { M = 192, N = 256, K = 320 };
    float *A = malloc(sizeof(float) * M * K), *B = malloc(sizeof(float) * K * N), *C = malloc(sizeof(float) * M * N),
          *R = malloc(sizeof(float) * M * N);
    tu_rng_state = 7;
    tu_fill(A, (size_t)M * K, -1, 1);
    tu_fill(B, (size_t)K * N, -1, 1);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int k = 0; k < K; k++) s += (double)A[i * K + k] * B[k * N + j];
            R[i * N + j] = (float)s;
        }
    gemm(dn, M, N, K, A, B, C); /* the OpenMP pool exists before sigcatch_begin, as in bertc train */

    /* the threads that run kernels: this one and the pool's */
    g_work_tid[g_n_work++] = tid();
#pragma omp parallel num_threads(2)
    {
        pid_t t = tid();
#pragma omp critical
        {
            int seen = 0;
            for (int i = 0; i < g_n_work; i++) seen |= g_work_tid[i] == t;
            if (!seen && g_n_work < MAX_WORKERS) g_work_tid[g_n_work++] = t;
        }
    }
    printf("working threads: %d\n", g_n_work);

    sigcatch sc;
    CHECK(sigcatch_begin(&sc, on_sig, SA_RESTART) == 0, "sigcatch_begin failed");
    int pool_blocks = 1;
#pragma omp parallel num_threads(2) reduction(& : pool_blocks)
    pool_blocks &= blocks_term();
    CHECK(blocks_term() && pool_blocks, "SIGTERM not blocked in the working threads (caller %d, pool %d)",
          blocks_term(), pool_blocks);

    atomic_store(&g_sending, 1);
    pthread_t snd;
    CHECK(pthread_create(&snd, NULL, sender, NULL) == 0, "cannot start the sender");
    int bad = 0;
    double t0 = omp_get_wtime();
    int rounds = 0;
    while (omp_get_wtime() - t0 < (tu_sanitized() ? 1.0 : 2.0) || g_runs < 5) {
        memset(C, 0, sizeof(float) * M * N);
        gemm(dn, M, N, K, A, B, C);
        for (int i = 0; i < M * N; i++)
            if (!(fabsf(C[i] - R[i]) <= 1e-4f + 1e-4f * fabsf(R[i]))) bad++;
        rounds++;
        if (omp_get_wtime() - t0 > 30) break;
    }
    atomic_store(&g_sending, 0);
    pthread_join(snd, NULL);
    /* the last ones may still be pending: let the catcher take them */
    struct timespec ts = {0, 50 * 1000 * 1000};
    nanosleep(&ts, NULL);
    printf("%d products during %d SIGTERMs sent, handler ran %d times\n", rounds, g_sent, (int)g_runs);
    CHECK(g_runs > 0, "the handler never ran");
    CHECK(!g_on_worker, "the handler ran on a thread that runs GEMM kernels");
    CHECK(bad == 0, "%d product elements differ from the plain loop", bad);

    sigcatch_end(&sc);
    struct sigaction cur;
    sigaction(SIGTERM, NULL, &cur);
    CHECK(cur.sa_handler == SIG_DFL, "sigcatch_end did not put the default SIGTERM action back");
    int pool_open = 1;
#pragma omp parallel num_threads(2) reduction(& : pool_open)
    pool_open &= !blocks_term();
    CHECK(!blocks_term() && pool_open, "SIGTERM still blocked after sigcatch_end (caller %d, pool %d)", blocks_term(),
          !pool_open);
    free(A);
    free(B);
    free(C);
    free(R);
    return tu_done();
}
