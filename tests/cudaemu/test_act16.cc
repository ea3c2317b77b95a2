/* cudaemu_act16: the CUDA backend's ops on 16-bit activations (ctx->atype
 * GEMM_F16 and GEMM_BF16, set here by hand as the backend will once every
 * op handles it), each against the CPU backend's fp32 op on the same
 * values: the 16-bit inputs as fp32, the weights rounded to the GEMM type
 * (the backend converts them; the bias too, which the GEMM's epilogue
 * adds in the output's type). Ops: embedding, layernorm, matmul (plain,
 * with and without bias, and matmul_forward_n's batched Q/K/V), gelu,
 * dropout, add, qa_loss; forward and backward; padded windows and packed
 * ones (cu_seqlens, windows of every length 1..T); dropout 0 and 0.1. fp16
 * and bf16 on an emulated H100, fp16 on a T4 (CUDAEMU_DEVICE; the T4 has no
 * bf16).
 *
 * Bands. A 16-bit output is the device's fp32 value rounded once, so it
 * must lie within half an ulp of its type (at |ref|) of the CPU's fp32
 * value, plus what the two fp32 computations may differ by: nothing where
 * they do the same operations in the same order (embedding, dropout, add:
 * there the output must be the CPU's value rounded, bit for bit); 1e-6 of
 * the largest |ref| for GELU (the CPU's own erff and expf are a few fp32
 * ulps from libm's); else the order of fp32 sums (LayerNorm's row sums,
 * the GEMMs' k sums, the bias added after the product), 1e-5 of the
 * largest |ref| at these sizes (k <= 256: k 2^-24 is 1.5e-5 of sum |a b|
 * in the worst case, ~1e-6 in practice). fp32 outputs (parameter
 * gradients, mean, rstd, the loss): 1e-5 of the largest |ref|. Accumulated
 * 16-bit outputs (dinp +=) start from 16-bit values and are rounded once
 * after the add: the same band. A rounding that truncates or goes the
 * wrong way is up to a whole ulp off, twice the band. Each line prints
 * the max abs and rel error and the largest error as a fraction of its
 * band. */
#include "act_test.h"
#include "backend/cuda/cuda_backend.h"

#include <algorithm>

static const double FP32_SUMS = 1e-5;
/* GELU: the CPU backend's erff and expf are its own (cpu_erff), a few
 * fp32 ulps from libm's, which the device's kernels call */
static const double FP32_ERF = 1e-6;

/* dev against the CPU's fp32 ref. exact: dev must be ref rounded to t,
 * bit for bit; else |dev - ref| <= half an ulp of t at |ref| (16-bit
 * outputs) + sums * max |ref|. */
static void expect(const char *what, gemm_type t, const std::vector<float> &dev, const std::vector<float> &ref,
                   int exact, double sums)
{
    double mx = 0, err = 0, rel = 0, frac = 0;
    size_t bad = 0;
    for (float r : ref) mx = fmax(mx, fabs(r));
    for (size_t i = 0; i < ref.size(); i++) {
        float want = round_to(t, ref[i]);
        if (!isfinite(ref[i]) || !isfinite(dev[i])) {
            bad += memcmp(&dev[i], &want, 4) != 0;
            continue;
        }
        double d = fabs((double)dev[i] - (double)ref[i]);
        double band = (t == GEMM_F32 ? 0.0 : 0.5 * ulp_of(t, fabs(ref[i]))) + sums * mx;
        err = fmax(err, d);
        if (fabs(ref[i]) > 1e-3 * mx) rel = fmax(rel, d / fabs(ref[i]));
        frac = fmax(frac, band > 0 ? d / band : (d > 0 ? INFINITY : 0));
        if (exact ? memcmp(&dev[i], &want, 4) != 0 : d > band) bad++;
    }
    if (exact)
        check(bad == 0, "%-52s %s: max |err| %.3g, max rel %.3g (max |ref| %.3g): %s, %zu of %zu differ", what,
              type_name(t), err, rel, mx, t == GEMM_F32 ? "bit for bit" : "the CPU's value rounded, bit for bit", bad,
              ref.size());
    else
        check(bad == 0, "%-52s %s: max |err| %.3g, max rel %.3g (max |ref| %.3g), %.2f of the band (%s%.0e max|ref|), "
              "%zu outside", what, type_name(t), err, rel, mx, frac, t == GEMM_F32 ? "" : "ulp/2 + ", sums, bad);
}

