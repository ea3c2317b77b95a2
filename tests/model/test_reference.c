/* bertc against PyTorch: tests/ref/tiny (tools/make_reference.py) holds a
 * tiny BertForQuestionAnswering, one batch with padding, an ignored and a
 * clamped label, and what transformers computes in float64 from the same
 * float32 weights: the logits, the loss, every parameter gradient, the
 * gradient norm of each step and every parameter after 3 AdamW updates
 * with warm-up, weight decay and clipping that triggers.
 *
 * Every tensor is compared by name; each line gives the largest absolute
 * and relative difference. Tolerances (|got - want| <= atol + rtol |want|):
 *   logits, loss        rtol 1e-5  atol 1e-6
 *   gradients           rtol 1e-5  atol max(1e-7, 1e-6 x the tensor's largest |value|)
 *   gradient norms      rtol 1e-5
 *   parameters, step 3  rtol 1e-5  atol 2e-6
 * The gradient floor grows with the tensor's scale because a gradient
 * that sums over many tokens (embeddings, qa_outputs) carries fp32
 * rounding of that scale: PyTorch's own fp32 run is 1.1e-7 off the float64
 * answer on the token type embeddings, whose largest element is 0.63.
 * Except, after 3 steps, the tensors whose gradient is zero in exact
 * arithmetic (the reference gradient's largest element is below 1e-12:
 * attention key biases, the last LayerNorm bias and qa_outputs.bias, which
 * shift every score of a softmax equally). Their fp32 gradient is rounding
 * noise of ~1e-9, which Adam normalises into steps of up to lr (PyTorch's
 * own fp32 run does the same), so for them only Adam's bound is checked:
 * atol = 2 x the sum of the learning rates of the 3 updates. */
#include "backend/backend.h"
#include "core/err.h"
#include "model/bert.h"
#include "model/hf_dir.h"
#include "model/safetensors.h"
#include "train/optim.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define REF_DIR "tests/ref/tiny"

static void compare_params(const st_file *ref, const param_table *t, const float *got, const char *prefix,
                           double rtol, double atol, double scale_floor, const float *grads_ref_zero,
                           double zero_atol)
{
    for (int i = 0; i < t->n; i++) {
        char name[128];
        snprintf(name, sizeof name, "%s%s", prefix, t->info[i].name);
        float *want = tu_st_f32(ref, name, t->info[i].numel);
        if (!want) continue;
        double a = atol;
        if (scale_floor > 0) {
            double mx = 0;
            for (size_t j = 0; j < t->info[i].numel; j++) mx = fmax(mx, fabs(want[j]));
            a = fmax(atol, scale_floor * mx);
        }
        if (grads_ref_zero && grads_ref_zero[i] != 0) {
            a = zero_atol;
            snprintf(name, sizeof name, "%s%s [zero gradient: Adam bound]", prefix, t->info[i].name);
        }
        tu_close(name, got + t->info[i].offset, want, t->info[i].numel, rtol, a);
        free(want);
    }
}

/* Step 0: forward and backward on the batch, the logits, the loss and
 * every gradient against the reference's; its loss into *loss. Returns,
 * per tensor of the model's table, 1 where the gradient is zero in exact
 * arithmetic. */
static float *check_step0(const st_file *ref, bert_model *m, backend *be, const bert_batch *batch, float *loss)
{
    const param_table *mt = bert_model_table(m);
    size_t BT = (size_t)batch->B * batch->T;
    philox_stream rng = {.seed = 42, .step = 0};
    float *sl = malloc(BT * sizeof *sl), *el = malloc(BT * sizeof *el);
    int rc = bert_forward(m, batch, 0, 0, rng, loss, sl, el);
    CHECK(rc == 0, "forward: %s", err_msg());
    float *want = tu_st_f32(ref, "start_logits", BT);
    if (want) tu_close("start_logits", sl, want, BT, 1e-5, 1e-6), free(want);
    want = tu_st_f32(ref, "end_logits", BT);
    if (want) tu_close("end_logits", el, want, BT, 1e-5, 1e-6), free(want);
    want = tu_st_f32(ref, "loss", 1);
    if (want) tu_close("loss", loss, want, 1, 1e-5, 1e-6), free(want);

    bert_zero_grad(m);
    rc = bert_backward(m, 1.0f);
    CHECK(rc == 0, "backward: %s", err_msg());
    float *grads = malloc(mt->total * sizeof *grads);
    rc = be->i->download(be->ctx, grads, bert_model_grads(m), mt->total * sizeof *grads);
    CHECK(rc == 0, "download grads");
    compare_params(ref, mt, grads, "grad.", 1e-5, 1e-7, 1e-6, NULL, 0);

    /* Which tensors have a zero gradient in exact arithmetic. */
    float *zero_grad = calloc((size_t)mt->n, sizeof *zero_grad);
    int nzero = 0;
    for (int i = 0; i < mt->n; i++) {
        char name[128];
        snprintf(name, sizeof name, "grad.%s", mt->info[i].name);
        float *g = tu_st_f32(ref, name, mt->info[i].numel);
        if (!g) continue;
        double mx = 0;
        for (size_t j = 0; j < mt->info[i].numel; j++) mx = fmax(mx, fabs(g[j]));
        if (mx < 1e-12) zero_grad[i] = 1, nzero++;
        free(g);
    }
    int L = bert_model_config(m)->num_hidden_layers;
    printf("%d tensors have a zero gradient in exact arithmetic\n", nzero);
    CHECK(nzero == L + 2, "expected the %d key biases, the last LayerNorm bias and qa_outputs.bias, found %d", L,
          nzero);
    free(grads);
    free(sl);
    free(el);
    return zero_grad;
}

