/* Pipeline stages of a training run (run.h, train/pipeline.h).
 *
 * Rank r is stage r / D of replica r % D (S stages x D replicas). Every
 * rank reads the data and cuts the step alike: replica d takes its
 * dist_share of the step's micro-batches, and each micro-batch is one unit
 * of the pipeline (packed: one unit per piece that fits --max-tokens, as
 * step.c cuts them). Units flow through the replica's stages in the
 * 1F1B order of pipe_op_at; unit u's activations x[hi] go to the next
 * stage, with a header naming the unit and its layout (micro-batch,
 * piece, windows, rows and, packed, the cu_seqlens), and their gradient
 * d(x[lo]) back to the previous one, each in the unit's activation set
 * (bert_stage_*), by non-blocking messages: a
 * receive is posted as soon as its set is free, a send is waited for only
 * when its buffer is about to be written again, so messages travel while
 * the stage computes. The stage's gradients accumulate over its units in
 * unit order, as one process accumulates its micro-batches, with the same
 * dropout counters (the step's global micro-batch index) and masks (per
 * global layer), so a pipeline computes the bits of one process (and S x
 * D ranks those of D data-parallel ranks: the replicas' gradients are
 * summed in replica order, as dist_allreduce_sum_fixed sums ranks).
 *
 * A stage checks each header against the unit it cut itself from the data,
 * so stages that disagree about a step (other data, another cut) stop with
 * an error instead of computing on misplaced rows.
 *
 * On GPUs the activations and gradients go from and to the device buffers
 * when the communicator takes device memory (comm/comm.h: NCCL's
 * send/recv, four channels, so that each stream carries one kind of message
 * to one neighbour in unit order); else through host copies (the staging
 * buffers below). The headers always go over MPI. */
#define _GNU_SOURCE
#include "train/run.h"

#include "core/clock.h"
#include "core/err.h"
#include "comm/comm.h"
#include "comm/dist.h"
#include "comm/p2p.h"
#include "model/memory.h"
#include "model/pack.h"
#include "train/microbatch.h"
#include "train/pipeline.h"
#include "train/step.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int k;     /* the step's micro-batch (global index: the dropout counter) */
    int r0, n; /* rows idx[r0 .. r0 + n) of the step's list */
    int piece; /* packed: the piece of micro-batch k (its dropout seed is seed + piece) */
    int rows;  /* N: n * T padded, the real tokens packed */
} pipe_unit;

/* The per-set buffers a stage exchanges: four of floats, two headers. */
enum { PX_IN, PX_OUT, PG_OUT, PG_IN, PH_IN, PH_OUT, PBUFS };
enum { HDR_FIXED = 5 }; /* unit, micro-batch, piece, windows, rows; then cu_seqlens when packed */

struct pipe_run {
    int prev, next;       /* the ranks of this replica's neighbouring stages (-1: none) */
    size_t poff, pn;       /* this stage's slice of the parameter block: floats [poff, poff + pn) */
    int sets;
    pipe_unit *units;
    int nunits, cap;
    dist_req **hreq[2];    /* per set: the header's receive (PH_IN) and send (PH_OUT) */
    float **host[PH_IN];   /* per set: host copies (GPU backends without a device communicator; NULL: none) */
    int32_t **hdr[2];      /* per set: the header received (PH_IN) and sent (PH_OUT) */
    int32_t *want;         /* this stage's header of the unit it checks */
    int32_t *ids, *types, *cu;
    int *group;            /* the ranks of this stage's replicas, in replica order */
    double busy_s, idle_s; /* this rank: computing, waiting for a neighbour */
    double *times;         /* every rank's idle_s, then busy_s (2 x ranks), after each step */
};

/* Buffer b's (b < PH_IN) message slot of set k in the communicator. */
static int slot_of(int b, int k) { return b * PIPE_MAX_STAGES + k; }


/* The message tag of unit u's activations (kind 0), gradients (kind 1) or
 * header (kind 2). */
static int tag_of(int u, int kind) { return 3 * (u % 8000) + kind; }

