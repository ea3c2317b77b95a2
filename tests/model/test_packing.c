/* Packed (unpadded) micro-batches: the packed path must equal the padded
 * path whose QA loss masks the padding positions (bert_batch.mask_loss),
 * on windows of mixed lengths with dropout on (masks indexed by window and
 * position, so both paths draw the same ones): the loss, the logits at
 * every real position, every gradient and the weights after 3 AdamW steps,
 * each within 1e-5 relative (per tensor: |diff| <= 1e-5 (|want| + max
 * |want| of the tensor)). Also: a packed model sized by tokens
 * (bert_model_opts' max_tokens), recompute on packed batches bit for bit,
 * the masked loss against a hand computation, and bad packed batches
 * refused with ERR_INPUT. And the gradient buckets that data-parallel
 * training sums while backward runs (bert_model_set_grads_ready): L + 2
 * ranges in backward's order that cover the block once, each final when
 * its hook is called (padded, packed, recompute, accumulation). */
#include "backend/backend.h"
#include "core/err.h"
#include "model/bert.h"
#include "model/init.h"
#include "model/memory.h"
#include "testutil.h"
#include "train/optim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { B = 4, T = 24, L = 3, V = 60, STEPS = 3 };

static const int lens[B] = {24, 17, 9, 3};
/* start, end per window: inside, at CLS, an ignored end (>= T), a short one */
static const int32_t sp[B] = {3, 0, 5, 1}, ep[B] = {7, 0, 40, 2};

/* the padded batch and the packed one (its real tokens, window after
 * window), of step k's windows (ids vary by step) */
static int32_t pids[B * T], ptypes[B * T], pmask[B * T];
static int32_t kids[B * T], ktypes[B * T], cu[B + 1];
static int N;

static void make_batches(int k)
{
    tu_batch_spec spec = {B, T, lens, .vocab = V, .row_mul = 11, .tok_mul = 17, .offset = 7 * k, .seg_start = 4};
    tu_make_batch(&spec, pids, ptypes, pmask);
    N = 0;
    cu[0] = 0;
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < lens[b]; t++, N++) {
            kids[N] = pids[b * T + t];
            ktypes[N] = ptypes[b * T + t];
        }
        cu[b + 1] = N;
    }
}

static int close_tensor(const char *what, const float *got, const float *want, size_t n)
{
    double mx = 0;
    for (size_t i = 0; i < n; i++) mx = fabs(want[i]) > mx ? fabs(want[i]) : mx;
    return tu_close(what, got, want, n, 1e-5, 1e-5 * mx + 1e-30);
}

/* the packed logits [N] against the padded [B*T] at real positions */
static void compare_logits(const char *what, const float *packed, const float *padded)
{
    float want[B * T];
    for (int b = 0; b < B; b++)
        for (int t = 0; t < lens[b]; t++) want[cu[b] + t] = padded[b * T + t];
    close_tensor(what, packed, want, (size_t)N);
}

static double max_abs(const float *x, size_t n)
{
    double mx = 0;
    for (size_t i = 0; i < n; i++) mx = fabs(x[i]) > mx ? fabs(x[i]) : mx;
    return mx;
}

/* Tensors whose gradient is zero in exact arithmetic: the key biases
 * (softmax ignores a shift of the scores), the last LayerNorm bias and
 * qa_outputs.bias (each window's start and end gradients sum to zero).
 * Both paths leave only rounding there, under 1e-6 of the largest
 * gradient; AdamW divides by sqrt(v) and turns that rounding into steps of
 * the order of lr, so their weights after AdamW are not a property of the
 * paths and are left out of that comparison (as they would differ between
 * any two runs that round differently, 1 and 2 threads for one). */
static unsigned char structural_zero[64];

static void compare_grads(const param_table *tab, const float *got, const float *want, const char *what, int grads)
{
    double gmax = grads ? max_abs(want, tab->total) : 0;
    for (int i = 0; i < tab->n; i++) {
        char name[200];
        const float *g = got + tab->info[i].offset, *w = want + tab->info[i].offset;
        size_t n = tab->info[i].numel;
        snprintf(name, sizeof name, "%s %s", what, tab->info[i].name);
        if (grads && i < 64 && max_abs(w, n) < 1e-6 * gmax) {
            structural_zero[i] = 1;
            printf("%-60s zero in exact arithmetic: max |g| %.3e packed, %.3e padded, largest gradient %.3e\n", name,
                   max_abs(g, n), max_abs(w, n), gmax);
            CHECK(max_abs(g, n) < 1e-6 * gmax, "%s: the packed gradient is not rounding-small", name);
            continue;
        }
        if (!grads && i < 64 && structural_zero[i]) continue;
        close_tensor(name, g, w, n);
    }
}

