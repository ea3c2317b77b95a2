/* gpu_check model and train (gpu_check.h).
 *
 * model: the whole model on the CUDA backend, per precision,
 *  (a) against the PyTorch float64 reference of the model core
 *      (tests/ref/tiny: logits, loss and every parameter gradient);
 *  (b) against the CPU backend on a minilm-shaped random model (L6 H384
 *      A12 I1536, vocabulary 30522), 4 rows (--small: 2) of 128 tokens with padding and
 *      dropout 0.1 (both backends draw the same Philox masks).
 *  fp16 runs backward at the loss scale fp16 training starts with (65536,
 *  train/lossscale.h) and unscales the gradients, as training does: at
 *  scale 1 the attention's score gradients and the query/key activation
 *  gradients lie mostly below fp16's normal range (6.1e-5) and keep few
 *  bits, so the query and key weight gradients come out 5-7 % off (the
 *  check shows that too, and that the training scale removes it).
 *  Errors are relative L2 per tensor, the denominator floored at 1e-3 of
 *  the largest tensor norm (gradients that are zero in exact arithmetic
 *  are rounding noise on both sides; qa_outputs.bias's, zero, on 16-bit
 *  activations is floored at what rounding the 16-bit dlogits it sums
 *  can give, grad_floor). Bounds:
 *      precision   logits/loss   gradients
 *      fp32        1e-4          1e-3
 *      tf32        1e-2          3e-2
 *      fp16        1e-2          3e-2
 *      bf16        4e-2          1e-1
 *
 * train: 200 AdamW steps (--small: 100) of a small model (L4 H256 A4 I1024; --small: L2 H128 A2 I512; vocabulary
 *  1000, 32 rows of 64 tokens (--small: 8), dropout 0.1, lr 5e-4 with 20 warm-up steps)
 *  on a learnable synthetic task (the answer is a pair of marker tokens), in
 *  fp32, bf16 and fp16 (dynamic loss scaling), same data, same masks. The
 *  band: every 20-step mean of the loss within 0.1 + 10 % of fp32's, and
 *  the last 20-step mean below half the first (it learned). Curves go to
 *  DIR/train_loss.csv. */
#include "gpu_check.h"

#include "backend/cuda/cuda_backend.h"
#include "backend/workspace_rules.h"
#include "core/clock.h"
#include "core/err.h"
#include "model/hf_dir.h"
#include "model/init.h"
#include "model/safetensors.h"
#include "train/lossscale.h"
#include "train/optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void tols(precision_kind p, double *logit_tol, double *grad_tol)
{
    switch (p) {
    case PREC_FP32: *logit_tol = 1e-4, *grad_tol = 1e-3; break;
    case PREC_BF16: *logit_tol = 4e-2, *grad_tol = 1e-1; break;
    default: *logit_tol = 1e-2, *grad_tol = 3e-2; break;
    }
}

/* The loss scale training starts with at precision p (1 without scaling). */
static float train_scale(precision_kind p)
{
    loss_scaler ls;
    lossscale_init(&ls, precision_needs_loss_scaling(p));
    return lossscale_scale(&ls);
}

/* Forward + backward of one batch at loss scale `scale`; logits (2 x B*T),
 * loss and the unscaled grads (table total) to the host. */
static int run_model_scaled(backend *be, const bert_config *cfg, const float *params, const bert_batch *b,
                            float p_drop, recompute_kind recompute, float scale, float *start, float *end, float *loss,
                            float *grads)
{
    bert_model *m = NULL;
    int rc = bert_model_create(
        &m, &(bert_model_opts){.cfg = cfg, .be = be, .max_B = b->B, .T = b->T, .recompute = recompute});
    if (!rc) rc = bert_model_set_params(m, params);
    philox_stream rng = {42, 5, 0};
    if (!rc) rc = bert_forward(m, b, p_drop, p_drop, rng, loss, start, end);
    if (!rc) {
        bert_zero_grad(m);
        rc = bert_backward(m, scale);
    }
    size_t n = bert_model_table(m)->total;
    if (!rc) rc = be->i->download(be->ctx, grads, bert_model_grads(m), n * sizeof(float));
    if (!rc && scale != 1.0f)
        for (size_t i = 0; i < n; i++) grads[i] /= scale; /* a power of two: exact */
    bert_model_free(m);
    return rc;
}

