/* The communicator: the collectives and messages a training step makes,
 * behind one table, so that the trainer never asks which library moves its
 * floats. Two implementations, chosen once by comm_open and known nowhere
 * else:
 *
 *   host   dist.h's fixed-order collectives and p2p.h's messages over MPI
 *          (or nothing, with one rank) on host memory: the CPU backend's
 *          blocks, or host copies of a GPU's
 *   NCCL   the CUDA module's NCCL calls (backend/cuda_module.h) on device
 *          memory, queued behind the backend's stream: a GPU backend when
 *          every rank can load NCCL and has its own GPU
 *
 * comm_on_device says which memory the float calls take: a caller whose
 * blocks are on a GPU while the communicator is the host's copies them
 * through the host around the call.
 *
 * Both give the same bytes: a sum is over the ranks in rank order (dist.h),
 * in pieces piece_of cuts. The *_begin calls may return before the data
 * moved (NCCL); comm_wait waits for all begun. On the host they are done
 * when they return and comm_wait has nothing to wait for.
 *
 * The agreement calls (comm_agree, comm_sum_f64, comm_bcast) and the
 * gathers of host blocks for checkpoints always go over the host.
 *
 *   comm *cm;
 *   rc = comm_open(&cm, &(comm_opts){.rank = r, .ranks = n, .gpu = g, .dev_ctx = be->ctx,
 *                                    .fallback = "summing the gradients through the host over MPI instead"});
 *   rc = comm_allreduce_begin(cm, grads + off, len);   (as each bucket is final)
 *   rc = comm_wait(cm);                                  (before the optimizer reads them)
 *   comm_close(cm);
 *
 * Every call is collective over the ranks (or, p2p, between two) and must
 * be made by every rank in the same order. Errors: 0 or an err.h code with
 * the message set. */
#ifndef BERTC_COMM_COMM_H
#define BERTC_COMM_COMM_H

#include <stddef.h>

typedef struct comm comm;

typedef struct {
    int rank, ranks;
    int gpu;              /* the CUDA device this rank uses (NCCL's) */
    void *dev_ctx;        /* a GPU backend's context: NCCL may carry its memory; NULL: host memory only */
    int p2p;              /* 1: point-to-point messages (pipeline stages); 0: collectives */
    int slots;            /* p2p: the message slots (0 .. slots-1) the caller names */
    int msg_slots;        /* host messages (comm_msg_*): their slots */
    const char *fallback; /* what the warning says happens when NCCL cannot be used */
} comm_opts;

/* Collective: NCCL when o->dev_ctx is set, more than one rank runs, every
 * rank loads NCCL (agreed) and BERTC_DEBUG_DIST_ONE_GPU is not 1 (ranks
 * sharing one GPU, which NCCL refuses); else the host's, with one warning
 * ("REASON: FALLBACK") when NCCL was wanted. An NCCL that loads but does
 * not start is an error on every rank. */
int comm_open(comm **out, const comm_opts *o);
void comm_close(comm *c);
/* 1 when the float calls below take device memory (NCCL). */
int comm_on_device(const comm *c);

/* In place, x[i] summed over the ranks in rank order; every rank ends
 * with the same bytes (dist_allreduce_sum_fixed). */
int comm_allreduce_begin(comm *c, float *x, size_t n);
/* In place: this rank's piece of x (piece_of) gets the sum, the rest is
 * left as it was (dist_reduce_scatter_sum_fixed). */
int comm_reduce_scatter_begin(comm *c, float *x, size_t n);
/* In place: every rank's piece of x to every rank (dist_allgather). */
int comm_allgather_begin(comm *c, float *x, size_t n);
/* Waits for every collective begun. */
int comm_wait(comm *c);
/* Blocking all-reduce: begin and wait. */
int comm_allreduce_sum(comm *c, float *x, size_t n);

/* p2p: sends (receives) n floats to (from) rank peer in slot `slot`, on
 * channel ch (NCCL: one stream per channel, messages in order on it) or
 * with tag (host: MPI's tag); the buffer stays untouched until
 * comm_p2p_wait(slot). */
int comm_p2p_send(comm *c, int ch, int tag, const float *x, size_t n, int peer, int slot);
int comm_p2p_recv(comm *c, int ch, int tag, float *x, size_t n, int peer, int slot);
int comm_p2p_wait(comm *c, int slot);
/* After a failure: gives up the slot's message without waiting. */
void comm_p2p_cancel(comm *c, int slot);
/* Lets pending messages of slots [first, first + n) move on while the
 * caller computes. */
void comm_p2p_progress(comm *c, int first, int n);

/* Over the host, whatever the implementation. */
/* Messages of bytes (a pipeline unit's header) to or from rank peer with
 * tag, in the slot given (0 .. msg_slots-1); the buffer stays untouched
 * until comm_msg_wait(slot); cancel gives it up after a failure (p2p.h). */
int comm_msg_send(comm *c, const void *buf, size_t bytes, int peer, int tag, int slot);
int comm_msg_recv(comm *c, void *buf, size_t bytes, int peer, int tag, int slot);
int comm_msg_wait(comm *c, int slot);
void comm_msg_cancel(comm *c, int slot);
/* A failure this rank tells at the next agreement rather than now (the
 * ranks are inside collectives that must still match): rc and its message
 * kept (the first one). comm_deferred: rc, or when rc is 0 the deferred
 * failure with its message set again. */
void comm_defer(comm *c, int rc);
int comm_deferred(comm *c, int rc);
/* Everyone's rc (with a deferred failure): 0 when all were 0, else the
 * lowest failing rank's, with its message, on every rank (dist_agree). c
 * may be NULL (before comm_open). */
int comm_agree(comm *c, int rc);
/* In place, a few doubles summed over the ranks in rank order. */
int comm_sum_f64(comm *c, double *x, int n);
/* In place, host floats summed over the ranks in rank order (the
 * evaluation's logits; dist_allreduce_sum_fixed). */
int comm_host_sum(comm *c, float *x, size_t n);
/* In place among ranks[0..nr) only, in that order (dist_sum_fixed_among). */
int comm_sum_among(comm *c, float *x, size_t n, const int *ranks, int nr);
/* Root's x gets each rank's piece `mine` (dist_gather_pieces). */
int comm_gather_pieces(comm *c, const float *mine, float *x, size_t n, int root);
/* Root's x gets each rank's floats [off, off + n) (dist_gather_ranges). */
int comm_gather_ranges(comm *c, float *x, size_t off, size_t n, int root);
/* Seconds this process spent in collectives, waits included: the host's
 * (dist_comm_seconds) and the device's begun and waited for. */
double comm_seconds(const comm *c);

#endif
