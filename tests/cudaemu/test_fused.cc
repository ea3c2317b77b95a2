/* cudaemu_fused: the fused kernels of src/backend/cuda/cuda_fused.cu on the
 * CPU stand-in, each against the composition of the CPU backend's ops it
 * replaces, with the same inputs:
 *   residual_ln   dropout_forward + add + layernorm_forward; backward
 *                 layernorm_backward + add + dropout_backward
 *   embed_ln      embedding_forward + layernorm_forward + dropout_forward;
 *                 backward dropout_backward + layernorm_backward +
 *                 embedding_backward
 *   mt_adamw      n single-tensor adamw calls, with the clip and the
 *                 overflow skip
 *   gelu          gelu_forward, gelu_backward
 *   ops table     the op table's fused LayerNorm entries (ops.def), which
 *                 bert.c calls, against the launchers (the same bits)
 * in fp32, fp16 and bf16 activations, padded and packed windows, with and
 * without dropout, C a multiple of 4 (4-wide accesses) and not.
 *
 * 16-bit runs: the CPU side computes in fp32 from the same 16-bit values and
 * rounds where the fused kernel stores a 16-bit value (the pre-LN sum, the
 * outputs, the accumulated gradients), as an unfused 16-bit pipeline would.
 * Stored values that the two compute with the same fp32 operations (the
 * sum, demb of the same inputs) must agree bit for bit; the others differ
 * only in the order of fp32 row sums (~1e-7 relative), so each 16-bit
 * output must be within 1 ulp of its type (a rounding that falls the other
 * way). fp32 outputs: 1e-5 of the largest magnitude. AdamW in fp32:
 * bit-identical. Each line prints what was compared and the max error. */
#include "backend/cuda/cuda_fused.h"

#include "act_test.h"
#include "backend/cuda/cuda_backend.h"

/* dev against ref (fp32 values; ref rounded to t by the caller where the
 * kernel stores t). mode 0: bit for bit; 1: within tol of the largest
 * |ref| (fp32 outputs); 2: within 1 ulp of t (16-bit outputs; the ulp
 * taken at least at 1e-3 of the largest |ref|, below which an fp32 row
 * sum's rounding is larger than the type's spacing). */
static void compare(const char *what, gemm_type t, const std::vector<float> &dev, const std::vector<float> &ref,
                    int mode, double tol)
{
    double mx = 0, err = 0, ulps = 0;
    size_t bad = 0;
    for (size_t i = 0; i < ref.size(); i++) mx = fmax(mx, fabs(ref[i]));
    for (size_t i = 0; i < ref.size(); i++) {
        double d = fabs((double)dev[i] - (double)ref[i]);
        if (isfinite(dev[i]) != isfinite(ref[i]) || (!isfinite(d) && memcmp(&dev[i], &ref[i], 4))) {
            bad++;
            continue;
        }
        if (!isfinite(d)) continue;
        err = fmax(err, d);
        ulps = fmax(ulps, d / ulp_of(t, fmax(fabs(ref[i]), 1e-3 * mx)));
        if (mode == 0 && memcmp(&dev[i], &ref[i], 4)) bad++;
    }
    int ok = bad == 0;
    if (mode == 1) ok = ok && err <= tol * fmax(mx, 1e-30);
    if (mode == 2) ok = ok && ulps <= 1.0;
    if (mode == 1)
        check(ok, "%-46s %s: max |err| %.3g = %.3g of max |ref| %.3g (bound %.0e)%s", what, type_name(t), err,
              err / fmax(mx, 1e-30), mx, tol, bad ? " MISMATCHES" : "");
    else
        check(ok, "%-46s %s: max |err| %.3g (max |ref| %.3g), %.3g ulp of %s (bound %s)%s", what, type_name(t), err,
              mx, ulps, type_name(t), mode == 0 ? "bit for bit" : "1 ulp", bad ? " MISMATCHES" : "");
}

/* compare() under the name "<tag> <part>". */
static void compare_part(const char *tag, const char *part, gemm_type t, const std::vector<float> &dev,
                         const std::vector<float> &ref, int mode, double tol)
{
    char what[160];
    snprintf(what, sizeof what, "%s %s", tag, part);
    compare(what, t, dev, ref, mode, tol);
}

static int out_mode(gemm_type t)
{
    return t == GEMM_F32 ? 1 : 2;
}

/* small: 3 windows of T 8 (one block of the backward's row chunks); large:
 * 24 windows of T 12 (N 288 padded: 9 blocks of CUDA_FUSED_LN_ROWS rows,
 * whose partial column sums the second stage adds). */
static windows windows_make(int packed, int large)
{
    const int B = large ? 24 : 3, T = large ? 12 : 8;
    int lens[24] = {5, 8, 2};
    if (large)
        for (int b = 0; b < B; b++) lens[b] = b == 5 ? T : 1 + (int)uniform(0, T - 0.01f);
    return windows_of(packed, B, T, lens,
                      packed ? (large ? "packed B24" : "packed B3") : (large ? "padded B24" : "padded B3"));
}

/* ------------------------------------------------------------------------
 * 1. Residual add + dropout + LayerNorm, forward and backward. */

/* The forward again in place (out over residual, sum over x, as the
 * header allows): the same bits as into separate buffers. */
static void residual_ln_in_place(const char *tag, gemm_type t, const tensor &res, const tensor &x, const tensor &out,
                                 const tensor &sum, const tensor &w, const tensor &b, const backend_windows *win, int C,
                                 float eps, float p)
{
    size_t NC = res.n, bytes = NC * type_size(t);
    void *r2 = g_gpu.i->alloc(g_gpu.ctx, bytes), *x2 = g_gpu.i->alloc(g_gpu.ctx, bytes);
    float *m2 = (float *)g_gpu.i->alloc(g_gpu.ctx, (size_t)win->N * 4);
    float *s2 = (float *)g_gpu.i->alloc(g_gpu.ctx, (size_t)win->N * 4);
    g_gpu.i->copy(g_gpu.ctx, r2, res.gpu, bytes);
    g_gpu.i->copy(g_gpu.ctx, x2, x.gpu, bytes);
    cuda_fused_residual_ln_forward(g_ctx, t, r2, x2, m2, s2, r2, x2, (float *)w.gpu, (float *)b.gpu, win, C, eps, p,
                                   g_rng);
    if (synced(tag))
        check(gpu_get(t, r2, NC) == gpu_get(t, out.gpu, NC) && gpu_get(t, x2, NC) == gpu_get(t, sum.gpu, NC),
              "%-46s %s: in place (out = residual, sum = x): the same bits", tag, type_name(t));
    g_gpu.i->release(g_gpu.ctx, r2);
    g_gpu.i->release(g_gpu.ctx, x2);
    g_gpu.i->release(g_gpu.ctx, m2);
    g_gpu.i->release(g_gpu.ctx, s2);
}

