/* Data-parallel communication (dist.h): MPI when built with it, one
 * process otherwise. */
#define _GNU_SOURCE
#include "comm/dist.h"
#include "core/piece.h"

#include "core/clock.h"
#include "core/err.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef BERTC_HAVE_MPI
#include <mpi.h>
#endif

static int g_rank = 0, g_size = 1, g_mpi_started = 0;
static double g_comm_s = 0;
#ifdef BERTC_HAVE_MPI
/* The scratch of the reduce-scatter. */
static float *g_tmp;
static size_t g_tmp_cap;
#define DIST_SEG ((size_t)1 << 24) /* floats per Alltoallv round, all ranks' together: the scratch's size */
#endif

int dist_have_mpi(void)
{
#ifdef BERTC_HAVE_MPI
    return 1;
#else
    return 0;
#endif
}

static int env_int(const char *name, int *v)
{
    const char *s = getenv(name);
    if (!s || !*s) return 0;
    char *end;
    long x = strtol(s, &end, 10);
    if (*end || x < 0 || x > 1 << 24) return 0;
    *v = (int)x;
    return 1;
}

int dist_launch_size(int *rank)
{
    int n = 0, r = 0;
    if (env_int("OMPI_COMM_WORLD_SIZE", &n)) env_int("OMPI_COMM_WORLD_RANK", &r);
    else if (env_int("PMI_SIZE", &n)) env_int("PMI_RANK", &r);
    else if (env_int("SLURM_STEP_NUM_TASKS", &n) && env_int("SLURM_PROCID", &r)) {
    } else n = 1, r = 0;
    if (n < 1) n = 1;
    if (rank) *rank = r;
    return n;
}

int dist_launched(void)
{
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK") ||
           (getenv("SLURM_STEP_NUM_TASKS") && getenv("SLURM_PROCID"));
}

#ifdef BERTC_HAVE_MPI
static int mpi_fail(int mrc, const char *what)
{
    char s[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(mrc, s, &len) != MPI_SUCCESS) snprintf(s, sizeof s, "error %d", mrc);
    return err_set(ERR_RUNTIME, "rank %d of %d: %s failed: %s (another rank may have died)", g_rank, g_size, what, s);
}
#define MPI_TRY(call, what)                           \
    do {                                              \
        int mrc_ = (call);                            \
        if (mrc_ != MPI_SUCCESS) return mpi_fail(mrc_, what); \
    } while (0)
#endif

int dist_init(int *argc, char ***argv)
{
    if (g_mpi_started) return 0;
    int r = 0, n = dist_launch_size(&r);
    if (!dist_launched()) return 0;
#ifdef BERTC_HAVE_MPI
    int mrc = MPI_Init(argc, argv);
    if (mrc != MPI_SUCCESS) return err_set(ERR_RUNTIME, "MPI_Init failed (launched as rank %d of %d)", r, n);
    g_mpi_started = 1;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    return 0;
#else
    if (n > 1)
        return err_set(ERR_INPUT, "launched as rank %d of %d, but this bertc was built without MPI (install "
                                  "libopenmpi-dev and rebuild; `bertc version` says whether a build has it)", r, n);
    return 0;
#endif
}

void dist_finalize(void)
{
#ifdef BERTC_HAVE_MPI
    if (g_mpi_started) MPI_Finalize();
    free(g_tmp);
    g_tmp = NULL;
    g_tmp_cap = 0;
#endif
    g_mpi_started = 0;
    g_rank = 0;
    g_size = 1;
}

/* The end of a job under a launcher: with more than one rank every rank
 * ends with the same code and line, and none leaves before all have
 * printed it and rank 0 has finished writing (mpirun ends the job when the
 * first rank exits non-zero); then dist_finalize. One process: rc as it
 * is, its message left for the caller to print. */
int dist_end(int rc)
{
    if (dist_active()) {
        rc = dist_agree(rc);
        if (rc && rc != ERR_STOPPED && err_code() != 0) {
            char line[1200];
            size_t n = 0;
            n += (size_t)snprintf(line, sizeof line, "bertc: ");
            for (const unsigned char *p = (const unsigned char *)err_msg(); *p && n < sizeof line - 6; p++)
                line[n++] = *p < 0x20 || *p == 0x7f ? '?' : (char)*p;
            line[n++] = '\n';
            ssize_t w = write(STDERR_FILENO, line, n);
            (void)w;
            err_clear();
        }
        dist_barrier();
    }
    dist_finalize();
    return rc;
}

