/* --shard-optimizer (run.h): ZeRO stage 1 for data parallel. Every rank
 * keeps the whole parameter and gradient blocks, but the Adam moments of
 * its pieces only: the piece of each gradient bucket (model/bert.h's: the
 * QA head, layer L-1, ..., layer 0, the embeddings) that dist_piece gives
 * it. A step:
 *
 *   backward     each bucket reduce-scattered as it is final (run_step.c's
 *                hook): this rank's piece holds the sum over the ranks in
 *                rank order, the same bytes the all-reduce gives there
 *   norm         the squared norm of this rank's pieces, summed over the
 *                ranks in rank order with the step's loss (run_step.c)
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
#include "core/err.h"
#include "dist/dist.h"
#ifdef BERTC_HAVE_CUDA
#include "backend/cuda_module.h"
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int record_bucket(void *arg, size_t off, size_t n)
{
    run_shard *s = arg;
    s->off[s->nb] = off;
    s->len[s->nb] = n;
    s->nb++;
    return 0;
}

/* The buckets as bert_backward reports them (without a backward: emitted
 * once into a recorder), and this rank's piece of each. */
static int make_pieces(run_ctx *c)
{
    run_shard *s = &c->sh;
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
        dist_piece(s->len[k], c->ranks, c->rank, &po, &pl);
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

int run_shard_start(run_ctx *c)
{
    int rc = make_pieces(c);
    if (!rc) rc = optim_create_pieces(&c->opt, &c->qm.be, &c->qm.table, c->sh.poff, c->sh.plen, c->sh.nb);
    /* a checkpoint's moments are the whole block's: this rank's pieces of them */
    if (!rc && c->resumed)
        rc = optim_set_state_block(c->opt, c->host_m, c->host_v, c->st.adam_t, c->st.skipped_steps);
    if (rc) return err_wrap(rc, "--shard-optimizer");
    if (!c->writer) {
        /* only the writer gathers the moments for checkpoints */
        free(c->host_m);
        free(c->host_v);
        c->host_m = c->host_v = NULL;
    }
    return 0;
}

void run_shard_free(run_ctx *c)
{
    run_shard *s = &c->sh;
    free(s->off);
    free(s->len);
    free(s->poff);
    free(s->plen);
    memset(s, 0, sizeof *s);
}

int run_shard_reduce_bucket(run_ctx *c, float *x, size_t n)
{
#ifdef BERTC_HAVE_CUDA
    if (c->nccl) return cuda_module_loaded()->nccl_reduce_scatter_begin(bert_model_backend(c->qm.model)->ctx, x, n);
#else
    (void)c;
#endif
    return dist_reduce_scatter_sum_fixed(x, n);
}

int run_shard_reduce_host(run_ctx *c, float *h)
{
    int rc = 0;
    for (int k = 0; k < c->sh.nb && !rc; k++) rc = dist_reduce_scatter_sum_fixed(h + c->sh.off[k], c->sh.len[k]);
    return rc;
}

int run_shard_allgather_params(run_ctx *c)
{
    const run_shard *s = &c->sh;
    float *p = bert_model_params(c->qm.model);
    int rc = 0;
#ifdef BERTC_HAVE_CUDA
    if (c->nccl) {
        void *ctx = bert_model_backend(c->qm.model)->ctx;
        const bertc_cuda_api *api = cuda_module_loaded();
        for (int k = 0; k < s->nb && !rc; k++) rc = api->nccl_allgather_begin(ctx, p + s->off[k], s->len[k]);
        /* the next forward reads them: wait here */
        int wrc = api->nccl_allreduce_wait();
        return rc ? rc : wrc;
    }
#endif
    if (c->qm.info.is_cuda) {
        /* GPUs without NCCL: through the host */
        rc = bert_model_get_params(c->qm.model, c->host_params);
        for (int k = 0; k < s->nb && !rc; k++) rc = dist_allgather(c->host_params + s->off[k], s->len[k]);
        if (!rc) rc = bert_model_set_params(c->qm.model, c->host_params);
        return rc;
    }
    for (int k = 0; k < s->nb && !rc; k++) rc = dist_allgather(p + s->off[k], s->len[k]);
    return rc;
}

int run_shard_gather_state(run_ctx *c)
{
    const run_shard *s = &c->sh;
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
    /* the gathers below only when every rank can take part */
    rc = dist_agree(rc);
    size_t at = 0;
    for (int k = 0; k < s->nb && !rc; k++) {
        rc = dist_gather_pieces(m + at, c->writer ? c->host_m + s->off[k] : NULL, s->len[k], 0);
        if (!rc) rc = dist_gather_pieces(v + at, c->writer ? c->host_v + s->off[k] : NULL, s->len[k], 0);
        at += s->plen[k];
    }
    free(hm);
    free(hv);
    return rc ? err_wrap(rc, "gathering the sharded optimizer state") : 0;
}