static void test_residual_ln(gemm_type t, int packed, int large, float p, int C)
{
    windows win = windows_make(packed, large);
    int N = win.cpu.N;
    size_t NC = (size_t)N * C;
    char tag[128];
    snprintf(tag, sizeof tag, "residual_ln %s p=%.1f C=%d", win.name, p, C);
    tensor res = tensor_make(t, NC, -2, 2), x = tensor_make(t, NC, -2, 2);
    tensor w = tensor_make(GEMM_F32, C, 0.5f, 1.5f), b = tensor_make(GEMM_F32, C, -0.5f, 0.5f);
    tensor out = tensor_make(t, NC, 0, 0), sum = tensor_make(t, NC, 0, 0);
    tensor mean = tensor_make(GEMM_F32, N, 0, 0), rstd = tensor_make(GEMM_F32, N, 0, 0);
    const float eps = 1e-12f;

    cuda_fused_residual_ln_forward(g_ctx, t, out.gpu, sum.gpu, (float *)mean.gpu, (float *)rstd.gpu, res.gpu, x.gpu,
                                   (float *)w.gpu, (float *)b.gpu, &win.gpu, C, eps, p, g_rng);
    if (!synced(tag)) return;
    /* CPU: s = round(res + dropout(x)); out = round(LN(s)) */
    g_cpu.i->dropout_forward(g_cpu.ctx, sum.cpu, x.cpu, &win.cpu, C, p, g_rng);
    g_cpu.i->add(g_cpu.ctx, sum.cpu, sum.cpu, res.cpu, NC);
    std::vector<float> s_ref = cpu_round(t, sum.cpu, NC);
    g_cpu.i->layernorm_forward(g_cpu.ctx, out.cpu, mean.cpu, rstd.cpu, sum.cpu, w.cpu, b.cpu, N, C, eps);
    std::vector<float> o_ref = cpu_get(out.cpu, NC);
    for (float &v : o_ref) v = round_to(t, v);
    compare_part(tag, "fwd sum", t, gpu_get(t, sum.gpu, NC), s_ref, 0, 0);
    compare_part(tag, "fwd out", t, gpu_get(t, out.gpu, NC), o_ref, out_mode(t), 1e-5);
    compare_part(tag, "fwd mean", GEMM_F32, gpu_get(GEMM_F32, mean.gpu, N), cpu_get(mean.cpu, N), 1, 1e-5);
    compare_part(tag, "fwd rstd", GEMM_F32, gpu_get(GEMM_F32, rstd.gpu, N), cpu_get(rstd.cpu, N), 1, 1e-5);
    residual_ln_in_place(tag, t, res, x, out, sum, w, b, &win.gpu, C, eps, p);

    /* Backward from the device's saved sum, mean, rstd (given to both). */
    std::vector<float> s_dev = gpu_get(t, sum.gpu, NC), m_dev = gpu_get(GEMM_F32, mean.gpu, N),
                       r_dev = gpu_get(GEMM_F32, rstd.gpu, N);
    g_cpu.i->upload(g_cpu.ctx, sum.cpu, s_dev.data(), NC * 4);
    g_cpu.i->upload(g_cpu.ctx, mean.cpu, m_dev.data(), N * 4);
    g_cpu.i->upload(g_cpu.ctx, rstd.cpu, r_dev.data(), N * 4);
    tensor dout = tensor_make(t, NC, -1, 1), dres = tensor_make(t, NC, -1, 1), dx = tensor_make(t, NC, -1, 1);
    tensor dw = tensor_make(GEMM_F32, C, -1, 1), db = tensor_make(GEMM_F32, C, -1, 1);
    tensor dsum = tensor_make(GEMM_F32, NC, 0, 0);
    g_cpu.i->zero(g_cpu.ctx, dsum.cpu, NC * 4);
    cuda_fused_residual_ln_backward(g_ctx, t, dres.gpu, dx.gpu, (float *)dw.gpu, (float *)db.gpu, dout.gpu, sum.gpu,
                                    (float *)mean.gpu, (float *)rstd.gpu, (float *)w.gpu, &win.gpu, C, p, g_rng);
    if (!synced(tag)) return;
    g_cpu.i->layernorm_backward(g_cpu.ctx, dsum.cpu, dw.cpu, db.cpu, dout.cpu, sum.cpu, w.cpu, mean.cpu, rstd.cpu, N,
                                C);
    g_cpu.i->add(g_cpu.ctx, dres.cpu, dres.cpu, dsum.cpu, NC);
    g_cpu.i->dropout_backward(g_cpu.ctx, dx.cpu, dsum.cpu, &win.cpu, C, p, g_rng);
    std::vector<float> dres_ref = cpu_get(dres.cpu, NC), dx_ref = cpu_get(dx.cpu, NC);
    for (float &v : dres_ref) v = round_to(t, v);
    for (float &v : dx_ref) v = round_to(t, v);
    compare_part(tag, "bwd dresidual (+=)", t, gpu_get(t, dres.gpu, NC), dres_ref, out_mode(t), 1e-5);
    compare_part(tag, "bwd dx (+=)", t, gpu_get(t, dx.gpu, NC), dx_ref, out_mode(t), 1e-5);
    compare_part(tag, "bwd dw (+=)", GEMM_F32, gpu_get(GEMM_F32, dw.gpu, C), cpu_get(dw.cpu, C), 1, 1e-5);
    compare_part(tag, "bwd db (+=)", GEMM_F32, gpu_get(GEMM_F32, db.gpu, C), cpu_get(db.cpu, C), 1, 1e-5);

    tensor *all[] = {&res, &x, &w, &b, &out, &sum, &mean, &rstd, &dout, &dres, &dx, &dw, &db, &dsum};
    for (tensor *a : all) tensor_free(*a);
    windows_free(win);
}

/* ------------------------------------------------------------------------
 * 3. Multi-tensor AdamW against n single-tensor CPU calls. */

struct mt_case {
    const char *name;
    float grad_unscale;
    double max_norm;
    int poison; /* 0 none, 1 inf, 2 NaN in one gradient */
};

/* The step of tensor i (initial values in the host copies) through the
 * CUDA backend's own single-tensor adamw (cuda_loss.cu) with the same
 * grad_scale: bit for bit what the multi-tensor kernel left on the device. */
