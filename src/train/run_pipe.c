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
 * buffers below). The headers always go over the host (comm_msg_*). */
#define _GNU_SOURCE
#include "train/run.h"

#include "core/clock.h"
#include "core/err.h"
#include "comm/comm.h"
#include "comm/dist.h"
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

/* The per-set buffers a stage exchanges: four of activations (the
 * backend's type, unit_words), two headers. */
enum { PX_IN, PX_OUT, PG_OUT, PG_IN, PH_IN, PH_OUT, PBUFS };
enum { HDR_FIXED = 5 }; /* unit, micro-batch, piece, windows, rows; then cu_seqlens when packed */

/* The pipeline's own state (c->strat_state). This rank is stage `stage`
 * of c->rk.lay.stages in data-parallel replica c->rk.replica of
 * c->rk.lay.replicas (rank = stage * replicas + replica), holding encoder
 * layers [split[stage], split[stage + 1]). The run dir, checkpoints and
 * evaluation stay the writer's (rank 0, stage 0), which gathers the
 * stages' parts. */
typedef struct {
    int stage, stages;
    int split[PIPE_MAX_STAGES + 1];
    int prev, next;       /* the ranks of this replica's neighbouring stages (-1: none) */
    size_t poff, pn;       /* this stage's slice of the parameter block: floats [poff, poff + pn) */
    int sets;
    train_units us;        /* this replica's units of the step (step.h's cut) */
    float **host[PH_IN];   /* per set: host copies (GPU backends without a device communicator; NULL: none) */
    int32_t **hdr[2];      /* per set: the header received (PH_IN) and sent (PH_OUT) */
    int32_t *want;         /* this stage's header of the unit it checks */
    int *group;            /* the ranks of this stage's replicas, in replica order */
    double busy_s, idle_s; /* this rank: computing, waiting for a neighbour */
    double *times;         /* every rank's idle_s, then busy_s (2 x ranks), after each step */
} pipe_run;

static pipe_run *pipe_of(const run_ctx *c) { return c->strat_state; }

/* Buffer b's (b < PH_IN) message slot of set k in the communicator; a
 * header's (b PH_IN or PH_OUT) among its host messages. */
static int slot_of(int b, int k) { return (b < PH_IN ? b : b - PH_IN) * PIPE_MAX_STAGES + k; }


/* The message tag of unit u's activations (kind 0), gradients (kind 1) or
 * header (kind 2). */
static int tag_of(int u, int kind) { return 3 * (u % 8000) + kind; }

/* "pipeline stage s (layers a-b)" for messages. */
static void stage_name(const run_ctx *c, char *buf, size_t cap)
{
    const pipe_run *p = pipe_of(c);
    snprintf(buf, cap, "pipeline stage %d of %d (layers %d-%d)", p->stage, p->stages, p->split[p->stage],
             p->split[p->stage + 1] - 1);
}

