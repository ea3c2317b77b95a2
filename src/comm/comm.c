/* The communicator (comm.h): the host's (dist.h, p2p.h) or NCCL's (the
 * CUDA module's, backend/cuda_module.h) behind one table. */
#define _GNU_SOURCE
#include "comm/comm.h"

#include "backend/cuda_module.h"
#include "core/clock.h"
#include "core/err.h"
#include "comm/dist.h"
#include "comm/p2p.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int (*allreduce_begin)(comm *c, float *x, size_t n);
    int (*reduce_scatter_begin)(comm *c, float *x, size_t n);
    int (*allgather_begin)(comm *c, float *x, size_t n);
    int (*wait)(comm *c);
    int (*send)(comm *c, int ch, int tag, const float *x, size_t n, int peer, int slot);
    int (*recv)(comm *c, int ch, int tag, float *x, size_t n, int peer, int slot);
    int (*p2p_wait)(comm *c, int slot);
    void (*close)(comm *c);
} comm_i;

struct comm {
    const comm_i *i;
    int on_device;
    void *dev_ctx;
    const bertc_cuda_api *api; /* NCCL's */
    dist_req **req;            /* host p2p: each slot's request */
    int slots;
    dist_req **mreq;           /* host messages (comm_msg_*): each slot's request */
    int mslots;
    int deferred;              /* comm_defer's failure, told at the next agreement (0: none) */
    char deferred_msg[1024];
    double dev_s;              /* NCCL: seconds in its calls and waits */
};

/* ---- host ---- */

static int host_allreduce(comm *c, float *x, size_t n)
{
    (void)c;
    return dist_allreduce_sum_fixed(x, n);
}

static int host_reduce_scatter(comm *c, float *x, size_t n)
{
    (void)c;
    return dist_reduce_scatter_sum_fixed(x, n);
}

static int host_allgather(comm *c, float *x, size_t n)
{
    (void)c;
    return dist_allgather(x, n);
}

static int host_wait(comm *c)
{
    (void)c;
    return 0;
}

static int host_send(comm *c, int ch, int tag, const float *x, size_t n, int peer, int slot)
{
    (void)ch;
    return dist_isend(x, n * sizeof *x, peer, tag, &c->req[slot]);
}

static int host_recv(comm *c, int ch, int tag, float *x, size_t n, int peer, int slot)
{
    (void)ch;
    return dist_irecv(x, n * sizeof *x, peer, tag, &c->req[slot]);
}

static int host_p2p_wait(comm *c, int slot) { return dist_wait(&c->req[slot]); }

static void host_close(comm *c) { (void)c; }

static const comm_i host_i = {host_allreduce, host_reduce_scatter, host_allgather, host_wait,
                              host_send,      host_recv,           host_p2p_wait,  host_close};

/* ---- NCCL (the CUDA module's) ---- */

static int nccl_allreduce(comm *c, float *x, size_t n)
{
    double t = clock_now_s();
    int rc = c->api->nccl_allreduce_begin(c->dev_ctx, x, n);
    c->dev_s += clock_now_s() - t;
    return rc;
}

static int nccl_reduce_scatter(comm *c, float *x, size_t n)
{
    double t = clock_now_s();
    int rc = c->api->nccl_reduce_scatter_begin(c->dev_ctx, x, n);
    c->dev_s += clock_now_s() - t;
    return rc;
}

static int nccl_allgather(comm *c, float *x, size_t n)
{
    double t = clock_now_s();
    int rc = c->api->nccl_allgather_begin(c->dev_ctx, x, n);
    c->dev_s += clock_now_s() - t;
    return rc;
}

static int nccl_wait(comm *c)
{
    double t = clock_now_s();
    int rc = c->api->nccl_allreduce_wait();
    c->dev_s += clock_now_s() - t;
    return rc;
}

static int nccl_send(comm *c, int ch, int tag, const float *x, size_t n, int peer, int slot)
{
    (void)tag;
    return c->api->nccl_p2p_send(c->dev_ctx, ch, x, n, peer, slot);
}

static int nccl_recv(comm *c, int ch, int tag, float *x, size_t n, int peer, int slot)
{
    (void)tag;
    return c->api->nccl_p2p_recv(c->dev_ctx, ch, x, n, peer, slot);
}

static int nccl_p2p_wait(comm *c, int slot) { return c->api->nccl_p2p_wait(slot); }

static void nccl_close_collectives(comm *c) { c->api->nccl_free(); }

static void nccl_close_p2p(comm *c) { c->api->nccl_p2p_free(); }

static const comm_i nccl_coll_i = {nccl_allreduce, nccl_reduce_scatter, nccl_allgather, nccl_wait,
                                   nccl_send,      nccl_recv,           nccl_p2p_wait,  nccl_close_collectives};
static const comm_i nccl_p2p_i = {nccl_allreduce, nccl_reduce_scatter, nccl_allgather, nccl_wait,
                                  nccl_send,      nccl_recv,           nccl_p2p_wait,  nccl_close_p2p};

/* NCCL for o's ranks: 1 when it runs, 0 when the host's is used instead
 * (after the warning), or an error when it loaded but did not start. */
