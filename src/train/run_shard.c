/* --shard-optimizer (run.h): ZeRO stage 1 for data parallel. Every rank
 * keeps the whole parameter and gradient blocks, but the Adam moments of
 * its pieces only: the piece of each gradient bucket (model/bert.h's: the
 * QA head, layer L-1, ..., layer 0, the embeddings) that piece_of gives
 * it. A step:
 *
 *   backward     each bucket reduce-scattered as it is final (run_dp.c's
 *                hook): this rank's piece holds the sum over the ranks in
 *                rank order, the same bytes the all-reduce gives there
 *   norm         the squared norm of this rank's pieces, summed over the
 *                ranks in rank order with the step's loss (run_step.c's reduce)
 *   AdamW        optim_apply on this rank's pieces, with the global norm:
 *                every rank clips, skips (loss scaling) and decides alike
 *   all-gather   each bucket's pieces to every rank (skipped with the step)
 *
 * The piece of each float's sum and update is the same computation as the
 * unsharded run's, so the weights equal it but for the rounding of the
 * norm's sum. On GPUs the collectives are NCCL's (reduce-scatter and
 * all-gather in the same pieces, on NCCL's stream), or the host's through
 * MPI where NCCL is absent.
 *
 * Checkpoints keep today's format: the moments are gathered to the writer
 * (rank 0) piece by piece, so any run, sharded or not, of any rank count,
 * resumes from them; each rank takes its pieces of a checkpoint's moments. */
#define _GNU_SOURCE
#include "train/run.h"

#include "core/alloc.h"
#include "core/clock.h"
#include "core/err.h"
#include "comm/comm.h"
#include "core/piece.h"
#include "model/memory.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The gradient buckets and this rank's piece of each. */
typedef struct {
    int nb;              /* buckets (bert_grad_bucket_count) */
    size_t *off, *len;   /* bucket k: [off[k], off[k] + len[k]) of the block, in backward's order */
    size_t *poff, *plen; /* this rank's piece of bucket k (piece_of) */
    size_t owned;        /* the sum of plen: the floats of Adam's m (and of v) this rank holds */
} shard_pieces;

static shard_pieces *pieces(const run_ctx *c) { return ((run_dp_state *)c->strat_state)->mode; }

static int record_bucket(void *arg, size_t off, size_t n)
{
    shard_pieces *s = arg;
    s->off[s->nb] = off;
    s->len[s->nb] = n;
    s->nb++;
    return 0;
}

/* The buckets as bert_backward reports them (without a backward: emitted
 * once into a recorder), and this rank's piece of each. */
static int make_pieces(run_ctx *c, shard_pieces *s)
{
    int nb = bert_grad_bucket_count(c->qm.model);
    s->off = xcalloc((size_t)nb, sizeof *s->off);
    s->len = xcalloc((size_t)nb, sizeof *s->len);
    s->poff = xcalloc((size_t)nb, sizeof *s->poff);
    s->plen = xcalloc((size_t)nb, sizeof *s->plen);
    s->nb = 0;
    bert_model_set_grads_ready(c->qm.model, record_bucket, s);
    int rc = bert_grad_buckets_emit(c->qm.model, 0);
    bert_model_set_grads_ready(c->qm.model, NULL, NULL);
    if (rc) return rc;
    size_t covered = 0;
    s->owned = 0;
    for (int k = 0; k < s->nb; k++) {
        size_t po, pl;
        piece_of(s->len[k], c->rk.ranks, c->rk.rank, &po, &pl);
        s->poff[k] = s->off[k] + po;
        s->plen[k] = pl;
        s->owned += pl;
        covered += s->len[k];
    }
    if (s->nb != nb || covered != c->qm.table.total)
        return err_set(ERR_RUNTIME, "--shard-optimizer: the %d gradient buckets cover %zu of %zu parameters", s->nb,
                       covered, c->qm.table.total);
    return 0;
}

/* Cuts the pieces and makes the optimizer of this rank's pieces, with a
 * resumed run's moments. */
static int shard_start(run_ctx *c)
{
    int rc = run_dp_init(c, comm_reduce_scatter_begin);
    if (rc) return rc;
    shard_pieces *s = calloc(1, sizeof *s);
    if (!s) return err_set(ERR_RUNTIME, "out of memory");
    ((run_dp_state *)c->strat_state)->mode = s;
    rc = make_pieces(c, s);
    if (!rc) rc = optim_create_pieces(&c->opt, &c->qm.be, &c->qm.table, s->poff, s->plen, s->nb);
    /* a checkpoint's moments are the whole block's: this rank's pieces of them */
    if (!rc && c->dir.resumed)
        rc = optim_set_state_block(c->opt, c->host_m, c->host_v, c->st.adam_t, c->st.skipped_steps);
    if (rc) return err_wrap(rc, "--shard-optimizer");
    if (!c->rk.writer) {
        /* only the writer gathers the moments for checkpoints */
        free(c->host_m);
        free(c->host_v);
        c->host_m = c->host_v = NULL;
    }
    return 0;
}

static void shard_free(run_ctx *c)
{
    run_dp_state *d = c->strat_state;
    shard_pieces *s = d ? d->mode : NULL;
    if (s) {
        free(s->off);
        free(s->len);
        free(s->poff);
        free(s->plen);
        free(s);
    }
    run_dp_free(c);
}

/* RUN/info.csv: the mode's key. */
static void shard_info(run_ctx *c) { run_log_info(c, "shard_optimizer", "1"); }