static void mt_vs_cuda_adamw(const char *name, int i, tensor &P, tensor &G, tensor &M, tensor &V, float lr, float b1,
                             float b2, float eps, float wd, int64_t t, float gs)
{
    size_t n = P.n;
    float *p = (float *)g_gpu.i->alloc(g_gpu.ctx, n * 4), *m = (float *)g_gpu.i->alloc(g_gpu.ctx, n * 4);
    float *v = (float *)g_gpu.i->alloc(g_gpu.ctx, n * 4);
    g_gpu.i->upload(g_gpu.ctx, p, P.h.data(), n * 4);
    g_gpu.i->upload(g_gpu.ctx, m, M.h.data(), n * 4);
    g_gpu.i->upload(g_gpu.ctx, v, V.h.data(), n * 4);
    g_gpu.i->adamw(g_gpu.ctx, p, (const float *)G.gpu, m, v, n, lr, b1, b2, eps, wd, t, gs);
    if (synced("cuda adamw")) {
        int same = gpu_get(GEMM_F32, p, n) == gpu_get(GEMM_F32, P.gpu, n) &&
                   gpu_get(GEMM_F32, m, n) == gpu_get(GEMM_F32, M.gpu, n) &&
                   gpu_get(GEMM_F32, v, n) == gpu_get(GEMM_F32, V.gpu, n);
        check(same, "mt_adamw %s tensor %d p, m, v: bit for bit the CUDA backend's single-tensor adamw", name, i);
    }
    g_gpu.i->release(g_gpu.ctx, p);
    g_gpu.i->release(g_gpu.ctx, m);
    g_gpu.i->release(g_gpu.ctx, v);
}

static void test_mt_adamw(gemm_type copy, const mt_case &k)
{
    const int64_t sizes[] = {1000, 70000, 1, 0, 257, 131077};
    const int decay[] = {1, 0, 0, 1, 1, 0};
    const int nt = 6;
    const float lr = 3e-4f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f, wd = 0.01f;
    const int64_t t = 7;
    std::vector<cuda_mt_tensor> tab(nt);
    std::vector<tensor> P, G, M, V;
    std::vector<void *> P16(nt);
    for (int i = 0; i < nt; i++) {
        size_t n = (size_t)sizes[i];
        P.push_back(tensor_make(GEMM_F32, n, -1, 1));
        G.push_back(tensor_make(GEMM_F32, n, -1e3f, 1e3f)); /* as if times a loss scale of 1024 */
        M.push_back(tensor_make(GEMM_F32, n, -1e-2f, 1e-2f));
        V.push_back(tensor_make(GEMM_F32, n, 0, 1e-4f));
        P16[i] = g_gpu.i->alloc(g_gpu.ctx, n * type_size(copy) + 4);
        g_gpu.i->zero(g_gpu.ctx, P16[i], n * type_size(copy) + 4);
        tab[i] = cuda_mt_tensor{(float *)P[i].gpu, (const float *)G[i].gpu, (float *)M[i].gpu, (float *)V[i].gpu,
                                i == 2 ? NULL : P16[i], sizes[i], 0, decay[i]};
    }
    if (k.poison) {
        G[4].h[100] = k.poison == 1 ? INFINITY : NAN;
        tensor_put(G[4]);
    }
    int64_t nchunks = cuda_mt_table_prepare(tab.data(), nt);
    cuda_mt_tensor *dtab = (cuda_mt_tensor *)g_gpu.i->alloc(g_gpu.ctx, nt * sizeof(cuda_mt_tensor));
    g_gpu.i->upload(g_gpu.ctx, dtab, tab.data(), nt * sizeof(cuda_mt_tensor));
    double *part = (double *)g_gpu.i->alloc(g_gpu.ctx, (size_t)nchunks * sizeof(double));
    cuda_mt_status *dst = (cuda_mt_status *)g_gpu.i->alloc(g_gpu.ctx, sizeof(cuda_mt_status));

    cuda_mt_grad_norm(g_ctx, dst, part, dtab, nt, nchunks, k.grad_unscale, k.max_norm);
    cuda_mt_adamw(g_ctx, dtab, nt, nchunks, dst, copy, lr, b1, b2, eps, wd, t);
    if (!synced("mt_adamw")) return;
    cuda_mt_status st;
    g_gpu.i->download(g_gpu.ctx, &st, dst, sizeof st);

    /* The norm: against the CPU backend's sum_squares of each tensor. */
    double ss = 0;
    for (int i = 0; i < nt; i++)
        if (sizes[i]) ss += g_cpu.i->sum_squares(g_cpu.ctx, G[i].cpu, (size_t)sizes[i]);
    char what[160];
    if (k.poison) {
        check(st.skipped == 1 && st.clip_coef == 1.0 && !isfinite(st.norm),
              "mt_adamw %-32s copy %s: skipped %d, norm %g, clip %g (want skipped 1, norm not finite)", k.name,
              type_name(copy), st.skipped, st.norm, st.clip_coef);
        /* nothing moved: p, m, v as they were, the copy still zero */
        int same = 1;
        for (int i = 0; i < nt; i++) {
            size_t n = (size_t)sizes[i];
            same &= gpu_get(GEMM_F32, P[i].gpu, n) == P[i].h && gpu_get(GEMM_F32, M[i].gpu, n) == M[i].h &&
                    gpu_get(GEMM_F32, V[i].gpu, n) == V[i].h;
            if (i != 2) {
                std::vector<float> c = gpu_get(copy, P16[i], n);
                for (float f : c) same &= f == 0.0f;
            }
        }
        check(same, "mt_adamw %-32s copy %s: p, m, v and the 16-bit copy untouched", k.name, type_name(copy));
    } else {
        double rel = fabs(st.sum_squares - ss) / ss;
        check(rel < 1e-12, "mt_adamw %-32s sum of squares %.17g vs CPU sum_squares %.17g: rel %.3g (bound 1e-12)",
              k.name, st.sum_squares, ss, rel);
        /* The decision, from the device's sum, in optim_apply's arithmetic. */
        double norm = sqrt(st.sum_squares) * fabs((double)k.grad_unscale);
        double clip = k.max_norm > 0 ? fmin(1.0, k.max_norm / (norm + 1e-6)) : 1.0;
        float gs = (float)((double)k.grad_unscale * clip);
        check(!st.skipped && st.norm == norm && st.clip_coef == clip && st.grad_scale == gs,
              "mt_adamw %-32s norm %.9g clip %.9g grad_scale %.9g, as optim_apply computes them (bit for bit)", k.name,
              st.norm, st.clip_coef, st.grad_scale);
        for (int i = 0; i < nt; i++)
            if (sizes[i])
                g_cpu.i->adamw(g_cpu.ctx, P[i].cpu, G[i].cpu, M[i].cpu, V[i].cpu, (size_t)sizes[i], lr, b1, b2, eps,
                               decay[i] ? wd : 0.0f, t, gs);
        for (int i = 0; i < nt; i++) {
            size_t n = (size_t)sizes[i];
            if (!n) continue;
            std::vector<float> pc = cpu_get(P[i].cpu, n);
            snprintf(what, sizeof what, "mt_adamw %s tensor %d (n %zu, decay %d) p", k.name, i, n, decay[i]);
            compare(what, GEMM_F32, gpu_get(GEMM_F32, P[i].gpu, n), pc, 0, 0);
            snprintf(what, sizeof what, "mt_adamw %s tensor %d m", k.name, i);
            compare(what, GEMM_F32, gpu_get(GEMM_F32, M[i].gpu, n), cpu_get(M[i].cpu, n), 0, 0);
            snprintf(what, sizeof what, "mt_adamw %s tensor %d v", k.name, i);
            compare(what, GEMM_F32, gpu_get(GEMM_F32, V[i].gpu, n), cpu_get(V[i].cpu, n), 0, 0);
            mt_vs_cuda_adamw(k.name, i, P[i], G[i], M[i], V[i], lr, b1, b2, eps, decay[i] ? wd : 0.0f, t, gs);
            if (i == 2) continue;
            for (float &f : pc) f = round_to(copy, f);
            snprintf(what, sizeof what, "mt_adamw %s tensor %d 16-bit copy = round(p)", k.name, i);
            compare(what, copy, gpu_get(copy, P16[i], n), pc, 0, 0);
        }
    }
    for (int i = 0; i < nt; i++) {
        tensor_free(P[i]);
        tensor_free(G[i]);
        tensor_free(M[i]);
        tensor_free(V[i]);
        g_gpu.i->release(g_gpu.ctx, P16[i]);
    }
    g_gpu.i->release(g_gpu.ctx, dtab);
    g_gpu.i->release(g_gpu.ctx, part);
    g_gpu.i->release(g_gpu.ctx, dst);
}

