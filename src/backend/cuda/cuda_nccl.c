/* NCCL through dlopen (cuda_nccl.h). The few NCCL types used are declared
 * here from NCCL's documented ABI (ncclUniqueId is 128 bytes, ncclFloat32 is
 * 7, ncclSum is 0, ncclSuccess is 0), so no nccl.h is needed at build time. */
#include "backend/cuda/cuda_nccl.h"

#include "core/dynlib.h"
#include "core/err.h"
#include "core/piece.h"

#include <cuda_runtime.h>
#include <string.h>

typedef struct {
    char internal[128];
} nccl_id;
typedef void *nccl_comm;
enum { NCCL_SUCCESS = 0, NCCL_FLOAT32 = 7, NCCL_SUM = 0 };

static struct {
    dynlib lib;
    int (*get_unique_id)(nccl_id *);
    int (*comm_init_rank)(nccl_comm *, int, nccl_id, int);
    int (*all_reduce)(const void *, void *, size_t, int, int, nccl_comm, cudaStream_t);
    int (*reduce_scatter)(const void *, void *, size_t, int, int, nccl_comm, cudaStream_t);
    int (*all_gather)(const void *, void *, size_t, int, nccl_comm, cudaStream_t);
    int (*broadcast)(const void *, void *, size_t, int, int, nccl_comm, cudaStream_t);
    int (*comm_destroy)(nccl_comm);
    const char *(*error_string)(int);
    int (*send)(const void *, size_t, int, int, nccl_comm, cudaStream_t); /* NULL before NCCL 2.7 */
    int (*recv)(void *, size_t, int, int, nccl_comm, cudaStream_t);
    nccl_comm comm;
    cudaStream_t stream;
    cudaEvent_t grads_done; /* recorded on the backend's stream before each bucket */
    int rank, nranks;
    int ready;
} g;

/* The pipeline's channels (cuda_nccl_p2p_*). */
enum { P2P_CHANNELS = 4 };
static struct {
    nccl_comm comm[P2P_CHANNELS];
    cudaStream_t stream[P2P_CHANNELS];
    cudaEvent_t before[P2P_CHANNELS];        /* the compute stream's work so far, per channel */
    cudaEvent_t done[CUDA_NCCL_P2P_SLOTS];  /* each message's completion */
    int ncomm, nstream, nbefore, ndone;
} p2p;

static int nccl_fail(int r, const char *what)
{
    const char *s = g.error_string ? g.error_string(r) : "?";
    return err_set(ERR_RUNTIME, "NCCL %s failed: %s (error %d)", what, s ? s : "?", r);
}

int cuda_nccl_load(void)
{
    if (g.lib.handle) return 0;
#ifdef CUDAEMU
    /* On the CPU stand-in (tests/cudaemu) a real libnccl would talk to a
     * driver that is not there: ranks sum through the host instead. */
    return err_set(ERR_RUNTIME, "NCCL is not emulated (cudaemu: the CUDA backend runs on the CPU)");
#endif
    const char *names[] = {"libnccl.so.2", "libnccl.so"};
    if (dynlib_open(&g.lib, names, 2) != 0)
        return err_set(ERR_RUNTIME, "NCCL not found (libnccl.so.2: install libnccl2, or pip install "
                                    "nvidia-nccl-cu12 and add its nvidia/nccl/lib to LD_LIBRARY_PATH)");
    const dynlib_sym syms[] = {
        {&g.get_unique_id, "ncclGetUniqueId", NULL, 0},
        {&g.comm_init_rank, "ncclCommInitRank", NULL, 0},
        {&g.all_reduce, "ncclAllReduce", NULL, 0},
        {&g.reduce_scatter, "ncclReduceScatter", NULL, 0},
        {&g.all_gather, "ncclAllGather", NULL, 0},
        {&g.broadcast, "ncclBroadcast", NULL, 0},
        {&g.comm_destroy, "ncclCommDestroy", NULL, 0},
        {&g.error_string, "ncclGetErrorString", NULL, 1},
        {&g.send, "ncclSend", NULL, 1},
        {&g.recv, "ncclRecv", NULL, 1},
    };
    if (dynlib_resolve(&g.lib, syms, sizeof syms / sizeof syms[0]) != 0) {
        err_set(ERR_RUNTIME, "%s", g.lib.why);
        dynlib_close(&g.lib);
        memset(&g, 0, sizeof g);
        return ERR_RUNTIME;
    }
    return 0;
}

