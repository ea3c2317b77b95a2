/* gpu_check: main, shared helpers, and the op-by-op check (gpu_check.h).
 *
 * The op check runs every op of backend.h on the CPU backend and on the
 * CUDA backend with the same inputs and compares the outputs by relative
 * L2 error, ||cuda - cpu|| / ||cpu||; the windowed ops (embedding,
 * attention, dropout, QA loss) on padded and on packed windows. Bounds, per
 * precision of the GEMMs (they are estimates: an fp16/bf16 input rounding
 * is 2^-11 / 2^-8 relative, accumulated in fp32; run.sh prints the
 * measured figure next to the bound):
 *   no GEMM: embedding, dropout, add, scale, AdamW   1e-6 (most agree bit for bit)
 *            layernorm, gelu, QA loss                1e-5
 *   GEMM ops: matmul, padded attention   fp32 1e-5, tf32 3e-3, fp16 3e-3, bf16 2e-2
 *   packed attention (fp32 kernels in every precision)   1e-5, gradients 2e-5
 * Activation memory (backend_act) holds the CUDA backend's activation type
 * (backend_act_type): its inputs are uploaded rounded to that type, and the
 * CPU's inputs are rounded the same way, so both compute from the same
 * values; where the type is 16 bits, an activation output is rounded once
 * more on the GPU, which adds up to the type's unit roundoff (fp16 2^-11,
 * bf16 2^-8 relative per element, so in the relative L2 error too) to its
 * bound above. fp32 activations add nothing. */
#include "gpu_check.h"

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda_module.h"
#include "backend/workspace_rules.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/rng.h"
#include "data/random_batch.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

const char *gc_out_dir = ".";
int gc_failures = 0;
int gc_small = 0;

void gc_result(int ok, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    printf("%s %s\n", ok ? "PASS" : "FAIL", line);
    fflush(stdout);
    if (!ok) gc_failures++;
    FILE *f = NULL;
    char path[4096];
    snprintf(path, sizeof path, "%s/results.txt", gc_out_dir);
    if ((f = fopen(path, "a")) != NULL) {
        fprintf(f, "%s %s\n", ok ? "PASS" : "FAIL", line);
        fclose(f);
    }
}

FILE *gc_open(const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", gc_out_dir, name);
    FILE *f = fopen(path, "w");
    if (!f) gc_result(0, "cannot write %s", path);
    return f;
}

double gc_rel_l2(const float *a, const float *b, size_t n, double floor, double *max_abs)
{
    double d2 = 0, b2 = 0, mx = 0;
    int nonfinite = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)b[i];
        if (!isfinite(a[i]) != !isfinite(b[i])) nonfinite = 1;
        if (isfinite(d)) {
            d2 += d * d;
            mx = fmax(mx, fabs(d));
        }
        if (isfinite(b[i])) b2 += (double)b[i] * b[i];
    }
    if (max_abs) *max_abs = nonfinite ? INFINITY : mx;
    if (nonfinite) return INFINITY;
    return sqrt(d2) / fmax(sqrt(b2), floor > 0 ? floor : 1e-30);
}

float gc_uniform(uint64_t *s, float lo, float hi)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return lo + (hi - lo) * (float)((double)(*s >> 40) / (double)(1ull << 24));
}

int gc_cuda(backend *be, precision_kind p, int64_t limit)
{
    cuda_backend_opts o = {0, p, limit};
    return cuda_backend_create(be, &o);
}

int gc_precisions(precision_kind *out)
{
    char name[128], why[256];
    int major = 0, minor = 0, n = 0;
    int64_t total = 0;
    if (!cuda_probe(0, name, sizeof name, &major, &minor, &total, why, sizeof why)) return 0;
    out[n++] = PREC_FP32;
    out[n++] = PREC_TF32;
    out[n++] = PREC_FP16;
    if (major >= 8) out[n++] = PREC_BF16;
    return n;
}

void gc_batch_init(gc_batch *b, int B, int T, int V, uint64_t seed)
{
    size_t BT = (size_t)B * T;
    b->B = B;
    b->T = T;
    b->ids = calloc(BT, sizeof(int32_t));
    b->types = calloc(BT, sizeof(int32_t));
    b->mask = calloc(BT, sizeof(int32_t));
    b->sp = calloc((size_t)B, sizeof(int32_t));
    b->ep = calloc((size_t)B, sizeof(int32_t));
    random_batch_fill(b->ids, b->types, b->mask, b->sp, b->ep, B, T, V, 1, seed);
}

void gc_batch_free(gc_batch *b)
{
    free(b->ids);
    free(b->types);
    free(b->mask);
    free(b->sp);
    free(b->ep);
}

bert_batch gc_bert_batch(const gc_batch *b)
{
    bert_batch x = {b->B, b->T, b->ids, b->types, b->mask, b->sp, b->ep, NULL, 0};
    return x;
}