/* Parameters: fp32 on both sides, their values those of type t (the GEMM
 * input type the backend converts them to). */
static tensor param_make(gemm_type t, size_t n, float lo, float hi)
{
    tensor x = tensor_make(GEMM_F32, n, lo, hi);
    for (float &v : x.h) v = round_to(t, v);
    tensor_put(x);
    return x;
}

static gemm_type g_t;

/* packed: B = T windows of the lengths 1..T in a shuffled order; padded
 * B x T. */
static windows act_windows(int packed)
{
    const int T = 12;
    int lens[T];
    for (int b = 0; b < T; b++) lens[b] = b + 1;
    for (int b = T - 1; b > 0; b--) std::swap(lens[b], lens[(int)uniform(0, b + 0.99f)]);
    return windows_of(packed, T, T, lens, packed ? "packed 1..12" : "padded 12x12");
}

static void tag_of(char *buf, size_t n, const char *op, const windows &w, const char *more)
{
    snprintf(buf, n, "%s %s%s", op, w.name, more);
}

/* ------------------------------------------------------------------------ */

static void test_embedding(const windows &win, int C)
{
    gemm_type t = g_t;
    int N = win.cpu.N, T = win.cpu.T, packed = win.cu_cpu != NULL;
    const int V = 40, P = T, TV = 2;
    size_t NC = (size_t)N * C;
    char what[160];
    std::vector<int32_t> all(3 * (size_t)N);
    for (int n = 0; n < N; n++) {
        all[n] = n % 3 == 0 ? 1 : (int32_t)uniform(0, V - 0.01f); /* repeated ids: the sorted sums */
        all[N + n] = uniform(0, 1) < 0.5f ? 0 : 1;
    }
    if (packed)
        for (int b = 0; b < win.cpu.B; b++)
            for (int r = win.cu[b]; r < win.cu[b + 1]; r++) all[2 * N + r] = r - win.cu[b];
    int32_t *ic = (int32_t *)g_cpu.i->alloc(g_cpu.ctx, all.size() * 4);
    int32_t *ig = (int32_t *)g_gpu.i->alloc(g_gpu.ctx, all.size() * 4);
    g_cpu.i->upload(g_cpu.ctx, ic, all.data(), all.size() * 4);
    g_gpu.i->upload(g_gpu.ctx, ig, all.data(), all.size() * 4);
    const int32_t *pc = packed ? ic + 2 * N : NULL, *pg = packed ? ig + 2 * N : NULL;
    tensor wte = tensor_make(GEMM_F32, (size_t)V * C, -1, 1), wpe = tensor_make(GEMM_F32, (size_t)P * C, -1, 1);
    tensor wtt = tensor_make(GEMM_F32, (size_t)TV * C, -1, 1), out = tensor_make(t, NC, 0, 0);
    g_gpu.i->embedding_forward(g_ctx, out.gpu, ig, ig + N, pg, (float *)wte.gpu, (float *)wpe.gpu, (float *)wtt.gpu,
                               N, T, C);
    g_cpu.i->embedding_forward(g_cpu.ctx, out.cpu, ic, ic + N, pc, wte.cpu, wpe.cpu, wtt.cpu, N, T, C);
    tag_of(what, sizeof what, "embedding_forward", win, " out");
    if (synced(what)) expect(what, t, gpu_get(t, out.gpu, NC), cpu_get(out.cpu, NC), 1, 0);

    tensor dout = tensor_make(t, NC, -1, 1);
    tensor *grads[3] = {&wte, &wpe, &wtt};
    const char *names[3] = {" dwte (+=)", " dwpe (+=)", " dwtt (+=)"};
    g_gpu.i->embedding_backward(g_ctx, (float *)wte.gpu, (float *)wpe.gpu, (float *)wtt.gpu, dout.gpu, ig, ig + N, pg,
                                N, T, C);
    g_cpu.i->embedding_backward(g_cpu.ctx, wte.cpu, wpe.cpu, wtt.cpu, dout.cpu, ic, ic + N, pc, N, T, C);
    tag_of(what, sizeof what, "embedding_backward", win, "");
    if (synced(what))
        for (int i = 0; i < 3; i++) {
            tag_of(what, sizeof what, "embedding_backward", win, names[i]);
            expect(what, GEMM_F32, gpu_get(GEMM_F32, grads[i]->gpu, grads[i]->n), cpu_get(grads[i]->cpu, grads[i]->n),
                   0, FP32_SUMS);
        }
    for (tensor *x : {&wte, &wpe, &wtt, &out, &dout}) tensor_free(*x);
    g_cpu.i->release(g_cpu.ctx, ic);
    g_gpu.i->release(g_gpu.ctx, ig);
}

