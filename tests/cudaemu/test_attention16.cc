/* cudaemu_attention16: the CUDA backend's attention_forward and
 * attention_backward (cuda_attention.cu, cuda_flash.cu, cuda_varlen.cu)
 * on 16-bit activations (cuda_ctx.atype = gtype, fp16 and bf16), on the
 * CPU stand-in, against the CPU backend's fp32 attention.
 *
 * q, k, v, dout and the gradients' starting values are drawn and rounded
 * to the 16-bit type; the CPU backend gets the rounded values as fp32, so
 * the comparison measures the GPU's 16-bit P, dS and stores. The
 * gradients start non-zero: backward adds (+=, backend.h) and the CPU's
 * sum is the reference. Cases: padded windows with a suffix mask (real
 * lengths T, a middle one and 1) and packed windows (lengths 1 to T), head
 * sizes 32 and 64 (the flash kernels, in place on the [N, C] activations)
 * and 24 (off flash: the padded path's 16-bit GEMMs over per-head copies,
 * the packed kernels templated on the type), without and with dropout
 * (p 0.1: the CPU's masks at the padded flat index; a CPU run with another
 * seed must then differ by more than 10x the band).
 *
 * The band, of the tensor's largest magnitude: a few units of the type's
 * rounding (2^-11 fp16, 2^-8 bf16): each output is rounded once (<= half
 * a unit), and P, dS (and off flash the per-head GEMM inputs' products'
 * P') enter Tensor Core products rounded to 16 bits; 2e-3 (fp16) and
 * 1.5e-2 (bf16), test_flash's. Also checked: the saved output copy after
 * lse (backend_attention_saved_floats) holds out's bytes, and the door's
 * attention_saves_lse is the flash rule. Prints each comparison; exits 1
 * when one fails. */
extern "C" {
#include "backend/backend.h"
#include "core/err.h"
}

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_internal.h"
#include "emu_check.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

static backend g_cpu;

static uint32_t g_rng = 4711;
static float frand(void) /* in [-1, 1) */
{
    g_rng = g_rng * 1664525u + 1013904223u;
    return (float)(g_rng >> 8) / (float)(1 << 23) - 1.0f;
}

static uint16_t to16(float x, gemm_type t)
{
    uint16_t b;
    if (t == GEMM_F16) {
        __half h = __float2half_rn(x);
        memcpy(&b, &h, 2);
    } else {
        __nv_bfloat16 h = __float2bfloat16_rn(x);
        memcpy(&b, &h, 2);
    }
    return b;
}

static float from16(uint16_t b, gemm_type t)
{
    if (t == GEMM_F16) {
        __half h;
        memcpy(&h, &b, 2);
        return __half2float(h);
    }
    __nv_bfloat16 h;
    memcpy(&h, &b, 2);
    return __bfloat162float(h);
}

/* A tensor of n values of type t's precision: host fp32, on the CPU
 * backend (fp32) and on the device (16 bits). */
struct act {
    gemm_type t;
    std::vector<float> h;
    float *cpu;
    void *gpu;
};

static act act_make(const backend &g, gemm_type t, size_t n, float amp)
{
    act a{t, std::vector<float>(n), (float *)g_cpu.i->alloc(g_cpu.ctx, n * 4 + 4), g.i->alloc(g.ctx, n * 2 + 4)};
    if (!a.cpu || !a.gpu) exit(2);
    std::vector<uint16_t> b(n);
    for (size_t i = 0; i < n; i++) {
        b[i] = to16(amp * frand(), t);
        a.h[i] = from16(b[i], t);
    }
    g_cpu.i->upload(g_cpu.ctx, a.cpu, a.h.data(), n * 4);
    g.i->upload(g.ctx, a.gpu, b.data(), n * 2);
    return a;
}

static void act_free(const backend &g, act &a)
{
    g_cpu.i->release(g_cpu.ctx, a.cpu);
    g.i->release(g.ctx, a.gpu);
}

static std::vector<float> gpu_values(const backend &g, const void *p, size_t n, gemm_type t)
{
    std::vector<uint16_t> b(n);
    g.i->download(g.ctx, b.data(), p, n * 2);
    std::vector<float> f(n);
    for (size_t i = 0; i < n; i++) f[i] = from16(b[i], t);
    return f;
}

static std::vector<float> cpu_values(const float *p, size_t n)
{
    std::vector<float> f(n);
    g_cpu.i->download(g_cpu.ctx, f.data(), p, n * 4);
    return f;
}

static double rel_err(const std::vector<float> &a, const std::vector<float> &b)
{
    return emu_rel_err(a.data(), b.data(), a.size());
}

struct att_case {
    const char *name;
    std::vector<int> lens; /* packed: the windows' lengths; padded: the real tokens of each window of T */
    int padded, T, NH, HS;
    float p;
};

/* The windows of a case, with host (cu, mask) and device copies. */
struct windows {
    std::vector<int32_t> cu, mask;
    int32_t *dcu = NULL, *dmask = NULL;
    backend_windows wh, wd;
};

