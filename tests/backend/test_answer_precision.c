/* Answers in bf16 and int8 on the CPU (backend_set_answer_precision):
 * a small random model (hidden 64, intermediate 128, 2 layers, 4 heads)
 * run forward on a padded batch of 4 windows in fp32, bf16 and int8 on a
 * batch-invariant backend. Checks, for each low precision:
 * - the logits are those of fp32 within a tolerance (bf16: 2 % of the
 *   largest logit; int8: 5 %), and not the same bits (the path ran);
 * - batch invariance: window 0's logits alone and in the batch of 4 are
 *   the same bits; and with 1 thread and 2;
 * - new parameters (bert_model_set_params) are used on the next forward:
 *   the logits equal those of a fresh backend and model holding them (bits),
 *   so no prepared weight outlives what it was made from;
 * - back to fp32 gives fp32's bits again.
 * Where this CPU (or BERTC_CPU_ISA, which ctest sets to avx2 in this test's
 * avx2 variant) cannot run the fast kernel, setting the precision is
 * ERR_INPUT naming what is missing, and that is what is checked. */
#include "backend/backend.h"
#include "backend/cpu/cpu_isa.h"
#include "core/err.h"
#include "model/bert.h"
#include "model/params.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { B = 4, T = 24, L = 2 };

typedef struct {
    bert_config cfg;
    param_table table;
    float *params;
    int32_t ids[B * T], types[B * T], mask[B * T];
} fixture;

/* Start and end logits of windows [0, nb) of the fixture's batch, in
 * precision p on a new backend of nthreads with params. rc on failure. */
static int logits(const fixture *fx, const float *params, precision_kind p, int nthreads, int nb, float *out)
{
    backend be;
    int rc = backend_cpu_create(&be, nthreads);
    if (rc) return rc;
    backend_set_batch_invariant(&be, 1);
    bert_model *m = NULL;
    rc = backend_set_answer_precision(&be, p, NULL, 0);
    if (!rc)
        rc = bert_model_create(&m, &(bert_model_opts){.cfg = &fx->cfg, .be = &be, .max_B = B, .T = T,
                                                     .recompute = RECOMPUTE_LAYER, .forward_only = 1});
    if (!rc) rc = bert_model_set_params(m, params);
    bert_batch b = {.B = nb, .T = T, .input_ids = fx->ids, .token_type_ids = fx->types, .attention_mask = fx->mask};
    philox_stream rng = {0};
    if (!rc) rc = bert_forward(m, &b, 0, 0, rng, NULL, out, out + nb * T);
    if (m) bert_model_free(m);
    backend_free(&be);
    return rc;
}

static double max_abs(const float *x, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(x[i]) && fabs(x[i]) > m) m = fabs(x[i]);
    return m;
}

static void check_precision(const fixture *fx, precision_kind p, const float *fp32, double tol)
{
    const char *name = p == PREC_INT8 ? "int8" : "bf16";
    size_t n = 2 * B * T;
    float *a = malloc(n * sizeof *a), *one = malloc(2 * T * sizeof *one), *t1 = malloc(n * sizeof *t1);
    int rc = logits(fx, fx->params, p, 2, B, a);
    CHECK(rc == 0, "%s: %s", name, err_msg());
    if (rc) goto out;
    /* only the real positions: padding logits are whatever the model gives there */
    double scale = max_abs(fp32, n), worst = 0;
    int differ = 0;
    for (int side = 0; side < 2; side++)
        for (int i = 0; i < B * T; i++) {
            if (!fx->mask[i]) continue;
            double d = fabs((double)a[side * B * T + i] - fp32[side * B * T + i]);
            worst = d > worst ? d : worst;
            differ |= a[side * B * T + i] != fp32[side * B * T + i];
        }
    printf("%s: max |logit - fp32| %.4g, %.2f%% of the largest logit %.4g (tolerance %.0f%%)\n", name, worst,
           100 * worst / scale, scale, 100 * tol);
    CHECK(worst <= tol * scale, "%s: %.4g > %.4g", name, worst, tol * scale);
    CHECK(differ, "%s: the same bits as fp32: the low-precision path did not run", name);

    rc = logits(fx, fx->params, p, 2, 1, one);
    CHECK(rc == 0, "%s alone: %s", name, err_msg());
    int same = !rc && !memcmp(one, a, T * sizeof *one) && !memcmp(one + T, a + B * T, T * sizeof *one);
    printf("%s: window 0 alone and among %d: %s\n", name, B, same ? "the same bits" : "DIFFERENT");
    CHECK(same, "%s: window 0's logits depend on its batch", name);
    rc = logits(fx, fx->params, p, 1, B, t1);
    same = !rc && !memcmp(t1, a, n * sizeof *a);
    printf("%s: 1 thread and 2: %s\n", name, same ? "the same bits" : "DIFFERENT");
    CHECK(same, "%s: logits depend on the thread count", name);
out:
    free(a);
    free(one);
    free(t1);
}