/* The split path of the sharded optimizer: cuda_mt_sum_squares, the sum
 * replaced in between (as an all-reduce over 4 ranks with equal sums would
 * leave it), cuda_mt_decide: the decision of optim_apply on the new sum. */
static void test_mt_split(void)
{
    const size_t n = 70000;
    tensor p = tensor_make(GEMM_F32, n, -1, 1), g = tensor_make(GEMM_F32, n, -1, 1);
    cuda_mt_tensor tab = {(float *)p.gpu, (const float *)g.gpu, (float *)p.gpu, (float *)p.gpu, NULL, (int64_t)n, 0, 1};
    int64_t nchunks = cuda_mt_table_prepare(&tab, 1);
    cuda_mt_tensor *dtab = (cuda_mt_tensor *)g_gpu.i->alloc(g_gpu.ctx, sizeof tab);
    double *part = (double *)g_gpu.i->alloc(g_gpu.ctx, (size_t)nchunks * sizeof(double));
    cuda_mt_status *dst = (cuda_mt_status *)g_gpu.i->alloc(g_gpu.ctx, sizeof(cuda_mt_status));
    g_gpu.i->upload(g_gpu.ctx, dtab, &tab, sizeof tab);
    cuda_mt_status st, whole;
    cuda_mt_grad_norm(g_ctx, dst, part, dtab, 1, nchunks, 0.5f, 3.0);
    if (!synced("mt_split")) return;
    g_gpu.i->download(g_gpu.ctx, &whole, dst, sizeof whole);
    g_gpu.i->zero(g_gpu.ctx, dst, sizeof st);
    cuda_mt_sum_squares(g_ctx, dst, part, dtab, 1, nchunks);
    if (!synced("mt_split")) return;
    g_gpu.i->download(g_gpu.ctx, &st, dst, sizeof st);
    int ok = st.sum_squares == whole.sum_squares && st.norm == 0 && st.grad_scale == 0;
    st.sum_squares *= 4;
    g_gpu.i->upload(g_gpu.ctx, dst, &st, sizeof st);
    cuda_mt_decide(g_ctx, dst, 0.5f, 3.0);
    if (!synced("mt_split")) return;
    g_gpu.i->download(g_gpu.ctx, &st, dst, sizeof st);
    double norm = sqrt(whole.sum_squares * 4) * 0.5, clip = fmin(1.0, 3.0 / (norm + 1e-6));
    ok = ok && st.norm == norm && st.clip_coef == clip && st.grad_scale == (float)(0.5 * clip) && !st.skipped;
    check(ok, "mt_split sum_squares alone %.17g (= grad_norm's), x4 between, decide: norm %.9g clip %.9g",
          whole.sum_squares, st.norm, st.clip_coef);
    tensor_free(p);
    tensor_free(g);
    g_gpu.i->release(g_gpu.ctx, dtab);
    g_gpu.i->release(g_gpu.ctx, part);
    g_gpu.i->release(g_gpu.ctx, dst);
}

/* ------------------------------------------------------------------------
 * 2. Embeddings + LayerNorm + dropout, forward and backward. */