/* ------------------------------------------------------------------------
 * The op check. Buffers exist on both backends; ops run on both; outputs
 * are downloaded and compared. */

static backend g_cpu, g_gpu;
static const char *g_prec = "";

/* n values on both backends: fp32 (act 0: parameters, gradients,
 * statistics, ints), or activations (act 1: the GPU's of its activation
 * type, the CPU's fp32). */
typedef struct {
    float *c, *g;
    size_t n;
    int act;
} buf2;

/* The GPU's activation type when act, else fp32. */
static backend_dtype b2_type(int act)
{
    return act ? backend_act_type(&g_gpu) : BACKEND_F32;
}

/* Bytes of an element of a buf2's GPU side. */
static size_t b2_esize(int act)
{
    return act ? backend_act_size(&g_gpu) : 4;
}

static buf2 b2_make(size_t n, const float *host, int act)
{
    buf2 b = {g_cpu.i->alloc(g_cpu.ctx, n * 4 + 4), g_gpu.i->alloc(g_gpu.ctx, n * 4 + 4), n, act};
    if (!b.c || !b.g) {
        fprintf(stderr, "gpu_check: allocation of %zu floats: %s\n", n, err_msg());
        exit(1);
    }
    size_t esize = b2_esize(act);
    if (g_gpu.i->annotate && n) /* the stand-in's race check: a kernel reaching past the tensor is stopped */
        g_gpu.i->annotate(g_gpu.ctx, b.g, n * esize, "an ops-check tensor");
    if (host) {
        /* both sides from the values the GPU's type holds */
        float *r = malloc(n * 4 + 4);
        memcpy(r, host, n * 4);
        backend_act_round(b2_type(act), r, n);
        g_cpu.i->upload(g_cpu.ctx, b.c, r, n * 4);
        if (act) backend_act_upload(&g_gpu, b.g, r, n);
        else g_gpu.i->upload(g_gpu.ctx, b.g, r, n * 4);
        free(r);
    } else {
        g_cpu.i->zero(g_cpu.ctx, b.c, n * 4);
        g_gpu.i->zero(g_gpu.ctx, b.g, n * esize);
    }
    return b;
}

static buf2 b2_new(size_t n, const float *host)
{
    return b2_make(n, host, 0);
}

/* Activations: zeros, or host's values. */
static buf2 b2_act(size_t n, const float *host)
{
    return b2_make(n, host, 1);
}

/* Element i of x's GPU side (activations of the GPU's type). */
static void *b2_gpu_at(buf2 x, size_t i)
{
    return (char *)x.g + i * b2_esize(x.act);
}

static void b2_free(buf2 b)
{
    g_cpu.i->release(g_cpu.ctx, b.c);
    g_gpu.i->release(g_gpu.ctx, b.g);
}

static buf2 b2_rand_as(size_t n, uint64_t *s, float lo, float hi, int act)
{
    float *h = malloc(n * 4 + 4);
    for (size_t i = 0; i < n; i++) h[i] = gc_uniform(s, lo, hi);
    buf2 b = b2_make(n, h, act);
    free(h);
    return b;
}

static buf2 b2_rand(size_t n, uint64_t *s, float lo, float hi)
{
    return b2_rand_as(n, s, lo, hi, 0);
}

/* Random activations. */
static buf2 b2_arand(size_t n, uint64_t *s, float lo, float hi)
{
    return b2_rand_as(n, s, lo, hi, 1);
}

/* The CPU side's values of x in a new fp32 pair (an fp32 op's input taken
 * from an activation). */
static buf2 b2_fp32_of(buf2 x)
{
    float *h = malloc(x.n * 4 + 4);
    g_cpu.i->sync(g_cpu.ctx);
    g_cpu.i->download(g_cpu.ctx, h, x.c, x.n * 4);
    buf2 b = b2_new(x.n, h);
    free(h);
    return b;
}

/* The unit roundoff of x's GPU type: what one rounding of an output adds
 * to its bound (see the top). */
static double b2_round_tol(buf2 x)
{
    backend_dtype t = b2_type(x.act);
    return t == BACKEND_F16 ? 0x1p-11 : t == BACKEND_BF16 ? 0x1p-8 : 0;
}

/* int32 arrays as buf2 (the pointers are reinterpreted by the caller). */
static buf2 b2_ints(const int32_t *h, size_t n)
{
    return b2_new(n, (const float *)(const void *)h);
}

static void b2_cmp(const char *op, const char *what, buf2 x, double tol)
{
    float *a = malloc(x.n * 4 + 4), *b = malloc(x.n * 4 + 4);
    int rc = g_gpu.i->sync(g_gpu.ctx);
    if (rc) gc_result(0, "ops %s %s %s: the CUDA backend failed: %s", g_prec, op, what, err_msg());
    g_cpu.i->sync(g_cpu.ctx);
    if (x.act) backend_act_download(&g_gpu, a, x.g, x.n);
    else g_gpu.i->download(g_gpu.ctx, a, x.g, x.n * 4);
    g_cpu.i->download(g_cpu.ctx, b, x.c, x.n * 4);
    double mx = 0, r = gc_rel_l2(a, b, x.n, 1e-30, &mx);
    tol += b2_round_tol(x);
    gc_result(!rc && r <= tol, "ops %-5s %-28s %-6s n=%-8zu rel_l2 %.3e (bound %.2g) max_abs %.3e", g_prec, op, what,
              x.n, r, tol, mx);
    free(a);
    free(b);
}

