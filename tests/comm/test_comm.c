/* src/comm/comm.h: the communicator the trainer's strategies use. Alone
 * (one rank) the host's is chosen whatever the backend, every collective
 * leaves the block as it is and the agreement calls pass rc through. Under
 * mpirun (any N) the host communicator's collectives give the bytes of
 * dist.h's fixed-order ones, a p2p ring delivers each neighbour's block
 * and header, and a failure deferred on one rank reaches every rank at the
 * next agreement. */
#define _GNU_SOURCE
#include "core/err.h"
#include "comm/comm.h"
#include "comm/dist.h"
#include "testutil.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static float input(int r, size_t i)
{
    uint64_t h = dist_hash(DIST_HASH_INIT, &i, sizeof i);
    h = dist_hash(h, &r, sizeof r);
    return (float)(h >> 40) / (float)(1u << 24) - 0.5f;
}

static void fill(float *x, size_t n, int r)
{
    for (size_t i = 0; i < n; i++) x[i] = input(r, i);
}

/* Each collective against dist.h's on the same input. */
static void check_collectives(comm *cm, int me)
{
    size_t n = 10007;
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    int (*ours[])(comm *, float *, size_t) = {comm_allreduce_begin, comm_reduce_scatter_begin, comm_allgather_begin};
    int (*theirs[])(float *, size_t) = {dist_allreduce_sum_fixed, dist_reduce_scatter_sum_fixed, dist_allgather};
    const char *names[] = {"all-reduce", "reduce-scatter", "all-gather"};
    for (int k = 0; k < 3; k++) {
        fill(a, n, me);
        fill(b, n, me);
        int rc = ours[k](cm, a, n);
        if (!rc) rc = comm_wait(cm);
        CHECK(rc == 0, "%s: %s", names[k], err_msg());
        CHECK(theirs[k](b, n) == 0, "dist's %s: %s", names[k], err_msg());
        CHECK(!memcmp(a, b, n * sizeof *a), "%s: other bytes than dist.h's", names[k]);
    }
    fill(a, n, me);
    fill(b, n, me);
    CHECK(comm_allreduce_sum(cm, a, n) == 0 && dist_allreduce_sum_fixed(b, n) == 0, "blocking all-reduce");
    CHECK(!memcmp(a, b, n * sizeof *a), "blocking all-reduce: other bytes than dist.h's");
    free(a);
    free(b);
}

/* The agreement calls: rc through with one rank, the sums in rank order. */
static void check_agreement(comm *cm, int N, int me)
{
    CHECK(comm_agree(cm, 0) == 0, "agree on 0");
    double x[3] = {1.0, (double)me, 0.5};
    CHECK(comm_sum_f64(cm, x, 3) == 0, "sum_f64: %s", err_msg());
    CHECK(x[0] == (double)N && x[1] == (double)N * (N - 1) / 2 && x[2] == 0.5 * N, "sum_f64: %g %g %g", x[0], x[1],
          x[2]);
    CHECK(comm_seconds(cm) >= 0, "comm_seconds");
    if (N == 1) {
        CHECK(comm_agree(cm, ERR_RUNTIME) == ERR_RUNTIME, "one rank: its rc");
        err_clear();
    }
}

/* A failure deferred on the last rank (the sharded update's) is told by
 * the next agreement on every rank, with its message, and stays until the
 * run ends; comm_deferred gives it back where rc is 0. */
static void check_deferred(comm *cm, int N, int me)
{
    CHECK(comm_deferred(cm, 0) == 0, "nothing deferred yet");
    if (me == N - 1) {
        comm_defer(cm, err_set(ERR_INPUT, "step 7: a device error"));
        comm_defer(cm, err_set(ERR_RUNTIME, "a later one")); /* the first is kept */
        err_clear();
        CHECK(comm_deferred(cm, 0) == ERR_INPUT && strstr(err_msg(), "step 7: a device error"),
              "comm_deferred: %d, %s", comm_deferred(cm, 0), err_msg());
        CHECK(comm_deferred(cm, ERR_RUNTIME) == ERR_RUNTIME, "a failure of its own goes first");
        err_clear();
    }
    int rc = comm_agree(cm, 0);
    CHECK(rc == ERR_INPUT && strstr(err_msg(), "step 7: a device error"), "agreement after a deferred failure: %d, %s",
          rc, err_msg());
    err_clear();
}

