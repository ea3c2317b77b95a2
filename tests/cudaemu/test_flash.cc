/* test_flash: src/backend/cuda/cuda_flash.cu (self-attention on Tensor
 * Cores, 16 bits) on the CPU stand-in, against the CPU backend's
 * attention_forward/attention_backward.
 *
 * Inputs q, k, v and dout are drawn in fp32 and rounded to the 16-bit type;
 * the CPU backend gets the rounded values as fp32, so the comparison
 * measures the kernels' 16-bit P, dS and outputs, not the inputs'
 * rounding. For fp16 and bf16: packed windows of lengths 1 to 70 (one and
 * several key tiles, a window shorter than a tile, a window of one), head
 * sizes 16, 32 and 64, q k v as slices of one [N, 3C] buffer, and padded
 * windows with a suffix mask (-FLT_MAX at padded keys), each without and
 * with dropout (p 0.1, the CPU's masks at
 * the padded flat index). Compared: out, dq, dk, dv (largest error over
 * the tensor's largest magnitude, within a band per type) and lse (against
 * a double loop). With dropout, the CPU run again with another seed must
 * differ by far more than the band, so the masks are really compared.
 * Prints each comparison; exits 1 when one fails. */
#include "cuda_bf16.h"
#include "cuda_fp16.h"
#include "cuda_runtime.h"
#include "emu_check.h"

#include "backend/cuda/cuda_flash.h"
#include "backend/cuda/cuda_ws.h"

extern "C" {
#include "core/err.h"
}

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

static uint32_t rng_state = 777;
static float frand(void) /* in [-1, 1) */
{
    rng_state = rng_state * 1664525u + 1013904223u;
    return (float)(rng_state >> 8) / (float)(1 << 23) - 1.0f;
}

static backend cpu;

template <typename T> static T *dev_upload(const std::vector<T> &h)
{
    void *d = NULL;
    if (cudaMalloc(&d, h.size() * sizeof(T) + 4) != cudaSuccess) exit(2);
    cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice);
    return (T *)d;
}

/* A 16-bit tensor: its bits and the fp32 values they hold. */
struct t16 {
    std::vector<uint16_t> bits;
    std::vector<float> f;
};

static uint16_t round16(float x, cudaDataType_t t)
{
    return t == CUDA_R_16F ? cudaemu_f2h_bits(x) : cudaemu_f2bf_bits(x);
}

static float decode16(uint16_t b, cudaDataType_t t)
{
    return t == CUDA_R_16F ? cudaemu_h2f_bits(b) : cudaemu_bf2f_bits(b);
}

static t16 draw16(size_t n, float amp, cudaDataType_t t)
{
    t16 x;
    x.bits.resize(n);
    x.f.resize(n);
    for (size_t i = 0; i < n; i++) {
        x.bits[i] = round16(amp * frand(), t);
        x.f[i] = decode16(x.bits[i], t);
    }
    return x;
}

static std::vector<float> download16(const void *d, size_t n, cudaDataType_t t)
{
    std::vector<uint16_t> b(n);
    cudaMemcpy(b.data(), d, n * 2, cudaMemcpyDeviceToHost);
    std::vector<float> f(n);
    for (size_t i = 0; i < n; i++) f[i] = decode16(b[i], t);
    return f;
}

static double rel_err(const std::vector<float> &a, const std::vector<float> &b)
{
    return emu_rel_err(a.data(), b.data(), a.size());
}

/* The CPU backend's attention forward and backward on fp32 copies. */
struct cpu_result {
    std::vector<float> out, dq, dk, dv;
};

static float *cpu_buf(const std::vector<float> &h, size_t n)
{
    float *p = (float *)cpu.i->alloc(cpu.ctx, n * 4 + 4);
    if (!p) exit(2);
    memset(p, 0, n * 4);
    if (!h.empty()) memcpy(p, h.data(), h.size() * 4);
    return p;
}