int dist_rank(void) { return g_rank; }

int dist_local_rank(void)
{
    int v = 0;
    if (env_int("OMPI_COMM_WORLD_LOCAL_RANK", &v) || env_int("MPI_LOCALRANKID", &v) || env_int("SLURM_LOCALID", &v))
        return v;
    return 0;
}
int dist_size(void) { return g_size; }
int dist_active(void) { return g_size > 1; }
double dist_comm_seconds(void) { return g_comm_s; }

void dist_share(int count, int micro, int n, int r, int *first, int *len)
{
    if (micro < 1) micro = 1;
    if (n < 1) n = 1;
    int64_t units = ((int64_t)count + micro - 1) / micro;
    int64_t u0 = units * r / n, u1 = units * (r + 1) / n;
    int64_t a = u0 * micro, b = u1 * micro;
    if (a > count) a = count;
    if (b > count) b = count;
    *first = (int)a;
    *len = (int)(b - a);
}



#ifdef BERTC_HAVE_MPI
/* Counts and displacements of MPI's v-collectives are ints. */
static int fits_int(size_t n, const char *what)
{
    if (n <= (size_t)INT_MAX) return 0;
    return err_set(ERR_RUNTIME, "%s of %zu floats: more than MPI's int counts hold (%d)", what, n, INT_MAX);
}
#endif

int dist_reduce_scatter_sum_fixed(float *x, size_t n)
{
    if (g_size <= 1 || n == 0) return 0;
#ifdef BERTC_HAVE_MPI
    if (fits_int(n, "a reduce-scatter")) return ERR_RUNTIME;
    double t = clock_now_s();
    int N = g_size, me = g_rank;
    int *sc = malloc(4 * (size_t)N * sizeof *sc);
    if (!sc) return err_set(ERR_RUNTIME, "out of memory");
    int *sd = sc + N, *rc = sc + 2 * N, *rd = sc + 3 * N;
    size_t my_off, my_len, last_off, last_len;
    piece_of(n, N, me, &my_off, &my_len);
    piece_of(n, N, N - 1, &last_off, &last_len);
    /* Each round moves up to `seg` floats of every piece (the scratch holds
     * N of them); the last piece, the longest, sets the number of rounds. */
    size_t seg = DIST_SEG / (size_t)N > 0 ? DIST_SEG / (size_t)N : 1;
    int ret = 0;
    for (size_t at = 0; at < last_len && !ret; at += seg) {
        size_t mine = my_len > at ? (my_len - at < seg ? my_len - at : seg) : 0;
        if (g_tmp_cap < mine * (size_t)N) {
            free(g_tmp);
            g_tmp_cap = mine * (size_t)N;
            g_tmp = malloc(g_tmp_cap * sizeof *g_tmp);
            if (!g_tmp) {
                g_tmp_cap = 0;
                ret = err_set(ERR_RUNTIME, "out of memory (%zu floats for the reduction)", mine * (size_t)N);
                break;
            }
        }
        for (int r = 0; r < N; r++) {
            size_t po, pl;
            piece_of(n, N, r, &po, &pl);
            size_t k = pl > at ? (pl - at < seg ? pl - at : seg) : 0;
            sc[r] = (int)k;
            sd[r] = (int)(po + at);
            rc[r] = (int)mine;
            rd[r] = (int)(mine * (size_t)r);
        }
        int mrc = MPI_Alltoallv(x, sc, sd, MPI_FLOAT, g_tmp, rc, rd, MPI_FLOAT, MPI_COMM_WORLD);
        if (mrc != MPI_SUCCESS) {
            ret = mpi_fail(mrc, "the gradient reduce-scatter");
            break;
        }
        /* The fixed order: rank 0's value, plus rank 1's, plus ... */
        float *dst = x + my_off + at;
        for (size_t i = 0; i < mine; i++) dst[i] = g_tmp[i];
        for (int r = 1; r < N; r++) {
            const float *src = g_tmp + mine * (size_t)r;
            for (size_t i = 0; i < mine; i++) dst[i] += src[i];
        }
    }
    free(sc);
    g_comm_s += clock_now_s() - t;
    return ret;
#else
    return 0;
#endif
}