/* The precision a backend computes in (the CPU backend's: fp32). */
static precision_kind backend_precision(const backend *be)
{
    return strcmp(be->i->name, "cuda") ? PREC_FP32 : cuda_backend_precision(be->ctx);
}

/* At the loss scale training uses for the backend's precision. */
static int run_model_mode(backend *be, const bert_config *cfg, const float *params, const bert_batch *b, float p_drop,
                          recompute_kind recompute, float *start, float *end, float *loss, float *grads)
{
    return run_model_scaled(be, cfg, params, b, p_drop, recompute, train_scale(backend_precision(be)), start, end,
                            loss, grads);
}

static int run_model(backend *be, const bert_config *cfg, const float *params, const bert_batch *b, float p_drop,
                     float *start, float *end, float *loss, float *grads)
{
    return run_model_mode(be, cfg, params, b, p_drop, RECOMPUTE_NONE, start, end, loss, grads);
}

/* The largest relative L2 error of the attention's query and key weight gradients. */
static double qk_grad_err(const param_table *t, const float *g, const float *wg)
{
    double worst = 0, mx;
    for (int i = 0; i < t->n; i++) {
        const char *nm = t->info[i].name;
        if (!strstr(nm, "attention.self.query.weight") && !strstr(nm, "attention.self.key.weight")) continue;
        size_t off = t->info[i].offset;
        worst = fmax(worst, gc_rel_l2(g + off, wg + off, t->info[i].numel, 1e-30, &mx));
    }
    return worst;
}

/* The denominator's floor of tensor name's relative error: 1e-3 of the
 * largest tensor norm, but for qa_outputs.bias on 16-bit activations
 * (fp16/bf16, cuda_ws_act_elem) an absolute bound. That gradient is zero
 * in exact arithmetic (each window's softmax minus its one-hot sums to 0),
 * so what the GPU returns is the rounding of what it sums: the 16-bit
 * dlogits (as torch's autocast sums its fp16 ones), each within the type's
 * unit roundoff u of its value, and a column of dlogits sums to at most 1
 * in magnitude (the loss is the mean over windows of (start + end) / 2).
 * Each of its two entries is then off by at most u: sqrt(2) u in L2,
 * which the bound gt allows when the floor is sqrt(2) u / gt. */
static double grad_floor(precision_kind prec, const char *name, double top, double gt)
{
    double u = prec == PREC_FP16 ? 0x1p-11 : prec == PREC_BF16 ? 0x1p-8 : 0;
    int act16 = u > 0 && cuda_ws_act_elem(1) == 2;
    if (act16 && !strcmp(name, "qa_outputs.bias")) return fmax(1e-3 * top, sqrt(2.0) * u / gt);
    return 1e-3 * top;
}

/* Compares logits, loss and every gradient tensor; want_* are the reference. */
static void compare_all(const char *what, precision_kind prec, const param_table *t, const float *s, const float *e,
                        float loss, const float *g, const float *ws, const float *we, float wloss, const float *wg,
                        size_t BT)
{
    double lt, gt, mx;
    tols(prec, &lt, &gt);
    const char *pn = select_precision_name(prec);
    double r = gc_rel_l2(s, ws, BT, 1e-30, &mx);
    gc_result(r <= lt, "model %s %-5s start_logits rel_l2 %.3e (bound %.0e) max_abs %.3e", what, pn, r, lt, mx);
    r = gc_rel_l2(e, we, BT, 1e-30, &mx);
    gc_result(r <= lt, "model %s %-5s end_logits   rel_l2 %.3e (bound %.0e) max_abs %.3e", what, pn, r, lt, mx);
    r = fabs((double)loss - wloss) / fabs((double)wloss);
    gc_result(r <= lt, "model %s %-5s loss %.7g vs %.7g rel %.3e (bound %.0e)", what, pn, (double)loss, (double)wloss,
              r, lt);
    double top = 0;
    for (int i = 0; i < t->n; i++) {
        double n2 = 0;
        for (size_t j = 0; j < t->info[i].numel; j++) n2 += (double)wg[t->info[i].offset + j] * wg[t->info[i].offset + j];
        top = fmax(top, sqrt(n2));
    }
    double worst = 0;
    const char *worst_name = "";
    int bad = 0;
    for (int i = 0; i < t->n; i++) {
        size_t off = t->info[i].offset;
        r = gc_rel_l2(g + off, wg + off, t->info[i].numel, grad_floor(prec, t->info[i].name, top, gt), &mx);
        if (r > worst) worst = r, worst_name = t->info[i].name;
        if (r > gt) {
            bad++;
            printf("  gradient %s: rel_l2 %.3e > %.0e (max_abs %.3e)\n", t->info[i].name, r, gt, mx);
        }
    }
    gc_result(bad == 0, "model %s %-5s gradients: %d tensors, worst rel_l2 %.3e (%s), bound %.0e, %d over", what, pn,
              t->n, worst, worst_name, gt, bad);
}