/* "0-1 | 2-3": each stage's layers. */
static void pipe_split_text(const run_ctx *c, char *buf, size_t cap)
{
    const pipe_run *p = pipe_of(c);
    size_t n = 0;
    buf[0] = 0;
    for (int s = 0; s < p->stages && n < cap; s++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%d-%d", s ? " | " : "", p->split[s], p->split[s + 1] - 1);
}

/* The line a rank prints on a signal, naming its stage (before the
 * set-up: from the options and the rank alone). */
static void pipe_signal_line(const run_ctx *c, char *buf, size_t cap)
{
    char where[64] = "";
    int S = c->o->pipeline_stages, N = c->rk.ranks;
    if (N % S == 0) snprintf(where, sizeof where, " (pipeline stage %d of %d)", c->rk.rank / (N / S), S);
    run_signal_text(c, where, buf, cap);
}

/* One rank a stage, the ranks S x D. */
static int pipe_check(const trainer_opts *o, int ranks, int launched, int *replicas)
{
    int S = o->pipeline_stages;
    *replicas = ranks / S;
    /* Each stage's optimizer already holds only its own layers' moments;
     * sharding them over the pipeline's copies as well is not done. */
    if (o->shard_optimizer)
        return err_set(ERR_INPUT, "train: --shard-optimizer with --pipeline-stages %d is not supported (each stage "
                       "already keeps only its layers' AdamW moments): use one of the two", S);
    if (!launched)
        return err_set(ERR_INPUT, "train --pipeline-stages %d: one process per stage: run it under a launcher, "
                       "e.g. mpirun -np %d bertc train ...", S, S);
    if (ranks % S != 0)
        return err_set(ERR_INPUT, "train --pipeline-stages %d: %d ranks are not a multiple of the stages (ranks = "
                       "stages x data-parallel copies)", S, ranks);
    return 0;
}

/* The split and this rank's place, checked (ERR_INPUT) before the run dir
 * is touched. */
static int pipe_configure(run_ctx *c)
{
    const trainer_opts *o = c->o;
    int S = o->pipeline_stages, L = c->qm.cfg.num_hidden_layers;
    pipe_run *p = calloc(1, sizeof *p);
    if (!p) return err_set(ERR_RUNTIME, "out of memory");
    c->strat_state = p;
    p->stages = S;
    if (c->rk.ranks % S != 0)
        return err_set(ERR_INPUT, "--pipeline-stages %d: %d ranks are not a multiple of the stages", S, c->rk.ranks);
    int D = c->rk.ranks / S;
    c->rk.lay = (run_layout){.ranks = c->rk.ranks, .replicas = D, .stages = S, .adam_ranks = 1};
    p->stage = c->rk.rank / D;
    c->rk.replica = c->rk.rank % D;
    if (o->pipeline_split_n > 0) {
        if (o->pipeline_split_n != S + 1)
            return err_set(ERR_INPUT, "--pipeline-split: %d boundaries for %d stages (give %d: 0, ..., %d)",
                           o->pipeline_split_n, S, S + 1, L);
        memcpy(p->split, o->pipeline_split, (size_t)(S + 1) * sizeof *p->split);
    } else {
        /* checked even; the default split is chosen in pipe_start, once the micro-batch is known */
        pipe_split_even(L, S, p->split);
    }
    return pipe_split_check(p->split, S, L, o->pipeline_split_n > 0 ? "--pipeline-split" : "--pipeline-stages");
}

/* This stage's model and optimizer with the host parameters' slice (and
 * the Adam state's, resumed), and the buffers of its messages. */
static int pipe_start(run_ctx *c)
{
    pipe_run *p = pipe_of(c);
    int S = p->stages, s = p->stage, D = c->rk.lay.replicas;
    /* The default split: bertc plan's (the smallest largest stage time,
     * then the smallest largest stage peak) at this run's micro-batch,
     * which every rank has alike. */
    if (c->o->pipeline_split_n == 0) {
        memory_query q = {.cfg = &c->qm.cfg, .micro = c->plan.micro, .T = c->plan.T, .prec = c->qm.info.precision,
                          .recompute = c->qm.recompute, .stages = S};
        int rc = memory_split(&q, p->split);
        if (rc) return err_wrap(rc, "--pipeline-stages %d", S);
    }
    p->prev = s > 0 ? c->rk.rank - D : -1;
    p->next = s < S - 1 ? c->rk.rank + D : -1;
    /* Units per step on this replica: its share of the micro-batches, or
     * any number when packed pieces are cut by --max-tokens. */
    int per_replica = (c->plan.micro_batches + D - 1) / D;
    int cut = c->qm.packing == PACKING_VARLEN && c->qm.max_tokens > 0 && c->qm.max_tokens < (int64_t)c->plan.micro * c->plan.T;
    p->sets = pipe_sets(S, s, cut ? S : per_replica > 0 ? per_replica : 1);
    char name[96];
    stage_name(c, name, sizeof name);
    int rc = bert_model_create(&c->qm.model,
                               &(bert_model_opts){.cfg = &c->qm.cfg,
                                                  .be = &c->qm.be,
                                                  .max_B = c->plan.micro,
                                                  .T = c->plan.T,
                                                  .max_tokens = c->qm.packing == PACKING_VARLEN ? c->qm.max_tokens : 0,
                                                  .recompute = c->qm.recompute,
                                                  .stage_lo = p->split[s],
                                                  .stage_hi = p->split[s + 1],
                                                  .sets = p->sets});
    if (rc) return err_wrap(rc, "rank %d of %d: %s", c->rk.rank, c->rk.ranks, name);
    c->qm.max_B = c->plan.micro;
    c->qm.T = c->plan.T;
    bert_model_stage(c->qm.model, NULL, NULL, &p->poff);
    p->pn = bert_model_stage_table(c->qm.model)->total;
    rc = bert_model_set_params(c->qm.model, c->host_params);
    if (rc) return rc;
    size_t rows = (size_t)bert_model_max_tokens(c->qm.model), C = (size_t)c->qm.cfg.hidden_size;
    for (int b = 0; b < PH_IN; b++) {
        p->host[b] = calloc((size_t)p->sets, sizeof *p->host[b]);
        if (!p->host[b]) return err_set(ERR_RUNTIME, "out of memory");
        for (int k = 0; c->qm.info.is_cuda && k < p->sets; k++) {
            p->host[b][k] = malloc(rows * C * sizeof(float)); /* fits the activations of any type */
            if (!p->host[b][k])
                return err_set(ERR_RUNTIME, "out of memory for the pipeline's host buffers (%zu floats)", rows * C);
        }
    }
    for (int h = 0; h < 2; h++) {
        p->hdr[h] = calloc((size_t)p->sets, sizeof *p->hdr[h]);
        if (!p->hdr[h]) return err_set(ERR_RUNTIME, "out of memory");
        for (int k = 0; k < p->sets; k++)
            if (!(p->hdr[h][k] = malloc((HDR_FIXED + (size_t)c->plan.micro + 1) * sizeof(int32_t))))
                return err_set(ERR_RUNTIME, "out of memory");
    }
    p->want = malloc((HDR_FIXED + (size_t)c->plan.micro + 1) * sizeof *p->want);
    p->group = malloc((size_t)D * sizeof *p->group);
    if (!p->want || !p->group) return err_set(ERR_RUNTIME, "out of memory");
    for (int d = 0; d < D; d++) p->group[d] = s * D + d;
    p->times = calloc(2 * (size_t)c->rk.ranks, sizeof *p->times);
    if (!p->times) return err_set(ERR_RUNTIME, "out of memory");
    return optim_start(&c->opt, &c->qm.be, bert_model_stage_table(c->qm.model),
                       c->dir.resumed ? c->host_m + p->poff : NULL, c->host_v + p->poff, c->st.adam_t,
                       c->st.skipped_steps);
}

/* After every rank's set-up (collective). GPUs: NCCL's send/recv when
 * every rank loads it and each has its own GPU (BERTC_DEBUG_DIST_ONE_GPU:
 * ranks sharing one go through the host). */
static int pipe_connect(run_ctx *c)
{
    pipe_run *p = pipe_of(c);
    int rc = comm_open(&c->rk.cm, &(comm_opts){.rank = c->rk.rank,
                                            .ranks = c->rk.ranks,
                                            .gpu = c->bo.gpu,
                                            .dev_ctx = c->qm.info.is_cuda ? c->qm.be.ctx : NULL,
                                            .p2p = 1,
                                            .slots = PH_IN * PIPE_MAX_STAGES,
                                            .msg_slots = 2 * PIPE_MAX_STAGES,
                                            .fallback = "the pipeline's messages go through the host over MPI instead"});
    for (int b = 0; !rc && comm_on_device(c->rk.cm) && b < PH_IN; b++)
        for (int k = 0; k < p->sets; k++) {
            free(p->host[b][k]); /* no host copies */
            p->host[b][k] = NULL;
        }
    return rc;
}

static void pipe_free(run_ctx *c)
{
    pipe_run *p = pipe_of(c);
    comm_close(c->rk.cm); /* with the messages still in flight */
    c->rk.cm = NULL;
    if (!p) return;
    for (int b = 0; b < PH_IN; b++) {
        for (int k = 0; p->host[b] && k < p->sets; k++) free(p->host[b][k]);
        free(p->host[b]);
    }
    for (int h = 0; h < 2; h++) {
        for (int k = 0; p->hdr[h] && k < p->sets; k++) free(p->hdr[h][k]);
        free(p->hdr[h]);
    }
    train_units_free(&p->us);
    free(p->want);
    free(p->group);
    free(p->times);
    free(p);
    c->strat_state = NULL;
}

/* This replica's units of the step: its share of the micro-batches (as
 * data parallel shares them), cut as one process cuts them (step.h). */
static int plan_units(run_ctx *c, const int32_t *idx, int count)
{
    int first, len;
    dist_share(count, c->plan.micro, c->rk.lay.replicas, c->rk.replica, &first, &len);
    return train_units_plan(&pipe_of(c)->us, &c->data.tf, c->qm.packing, idx, first, len, c->plan.micro,
                            bert_model_max_tokens(c->qm.model));
}

/* The backend buffer b of set k. */
static backend_act *stage_buf(run_ctx *c, int b, int k)
{
    bert_model *m = c->qm.model;
    switch (b) {
    case PX_IN: return bert_stage_x_in(m, k);
    case PX_OUT: return (backend_act *)bert_stage_x_out(m, k);
    case PG_OUT: return bert_stage_dx_out(m, k);
    default: return (backend_act *)bert_stage_dx_in(m, k);
    }
}

/* Bytes of unit u's rows x C activations (the backend's type), and the
 * 4-byte words the communicator moves for them (comm_p2p_send counts
 * floats): with 16-bit activations and an odd rows x C the last word
 * carries 2 bytes of the buffer's padding (every activation tensor is
 * rounded up to 64 bytes, act_sizes.h), which nobody reads. */
static size_t unit_bytes(run_ctx *c, int u)
{
    return (size_t)pipe_of(c)->us.u[u].rows * (size_t)c->qm.cfg.hidden_size * bert_model_act_size(c->qm.model);
}

static size_t unit_words(run_ctx *c, int u)
{
    return (unit_bytes(c, u) + sizeof(float) - 1) / sizeof(float);
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
static int wait_buf(run_ctx *c, int b, int k) { return comm_p2p_wait(c->rk.cm, slot_of(b, k)); }

/* Unit u's header: its place in the step and its layout (cu: the packed
 * batch's cu_seqlens, as unit_batch left them). Returns its length. */
static int unit_header(run_ctx *c, int u, int32_t *h)
{
    const pipe_run *p = pipe_of(c);
    const train_unit *un = &p->us.u[u];
    h[0] = u;
    h[1] = un->k;
    h[2] = un->piece;
    h[3] = un->n;
    h[4] = un->rows;
    if (c->qm.packing != PACKING_VARLEN) return HDR_FIXED;
    memcpy(h + HDR_FIXED, p->us.cu, ((size_t)un->n + 1) * sizeof *h);
    return HDR_FIXED + un->n + 1;
}

static size_t header_bytes(run_ctx *c, int u)
{
    return (HDR_FIXED + (c->qm.packing == PACKING_VARLEN ? (size_t)pipe_of(c)->us.u[u].n + 1 : 0)) * sizeof(int32_t);
}

/* Starts receiving buffer b (PX_IN with its header, PG_OUT) of set k for unit u. */
static int post_recv(run_ctx *c, int b, int k, int u)
{
    pipe_run *p = pipe_of(c);
    float *dst = p->host[b][k] ? p->host[b][k] : stage_buf(c, b, k);
    int rc = b == PX_IN ? comm_msg_recv(c->rk.cm, p->hdr[0][k], header_bytes(c, u), p->prev, tag_of(u, 2),
                                        slot_of(PH_IN, k))
                        : 0;
    int peer = b == PX_IN ? p->prev : p->next;
    return rc ? rc : comm_p2p_recv(c->rk.cm, nccl_channel(b, p->stage), tag_of(u, b == PG_OUT), dst,
                                   unit_words(c, u), peer, slot_of(b, k));
}

/* Waits for buffer b (PX_IN with its header, PG_OUT) of set k (unit u),
 * counting the wait as idle. */
static int wait_recv(run_ctx *c, int b, int k, int u)
{
    pipe_run *p = pipe_of(c);
    double t = clock_now_s();
    int rc = b == PX_IN ? comm_msg_wait(c->rk.cm, slot_of(PH_IN, k)) : 0;
    if (!rc) rc = wait_buf(c, b, k);
    p->idle_s += clock_now_s() - t;
    if (!rc && p->host[b][k]) {
        backend *be = &c->qm.be;
        rc = be->i->upload(be->ctx, stage_buf(c, b, k), p->host[b][k], unit_bytes(c, u));
    }
    return rc;
}

/* Starts sending buffer b (PX_OUT with its header, PG_IN) of set k for unit u. */
static int post_send(run_ctx *c, int b, int k, int u)
{
    pipe_run *p = pipe_of(c);
    const float *src = stage_buf(c, b, k);
    if (b == PX_OUT) {
        int n = unit_header(c, u, p->hdr[1][k]);
        /* BERTC_DEBUG_PIPE_HEADER=S (a test hook): step S's headers on this rank name one row too many */
        const char *dbg = getenv("BERTC_DEBUG_PIPE_HEADER");
        if (dbg && atoll(dbg) == c->st.step + 1) p->hdr[1][k][4]++;
        int rc = comm_msg_send(c->rk.cm, p->hdr[1][k], (size_t)n * sizeof(int32_t), p->next, tag_of(u, 2),
                               slot_of(PH_OUT, k));
        if (rc) return rc;
    }
    if (p->host[b][k]) {
        backend *be = &c->qm.be;
        int rc = be->i->download(be->ctx, p->host[b][k], src, unit_bytes(c, u));
        if (rc) return rc;
        src = p->host[b][k];
    }
    return comm_p2p_send(c->rk.cm, nccl_channel(b, p->stage), tag_of(u, b == PG_IN), src, unit_words(c, u),
                         b == PX_OUT ? p->next : p->prev, slot_of(b, k));
}

/* The previous stage's header of unit u against this stage's own cut. */
static int check_header(run_ctx *c, int u, const int32_t *got)
{
    int32_t *want = pipe_of(c)->want;
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
    const pipe_run *p = pipe_of(c);
    int rc = 0;
    for (int b = 0; b < PBUFS; b++)
        for (int k = 0; k < p->sets; k++) {
            int hdr = b >= PH_IN;
            if ((failed || rc) && hdr) comm_msg_cancel(c->rk.cm, slot_of(b, k));
            else if (failed || rc) comm_p2p_cancel(c->rk.cm, slot_of(b, k));
            else rc = hdr ? comm_msg_wait(c->rk.cm, slot_of(b, k)) : wait_buf(c, b, k);
        }
    return rc;
}

/* The step's forward and backward passes, 1F1B over the stages, into
 * freshly zeroed gradients; a rank whose compute failed keeps sending so
 * that no neighbour waits forever; the failure, naming the stage, is told
 * to every rank by the step's reduce. */
static int pipe_pass(run_ctx *c, const int32_t *idx, int count, float scale, double *loss_out)
{
    pipe_run *p = pipe_of(c);
    bert_model *m = c->qm.model;
    int S = p->stages, s = p->stage, first = s == 0, last = s == S - 1;
    bert_zero_grad(m);
    int rc = plan_units(c, idx, count), crc = 0; /* crc: the compute failed here; the messages go on */
    int M = p->us.n, sets = p->sets;
    double loss = 0;
    for (int u = 0; !first && u < M && u < sets && !rc; u++) rc = post_recv(c, PX_IN, u % sets, u);
    for (int i = 0; i < 2 * M && !rc; i++) {
        pipe_op op = pipe_op_at(S, s, M, i);
        const train_unit *u = &p->us.u[op.micro];
        int k = op.set;
        float w = (float)u->n / (float)count;
        if (op.kind == PIPE_FORWARD) {
            if (!first) rc = wait_recv(c, PX_IN, k, op.micro);
            if (!rc) rc = wait_buf(c, PX_OUT, k); /* x_out is written again */
            if (!rc) rc = comm_msg_wait(c->rk.cm, slot_of(PH_OUT, k)); /* its header too */
            bert_batch b;
            if (!rc) train_units_batch(&p->us, op.micro, &c->data.mb, &c->data.tf, idx, c->qm.packing, &b);
            if (!rc && !first && !crc) crc = check_header(c, op.micro, p->hdr[0][k]);
            if (!rc && !crc) {
                philox_stream rng = train_unit_stream(u, (uint64_t)c->o->seed, c->st.step, c->plan.micro_batches);
                float l = 0;
                double t = clock_now_s();
                crc = train_step_debug_oom(c->st.step + 1, u->n);
                if (!crc) crc = bert_stage_forward(m, k, &b, c->plan.drop_hidden, c->plan.drop_attn, rng, &l, NULL, NULL);
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
        comm_p2p_progress(c->rk.cm, slot_of(PX_OUT, 0), sets);
        comm_p2p_progress(c->rk.cm, slot_of(PG_IN, 0), sets);
    }
    int frc = finish_requests(c, rc != 0);
    if (!rc) rc = frc;
    if (!rc && crc) {
        char name[96], why[512];
        stage_name(c, name, sizeof name);
        snprintf(why, sizeof why, "%s", err_msg());
        rc = err_set(crc, "rank %d of %d: %s: step %lld: %s%s", c->rk.rank, c->rk.ranks, name, (long long)c->st.step + 1, why,
                     microbatch_is_oom(crc) ? " (no back-off in a pipeline: give a smaller --micro-batch, --recompute "
                                              "layer or more stages)" : "");
    }
    *loss_out = loss;
    return rc;
}

/* The stage's gradients summed over its replicas (in replica order),
 * whatever failed in the pass (rc), so that the sums match. */
static int pipe_reduce(run_ctx *c, int rc)
{
    pipe_run *p = pipe_of(c);
    int D = c->rk.lay.replicas;
    if (D == 1) return rc;
    backend *be = &c->qm.be;
    float *g = bert_model_grads(c->qm.model);
    float *h = c->qm.info.is_cuda ? malloc(p->pn * sizeof *h) : g;
    if (!h) return rc ? rc : err_set(ERR_RUNTIME, "out of memory for the gradient sum (%zu floats)", p->pn);
    int own = h != g ? be->i->download(be->ctx, h, g, p->pn * sizeof *h) : 0;
    int src = comm_sum_among(c->rk.cm, h, p->pn, p->group, D);
    if (!own) own = src;
    if (!own && h != g) own = be->i->upload(be->ctx, g, h, p->pn * sizeof *h);
    if (h != g) free(h);
    return rc ? rc : own;
}

/* The loss is the last stage's; the squared norm replica 0's of each stage
 * (summed in rank order, so the stages' squares add stage 0 first, and the
 * zeros the others add change nothing); every rank's idle and busy times. */
static void pipe_terms(run_ctx *c, run_terms *t)
{
    pipe_run *p = pipe_of(c);
    backend *be = &c->qm.be;
    int N = c->rk.ranks;
    if (p->stage != p->stages - 1) t->loss = 0.0;
    t->sumsq = c->rk.replica == 0 ? be->i->sum_squares(be->ctx, bert_model_grads(c->qm.model), p->pn) : 0.0;
    t->norm_summed = 1;
    memset(p->times, 0, 2 * (size_t)N * sizeof *p->times);
    p->times[c->rk.rank] = p->idle_s;
    p->times[N + c->rk.rank] = p->busy_s;
    t->extra = p->times;
    t->nextra = 2 * N;
}

/* Replica 0 of each stage sends its slice; the others send nothing. */
static int gather_parts(run_ctx *c, int optimizer)
{
    const pipe_run *p = pipe_of(c);
    size_t n = c->rk.replica == 0 ? p->pn : 0;
    int rc = bert_model_get_params(c->qm.model, c->host_params);
    if (!rc && optimizer)
        rc = optim_get_state(c->opt, c->host_m + p->poff, c->host_v + p->poff, &c->st.adam_t, &c->st.skipped_steps);
    if (!rc) rc = comm_gather_ranges(c->rk.cm, c->host_params, p->poff, n, 0);
    if (!rc && optimizer) rc = comm_gather_ranges(c->rk.cm, c->host_m, p->poff, n, 0);
    if (!rc && optimizer) rc = comm_gather_ranges(c->rk.cm, c->host_v, p->poff, n, 0);
    return rc;
}

static int pipe_gather(run_ctx *c, int optimizer) { return comm_agree(c->rk.cm, gather_parts(c, optimizer)); }

/* --dev's logits with the whole model on the writer, built from every
 * stage's gathered parameters (collective; strategy.h's logits). */
static int pipe_logits(void *arg, const features *f, float *start, float *end)
{
    run_ctx *c = arg;
    int rc = gather_parts(c, 0);
    if (!rc && c->rk.writer) {
        /* the whole model, for as long as the evaluation takes */
        bert_model *stage = c->qm.model, *whole = NULL;
        rc = bert_model_create(&whole, &(bert_model_opts){.cfg = &c->qm.cfg,
                                                          .be = &c->qm.be,
                                                          .max_B = c->plan.micro,
                                                          .T = c->plan.T,
                                                          .max_tokens = c->qm.packing == PACKING_VARLEN
                                                                            ? c->qm.max_tokens
                                                                            : 0});
        if (!rc) rc = bert_model_set_params(whole, c->host_params);
        if (!rc) {
            c->qm.model = whole;
            rc = qa_model_logits(&c->qm, f, start, end, NULL);
            c->qm.model = stage;
        }
        bert_model_free(whole);
        if (rc) err_wrap(rc, "evaluating on rank 0 with the whole model");
    }
    return comm_agree(c->rk.cm, rc);
}

static void pipe_describe(const run_ctx *c)
{
    char split[256], dp[96] = "";
    pipe_split_text(c, split, sizeof split);
    int D = c->rk.lay.replicas;
    if (D > 1) snprintf(dp, sizeof dp, " x %d data-parallel copies (each a share of the micro-batches)", D);
    printf("  pipeline  %d stages (MPI)%s, layers %s; 1F1B over each step's micro-batches; rank 0 gathers the "
           "stages' parts for checkpoints and evaluation\n", c->rk.lay.stages, dp, split);
}

/* Each stage's time waiting for its neighbours (the bubble and any imbalance). */
static void pipe_progress(const run_ctx *c, char *buf, size_t cap)
{
    const double *idle = pipe_of(c)->times;
    size_t l = (size_t)snprintf(buf, cap, " | %d stages, idle", c->rk.lay.stages);
    for (int r = 0; r < c->rk.ranks && r < 8 && l < cap; r++) l += (size_t)snprintf(buf + l, cap - l, " %.1fs", idle[r]);
}

/* Per rank (stage-major): seconds waiting for a neighbour, seconds computing. */
static void pipe_info(run_ctx *c)
{
    const double *times = pipe_of(c)->times;
    char v[64], split[256], idle[512], busy[512];
    size_t a = 0, b = 0;
    idle[0] = busy[0] = 0;
    for (int r = 0; r < c->rk.ranks; r++) {
        a += (size_t)snprintf(idle + a, a < sizeof idle ? sizeof idle - a : 0, "%s%.3f", r ? " " : "", times[r]);
        b += (size_t)snprintf(busy + b, b < sizeof busy ? sizeof busy - b : 0, "%s%.3f", r ? " " : "",
                              times[c->rk.ranks + r]);
    }
    pipe_split_text(c, split, sizeof split);
    snprintf(v, sizeof v, "%d", c->rk.lay.stages);
    run_log_info(c, "pipeline_stages", v);
    run_log_info(c, "pipeline_layers", split);
    run_log_info(c, "pipeline_idle_s", idle);
    run_log_info(c, "pipeline_busy_s", busy);
}

const run_strategy run_strategy_pipeline = {
    .name = "pipeline 1F1B", .options = "", .check = pipe_check,
    /* the step (run_step.c) */
    .pass = pipe_pass, .reduce = pipe_reduce, .terms = pipe_terms,
    /* around the steps */
    .signal_line = pipe_signal_line, .configure = pipe_configure, .start = pipe_start, .connect = pipe_connect,
    .gather = pipe_gather, .logits = pipe_logits, .free = pipe_free,
    /* what the run tells of the mode */
    .describe = pipe_describe, .progress = pipe_progress, .info = pipe_info,
    .agree_saves = 1,
};