static cpu_result cpu_attention(const t16 &q, const t16 &k, const t16 &v, const t16 &dout, const backend_windows &w,
                                int NH, int HS, float p, philox_stream rng)
{
    size_t n = (size_t)w.N * NH * HS, probs = 0;
    std::vector<int32_t> cu;
    if (w.cu_seqlens) {
        for (int b = 0; b < w.B; b++) {
            size_t l = (size_t)(w.cu_seqlens[b + 1] - w.cu_seqlens[b]);
            probs += l * l;
        }
    } else {
        probs = (size_t)w.B * w.T * w.T;
    }
    probs *= NH;
    float *Q = cpu_buf(q.f, n), *K = cpu_buf(k.f, n), *V = cpu_buf(v.f, n), *O = cpu_buf({}, n),
          *P = cpu_buf({}, probs), *S = cpu_buf({}, probs), *dO = cpu_buf(dout.f, n), *dQ = cpu_buf({}, n),
          *dK = cpu_buf({}, n), *dV = cpu_buf({}, n);
    cpu.i->attention_forward(cpu.ctx, O, P, Q, K, V, &w, NH, HS, p, rng);
    cpu.i->attention_backward(cpu.ctx, dQ, dK, dV, S, dO, Q, K, V, P, &w, NH, HS, p, rng);
    cpu.i->sync(cpu.ctx);
    cpu_result r;
    r.out.assign(O, O + n);
    r.dq.assign(dQ, dQ + n);
    r.dk.assign(dK, dK + n);
    r.dv.assign(dV, dV + n);
    for (float *x : {Q, K, V, O, P, S, dO, dQ, dK, dV}) cpu.i->release(cpu.ctx, x);
    return r;
}

/* lse of every (head, row) in double from the rounded inputs. */
static std::vector<double> ref_lse(const t16 &q, const t16 &k, const std::vector<int> &r0s, const std::vector<int> &lens,
                                   const std::vector<int32_t> &mask, int T, int N, int NH, int HS)
{
    std::vector<double> out((size_t)NH * N, 0.0);
    double scale = backend_score_scale(HS);
    int C = NH * HS;
    for (size_t b = 0; b < lens.size(); b++)
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < lens[b]; i++) {
                std::vector<double> s(lens[b]);
                double mx = -INFINITY, sum = 0;
                for (int j = 0; j < lens[b]; j++) {
                    double d = 0;
                    for (int x = 0; x < HS; x++)
                        d += (double)q.f[(size_t)(r0s[b] + i) * C + h * HS + x] * k.f[(size_t)(r0s[b] + j) * C + h * HS + x];
                    s[j] = d * scale + (!mask.empty() && !mask[b * T + j] ? -FLT_MAX : 0.0);
                    mx = std::max(mx, s[j]);
                }
                for (int j = 0; j < lens[b]; j++) sum += exp(s[j] - mx);
                out[(size_t)h * N + r0s[b] + i] = mx + log(sum);
            }
    return out;
}

/* No atomics: a second forward, and a backward with dk alone, give the
 * bytes of the first (out and dk: rows ld apart, C wide). */
static bool same_bytes_again(cudaDataType_t t, const void *O, const void *dK, const void *Q, const void *K,
                             const void *V, const void *dO, float *lse, float *dvec, const backend_windows &wd, int NH,
                             int HS, int ld, int N, float p, philox_stream rng)
{
    int C = NH * HS;
    size_t n = (size_t)N * C, span = (size_t)(N - 1) * ld + C;
    void *O2, *dK2;
    cudaMalloc(&O2, n * 2);
    cudaMalloc(&dK2, span * 2);
    flash_attention_forward(0, t, O2, NULL, lse, Q, K, V, &wd, NH, HS, ld, p, rng);
    flash_attention_backward(0, t, NULL, dK2, NULL, dvec, dO, O2, Q, K, V, lse, &wd, NH, HS, ld, p, rng, 0);
    std::vector<uint16_t> a(n), a2(n), g(n), g2(n);
    cudaMemcpy(a.data(), O, n * 2, cudaMemcpyDeviceToHost);
    cudaMemcpy(a2.data(), O2, n * 2, cudaMemcpyDeviceToHost);
    for (size_t r = 0; r < (size_t)N; r++) {
        cudaMemcpy(g.data() + r * C, (const uint16_t *)dK + r * ld, C * 2, cudaMemcpyDeviceToHost);
        cudaMemcpy(g2.data() + r * C, (uint16_t *)dK2 + r * ld, C * 2, cudaMemcpyDeviceToHost);
    }
    cudaFree(O2);
    cudaFree(dK2);
    return a == a2 && g == g2;
}

