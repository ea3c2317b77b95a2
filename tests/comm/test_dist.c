/* src/comm: the example shares, and (under mpirun, see tests/cli/dist_reduce.sh)
 * the fixed-order all-reduce: every rank ends with exactly the bytes of
 * the sum in rank order, computed here locally from every rank's inputs;
 * its two halves apart (reduce-scatter into each rank's piece, all-gather,
 * gather to rank 0); error agreement and the argument-hash check. Alone it checks the
 * one-process path. */
#define _GNU_SOURCE
#include "core/err.h"
#include "comm/dist.h"
#include "core/piece.h"
#include "model/safetensors.h"
#include "testutil.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Rank r's input element i: varied magnitudes so the order matters. */
static float input(int r, size_t i)
{
    uint64_t h = dist_hash(DIST_HASH_INIT, &i, sizeof i);
    h = dist_hash(h, &r, sizeof r);
    float u = (float)(h >> 40) / (float)(1u << 24) - 0.5f;
    return u * powf(10.0f, (float)((h >> 8) % 9) - 4.0f);
}

static void check_shares(void)
{
    /* Contiguous, in order, covering the step, micro-aligned. */
    int cases[][3] = {{8, 2, 2}, {8, 2, 3}, {7, 2, 3}, {12, 5, 2}, {3, 1, 3}, {5, 4, 3}, {1, 1, 2}, {0, 2, 2}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int count = cases[c][0], micro = cases[c][1], n = cases[c][2], at = 0;
        for (int r = 0; r < n; r++) {
            int first, len;
            dist_share(count, micro, n, r, &first, &len);
            CHECK(first == at, "count %d micro %d n %d rank %d: first %d, want %d", count, micro, n, r, first, at);
            CHECK(first % micro == 0 || len == 0, "rank %d starts at %d, not a multiple of %d", r, first, micro);
            at += len;
        }
        CHECK(at == count, "count %d micro %d n %d: shares cover %d", count, micro, n, at);
    }
    int f, l;
    dist_share(8, 2, 2, 1, &f, &l);
    CHECK(f == 4 && l == 4, "8/2 ranks of micro 2, rank 1: [%d, +%d)", f, l);
    dist_share(7, 2, 3, 2, &f, &l);
    CHECK(f == 4 && l == 3, "7/3 ranks of micro 2, rank 2: [%d, +%d)", f, l);
}

/* The halves of the all-reduce apart (the sharded optimizer's): the
 * pieces cover the block in rank order; after the reduce-scatter this
 * rank's piece holds exactly the rank-order sum and the rest is untouched;
 * the all-gather and the gather to rank 0 deliver every rank's piece. */