/* "pipeline stage s (layers a-b)" for messages. */
static void stage_name(const run_ctx *c, char *buf, size_t cap)
{
    snprintf(buf, cap, "pipeline stage %d of %d (layers %d-%d)", c->stage, c->stages, c->split[c->stage],
             c->split[c->stage + 1] - 1);
}

/* "0-1 | 2-3": each stage's layers. */
static void pipe_split_text(const run_ctx *c, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = 0;
    for (int s = 0; s < c->stages && n < cap; s++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%d-%d", s ? " | " : "", c->split[s], c->split[s + 1] - 1);
}

int run_pipe_configure(run_ctx *c)
{
    const trainer_opts *o = c->o;
    c->stages = o->pipeline_stages > 1 ? o->pipeline_stages : 1;
    c->stage = 0;
    c->replicas = c->ranks;
    c->replica = c->rank;
    if (c->stages == 1) return 0;
    int S = c->stages, L = c->qm.cfg.num_hidden_layers;
    struct pipe_run *p = calloc(1, sizeof *p);
    if (!p) return err_set(ERR_RUNTIME, "out of memory");
    c->pipe = p;
    if (c->ranks % S != 0)
        return err_set(ERR_INPUT, "--pipeline-stages %d: %d ranks are not a multiple of the stages", S, c->ranks);
    c->replicas = c->ranks / S;
    c->stage = c->rank / c->replicas;
    c->replica = c->rank % c->replicas;
    if (o->pipeline_split_n > 0) {
        if (o->pipeline_split_n != S + 1)
            return err_set(ERR_INPUT, "--pipeline-split: %d boundaries for %d stages (give %d: 0, ..., %d)",
                           o->pipeline_split_n, S, S + 1, L);
        memcpy(c->split, o->pipeline_split, (size_t)(S + 1) * sizeof *c->split);
    } else {
        /* checked even; the default split is chosen in pipe_start, once the micro-batch is known */
        pipe_split_even(L, S, c->split);
    }
    return pipe_split_check(c->split, S, L, o->pipeline_split_n > 0 ? "--pipeline-split" : "--pipeline-stages");
}

/* This stage's model and optimizer with the host parameters' slice (and
 * the Adam state's, resumed), and the buffers of its messages. */
static int pipe_start(run_ctx *c)
{
    struct pipe_run *p = c->pipe;
    int S = c->stages, s = c->stage, D = c->replicas;
    /* The default split: bertc plan's (the smallest largest stage time,
     * then the smallest largest stage peak) at this run's micro-batch,
     * which every rank has alike. */
    if (c->o->pipeline_split_n == 0) {
        memory_query q = {.cfg = &c->qm.cfg, .micro = c->micro, .T = c->T, .prec = c->qm.info.precision,
                          .recompute = c->qm.recompute, .stages = S};
        int rc = memory_split(&q, c->split);
        if (rc) return err_wrap(rc, "--pipeline-stages %d", S);
    }
    p->prev = s > 0 ? c->rank - D : -1;
    p->next = s < S - 1 ? c->rank + D : -1;
    /* Units per step on this replica: its share of the micro-batches, or
     * any number when packed pieces are cut by --max-tokens. */
    int per_replica = (c->micro_batches + D - 1) / D;
    int cut = c->qm.packing == PACKING_VARLEN && c->qm.max_tokens > 0 && c->qm.max_tokens < (int64_t)c->micro * c->T;
    p->sets = pipe_sets(S, s, cut ? S : per_replica > 0 ? per_replica : 1);
    char name[96];
    stage_name(c, name, sizeof name);
    int rc = bert_model_create(&c->qm.model,
                               &(bert_model_opts){.cfg = &c->qm.cfg,
                                                  .be = &c->qm.be,
                                                  .max_B = c->micro,
                                                  .T = c->T,
                                                  .max_tokens = c->qm.packing == PACKING_VARLEN ? c->qm.max_tokens : 0,
                                                  .recompute = c->qm.recompute,
                                                  .stage_lo = c->split[s],
                                                  .stage_hi = c->split[s + 1],
                                                  .sets = p->sets});
    if (rc) return err_wrap(rc, "rank %d of %d: %s", c->rank, c->ranks, name);
    c->qm.max_B = c->micro;
    c->qm.T = c->T;
    bert_model_stage(c->qm.model, NULL, NULL, &p->poff);
    p->pn = bert_model_stage_table(c->qm.model)->total;
    rc = bert_model_set_params(c->qm.model, c->host_params);
    if (rc) return rc;
    size_t rows = (size_t)bert_model_max_tokens(c->qm.model), C = (size_t)c->qm.cfg.hidden_size;
    for (int b = 0; b < PH_IN; b++) {
        p->host[b] = calloc((size_t)p->sets, sizeof *p->host[b]);
        if (!p->host[b]) return err_set(ERR_RUNTIME, "out of memory");
        for (int k = 0; c->qm.info.is_cuda && k < p->sets; k++) {
            p->host[b][k] = malloc(rows * C * sizeof(float));
            if (!p->host[b][k])
                return err_set(ERR_RUNTIME, "out of memory for the pipeline's host buffers (%zu floats)", rows * C);
        }
    }
    for (int h = 0; h < 2; h++) {
        p->hreq[h] = calloc((size_t)p->sets, sizeof *p->hreq[h]);
        p->hdr[h] = calloc((size_t)p->sets, sizeof *p->hdr[h]);
        if (!p->hreq[h] || !p->hdr[h]) return err_set(ERR_RUNTIME, "out of memory");
        for (int k = 0; k < p->sets; k++)
            if (!(p->hdr[h][k] = malloc((HDR_FIXED + (size_t)c->micro + 1) * sizeof(int32_t))))
                return err_set(ERR_RUNTIME, "out of memory");
    }
    p->want = malloc((HDR_FIXED + (size_t)c->micro + 1) * sizeof *p->want);
    p->ids = malloc(rows * sizeof *p->ids);
    p->types = malloc(rows * sizeof *p->types);
    p->cu = malloc(((size_t)c->micro + 1) * sizeof *p->cu);
    p->group = malloc((size_t)D * sizeof *p->group);
    if (!p->want || !p->ids || !p->types || !p->cu || !p->group) return err_set(ERR_RUNTIME, "out of memory");
    for (int d = 0; d < D; d++) p->group[d] = s * D + d;
    p->times = calloc(2 * (size_t)c->ranks, sizeof *p->times);
    if (!p->times) return err_set(ERR_RUNTIME, "out of memory");
    return run_optim_start(c, bert_model_stage_table(c->qm.model), p->poff);
}

/* After every rank's set-up (collective). GPUs: NCCL's send/recv when
 * every rank loads it and each has its own GPU (BERTC_DEBUG_DIST_ONE_GPU:
 * ranks sharing one go through the host). */
static int pipe_connect(run_ctx *c)
{
    struct pipe_run *p = c->pipe;
    int rc = comm_open(&c->cm, &(comm_opts){.rank = c->rank,
                                            .ranks = c->ranks,
                                            .gpu = c->bo.gpu,
                                            .dev_ctx = c->qm.info.is_cuda ? c->qm.be.ctx : NULL,
                                            .p2p = 1,
                                            .slots = PH_IN * PIPE_MAX_STAGES,
                                            .fallback = "the pipeline's messages go through the host over MPI instead"});
    for (int b = 0; !rc && comm_on_device(c->cm) && b < PH_IN; b++)
        for (int k = 0; k < p->sets; k++) {
            free(p->host[b][k]); /* no host copies */
            p->host[b][k] = NULL;
        }
    return rc;
}

static void pipe_free(run_ctx *c)
{
    struct pipe_run *p = c->pipe;
    comm_close(c->cm);
    c->cm = NULL;
    if (!p) return;
    for (int b = 0; b < PH_IN; b++) {
        for (int k = 0; p->host[b] && k < p->sets; k++) free(p->host[b][k]);
        free(p->host[b]);
    }
    for (int h = 0; h < 2; h++) {
        for (int k = 0; p->hreq[h] && k < p->sets; k++) dist_cancel(&p->hreq[h][k]);
        for (int k = 0; p->hdr[h] && k < p->sets; k++) free(p->hdr[h][k]);
        free(p->hreq[h]);
        free(p->hdr[h]);
    }
    free(p->units);
    free(p->want);
    free(p->ids);
    free(p->types);
    free(p->cu);
    free(p->group);
    free(p->times);
    free(p);
    c->pipe = NULL;
}

static int add_unit(struct pipe_run *p, pipe_unit u)
{
    if (p->nunits == p->cap) {
        int cap = p->cap ? 2 * p->cap : 16;
        pipe_unit *v = realloc(p->units, (size_t)cap * sizeof *v);
        if (!v) return err_set(ERR_RUNTIME, "out of memory");
        p->units = v;
        p->cap = cap;
    }
    p->units[p->nunits++] = u;
    return 0;
}

/* This replica's units of the step: its micro-batches, or their packed
 * pieces (run_step.c's cut: windows while they fit the model's tokens). */
static int plan_units(run_ctx *c, const int32_t *idx, int count)
{
    struct pipe_run *p = c->pipe;
    int first, len, rc = 0;
    dist_share(count, c->micro, c->replicas, c->replica, &first, &len);
    p->nunits = 0;
    int64_t cap = bert_model_max_tokens(c->qm.model);
    int *wlen = malloc((size_t)c->micro * sizeof *wlen);
    if (!wlen) return err_set(ERR_RUNTIME, "out of memory");
    for (int at = first; at < first + len && !rc; at += c->micro) {
        int B = first + len - at < c->micro ? first + len - at : c->micro;
        int k = at / c->micro;
        if (c->qm.packing != PACKING_VARLEN) {
            rc = add_unit(p, (pipe_unit){k, at, B, 0, B * c->T});
            continue;
        }
        pack_lengths(c->tf.attention_mask, c->tf.T, idx + at, B, wlen);
        for (int r0 = 0, piece = 0, n; r0 < B && !rc; piece++, r0 += n) {
            int64_t N;
            n = pack_cut(wlen + r0, B - r0, 0, cap, &N);
            rc = add_unit(p, (pipe_unit){k, at + r0, n, piece, (int)N});
        }
    }
    free(wlen);
    return rc;
}

/* Unit u's rows as a batch (host): gathered, and packed when packing. */
static void unit_batch(run_ctx *c, const int32_t *idx, const pipe_unit *u, bert_batch *b)
{
    struct pipe_run *p = c->pipe;
    loader_batch *mb = &c->mb;
    int T = c->T;
    loader_gather(mb, &c->tf, idx + u->r0, u->n);
    if (c->qm.packing != PACKING_VARLEN) {
        *b = (bert_batch){u->n, T, mb->input_ids, mb->token_type_ids, mb->attention_mask, mb->start_positions,
                          mb->end_positions, NULL, 0};
        return;
    }
    pack_piece(mb->input_ids, mb->token_type_ids, mb->attention_mask, T, NULL, NULL, u->n, p->ids, p->types, p->cu);
    *b = (bert_batch){u->n, T, p->ids, p->types, NULL, mb->start_positions, mb->end_positions, p->cu, 0};
}

/* The backend buffer b of set k. */
static float *stage_buf(run_ctx *c, int b, int k)
{
    bert_model *m = c->qm.model;
    switch (b) {
    case PX_IN: return bert_stage_x_in(m, k);
    case PX_OUT: return (float *)bert_stage_x_out(m, k);
    case PG_OUT: return bert_stage_dx_out(m, k);
    default: return (float *)bert_stage_dx_in(m, k);
    }
}

/* The device communicator's channel for buffer b of stage s (cuda_nccl.h):
 * 2 * direction + boundary % 2. */
static int nccl_channel(int b, int s)
{
    switch (b) {
    case PX_OUT: return s % 2;           /* activations over boundary s */
    case PX_IN: return (s - 1) % 2;      /* over boundary s - 1 */
    case PG_IN: return 2 + (s - 1) % 2;  /* gradients over boundary s - 1 */
    default: return 2 + s % 2;           /* PG_OUT: over boundary s */
    }
}

/* Buffer b's message of set k is done (b < PH_IN). */
static int wait_buf(run_ctx *c, int b, int k) { return comm_p2p_wait(c->cm, slot_of(b, k)); }

/* Unit u's header: its place in the step and its layout (cu: the packed
 * batch's cu_seqlens, as unit_batch left them). Returns its length. */
static int unit_header(run_ctx *c, int u, int32_t *h)
{
    const pipe_unit *un = &c->pipe->units[u];
    h[0] = u;
    h[1] = un->k;
    h[2] = un->piece;
    h[3] = un->n;
    h[4] = un->rows;
    if (c->qm.packing != PACKING_VARLEN) return HDR_FIXED;
    memcpy(h + HDR_FIXED, c->pipe->cu, ((size_t)un->n + 1) * sizeof *h);
    return HDR_FIXED + un->n + 1;
}

static size_t header_bytes(run_ctx *c, int u)
{
    return (HDR_FIXED + (c->qm.packing == PACKING_VARLEN ? (size_t)c->pipe->units[u].n + 1 : 0)) * sizeof(int32_t);
}

/* Starts receiving buffer b (PX_IN with its header, PG_OUT) of set k for unit u. */
static int post_recv(run_ctx *c, int b, int k, int u)
{
    struct pipe_run *p = c->pipe;
    size_t bytes = (size_t)p->units[u].rows * (size_t)c->qm.cfg.hidden_size * sizeof(float);
    float *dst = p->host[b][k] ? p->host[b][k] : stage_buf(c, b, k);
    int rc = b == PX_IN ? dist_irecv(p->hdr[0][k], header_bytes(c, u), p->prev, tag_of(u, 2), &p->hreq[0][k]) : 0;
    int peer = b == PX_IN ? p->prev : p->next;
    return rc ? rc : comm_p2p_recv(c->cm, nccl_channel(b, c->stage), tag_of(u, b == PG_OUT), dst,
                                   bytes / sizeof(float), peer, slot_of(b, k));
}

/* Waits for buffer b (PX_IN with its header, PG_OUT) of set k (unit u),
 * counting the wait as idle. */
static int wait_recv(run_ctx *c, int b, int k, int u)
{
    struct pipe_run *p = c->pipe;
    double t = clock_now_s();
    int rc = b == PX_IN ? dist_wait(&p->hreq[0][k]) : 0;
    if (!rc) rc = wait_buf(c, b, k);
    p->idle_s += clock_now_s() - t;
    if (!rc && p->host[b][k]) {
        backend *be = &c->qm.be;
        size_t bytes = (size_t)p->units[u].rows * (size_t)c->qm.cfg.hidden_size * sizeof(float);
        rc = be->i->upload(be->ctx, stage_buf(c, b, k), p->host[b][k], bytes);
    }
    return rc;
}

/* Starts sending buffer b (PX_OUT with its header, PG_IN) of set k for unit u. */
static int post_send(run_ctx *c, int b, int k, int u)
{
    struct pipe_run *p = c->pipe;
    size_t bytes = (size_t)p->units[u].rows * (size_t)c->qm.cfg.hidden_size * sizeof(float);
    const float *src = stage_buf(c, b, k);
    if (b == PX_OUT) {
        int n = unit_header(c, u, p->hdr[1][k]);
        /* BERTC_DEBUG_PIPE_HEADER=S (a test hook): step S's headers on this rank name one row too many */
        const char *dbg = getenv("BERTC_DEBUG_PIPE_HEADER");
        if (dbg && atoll(dbg) == c->st.step + 1) p->hdr[1][k][4]++;
        int rc = dist_isend(p->hdr[1][k], (size_t)n * sizeof(int32_t), p->next, tag_of(u, 2), &p->hreq[1][k]);
        if (rc) return rc;
    }
    if (p->host[b][k]) {
        backend *be = &c->qm.be;
        int rc = be->i->download(be->ctx, p->host[b][k], src, bytes);
        if (rc) return rc;
        src = p->host[b][k];
    }
    return comm_p2p_send(c->cm, nccl_channel(b, c->stage), tag_of(u, b == PG_IN), src, bytes / sizeof(float),
                         b == PX_OUT ? p->next : p->prev, slot_of(b, k));
}

/* The previous stage's header of unit u against this stage's own cut. */
static int check_header(run_ctx *c, int u, const int32_t *got)
{
    int32_t *want = c->pipe->want;
    int n = unit_header(c, u, want);
    for (int i = 0; i < n; i++)
        if (got[i] != want[i])
            return err_set(ERR_RUNTIME, "unit %d of the step (micro-batch %d, piece %d, %d windows, %d rows): the "
                                        "previous stage sent %s %d where this one has %d: the stages disagree on the "
                                        "step's data", u, want[1], want[2], want[3], want[4],
                           i < HDR_FIXED ? "a header field" : "a cu_seqlens entry", got[i], want[i]);
    return 0;
}

/* The step's last messages; after a failed message (a neighbour died) the
 * others are given up, not waited for. */
static int finish_requests(run_ctx *c, int failed)
{
    struct pipe_run *p = c->pipe;
    int rc = 0;
    for (int b = 0; b < PBUFS; b++)
        for (int k = 0; k < p->sets; k++) {
            dist_req **hr = b < PH_IN ? NULL : &p->hreq[b - PH_IN][k];
            if ((failed || rc) && hr) dist_cancel(hr);
            else if (failed || rc) comm_p2p_cancel(c->cm, slot_of(b, k));
            else rc = hr ? dist_wait(hr) : wait_buf(c, b, k);
        }
    return rc;
}

/* The step's forward and backward passes, 1F1B over the stages, into
 * freshly zeroed gradients; a rank whose compute failed keeps sending so
 * that no neighbour waits forever; the failure is agreed on at the end,
 * naming the stage. */
static int pipe_pass(run_ctx *c, const int32_t *idx, int count, float scale, double *loss_out)
{
    struct pipe_run *p = c->pipe;
    bert_model *m = c->qm.model;
    int S = c->stages, s = c->stage, first = s == 0, last = s == S - 1;
    bert_zero_grad(m);
    int rc = plan_units(c, idx, count), crc = 0; /* crc: the compute failed here; the messages go on */
    int M = p->nunits, sets = p->sets;
    double loss = 0;
    for (int u = 0; !first && u < M && u < sets && !rc; u++) rc = post_recv(c, PX_IN, u % sets, u);
    for (int i = 0; i < 2 * M && !rc; i++) {
        pipe_op op = pipe_op_at(S, s, M, i);
        const pipe_unit *u = &p->units[op.micro];
        int k = op.set;
        float w = (float)u->n / (float)count;
        if (op.kind == PIPE_FORWARD) {
            if (!first) rc = wait_recv(c, PX_IN, k, op.micro);
            if (!rc) rc = wait_buf(c, PX_OUT, k); /* x_out is written again */
            if (!rc) rc = dist_wait(&p->hreq[1][k]);
            bert_batch b;
            if (!rc) unit_batch(c, idx, u, &b);
            if (!rc && !first && !crc) crc = check_header(c, op.micro, p->hdr[0][k]);
            if (!rc && !crc) {
                philox_stream rng = {(uint64_t)c->o->seed + (uint64_t)u->piece,
                                     (uint32_t)((uint64_t)c->st.step * (uint64_t)c->micro_batches + (uint64_t)u->k), 0};
                float l = 0;
                double t = clock_now_s();
                crc = train_step_debug_oom(c->st.step + 1, u->n);
                if (!crc) crc = bert_stage_forward(m, k, &b, c->drop_hidden, c->drop_attn, rng, &l, NULL, NULL);
                p->busy_s += clock_now_s() - t;
                if (!crc && last) loss += (double)w * (double)l;
            }
            if (!rc && !last) rc = post_send(c, PX_OUT, k, op.micro);
            if (!rc && !last) rc = post_recv(c, PG_OUT, k, op.micro);
        } else {
            if (!last) rc = wait_recv(c, PG_OUT, k, op.micro);
            if (!rc) rc = wait_buf(c, PG_IN, k); /* d_in is written again */
            if (!rc) rc = wait_buf(c, PX_OUT, k); /* recompute writes x_out again */
            if (!rc && !crc) {
                double t = clock_now_s();
                crc = bert_stage_backward(m, k, w * scale);
                p->busy_s += clock_now_s() - t;
            }
            if (!rc && !first) rc = post_send(c, PG_IN, k, op.micro);
            if (!rc && !first && op.micro + sets < M) rc = post_recv(c, PX_IN, k, op.micro + sets);
        }
        comm_p2p_progress(c->cm, slot_of(PX_OUT, 0), sets);
        comm_p2p_progress(c->cm, slot_of(PG_IN, 0), sets);
    }
    int frc = finish_requests(c, rc != 0);
    if (!rc) rc = frc;
    if (!rc && crc) {
        char name[96], why[512];
        stage_name(c, name, sizeof name);
        snprintf(why, sizeof why, "%s", err_msg());
        rc = err_set(crc, "rank %d of %d: %s: step %lld: %s%s", c->rank, c->ranks, name, (long long)c->st.step + 1, why,
                     microbatch_is_oom(crc) ? " (no back-off in a pipeline: give a smaller --micro-batch, --recompute "
                                              "layer or more stages)" : "");
    }
    /* A failure anywhere ends every rank, with its message. */
    rc = comm_agree(c->cm, rc);
    *loss_out = loss;
    return rc;
}

/* The stage's gradients summed over its replicas (in replica order). */
static int pipe_reduce(run_ctx *c)
{
    struct pipe_run *p = c->pipe;
    if (c->replicas == 1) return 0;
    backend *be = &c->qm.be;
    float *g = bert_model_grads(c->qm.model);
    float *h = c->qm.info.is_cuda ? malloc(p->pn * sizeof *h) : g;
    if (!h) return err_set(ERR_RUNTIME, "out of memory for the gradient sum (%zu floats)", p->pn);
    int rc = h != g ? be->i->download(be->ctx, h, g, p->pn * sizeof *h) : 0;
    if (!rc) rc = comm_sum_among(c->cm, h, p->pn, p->group, c->replicas);
    if (!rc && h != g) rc = be->i->upload(be->ctx, g, h, p->pn * sizeof *h);
    if (h != g) free(h);
    return rc;
}

/* The loss is the last stage's; the squared norm replica 0's of each stage
 * (summed in rank order, so the stages' squares add stage 0 first, and the
 * zeros the others add change nothing); every rank's idle and busy times. */
static void pipe_terms(run_ctx *c, run_terms *t)
{
    struct pipe_run *p = c->pipe;
    backend *be = &c->qm.be;
    int N = c->ranks;
    if (c->stage != c->stages - 1) t->loss = 0.0;
    t->sumsq = c->replica == 0 ? be->i->sum_squares(be->ctx, bert_model_grads(c->qm.model), p->pn) : 0.0;
    t->norm_summed = 1;
    memset(p->times, 0, 2 * (size_t)N * sizeof *p->times);
    p->times[c->rank] = p->idle_s;
    p->times[N + c->rank] = p->busy_s;
    t->extra = p->times;
    t->nextra = 2 * N;
}

/* Replica 0 of each stage sends its slice; the others send nothing. */
static int gather_parts(run_ctx *c, int optimizer)
{
    size_t n = c->replica == 0 ? c->pipe->pn : 0;
    int rc = bert_model_get_params(c->qm.model, c->host_params);
    if (!rc && optimizer) rc = optim_get_state(c->opt, c->host_m + c->pipe->poff, c->host_v + c->pipe->poff, &c->st.adam_t,
                                               &c->st.skipped_steps);
    if (!rc) rc = comm_gather_ranges(c->cm, c->host_params, c->pipe->poff, n, 0);
    if (!rc && optimizer) rc = comm_gather_ranges(c->cm, c->host_m, c->pipe->poff, n, 0);
    if (!rc && optimizer) rc = comm_gather_ranges(c->cm, c->host_v, c->pipe->poff, n, 0);
    return rc;
}

static int pipe_gather(run_ctx *c, int optimizer) { return comm_agree(c->cm, gather_parts(c, optimizer)); }

/* --dev with the whole model on the writer, built from every stage's
 * gathered parameters (collective; strategy.h's predict). */
static int pipe_predict(void *arg, const postprocess_opts *po, qa_predictions *out)
{
    run_ctx *c = arg;
    memset(out, 0, sizeof *out);
    int rc = gather_parts(c, 0);
    if (!rc && c->writer) {
        /* the whole model, for as long as the evaluation takes */
        bert_model *stage = c->qm.model, *whole = NULL;
        rc = bert_model_create(&whole, &(bert_model_opts){.cfg = &c->qm.cfg,
                                                          .be = &c->qm.be,
                                                          .max_B = c->micro,
                                                          .T = c->T,
                                                          .max_tokens = c->qm.packing == PACKING_VARLEN
                                                                            ? c->qm.max_tokens
                                                                            : 0});
        if (!rc) rc = bert_model_set_params(whole, c->host_params);
        if (!rc) {
            c->qm.model = whole;
            rc = qa_model_predict(&c->qm, &c->dev, &c->df, po, out, NULL);
            c->qm.model = stage;
        }
        bert_model_free(whole);
        if (rc) err_wrap(rc, "evaluating on rank 0 with the whole model");
    }
    return comm_agree(c->cm, rc);
}

static void pipe_describe(const run_ctx *c)
{
    char split[256], dp[96] = "";
    pipe_split_text(c, split, sizeof split);
    if (c->replicas > 1)
        snprintf(dp, sizeof dp, " x %d data-parallel copies (each a share of the micro-batches)", c->replicas);
    printf("  pipeline  %d stages (MPI)%s, layers %s; 1F1B over each step's micro-batches; rank 0 gathers the "
           "stages' parts for checkpoints and evaluation\n", c->stages, dp, split);
}

/* Each stage's time waiting for its neighbours (the bubble and any imbalance). */
static void pipe_progress(const run_ctx *c, char *buf, size_t cap)
{
    const double *idle = c->pipe->times;
    size_t l = (size_t)snprintf(buf, cap, " | %d stages, idle", c->stages);
    for (int r = 0; r < c->ranks && r < 8 && l < cap; r++) l += (size_t)snprintf(buf + l, cap - l, " %.1fs", idle[r]);
}

/* Per rank (stage-major): seconds waiting for a neighbour, seconds computing. */
static void pipe_info(run_ctx *c)
{
    const double *times = c->pipe->times;
    char v[64], split[256], idle[512], busy[512];
    size_t a = 0, b = 0;
    idle[0] = busy[0] = 0;
    for (int r = 0; r < c->ranks; r++) {
        a += (size_t)snprintf(idle + a, a < sizeof idle ? sizeof idle - a : 0, "%s%.3f", r ? " " : "", times[r]);
        b += (size_t)snprintf(busy + b, b < sizeof busy ? sizeof busy - b : 0, "%s%.3f", r ? " " : "",
                              times[c->ranks + r]);
    }
    pipe_split_text(c, split, sizeof split);
    snprintf(v, sizeof v, "%d", c->stages);
    run_log_info(c, "pipeline_stages", v);
    run_log_info(c, "pipeline_layers", split);
    run_log_info(c, "pipeline_idle_s", idle);
    run_log_info(c, "pipeline_busy_s", busy);
}

const run_strategy run_strategy_pipeline = {
    .name = "pipeline 1F1B",
    /* the step (run_step.c) */
    .pass = pipe_pass, .reduce = pipe_reduce, .terms = pipe_terms,
    /* around the steps */
    .start = pipe_start, .connect = pipe_connect, .gather = pipe_gather, .predict = pipe_predict, .free = pipe_free,
    /* what the run tells of the mode */
    .describe = pipe_describe, .progress = pipe_progress, .info = pipe_info,
    .agree_saves = 1,
};
