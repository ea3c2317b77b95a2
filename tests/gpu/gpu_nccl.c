/* gpu_check nccl: the bucketed NCCL calls of data-parallel training on one
 * GPU. NCCL refuses two ranks on one device, so this runs a communicator of
 * one rank: the all-reduce of each gradient bucket (queued on NCCL's stream
 * behind an event of the backend's stream as bert_backward reports it, as
 * train/run_step.c does) must leave the gradients as they are, equal to a
 * backward without buckets; the buckets must be L + 2; and the time of
 * backward with them is printed; the sharded optimizer's reduce-scatter of
 * each bucket and all-gather of the parameters leave them as they are.
 * What it cannot check: the sums across
 * GPUs and their overlap (needs 2 GPUs). Skipped (PASS with a note) where
 * libnccl.so.2 cannot be opened. */
#include "gpu_check.h"

#include "backend/cuda/cuda_nccl.h"
#include "backend/cuda_module.h"
#include "core/clock.h"
#include "core/err.h"
#include "model/bert.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int no_bcast(void *buf, size_t bytes, int root)
{
    (void)buf, (void)bytes, (void)root;
    return 0;
}

typedef struct {
    backend *be;
    float *grads;
    int calls, rc;
} nc_state;

static int nc_bucket(void *arg, size_t off, size_t n)
{
    nc_state *s = arg;
    s->calls++;
    return cuda_backend_api()->nccl_allreduce_begin(s->be->ctx, s->grads + off, n);
}

/* --shard-optimizer's calls: each bucket reduce-scattered as it is final,
 * the buckets' offsets kept for the all-gather of the parameters after. */
typedef struct {
    nc_state base;
    size_t off[64], len[64];
} rs_state;

static int rs_bucket(void *arg, size_t off, size_t n)
{
    rs_state *s = arg;
    if (s->base.calls < 64) s->off[s->base.calls] = off, s->len[s->base.calls] = n;
    s->base.calls++;
    return cuda_backend_api()->nccl_reduce_scatter_begin(s->base.be->ctx, s->base.grads + off, n);
}