static void test_layernorm(const windows &win, int C)
{
    gemm_type t = g_t;
    int N = win.cpu.N;
    size_t NC = (size_t)N * C;
    char what[160];
    tensor inp = tensor_make(t, NC, -2, 3), out = tensor_make(t, NC, 0, 0);
    tensor w = tensor_make(GEMM_F32, C, 0.5f, 1.5f), b = tensor_make(GEMM_F32, C, -0.5f, 0.5f);
    tensor mean = tensor_make(GEMM_F32, N, 0, 0), rstd = tensor_make(GEMM_F32, N, 0, 0);
    g_gpu.i->layernorm_forward(g_ctx, out.gpu, (float *)mean.gpu, (float *)rstd.gpu, inp.gpu, (float *)w.gpu,
                               (float *)b.gpu, N, C, 1e-12f);
    g_cpu.i->layernorm_forward(g_cpu.ctx, out.cpu, mean.cpu, rstd.cpu, inp.cpu, w.cpu, b.cpu, N, C, 1e-12f);
    tag_of(what, sizeof what, "layernorm_forward", win, "");
    if (!synced(what)) return;
    tag_of(what, sizeof what, "layernorm_forward", win, " out");
    expect(what, t, gpu_get(t, out.gpu, NC), cpu_get(out.cpu, NC), 0, FP32_SUMS);
    tag_of(what, sizeof what, "layernorm_forward", win, " mean, rstd");
    std::vector<float> ms = gpu_get(GEMM_F32, mean.gpu, N), rs = gpu_get(GEMM_F32, rstd.gpu, N);
    std::vector<float> mc = cpu_get(mean.cpu, N), rc = cpu_get(rstd.cpu, N);
    ms.insert(ms.end(), rs.begin(), rs.end());
    mc.insert(mc.end(), rc.begin(), rc.end());
    expect(what, GEMM_F32, ms, mc, 0, FP32_SUMS);

    tensor dout = tensor_make(t, NC, -1, 1), dinp = tensor_make(t, NC, -1, 1);
    tensor dw = tensor_make(GEMM_F32, C, -1, 1), db = tensor_make(GEMM_F32, C, -1, 1);
    g_gpu.i->layernorm_backward(g_ctx, dinp.gpu, (float *)dw.gpu, (float *)db.gpu, dout.gpu, inp.gpu, (float *)w.gpu,
                                (float *)mean.gpu, (float *)rstd.gpu, N, C);
    g_cpu.i->layernorm_backward(g_cpu.ctx, dinp.cpu, dw.cpu, db.cpu, dout.cpu, inp.cpu, w.cpu, mean.cpu, rstd.cpu, N,
                                C);
    tag_of(what, sizeof what, "layernorm_backward", win, "");
    if (synced(what)) {
        tag_of(what, sizeof what, "layernorm_backward", win, " dinp (+=)");
        expect(what, t, gpu_get(t, dinp.gpu, NC), cpu_get(dinp.cpu, NC), 0, FP32_SUMS);
        tag_of(what, sizeof what, "layernorm_backward", win, " dw (+=)");
        expect(what, GEMM_F32, gpu_get(GEMM_F32, dw.gpu, C), cpu_get(dw.cpu, C), 0, FP32_SUMS);
        tag_of(what, sizeof what, "layernorm_backward", win, " db (+=)");
        expect(what, GEMM_F32, gpu_get(GEMM_F32, db.gpu, C), cpu_get(db.cpu, C), 0, FP32_SUMS);
    }
    for (tensor *x : {&inp, &out, &w, &b, &mean, &rstd, &dout, &dinp, &dw, &db}) tensor_free(*x);
}

/* out = inp w^T + b, then dinp += dout w, dw += dout^T inp, db += colsum
 * dout: qa_outputs' shape (OC 2) and the FFN's (OC 4C, then back). */
