/* NCCL for data-parallel training on GPUs: one communicator of
 * all ranks, the gradient all-reduce on the device. libnccl.so.2 (Debian's
 * libnccl2, or PyPI's nvidia-nccl-cu12 with its lib dir on
 * LD_LIBRARY_PATH) is opened at run time, so the build needs no NCCL and a
 * machine without it falls back to the host path (dist/comm.c).
 *
 * Compiled into the CUDA module (libbertc_cuda.so) and reached by bertc
 * through the module's table (backend/cuda_module.h: nccl_load, nccl_init,
 * nccl_allreduce_begin/wait, nccl_reduce_scatter_begin, nccl_allgather_begin,
 * nccl_free): plain C types,
 * the rank set-up's broadcast passed in (MPI carries only NCCL's 128-byte
 * id).
 *
 * Overlap: training queues one all-reduce per gradient bucket (the QA head,
 * each encoder layer, the embeddings: model/bert.h's buckets) as backward
 * finishes it, on NCCL's own stream behind an event of the backend's stream,
 * so the sums of the upper layers run while the lower layers' backward
 * still computes; cuda_nccl_allreduce_wait then blocks only for what is left.
 *
 * Summation order: NCCL's ring or tree all-reduce. With 2 ranks a sum of
 * two is the same in either order, so two runs are bit-identical; with more
 * ranks NCCL keeps the same order for the same ranks, GPUs and topology
 * (NCCL_ALGO=Ring and NCCL_PROTO=Simple pin the choice), which makes runs
 * repeatable on the same machines but not the order rank 0, 1, ... of the
 * CPU path. Not yet run on a GPU. */
#ifndef BERTC_CUDA_NCCL_H
#define BERTC_CUDA_NCCL_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 0 when libnccl.so.2 loads and has the functions used; else ERR_RUNTIME
 * saying what is missing. No collective. */
int cuda_nccl_load(void);
/* Collective over the ranks, after every rank's cuda_nccl_load succeeded
 * (the caller agrees on that first): rank 0 makes the id, bcast(buf, bytes, root)
 * gives it to all, each joins on CUDA device `device`. */
int cuda_nccl_init(int rank, int nranks, int device, int (*bcast)(void *buf, size_t bytes, int root));
/* Queues x[0..n)'s in-place all-reduce on NCCL's stream after everything
 * queued so far on compute_stream (a cudaStream_t: the backend's) and
 * returns at once. Every rank queues the same buckets in the same order. */
int cuda_nccl_allreduce_begin(void *compute_stream, float *dev_x, size_t n);
/* --shard-optimizer: x[0..n)'s in-place reduce-scatter, this rank ending
 * with the sum of its piece, and the in-place all-gather of every rank's
 * piece, queued in the same way. The pieces are src/dist's (dist_piece):
 * q = n / nranks floats each, rank r's at r*q, the last rank's also the
 * n - nranks*q left over. NCCL's ncclReduceScatter/ncclAllGather take
 * the nranks*q floats (in place: the piece at rank*q); the tail goes by
 * ncclAllReduce and by ncclBroadcast from the last rank. */
int cuda_nccl_reduce_scatter_begin(void *compute_stream, float *dev_x, size_t n);
int cuda_nccl_allgather_begin(void *compute_stream, float *dev_x, size_t n);
/* Blocks until every queued collective is done. */
int cuda_nccl_allreduce_wait(void);
void cuda_nccl_free(void);

/* Pipeline stages (train/run_pipe.c): point-to-point messages on four
 * communicators of all ranks, one per channel: ch = 2 * direction +
 * (boundary % 2), direction 0 for activations (stage b to b + 1), 1 for
 * gradients (b + 1 to b), boundary b between stages b and b + 1. Each
 * channel has its own stream, so on every rank a stream carries one kind
 * of message to or from one neighbour, in the order the units go: the
 * sends and receives of a channel pair up in order, as NCCL needs, and no
 * message waits behind another one's peer. A message is queued behind the
 * work on compute_stream (a cudaStream_t) and returns at once; `slot`
 * (0 .. CUDA_NCCL_P2P_SLOTS - 1) names it for cuda_nccl_p2p_wait, which
 * blocks until it is done (a receive before its data is used, a send
 * before its buffer is written again), as MPI_Wait does on the MPI path.
 * Collective init after every rank's cuda_nccl_load; NCCL 2.7 or newer
 * (ncclSend). */
#define CUDA_NCCL_P2P_SLOTS 256
int cuda_nccl_p2p_init(int rank, int nranks, int device, int (*bcast)(void *buf, size_t bytes, int root));
int cuda_nccl_p2p_send(void *compute_stream, int ch, const float *dev, size_t n, int peer, int slot);
int cuda_nccl_p2p_recv(void *compute_stream, int ch, float *dev, size_t n, int peer, int slot);
int cuda_nccl_p2p_wait(int slot);
void cuda_nccl_p2p_free(void);

#ifdef __cplusplus
}
#endif

#endif
