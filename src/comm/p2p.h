/* Point-to-point messages between ranks, for the pipeline's stages
 * (activations forward, their gradients back) and for gathering the
 * stages' parts of the parameters on the writer. Non-blocking: a request
 * is started, the caller computes, then waits for it; the buffer must stay
 * untouched until the wait returns. Messages between two ranks with the
 * same tag arrive in the order they were sent (MPI's rule).
 *
 * Errors: functions return 0 or an err.h code with the message set; a
 * build without MPI returns ERR_RUNTIME from every call that would send. */
#ifndef BERTC_COMM_P2P_H
#define BERTC_COMM_P2P_H

#include <stddef.h>

typedef struct dist_req dist_req;

/* Starts sending (receiving) `bytes` bytes to (from) rank `peer` with
 * `tag` (0 .. 32767); *req gets the request to wait for. */
int dist_isend(const void *buf, size_t bytes, int peer, int tag, dist_req **req);
int dist_irecv(void *buf, size_t bytes, int peer, int tag, dist_req **req);
/* Waits for *req (NULL: nothing to wait for) and sets it to NULL. A
 * receive that got another number of bytes than asked for is an error. */
int dist_wait(dist_req **req);
/* Gives up *req (NULL: nothing) without waiting, after a failure: the
 * message is cancelled where it can be, and *req is set to NULL. */
void dist_cancel(dist_req **req);
/* Lets the library move pending messages on (MPI_Test on each), so that a
 * large message gets through while the caller computes. */
void dist_progress(dist_req **reqs, int n);
/* In place among the ranks ranks[0..nr) (each calls it with the same list;
 * the others do not): x[i] = x_ranks[0][i] + x_ranks[1][i] + ..., added in
 * that order, as dist_allreduce_sum_fixed adds over all ranks, so every
 * member ends with the same bytes. */
int dist_sum_fixed_among(float *x, size_t n, const int *ranks, int nr);
/* Every rank's floats [off, off + n) of x into root's x (the other ranks'
 * x beyond their own range is not touched); collective over all ranks. */
int dist_gather_ranges(float *x, size_t off, size_t n, int root);

#endif