static windows windows_make(const backend &g, const att_case &c)
{
    windows w;
    int B = (int)c.lens.size(), max_len = 0;
    w.cu.assign(B + 1, 0);
    for (int b = 0; b < B; b++) {
        w.cu[b + 1] = w.cu[b] + c.lens[b];
        max_len = std::max(max_len, c.lens[b]);
    }
    if (c.padded) {
        w.mask.assign((size_t)B * c.T, 0);
        for (int b = 0; b < B; b++)
            for (int j = 0; j < c.lens[b]; j++) w.mask[(size_t)b * c.T + j] = 1;
        w.dmask = (int32_t *)g.i->alloc(g.ctx, w.mask.size() * 4);
        g.i->upload(g.ctx, w.dmask, w.mask.data(), w.mask.size() * 4);
        w.wh = backend_windows_padded(B, c.T, w.mask.data());
        w.wd = backend_windows_padded(B, c.T, w.dmask);
    } else {
        w.dcu = (int32_t *)g.i->alloc(g.ctx, w.cu.size() * 4);
        g.i->upload(g.ctx, w.dcu, w.cu.data(), w.cu.size() * 4);
        w.wh = backend_windows_packed(w.cu.data(), B, c.T, w.cu[B], max_len);
        w.wd = backend_windows_packed(w.dcu, B, c.T, w.cu[B], max_len);
    }
    return w;
}

/* out, dq, dk, dv of the CPU backend for q, k, v, dout and the gradients'
 * starting values (all fp32 copies of the 16-bit ones). */
static std::vector<std::vector<float>> cpu_attention(act &q, act &k, act &v, act &dout, act *g0, const windows &w,
                                                     const att_case &c, philox_stream rng)
{
    size_t n = q.h.size(), np = backend_attention_saved_floats(0, (size_t)w.wh.N, c.T, c.NH, c.HS);
    float *O = (float *)g_cpu.i->alloc(g_cpu.ctx, n * 4), *P = (float *)g_cpu.i->alloc(g_cpu.ctx, np * 4 + 4),
          *S = (float *)g_cpu.i->alloc(g_cpu.ctx, np * 4 + 4), *G[3];
    for (int i = 0; i < 3; i++) {
        G[i] = (float *)g_cpu.i->alloc(g_cpu.ctx, n * 4);
        g_cpu.i->upload(g_cpu.ctx, G[i], g0[i].h.data(), n * 4);
    }
    g_cpu.i->attention_forward(g_cpu.ctx, O, P, q.cpu, k.cpu, v.cpu, &w.wh, c.NH, c.HS, c.p, rng);
    g_cpu.i->attention_backward(g_cpu.ctx, G[0], G[1], G[2], S, dout.cpu, q.cpu, k.cpu, v.cpu, P, &w.wh, c.NH, c.HS,
                                c.p, rng);
    g_cpu.i->sync(g_cpu.ctx);
    std::vector<std::vector<float>> r = {cpu_values(O, n), cpu_values(G[0], n), cpu_values(G[1], n),
                                         cpu_values(G[2], n)};
    for (float *x : {O, P, S, G[0], G[1], G[2]}) g_cpu.i->release(g_cpu.ctx, x);
    return r;
}