int gc_nccl(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    if (cuda_nccl_load()) {
        gc_result(1, "nccl: skipped: %s", err_msg());
        err_clear();
        return 0;
    }
    backend gpu;
    if (gc_cuda(&gpu, PREC_FP32, 0)) {
        gc_result(0, "nccl: CUDA backend: %s", err_msg());
        return 1;
    }
    int rc = cuda_nccl_init(0, 1, 0, no_bcast);
    if (rc) {
        gc_result(0, "nccl: a one-rank communicator: %s", err_msg());
        backend_free(&gpu);
        return 1;
    }
    bert_config cfg;
    param_table t;
    float *p0 = gc_minilm(&cfg, &t, 9), *g0 = malloc(t.total * sizeof *g0), *g1 = malloc(t.total * sizeof *g1);
    gc_batch gb;
    gc_batch_init(&gb, 8, 128, cfg.vocab_size, 5);
    bert_batch b = gc_bert_batch(&gb);
    bert_model *m = NULL;
    rc = bert_model_create(&m, &(bert_model_opts){.cfg = &cfg, .be = &gpu, .max_B = 8, .T = 128});
    if (!rc) rc = bert_model_set_params(m, p0);
    nc_state st = {&gpu, m ? bert_model_grads(m) : NULL, 0, 0};
    double t_plain = 0, t_buckets = 0;
    philox_stream rng = {3, 1, 0};
    float loss;
    for (int rep = 0; rep < 3 && !rc; rep++) {
        /* without buckets, then with them; the same dropout masks */
        bert_zero_grad(m);
        rc = bert_forward(m, &b, 0.1f, 0.1f, rng, &loss, NULL, NULL);
        double t0 = clock_now_s();
        if (!rc) rc = bert_backward(m, 1.0f);
        t_plain += clock_now_s() - t0;
        if (!rc) rc = gpu.i->download(gpu.ctx, g0, bert_model_grads(m), t.total * sizeof *g0);
        bert_zero_grad(m);
        if (!rc) rc = bert_forward(m, &b, 0.1f, 0.1f, rng, &loss, NULL, NULL);
        st.calls = 0;
        bert_model_set_grads_ready(m, nc_bucket, &st);
        t0 = clock_now_s();
        if (!rc) rc = bert_backward(m, 1.0f);
        bert_model_set_grads_ready(m, NULL, NULL);
        if (!rc) rc = cuda_nccl_allreduce_wait();
        t_buckets += clock_now_s() - t0;
        if (!rc) rc = gpu.i->download(gpu.ctx, g1, bert_model_grads(m), t.total * sizeof *g1);
    }
    if (rc) gc_result(0, "nccl: %s", err_msg());
    else {
        double mx;
        double rl = gc_rel_l2(g1, g0, t.total, 1e-30, &mx);
        gc_result(st.calls == cfg.num_hidden_layers + 2, "nccl: %d gradient buckets queued (want %d)", st.calls,
                  cfg.num_hidden_layers + 2);
        gc_result(rl <= 1e-6, "nccl: one-rank bucketed all-reduce leaves the gradients: rel_l2 %.2e max_abs %.2e "
                              "(bound 1e-6)", rl, mx);
        gc_result(1, "nccl: backward %.2f ms plain, %.2f ms with the buckets' all-reduces and the wait (minilm, 8 x 128)",
                  1e3 * t_plain / 3, 1e3 * t_buckets / 3);
    }
    /* the sharded optimizer's collectives on one rank: the reduce-scatter
     * of each bucket leaves the gradients (the rank's piece is the whole
     * bucket), the all-gather of each bucket leaves the parameters */
    float *g2 = malloc(t.total * sizeof *g2), *pa = malloc(t.total * sizeof *pa);
    rs_state rs;
    memset(&rs, 0, sizeof rs);
    rs.base.be = &gpu;
    rs.base.grads = st.grads;
    double t_rs = 0;
    int rc2 = rc;
    if (!rc2) {
        bert_zero_grad(m);
        rc2 = bert_forward(m, &b, 0.1f, 0.1f, rng, &loss, NULL, NULL);
        bert_model_set_grads_ready(m, rs_bucket, &rs);
        double t0 = clock_now_s();
        if (!rc2) rc2 = bert_backward(m, 1.0f);
        bert_model_set_grads_ready(m, NULL, NULL);
        if (!rc2) rc2 = cuda_nccl_allreduce_wait();
        t_rs = clock_now_s() - t0;
        if (!rc2) rc2 = gpu.i->download(gpu.ctx, g2, bert_model_grads(m), t.total * sizeof *g2);
        for (int k = 0; k < rs.base.calls && k < 64 && !rc2; k++)
            rc2 = cuda_backend_api()->nccl_allgather_begin(gpu.ctx, bert_model_params(m) + rs.off[k], rs.len[k]);
        if (!rc2) rc2 = cuda_nccl_allreduce_wait();
        if (!rc2) rc2 = bert_model_get_params(m, pa);
    }
    if (rc2 && !rc) gc_result(0, "nccl: sharded: %s", err_msg());
    else if (!rc) {
        double mx2;
        double rl2 = gc_rel_l2(g2, g0, t.total, 1e-30, &mx2);
        gc_result(rs.base.calls == cfg.num_hidden_layers + 2 && rl2 <= 1e-6,
                  "nccl: one-rank bucketed reduce-scatter (--shard-optimizer): %d buckets, the gradients left: rel_l2 "
                  "%.2e max_abs %.2e (bound 1e-6); backward with it %.2f ms", rs.base.calls, rl2, mx2, 1e3 * t_rs);
        gc_result(memcmp(pa, p0, t.total * sizeof *pa) == 0, "nccl: one-rank all-gather of every bucket leaves the "
                  "parameters bit for bit");
    }
    free(g2);
    free(pa);
    bert_model_free(m);
    gc_batch_free(&gb);
    free(p0);
    free(g0);
    free(g1);
    param_table_free(&t);
    cuda_nccl_free();
    backend_free(&gpu);
    return gc_failures ? 1 : 0;
}
