/* Point-to-point messages (p2p.h): MPI when built with it. */
#include "comm/p2p.h"

#include "core/err.h"
#include "comm/dist.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>

#ifdef BERTC_HAVE_MPI
#include <mpi.h>

struct dist_req {
    MPI_Request r;
    MPI_Status st;
    size_t bytes;
    int peer, tag, recv, done;
};

static int p2p_fail(int mrc, const char *what, int peer)
{
    char s[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(mrc, s, &len) != MPI_SUCCESS) s[0] = 0;
    return err_set(ERR_RUNTIME, "rank %d of %d: %s rank %d failed: %s (another rank may have died)", dist_rank(),
                   dist_size(), what, peer, s);
}

static int start(void *buf, size_t bytes, int peer, int tag, int recv, dist_req **req)
{
    *req = NULL;
    if (bytes > INT_MAX)
        return err_set(ERR_RUNTIME, "a message of %zu bytes to rank %d: larger than MPI's int count", bytes, peer);
    dist_req *q = calloc(1, sizeof *q);
    if (!q) return err_set(ERR_RUNTIME, "out of memory");
    q->bytes = bytes;
    q->peer = peer;
    q->tag = tag;
    q->recv = recv;
    int mrc = recv ? MPI_Irecv(buf, (int)bytes, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &q->r)
                   : MPI_Isend(buf, (int)bytes, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &q->r);
    if (mrc != MPI_SUCCESS) {
        free(q);
        return p2p_fail(mrc, recv ? "receiving from" : "sending to", peer);
    }
    *req = q;
    return 0;
}

int dist_isend(const void *buf, size_t bytes, int peer, int tag, dist_req **req)
{
    return start((void *)buf, bytes, peer, tag, 0, req);
}

int dist_irecv(void *buf, size_t bytes, int peer, int tag, dist_req **req)
{
    return start(buf, bytes, peer, tag, 1, req);
}

int dist_wait(dist_req **req)
{
    dist_req *q = *req;
    if (!q) return 0;
    *req = NULL;
    int mrc = q->done ? MPI_SUCCESS : MPI_Wait(&q->r, &q->st), rc = 0, cls = 0;
    if (mrc != MPI_SUCCESS) MPI_Error_class(mrc, &cls);
    if (mrc != MPI_SUCCESS && q->recv && cls == MPI_ERR_TRUNCATE) {
        rc = err_set(ERR_RUNTIME, "rank %d of %d: a message from rank %d (tag %d) longer than the %zu bytes expected: "
                                  "the ranks disagree on the step", dist_rank(), dist_size(), q->peer, q->tag, q->bytes);
    } else if (mrc != MPI_SUCCESS) {
        rc = p2p_fail(mrc, q->recv ? "receiving from" : "sending to", q->peer);
    } else if (q->recv) {
        int got = 0;
        MPI_Get_count(&q->st, MPI_BYTE, &got);
        if ((size_t)got != q->bytes)
            rc = err_set(ERR_RUNTIME, "rank %d of %d: a message of %d bytes from rank %d (tag %d), %zu expected: the "
                                      "ranks disagree on the step", dist_rank(), dist_size(), got, q->peer, q->tag,
                         q->bytes);
    }
    free(q);
    return rc;
}

void dist_cancel(dist_req **req)
{
    dist_req *q = *req;
    if (!q) return;
    *req = NULL;
    if (!q->done) {
        MPI_Cancel(&q->r);
        MPI_Request_free(&q->r);
    }
    free(q);
}

void dist_progress(dist_req **reqs, int n)
{
    for (int i = 0; i < n; i++)
        if (reqs[i] && !reqs[i]->done) {
            int flag = 0;
            /* completed: kept with its status for dist_wait, which then returns at once */
            if (MPI_Test(&reqs[i]->r, &flag, &reqs[i]->st) == MPI_SUCCESS && flag) reqs[i]->done = 1;
        }
}