/* 3 AdamW updates with the reference's hyperparameters (hp), the first on
 * step 0's gradients (loss: step 0's); the gradient norms against the
 * reference's. Returns the sum of the 3 learning rates. */
static double check_updates(const st_file *ref, bert_model *m, optim *opt, const bert_batch *batch, const float *hp,
                            float loss)
{
    optim_config oc = optim_config_default();
    oc.lr = hp[0];
    oc.weight_decay = hp[1];
    oc.max_grad_norm = hp[2];
    oc.warmup_steps = (int64_t)hp[3];
    oc.total_steps = (int64_t)hp[4];
    oc.eps = hp[5];
    oc.beta1 = hp[6];
    oc.beta2 = hp[7];
    printf("AdamW lr %g wd %g eps %g betas %g %g, clip at %g, warm-up %lld of %lld\n", oc.lr, oc.weight_decay, oc.eps,
           oc.beta1, oc.beta2, oc.max_grad_norm, (long long)oc.warmup_steps, (long long)oc.total_steps);
    float *norms_ref = tu_st_f32(ref, "grad_norm", 3);
    float norms[3] = {0};
    double lr_sum = 0;
    philox_stream rng = {.seed = 42, .step = 0};
    for (int k = 0; k < 3; k++) {
        int rc = 0;
        if (k > 0) {
            bert_zero_grad(m);
            rng.step = (uint32_t)k;
            rc = bert_forward(m, batch, 0, 0, rng, &loss, NULL, NULL);
            if (!rc) rc = bert_backward(m, 1.0f);
            CHECK(rc == 0, "step %d: %s", k, err_msg());
        }
        optim_result r;
        rc = optim_step(opt, bert_model_params(m), bert_model_grads(m), &oc, k, 1.0f, &r);
        CHECK(rc == 0, "optim_step %d: %s", k, err_msg());
        printf("update %d: loss %.6f grad norm %.6f clip coef %.6f lr %g\n", k, loss, r.grad_norm, r.clip_coef, r.lr);
        CHECK(r.clip_coef < 1 && !r.skipped, "update %d: clipping triggers (coef %g) and nothing is skipped", k,
              r.clip_coef);
        norms[k] = (float)r.grad_norm;
        lr_sum += r.lr;
    }
    if (norms_ref) tu_close("grad_norm (3 updates)", norms, norms_ref, 3, 1e-5, 0), free(norms_ref);
    CHECK(optim_t(opt) == 3, "3 Adam steps taken (%lld)", (long long)optim_t(opt));
    return lr_sum;
}

int main(void)
{
    log_quiet(1);
    st_file ref;
    if (st_open(REF_DIR "/reference.safetensors", &ref)) {
        fprintf(stderr, "FAIL: %s\n", err_msg());
        return 1;
    }
    bert_config cfg;
    param_table t;
    float *init = NULL;
    int qa_init = -1;
    if (model_load(REF_DIR "/model", 1, &cfg, &t, &init, &qa_init)) {
        fprintf(stderr, "FAIL: model_load: %s\n", err_msg());
        return 1;
    }
    CHECK(qa_init == 0, "qa_outputs comes from the file, not initialised (%d)", qa_init);
    CHECK(cfg.num_hidden_layers == 2 && cfg.hidden_size == 64 && cfg.num_attention_heads == 4 &&
              cfg.intermediate_size == 128 && cfg.vocab_size == 100,
          "config L%d H%d A%d I%d V%d", cfg.num_hidden_layers, cfg.hidden_size, cfg.num_attention_heads,
          cfg.intermediate_size, cfg.vocab_size);

    bert_batch batch;
    float *hp = tu_st_f32(&ref, "hparams", 8);
    if (tu_st_batch(&ref, 1, &batch) || !hp) return tu_done();
    int B = batch.B, T = batch.T;

    backend be;
    bert_model *m = NULL;
    optim *opt = NULL;
    if (backend_cpu_create(&be, 2) ||
        bert_model_create(&m, &(bert_model_opts){.cfg = &cfg, .be = &be, .max_B = B, .T = T}) ||
        bert_model_set_params(m, init) || optim_create(&opt, &be, bert_model_table(m))) {
        fprintf(stderr, "FAIL: setup: %s\n", err_msg());
        return 1;
    }
    const param_table *mt = bert_model_table(m);
    CHECK(mt->total == t.total, "model_load's table (%zu) and the model's (%zu) agree", t.total, mt->total);

    /* Step 0: forward and backward, compared tensor by tensor; then 3
     * updates on the same batch, as the script runs them. */
    float loss = 0;
    float *zero_grad = check_step0(&ref, m, &be, &batch, &loss);
    double lr_sum = check_updates(&ref, m, opt, &batch, hp, loss);

    float *params = malloc(t.total * sizeof *params);
    int rc = bert_model_get_params(m, params);
    CHECK(rc == 0, "get params");
    printf("tolerance for zero-gradient tensors after 3 updates: atol %.3g (2 x sum of lr)\n", 2 * lr_sum);
    compare_params(&ref, mt, params, "step3.", 1e-5, 2e-6, 0, zero_grad, 2 * lr_sum);
    printf("tolerances: logits/loss rtol 1e-5 atol 1e-6; grads rtol 1e-5 atol max(1e-7, 1e-6 x the tensor's "
           "largest |value|); norms rtol 1e-5; step3 params rtol 1e-5 atol 2e-6 (zero-gradient tensors: %.3g)\n",
           2 * lr_sum);

    free(params);
    free(zero_grad);
    tu_st_batch_free(&batch);
    free(hp);
    optim_free(opt);
    bert_model_free(m);
    backend_free(&be);
    free(init);
    param_table_free(&t);
    st_close(&ref);
    return tu_done();
}