static void test_embed_ln(gemm_type t, int packed, int large, float p, int C)
{
    windows win = windows_make(packed, large);
    int N = win.cpu.N, T = win.cpu.T;
    const int Vn = 50, P = 16, TV = 2;
    size_t NC = (size_t)N * C;
    char tag[128], what[160];
    snprintf(tag, sizeof tag, "embed_ln %s p=%.1f C=%d", win.name, p, C);
    std::vector<int32_t> ids(N), types(N), pos(N);
    for (int n = 0; n < N; n++) {
        ids[n] = n % 3 == 0 ? 1 : (int32_t)(uniform(0, Vn - 0.01f)); /* repeated ids: the sorted sums */
        types[n] = uniform(0, 1) < 0.5f ? 0 : 1;
    }
    if (packed)
        for (int b = 0; b < win.cpu.B; b++)
            for (int r = win.cu[b]; r < win.cu[b + 1]; r++) pos[r] = r - win.cu[b];
    int32_t *ic = (int32_t *)g_cpu.i->alloc(g_cpu.ctx, 3 * N * 4);
    int32_t *ig = (int32_t *)g_gpu.i->alloc(g_gpu.ctx, 3 * N * 4);
    std::vector<int32_t> all(ids);
    all.insert(all.end(), types.begin(), types.end());
    all.insert(all.end(), pos.begin(), pos.end());
    g_cpu.i->upload(g_cpu.ctx, ic, all.data(), 3 * N * 4);
    g_gpu.i->upload(g_gpu.ctx, ig, all.data(), 3 * N * 4);
    const int32_t *pc = packed ? ic + 2 * N : NULL, *pg = packed ? ig + 2 * N : NULL;
    tensor wte = tensor_make(GEMM_F32, (size_t)Vn * C, -1, 1), wpe = tensor_make(GEMM_F32, (size_t)P * C, -1, 1);
    tensor wtt = tensor_make(GEMM_F32, (size_t)TV * C, -1, 1);
    tensor w = tensor_make(GEMM_F32, C, 0.5f, 1.5f), b = tensor_make(GEMM_F32, C, -0.5f, 0.5f);
    tensor out = tensor_make(t, NC, 0, 0), e = tensor_make(GEMM_F32, NC, 0, 0);
    tensor mean = tensor_make(GEMM_F32, N, 0, 0), rstd = tensor_make(GEMM_F32, N, 0, 0);
    const float eps = 1e-12f;

    cuda_fused_embed_ln_forward(g_ctx, t, out.gpu, (float *)mean.gpu, (float *)rstd.gpu, ig, ig + N, pg,
                                (float *)wte.gpu, (float *)wpe.gpu, (float *)wtt.gpu, (float *)w.gpu, (float *)b.gpu,
                                &win.gpu, C, eps, p, g_rng);
    if (!synced(tag)) return;
    g_cpu.i->embedding_forward(g_cpu.ctx, e.cpu, ic, ic + N, pc, wte.cpu, wpe.cpu, wtt.cpu, N, T, C);
    g_cpu.i->layernorm_forward(g_cpu.ctx, out.cpu, mean.cpu, rstd.cpu, e.cpu, w.cpu, b.cpu, N, C, eps);
    g_cpu.i->dropout_forward(g_cpu.ctx, out.cpu, out.cpu, &win.cpu, C, p, g_rng);
    std::vector<float> o_ref = cpu_get(out.cpu, NC);
    for (float &v : o_ref) v = round_to(t, v);
    compare_part(tag, "fwd out", t, gpu_get(t, out.gpu, NC), o_ref, out_mode(t), 1e-5);
    compare_part(tag, "fwd mean", GEMM_F32, gpu_get(GEMM_F32, mean.gpu, N), cpu_get(mean.cpu, N), 1, 1e-5);
    compare_part(tag, "fwd rstd", GEMM_F32, gpu_get(GEMM_F32, rstd.gpu, N), cpu_get(rstd.cpu, N), 1, 1e-5);

    /* Backward with the device's mean and rstd on both sides. */
    std::vector<float> m_dev = gpu_get(GEMM_F32, mean.gpu, N), r_dev = gpu_get(GEMM_F32, rstd.gpu, N);
    g_cpu.i->upload(g_cpu.ctx, mean.cpu, m_dev.data(), N * 4);
    g_cpu.i->upload(g_cpu.ctx, rstd.cpu, r_dev.data(), N * 4);
    tensor dout = tensor_make(t, NC, -1, 1), dy = tensor_make(GEMM_F32, NC, 0, 0);
    tensor demb = tensor_make(GEMM_F32, NC, 0, 0);
    tensor dwte = tensor_make(GEMM_F32, (size_t)Vn * C, -1, 1), dwpe = tensor_make(GEMM_F32, (size_t)P * C, -1, 1);
    tensor dwtt = tensor_make(GEMM_F32, (size_t)TV * C, -1, 1);
    tensor dw = tensor_make(GEMM_F32, C, -1, 1), db = tensor_make(GEMM_F32, C, -1, 1);
    cuda_fused_embed_ln_backward(g_ctx, t, (float *)dwte.gpu, (float *)dwpe.gpu, (float *)dwtt.gpu, (float *)dw.gpu,
                                 (float *)db.gpu, (float *)demb.gpu, dout.gpu, ig, ig + N, pg, (float *)mean.gpu,
                                 (float *)rstd.gpu, (float *)wte.gpu, (float *)wpe.gpu, (float *)wtt.gpu,
                                 (float *)w.gpu, &win.gpu, C, p, g_rng);
    if (!synced(tag)) return;
    g_cpu.i->zero(g_cpu.ctx, dy.cpu, NC * 4);
    g_cpu.i->zero(g_cpu.ctx, demb.cpu, NC * 4);
    g_cpu.i->dropout_backward(g_cpu.ctx, dy.cpu, dout.cpu, &win.cpu, C, p, g_rng);
    g_cpu.i->layernorm_backward(g_cpu.ctx, demb.cpu, dw.cpu, db.cpu, dy.cpu, e.cpu, w.cpu, mean.cpu, rstd.cpu, N, C);
    g_cpu.i->embedding_backward(g_cpu.ctx, dwte.cpu, dwpe.cpu, dwtt.cpu, demb.cpu, ic, ic + N, pc, N, T, C);
    compare_part(tag, "bwd demb (fp32 scratch)", GEMM_F32, gpu_get(GEMM_F32, demb.gpu, NC), cpu_get(demb.cpu, NC), 1,
                 1e-5);
    struct {
        const char *name;
        tensor *x;
    } grads[] = {{"dwte", &dwte}, {"dwpe", &dwpe}, {"dwtt", &dwtt}, {"dw", &dw}, {"db", &db}};
    for (auto &g : grads) {
        snprintf(what, sizeof what, "%s bwd %s (+=)", tag, g.name);
        compare(what, GEMM_F32, gpu_get(GEMM_F32, g.x->gpu, g.x->n), cpu_get(g.x->cpu, g.x->n), 1, 1e-5);
    }
    /* The tables' sums of the device's demb: bit for bit the CPU's. */
    std::vector<float> de = gpu_get(GEMM_F32, demb.gpu, NC), dwte_dev = gpu_get(GEMM_F32, dwte.gpu, dwte.n);
    g_cpu.i->upload(g_cpu.ctx, dwte.cpu, dwte.h.data(), dwte.n * 4);
    g_cpu.i->upload(g_cpu.ctx, demb.cpu, de.data(), NC * 4);
    g_cpu.i->embedding_backward(g_cpu.ctx, dwte.cpu, NULL, NULL, demb.cpu, ic, ic + N, pc, N, T, C);
    compare_part(tag, "bwd dwte from the same demb", GEMM_F32, dwte_dev, cpu_get(dwte.cpu, dwte.n), 0, 0);

    tensor *ts[] = {&wte, &wpe, &wtt, &w, &b, &out, &e, &mean, &rstd, &dout, &dy, &demb, &dwte, &dwpe, &dwtt, &dw, &db};
    for (tensor *a : ts) tensor_free(*a);
    g_cpu.i->release(g_cpu.ctx, ic);
    g_gpu.i->release(g_gpu.ctx, ig);
    windows_free(win);
}