int cuda_nccl_init(int rank, int nranks, int device, int (*bcast)(void *buf, size_t bytes, int root))
{
    /* Every rank has loaded NCCL (the caller agreed on cuda_nccl_load);
     * rank 0's id goes to all with whether it could make one. */
    struct {
        int ok;
        nccl_id id;
    } msg;
    memset(&msg, 0, sizeof msg);
    int rc = cuda_nccl_load();
    if (rc) return rc;
    if (rank == 0) {
        int r = g.get_unique_id(&msg.id);
        msg.ok = r == NCCL_SUCCESS;
        if (!msg.ok) rc = nccl_fail(r, "ncclGetUniqueId");
    }
    int brc = bcast(&msg, sizeof msg, 0);
    if (rc) return rc;
    if (brc) return brc;
    if (!msg.ok) return err_set(ERR_RUNTIME, "NCCL: rank 0 could not make the communicator id");
    nccl_id id = msg.id;
    cudaError_t ce = cudaSetDevice(device);
    if (ce != cudaSuccess) return err_set(ERR_RUNTIME, "cudaSetDevice(%d): %s", device, cudaGetErrorString(ce));
    int r = g.comm_init_rank(&g.comm, nranks, id, rank);
    if (r != NCCL_SUCCESS) return nccl_fail(r, "ncclCommInitRank (two ranks on one GPU are refused by NCCL)");
    ce = cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking);
    if (ce != cudaSuccess) return err_set(ERR_RUNTIME, "cudaStreamCreate: %s", cudaGetErrorString(ce));
    ce = cudaEventCreateWithFlags(&g.grads_done, cudaEventDisableTiming);
    if (ce != cudaSuccess) {
        cudaStreamDestroy(g.stream);
        return err_set(ERR_RUNTIME, "cudaEventCreate: %s", cudaGetErrorString(ce));
    }
    g.rank = rank;
    g.nranks = nranks;
    g.ready = 1;
    return 0;
}

/* NCCL's stream waits for the ops queued so far on the backend's stream
 * (the bucket's last writer among them); the backend's goes on at once. */
static int after_compute(void *compute_stream, const char *what)
{
    if (!g.ready) return err_set(ERR_RUNTIME, "NCCL %s before cuda_nccl_init", what);
    cudaError_t ce = cudaEventRecord(g.grads_done, (cudaStream_t)compute_stream);
    if (ce == cudaSuccess) ce = cudaStreamWaitEvent(g.stream, g.grads_done, 0);
    return ce == cudaSuccess ? 0 : err_set(ERR_RUNTIME, "NCCL %s: %s", what, cudaGetErrorString(ce));
}

int cuda_nccl_allreduce_begin(void *compute_stream, float *dev_x, size_t n)
{
    int rc = after_compute(compute_stream, "all-reduce");
    if (rc) return rc;
    int r = g.all_reduce(dev_x, dev_x, n, NCCL_FLOAT32, NCCL_SUM, g.comm, g.stream);
    return r == NCCL_SUCCESS ? 0 : nccl_fail(r, "ncclAllReduce (a gradient bucket)");
}

/* The sharded optimizer's collectives on a bucket of n floats, cut as
 * core/piece.h cuts it (q floats a rank, the last rank's also the tail):
 * the gradients' reduce-scatter (every rank gets the sum of its piece; the
 * tail is all-reduced, and the last rank uses it), or the parameters'
 * all-gather (every rank's piece to all; the tail broadcast from the last
 * rank). */