static void test_matmul(const windows &win, int C, int OC, int bias)
{
    gemm_type t = g_t;
    int N = win.cpu.N;
    char what[160], more[64];
    snprintf(more, sizeof more, " C=%d OC=%d%s", C, OC, bias ? "" : " no bias");
    tensor inp = tensor_make(t, (size_t)N * C, -1, 1), out = tensor_make(t, (size_t)N * OC, 0, 0);
    tensor w = param_make(t, (size_t)OC * C, -0.3f, 0.3f), b = param_make(t, OC, -1, 1);
    float *bg = bias ? (float *)b.gpu : NULL, *bc = bias ? b.cpu : NULL;
    g_gpu.i->matmul_forward(g_ctx, out.gpu, inp.gpu, (float *)w.gpu, bg, N, C, OC);
    g_cpu.i->matmul_forward(g_cpu.ctx, out.cpu, inp.cpu, w.cpu, bc, N, C, OC);
    tag_of(what, sizeof what, "matmul_forward", win, more);
    if (synced(what)) expect(what, t, gpu_get(t, out.gpu, out.n), cpu_get(out.cpu, out.n), 0, FP32_SUMS);

    tensor dout = tensor_make(t, (size_t)N * OC, -1, 1), dinp = tensor_make(t, (size_t)N * C, -1, 1);
    tensor dw = tensor_make(GEMM_F32, (size_t)OC * C, -1, 1), db = tensor_make(GEMM_F32, OC, -1, 1);
    float *dbg = bias ? (float *)db.gpu : NULL, *dbc = bias ? db.cpu : NULL;
    g_gpu.i->matmul_backward(g_ctx, dinp.gpu, (float *)dw.gpu, dbg, dout.gpu, inp.gpu, (float *)w.gpu, N, C, OC);
    g_cpu.i->matmul_backward(g_cpu.ctx, dinp.cpu, dw.cpu, dbc, dout.cpu, inp.cpu, w.cpu, N, C, OC);
    tag_of(what, sizeof what, "matmul_backward", win, more);
    if (synced(what)) {
        snprintf(more, sizeof more, " C=%d OC=%d dinp (+=)", C, OC);
        tag_of(what, sizeof what, "matmul_backward", win, more);
        expect(what, t, gpu_get(t, dinp.gpu, dinp.n), cpu_get(dinp.cpu, dinp.n), 0, FP32_SUMS);
        snprintf(more, sizeof more, " C=%d OC=%d dw (+=)", C, OC);
        tag_of(what, sizeof what, "matmul_backward", win, more);
        expect(what, GEMM_F32, gpu_get(GEMM_F32, dw.gpu, dw.n), cpu_get(dw.cpu, dw.n), 0, FP32_SUMS);
        snprintf(more, sizeof more, " C=%d OC=%d db (+=, BGRADB)", C, OC);
        tag_of(what, sizeof what, "matmul_backward", win, more);
        if (bias) expect(what, GEMM_F32, gpu_get(GEMM_F32, db.gpu, OC), cpu_get(db.cpu, OC), 0, FP32_SUMS);
    }
    for (tensor *x : {&inp, &out, &w, &b, &dout, &dinp, &dw, &db}) tensor_free(*x);
}

/* Q, K, V: weights and biases laid out as params.c does (q_w, q_b, k_w,
 * ...: C*C + C floats apart), outputs equally spaced: one batched GEMM. */
static void test_matmul_n(const windows &win, int C)
{
    gemm_type t = g_t;
    int N = win.cpu.N;
    size_t NC = (size_t)N * C, stride = (size_t)C * C + C;
    char what[160];
    tensor wb = param_make(t, 3 * stride, -0.3f, 0.3f), out = tensor_make(t, 3 * NC, 0, 0);
    tensor inp = tensor_make(t, NC, -1, 1);
    const float *wg[3], *bgp[3];
    void *og[3];
    for (int i = 0; i < 3; i++) {
        wg[i] = (float *)wb.gpu + i * stride;
        bgp[i] = wg[i] + (size_t)C * C;
        og[i] = (char *)out.gpu + i * NC * type_size(t);
        g_cpu.i->matmul_forward(g_cpu.ctx, out.cpu + i * NC, inp.cpu, wb.cpu + i * stride, wb.cpu + i * stride + C * C,
                                N, C, C);
    }
    g_gpu.i->matmul_forward_n(g_ctx, 3, og, inp.gpu, wg, bgp, N, C, C);
    tag_of(what, sizeof what, "matmul_forward_n", win, " q, k, v (one batched GEMM)");
    if (synced(what)) expect(what, t, gpu_get(t, out.gpu, out.n), cpu_get(out.cpu, out.n), 0, FP32_SUMS);
    for (tensor *x : {&wb, &out, &inp}) tensor_free(*x);
}