static int forward_backward(bert_model *m, int packed, int k, float *loss, float *sl, float *el)
{
    make_batches(k);
    bert_batch b = {B, T, packed ? kids : pids, packed ? ktypes : ptypes, packed ? NULL : pmask, sp, ep,
                    packed ? cu : NULL, !packed};
    philox_stream rng = {.seed = 77, .step = (uint32_t)k};
    int rc = bert_forward(m, &b, 0.1f, 0.1f, rng, loss, sl, el);
    return rc ? rc : bert_backward(m, 1.0f);
}

static float *grads_of(bert_model *m, size_t n)
{
    backend *be = bert_model_backend(m);
    float *g = malloc(n * sizeof *g);
    if (be->i->download(be->ctx, g, bert_model_grads(m), n * sizeof *g)) {
        free(g);
        return NULL;
    }
    return g;
}

/* The grads_ready hook: records each bucket and a copy of its gradients
 * at the moment of the call. */
typedef struct {
    const float *grads;
    float *snap;
    size_t off[L + 2], n[L + 2];
    int calls;
} bucket_log;

static int log_bucket(void *arg, size_t off, size_t n)
{
    bucket_log *bl = arg;
    if (bl->calls < L + 2) {
        bl->off[bl->calls] = off;
        bl->n[bl->calls] = n;
        memcpy(bl->snap + off, bl->grads + off, n * sizeof(float));
    }
    bl->calls++;
    return bl->calls == 100 ? ERR_RUNTIME : 0;
}

static void grad_buckets(backend *be, const bert_config *cfg, const float *p0)
{
    for (int mode = 0; mode < 3; mode++) { /* padded, packed, packed with recompute */
        bert_model *m = NULL;
        bert_model_opts mo = {.cfg = cfg, .be = be, .max_B = B, .T = T};
        if (mode) mo.max_tokens = 24 + 17 + 9 + 3;
        if (mode == 2) mo.recompute = RECOMPUTE_LAYER;
        int rc = bert_model_create(&m, &mo);
        if (!rc) rc = bert_model_set_params(m, p0);
        CHECK(rc == 0, "model: %s", err_msg());
        if (rc) {
            bert_model_free(m);
            continue;
        }
        const param_table *tab = bert_model_table(m);
        size_t n = tab->total;
        bucket_log bl = {bert_model_grads(m), calloc(n, sizeof(float)), {0}, {0}, 0};
        /* two micro-batches accumulated, the hook on for the second only (as
         * the last micro-batch of a rank's share) */
        float loss;
        bert_zero_grad(m);
        rc = forward_backward(m, mode > 0, 0, &loss, NULL, NULL);
        CHECK(rc == 0 && bl.calls == 0, "no calls without a hook: %d", bl.calls);
        bert_model_set_grads_ready(m, log_bucket, &bl);
        if (!rc) rc = forward_backward(m, mode > 0, 1, &loss, NULL, NULL);
        bert_model_set_grads_ready(m, NULL, NULL);
        CHECK(rc == 0, "backward: %s", err_msg());
        CHECK(bl.calls == L + 2 && bert_grad_bucket_count(m) == L + 2, "%d calls, want %d", bl.calls, L + 2);
        /* backward's order: the QA head, layer L-1 .. 0, the embeddings; each
         * range right below the one before, together the whole block */
        size_t qa = (size_t)tab->info[param_table_find(tab, "qa_outputs.weight")].offset;
        size_t l0 = (size_t)tab->info[param_table_find(tab, "bert.encoder.layer.0.attention.self.query.weight")].offset;
        int order = bl.calls == L + 2 && bl.off[0] == qa && bl.off[0] + bl.n[0] == n && bl.off[L + 1] == 0 &&
                    bl.n[L + 1] == l0;
        for (int k = 1; order && k < L + 2; k++) order = bl.off[k] + bl.n[k] == bl.off[k - 1];
        printf("grad buckets (%s): %d calls:", mode == 0 ? "padded" : mode == 1 ? "packed" : "packed, recompute",
               bl.calls);
        for (int k = 0; k < bl.calls && k < L + 2; k++) printf(" [%zu,+%zu)", bl.off[k], bl.n[k]);
        printf("\n");
        CHECK(order, "the buckets are not QA head, layers L-1..0, embeddings, covering [0, %zu)", n);
        /* each bucket was final when its hook ran: its gradients then equal
         * those after backward, bit for bit */
        float *g = grads_of(m, n);
        CHECK(g && !memcmp(g, bl.snap, n * sizeof *g), "a bucket changed after its hook was called");
        if (g) printf("  snapshots at the hooks equal the final gradients bit for bit (%zu floats)\n", n);
        /* bert_grad_buckets_emit: the same ranges without a backward, from any bucket on */
        bucket_log e = {bert_model_grads(m), calloc(n, sizeof(float)), {0}, {0}, 0};
        bert_model_set_grads_ready(m, log_bucket, &e);
        rc = bert_grad_buckets_emit(m, 0);
        CHECK(rc == 0 && e.calls == L + 2 && !memcmp(e.off, bl.off, sizeof e.off) && !memcmp(e.n, bl.n, sizeof e.n),
              "emit(0): %d calls, not the same ranges", e.calls);
        e.calls = 0;
        rc = bert_grad_buckets_emit(m, L);
        CHECK(rc == 0 && e.calls == 2 && e.off[0] == bl.off[L] && e.off[1] == bl.off[L + 1], "emit(L): %d calls",
              e.calls);
        /* a hook's error ends backward with it */
        e.calls = 98;
        rc = forward_backward(m, mode > 0, 2, &loss, NULL, NULL);
        CHECK(rc == ERR_RUNTIME && e.calls == 100, "a failing hook: rc %d after %d calls", rc, e.calls);
        err_clear();
        bert_model_set_grads_ready(m, NULL, NULL);
        free(g);
        free(e.snap);
        free(bl.snap);
        bert_model_free(m);
    }
}

