/* gpu_check varlen: packed (unpadded) micro-batches on the GPU. A packed
 * batch of windows of mixed lengths (including one of 1 token and one as
 * long as T) through a minilm-shaped model with dropout on, forward and
 * backward, on the CUDA backend in fp32 against the CPU backend: loss,
 * logits, every gradient (relative L2, bound 1e-4: the varlen attention
 * kernel sums in its own order); then the same model on the GPU padded
 * with a masked loss against packed on the GPU (bound 1e-4: the padded
 * path's attention goes through cuBLASLt). */
#include "gpu_check.h"

#include "core/err.h"
#include "model/bert.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { VB = 6, VT = 128 };

static const int vlens[VB] = {128, 1, 77, 33, 128, 5};

typedef struct {
    float loss, *start, *end, *grads;
} vl_out;

static int vl_run(backend *be, const bert_config *cfg, const float *p0, int packed, vl_out *o)
{
    static int32_t ids[VB * VT], types[VB * VT], mask[VB * VT], kids[VB * VT], ktypes[VB * VT], cu[VB + 1];
    static const int32_t sp[VB] = {5, 0, 40, 2, 127, 4}, ep[VB] = {9, 0, 41, 30, 127, 4};
    int N = 0;
    cu[0] = 0;
    for (int b = 0; b < VB; b++) {
        for (int t = 0; t < VT; t++) {
            int real = t < vlens[b];
            ids[b * VT + t] = real ? 1 + (b * 131 + t * 17) % (cfg->vocab_size - 1) : 0;
            types[b * VT + t] = real && t > vlens[b] / 3;
            mask[b * VT + t] = real;
            if (real) {
                kids[N] = ids[b * VT + t];
                ktypes[N] = types[b * VT + t];
                N++;
            }
        }
        cu[b + 1] = N;
    }
    bert_model *m = NULL;
    int rc = bert_model_create(&m, &(bert_model_opts){.cfg = cfg, .be = be, .max_B = VB, .T = VT});
    if (!rc) rc = bert_model_set_params(m, p0);
    if (rc) return rc;
    bert_batch b = {VB, VT, packed ? kids : ids, packed ? ktypes : types, packed ? NULL : mask, sp, ep,
                    packed ? cu : NULL, !packed};
    philox_stream rng = {11, 2, 0};
    size_t nl = packed ? (size_t)N : (size_t)VB * VT;
    o->start = malloc(nl * sizeof(float));
    o->end = malloc(nl * sizeof(float));
    const param_table *t = bert_model_table(m);
    o->grads = malloc(t->total * sizeof(float));
    bert_zero_grad(m);
    rc = bert_forward(m, &b, 0.1f, 0.1f, rng, &o->loss, o->start, o->end);
    if (!rc) rc = bert_backward(m, 1.0f);
    if (!rc) rc = be->i->download(be->ctx, o->grads, bert_model_grads(m), t->total * sizeof(float));
    /* padded logits -> packed order, so that both compare as [N] */
    if (!rc && !packed) {
        int r = 0;
        for (int w = 0; w < VB; w++)
            for (int t2 = 0; t2 < vlens[w]; t2++, r++) {
                o->start[r] = o->start[w * VT + t2];
                o->end[r] = o->end[w * VT + t2];
            }
    }
    bert_model_free(m);
    return rc;
}

static void vl_free(vl_out *o)
{
    free(o->start);
    free(o->end);
    free(o->grads);
}

static void vl_compare(const char *what, const vl_out *a, const vl_out *b, size_t nlog, size_t ngrad)
{
    double mx;
    double rl = fabs((double)a->loss - b->loss) / fabs((double)b->loss);
    gc_result(rl <= 1e-5, "varlen %-34s loss %.7g vs %.7g rel %.2e (bound 1e-5)", what, (double)a->loss,
              (double)b->loss, rl);
    double rs = gc_rel_l2(a->start, b->start, nlog, 1e-30, &mx), re = gc_rel_l2(a->end, b->end, nlog, 1e-30, &mx);
    gc_result(rs <= 1e-5 && re <= 1e-5, "varlen %-34s logits rel_l2 start %.2e end %.2e (bound 1e-5)", what, rs, re);
    double rg = gc_rel_l2(a->grads, b->grads, ngrad, 1e-30, &mx);
    gc_result(rg <= 1e-4, "varlen %-34s gradients rel_l2 %.2e max_abs %.2e (bound 1e-4)", what, rg, mx);
}

int gc_varlen(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    backend cpu, gpu;
    if (backend_cpu_create(&cpu, 0)) {
        gc_result(0, "varlen: CPU backend: %s", err_msg());
        return 1;
    }
    if (gc_cuda(&gpu, PREC_FP32, 0)) {
        gc_result(0, "varlen: CUDA backend: %s", err_msg());
        backend_free(&cpu);
        return 1;
    }
    bert_config cfg;
    param_table t;
    float *p0 = gc_minilm(&cfg, &t, 3);
    int N = 0;
    for (int b = 0; b < VB; b++) N += vlens[b];
    vl_out c = {0}, g = {0}, gp = {0};
    int rc = vl_run(&cpu, &cfg, p0, 1, &c);
    if (!rc) rc = vl_run(&gpu, &cfg, p0, 1, &g);
    if (!rc) rc = vl_run(&gpu, &cfg, p0, 0, &gp);
    if (rc) gc_result(0, "varlen: %s", err_msg());
    else {
        vl_compare("packed: CUDA vs CPU (fp32)", &g, &c, (size_t)N, t.total);
        vl_compare("CUDA: packed vs padded masked", &g, &gp, (size_t)N, t.total);
    }
    vl_free(&c);
    vl_free(&g);
    vl_free(&gp);
    free(p0);
    param_table_free(&t);
    backend_free(&gpu);
    backend_free(&cpu);
    return gc_failures ? 1 : 0;
}