#define BOTH(call_c, call_g) \
    do {                     \
        call_c;              \
        call_g;              \
    } while (0)

static double gemm_tol(precision_kind p)
{
    return p == PREC_FP32 ? 1e-5 : p == PREC_BF16 ? 2e-2 : 3e-3;
}

/* Attention on windows wc (CPU) and wg (the same on the GPU): padded with
 * a mask, or packed (N rows, NH sum len^2 probs). Where the GPU's attention
 * saves the lse instead of the probabilities (fp16/bf16 on the flash
 * kernels), the two backends' probs hold different things: out and the
 * gradients are compared, and probs is sized for the larger. */
static void ops_attention(const char *kind, const backend_windows *wc, const backend_windows *wg, size_t nprobs,
                          int NH, int HS, buf2 dout, double gt, philox_stream rng, uint64_t *s)
{
    const backend_i *C = g_cpu.i, *G = g_gpu.i;
    void *cc = g_cpu.ctx, *gg = g_gpu.ctx;
    size_t N = (size_t)wc->N, CH = (size_t)NH * HS;
    int lse = backend_attention_saves_lse(&g_gpu, HS);
    size_t saved = backend_attention_saved_floats(lse, N, wc->T, NH, HS);
    if (saved > nprobs) nprobs = saved;
    for (int drop = 0; drop < 2; drop++) {
        float p = drop ? 0.1f : 0.0f;
        char name[64];
        snprintf(name, sizeof name, "attention %s T=%d HS=%d p=%.1f", kind, wc->T, HS, (double)p);
        buf2 q = b2_arand(N * CH, s, -1, 1), kk = b2_arand(N * CH, s, -1, 1);
        buf2 v = b2_arand(N * CH, s, -1, 1), o = b2_act(N * CH, NULL);
        /* probs: activations, or the lse's layout counted in floats */
        buf2 probs = b2_make(nprobs, NULL, !lse), scr = b2_act(nprobs, NULL);
        BOTH(C->attention_forward(cc, o.c, probs.c, q.c, kk.c, v.c, wc, NH, HS, p, rng),
             G->attention_forward(gg, o.g, probs.g, q.g, kk.g, v.g, wg, NH, HS, p, rng));
        if (!lse) b2_cmp(name, "probs", probs, gt);
        b2_cmp(name, "out", o, gt);
        buf2 dq = b2_arand(N * CH, s, -1, 1), dk = b2_arand(N * CH, s, -1, 1);
        buf2 dv = b2_arand(N * CH, s, -1, 1);
        BOTH(C->attention_backward(cc, dq.c, dk.c, dv.c, scr.c, dout.c, q.c, kk.c, v.c, probs.c, wc, NH, HS, p, rng),
             G->attention_backward(gg, dq.g, dk.g, dv.g, scr.g, dout.g, q.g, kk.g, v.g, probs.g, wg, NH, HS, p, rng));
        b2_cmp(name, "dq", dq, 2 * gt);
        b2_cmp(name, "dk", dk, 2 * gt);
        b2_cmp(name, "dv", dv, 2 * gt);
        b2_free(q), b2_free(kk), b2_free(v), b2_free(o), b2_free(probs), b2_free(scr);
        b2_free(dq), b2_free(dk), b2_free(dv);
    }
}

/* Padded attention of B rows of T with mask (host), and the same windows
 * packed: window b holds the prefix of ones of its mask row. */
static void ops_attention_both(int B, int T, int NH, int HS, const int32_t *mask, double gt, philox_stream rng,
                               uint64_t *s)
{
    int32_t *cu = malloc(((size_t)B + 1) * sizeof *cu);
    size_t nprobs = 0;
    int max_len = 0;
    cu[0] = 0;
    for (int b = 0; b < B; b++) {
        int len = 0;
        while (len < T && mask[(size_t)b * T + len]) len++;
        cu[b + 1] = cu[b] + len;
        nprobs += (size_t)NH * len * len;
        if (len > max_len) max_len = len;
    }
    buf2 bm = b2_ints(mask, (size_t)B * T), bcu = b2_ints(cu, (size_t)B + 1);
    size_t CH = (size_t)NH * HS;
    buf2 dout = b2_arand((size_t)B * T * CH, s, -1, 1);
    backend_windows wc = backend_windows_padded(B, T, (int32_t *)bm.c);
    backend_windows wg = backend_windows_padded(B, T, (int32_t *)bm.g);
    ops_attention("padded", &wc, &wg, (size_t)B * NH * T * T, NH, HS, dout, gt, rng, s);
    /* the packed kernels are fp32 in every precision, but for the flash
     * kernels (fp16/bf16), which share the padded ones' band */
    wc = backend_windows_packed((int32_t *)bcu.c, B, T, cu[B], max_len);
    wg = backend_windows_packed((int32_t *)bcu.g, B, T, cu[B], max_len);
    double pt = backend_attention_saves_lse(&g_gpu, HS) ? gt : 1e-5;
    ops_attention("packed", &wc, &wg, nprobs, NH, HS, dout, pt, rng, s);
    b2_free(bm), b2_free(bcu), b2_free(dout);
    free(cu);
}