static float *ref_tensor(const st_file *f, const char *name, size_t n)
{
    const st_tensor *t = st_find(f, name);
    float *out = malloc(n * sizeof(float) + 4);
    if (!t || t->numel != n || st_read_f32(f, t, out, n)) {
        gc_result(0, "reference tensor %s missing or of the wrong size", name);
        free(out);
        return NULL;
    }
    return out;
}

static int32_t *ref_ints(const st_file *f, const char *name, size_t n)
{
    const st_tensor *t = st_find(f, name);
    int64_t *tmp = malloc(n * sizeof(int64_t) + 8);
    int32_t *out = malloc(n * sizeof(int32_t) + 4);
    if (!t || t->numel != n || st_read_i64(f, t, tmp, n)) {
        gc_result(0, "reference tensor %s missing or of the wrong size", name);
        free(tmp);
        free(out);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) out[i] = (int32_t)tmp[i];
    free(tmp);
    return out;
}

/* The model's forward and backward on a GPU backend at precision prec: 1
 * with *be live (the caller frees it), or 0 after a failure named
 * "model WHAT PRECISION" (*be freed). */
static int run_on_gpu(backend *be, precision_kind prec, const char *what, const bert_config *cfg, const float *params,
                      const bert_batch *b, float p_drop, float *start, float *end, float *loss, float *grads)
{
    if (gc_cuda(be, prec, 0)) {
        gc_result(0, "model %s %s: %s", what, select_precision_name(prec), err_msg());
        return 0;
    }
    if (run_model(be, cfg, params, b, p_drop, start, end, loss, grads)) {
        gc_result(0, "model %s %s: %s", what, select_precision_name(prec), err_msg());
        backend_free(be);
        return 0;
    }
    return 1;
}

static void model_reference(const precision_kind *precs, int np)
{
    st_file ref;
    bert_config cfg;
    param_table t;
    float *params = NULL;
    int qa = 0;
    if (st_open("tests/ref/tiny/reference.safetensors", &ref) ||
        model_load("tests/ref/tiny/model", 1, &cfg, &t, &params, &qa)) {
        gc_result(0, "model reference: %s", err_msg());
        return;
    }
    int32_t *shape = ref_ints(&ref, "shape", 2);
    if (!shape) return;
    int B = shape[0], T = shape[1];
    size_t BT = (size_t)B * T;
    int32_t *ids = ref_ints(&ref, "input_ids", BT), *types = ref_ints(&ref, "token_type_ids", BT);
    int32_t *mask = ref_ints(&ref, "attention_mask", BT), *sp = ref_ints(&ref, "start_positions", B);
    int32_t *ep = ref_ints(&ref, "end_positions", B);
    float *ws = ref_tensor(&ref, "start_logits", BT), *we = ref_tensor(&ref, "end_logits", BT);
    float *wl = ref_tensor(&ref, "loss", 1), *wg = malloc(t.total * sizeof(float));
    for (int i = 0; i < t.n; i++) {
        char name[128];
        snprintf(name, sizeof name, "grad.%s", t.info[i].name);
        float *g = ref_tensor(&ref, name, t.info[i].numel);
        if (g) memcpy(wg + t.info[i].offset, g, t.info[i].numel * sizeof(float)), free(g);
    }
    if (!ids || !types || !mask || !sp || !ep || !ws || !we || !wl) return;
    bert_batch b = {B, T, ids, types, mask, sp, ep, NULL, 0};
    float *s = malloc(BT * 4), *e = malloc(BT * 4), *g = malloc(t.total * 4), loss = 0;
    for (int i = 0; i < np; i++) {
        backend be;
        if (!run_on_gpu(&be, precs[i], "reference", &cfg, params, &b, 0.0f, s, e, &loss, g)) continue;
        compare_all("pytorch-ref tiny", precs[i], &t, s, e, loss, g, ws, we, wl[0], wg, BT);
        backend_free(&be);
    }
    free(s), free(e), free(g), free(ws), free(we), free(wl), free(wg);
    free(ids), free(types), free(mask), free(sp), free(ep), free(shape), free(params);
    param_table_free(&t);
    st_close(&ref);
}