static void equality(backend *be, const bert_config *cfg, const float *p0)
{
    bert_model *pad = NULL, *pk = NULL, *pkre = NULL;
    int rc = bert_model_create(&pad, &(bert_model_opts){.cfg = cfg, .be = be, .max_B = B, .T = T});
    /* exactly the tokens of the windows: the packed layout sized by tokens */
    bert_model_opts mo = {.cfg = cfg, .be = be, .max_B = B, .T = T, .max_tokens = 24 + 17 + 9 + 3};
    if (!rc) rc = bert_model_create(&pk, &mo);
    mo.recompute = RECOMPUTE_LAYER;
    if (!rc) rc = bert_model_create(&pkre, &mo);
    if (!rc) rc = bert_model_set_params(pad, p0);
    if (!rc) rc = bert_model_set_params(pk, p0);
    if (!rc) rc = bert_model_set_params(pkre, p0);
    CHECK(rc == 0, "models: %s", err_msg());
    if (rc) goto out;
    const param_table *tab = bert_model_table(pad);
    size_t n = tab->total;

    /* one forward and backward */
    float l_pad, l_pk, l_re, s_pad[B * T], e_pad[B * T], s_pk[B * T], e_pk[B * T], s_re[B * T], e_re[B * T];
    rc = forward_backward(pad, 0, 0, &l_pad, s_pad, e_pad);
    if (!rc) rc = forward_backward(pk, 1, 0, &l_pk, s_pk, e_pk);
    if (!rc) rc = forward_backward(pkre, 1, 0, &l_re, s_re, e_re);
    CHECK(rc == 0, "forward/backward: %s", err_msg());
    if (rc) goto out;
    printf("loss: padded with masked loss %.9g, packed %.9g (N = %d rows instead of %d)\n", (double)l_pad,
           (double)l_pk, N, B * T);
    CHECK(fabs(l_pk - l_pad) <= 1e-5 * fabs(l_pad), "loss %.9g vs %.9g", (double)l_pk, (double)l_pad);
    compare_logits("start logits, packed vs padded", s_pk, s_pad);
    compare_logits("end logits, packed vs padded", e_pk, e_pad);
    float *g_pad = grads_of(pad, n), *g_pk = grads_of(pk, n), *g_re = grads_of(pkre, n);
    CHECK(g_pad && g_pk && g_re, "gradient download");
    if (g_pad && g_pk && g_re) {
        compare_grads(tab, g_pk, g_pad, "grad", 1);
        double norm = 0;
        for (size_t j = 0; j < n; j++) norm += (double)g_pad[j] * g_pad[j];
        CHECK(norm > 0, "the gradient is not zero");
        CHECK(!memcmp(g_pk, g_re, n * sizeof(float)) && l_pk == l_re && !memcmp(s_pk, s_re, sizeof(float) * N),
              "packed with recompute equals packed without, bit for bit");
    }
    free(g_pad);
    free(g_pk);
    free(g_re);

    /* 3 AdamW steps from p0, each on its own windows and dropout masks */
    optim *o_pad = NULL, *o_pk = NULL;
    rc = bert_model_set_params(pad, p0);
    if (!rc) rc = bert_model_set_params(pk, p0);
    if (!rc) rc = optim_create(&o_pad, be, tab);
    if (!rc) rc = optim_create(&o_pk, be, bert_model_table(pk));
    optim_config oc = optim_config_default();
    oc.lr = 1e-3;
    oc.total_steps = STEPS;
    oc.warmup_steps = 1;
    float losses[2][STEPS];
    for (int k = 0; k < STEPS && !rc; k++) {
        optim_result r;
        bert_zero_grad(pad);
        bert_zero_grad(pk);
        rc = forward_backward(pad, 0, k + 1, &losses[0][k], NULL, NULL);
        if (!rc) rc = forward_backward(pk, 1, k + 1, &losses[1][k], NULL, NULL);
        if (!rc) rc = optim_step(o_pad, bert_model_params(pad), bert_model_grads(pad), &oc, k, 1.0f, &r);
        if (!rc) rc = optim_step(o_pk, bert_model_params(pk), bert_model_grads(pk), &oc, k, 1.0f, &r);
    }
    CHECK(rc == 0, "AdamW steps: %s", err_msg());
    if (!rc) {
        tu_close("losses of the 3 steps", losses[1], losses[0], STEPS, 1e-5, 0);
        float *w_pad = malloc(n * sizeof(float)), *w_pk = malloc(n * sizeof(float));
        rc = bert_model_get_params(pad, w_pad);
        if (!rc) rc = bert_model_get_params(pk, w_pk);
        CHECK(rc == 0, "params download");
        if (!rc) {
            compare_grads(tab, w_pk, w_pad, "weights after 3 AdamW steps:", 0);
            size_t moved = 0;
            for (size_t j = 0; j < n; j++) moved += w_pad[j] != p0[j];
            CHECK(moved > n / 2, "the steps moved the weights (%zu of %zu)", moved, n);
        }
        free(w_pad);
        free(w_pk);
    }
    optim_free(o_pad);
    optim_free(o_pk);
out:
    bert_model_free(pad);
    bert_model_free(pk);
    bert_model_free(pkre);
}