/* ------------------------------------------------------------------------
 * 4. GELU on 16-bit data; offset 1 element: the pointers lose their 16-byte
 * alignment and the kernels take the one-element path. */

static void test_gelu(gemm_type t, int offset)
{
    const size_t n = 1003;
    char what[160];
    tensor x = tensor_make(t, n + 1, -5, 5), out = tensor_make(t, n + 1, 0, 0);
    tensor dout = tensor_make(t, n + 1, -1, 1), dinp = tensor_make(t, n + 1, -1, 1);
    size_t es = type_size(t);
    cuda_fused_gelu_forward(g_ctx, t, (char *)out.gpu + offset * es, (char *)x.gpu + offset * es, n);
    cuda_fused_gelu_backward(g_ctx, t, (char *)dinp.gpu + offset * es, (char *)x.gpu + offset * es,
                             (char *)dout.gpu + offset * es, n);
    if (!synced("gelu")) return;
    g_cpu.i->gelu_forward(g_cpu.ctx, out.cpu + offset, x.cpu + offset, n);
    g_cpu.i->gelu_backward(g_cpu.ctx, dinp.cpu + offset, x.cpu + offset, dout.cpu + offset, n);
    std::vector<float> o_ref = cpu_get(out.cpu + offset, n), d_ref = cpu_get(dinp.cpu + offset, n);
    for (float &v : o_ref) v = round_to(t, v);
    for (float &v : d_ref) v = round_to(t, v);
    std::vector<float> o = gpu_get(t, (char *)out.gpu + offset * es, n);
    std::vector<float> d = gpu_get(t, (char *)dinp.gpu + offset * es, n);
    snprintf(what, sizeof what, "gelu n=%zu %s fwd", n, offset ? "unaligned" : "aligned (16-byte packs)");
    compare(what, t, o, o_ref, out_mode(t), 1e-5);
    snprintf(what, sizeof what, "gelu n=%zu %s bwd (+=)", n, offset ? "unaligned" : "aligned (16-byte packs)");
    compare(what, t, d, d_ref, out_mode(t), 1e-5);
    tensor *ts[] = {&x, &out, &dout, &dinp};
    for (tensor *a : ts) tensor_free(*a);
}

/* ------------------------------------------------------------------------
 * adamw_multi (the op optim.c calls; ops.def) against the fallback it
 * replaces on the same CUDA backend: sum_squares over the block, optim_apply's
 * decision on the host, adamw per run of ranges with the same decay. p, m,
 * v, the sum of squares, the norm and the clip bit for bit, over 3 steps
 * (the table is uploaded once, then reused). */

struct multi_case {
    const char *name;
    float unscale;
    double max_norm;
    int sum_given; /* 1: the caller's sum, 4x the gradients' own */
    int bad;       /* 1: a NaN gradient in step 2 (skipped) */
    int plant;     /* 1: the multi side's table has one decay flipped: must differ */
};

/* optim_apply's decision, as optim.c computes it. */
static void host_decide(double ss, float unscale, double max_norm, double *norm, double *clip, float *gs, int *skip)
{
    *norm = sqrt(ss) * fabs((double)unscale);
    *skip = !isfinite(*norm);
    *clip = 1.0;
    if (!*skip && max_norm > 0) {
        *clip = max_norm / (*norm + 1e-6);
        if (*clip > 1.0) *clip = 1.0;
    }
    *gs = (float)((double)unscale * *clip);
}

static void test_adamw_multi(const multi_case &k)
{
    /* 2 chunks of CUDA_MT_CHUNK and a partial one, tiny ones, a weight
     * matrix's size; decay alternating in runs as bert's table does */
    const size_t sizes[] = {1000, 2 * CUDA_MT_CHUNK + 17, 17, 3, 5000, 96, 40000};
    const int decay[] = {1, 0, 0, 1, 1, 0, 1};
    const int nr = 7;
    backend_adamw_range r[nr];
    size_t total = 0;
    for (int i = 0; i < nr; i++) {
        r[i] = backend_adamw_range{total, sizes[i], total, decay[i]};
        total += sizes[i];
    }
    tensor G = tensor_make(GEMM_F32, total, -0.5f, 0.5f);
    tensor P0 = tensor_make(GEMM_F32, total, -1.0f, 1.0f);
    float *dev[2][3];
    for (int s = 0; s < 2; s++)
        for (int j = 0; j < 3; j++) {
            dev[s][j] = (float *)g_gpu.i->alloc(g_gpu.ctx, total * 4);
            if (j == 0) g_gpu.i->copy(g_gpu.ctx, dev[s][j], P0.gpu, total * 4);
            else g_gpu.i->zero(g_gpu.ctx, dev[s][j], total * 4);
        }
    backend_adamw_range rm[nr];
    memcpy(rm, r, sizeof r);
    if (k.plant) rm[3].decay = !rm[3].decay;
    const float lr = 1e-3f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f, wd = 0.01f;
    int64_t t = 0;
    int same = 1, same_res = 1, ok = 1;
    for (int step = 1; step <= 3 && ok; step++) {
        if (k.bad && step == 2) {
            float nan = NAN;
            g_gpu.i->upload(g_gpu.ctx, (float *)G.gpu + total / 2, &nan, 4);
        } else if (k.bad && step == 3) {
            g_gpu.i->upload(g_gpu.ctx, (float *)G.gpu + total / 2, &G.h[total / 2], 4);
        }
        /* the fallback */
        double ss = g_gpu.i->sum_squares(g_gpu.ctx, (const float *)G.gpu, total);
        double given = 4 * ss;
        double norm, clip;
        float gs;
        int skip;
        host_decide(k.sum_given ? given : ss, k.unscale, k.max_norm, &norm, &clip, &gs, &skip);
        if (!skip) {
            for (int i = 0; i < nr;) {
                int j = i + 1;
                while (j < nr && decay[j] == decay[i]) j++;
                size_t a = r[i].off, n = r[j - 1].off + r[j - 1].len - a;
                g_gpu.i->adamw(g_gpu.ctx, dev[1][0] + a, (const float *)G.gpu + a, dev[1][1] + a, dev[1][2] + a, n, lr,
                               b1, b2, eps, decay[i] ? wd : 0.0f, t + 1, gs);
                i = j;
            }
        }
        /* the op */
        backend_adamw_args a = {lr, b1, b2, eps, wd, t + 1, k.unscale, k.max_norm, k.sum_given, given};
        backend_adamw_result res;
        if (g_gpu.i->adamw_multi(g_gpu.ctx, &res, dev[0][0], (const float *)G.gpu, dev[0][1], dev[0][2], rm, nr, &a)) {
            check(0, "adamw_multi %s step %d: %s", k.name, step, err_msg());
            ok = 0;
            break;
        }
        if (!synced("adamw_multi")) return;
        double want_ss = k.sum_given ? given : ss;
        if (memcmp(&res.sum_squares, &want_ss, 8) || memcmp(&res.norm, &norm, 8) || memcmp(&res.clip_coef, &clip, 8) ||
            res.skipped != skip)
            same_res = 0;
        if (!skip) t++;
        for (int j = 0; j < 3; j++) {
            std::vector<float> x(total), y(total);
            g_gpu.i->download(g_gpu.ctx, x.data(), dev[0][j], total * 4);
            g_gpu.i->download(g_gpu.ctx, y.data(), dev[1][j], total * 4);
            if (memcmp(x.data(), y.data(), total * 4)) same = 0;
        }
        if (k.bad && step == 2) check(skip && res.skipped, "adamw_multi %s: the NaN step is skipped", k.name);
    }
    if (k.plant)
        check(ok && !same, "adamw_multi %-34s a flipped decay in the op's table is caught (p, m, v differ)", k.name);
    else if (ok)
        check(same && same_res,
              "adamw_multi %-34s 3 steps, %zu parameters in %d ranges: p, m, v, the sum of squares, norm, clip and "
              "skip bit for bit the fallback (sum_squares, the host's decision, adamw per run)",
              k.name, total, nr);
    for (int s = 0; s < 2; s++)
        for (int j = 0; j < 3; j++) g_gpu.i->release(g_gpu.ctx, dev[s][j]);
    tensor_free(G);
    tensor_free(P0);
}