float *gc_minilm(bert_config *cfg, param_table *t, uint64_t seed)
{
    config_named("minilm", 30522, cfg);
    param_table_init(t, cfg);
    float *params = malloc(t->total * sizeof *params);
    model_init_random(cfg, t, params, seed);
    return params;
}

static void model_cpu_vs_cuda(const precision_kind *precs, int np)
{
    bert_config cfg;
    param_table t;
    float *params = gc_minilm(&cfg, &t, 7);
    gc_batch gb;
    int rows = gc_small ? 2 : 4; /* --small: 2 rows */
    gc_batch_init(&gb, rows, 128, cfg.vocab_size, 99);
    bert_batch b = gc_bert_batch(&gb);
    size_t BT = (size_t)rows * 128;
    float *cs = malloc(BT * 4), *ce = malloc(BT * 4), *cg = malloc(t.total * 4), closs = 0;
    float *s = malloc(BT * 4), *e = malloc(BT * 4), *g = malloc(t.total * 4), loss = 0;
    backend cpu;
    double t0 = clock_now_s();
    if (backend_cpu_create(&cpu, 0) || run_model(&cpu, &cfg, params, &b, 0.1f, cs, ce, &closs, cg)) {
        gc_result(0, "model minilm on the CPU: %s", err_msg());
        return;
    }
    printf("minilm CPU forward+backward: %.2f s, loss %.6f\n", clock_now_s() - t0, (double)closs);
    backend_free(&cpu);
    for (int i = 0; i < np; i++) {
        backend be;
        if (!run_on_gpu(&be, precs[i], "minilm", &cfg, params, &b, 0.1f, s, e, &loss, g)) continue;
        compare_all("cpu-vs-cuda minilm", precs[i], &t, s, e, loss, g, cs, ce, closs, cg, BT);
        /* --recompute layer on the GPU: the same gradients as keeping every
         * activation (bit for bit when the kernels are deterministic). */
        float *rs = malloc(BT * 4), *re = malloc(BT * 4), *rg = malloc(t.total * 4), rloss = 0;
        int rc = run_model_mode(&be, &cfg, params, &b, 0.1f, RECOMPUTE_LAYER, rs, re, &rloss, rg);
        if (rc) {
            gc_result(0, "model minilm %s recompute: %s", select_precision_name(precs[i]), err_msg());
        } else {
            size_t diff = 0;
            for (size_t j = 0; j < t.total; j++) diff += memcmp(&rg[j], &g[j], 4) != 0;
            printf("minilm %s: --recompute layer vs keep: %zu of %zu gradients differ in any bit, loss %.9g vs %.9g\n",
                   select_precision_name(precs[i]), diff, t.total, (double)rloss, (double)loss);
            compare_all("recompute-vs-keep minilm", PREC_FP32, &t, rs, re, rloss, rg, s, e, loss, g, BT);
        }
        free(rs), free(re), free(rg);
        if (!rc && precs[i] == PREC_FP16) {
            /* The same at loss scale 1: fp16 underflow in the attention's backward. */
            float *us = malloc(BT * 4), *ue = malloc(BT * 4), *ug = malloc(t.total * 4), uloss = 0;
            if (!run_model_scaled(&be, &cfg, params, &b, 0.1f, RECOMPUTE_NONE, 1.0f, us, ue, &uloss, ug)) {
                double at1 = qk_grad_err(&t, ug, cg), at_train = qk_grad_err(&t, g, cg);
                gc_result(at_train < 3e-2 && at_train < 0.5 * at1,
                          "model minilm fp16: query/key weight gradients vs CPU rel_l2 %.3e at the training loss "
                          "scale %g, %.3e at scale 1 (fp16 underflow of the score gradients)",
                          at_train, (double)train_scale(PREC_FP16), at1);
            } else gc_result(0, "model minilm fp16 at loss scale 1: %s", err_msg());
            free(us), free(ue), free(ug);
        }
        backend_free(&be);
    }
    free(cs), free(ce), free(cg), free(s), free(e), free(g), free(params);
    gc_batch_free(&gb);
    param_table_free(&t);
}