/* qa_loss on packed windows by hand: two windows, one ignored side */
static void loss_by_hand(backend *be)
{
    /* window 0 rows 0..2, window 1 rows 3..4, packed; Tp = 4 */
    float logits[10] = {0.5f, -1, 2, 0.25f, -0.5f, 1.5f, 1, 0, 3, -2};
    int32_t offs[3] = {0, 3, 5}, st[2] = {2, 0}, en[2] = {1, 4};
    float loss = 0, d[10];
    backend_windows w = backend_windows_packed(offs, 2, 4, 5, 3);
    be->i->qa_loss(be->ctx, &loss, d, logits, st, en, &w, 1.0f);
    /* start: window 0 target 2 over {0.5, 2, -0.5}, window 1 target 0 over {1, 3};
     * end: window 0 target 1 over {-1, 0.25, 1.5}, window 1 ignored (4 = Tp) */
    double s0 = log(exp(0.5) + exp(2) + exp(-0.5)) - (-0.5), s1 = log(exp(1) + exp(3)) - 1;
    double e0 = log(exp(-1) + exp(0.25) + exp(1.5)) - 0.25;
    double want = ((s0 + s1) / 2 + e0) / 2;
    printf("packed qa_loss by hand: %.9g, want %.9g\n", (double)loss, want);
    CHECK(fabs(loss - want) <= 1e-6 * fabs(want), "packed qa_loss %.9g vs %.9g", (double)loss, want);
    double p = exp(3) / (exp(1) + exp(3));
    CHECK(fabs(d[6] - (1 - p - 1) * 0.25) < 1e-7 && d[7] == 0 && d[9] == 0,
          "dlogits: window 1 start %.9g, its end 0 (ignored)", (double)d[6]);
}