/* Without a given sum the ranges must be one span. */
static void test_adamw_multi_gap(void)
{
    float *p = (float *)g_gpu.i->alloc(g_gpu.ctx, 64 * 4);
    g_gpu.i->zero(g_gpu.ctx, p, 64 * 4);
    backend_adamw_range r[2] = {{0, 10, 0, 1}, {11, 10, 10, 0}};
    backend_adamw_args a = {1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 1, 1.0f, 1.0, 0, 0.0};
    backend_adamw_result res;
    int rc = g_gpu.i->adamw_multi(g_gpu.ctx, &res, p, p + 32, p + 40, p + 48, r, 2, &a);
    check(rc != 0 && strstr(err_msg(), "range 1"), "adamw_multi: ranges with a gap and no given sum refused (%s)",
          rc ? err_msg() : "accepted");
    err_clear();
    g_gpu.i->release(g_gpu.ctx, p);
}

/* ------------------------------------------------------------------------
 * 5. The op table's entries (ops.def's residual_layernorm_* and
 * embedding_layernorm_*, which bert.c calls): the CPU has none; CUDA's, on
 * the context's activation type, write the launchers' bits into twins of
 * the same buffers (padded B3, C 64, dropout 0.1); a C above
 * CUDA_FUSED_MAX_C is declined (1) by all four with nothing written. */

/* The outputs of one op pair: [0] the launchers', [1] the op's, equal at start. */
struct op_outs {
    std::vector<tensor> x[2];
};

static void op_outs_add(op_outs &o, gemm_type t, size_t n)
{
    o.x[0].push_back(tensor_make(t, n, -1, 1));
    tensor y = tensor_make(t, n, 0, 0);
    y.h = o.x[0].back().h;
    tensor_put(y);
    o.x[1].push_back(y);
}

/* 1 when every output of the two sides holds the same values, or
 * (untouched) every output of side 1, the op table's, still holds what it
 * was given: nothing written. */
static int op_outs_same(op_outs &o, int untouched)
{
    int same = 1;
    for (size_t k = 0; k < o.x[0].size(); k++) {
        const tensor &a = o.x[0][k], &b = o.x[1][k];
        same &= gpu_get(b.t, b.gpu, b.n) == (untouched ? b.h : gpu_get(a.t, a.gpu, a.n));
    }
    return same;
}

static void op_outs_free(op_outs &o)
{
    for (int s = 0; s < 2; s++)
        for (tensor &x : o.x[s]) tensor_free(x);
}

/* The four ops on C columns of win's rows; side 1 the table's, side 0 the
 * launchers' (launch 0: not called). tab: [T, C] fp32, the three
 * embedding tables (ids < 3, types 0, padded positions). Returns how many
 * of the table's four ops declined (returned non-zero). */
static int ops_run(gemm_type t, op_outs &o, int side, int launch, const tensor &in, const float *tab,
                   const int32_t *ig, const backend_windows *win, int C)
{
    const float p = 0.1f, eps = 1e-12f;
    int N = win->N;
    tensor *y = o.x[side].data();
    void *out = y[0].gpu, *sum = y[1].gpu, *dres = y[2].gpu, *dx = y[3].gpu;
    float *f[10];
    for (int k = 0; k < 10; k++) f[k] = (float *)y[4 + k].gpu; /* mean rstd dw db dwte dwpe dwtt scratch w b */
    const void *x = in.gpu, *res = (const char *)in.gpu + (size_t)N * C * type_size(t);
    int rc = 0;
    if (side) {
        const backend_i *b = g_gpu.i;
        void *c = g_gpu.ctx;
        rc += 0 != b->residual_layernorm_forward(c, out, sum, f[0], f[1], res, x, f[8], f[9], win, C, eps, p, g_rng);
        rc += 0 != b->residual_layernorm_backward(c, dres, dx, f[2], f[3], x, sum, f[0], f[1], f[8], win, C, p, g_rng);
        rc += 0 != b->embedding_layernorm_forward(c, out, f[0], f[1], ig, ig + N, NULL, tab, tab, tab, f[8], f[9], win,
                                                  C, eps, p, g_rng);
        rc += 0 != b->embedding_layernorm_backward(c, f[4], f[5], f[6], f[2], f[3], f[7], x, ig, ig + N, NULL, f[0],
                                                   f[1], tab, tab, tab, f[8], win, C, p, g_rng);
    } else if (launch) {
        cuda_fused_residual_ln_forward(g_ctx, t, out, sum, f[0], f[1], res, x, f[8], f[9], win, C, eps, p, g_rng);
        cuda_fused_residual_ln_backward(g_ctx, t, dres, dx, f[2], f[3], x, sum, f[0], f[1], f[8], win, C, p, g_rng);
        cuda_fused_embed_ln_forward(g_ctx, t, out, f[0], f[1], ig, ig + N, NULL, tab, tab, tab, f[8], f[9], win, C, eps,
                                    p, g_rng);
        cuda_fused_embed_ln_backward(g_ctx, t, f[4], f[5], f[6], f[2], f[3], f[7], x, ig, ig + N, NULL, f[0], f[1], tab,
                                     tab, tab, f[8], win, C, p, g_rng);
    }
    return rc;
}