int gc_model(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    precision_kind precs[4];
    int np = gc_precisions(precs);
    if (!np) {
        gc_result(0, "model: no usable CUDA device");
        return 1;
    }
    model_reference(precs, np);
    model_cpu_vs_cuda(precs, np);
    return gc_failures ? 1 : 0;
}

/* ------------------------------------------------------------------------
 * train */

enum { TR_STEPS = 200, TR_B = 32, TR_T = 64, TR_POOL = 1024, TR_V = 1000, TR_WIN = 20 };
/* The steps a run takes: TR_STEPS, or 100 with --small. */
#define TR_RUN (gc_small ? TR_STEPS / 2 : TR_STEPS)
#define TR_MARKER 7
#define TR_MARKER2 8

/* Example i of the pool: [CLS], random tokens, two marker tokens side by
 * side at a random place: the answer span is the pair (learnable from the
 * tokens themselves, so 200 steps are enough); rows padded at random. */
static void tr_example(int i, int32_t *ids, int32_t *types, int32_t *mask, int32_t *sp, int32_t *ep)
{
    uint64_t s = 0x1234567ull + (uint64_t)i * 0x9E3779B97F4A7C15ull;
    int len = TR_T - (int)(gc_uniform(&s, 0, 16));
    int at = 10 + (int)gc_uniform(&s, 0, (float)(len - 14));
    for (int t = 0; t < TR_T; t++) {
        int tok = 10 + (int)gc_uniform(&s, 0, TR_V - 11);
        ids[t] = t == 0 ? 2 : t >= len ? 0 : t == at ? TR_MARKER : t == at + 1 ? TR_MARKER2 : tok;
        types[t] = t >= 8 && t < len;
        mask[t] = t < len;
    }
    *sp = at;
    *ep = at + 1;
}

static int train_run(precision_kind prec, const bert_config *cfg, const float *init, double *losses, int64_t *skips,
                     float *final_scale)
{
    backend be;
    /* GC_TRAIN_CPU=1 runs the same loop on the CPU backend (fp32): a way
     * to see, without a GPU, that the task is learned in 200 steps. */
    int on_cpu = getenv("GC_TRAIN_CPU") != NULL;
    int rc = on_cpu ? backend_cpu_create(&be, 0) : gc_cuda(&be, prec, 0);
    if (rc) return rc;
    bert_model *m = NULL;
    optim *opt = NULL;
    int32_t ids[TR_B * TR_T], types[TR_B * TR_T], mask[TR_B * TR_T], sp[TR_B], ep[TR_B];
    loss_scaler ls;
    lossscale_init(&ls, precision_needs_loss_scaling(prec));
    int rows = gc_small ? TR_B / 4 : TR_B; /* --small: 8 rows a step */
    if ((rc = bert_model_create(&m, &(bert_model_opts){.cfg = cfg, .be = &be, .max_B = rows, .T = TR_T})) ||
        (rc = bert_model_set_params(m, init)) || (rc = optim_create(&opt, &be, bert_model_table(m))))
        goto done;
    optim_config oc = optim_config_default();
    oc.lr = 5e-4;
    oc.warmup_steps = 20;
    oc.total_steps = TR_RUN;
    for (int k = 0; k < TR_RUN; k++) {
        for (int r = 0; r < rows; r++) {
            int ex = (k * rows + r) % TR_POOL;
            tr_example(ex, ids + r * TR_T, types + r * TR_T, mask + r * TR_T, sp + r, ep + r);
        }
        bert_batch b = {rows, TR_T, ids, types, mask, sp, ep, NULL, 0};
        philox_stream rng = {42, (uint32_t)k, 0};
        float loss = NAN;
        bert_zero_grad(m);
        if ((rc = bert_forward(m, &b, 0.1f, 0.1f, rng, &loss, NULL, NULL)) ||
            (rc = bert_backward(m, lossscale_scale(&ls))))
            goto done;
        optim_result res;
        if ((rc = optim_step(opt, bert_model_params(m), bert_model_grads(m), &oc, k, lossscale_unscale(&ls), &res)))
            goto done;
        lossscale_update(&ls, res.skipped);
        losses[k] = loss;
    }
done:
    *skips = ls.skipped;
    *final_scale = ls.scale;
    optim_free(opt);
    bert_model_free(m);
    backend_free(&be);
    return rc;
}

