/* bert.c beyond the PyTorch reference (which runs without dropout): the
 * backward of a forward with dropout on, checked by a finite difference of
 * the loss along the gradient; dropout streams that never collide; masks
 * that change with the step; a shorter batch than the model was sized for;
 * logits with and without labels; rejection of bad batches; and one small
 * `bertc bench` run. */
#include "backend/backend.h"
#include "core/err.h"
#include "model/bert.h"
#include "model/init.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

enum { B = 2, T = 16 };

static int32_t ids[B * T], types[B * T], mask[B * T], sp[B] = {3, 5}, ep[B] = {6, 9};

/* row 1 padded after 11 tokens */
static void make_batch(int vocab)
{
    static const int lens[B] = {T, 11};
    tu_batch_spec spec = {B, T, lens, .vocab = vocab, .row_mul = 7, .tok_mul = 13, .seg_start = 5};
    tu_make_batch(&spec, ids, types, mask);
}

static void test_streams(void)
{
    /* Every (layer, site) of a 24-layer model, embeddings included, gets its own stream. */
    uint32_t seen[25 * 4];
    int n = 0, dup = 0;
    seen[n++] = bert_dropout_stream(-1, DROPOUT_EMBEDDINGS);
    for (int l = 0; l < 24; l++)
        for (int s = DROPOUT_ATTN_PROBS; s <= DROPOUT_FFN_OUT; s++) {
            uint32_t x = bert_dropout_stream(l, s);
            for (int i = 0; i < n; i++) dup += seen[i] == x;
            seen[n++] = x;
        }
    CHECK(dup == 0, "%d of %d dropout streams collide", dup, n);
    CHECK(bert_dropout_stream(-1, DROPOUT_EMBEDDINGS) == 0 && bert_dropout_stream(0, DROPOUT_ATTN_PROBS) == 17,
          "layout: embeddings 0, layer 0 attention probs 17 (got %u, %u)", bert_dropout_stream(-1, 0),
          bert_dropout_stream(0, DROPOUT_ATTN_PROBS));
}

static float loss_at(bert_model *m, const float *p, float ph, float pa, philox_stream rng)
{
    bert_batch b = {B, T, ids, types, mask, sp, ep, NULL, 0};
    float loss = NAN;
    if (bert_model_set_params(m, p) || bert_forward(m, &b, ph, pa, rng, &loss, NULL, NULL))
        CHECK(0, "loss_at: %s", err_msg());
    return loss;
}

/* d loss / d h of loss(p + h g/|g|) at h = 0 is |g|: a central difference
 * checks the whole backward, dropout masks included. */
static void test_dropout_gradient(bert_model *m, const float *p0, size_t n)
{
    backend *be = bert_model_backend(m);
    bert_batch b = {B, T, ids, types, mask, sp, ep, NULL, 0};
    philox_stream rng = {.seed = 3, .step = 7};
    float *g_on = malloc(n * sizeof *g_on), *g_off = malloc(n * sizeof *g_off), *p = malloc(n * sizeof *p);
    const float ph = 0.2f, pa = 0.2f;
    int rc = bert_model_set_params(m, p0);
    bert_zero_grad(m);
    if (!rc) rc = bert_forward(m, &b, ph, pa, rng, NULL, NULL, NULL);
    if (!rc) rc = bert_backward(m, 1.0f);
    CHECK(rc == 0, "dropout forward/backward: %s", err_msg());
    be->i->download(be->ctx, g_on, bert_model_grads(m), n * sizeof *g_on);
    bert_zero_grad(m);
    rc = bert_forward(m, &b, 0, 0, rng, NULL, NULL, NULL);
    if (!rc) rc = bert_backward(m, 1.0f);
    be->i->download(be->ctx, g_off, bert_model_grads(m), n * sizeof *g_off);

    double norm = 0, diff = 0;
    for (size_t j = 0; j < n; j++) {
        norm += (double)g_on[j] * g_on[j];
        diff += ((double)g_on[j] - g_off[j]) * ((double)g_on[j] - g_off[j]);
    }
    norm = sqrt(norm);
    diff = sqrt(diff);
    CHECK(diff > 0.05 * norm, "dropout changes the gradient (|g_on - g_off| %.3g, |g_on| %.3g)", diff, norm);

    const double h = 1e-2;
    for (size_t j = 0; j < n; j++) p[j] = (float)(p0[j] + h * g_on[j] / norm);
    float lp = loss_at(m, p, ph, pa, rng);
    for (size_t j = 0; j < n; j++) p[j] = (float)(p0[j] - h * g_on[j] / norm);
    float lm = loss_at(m, p, ph, pa, rng);
    double fd = ((double)lp - lm) / (2 * h);
    printf("dropout 0.2: |grad| %.6f, central difference of the loss along it %.6f (rel diff %.2e, tol 2e-3)\n",
           norm, fd, fabs(fd - norm) / norm);
    CHECK(fabs(fd - norm) < 2e-3 * norm, "finite difference %.6f vs |grad| %.6f", fd, norm);

    /* The same check without dropout, against the same p0: the gradient is that of the mask-free loss. */
    double noff = 0;
    for (size_t j = 0; j < n; j++) noff += (double)g_off[j] * g_off[j];
    noff = sqrt(noff);
    for (size_t j = 0; j < n; j++) p[j] = (float)(p0[j] + h * g_off[j] / noff);
    lp = loss_at(m, p, 0, 0, rng);
    for (size_t j = 0; j < n; j++) p[j] = (float)(p0[j] - h * g_off[j] / noff);
    lm = loss_at(m, p, 0, 0, rng);
    fd = ((double)lp - lm) / (2 * h);
    printf("no dropout: |grad| %.6f, central difference %.6f (rel diff %.2e)\n", noff, fd, fabs(fd - noff) / noff);
    CHECK(fabs(fd - noff) < 2e-3 * noff, "finite difference %.6f vs |grad| %.6f", fd, noff);

    /* Masks follow the step; without dropout the step does not matter. */
    philox_stream other = rng;
    other.step++;
    float a = loss_at(m, p0, ph, pa, rng), a2 = loss_at(m, p0, ph, pa, rng), c = loss_at(m, p0, ph, pa, other);
    float d0 = loss_at(m, p0, 0, 0, rng), d1 = loss_at(m, p0, 0, 0, other);
    CHECK(a == a2, "same step, same loss (%.9g, %.9g)", a, a2);
    CHECK(a != c, "another step draws other masks (%.9g, %.9g)", a, c);
    CHECK(d0 == d1, "no dropout: the step does not matter (%.9g, %.9g)", d0, d1);
    free(g_on), free(g_off), free(p);
}