/* ops_one's shapes: 2 windows of 37 tokens (the GEMMs' unaligned path), 3
 * heads of 32, matmuls to 160 outputs, a vocabulary of 50. */
enum { OPS_B = 2, OPS_T = 37, OPS_NH = 3, OPS_HS = 32, OPS_CH = OPS_NH * OPS_HS, OPS_OC = 160, OPS_V = 50 };

/* Embedding forward and backward, padded and packed; returns the output
 * gradient it used (the next pieces' too). */
static buf2 ops_embedding(uint64_t *s)
{
    const backend_i *C = g_cpu.i, *G = g_gpu.i;
    void *cc = g_cpu.ctx, *gg = g_gpu.ctx;
    enum { B = OPS_B, T = OPS_T, CH = OPS_CH, V = OPS_V };
    int N = B * T;
    int32_t ids[B * T], types[B * T];
    for (int i = 0; i < N; i++) {
        ids[i] = (int32_t)((i * 7 + i / 5) % V);
        types[i] = i % 3 == 0;
    }
    buf2 bid = b2_ints(ids, N), bty = b2_ints(types, N);
    buf2 wte = b2_rand((size_t)V * CH, s, -1, 1), wpe = b2_rand((size_t)T * CH, s, -1, 1);
    buf2 wtt = b2_rand(2 * CH, s, -1, 1), emb = b2_act((size_t)N * CH, NULL);
    BOTH(C->embedding_forward(cc, emb.c, (int32_t *)bid.c, (int32_t *)bty.c, NULL, wte.c, wpe.c, wtt.c, N, T, CH),
         G->embedding_forward(gg, emb.g, (int32_t *)bid.g, (int32_t *)bty.g, NULL, wte.g, wpe.g, wtt.g, N, T, CH));
    b2_cmp("embedding_forward", "out", emb, 1e-6);
    buf2 dout = b2_arand((size_t)N * CH, s, -1, 1);
    buf2 dwte = b2_rand((size_t)V * CH, s, -1, 1), dwpe = b2_rand((size_t)T * CH, s, -1, 1);
    buf2 dwtt = b2_rand(2 * CH, s, -1, 1);
    BOTH(C->embedding_backward(cc, dwte.c, dwpe.c, dwtt.c, dout.c, (int32_t *)bid.c, (int32_t *)bty.c, NULL, N, T,
                               CH),
         G->embedding_backward(gg, dwte.g, dwpe.g, dwtt.g, dout.g, (int32_t *)bid.g, (int32_t *)bty.g, NULL, N, T,
                               CH));
    b2_cmp("embedding_backward", "dwte", dwte, 1e-6);
    b2_cmp("embedding_backward", "dwpe", dwpe, 1e-6);
    b2_cmp("embedding_backward", "dwtt", dwtt, 1e-6);
    /* packed rows: positions given, repeated and out of order */
    int32_t pos[B * T];
    for (int i = 0; i < N; i++) pos[i] = (int32_t)((i * 11) % T);
    buf2 bpos = b2_ints(pos, N);
    BOTH(C->embedding_forward(cc, emb.c, (int32_t *)bid.c, (int32_t *)bty.c, (int32_t *)bpos.c, wte.c, wpe.c, wtt.c,
                              N, T, CH),
         G->embedding_forward(gg, emb.g, (int32_t *)bid.g, (int32_t *)bty.g, (int32_t *)bpos.g, wte.g, wpe.g, wtt.g,
                              N, T, CH));
    b2_cmp("embedding_forward packed", "out", emb, 1e-6);
    BOTH(C->embedding_backward(cc, dwte.c, dwpe.c, dwtt.c, dout.c, (int32_t *)bid.c, (int32_t *)bty.c,
                               (int32_t *)bpos.c, N, T, CH),
         G->embedding_backward(gg, dwte.g, dwpe.g, dwtt.g, dout.g, (int32_t *)bid.g, (int32_t *)bty.g,
                               (int32_t *)bpos.g, N, T, CH));
    b2_cmp("embedding_backward packed", "dwte", dwte, 1e-6);
    b2_cmp("embedding_backward packed", "dwpe", dwpe, 1e-6);
    b2_cmp("embedding_backward packed", "dwtt", dwtt, 1e-6);
    b2_free(bpos), b2_free(bid), b2_free(bty), b2_free(wte), b2_free(wpe), b2_free(wtt), b2_free(emb);
    b2_free(dwte), b2_free(dwpe), b2_free(dwtt);
    return dout;
}