static double window_mean(const double *x, int w)
{
    double s = 0;
    for (int i = 0; i < TR_WIN; i++) s += x[w * TR_WIN + i];
    return s / TR_WIN;
}

int gc_train(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    bert_config cfg;
    config_named(gc_small ? "tiny" : "mini", TR_V, &cfg); /* --small: L2 H128 */
    param_table t;
    param_table_init(&t, &cfg);
    float *init = malloc(t.total * sizeof(float));
    model_init_random(&cfg, &t, init, 3);
    precision_kind all[4] = {PREC_FP32}, precs[3];
    int n = getenv("GC_TRAIN_CPU") ? 1 : gc_precisions(all), np = 0;
    for (int i = 0; i < n; i++)
        if (all[i] != PREC_TF32) precs[np++] = all[i];
    static double losses[3][TR_STEPS];
    int ok[3] = {0};
    for (int i = 0; i < np; i++) {
        int64_t skips = 0;
        float scale = 1;
        double t0 = clock_now_s();
        int rc = train_run(precs[i], &cfg, init, losses[i], &skips, &scale);
        ok[i] = rc == 0;
        if (rc) gc_result(0, "train %s: %s", select_precision_name(precs[i]), err_msg());
        else
            printf("train %s: %d steps in %.1f s, first loss %.4f, last %.4f, %lld skipped steps, loss scale %g\n",
                   select_precision_name(precs[i]), TR_RUN, clock_now_s() - t0, losses[i][0], losses[i][TR_RUN - 1],
                   (long long)skips, (double)scale);
    }
    FILE *f = gc_open("train_loss.csv");
    if (f) {
        fprintf(f, "step");
        for (int i = 0; i < np; i++) fprintf(f, ",%s", select_precision_name(precs[i]));
        fprintf(f, "\n");
        for (int k = 0; k < TR_RUN; k++) {
            fprintf(f, "%d", k + 1);
            for (int i = 0; i < np; i++) fprintf(f, ",%.6f", losses[i][k]);
            fprintf(f, "\n");
        }
        fclose(f);
    }
    if (!np || !ok[0]) return 1;
    int nw = TR_RUN / TR_WIN;
    for (int i = 0; i < np; i++) {
        if (!ok[i]) continue;
        double first = window_mean(losses[i], 0), last = window_mean(losses[i], nw - 1);
        gc_result(last < 0.5 * first, "train %-5s learned: mean loss of steps 1-20 %.4f, of steps %d-%d %.4f",
                  select_precision_name(precs[i]), first, TR_RUN - TR_WIN + 1, TR_RUN, last);
        if (i == 0) continue;
        double worst = 0;
        int worst_w = 0, inband = 1;
        for (int w = 0; w < nw; w++) {
            double a = window_mean(losses[i], w), b = window_mean(losses[0], w);
            double d = fabs(a - b), band = 0.1 + 0.1 * b;
            if (d / band > worst) worst = d / band, worst_w = w;
            if (!(d <= band)) inband = 0;
        }
        gc_result(inband, "train %-5s vs fp32: every 20-step mean within 0.1 + 10%% (worst: steps %d-%d at %.2f of the band)",
                  select_precision_name(precs[i]), worst_w * TR_WIN + 1, (worst_w + 1) * TR_WIN, worst);
    }
    free(init);
    param_table_free(&t);
    return gc_failures ? 1 : 0;
}