static void test_ops_table(gemm_type t, int C)
{
    windows win = windows_make(0, 0);
    int N = win.gpu.N, decline = C > CUDA_FUSED_MAX_C;
    size_t NC = (size_t)N * C;
    tensor in = tensor_make(t, 2 * NC, -2, 2); /* x, then the residual */
    tensor tab = tensor_make(GEMM_F32, (size_t)win.gpu.T * C, -1, 1);
    std::vector<int32_t> ids(2 * (size_t)N, 0); /* ids then types: row 0 of the tables */
    for (int n = 0; n < N; n++) ids[n] = n % 3;
    int32_t *ig = (int32_t *)g_gpu.i->alloc(g_gpu.ctx, ids.size() * 4);
    g_gpu.i->upload(g_gpu.ctx, ig, ids.data(), ids.size() * 4);
    op_outs o;
    /* out, sum, dres, dx; mean, rstd, dw, db, dwte, dwpe, dwtt, scratch, w, b */
    size_t c = (size_t)C;
    const size_t n[14] = {NC, NC, NC, NC, (size_t)N, (size_t)N, c, c, 3 * c, c * win.gpu.T, c, NC, c, c};
    for (int k = 0; k < 14; k++) op_outs_add(o, k < 4 ? t : GEMM_F32, n[k]);
    gemm_type was = g_ctx->atype;
    g_ctx->atype = t;
    ops_run(t, o, 0, !decline, in, (const float *)tab.gpu, ig, &win.gpu, C);
    int rc = ops_run(t, o, 1, 0, in, (const float *)tab.gpu, ig, &win.gpu, C);
    g_ctx->atype = was;
    if (synced("ops table")) {
        if (decline)
            check(rc == 4 && op_outs_same(o, 1),
                  "ops table %s C=%d above CUDA_FUSED_MAX_C: %d of 4 declined, nothing written", type_name(t), C, rc);
        else
            check(rc == 0 && op_outs_same(o, 0),
                  "ops table %s C=%d: residual_layernorm_*, embedding_layernorm_* on ctx->atype = the launchers' bits",
                  type_name(t), C);
    }
    op_outs_free(o);
    tensor_free(in);
    tensor_free(tab);
    g_gpu.i->release(g_gpu.ctx, ig);
    windows_free(win);
}

int main(void)
{
    if (backend_cpu_create(&g_cpu, 2)) {
        printf("FAIL cpu backend: %s\n", err_msg());
        return 1;
    }
    cuda_backend_opts o = {0, PREC_FP32, 0};
    if (cuda_backend_create(&g_gpu, &o)) {
        printf("FAIL cuda backend (emulated): %s\n", err_msg());
        return 1;
    }
    g_ctx = (cuda_ctx *)g_gpu.ctx;
    const gemm_type types[] = {GEMM_F32, GEMM_F16, GEMM_BF16};
    /* C 64 and 260: 4-wide accesses, one and three column groups per lane
     * (the last partial); 30 and 130: one element at a time. */
    for (gemm_type t : types)
        for (int packed = 0; packed < 2; packed++) {
            for (float p : {0.0f, 0.1f})
                for (int C : {64, 30}) test_residual_ln(t, packed, 0, p, C);
            for (int C : {260, 130}) test_residual_ln(t, packed, 1, 0.1f, C);
        }
    const mt_case cases[] = {
        {"no clip (max_norm 0)", 1.0f, 0.0, 0},
        {"unscale 1/1024, clip to 1", 1.0f / 1024, 1.0, 0},
        {"unscale 1/1024, norm under max", 1.0f / 1024, 1e9, 0},
        {"inf gradient: skipped", 1.0f / 1024, 1.0, 1},
        {"NaN gradient: skipped", 1.0f / 1024, 1.0, 2},
    };
    for (const mt_case &k : cases)
        for (gemm_type c : {GEMM_F16, GEMM_BF16}) test_mt_adamw(c, k);
    test_mt_split();
    const multi_case mcases[] = {
        {"clip to 1, unscale 1", 1.0f, 1.0, 0, 0, 0},
        {"unscale 1/1024, clip to 1e-3", 1.0f / 1024, 1e-3, 0, 0, 0},
        {"no clip (max_norm 0)", 1.0f / 1024, 0.0, 0, 0, 0},
        {"the caller's sum (ranks)", 1.0f, 1.0, 1, 0, 0},
        {"NaN gradient in step 2", 1.0f / 1024, 1.0, 0, 1, 0},
        {"NaN, the caller's sum", 1.0f, 1.0, 1, 1, 0},
        {"planted fault", 1.0f, 1.0, 0, 0, 1},
    };
    for (const multi_case &k : mcases) test_adamw_multi(k);
    test_adamw_multi_gap();
    for (gemm_type t : types)
        for (int packed = 0; packed < 2; packed++) {
            for (float p : {0.0f, 0.1f})
                for (int C : {64, 30}) test_embed_ln(t, packed, 0, p, C);
            for (int C : {260, 130}) test_embed_ln(t, packed, 1, 0.1f, C);
        }
    for (gemm_type t : types)
        for (int offset = 0; offset < 2; offset++) test_gelu(t, offset);
    check(!g_cpu.i->residual_layernorm_forward && !g_cpu.i->residual_layernorm_backward &&
              !g_cpu.i->embedding_layernorm_forward && !g_cpu.i->embedding_layernorm_backward,
          "ops table: the CPU backend has no fused LayerNorm ops (bert.c runs the ops they fuse)");
    for (gemm_type t : types) test_ops_table(t, 64);
    test_ops_table(GEMM_F32, CUDA_FUSED_MAX_C + 4);
    backend_free(&g_gpu);
    backend_free(&g_cpu);
    return check_summary();
}