/* LayerNorm forward and backward (dout: the output gradient); returns its
 * input (the matmuls'). */
static buf2 ops_layernorm(buf2 dout, uint64_t *s)
{
    const backend_i *C = g_cpu.i, *G = g_gpu.i;
    void *cc = g_cpu.ctx, *gg = g_gpu.ctx;
    enum { CH = OPS_CH };
    int N = OPS_B * OPS_T;
    buf2 x = b2_arand((size_t)N * CH, s, -2, 3), lw = b2_rand(CH, s, 0.5f, 1.5f), lb = b2_rand(CH, s, -1, 1);
    buf2 y = b2_act((size_t)N * CH, NULL), mean = b2_new(N, NULL), rstd = b2_new(N, NULL);
    BOTH(C->layernorm_forward(cc, y.c, mean.c, rstd.c, x.c, lw.c, lb.c, N, CH, 1e-12f),
         G->layernorm_forward(gg, y.g, mean.g, rstd.g, x.g, lw.g, lb.g, N, CH, 1e-12f));
    b2_cmp("layernorm_forward", "out", y, 1e-5);
    b2_cmp("layernorm_forward", "rstd", rstd, 1e-5);
    buf2 dx = b2_arand((size_t)N * CH, s, -1, 1), dlw = b2_rand(CH, s, -1, 1), dlb = b2_rand(CH, s, -1, 1);
    BOTH(C->layernorm_backward(cc, dx.c, dlw.c, dlb.c, dout.c, x.c, lw.c, mean.c, rstd.c, N, CH),
         G->layernorm_backward(gg, dx.g, dlw.g, dlb.g, dout.g, x.g, lw.g, mean.g, rstd.g, N, CH));
    b2_cmp("layernorm_backward", "dinp", dx, 1e-5);
    b2_cmp("layernorm_backward", "dw", dlw, 1e-5);
    b2_cmp("layernorm_backward", "db", dlb, 1e-5);
    b2_free(lw), b2_free(lb), b2_free(y), b2_free(mean), b2_free(rstd), b2_free(dx), b2_free(dlw), b2_free(dlb);
    return x;
}

/* matmul on input x, with and without bias, OC = 160 and OC = 2 (the QA
 * head); GELU. */
static void ops_matmul_gelu(buf2 x, double gt, uint64_t *s)
{
    const backend_i *C = g_cpu.i, *G = g_gpu.i;
    void *cc = g_cpu.ctx, *gg = g_gpu.ctx;
    enum { CH = OPS_CH, I = 4 * OPS_CH };
    int N = OPS_B * OPS_T;
    int ocs[2] = {OPS_OC, 2};
    for (int k = 0; k < 2; k++) {
        int oc = ocs[k];
        char name[32];
        snprintf(name, sizeof name, "matmul OC=%d", oc);
        buf2 w = b2_rand((size_t)oc * CH, s, -0.2f, 0.2f), bias = b2_rand(oc, s, -1, 1);
        buf2 out = b2_act((size_t)N * oc, NULL);
        BOTH(C->matmul_forward(cc, out.c, x.c, w.c, bias.c, N, CH, oc),
             G->matmul_forward(gg, out.g, x.g, w.g, bias.g, N, CH, oc));
        b2_cmp(name, "out", out, gt);
        BOTH(C->matmul_forward(cc, out.c, x.c, w.c, NULL, N, CH, oc),
             G->matmul_forward(gg, out.g, x.g, w.g, NULL, N, CH, oc));
        b2_cmp(name, "out (no bias)", out, gt);
        buf2 d = b2_arand((size_t)N * oc, s, -1, 1), di = b2_arand((size_t)N * CH, s, -1, 1);
        buf2 dw = b2_rand((size_t)oc * CH, s, -1, 1), db = b2_rand(oc, s, -1, 1);
        BOTH(C->matmul_backward(cc, di.c, dw.c, db.c, d.c, x.c, w.c, N, CH, oc),
             G->matmul_backward(gg, di.g, dw.g, db.g, d.g, x.g, w.g, N, CH, oc));
        b2_cmp(name, "dinp", di, gt);
        b2_cmp(name, "dw", dw, gt);
        b2_cmp(name, "db", db, 1e-6);
        b2_free(w), b2_free(bias), b2_free(out), b2_free(d), b2_free(di), b2_free(dw), b2_free(db);
    }

    /* Q, K, V at once (matmul_forward_n): weights and biases interleaved
     * as params.c lays them out (one batched GEMM on CUDA), then the
     * outputs in reverse order (unequal spacing: one GEMM each). Its own
     * stream, so the inputs of the ops after it stay as they were. */
    {
        uint64_t s3 = 4321;
        size_t wb = (size_t)OPS_OC * CH + OPS_OC, no = (size_t)N * OPS_OC;
        buf2 wq = b2_rand(3 * wb, &s3, -0.2f, 0.2f), o3 = b2_act(3 * no, NULL);
        for (int pass = 0; pass < 2; pass++) {
            backend_act *oc3[3], *og3[3];
            const float *wc3[3], *wg3[3], *bc3[3], *bg3[3];
            for (int i = 0; i < 3; i++) {
                size_t at = (size_t)(pass ? 2 - i : i) * no;
                oc3[i] = o3.c + at, og3[i] = b2_gpu_at(o3, at);
                wc3[i] = wq.c + i * wb, wg3[i] = wq.g + i * wb;
                bc3[i] = wc3[i] + (size_t)OPS_OC * CH, bg3[i] = wg3[i] + (size_t)OPS_OC * CH;
            }
            BOTH(C->matmul_forward_n(cc, 3, oc3, x.c, wc3, bc3, N, CH, OPS_OC),
                 G->matmul_forward_n(gg, 3, og3, x.g, wg3, bg3, N, CH, OPS_OC));
            b2_cmp("matmul_forward_n", pass ? "out (q, k, v apart unequally)" : "out (q, k, v, one GEMM)", o3, gt);
        }
        b2_free(wq), b2_free(o3);
    }

    buf2 h = b2_arand((size_t)N * I, s, -5, 5), gy = b2_act((size_t)N * I, NULL);
    BOTH(C->gelu_forward(cc, gy.c, h.c, (size_t)N * I), G->gelu_forward(gg, gy.g, h.g, (size_t)N * I));
    b2_cmp("gelu_forward", "out", gy, 1e-6);
    buf2 gd = b2_arand((size_t)N * I, s, -1, 1), gdi = b2_arand((size_t)N * I, s, -1, 1);
    BOTH(C->gelu_backward(cc, gdi.c, h.c, gd.c, (size_t)N * I), G->gelu_backward(gg, gdi.g, h.g, gd.g, (size_t)N * I));
    b2_cmp("gelu_backward", "dinp", gdi, 1e-5);
    b2_free(h), b2_free(gy), b2_free(gd), b2_free(gdi);
}