static void test_shapes(backend *be, const bert_config *cfg, const float *p0)
{
    /* A model sized for T=16 running T=8 rows gives what a model sized for T=8 gives. */
    bert_model *big = NULL, *small = NULL;
    if (bert_model_create(&big, &(bert_model_opts){.cfg = cfg, .be = be, .max_B = B, .T = T}) ||
        bert_model_create(&small, &(bert_model_opts){.cfg = cfg, .be = be, .max_B = 1, .T = 8}) ||
        bert_model_set_params(big, p0) || bert_model_set_params(small, p0)) {
        CHECK(0, "models: %s", err_msg());
        bert_model_free(big);
        bert_model_free(small);
        return;
    }
    int32_t sp1 = 2, ep1 = 4;
    bert_batch b8 = {1, 8, ids, types, mask, &sp1, &ep1, NULL, 0};
    float s1[8], e1[8], s2[8], e2[8], l1 = 0, l2 = 0;
    philox_stream rng = {.seed = 1};
    int rc = bert_forward(big, &b8, 0, 0, rng, &l1, s1, e1);
    if (!rc) rc = bert_forward(small, &b8, 0, 0, rng, &l2, s2, e2);
    CHECK(rc == 0, "T=8 forward: %s", err_msg());
    tu_close("T=8 batch in a T=16 model vs a T=8 model: start logits", s1, s2, 8, 0, 1e-6);
    tu_close("T=8 batch in a T=16 model vs a T=8 model: end logits", e1, e2, 8, 0, 1e-6);
    CHECK(fabs(l1 - l2) <= 1e-6, "losses %.9g %.9g", l1, l2);

    /* Without labels: the same logits, and no backward. */
    bert_batch nolab = {1, 8, ids, types, mask, NULL, NULL, NULL, 0};
    float s3[8], e3[8];
    rc = bert_forward(big, &nolab, 0, 0, rng, NULL, s3, e3);
    CHECK(rc == 0 && !memcmp(s1, s3, sizeof s1) && !memcmp(e1, e3, sizeof e1), "logits without labels identical");
    rc = bert_backward(big, 1.0f);
    CHECK(rc == ERR_RUNTIME, "backward after a forward without labels fails (%d: %s)", rc, err_msg());

    /* Bad batches are refused with ERR_INPUT and a message naming the place. */
    int32_t bad_ids[B * T], bad_mask[B * T], bad_types[B * T];
    memcpy(bad_ids, ids, sizeof ids);
    memcpy(bad_mask, mask, sizeof mask);
    memcpy(bad_types, types, sizeof types);
    bad_ids[T + 3] = cfg->vocab_size;
    bad_mask[5] = 2;
    bad_types[7] = -1;
    struct { bert_batch b; float ph; const char *what, *msg; } cases[] = {
        {{B, T, bad_ids, types, mask, sp, ep, NULL, 0}, 0, "id outside the vocabulary", "input_ids[1][3]"},
        {{B, T, ids, types, bad_mask, sp, ep, NULL, 0}, 0, "mask 2", "attention_mask[0][5]"},
        {{B, T, ids, bad_types, mask, sp, ep, NULL, 0}, 0, "token type -1", "token_type_ids[0][7]"},
        {{B + 1, T, ids, types, mask, sp, ep, NULL, 0}, 0, "more rows than max_B", "rows"},
        {{B, T + 1, ids, types, mask, sp, ep, NULL, 0}, 0, "longer than T", "tokens"},
        {{0, T, ids, types, mask, sp, ep, NULL, 0}, 0, "no rows", "rows"},
        {{B, T, ids, types, mask, sp, NULL, NULL, 0}, 0, "start without end", "go together"},
        {{B, T, ids, types, mask, sp, ep, NULL, 0}, 1.0f, "dropout 1", "dropout"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rc = bert_forward(big, &cases[i].b, cases[i].ph, 0, rng, NULL, NULL, NULL);
        CHECK(rc == ERR_INPUT && strstr(err_msg(), cases[i].msg), "%s: rc %d, message '%s'", cases[i].what, rc,
              err_msg());
    }
    printf("bad batches: %zu refused\n", sizeof cases / sizeof cases[0]);

    bert_model *m = NULL;
    bert_config c2 = *cfg;
    bert_model_opts too_long = {.cfg = &c2, .be = be, .max_B = 1, .T = cfg->max_position_embeddings + 1};
    CHECK(bert_model_create(&m, &too_long) == ERR_INPUT && !m,
          "T beyond max_position_embeddings refused: %s", err_msg());
    CHECK(bert_model_create(&m, &(bert_model_opts){.cfg = &c2, .be = be, .max_B = 0, .T = 8}) == ERR_INPUT && !m,
          "max_B 0 refused");
    size_t a1 = bert_activation_bytes(&(bert_model_opts){.cfg = cfg, .max_B = 1, .T = T}),
           a2 = bert_activation_bytes(&(bert_model_opts){.cfg = cfg, .max_B = 2, .T = T});
    CHECK(a1 > 0 && a2 > a1 && a2 < 2 * a1 + 4096, "activation bytes: B=1 %zu, B=2 %zu", a1, a2);
    bert_model_free(big);
    bert_model_free(small);
}

/* bertc bench: one small step prints one JSON object with the fields
 * bench/train_speed/step_vs_torch.sh reads; bad usage exits 2. */
static void test_bench_cli(void)
{
    const char *bin = getenv("BERTC");
    if (!bin) {
        printf("bench CLI: BERTC not set, skipped\n");
        return;
    }
    char cmd[4096], out[8192] = {0};
    snprintf(cmd, sizeof cmd,
             "'%s' bench --config tiny --vocab-size 100 --seq 16 --batch 2 --steps 1 --warmup-steps 0 --threads 1 "
             "--json 2>/dev/null", bin);
    FILE *f = popen(cmd, "r");
    if (!f) {
        CHECK(0, "popen %s", cmd);
        return;
    }
    size_t n = fread(out, 1, sizeof out - 1, f);
    int st = pclose(f);
    out[n] = 0;
    CHECK(st == 0, "bench exit status %d", st);
    const char *fields[] = {"\"examples_per_s\": ", "\"ms_per_step\": ", "\"gflops\": ", "\"threads\": 1,",
                            "\"openblas_core\": \"", "\"config\": \"tiny\"", "\"seq\": 16,", "\"batch\": 2,"};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        CHECK(strstr(out, fields[i]) != NULL, "bench JSON has %s: %s", fields[i], out);
    CHECK(out[0] == '{' && n > 1 && out[n - 2] == '}', "one JSON object on one line: %s", out);
    snprintf(cmd, sizeof cmd, "'%s' bench --config tiny --seq 16 2>/dev/null >/dev/null", bin);
    st = system(cmd);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 2, "bench without --batch exits 2 (status %d)", st);
    printf("bench CLI: %s", out);
}

int main(void)
{
    log_quiet(1);
    bert_config cfg = tu_small_config(50, 2, 4);
    make_batch(cfg.vocab_size);
    test_streams();
    param_table t;
    param_table_init(&t, &cfg);
    float *p0 = tu_model_params(&cfg, &t, 21, 7);
    backend be;
    bert_model *m = NULL;
    if (backend_cpu_create(&be, 2) ||
        bert_model_create(&m, &(bert_model_opts){.cfg = &cfg, .be = &be, .max_B = B, .T = T})) {
        fprintf(stderr, "FAIL: setup: %s\n", err_msg());
        return 1;
    }
    test_dropout_gradient(m, p0, t.total);
    test_shapes(&be, &cfg, p0);
    test_bench_cli();
    bert_model_free(m);
    backend_free(&be);
    free(p0);
    param_table_free(&t);
    return tu_done();
}