#ifdef BERTC_HAVE_MPI
/* *out: every rank's piece count, then offset (piece_of), as MPI's ints,
 * for `what` of n floats (the caller frees it); or an error. */
static int piece_counts(size_t n, const char *what, int **out)
{
    int N = g_size, *c = NULL;
    if (fits_int(n, what)) return ERR_RUNTIME;
    if (!(c = malloc(2 * (size_t)N * sizeof *c))) return err_set(ERR_RUNTIME, "out of memory");
    for (int r = 0; r < N; r++) {
        size_t po, pl;
        piece_of(n, N, r, &po, &pl);
        c[r] = (int)pl;
        c[N + r] = (int)po;
    }
    *out = c;
    return 0;
}

/* After a collective begun at t: its seconds counted, its result. */
static int mpi_done(int mrc, double t, const char *what)
{
    g_comm_s += clock_now_s() - t;
    return mrc == MPI_SUCCESS ? 0 : mpi_fail(mrc, what);
}
#endif

int dist_allgather(float *x, size_t n)
{
    if (g_size <= 1 || n == 0) return 0;
#ifdef BERTC_HAVE_MPI
    double t = clock_now_s();
    int *c, rc = piece_counts(n, "an all-gather", &c);
    if (rc) return rc;
    int mrc = MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_FLOAT, x, c, c + g_size, MPI_FLOAT, MPI_COMM_WORLD);
    free(c);
    return mpi_done(mrc, t, "an all-gather");
#else
    return 0;
#endif
}

int dist_gather_pieces(const float *mine, float *x, size_t n, int root)
{
    size_t my_off, my_len;
    piece_of(n, g_size, g_rank, &my_off, &my_len);
    if (g_rank == root && my_len && mine != x + my_off) memmove(x + my_off, mine, my_len * sizeof *x);
    if (g_size <= 1 || n == 0) return 0;
#ifdef BERTC_HAVE_MPI
    double t = clock_now_s();
    int *c, mrc = piece_counts(n, "a gather", &c);
    if (mrc) return mrc;
    if (g_rank == root)
        mrc = MPI_Gatherv(MPI_IN_PLACE, 0, MPI_FLOAT, x, c, c + g_size, MPI_FLOAT, root, MPI_COMM_WORLD);
    else
        mrc = MPI_Gatherv(mine, (int)my_len, MPI_FLOAT, NULL, NULL, NULL, MPI_FLOAT, root, MPI_COMM_WORLD);
    free(c);
    return mpi_done(mrc, t, "a gather");
#else
    return 0;
#endif
}

int dist_allreduce_sum_fixed(float *x, size_t n)
{
    int rc = dist_reduce_scatter_sum_fixed(x, n);
    return rc ? rc : dist_allgather(x, n);
}

int dist_allreduce_sum_f64(double *x, int n)
{
    if (g_size <= 1 || n <= 0) return 0;
#ifdef BERTC_HAVE_MPI
    double t = clock_now_s();
    double *all = malloc((size_t)n * (size_t)g_size * sizeof *all);
    if (!all) return err_set(ERR_RUNTIME, "out of memory");
    int mrc = MPI_Allgather(x, n, MPI_DOUBLE, all, n, MPI_DOUBLE, MPI_COMM_WORLD);
    if (mrc == MPI_SUCCESS)
        for (int i = 0; i < n; i++) {
            double s = all[i];
            for (int r = 1; r < g_size; r++) s += all[(size_t)r * (size_t)n + (size_t)i];
            x[i] = s;
        }
    free(all);
    return mpi_done(mrc, t, "a loss all-reduce");
#else
    return 0;
#endif
}

int dist_bcast(void *buf, size_t bytes, int root)
{
    if (g_size <= 1) return 0;
#ifdef BERTC_HAVE_MPI
    double t = clock_now_s();
    for (size_t off = 0; off < bytes; off += (size_t)1 << 30) {
        size_t m = bytes - off < ((size_t)1 << 30) ? bytes - off : (size_t)1 << 30;
        MPI_TRY(MPI_Bcast((char *)buf + off, (int)m, MPI_BYTE, root, MPI_COMM_WORLD), "a broadcast");
    }
    g_comm_s += clock_now_s() - t;
#endif
    return 0;
}