static void check_pieces(int N, int me)
{
    size_t sizes[] = {0, 1, 2, 3, 5, 1000, 1000003};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t n = sizes[s], at = 0, off, len, q = n / (size_t)N;
        for (int r = 0; r < N; r++) {
            piece_of(n, N, r, &off, &len);
            CHECK(off == at && (len == q || (r == N - 1 && len == n - (size_t)(N - 1) * q)),
                  "n %zu rank %d of %d: piece [%zu, +%zu), want it at %zu, %zu long", n, r, N, off, len, at, q);
            at += len;
        }
        CHECK(at == n, "n %zu: the pieces cover %zu", n, at);
        piece_of(n, N, me, &off, &len);
        float *x = malloc((n + 1) * sizeof *x), *g = malloc((n + 1) * sizeof *g);
        for (size_t i = 0; i < n; i++) x[i] = input(me, i);
        int rc = dist_reduce_scatter_sum_fixed(x, n);
        CHECK(rc == 0, "reduce-scatter of %zu: %s", n, err_msg());
        int bad = 0;
        for (size_t i = 0; i < n; i++) {
            float v = input(me, i);
            if (i >= off && i < off + len) {
                v = input(0, i);
                for (int r = 1; r < N; r++) v += input(r, i);
            }
            bad += memcmp(&v, &x[i], sizeof v) != 0;
        }
        CHECK(bad == 0, "reduce-scatter of %zu floats: %d differ from the rank-order sum in [%zu, +%zu) or the input "
              "outside", n, bad, off, len);
        /* every rank's piece marked with its rank, then gathered */
        for (size_t i = 0; i < n; i++) x[i] = i >= off && i < off + len ? (float)me : -1.0f;
        rc = dist_allgather(x, n);
        CHECK(rc == 0, "all-gather of %zu: %s", n, err_msg());
        for (size_t i = 0; i < len; i++) g[i] = 100.0f + (float)me;
        float *dst = me == 0 ? malloc((n + 1) * sizeof *dst) : NULL;
        if (dst)
            for (size_t i = 0; i < n; i++) dst[i] = -1.0f;
        rc = dist_gather_pieces(g, dst, n, 0);
        CHECK(rc == 0, "gather of %zu: %s", n, err_msg());
        int bad_ag = 0, bad_g = 0;
        for (int r = 0; r < N; r++) {
            size_t po, pl;
            piece_of(n, N, r, &po, &pl);
            for (size_t i = po; i < po + pl; i++) {
                bad_ag += x[i] != (float)r;
                if (dst) bad_g += dst[i] != 100.0f + (float)r;
            }
        }
        CHECK(bad_ag == 0, "all-gather of %zu floats: %d not their owner's", n, bad_ag);
        CHECK(bad_g == 0, "gather of %zu floats to rank 0: %d not their owner's", n, bad_g);
        free(dst);
        free(x);
        free(g);
    }
}

/* test_dist --compare A.safetensors B.safetensors RTOL [SKIP]: every tensor of A
 * (but those whose name contains one of SKIP's comma-separated parts)
 * against B's, max |a-b| <= RTOL * max |b| per tensor (for cli_dist_train:
 * N ranks against one process); prints the worst; exit 1 when over. */
/* name contains one of the comma-separated parts of skip */
static int skipped(const char *name, const char *skip)
{
    if (!skip) return 0;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", skip);
    for (char *save = NULL, *p = strtok_r(buf, ",", &save); p; p = strtok_r(NULL, ",", &save))
        if (*p && strstr(name, p)) return 1;
    return 0;
}

static int compare(const char *pa, const char *pb, double rtol, const char *skip)
{
    st_file a, b;
    if (st_open(pa, &a) != 0 || st_open(pb, &b) != 0) {
        fprintf(stderr, "%s\n", err_msg());
        return 2;
    }
    double worst = 0;
    const char *wname = "";
    int bad = 0;
    for (int i = 0; i < a.n; i++) {
        const st_tensor *ta = &a.tensors[i], *tb = st_find(&b, ta->name);
        if (skipped(ta->name, skip)) continue;
        if (!tb || tb->numel != ta->numel) {
            printf("tensor %s: missing or another size in %s\n", ta->name, pb);
            bad = 1;
            continue;
        }
        float *x = malloc(ta->numel * sizeof *x), *y = malloc(ta->numel * sizeof *y);
        st_read_f32(&a, ta, x, ta->numel);
        st_read_f32(&b, tb, y, tb->numel);
        double md = 0, mb = 0;
        for (size_t k = 0; k < ta->numel; k++) {
            double d = fabs((double)x[k] - (double)y[k]);
            if (!(d <= md)) md = d;
            if (fabs((double)y[k]) > mb) mb = fabs((double)y[k]);
        }
        double rel = mb > 0 ? md / mb : md;
        if (getenv("TEST_DIST_VERBOSE")) printf("  %-60s max diff %.3g max %.3g\n", ta->name, md, mb);
        if (!(rel <= worst)) worst = rel, wname = ta->name;
        free(x);
        free(y);
    }
    printf("%d tensors: worst max|a-b|/max|b| %.3g (%s), tolerance %g\n", a.n, worst, wname, rtol);
    st_close(&a);
    st_close(&b);
    return bad || !(worst <= rtol);
}