int dist_sum_fixed_among(float *x, size_t n, const int *ranks, int nr)
{
    if (nr <= 1 || n == 0) return 0;
    int me = dist_rank(), root = ranks[0], rc = 0;
    const size_t piece = (size_t)1 << 26;
    if (me == root) {
        float *tmp = malloc((n < piece ? n : piece) * sizeof *tmp);
        if (!tmp) return err_set(ERR_RUNTIME, "out of memory (%zu floats for the stage's gradient sum)", n);
        for (size_t done = 0; done < n && !rc; done += piece) {
            int cnt = (int)(n - done < piece ? n - done : piece);
            for (int r = 1; r < nr && !rc; r++) {
                int mrc = MPI_Recv(tmp, cnt, MPI_FLOAT, ranks[r], 32001, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                if (mrc != MPI_SUCCESS) rc = p2p_fail(mrc, "summing the gradients with", ranks[r]);
                for (int i = 0; !rc && i < cnt; i++) x[done + (size_t)i] += tmp[i];
            }
        }
        free(tmp);
    } else {
        for (size_t done = 0; done < n && !rc; done += piece) {
            int cnt = (int)(n - done < piece ? n - done : piece);
            int mrc = MPI_Send(x + done, cnt, MPI_FLOAT, root, 32001, MPI_COMM_WORLD);
            if (mrc != MPI_SUCCESS) rc = p2p_fail(mrc, "summing the gradients with", root);
        }
    }
    /* the sum back to every member */
    for (size_t done = 0; done < n && !rc; done += piece) {
        int cnt = (int)(n - done < piece ? n - done : piece);
        for (int r = 1; r < nr && !rc; r++) {
            int mrc = MPI_SUCCESS;
            if (me == root) mrc = MPI_Send(x + done, cnt, MPI_FLOAT, ranks[r], 32002, MPI_COMM_WORLD);
            else if (me == ranks[r])
                mrc = MPI_Recv(x + done, cnt, MPI_FLOAT, root, 32002, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (mrc != MPI_SUCCESS) rc = p2p_fail(mrc, "summing the gradients with", me == root ? ranks[r] : root);
        }
    }
    return rc;
}

int dist_gather_ranges(float *x, size_t off, size_t n, int root)
{
    int N = dist_size(), me = dist_rank();
    if (N <= 1) return 0;
    /* Everyone's range first, then the floats in pieces of at most 2^28. */
    uint64_t mine[2] = {off, n}, *all = malloc(2 * (size_t)N * sizeof *all);
    if (!all) return err_set(ERR_RUNTIME, "out of memory");
    int mrc = MPI_Allgather(mine, 2, MPI_UINT64_T, all, 2, MPI_UINT64_T, MPI_COMM_WORLD);
    int rc = mrc == MPI_SUCCESS ? 0 : p2p_fail(mrc, "gathering the ranges of", root);
    const size_t piece = (size_t)1 << 28;
    for (int r = 0; r < N && !rc; r++) {
        if (r == root) continue;
        size_t o = (size_t)all[2 * r], m = (size_t)all[2 * r + 1];
        for (size_t done = 0; done < m && !rc; done += piece) {
            int cnt = (int)(m - done < piece ? m - done : piece);
            if (me == root) {
                mrc = MPI_Recv(x + o + done, cnt, MPI_FLOAT, r, 32000, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                if (mrc != MPI_SUCCESS) rc = p2p_fail(mrc, "gathering the parameters from", r);
            } else if (me == r) {
                mrc = MPI_Send(x + o + done, cnt, MPI_FLOAT, root, 32000, MPI_COMM_WORLD);
                if (mrc != MPI_SUCCESS) rc = p2p_fail(mrc, "sending the parameters to", root);
            }
        }
    }
    free(all);
    return rc;
}

#else

struct dist_req {
    int unused;
};

static int no_mpi(void) { return err_set(ERR_RUNTIME, "point-to-point messages need a build with MPI"); }

int dist_isend(const void *buf, size_t bytes, int peer, int tag, dist_req **req)
{
    (void)buf, (void)bytes, (void)peer, (void)tag;
    *req = NULL;
    return no_mpi();
}

int dist_irecv(void *buf, size_t bytes, int peer, int tag, dist_req **req)
{
    (void)buf, (void)bytes, (void)peer, (void)tag;
    *req = NULL;
    return no_mpi();
}

int dist_wait(dist_req **req)
{
    *req = NULL;
    return 0;
}

void dist_cancel(dist_req **req) { *req = NULL; }

void dist_progress(dist_req **reqs, int n) { (void)reqs, (void)n; }

int dist_sum_fixed_among(float *x, size_t n, const int *ranks, int nr)
{
    (void)x, (void)n, (void)ranks;
    return nr > 1 ? no_mpi() : 0;
}

int dist_gather_ranges(float *x, size_t off, size_t n, int root)
{
    (void)x, (void)off, (void)n, (void)root;
    return 0;
}

#endif