static int bucket_collective(void *compute_stream, float *dev_x, size_t n, int gather)
{
    int rc = after_compute(compute_stream, gather ? "all-gather" : "reduce-scatter");
    if (rc) return rc;
    size_t off, q;
    piece_of(n, g.nranks, 0, &off, &q);
    size_t tail = n - q * (size_t)g.nranks;
    float *mine = dev_x + (size_t)g.rank * q, *rest = dev_x + q * (size_t)g.nranks;
    int r = NCCL_SUCCESS;
    if (q && gather) r = g.all_gather(mine, dev_x, q, NCCL_FLOAT32, g.comm, g.stream);
    else if (q) r = g.reduce_scatter(dev_x, mine, q, NCCL_FLOAT32, NCCL_SUM, g.comm, g.stream);
    if (r != NCCL_SUCCESS)
        return nccl_fail(r, gather ? "ncclAllGather (the parameters of a bucket)"
                                   : "ncclReduceScatter (a gradient bucket)");
    if (tail && gather) r = g.broadcast(rest, rest, tail, NCCL_FLOAT32, g.nranks - 1, g.comm, g.stream);
    else if (tail) r = g.all_reduce(rest, rest, tail, NCCL_FLOAT32, NCCL_SUM, g.comm, g.stream);
    if (r == NCCL_SUCCESS) return 0;
    return nccl_fail(r, gather ? "ncclBroadcast (a bucket's tail of parameters)"
                               : "ncclAllReduce (a gradient bucket's tail)");
}

int cuda_nccl_reduce_scatter_begin(void *compute_stream, float *dev_x, size_t n)
{
    return bucket_collective(compute_stream, dev_x, n, 0);
}

int cuda_nccl_allgather_begin(void *compute_stream, float *dev_x, size_t n)
{
    return bucket_collective(compute_stream, dev_x, n, 1);
}

int cuda_nccl_allreduce_wait(void)
{
    if (!g.ready) return err_set(ERR_RUNTIME, "NCCL wait before cuda_nccl_init");
    cudaError_t ce = cudaStreamSynchronize(g.stream);
    return ce == cudaSuccess ? 0 : err_set(ERR_RUNTIME, "NCCL all-reduce: %s", cudaGetErrorString(ce));
}

void cuda_nccl_free(void)
{
    cuda_nccl_p2p_free();
    if (g.ready) {
        g.comm_destroy(g.comm);
        cudaEventDestroy(g.grads_done);
        cudaStreamDestroy(g.stream);
    }
    dynlib_close(&g.lib);
    memset(&g, 0, sizeof g);
}

void cuda_nccl_p2p_free(void)
{
    for (int i = 0; i < p2p.ncomm; i++) g.comm_destroy(p2p.comm[i]);
    for (int i = 0; i < p2p.nstream; i++) cudaStreamDestroy(p2p.stream[i]);
    for (int i = 0; i < p2p.nbefore; i++) cudaEventDestroy(p2p.before[i]);
    for (int i = 0; i < p2p.ndone; i++) cudaEventDestroy(p2p.done[i]);
    memset(&p2p, 0, sizeof p2p);
}