int main(int argc, char **argv)
{
    if ((argc == 5 || argc == 6) && !strcmp(argv[1], "--compare"))
        return compare(argv[2], argv[3], atof(argv[4]), argc == 6 ? argv[5] : NULL);
    check_shares();
    int rc = dist_init(&argc, &argv);
    CHECK(rc == 0, "dist_init: %s", err_msg());
    int N = dist_size(), me = dist_rank();
    int lr = 0, ln = dist_launch_size(&lr);
    CHECK(ln == N && lr == me, "launcher says rank %d of %d, MPI says %d of %d", lr, ln, me, N);
    printf("rank %d of %d (mpi %s)\n", me, N, dist_have_mpi() ? "built in" : "not built");

    size_t sizes[] = {0, 1, 2, 3, 5, 1000, 1000003};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t n = sizes[s];
        float *x = malloc((n + 1) * sizeof *x), *want = malloc((n + 1) * sizeof *want);
        for (size_t i = 0; i < n; i++) {
            x[i] = input(me, i);
            float v = input(0, i);
            for (int r = 1; r < N; r++) v += input(r, i);
            want[i] = v;
        }
        rc = dist_allreduce_sum_fixed(x, n);
        CHECK(rc == 0, "allreduce of %zu: %s", n, err_msg());
        CHECK(n == 0 || memcmp(x, want, n * sizeof *x) == 0, "allreduce of %zu floats: not the rank-order sum", n);
        /* Every rank holds the same bytes. */
        rc = dist_check_hash(dist_hash(DIST_HASH_INIT, x, n * sizeof *x), "the sums");
        CHECK(rc == 0, "%s", err_msg());
        /* And a second reduction of the same inputs gives the same bytes. */
        for (size_t i = 0; i < n; i++) want[i] = x[i], x[i] = input(me, i);
        dist_allreduce_sum_fixed(x, n);
        CHECK(n == 0 || memcmp(x, want, n * sizeof *x) == 0, "second allreduce of %zu differs", n);
        free(x);
        free(want);
    }
    check_pieces(N, me);
    double d[2] = {me + 0.5, 1.0}, dw = 0;
    for (int r = 0; r < N; r++) dw += r + 0.5;
    CHECK(dist_allreduce_sum_f64(d, 2) == 0 && d[0] == dw && d[1] == N, "f64 sums %g %g, want %g %d", d[0], d[1], dw, N);

    /* Errors: every rank learns the lowest failing rank's message. */
    rc = dist_agree(0);
    CHECK(rc == 0, "agree on success: %d", rc);
    rc = dist_agree(me == N - 1 ? err_set(ERR_INPUT, "boom at rank %d", me) : 0);
    CHECK(rc == ERR_INPUT && strstr(err_msg(), "boom at rank") != NULL, "agree on failure: %d '%s'", rc, err_msg());
    printf("rank %d agreed: %s\n", me, err_msg());
    err_clear();

    /* Argument hashes: equal passes, rank 1 differing is named everywhere. */
    rc = dist_check_hash(dist_hash_invocation(argc, argv), "the arguments");
    CHECK(rc == 0, "same arguments: %s", err_msg());
    CHECK(dist_hash_binary() != 0, "hash of /proc/self/exe");
    if (N > 1) {
        rc = dist_check_hash(me == 1 ? 7 : 9, "the arguments");
        CHECK(rc == ERR_INPUT && strstr(err_msg(), "the arguments of rank 1 differ from rank 0's"),
              "mismatch: %d '%s'", rc, err_msg());
        err_clear();
    }
    CHECK(dist_barrier() == 0, "barrier");
    int b = me == 0 ? 1234 : 0;
    CHECK(dist_bcast(&b, sizeof b, 0) == 0 && b == 1234, "bcast: %d", b);
    printf("rank %d: %.3f s communicating\n", me, dist_comm_seconds());
    dist_finalize();
    return tu_done();
}