/* dropout: flat (one window of n rows of 1), and on the packed rows of CH
 * of windows cu; add; scale. */
static void ops_dropout_add(const int32_t *cu, buf2 bcu, philox_stream rng, uint64_t *s)
{
    const backend_i *C = g_cpu.i, *G = g_gpu.i;
    void *cc = g_cpu.ctx, *gg = g_gpu.ctx;
    enum { B = OPS_B, T = OPS_T, CH = OPS_CH };
    size_t n = (size_t)B * T * CH + 3; /* not a multiple of 4 */
    buf2 a = b2_arand(n, s, -2, 2), a2 = b2_arand(n, s, -2, 2), r = b2_act(n, NULL);
    backend_windows wf = backend_windows_padded(1, (int)n, NULL);
    BOTH(C->dropout_forward(cc, r.c, a.c, &wf, 1, 0.1f, rng), G->dropout_forward(gg, r.g, a.g, &wf, 1, 0.1f, rng));
    b2_cmp("dropout_forward", "out", r, 1e-6);
    BOTH(C->dropout_backward(cc, r.c, a2.c, &wf, 1, 0.1f, rng), G->dropout_backward(gg, r.g, a2.g, &wf, 1, 0.1f, rng));
    b2_cmp("dropout_backward", "dinp", r, 1e-6);
    backend_windows wc = backend_windows_packed((int32_t *)bcu.c, B, T, cu[B], T);
    backend_windows wg = backend_windows_packed((int32_t *)bcu.g, B, T, cu[B], T);
    buf2 rk = b2_act((size_t)cu[B] * CH, NULL);
    BOTH(C->dropout_forward(cc, rk.c, a.c, &wc, CH, 0.1f, rng), G->dropout_forward(gg, rk.g, a.g, &wg, CH, 0.1f, rng));
    b2_cmp("dropout_forward packed", "out", rk, 1e-6);
    BOTH(C->dropout_backward(cc, rk.c, a2.c, &wc, CH, 0.1f, rng),
         G->dropout_backward(gg, rk.g, a2.g, &wg, CH, 0.1f, rng));
    b2_cmp("dropout_backward packed", "dinp", rk, 1e-6);
    b2_free(rk);
    BOTH(C->add(cc, r.c, a.c, a2.c, n), G->add(gg, r.g, a.g, a2.g, n));
    b2_cmp("add", "out", r, 1e-6);
    /* scale is an fp32 op (gradients): on the CPU's sum, in fp32 on both */
    buf2 r32 = b2_fp32_of(r);
    BOTH(C->scale(cc, r32.c, n, 0.37f), G->scale(gg, r32.g, n, 0.37f));
    b2_cmp("scale", "x", r32, 1e-6);
    b2_free(a), b2_free(a2), b2_free(r), b2_free(r32);
}

