/* --recompute layer (bert_model_opts' recompute): the model keeps each layer's
 * input and one layer's activations and runs each layer's forward again in
 * backward. The ops are deterministic and the dropout masks come from
 * (seed, step, stream), so loss, logits and every gradient must equal
 * those of the model that keeps everything, bit for bit: dropout on, two
 * accumulated micro-batches (the second shorter and with fewer rows than
 * the model holds), three layers (two recomputed, the last not), 1 and 2
 * threads. And the recompute layout takes less memory, as the planner says. */
#include "backend/backend.h"
#include "core/err.h"
#include "model/bert.h"
#include "model/init.h"
#include "model/memory.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

enum { B = 3, T = 24, L = 3 };

static int32_t ids[B * T], types[B * T], mask[B * T], sp[B] = {3, 5, 0}, ep[B] = {6, 9, 0};

/* rows of T, T - 5 and T - 10 tokens */
static void make_batch(int vocab)
{
    static const int lens[B] = {T, T - 5, T - 10};
    tu_batch_spec spec = {B, T, lens, .vocab = vocab, .row_mul = 11, .tok_mul = 17, .seg_start = 6};
    tu_make_batch(&spec, ids, types, mask);
}

typedef struct {
    float loss[2], logits[2][2 * B * T];
    float *grads;
} outcome;

/* Two micro-batches into one gradient: all rows at step 5, then the first
 * two rows cut to 20 tokens at step 6, with dropout 0.2. */
static int run(bert_model *m, const float *p0, size_t n, outcome *o)
{
    int rc = bert_model_set_params(m, p0);
    if (rc) return rc;
    bert_zero_grad(m);
    static int32_t ids2[2 * 20], types2[2 * 20], mask2[2 * 20];
    for (int b = 0; b < 2; b++)
        for (int t = 0; t < 20; t++) {
            ids2[b * 20 + t] = ids[b * T + t];
            types2[b * 20 + t] = types[b * T + t];
            mask2[b * 20 + t] = mask[b * T + t];
        }
    bert_batch full = {B, T, ids, types, mask, sp, ep, NULL, 0};
    bert_batch part = {2, 20, ids2, types2, mask2, sp, ep, NULL, 0};
    const bert_batch *batches[2] = {&full, &part};
    for (int k = 0; k < 2; k++) {
        philox_stream rng = {.seed = 9, .step = 5 + (uint32_t)k};
        rc = bert_forward(m, batches[k], 0.2f, 0.2f, rng, &o->loss[k], o->logits[k], o->logits[k] + B * T);
        if (!rc) rc = bert_backward(m, 0.5f);
        if (rc) return rc;
    }
    backend *be = bert_model_backend(m);
    o->grads = malloc(n * sizeof(float));
    return be->i->download(be->ctx, o->grads, bert_model_grads(m), n * sizeof(float));
}

static void compare(const bert_config *cfg, const float *p0, size_t n, int threads)
{
    backend be;
    bert_model *keep = NULL, *re = NULL;
    outcome a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    int rc = backend_cpu_create(&be, threads);
    if (!rc) rc = bert_model_create(&keep, &(bert_model_opts){.cfg = cfg, .be = &be, .max_B = B, .T = T});
    if (!rc)
        rc = bert_model_create(
            &re, &(bert_model_opts){.cfg = cfg, .be = &be, .max_B = B, .T = T, .recompute = RECOMPUTE_LAYER});
    if (!rc) rc = run(keep, p0, n, &a);
    if (!rc) rc = run(re, p0, n, &b);
    CHECK(rc == 0, "%d threads: %s", threads, err_msg());
    if (!rc) {
        CHECK(bert_model_recompute(re) == 1 && bert_model_recompute(keep) == 0, "bert_model_recompute says the mode");
        size_t diff = 0;
        for (size_t j = 0; j < n; j++) diff += memcmp(&a.grads[j], &b.grads[j], sizeof(float)) != 0;
        int same_loss = !memcmp(a.loss, b.loss, sizeof a.loss), same_logits = !memcmp(a.logits, b.logits, sizeof a.logits);
        printf("%d threads: loss %.9g, %.9g kept vs %.9g, %.9g recomputed; logits %s; %zu of %zu gradients differ\n",
               threads, (double)a.loss[0], (double)a.loss[1], (double)b.loss[0], (double)b.loss[1],
               same_logits ? "identical" : "DIFFER", diff, n);
        CHECK(same_loss, "%d threads: the losses differ", threads);
        CHECK(same_logits, "%d threads: the logits differ", threads);
        CHECK(diff == 0, "%d threads: %zu gradients differ", threads, diff);
        double norm = 0;
        for (size_t j = 0; j < n; j++) norm += (double)a.grads[j] * a.grads[j];
        CHECK(norm > 0, "the gradient is not zero (|g|^2 %.3g)", norm);
    }
    free(a.grads);
    free(b.grads);
    bert_model_free(keep);
    bert_model_free(re);
    backend_free(&be);
}

static void check_memory(void)
{
    bert_config base;
    CHECK(config_named("base", 30522, &base) == 0, "%s", err_msg());
    bert_model_opts keep = {.cfg = &base, .max_B = 8, .T = 384};
    bert_model_opts re = {.cfg = &base, .max_B = 8, .T = 384, .recompute = RECOMPUTE_LAYER};
    size_t none = bert_activation_bytes(&keep), layer = bert_activation_bytes(&re);
    printf("BERT-base, 8 x 384: activations %.1f MiB kept, %.1f MiB with recompute (%.1f%%)\n", none / 1048576.0,
           layer / 1048576.0, 100.0 * layer / none);
    CHECK(none == bert_activation_bytes(&(bert_model_opts){.cfg = &base, .max_B = 8, .T = 384}),
          "mode 0 is bert_activation_bytes");
    CHECK(layer < none / 4, "recompute keeps under a quarter for 12 layers");
    memory_answer p;
    memory_query q = {.cfg = &base, .micro = 8, .T = 384, .prec = PREC_BF16, .recompute = RECOMPUTE_LAYER};
    /* bf16 on CUDA: the attention saves the lse (memory_attention_lse) */
    bert_model_opts re16 = re;
    re16.att_lse = memory_attention_lse(&base, PREC_BF16);
    re16.act_bytes = memory_act_bytes(PREC_BF16);
    size_t layer16 = bert_activation_bytes(&re16);
    CHECK(memory_plan(&q, &p) == 0 && p.activations == (int64_t)layer16,
          "the planner's recompute activations are bert.c's (%lld vs %zu)", (long long)p.activations, layer16);
}

int main(void)
{
    log_quiet(1);
    bert_config cfg = tu_small_config(60, L, 4);
    make_batch(cfg.vocab_size);
    param_table t;
    param_table_init(&t, &cfg);
    float *p0 = tu_model_params(&cfg, &t, 5, 5);
    compare(&cfg, p0, t.total, 1);
    compare(&cfg, p0, t.total, 2);
    check_memory();
    free(p0);
    param_table_free(&t);
    return tu_done();
}