int cuda_nccl_p2p_init(int rank, int nranks, int device, int (*bcast)(void *buf, size_t bytes, int root))
{
    struct {
        int ok;
        nccl_id id[P2P_CHANNELS];
    } msg;
    memset(&msg, 0, sizeof msg);
    int rc = cuda_nccl_load();
    if (rc) return rc;
    if (!g.send || !g.recv) return err_set(ERR_RUNTIME, "libnccl.so.2 lacks ncclSend/ncclRecv (NCCL 2.7 or newer needed)");
    if (rank == 0) {
        msg.ok = 1;
        for (int i = 0; i < P2P_CHANNELS && msg.ok; i++) {
            int r = g.get_unique_id(&msg.id[i]);
            msg.ok = r == NCCL_SUCCESS;
            if (!msg.ok) rc = nccl_fail(r, "ncclGetUniqueId");
        }
    }
    int brc = bcast(&msg, sizeof msg, 0);
    if (rc) return rc;
    if (brc) return brc;
    if (!msg.ok) return err_set(ERR_RUNTIME, "NCCL: rank 0 could not make the pipeline's communicator ids");
    cudaError_t ce = cudaSetDevice(device);
    if (ce != cudaSuccess) return err_set(ERR_RUNTIME, "cudaSetDevice(%d): %s", device, cudaGetErrorString(ce));
    for (int i = 0; i < P2P_CHANNELS; i++) {
        int r = g.comm_init_rank(&p2p.comm[i], nranks, msg.id[i], rank);
        if (r != NCCL_SUCCESS) {
            rc = nccl_fail(r, "ncclCommInitRank (the pipeline's channels; two ranks on one GPU are refused by NCCL)");
            break;
        }
        p2p.ncomm++;
        ce = cudaStreamCreateWithFlags(&p2p.stream[i], cudaStreamNonBlocking);
        if (ce == cudaSuccess) p2p.nstream++;
        if (ce == cudaSuccess) ce = cudaEventCreateWithFlags(&p2p.before[i], cudaEventDisableTiming);
        if (ce == cudaSuccess) p2p.nbefore++;
        if (ce != cudaSuccess) {
            rc = err_set(ERR_RUNTIME, "the pipeline's NCCL streams: %s", cudaGetErrorString(ce));
            break;
        }
    }
    for (int i = 0; !rc && i < CUDA_NCCL_P2P_SLOTS; i++) {
        ce = cudaEventCreateWithFlags(&p2p.done[i], cudaEventDisableTiming);
        if (ce != cudaSuccess) rc = err_set(ERR_RUNTIME, "the pipeline's NCCL events: %s", cudaGetErrorString(ce));
        else p2p.ndone++;
    }
    if (rc) cuda_nccl_p2p_free();
    return rc;
}

/* Channel ch's stream waits for the work queued on the compute stream. */
static int p2p_behind(void *compute_stream, int ch, int slot)
{
    if (ch < 0 || ch >= p2p.ncomm || slot < 0 || slot >= p2p.ndone)
        return err_set(ERR_RUNTIME, "NCCL pipeline message on channel %d, slot %d: not set up", ch, slot);
    cudaError_t ce = cudaEventRecord(p2p.before[ch], (cudaStream_t)compute_stream);
    if (ce == cudaSuccess) ce = cudaStreamWaitEvent(p2p.stream[ch], p2p.before[ch], 0);
    return ce == cudaSuccess ? 0 : err_set(ERR_RUNTIME, "NCCL pipeline message: %s", cudaGetErrorString(ce));
}

static int p2p_queued(int r, int ch, int slot, const char *what)
{
    if (r != NCCL_SUCCESS) return nccl_fail(r, what);
    cudaError_t ce = cudaEventRecord(p2p.done[slot], p2p.stream[ch]);
    return ce == cudaSuccess ? 0 : err_set(ERR_RUNTIME, "NCCL pipeline message: %s", cudaGetErrorString(ce));
}

int cuda_nccl_p2p_send(void *compute_stream, int ch, const float *dev, size_t n, int peer, int slot)
{
    int rc = p2p_behind(compute_stream, ch, slot);
    if (rc) return rc;
    return p2p_queued(g.send(dev, n, NCCL_FLOAT32, peer, p2p.comm[ch], p2p.stream[ch]), ch, slot, "ncclSend");
}

int cuda_nccl_p2p_recv(void *compute_stream, int ch, float *dev, size_t n, int peer, int slot)
{
    int rc = p2p_behind(compute_stream, ch, slot);
    if (rc) return rc;
    return p2p_queued(g.recv(dev, n, NCCL_FLOAT32, peer, p2p.comm[ch], p2p.stream[ch]), ch, slot, "ncclRecv");
}

int cuda_nccl_p2p_wait(int slot)
{
    if (slot < 0 || slot >= p2p.ndone) return err_set(ERR_RUNTIME, "NCCL pipeline wait for slot %d: not set up", slot);
    cudaError_t ce = cudaEventSynchronize(p2p.done[slot]);
    return ce == cudaSuccess ? 0 : err_set(ERR_RUNTIME, "NCCL pipeline message: %s", cudaGetErrorString(ce));
}