/* QA loss: row 0 normal, row 1 start past T (ignored), end negative
 * (clamped to 0); padded, padded with the mask (row 1 over 31 positions),
 * packed (windows cu). */
static void ops_qa_loss(const int32_t *mask, const int32_t *cu, buf2 bcu, uint64_t *s)
{
    const backend_i *C = g_cpu.i, *G = g_gpu.i;
    void *cc = g_cpu.ctx, *gg = g_gpu.ctx;
    enum { B = OPS_B, T = OPS_T };
    int N = B * T;
    int32_t st[B] = {5, T + 3}, en[B] = {-2, 9};
    buf2 bst = b2_ints(st, B), ben = b2_ints(en, B), bmask = b2_ints(mask, N);
    buf2 lg = b2_arand((size_t)N * 2, s, -3, 3), dl = b2_act((size_t)N * 2, NULL), ls = b2_new(1, NULL);
    for (int k = 0; k < 3; k++) {
        static const char *const kinds[3] = {"qa_loss", "qa_loss masked", "qa_loss packed"};
        backend_windows wc = backend_windows_padded(B, T, NULL), wg = wc;
        if (k == 1) {
            wc = backend_windows_padded(B, T, (int32_t *)bmask.c);
            wg = backend_windows_padded(B, T, (int32_t *)bmask.g);
        } else if (k == 2) {
            wc = backend_windows_packed((int32_t *)bcu.c, B, T, cu[B], T);
            wg = backend_windows_packed((int32_t *)bcu.g, B, T, cu[B], T);
        }
        BOTH(C->qa_loss(cc, ls.c, dl.c, lg.c, (int32_t *)bst.c, (int32_t *)ben.c, &wc, 0.5f),
             G->qa_loss(gg, ls.g, dl.g, lg.g, (int32_t *)bst.g, (int32_t *)ben.g, &wg, 0.5f));
        b2_cmp(kinds[k], "loss", ls, 1e-5);
        b2_cmp(kinds[k], "dlogits", dl, 1e-5);
    }
    b2_free(bst), b2_free(ben), b2_free(bmask), b2_free(lg), b2_free(dl), b2_free(ls);
}

/* sum_squares, all_finite; AdamW on 1000 elements with decay, and without. */
static void ops_sums_adamw(uint64_t *s)
{
    const backend_i *C = g_cpu.i, *G = g_gpu.i;
    void *cc = g_cpu.ctx, *gg = g_gpu.ctx;
    size_t big = 1000003;
    buf2 sq = b2_rand(big, s, -1, 1);
    double sc = C->sum_squares(cc, sq.c, big), sg = G->sum_squares(gg, sq.g, big);
    gc_result(fabs(sc - sg) <= 1e-12 * sc, "ops %-5s sum_squares n=%zu: cuda %.17g cpu %.17g", g_prec, big, sg, sc);
    double sg2 = G->sum_squares(gg, sq.g, big);
    gc_result(sg2 == sg, "ops %-5s sum_squares repeats bit for bit", g_prec);
    int f1 = G->all_finite(gg, sq.g, big);
    float bad[2] = {INFINITY, NAN};
    int f_inf, f_nan;
    G->upload(gg, sq.g + 77777, &bad[0], 4);
    f_inf = G->all_finite(gg, sq.g, big);
    G->upload(gg, sq.g + 77777, &bad[1], 4);
    f_nan = G->all_finite(gg, sq.g, big);
    gc_result(f1 == 1 && f_inf == 0 && f_nan == 0, "ops %-5s all_finite: finite %d, with inf %d, with NaN %d", g_prec,
              f1, f_inf, f_nan);

    size_t na = 1000;
    buf2 pp = b2_rand(na, s, -1, 1), pg = b2_rand(na, s, -1, 1), pm = b2_rand(na, s, -0.1f, 0.1f);
    buf2 pv = b2_rand(na, s, 0, 0.01f);
    BOTH(C->adamw(cc, pp.c, pg.c, pm.c, pv.c, na, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 3, 0.5f),
         G->adamw(gg, pp.g, pg.g, pm.g, pv.g, na, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 3, 0.5f));
    BOTH(C->adamw(cc, pp.c, pg.c, pm.c, pv.c, na, 2e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 4, 1.0f),
         G->adamw(gg, pp.g, pg.g, pm.g, pv.g, na, 2e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 4, 1.0f));
    b2_cmp("adamw", "p", pp, 1e-6);
    b2_cmp("adamw", "m", pm, 1e-6);
    b2_cmp("adamw", "v", pv, 1e-6);
    b2_free(sq), b2_free(pp), b2_free(pg), b2_free(pm), b2_free(pv);
}

/* Every op once on both backends, the pieces in the order they draw their
 * inputs from one stream. */
