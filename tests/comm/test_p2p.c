/* Point-to-point messages (comm/p2p.h), the pipeline's transport. Alone it
 * checks only that nothing needs MPI; under mpirun (tests/cli/dist_p2p.sh,
 * 2 and 3 ranks) each rank sends a chain of messages of several sizes
 * (0 bytes to 4 MB, past the eager limit) to the next rank and back to the
 * previous one, receives posted in reverse order of the sends and the sends
 * waited for last, with dist_progress between, and checks every byte; a
 * message of another size than the receiver asked for is an error naming
 * both; dist_gather_ranges puts every rank's part in the root's array. */
#include "core/err.h"
#include "comm/dist.h"
#include "comm/p2p.h"
#include "testutil.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static float value(int from, int msg, size_t i) { return (float)(from * 1000003 + msg * 7919) + (float)(i % 4099); }

enum { NMSG = 6 };
static const size_t counts[NMSG] = {0, 1, 17, 1000, 65537, 1 << 20};

int main(int argc, char **argv)
{
    int rc = dist_init(&argc, &argv);
    CHECK(rc == 0, "dist_init: %s", err_msg());
    int N = dist_size(), me = dist_rank();
    printf("rank %d of %d\n", me, N);
    if (N < 2) {
        dist_req *q = NULL;
        CHECK(dist_wait(&q) == 0, "waiting for no request");
        float x[4] = {1, 2, 3, 4};
        CHECK(dist_gather_ranges(x, 1, 2, 0) == 0 && x[1] == 2, "gather alone leaves x");
        dist_finalize();
        return tu_done();
    }
    int next = (me + 1) % N, prev = (me + N - 1) % N;
    float *out_f[NMSG], *out_b[NMSG], *in_f[NMSG], *in_b[NMSG];
    dist_req *sends[2 * NMSG] = {0}, *recvs[2 * NMSG] = {0};
    for (int k = 0; k < NMSG; k++) {
        size_t n = counts[k] + 1;
        out_f[k] = malloc(n * sizeof(float));
        out_b[k] = malloc(n * sizeof(float));
        in_f[k] = calloc(n, sizeof(float));
        in_b[k] = calloc(n, sizeof(float));
        for (size_t i = 0; i < counts[k]; i++) out_f[k][i] = value(me, k, i), out_b[k][i] = -value(me, k, i);
    }
    /* receives first, last message first */
    for (int k = NMSG - 1; k >= 0 && !rc; k--) {
        rc = dist_irecv(in_f[k], counts[k] * sizeof(float), prev, 4 * k, &recvs[k]);
        if (!rc) rc = dist_irecv(in_b[k], counts[k] * sizeof(float), next, 4 * k + 1, &recvs[NMSG + k]);
    }
    for (int k = 0; k < NMSG && !rc; k++) {
        rc = dist_isend(out_f[k], counts[k] * sizeof(float), next, 4 * k, &sends[k]);
        if (!rc) rc = dist_isend(out_b[k], counts[k] * sizeof(float), prev, 4 * k + 1, &sends[NMSG + k]);
        dist_progress(recvs, 2 * NMSG);
        dist_progress(sends, 2 * NMSG);
    }
    CHECK(rc == 0, "starting: %s", err_msg());
    int bad = 0;
    for (int k = 0; k < 2 * NMSG; k++) {
        rc = dist_wait(&recvs[k]);
        CHECK(rc == 0 && recvs[k] == NULL, "receive %d: %s", k, err_msg());
    }
    for (int k = 0; k < 2 * NMSG; k++) CHECK(dist_wait(&sends[k]) == 0, "send %d: %s", k, err_msg());
    for (int k = 0; k < NMSG; k++)
        for (size_t i = 0; i < counts[k]; i++)
            bad += in_f[k][i] != value(prev, k, i) || in_b[k][i] != -value(next, k, i);
    printf("rank %d: %d messages each way, %d wrong floats\n", me, NMSG, bad);
    CHECK(bad == 0, "%d floats arrived wrong", bad);

    /* a message longer than the receive: an error naming the sizes */
    float big[8] = {0}, small[4];
    dist_req *q = NULL;
    rc = me == 0 ? dist_isend(big, sizeof big, 1, 99, &q) : me == 1 ? dist_irecv(small, sizeof small, 0, 99, &q) : 0;
    CHECK(rc == 0, "%s", err_msg());
    rc = dist_wait(&q);
    if (me == 1) {
        printf("rank 1, a message of the wrong size: %s\n", err_msg());
        CHECK(rc == ERR_RUNTIME, "the wrong size was not noticed");
    }
    err_clear();
    /* and one of the right size */
    rc = me == 0 ? dist_isend(big, 8, 1, 98, &q) : me == 1 ? dist_irecv(small, 8, 0, 98, &q) : 0;
    CHECK(rc == 0 && dist_wait(&q) == 0, "%s", err_msg());

    /* gather: rank r owns floats [r*5, r*5+5) of 5N */
    float *g = calloc((size_t)N * 5, sizeof *g);
    for (int i = 0; i < 5; i++) g[me * 5 + i] = (float)(me * 100 + i);
    rc = dist_gather_ranges(g, (size_t)me * 5, 5, 0);
    CHECK(rc == 0, "%s", err_msg());
    if (me == 0) {
        int wrong = 0;
        for (int r = 0; r < N; r++)
            for (int i = 0; i < 5; i++) wrong += g[r * 5 + i] != (float)(r * 100 + i);
        printf("rank 0 gathered %d ranks' parts, %d wrong\n", N, wrong);
        CHECK(wrong == 0, "gathered wrong");
    }
    free(g);
    for (int k = 0; k < NMSG; k++) free(out_f[k]), free(out_b[k]), free(in_f[k]), free(in_b[k]);
    dist_finalize();
    return tu_done();
}