static void shard_describe(const run_ctx *c)
{
    char b1[32], b2[32];
    size_t total = c->qm.table.total, owned = pieces(c)->owned;
    run_dp_describe(c);
    printf("  sharded   --shard-optimizer: AdamW m and v of %zu of the %zu parameters on each rank (%s instead "
           "of %s; rank %d's), gradients reduce-scattered, parameters all-gathered\n",
           owned, total, memory_fmt_bytes(b1, sizeof b1, (int64_t)(2 * owned * sizeof(float))),
           memory_fmt_bytes(b2, sizeof b2, (int64_t)(2 * total * sizeof(float))), c->rk.rank);
}

/* Data parallel with at least two ranks to spread the Adam state over. */
static int shard_check(const trainer_opts *o, int ranks, int launched, int *replicas)
{
    *replicas = ranks;
    if (ranks < 2)
        return err_set(ERR_INPUT, "train --shard-optimizer: needs data-parallel ranks to share the optimizer state "
                       "among (mpirun -np N bertc train ..., N >= 2); this is %s", launched ?
                       "a job of 1 rank" : "one process without a launcher");
    (void)o;
    return 0;
}

/* Data parallel whose Adam state is spread over the ranks. */
static int shard_configure(run_ctx *c)
{
    run_dp_configure(c);
    c->rk.lay.adam_ranks = c->rk.ranks;
    return 0;
}

/* GPUs without NCCL: every bucket of the host copy reduce-scattered. */
static int shard_reduce(run_ctx *c, int rc)
{
    const shard_pieces *s = pieces(c);
    return run_dp_reduce_host(c, rc, s->off, s->len, s->nb);
}

/* The squared norm of this rank's pieces, summed over the ranks. */
static void shard_terms(run_ctx *c, run_terms *t)
{
    t->sumsq = optim_sum_squares(c->opt, bert_model_grads(c->qm.model));
    t->norm_summed = 1;
}

/* After AdamW, every rank's pieces to all (skipped with the step, which
 * every rank decided alike from the same norm). A rank whose update failed
 * (a device error) still takes part, so that the others are not left in
 * the all-gather, and tells its failure at the next agreement (the next
 * step's reduce, or a checkpoint's gather): the step costs no collective
 * of its own for it. GPUs without NCCL go through the host. */
static int shard_updated(run_ctx *c, int rc, const optim_result *res)
{
    const shard_pieces *s = pieces(c);
    double c0 = comm_seconds(c->rk.cm);
    comm_defer(c->rk.cm, rc ? err_wrap(rc, "step %lld", (long long)c->st.step + 1) : 0);
    if (rc || !res->skipped) { /* a failed update was not a skipped one (optim_apply) */
        float *p = bert_model_params(c->qm.model);
        int staged = c->qm.info.is_cuda && !comm_on_device(c->rk.cm), grc = 0;
        if (staged) {
            grc = bert_model_get_params(c->qm.model, c->host_params);
            p = c->host_params;
        }
        int arc = 0;
        for (int k = 0; k < s->nb && !arc; k++) arc = comm_allgather_begin(c->rk.cm, p + s->off[k], s->len[k]);
        /* the next forward reads them: wait here */
        int wrc = comm_wait(c->rk.cm);
        if (!arc) arc = wrc;
        if (!grc) grc = arc;
        if (!grc && staged) grc = bert_model_set_params(c->qm.model, c->host_params);
        comm_defer(c->rk.cm, grc ? err_wrap(grc, "step %lld", (long long)c->st.step + 1) : 0);
    }
    c->rk.comm_s += comm_seconds(c->rk.cm) - c0;
    return 0;
}

/* (collective) The whole moments into the writer's host_m and host_v. */
static int shard_gather(run_ctx *c, int optimizer)
{
    if (!optimizer) return 0;
    const shard_pieces *s = pieces(c);
    size_t owned = s->owned;
    const float *m = NULL, *v = NULL;
    float *hm = NULL, *hv = NULL;
    int rc = 0;
    c->st.adam_t = optim_t(c->opt);
    c->st.skipped_steps = optim_skipped(c->opt);
    if (!c->qm.info.is_cuda) {
        /* the CPU backend's memory is the host's: sent from where it is,
         * no copy of the moments on any rank */
        optim_state_memory(c->opt, &m, &v);
    } else {
        hm = malloc((owned ? owned : 1) * sizeof *hm);
        hv = malloc((owned ? owned : 1) * sizeof *hv);
        rc = hm && hv ? 0 : err_set(ERR_RUNTIME, "out of memory (%zu floats)", owned);
        if (!rc) rc = optim_get_state(c->opt, hm, hv, NULL, NULL);
        m = hm;
        v = hv;
    }
    /* the gathers below only when every rank can take part (and none
     * failed an update since the last step's reduce) */
    rc = comm_agree(c->rk.cm, rc);
    size_t at = 0;
    for (int k = 0; k < s->nb && !rc; k++) {
        rc = comm_gather_pieces(c->rk.cm, m + at, c->rk.writer ? c->host_m + s->off[k] : NULL, s->len[k], 0);
        if (!rc) rc = comm_gather_pieces(c->rk.cm, v + at, c->rk.writer ? c->host_v + s->off[k] : NULL, s->len[k], 0);
        at += s->plen[k];
    }
    free(hm);
    free(hv);
    return rc ? err_wrap(rc, "gathering the sharded optimizer state") : 0;
}

const run_strategy run_strategy_sharded = {
    .name = "sharded optimizer", .options = " shard_optimizer=1", .check = shard_check,
    /* the step (run_step.c) */
    .pass = run_dp_pass, .reduce = shard_reduce, .terms = shard_terms, .updated = shard_updated,
    /* around the steps */
    .signal_line = run_dp_signal_line, .configure = shard_configure, .start = shard_start,
    .connect = run_dp_connect, .gather = shard_gather, .logits = run_dp_logits, .free = shard_free,
    /* what the run tells of the mode */
    .describe = shard_describe, .progress = run_dp_progress, .info = shard_info,
};