/* Host messages (a pipeline unit's header) around the ring, in their own
 * slots, beside the float messages. */
static void check_msgs(comm *cm, int N, int me)
{
    if (N < 2) return;
    int32_t out[6], in[6] = {0};
    for (int i = 0; i < 6; i++) out[i] = 100 * me + i;
    int prev = (me + N - 1) % N, next = (me + 1) % N;
    int rc = comm_msg_recv(cm, in, sizeof in, prev, 9, 0);
    if (!rc) rc = comm_msg_send(cm, out, sizeof out, next, 9, 1);
    if (!rc) rc = comm_msg_wait(cm, 0);
    if (!rc) rc = comm_msg_wait(cm, 1);
    CHECK(rc == 0, "messages: %s", err_msg());
    for (int i = 0; i < 6; i++) CHECK(in[i] == 100 * prev + i, "message: rank %d got %d at %d", me, in[i], i);
    /* a receive given up (no sender) is cancelled, not waited for */
    rc = comm_msg_recv(cm, in, sizeof in, prev, 10, 0);
    CHECK(rc == 0, "a receive: %s", err_msg());
    comm_msg_cancel(cm, 0);
}

/* N ranks: each sends its block to the next and receives the previous one's. */
static void check_ring(comm *cm, int N, int me)
{
    if (N < 2) return;
    size_t n = 4099;
    float *out = malloc(n * sizeof *out), *in = malloc(n * sizeof *in), *want = malloc(n * sizeof *want);
    fill(out, n, me);
    int prev = (me + N - 1) % N, next = (me + 1) % N;
    fill(want, n, prev);
    int rc = comm_p2p_recv(cm, 0, 7, in, n, prev, 0);
    if (!rc) rc = comm_p2p_send(cm, 0, 7, out, n, next, 1);
    comm_p2p_progress(cm, 0, 2);
    if (!rc) rc = comm_p2p_wait(cm, 0);
    if (!rc) rc = comm_p2p_wait(cm, 1);
    CHECK(rc == 0, "ring: %s", err_msg());
    CHECK(!memcmp(in, want, n * sizeof *in), "ring: rank %d got other bytes than rank %d's", me, prev);
    free(out);
    free(in);
    free(want);
}

int main(int argc, char **argv)
{
    int rc = dist_init(&argc, &argv);
    CHECK(rc == 0, "dist_init: %s", err_msg());
    int N = dist_size(), me = dist_rank();
    comm *cm = NULL;
    int dummy;
    /* a device context with one rank (or ranks sharing a GPU): the host's */
    setenv("BERTC_DEBUG_DIST_ONE_GPU", "1", 1);
    rc = comm_open(&cm, &(comm_opts){.rank = me, .ranks = N, .dev_ctx = N == 1 ? &dummy : NULL, .fallback = "-"});
    CHECK(rc == 0 && cm, "comm_open: %s", err_msg());
    CHECK(!comm_on_device(cm), "the host's communicator takes host memory");
    check_collectives(cm, me);
    check_agreement(cm, N, me);
    comm_close(cm);
    rc = comm_open(&cm, &(comm_opts){.rank = me, .ranks = N, .p2p = 1, .slots = 2, .msg_slots = 2, .fallback = "-"});
    CHECK(rc == 0 && cm, "comm_open p2p: %s", err_msg());
    check_ring(cm, N, me);
    check_msgs(cm, N, me);
    check_deferred(cm, N, me);
    comm_close(cm);
    dist_finalize();
    return tu_done();
}