/* One backend and model: fp32, then p, then new parameters in p, then fp32
 * again; each compared with a fresh backend's. */
static void check_switches(const fixture *fx, precision_kind p, const float *fp32)
{
    const char *name = p == PREC_INT8 ? "int8" : "bf16";
    size_t n = 2 * B * T, np = fx->table.total;
    float *params2 = malloc(np * sizeof *params2), *got = malloc(n * sizeof *got), *want = malloc(n * sizeof *want);
    for (size_t i = 0; i < np; i++) params2[i] = fx->params[i] * (i % 3 == 0 ? -0.5f : 1.25f);
    backend be;
    bert_model *m = NULL;
    int rc = backend_cpu_create(&be, 2);
    CHECK(rc == 0, "backend: %s", err_msg());
    if (rc) {
        free(params2);
        free(got);
        free(want);
        return;
    }
    backend_set_batch_invariant(&be, 1);
    rc = bert_model_create(&m, &(bert_model_opts){.cfg = &fx->cfg, .be = &be, .max_B = B, .T = T,
                                                   .recompute = RECOMPUTE_LAYER, .forward_only = 1});
    if (!rc) rc = bert_model_set_params(m, fx->params);
    bert_batch b = {.B = B, .T = T, .input_ids = fx->ids, .token_type_ids = fx->types, .attention_mask = fx->mask};
    philox_stream rng = {0};
    if (!rc) rc = backend_set_answer_precision(&be, p, NULL, 0);
    if (!rc) rc = bert_forward(m, &b, 0, 0, rng, NULL, got, got + B * T);
    if (!rc) rc = bert_model_set_params(m, params2);
    if (!rc) rc = bert_forward(m, &b, 0, 0, rng, NULL, got, got + B * T);
    CHECK(rc == 0, "%s: %s", name, err_msg());
    if (!rc) rc = logits(fx, params2, p, 2, B, want);
    int same = !rc && !memcmp(got, want, n * sizeof *got);
    printf("%s: after new parameters, the logits of a fresh model holding them: %s\n", name,
           same ? "the same bits" : "DIFFERENT");
    CHECK(same, "%s: stale prepared weights after bert_model_set_params", name);
    if (!rc) rc = bert_model_set_params(m, fx->params);
    if (!rc) rc = backend_set_answer_precision(&be, PREC_FP32, NULL, 0);
    if (!rc) rc = bert_forward(m, &b, 0, 0, rng, NULL, got, got + B * T);
    same = !rc && !memcmp(got, fp32, n * sizeof *got);
    printf("%s: back to fp32: %s\n", name, same ? "fp32's bits" : "DIFFERENT");
    CHECK(same, "%s: fp32 after %s differs from fp32", name, name);
    if (m) bert_model_free(m);
    backend_free(&be);
    free(params2);
    free(got);
    free(want);
}

int main(void)
{
    fixture fx;
    fx.cfg = tu_small_config(50, L, 4);
    fx.cfg.hidden_size = 64;
    fx.cfg.intermediate_size = 128;
    param_table_init(&fx.table, &fx.cfg);
    fx.params = tu_model_params(&fx.cfg, &fx.table, 7, 5);
    const int lens[B] = {24, 17, 9, 20};
    tu_make_batch(&(tu_batch_spec){.B = B, .T = T, .lens = lens, .vocab = 50, .row_mul = 7, .tok_mul = 3, .offset = 1,
                                   .seg_start = 6},
                  fx.ids, fx.types, fx.mask);
    size_t n = 2 * B * T;
    float *fp32 = malloc(n * sizeof *fp32);
    int rc = logits(&fx, fx.params, PREC_FP32, 2, B, fp32);
    CHECK(rc == 0, "fp32: %s", err_msg());
    const struct {
        precision_kind p;
        cpu_kernel_family f;
        double tol;
    } low[] = {{PREC_BF16, CPU_K_GEMM_BF16, 0.02}, {PREC_INT8, CPU_K_GEMM_INT8, 0.05}};
    for (int i = 0; i < 2 && !rc; i++) {
        char why[256];
        if (!cpu_kernel_fast(low[i].f, why, sizeof why)) {
            backend be;
            backend_cpu_create(&be, 1);
            int r = backend_set_answer_precision(&be, low[i].p, NULL, 0);
            printf("%s: refused (%s)\n", low[i].p == PREC_INT8 ? "int8" : "bf16", err_msg());
            CHECK(r == ERR_INPUT && strstr(err_msg(), why), "refusal: rc %d, '%s' does not hold '%s'", r, err_msg(),
                  why);
            err_clear();
            backend_free(&be);
            continue;
        }
        check_precision(&fx, low[i].p, fp32, low[i].tol);
        check_switches(&fx, low[i].p, fp32);
    }
    free(fp32);
    free(fx.params);
    param_table_free(&fx.table);
    return tu_done();
}