static void run_case(const backend &g, gemm_type t, const att_case &c)
{
    const char *tname = t == GEMM_F16 ? "fp16" : "bf16";
    windows w = windows_make(g, c);
    int N = w.wh.N, C = c.NH * c.HS;
    size_t n = (size_t)N * C;
    act q = act_make(g, t, n, 2.0f), k = act_make(g, t, n, 2.0f), v = act_make(g, t, n, 1.0f),
        dout = act_make(g, t, n, 1.0f);
    /* No gradient reaches a padded row in training (test_flash.cc says
     * why its rounding noise would otherwise dominate a short window's dk). */
    if (c.padded) {
        std::vector<uint16_t> zero16((size_t)C, 0);
        for (int b = 0; b < (int)c.lens.size(); b++)
            for (int i = c.lens[b]; i < c.T; i++) {
                size_t at = ((size_t)b * c.T + i) * C;
                std::fill(dout.h.begin() + at, dout.h.begin() + at + C, 0.0f);
                g_cpu.i->upload(g_cpu.ctx, dout.cpu + at, dout.h.data() + at, (size_t)C * 4);
                g.i->upload(g.ctx, (uint16_t *)dout.gpu + at, zero16.data(), (size_t)C * 2);
            }
    }
    act g0[3] = {act_make(g, t, n, 0.5f), act_make(g, t, n, 0.5f), act_make(g, t, n, 0.5f)};
    philox_stream rng = {0x5eed1234abcdull, 5, 3 * 16 + 2};
    std::vector<std::vector<float>> ref = cpu_attention(q, k, v, dout, g0, w, c, rng);

    int lse = backend_attention_saves_lse(&g, c.HS);
    size_t np = backend_attention_saved_floats(lse, (size_t)N, c.T, c.NH, c.HS),
           ns = backend_attention_scratch_floats(lse, (size_t)N, c.T, c.NH);
    void *O = g.i->alloc(g.ctx, n * 2), *P = g.i->alloc(g.ctx, np * 4), *S = ns ? g.i->alloc(g.ctx, ns * 4) : NULL;
    g.i->attention_forward(g.ctx, O, P, q.gpu, k.gpu, v.gpu, &w.wd, c.NH, c.HS, c.p, rng);
    g.i->attention_backward(g.ctx, g0[0].gpu, g0[1].gpu, g0[2].gpu, S, dout.gpu, q.gpu, k.gpu, v.gpu, P, &w.wd,
                            c.NH, c.HS, c.p, rng);
    int rc = g.i->sync(g.ctx);
    std::vector<float> out = gpu_values(g, O, n, t);
    double e[4] = {rel_err(out, ref[0]), 0, 0, 0};
    for (int i = 0; i < 3; i++) e[i + 1] = rel_err(gpu_values(g, g0[i].gpu, n, t), ref[i + 1]);
    double band = t == GEMM_F16 ? 2e-3 : 1.5e-2;
    int flash = lse && c.HS % 16 == 0 && c.HS <= 64;
    check(rc == 0 && e[0] <= band && e[1] <= band && e[2] <= band && e[3] <= band,
          "attention16 %s %-6s %s NH %d HS %d (%s) p %.1f: out %.2e dq %.2e dk %.2e dv %.2e (+= from non-zero; of "
          "the largest; band %.1e)",
          tname, c.name, c.padded ? "padded" : "packed", c.NH, c.HS, flash ? "flash" : "off flash", c.p, e[0], e[1],
          e[2], e[3], band);
    if (lse) {
        std::vector<uint16_t> a(n), s(n);
        g.i->download(g.ctx, a.data(), O, n * 2);
        g.i->download(g.ctx, s.data(), (const float *)P + backend_attention_lse_part((size_t)N, c.NH), n * 2);
        check(a == s, "attention16 %s %-6s: the saved copy after lse holds out's bytes", tname, c.name);
    }
    if (c.p > 0) {
        philox_stream other = rng;
        other.seed++;
        for (int i = 0; i < 3; i++) g_cpu.i->upload(g_cpu.ctx, g0[i].cpu, g0[i].h.data(), n * 4);
        std::vector<std::vector<float>> r2 = cpu_attention(q, k, v, dout, g0, w, c, other);
        double e2 = rel_err(out, r2[0]);
        check(e2 > 10 * band, "attention16 %s %-6s: against the CPU with another dropout seed: out %.2e (the masks are "
                              "compared)", tname, c.name, e2);
    }
    for (act *a : {&q, &k, &v, &dout, &g0[0], &g0[1], &g0[2]}) act_free(g, *a);
    for (void *x : {O, P, S, (void *)w.dcu, (void *)w.dmask})
        if (x) g.i->release(g.ctx, x);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (backend_cpu_create(&g_cpu, 2)) {
        printf("FAIL cpu backend: %s\n", err_msg());
        return 1;
    }
    const att_case cases[] = {
        /* name, lens, padded, T, NH, HS, p */
        {"mask", {40, 17, 1}, 1, 40, 2, 32, 0.0f},
        {"mask", {40, 17, 1}, 1, 40, 2, 32, 0.1f},
        {"varied", {1, 5, 33, 48, 16}, 0, 48, 2, 32, 0.1f},
        {"hs64", {40, 3, 64}, 0, 64, 1, 64, 0.1f},
        {"hs64", {64, 20}, 1, 64, 1, 64, 0.1f},
        {"hs24", {24, 9, 1}, 1, 24, 2, 24, 0.1f},
        {"hs24", {1, 30, 7}, 0, 30, 2, 24, 0.1f},
    };
    for (gemm_type t : {GEMM_F16, GEMM_BF16}) {
        backend g;
        cuda_backend_opts o = {0, t == GEMM_F16 ? PREC_FP16 : PREC_BF16, 0};
        if (cuda_backend_create(&g, &o)) {
            printf("FAIL cuda backend (emulated): %s\n", err_msg());
            return 1;
        }
        cuda_ctx *ctx = (cuda_ctx *)g.ctx;
        ctx->atype = ctx->gtype; /* issue 47's 16-bit activations, before the flip */
        int agree = 1;
        for (int hs = 1; hs <= 160; hs++)
            agree &= backend_attention_saves_lse(&g, hs) == (hs % 16 == 0 && hs <= 64);
        check(agree && ctx->gtype == t && backend_act_size(&g) == 2,
              "attention16 %s: 16-bit activations (2 bytes); saves the lse for HS 16, 32, 48, 64 only (1..160)",
              t == GEMM_F16 ? "fp16" : "bf16");
        for (const att_case &c : cases) run_case(g, t, c);
        backend_free(&g);
    }
    backend_free(&g_cpu);
    return check_summary();
}