static int open_nccl(comm *c, const comm_opts *o, int *use)
{
    const char *one = getenv("BERTC_DEBUG_DIST_ONE_GPU");
    *use = 0;
    if (!o->dev_ctx || o->ranks < 2 || (one && !strcmp(one, "1"))) return 0;
    const bertc_cuda_api *api = cuda_module_loaded();
    int lrc;
    if (o->p2p)
        lrc = api && api->nccl_p2p_init ? api->nccl_load()
                                        : err_set(ERR_RUNTIME, "the CUDA module has no NCCL send/recv");
    else
        lrc = api && api->nccl_load ? api->nccl_load() : err_set(ERR_RUNTIME, "the CUDA module has no NCCL calls");
    if (dist_agree(lrc)) {
        log_warn("%s: %s", err_msg(), o->fallback);
        err_clear();
        return 0;
    }
    int rc = o->p2p ? api->nccl_p2p_init(o->rank, o->ranks, o->gpu, dist_bcast)
                    : api->nccl_init(o->rank, o->ranks, o->gpu, dist_bcast);
    rc = dist_agree(rc);
    if (rc) return rc;
    c->api = api;
    *use = 1;
    return 0;
}

int comm_open(comm **out, const comm_opts *o)
{
    *out = NULL;
    comm *c = calloc(1, sizeof *c);
    if (!c) return err_set(ERR_RUNTIME, "out of memory");
    c->i = &host_i;
    c->dev_ctx = o->dev_ctx;
    int use = 0, rc = open_nccl(c, o, &use);
    if (rc) {
        free(c);
        return rc;
    }
    if (use) {
        c->i = o->p2p ? &nccl_p2p_i : &nccl_coll_i;
        c->on_device = 1;
    } else if (o->slots > 0) {
        c->slots = o->slots;
        c->req = calloc((size_t)o->slots, sizeof *c->req);
    }
    c->mslots = o->msg_slots;
    c->mreq = calloc((size_t)(o->msg_slots > 0 ? o->msg_slots : 1), sizeof *c->mreq);
    if ((c->slots && !c->req) || !c->mreq) {
        comm_close(c);
        return err_set(ERR_RUNTIME, "out of memory");
    }
    *out = c;
    return 0;
}

void comm_close(comm *c)
{
    if (!c) return;
    for (int k = 0; k < c->slots; k++) dist_cancel(&c->req[k]);
    for (int k = 0; k < c->mslots; k++) dist_cancel(&c->mreq[k]);
    free(c->req);
    free(c->mreq);
    c->i->close(c);
    free(c);
}

int comm_on_device(const comm *c) { return c->on_device; }

int comm_allreduce_begin(comm *c, float *x, size_t n) { return c->i->allreduce_begin(c, x, n); }
int comm_reduce_scatter_begin(comm *c, float *x, size_t n) { return c->i->reduce_scatter_begin(c, x, n); }
int comm_allgather_begin(comm *c, float *x, size_t n) { return c->i->allgather_begin(c, x, n); }
int comm_wait(comm *c) { return c->i->wait(c); }

int comm_allreduce_sum(comm *c, float *x, size_t n)
{
    int rc = comm_allreduce_begin(c, x, n);
    int wrc = comm_wait(c);
    return rc ? rc : wrc;
}

int comm_p2p_send(comm *c, int ch, int tag, const float *x, size_t n, int peer, int slot)
{
    return c->i->send(c, ch, tag, x, n, peer, slot);
}

int comm_p2p_recv(comm *c, int ch, int tag, float *x, size_t n, int peer, int slot)
{
    return c->i->recv(c, ch, tag, x, n, peer, slot);
}

int comm_p2p_wait(comm *c, int slot) { return c->i->p2p_wait(c, slot); }

void comm_p2p_cancel(comm *c, int slot)
{
    if (slot < c->slots) dist_cancel(&c->req[slot]);
}

void comm_p2p_progress(comm *c, int first, int n)
{
    if (first + n <= c->slots) dist_progress(c->req + first, n);
}

int comm_msg_send(comm *c, const void *buf, size_t bytes, int peer, int tag, int slot)
{
    return dist_isend(buf, bytes, peer, tag, &c->mreq[slot]);
}

int comm_msg_recv(comm *c, void *buf, size_t bytes, int peer, int tag, int slot)
{
    return dist_irecv(buf, bytes, peer, tag, &c->mreq[slot]);
}

int comm_msg_wait(comm *c, int slot) { return dist_wait(&c->mreq[slot]); }

void comm_msg_cancel(comm *c, int slot) { dist_cancel(&c->mreq[slot]); }

void comm_defer(comm *c, int rc)
{
    if (!rc || c->deferred) return;
    c->deferred = rc;
    snprintf(c->deferred_msg, sizeof c->deferred_msg, "%s", err_msg());
}

int comm_deferred(comm *c, int rc)
{
    if (rc || !c->deferred) return rc;
    return err_set(c->deferred, "%s", c->deferred_msg);
}

int comm_agree(comm *c, int rc)
{
    return dist_agree(c ? comm_deferred(c, rc) : rc);
}

int comm_sum_f64(comm *c, double *x, int n)
{
    (void)c;
    return dist_allreduce_sum_f64(x, n);
}

int comm_host_sum(comm *c, float *x, size_t n)
{
    (void)c;
    return dist_allreduce_sum_fixed(x, n);
}

int comm_sum_among(comm *c, float *x, size_t n, const int *ranks, int nr)
{
    (void)c;
    return dist_sum_fixed_among(x, n, ranks, nr);
}

int comm_gather_pieces(comm *c, const float *mine, float *x, size_t n, int root)
{
    (void)c;
    return dist_gather_pieces(mine, x, n, root);
}

int comm_gather_ranges(comm *c, float *x, size_t off, size_t n, int root)
{
    (void)c;
    return dist_gather_ranges(x, off, n, root);
}

double comm_seconds(const comm *c) { return dist_comm_seconds() + c->dev_s; }