static void bad_batches(backend *be, const bert_config *cfg)
{
    bert_model *m = NULL;
    int rc = bert_model_create(&m, &(bert_model_opts){.cfg = cfg, .be = be, .max_B = B, .T = T, .max_tokens = 40});
    CHECK(rc == 0, "%s", err_msg());
    if (rc) return;
    make_batches(0);
    int32_t bad_cu[B + 1] = {0, 25, 30, 31, 32};
    int32_t cu_small[B + 1] = {0, 10, 20, 30, 32};
    int32_t sp_pad[B] = {3, 0, 12, 1};
    struct { bert_batch b; const char *what, *msg; } cases[] = {
        {{B, T, kids, ktypes, NULL, sp, ep, bad_cu, 0}, "a window longer than T", "window 0 has 25"},
        {{B, T, kids, ktypes, NULL, sp, ep, cu, 0}, "more tokens than --max-tokens", "tokens"},
        {{B, T, kids, ktypes, NULL, sp_pad, ep, cu_small, 0}, "a label on padding", "start position 12 is padding"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        philox_stream rng = {.seed = 1};
        rc = bert_forward(m, &cases[i].b, 0, 0, rng, NULL, NULL, NULL);
        CHECK(rc == ERR_INPUT && strstr(err_msg(), cases[i].msg), "%s: rc %d, %s", cases[i].what, rc, err_msg());
        printf("%s: refused (%s)\n", cases[i].what, err_msg());
    }
    bert_model *tiny = NULL;
    rc = bert_model_create(&tiny, &(bert_model_opts){.cfg = cfg, .be = be, .max_B = B, .T = T, .max_tokens = T - 1});
    CHECK(rc == ERR_INPUT, "max_tokens below T refused: %s", err_msg());
    bert_model_free(tiny);
    bert_model_free(m);
}

/* The planner counts tokens where packing is on. */
static void planner(void)
{
    bert_config base;
    CHECK(config_named("base", 30522, &base) == 0, "%s", err_msg());
    memory_answer pad, full, real;
    memory_query q = {.cfg = &base, .micro = 8, .T = 384, .prec = PREC_BF16};
    int rc = memory_plan(&q, &pad);
    q.max_tokens = 8 * 384;
    if (!rc) rc = memory_plan(&q, &full);
    /* 8 windows of SQuAD dev's mean length (176 tokens) */
    q.max_tokens = 8 * 176;
    if (!rc) rc = memory_plan(&q, &real);
    CHECK(rc == 0, "plans: %s", err_msg());
    printf("BERT-base, 8 windows at T 384: padded %.1f MiB activations; packed by tokens: 3072 tokens %.1f MiB, "
           "1408 tokens %.1f MiB; totals %.1f / %.1f / %.1f MiB\n",
           pad.activations / 1048576.0, full.activations / 1048576.0, real.activations / 1048576.0,
           pad.total / 1048576.0, full.total / 1048576.0, real.total / 1048576.0);
    CHECK(real.activations == (int64_t)bert_activation_bytes(
                                  &(bert_model_opts){.cfg = &base, .max_B = 8, .T = 384, .max_tokens = 8 * 176,
                                                     .att_lse = memory_attention_lse(&base, PREC_BF16),
                                                     .act_bytes = memory_act_bytes(PREC_BF16)}),
          "the packed plan's activations are bert.c's");
    CHECK(real.activations < pad.activations / 2 + pad.activations / 10, "1408 of 3072 tokens take under 60%% of the "
                                                                         "padded activations");
    CHECK(full.activations <= pad.activations + 65536, "all 3072 tokens take no more than padded (%lld vs %lld)",
          (long long)full.activations, (long long)pad.activations);
    int64_t best = memory_largest(&q, MEMORY_FIT_TOKENS, real.total, 8 * 384);
    CHECK(best >= 8 * 176 && best < 8 * 176 + 64, "the largest --max-tokens in the 1408-token plan's budget: %lld",
          (long long)best);
    q.max_tokens = 100;
    CHECK(memory_plan(&q, &real) == ERR_INPUT,
          "--max-tokens below T refused: %s", err_msg());
    err_clear();
}

int main(void)
{
    log_quiet(1);
    bert_config cfg = tu_small_config(V, L, 4);
    param_table t;
    param_table_init(&t, &cfg);
    float *p0 = tu_model_params(&cfg, &t, 5, 5);
    backend be;
    int rc = backend_cpu_create(&be, 2);
    CHECK(rc == 0, "%s", err_msg());
    if (!rc) {
        loss_by_hand(&be);
        equality(&be, &cfg, p0);
        bad_batches(&be, &cfg);
        grad_buckets(&be, &cfg, p0);
        planner();
        backend_free(&be);
    }
    free(p0);
    param_table_free(&t);
    return tu_done();
}