static void test_gelu(size_t n)
{
    gemm_type t = g_t;
    char what[160];
    tensor inp = tensor_make(t, n, -4, 4), out = tensor_make(t, n, 0, 0);
    tensor dout = tensor_make(t, n, -1, 1), dinp = tensor_make(t, n, -1, 1);
    g_gpu.i->gelu_forward(g_ctx, out.gpu, inp.gpu, n);
    g_cpu.i->gelu_forward(g_cpu.ctx, out.cpu, inp.cpu, n);
    g_gpu.i->gelu_backward(g_ctx, dinp.gpu, inp.gpu, dout.gpu, n);
    g_cpu.i->gelu_backward(g_cpu.ctx, dinp.cpu, inp.cpu, dout.cpu, n);
    snprintf(what, sizeof what, "gelu n=%zu", n);
    if (synced(what)) {
        snprintf(what, sizeof what, "gelu_forward n=%zu out", n);
        expect(what, t, gpu_get(t, out.gpu, n), cpu_get(out.cpu, n), 0, FP32_ERF);
        snprintf(what, sizeof what, "gelu_backward n=%zu dinp (+=)", n);
        expect(what, t, gpu_get(t, dinp.gpu, n), cpu_get(dinp.cpu, n), 0, FP32_ERF);
    }
    for (tensor *x : {&inp, &out, &dout, &dinp}) tensor_free(*x);
}

/* Syncs, then x against the CPU's value rounded, bit for bit; 0 when the
 * device reported an error. */
static int synced_exact(const char *op, const windows &win, float p, const char *name, const tensor &x)
{
    char what[160], more[48];
    snprintf(more, sizeof more, " p=%.1f %s", p, name);
    tag_of(what, sizeof what, op, win, more);
    if (!synced(what)) return 0;
    expect(what, x.t, gpu_get(x.t, x.gpu, x.n), cpu_get(x.cpu, x.n), 1, 0);
    return 1;
}

/* dropout forward (into a new buffer and in place), backward (+=), add */
static void test_dropout_add(const windows &win, int C, float p)
{
    gemm_type t = g_t;
    size_t NC = (size_t)win.cpu.N * C;
    char what[160], more[48];
    tensor inp = tensor_make(t, NC, -2, 2), out = tensor_make(t, NC, 0, 0), dinp = tensor_make(t, NC, -1, 1);
    g_gpu.i->dropout_forward(g_ctx, out.gpu, inp.gpu, &win.gpu, C, p, g_rng);
    g_cpu.i->dropout_forward(g_cpu.ctx, out.cpu, inp.cpu, &win.cpu, C, p, g_rng);
    if (!synced_exact("dropout_forward", win, p, "out", out)) return;
    /* backward from the output as the device holds it */
    cpu_round(t, out.cpu, NC);
    g_gpu.i->dropout_backward(g_ctx, dinp.gpu, out.gpu, &win.gpu, C, p, g_rng);
    g_cpu.i->dropout_backward(g_cpu.ctx, dinp.cpu, out.cpu, &win.cpu, C, p, g_rng);
    if (!synced_exact("dropout_backward", win, p, "dinp (+=)", dinp)) return;
    cpu_round(t, dinp.cpu, NC);
    /* in place, then add */
    g_gpu.i->dropout_forward(g_ctx, inp.gpu, inp.gpu, &win.gpu, C, p, g_rng);
    g_gpu.i->add(g_ctx, dinp.gpu, dinp.gpu, inp.gpu, NC);
    g_cpu.i->add(g_cpu.ctx, dinp.cpu, dinp.cpu, out.cpu, NC);
    snprintf(more, sizeof more, " p=%.1f in place, add", p);
    tag_of(what, sizeof what, "dropout_forward", win, more);
    if (synced(what)) {
        check(gpu_get(t, inp.gpu, NC) == gpu_get(t, out.gpu, NC), "%-52s %s: the same bits as out of place", what,
              type_name(t));
        tag_of(what, sizeof what, "add", win, " dinp + out");
        expect(what, t, gpu_get(t, dinp.gpu, NC), cpu_get(dinp.cpu, NC), 1, 0);
    }
    for (tensor *x : {&inp, &out, &dinp}) tensor_free(*x);
}

/* Labels: in the window, one past its tokens (ignored: T) and below 0
 * (clamped to 0). */