static void ops_one(precision_kind prec)
{
    enum { B = OPS_B, T = OPS_T };
    uint64_t s = 1234;
    double gt = gemm_tol(prec);
    philox_stream rng = {7, 3, 17};
    int32_t mask[B * T];
    for (int i = 0; i < B * T; i++) mask[i] = !(i >= T && i % T > 30); /* row 1 padded after 30 */

    buf2 dout = ops_embedding(&s);
    buf2 x = ops_layernorm(dout, &s);
    ops_matmul_gelu(x, gt, &s);

    /* attention, without and with dropout: the odd shape above (T 37, the
     * GEMMs' unaligned path) and a BERT-like one (T 128, HS 64, Tensor Cores) */
    ops_attention_both(B, T, OPS_NH, OPS_HS, mask, gt, rng, &s);
    {
        enum { B2 = 2, T2 = 128 };
        int32_t m2[B2 * T2];
        for (int i = 0; i < B2 * T2; i++) m2[i] = !(i >= T2 && i % T2 >= 100);
        ops_attention_both(B2, T2, 4, 64, m2, gt, rng, &s);
    }

    /* window 1 cut at 31 tokens, as the mask */
    int32_t cu[B + 1] = {0, T, T + 31};
    buf2 bcu = b2_ints(cu, B + 1);
    ops_dropout_add(cu, bcu, rng, &s);
    ops_qa_loss(mask, cu, bcu, &s);
    b2_free(bcu);
    ops_sums_adamw(&s);
    b2_free(dout), b2_free(x);
}

/* The CUDA table from the op list (backend.h): every required op, the
 * activation type of prec (fp32, or 16 bits in fp16/bf16 where
 * cuda_ws_act_elem says), no extras behind the door, so answers in
 * bf16/int8 are refused and batch invariance is not honoured. */
static void ops_door(backend *g, precision_kind prec)
{
    backend_dtype want = BACKEND_F32;
    if (cuda_ws_act_elem(prec == PREC_FP16 || prec == PREC_BF16) == 2)
        want = prec == PREC_FP16 ? BACKEND_F16 : BACKEND_BF16;
    int ok = backend_act_type(g) == want;
#define BACKEND_OP(name, ret, params) ok = ok && g->i->name != NULL;
#define BACKEND_OPT(name, cpu, cuda, ret, params) ok = ok && (g->i->name != NULL) == (cuda);
#include "backend/ops.def"
    ok = ok && backend_get_proc(g, BACKEND_PROC_ANSWER_PRECISION) == NULL && backend_set_batch_invariant(g, 1) == 0 &&
         backend_set_answer_precision(g, PREC_FP32, NULL, 0) == 0 &&
         backend_set_answer_precision(g, PREC_INT8, NULL, 0) == ERR_INPUT;
    gc_result(ok, "ops %s: the table from ops.def, %s activations, nothing behind the door", g_prec,
              want == BACKEND_F32 ? "fp32" : "16-bit");
}

int gc_ops(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    precision_kind precs[4];
    int np = gc_precisions(precs);
    if (np == 0) {
        gc_result(0, "ops: no usable CUDA device");
        return 1;
    }
    if (backend_cpu_create(&g_cpu, 0)) {
        gc_result(0, "ops: CPU backend: %s", err_msg());
        return 1;
    }
    for (int i = 0; i < np; i++) {
        g_prec = select_precision_name(precs[i]);
        if (gc_cuda(&g_gpu, precs[i], 0)) {
            gc_result(0, "ops %s: CUDA backend: %s", g_prec, err_msg());
            continue;
        }
        ops_one(precs[i]);
        ops_door(&g_gpu, precs[i]);
        backend_free(&g_gpu);
    }
    backend_free(&g_cpu);
    return gc_failures ? 1 : 0;
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*fn)(int, char **);
    } cmds[] = {
        {"ops", gc_ops},       {"model", gc_model}, {"train", gc_train},     {"memory", gc_memory},
        {"oom", gc_oom},       {"bench", gc_bench}, {"maxbatch", gc_maxbatch},
        {"varlen", gc_varlen}, {"nccl", gc_nccl},
    };
    if (argc < 2) {
        fprintf(stderr, "usage: gpu_check ops|model|train|memory|oom|bench|maxbatch|varlen|nccl [--out DIR] [--small] [options]\n");
        return 2;
    }
    for (int i = 2; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--out")) gc_out_dir = argv[i + 1];
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], "--small")) gc_small = 1;
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* The CUDA backend is linked in here (bertc_cuda_objs): select.c's
     * calls (backend_mem_query, ...) use it instead of loading the module. */
    cuda_module_use(cuda_backend_api());
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        if (!strcmp(argv[1], cmds[i].name)) {
            log_quiet(1);
            int rc = cmds[i].fn(argc - 1, argv + 1);
            return rc ? rc : gc_failures ? 1 : 0;
        }
    fprintf(stderr, "gpu_check: unknown check '%s'\n", argv[1]);
    return 2;
}