/* Rows of C values, ld apart from d (16-bit), as fp32 [N, C]. */
static std::vector<float> download_rows(const void *d, int N, int C, int ld, cudaDataType_t t)
{
    size_t span = (size_t)(N - 1) * ld + C;
    std::vector<float> a = download16(d, span, t), out((size_t)N * C);
    for (size_t r = 0; r < (size_t)N; r++)
        for (int x = 0; x < C; x++) out[r * C + x] = a[r * ld + x];
    return out;
}

struct flash_case {
    const char *name;
    std::vector<int> lens; /* packed: the windows' lengths; padded: the real tokens of each window of T */
    int padded, T, NH, HS;
    float p;
    int fused; /* q, k, v (and dq, dk, dv) as slices of one [N, 3C] buffer */
};

static void run_case(const flash_case &c, cudaDataType_t t)
{
    const char *tname = t == CUDA_R_16F ? "fp16" : "bf16";
    int B = (int)c.lens.size(), NH = c.NH, HS = c.HS, C = NH * HS;
    std::vector<int32_t> cu(B + 1, 0), mask;
    std::vector<int> r0s(B), lens(B);
    int max_len = 0;
    for (int b = 0; b < B; b++) {
        lens[b] = c.padded ? c.T : c.lens[b];
        r0s[b] = c.padded ? b * c.T : cu[b];
        cu[b + 1] = cu[b] + c.lens[b];
        max_len = std::max(max_len, c.lens[b]);
    }
    if (c.padded) {
        mask.assign((size_t)B * c.T, 0);
        for (int b = 0; b < B; b++)
            for (int j = 0; j < c.lens[b]; j++) mask[(size_t)b * c.T + j] = 1;
    }
    int N = c.padded ? B * c.T : cu[B];
    backend_windows wh = c.padded ? backend_windows_padded(B, c.T, mask.data())
                                  : backend_windows_packed(cu.data(), B, c.T, N, max_len);
    size_t n = (size_t)N * C;
    t16 q = draw16(n, 2.0f, t), k = draw16(n, 2.0f, t), v = draw16(n, 1.0f, t), dout = draw16(n, 1.0f, t);
    /* In training, no gradient reaches a padded row (the loss leaves it out
     * and no real row attends to it): dout is 0 there. (With dout drawn
     * there too, D = rowsum(dout * out) from the 16-bit out leaves
     * rounding noise in a padded row's dS, which a window of one real token
     * sums over 39 rows into its one key's dk: 2.2e-2 of the largest in bf16.) */
    if (c.padded)
        for (int b = 0; b < B; b++)
            for (int i = c.lens[b]; i < c.T; i++)
                for (int x = 0; x < C; x++) {
                    size_t at = ((size_t)b * c.T + i) * C + x;
                    dout.bits[at] = 0;
                    dout.f[at] = 0.0f;
                }
    philox_stream rng = {0x5eed1234abcdull, 17, 3 * 16 + 1};
    cpu_result ref = cpu_attention(q, k, v, dout, wh, NH, HS, c.p, rng);

    /* the same on the emulated card */
    int32_t *dcu = dev_upload(cu), *dmask = c.padded ? dev_upload(mask) : NULL;
    backend_windows wd = c.padded ? backend_windows_padded(B, c.T, dmask) : backend_windows_packed(dcu, B, c.T, N, max_len);
    /* separate [N, C] arrays, or slices of [N, 3C] buffers (ld 3C) */
    int ld = c.fused ? 3 * C : C;
    uint16_t *Q, *K, *V, *dO = dev_upload(dout.bits), *QKV = NULL, *dQKV = NULL;
    void *O, *dQ, *dK, *dV;
    if (c.fused) {
        std::vector<uint16_t> all(3 * n);
        for (size_t r = 0; r < (size_t)N; r++)
            for (int x = 0; x < C; x++) {
                all[r * ld + x] = q.bits[r * C + x];
                all[r * ld + C + x] = k.bits[r * C + x];
                all[r * ld + 2 * C + x] = v.bits[r * C + x];
            }
        QKV = dev_upload(all);
        Q = QKV, K = QKV + C, V = QKV + 2 * C;
        cudaMalloc((void **)&dQKV, 3 * n * 2);
        dQ = dQKV, dK = dQKV + C, dV = dQKV + 2 * C;
    } else {
        Q = dev_upload(q.bits), K = dev_upload(k.bits), V = dev_upload(v.bits);
        cudaMalloc(&dQ, n * 2);
        cudaMalloc(&dK, n * 2);
        cudaMalloc(&dV, n * 2);
    }
    float *lse, *dvec;
    size_t nl = flash_attention_lse_floats(&wd, NH);
    cudaMalloc(&O, n * 2);
    cudaMalloc((void **)&lse, nl * 4);
    cudaMalloc((void **)&dvec, nl * 4);
    cudaError_t e1 = flash_attention_forward(0, t, O, NULL, lse, Q, K, V, &wd, NH, HS, ld, c.p, rng);
    cudaError_t e2 = flash_attention_backward(0, t, dQ, dK, dV, dvec, dO, O, Q, K, V, lse, &wd, NH, HS, ld, c.p, rng, 0);
    cudaDeviceSynchronize();
    std::vector<float> out = download16(O, n, t), gl(nl), dq = download_rows(dQ, N, C, ld, t),
                       dk = download_rows(dK, N, C, ld, t), dv = download_rows(dV, N, C, ld, t);
    cudaMemcpy(gl.data(), lse, nl * 4, cudaMemcpyDeviceToHost);
    std::vector<double> rl = ref_lse(q, k, r0s, lens, mask, c.T, N, NH, HS);
    double lerr = 0;
    for (size_t i = 0; i < nl; i++) lerr = std::max(lerr, fabs(gl[i] - rl[i]) / (1.0 + fabs(rl[i])));
    /* the band: a few units of the type's rounding (2^-11 fp16, 2^-8 bf16) */
    double band = t == CUDA_R_16F ? 2e-3 : 1.5e-2;
    double eo = rel_err(out, ref.out), eq = rel_err(dq, ref.dq), ek = rel_err(dk, ref.dk), ev = rel_err(dv, ref.dv);
    char lens_text[128] = "";
    size_t used = 0;
    for (int b = 0; b < B && used < sizeof lens_text - 8; b++)
        used += (size_t)snprintf(lens_text + used, sizeof lens_text - used, "%s%d", b ? "," : "", c.lens[b]);
    check(e1 == cudaSuccess && e2 == cudaSuccess && eo <= band && eq <= band && ek <= band && ev <= band &&
              lerr <= 1e-5,
          "flash %s %-7s %s lens %s%s NH %d HS %d%s p %.1f: out %.2e dq %.2e dk %.2e dv %.2e (of the largest; band "
          "%.0e), lse %.1e (vs double)",
          tname, c.name, c.padded ? "padded" : "packed", lens_text, c.padded ? " of T" : "", NH, HS,
          c.fused ? " (q k v in one [N, 3C])" : "", c.p, eo, eq, ek, ev, band, lerr);
    check(same_bytes_again(t, O, dK, Q, K, V, dO, lse, dvec, wd, NH, HS, ld, N, c.p, rng),
          "flash %s %-7s: a second run (dq and dv not wanted) gives the same out and dk bytes", tname, c.name);
    if (c.p > 0) {
        philox_stream other = rng;
        other.seed++;
        cpu_result r2 = cpu_attention(q, k, v, dout, wh, NH, HS, c.p, other);
        double e2o = rel_err(out, r2.out), e2v = rel_err(dv, r2.dv);
        check(e2o > 10 * band && e2v > 10 * band,
              "flash %s %-7s: against the CPU with another dropout seed: out %.2e dv %.2e (more than 10x the band: "
              "the masks are compared)",
              tname, c.name, e2o, e2v);
    }
    if (c.fused) {
        cudaFree(QKV);
        cudaFree(dQKV);
    } else {
        for (void *x : {(void *)Q, (void *)K, (void *)V, dQ, dK, dV}) cudaFree(x);
    }
    for (void *x : {(void *)dcu, (void *)dmask, (void *)dO, O, (void *)lse, (void *)dvec})
        if (x) cudaFree(x);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (backend_cpu_create(&cpu, 2)) {
        fprintf(stderr, "test_flash: CPU backend: %s\n", err_msg());
        return 1;
    }
    const flash_case cases[] = {
        /* name, lens, padded, T, NH, HS, p */
        {"varied", {1, 5, 33, 70, 16}, 0, 80, 2, 32, 0.0f, 0},
        {"varied", {1, 5, 33, 70, 16}, 0, 80, 2, 32, 0.1f, 0},
        {"fused", {9, 48, 33}, 0, 48, 2, 32, 0.1f, 1},
        {"hs64", {40, 3, 64}, 0, 64, 1, 64, 0.1f, 0},
        {"hs16", {17, 2, 31}, 0, 40, 3, 16, 0.0f, 0},
        {"mask", {40, 17, 1}, 1, 40, 2, 32, 0.0f, 0},
        {"mask", {40, 17, 1}, 1, 40, 2, 32, 0.1f, 0},
    };
    for (cudaDataType_t t : {CUDA_R_16F, CUDA_R_16BF})
        for (const flash_case &c : cases) run_case(c, t);
    /* refusals */
    backend_windows w = backend_windows_padded(1, 16, NULL);
    check(!flash_attention_supported(24) && !flash_attention_supported(128) && flash_attention_supported(64) &&
              flash_attention_forward(0, CUDA_R_16F, NULL, NULL, NULL, NULL, NULL, NULL, &w, 1, 24, 24, 0.0f, philox_stream{}) ==
                  cudaErrorInvalidValue &&
              flash_attention_forward(0, CUDA_R_32F, NULL, NULL, NULL, NULL, NULL, NULL, &w, 1, 32, 32, 0.0f, philox_stream{}) ==
                  cudaErrorInvalidValue &&
              flash_attention_backward(0, CUDA_R_16F, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, &w, 2,
                                       32, 48, 0.0f, philox_stream{}, 0) == cudaErrorInvalidValue,
          "flash: head size 24 or 128, fp32, ldqkv 48 < C 64: refused (cudaErrorInvalidValue, nothing run); 64 "
          "supported");
    /* the planner's and the backend's rule (cuda_ws_attention_lse) is these kernels' */
    int agree = 1;
    for (int hs = 1; hs <= 160; hs++)
        agree &= cuda_ws_attention_lse(1, (size_t)hs) == flash_attention_supported(hs) && !cuda_ws_attention_lse(0, (size_t)hs);
    check(agree, "flash: cuda_ws_attention_lse(fp16/bf16, HS) is flash_attention_supported(HS) for HS 1..160, "
                 "and never for fp32/tf32");
    backend_free(&cpu);
    return check_summary();
}