static void test_qa_loss(const windows &win)
{
    gemm_type t = g_t;
    int N = win.cpu.N, B = win.cpu.B, T = win.cpu.T;
    char what[160];
    std::vector<int32_t> lab(2 * (size_t)B);
    for (int b = 0; b < B; b++) {
        int len = win.cu_cpu ? win.cu[b + 1] - win.cu[b] : T;
        lab[b] = b == 2 ? T : (int32_t)uniform(0, len - 0.01f);
        lab[B + b] = b == 3 ? -1 : (int32_t)uniform(0, len - 0.01f);
    }
    int32_t *lc = (int32_t *)g_cpu.i->alloc(g_cpu.ctx, lab.size() * 4);
    int32_t *lg = (int32_t *)g_gpu.i->alloc(g_gpu.ctx, lab.size() * 4);
    g_cpu.i->upload(g_cpu.ctx, lc, lab.data(), lab.size() * 4);
    g_gpu.i->upload(g_gpu.ctx, lg, lab.data(), lab.size() * 4);
    tensor logits = tensor_make(t, 2 * (size_t)N, -6, 6), dlogits = tensor_make(t, 2 * (size_t)N, 1, 1);
    tensor loss = tensor_make(GEMM_F32, 1, 0, 0);
    g_gpu.i->qa_loss(g_ctx, (float *)loss.gpu, dlogits.gpu, logits.gpu, lg, lg + B, &win.gpu, 1024.0f);
    g_cpu.i->qa_loss(g_cpu.ctx, loss.cpu, dlogits.cpu, logits.cpu, lc, lc + B, &win.cpu, 1024.0f);
    tag_of(what, sizeof what, "qa_loss", win, " (grad_scale 1024)");
    if (synced(what)) {
        tag_of(what, sizeof what, "qa_loss", win, " loss");
        expect(what, GEMM_F32, gpu_get(GEMM_F32, loss.gpu, 1), cpu_get(loss.cpu, 1), 0, FP32_SUMS);
        tag_of(what, sizeof what, "qa_loss", win, " dlogits (=)");
        expect(what, t, gpu_get(t, dlogits.gpu, dlogits.n), cpu_get(dlogits.cpu, dlogits.n), 0, FP32_SUMS);
    }
    for (tensor *x : {&logits, &dlogits, &loss}) tensor_free(*x);
    g_cpu.i->release(g_cpu.ctx, lc);
    g_gpu.i->release(g_gpu.ctx, lg);
}

static void run_type(gemm_type t)
{
    g_t = t;
    g_ctx->atype = t;
    for (int packed = 0; packed < 2; packed++) {
        windows win = act_windows(packed);
        test_embedding(win, 64);
        test_layernorm(win, 64);
        test_layernorm(win, 30);
        test_matmul(win, 64, 2, 1);   /* qa_outputs */
        test_matmul(win, 64, 256, 1); /* FFN in */
        test_matmul(win, 256, 64, 0); /* FFN out, no bias */
        test_matmul_n(win, 64);
        for (float p : {0.0f, 0.1f}) test_dropout_add(win, 64, p);
        test_dropout_add(win, 30, 0.1f);
        test_qa_loss(win);
        windows_free(win);
    }
    test_gelu(4096);
    test_gelu(1001);
}

int main(void)
{
    const char *dev = getenv("CUDAEMU_DEVICE");
    int t4 = dev && !strcmp(dev, "t4");
    if (backend_cpu_create(&g_cpu, 2)) {
        printf("FAIL cpu backend: %s\n", err_msg());
        return 1;
    }
    for (gemm_type t : {GEMM_F16, GEMM_BF16}) {
        if (t == GEMM_BF16 && t4) {
            printf("(bf16 skipped: the emulated T4 has no bf16)\n");
            continue;
        }
        cuda_backend_opts o = {0, t == GEMM_F16 ? PREC_FP16 : PREC_BF16, 0};
        if (cuda_backend_create(&g_gpu, &o)) {
            printf("FAIL cuda backend (emulated, %s): %s\n", type_name(t), err_msg());
            return 1;
        }
        g_ctx = (cuda_ctx *)g_gpu.ctx;
        printf("-- %s activations on the emulated %s\n", type_name(t), dev ? dev : "default card");
        run_type(t);
        backend_free(&g_gpu);
    }
    backend_free(&g_cpu);
    return check_summary();
}