int dist_barrier(void)
{
    if (g_size <= 1) return 0;
#ifdef BERTC_HAVE_MPI
    double t = clock_now_s();
    MPI_TRY(MPI_Barrier(MPI_COMM_WORLD), "a barrier");
    g_comm_s += clock_now_s() - t;
#endif
    return 0;
}

typedef struct {
    int rc;
    char msg[252];
} agree_rec;

int dist_agree(int rc)
{
    if (g_size <= 1) return rc;
#ifdef BERTC_HAVE_MPI
    agree_rec me, *all = malloc((size_t)g_size * sizeof *all);
    if (!all) return err_set(ERR_RUNTIME, "out of memory");
    memset(&me, 0, sizeof me);
    me.rc = rc;
    if (rc) snprintf(me.msg, sizeof me.msg, "%s", err_msg());
    double t = clock_now_s();
    int mrc = MPI_Allgather(&me, (int)sizeof me, MPI_BYTE, all, (int)sizeof me, MPI_BYTE, MPI_COMM_WORLD);
    g_comm_s += clock_now_s() - t;
    if (mrc != MPI_SUCCESS) {
        free(all);
        return mpi_fail(mrc, "agreeing on errors");
    }
    int out = 0, first = -1, alike = 1;
    for (int r = 0; r < g_size; r++) {
        all[r].msg[sizeof all[r].msg - 1] = 0;
        if (all[r].rc && first < 0) first = r;
        if (!all[r].rc || strcmp(all[r].msg, all[0].msg)) alike = 0;
    }
    if (first >= 0) {
        /* The same line on every rank: the lowest failing rank's message,
         * named "rank R of N: " unless every rank failed alike (bad
         * arguments) or it names its rank already (agreed on before). */
        int r = first, named = 0, a, b, k = 0;
        if (sscanf(all[r].msg, "rank %d of %d: %n", &a, &b, &k) == 2 && k > 0) named = 1;
        if (alike || named) out = r == g_rank ? rc : err_set(all[r].rc, "%s", all[r].msg);
        else out = err_set(all[r].rc, "rank %d of %d: %s", r, g_size, all[r].msg);
    }
    free(all);
    return out;
#else
    return rc;
#endif
}

int dist_check_hash(uint64_t h, const char *what)
{
    if (g_size <= 1) return 0;
#ifdef BERTC_HAVE_MPI
    uint64_t *all = malloc((size_t)g_size * sizeof *all);
    if (!all) return err_set(ERR_RUNTIME, "out of memory");
    int mrc = MPI_Allgather(&h, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, MPI_COMM_WORLD);
    if (mrc != MPI_SUCCESS) {
        free(all);
        return mpi_fail(mrc, "comparing the ranks");
    }
    int bad = -1;
    for (int r = 1; r < g_size && bad < 0; r++)
        if (all[r] != all[0]) bad = r;
    free(all);
    if (bad >= 0)
        return err_set(ERR_INPUT, "%s of rank %d differ from rank 0's: every rank must run the same bertc with the "
                                  "same arguments", what, bad);
#endif
    return 0;
}

uint64_t dist_hash(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

uint64_t dist_hash_invocation(int argc, char **argv)
{
    uint64_t h = DIST_HASH_INIT;
    for (int i = 0; i < argc; i++) h = dist_hash(h, argv[i], strlen(argv[i]) + 1);
    return h;
}

uint64_t dist_hash_binary(void)
{
    FILE *f = fopen("/proc/self/exe", "rb");
    if (!f) return 0;
    uint64_t h = DIST_HASH_INIT;
    unsigned char buf[1 << 16];
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, f)) > 0) h = dist_hash(h, buf, k);
    fclose(f);
    return h;
}

void dist_abort(int code, const char *msg)
{
    fprintf(stderr, "bertc: rank %d of %d: %s\n", g_rank, g_size, msg);
    fflush(stderr);
#ifdef BERTC_HAVE_MPI
    if (g_mpi_started) MPI_Abort(MPI_COMM_WORLD, code);
#endif
    _exit(code);
}
