/* What the cudaemu tests of 16-bit activations share (test_fused.cc,
 * test_act16.cc; one translation unit each): the CPU backend and the
 * emulated CUDA backend side by side, tensors held on both (fp32 on the
 * CPU, the activation type on the device) with a host copy of their
 * values, and padded or packed windows on both. */
#ifndef CUDAEMU_ACT_TEST_H
#define CUDAEMU_ACT_TEST_H

#include "backend/cuda/cuda_internal.h"
#include "emu_check.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

static backend g_cpu, g_gpu;
static cuda_ctx *g_ctx;

static const char *type_name(gemm_type t)
{
    return t == GEMM_F16 ? "fp16" : t == GEMM_BF16 ? "bf16" : "fp32";
}

static size_t type_size(gemm_type t)
{
    return t == GEMM_F32 ? 4 : 2;
}

static float round_to(gemm_type t, float x)
{
    if (t == GEMM_F16) return __half2float(__float2half_rn(x));
    if (t == GEMM_BF16) return __bfloat162float(__float2bfloat16_rn(x));
    return x;
}

/* One ulp of type t at |x| (the spacing of the binade). */
static double ulp_of(gemm_type t, double x)
{
    int mant = t == GEMM_F16 ? 10 : t == GEMM_BF16 ? 7 : 23, emin = t == GEMM_F16 ? -14 : -126;
    int e = x != 0 ? (int)floor(log2(fabs(x))) : emin;
    if (e < emin) e = emin;
    return ldexp(1.0, e - mant);
}

static uint64_t g_seed = 12345;
static float uniform(float lo, float hi)
{
    g_seed = g_seed * 6364136223846793005ull + 1442695040888963407ull;
    return lo + (hi - lo) * (float)((double)(g_seed >> 40) / (double)(1ull << 24));
}

/* ------------------------------------------------------------------------
 * Buffers: a host copy (fp32 values, already of type t's precision) and
 * the same values on the CPU backend (fp32) and on the device (type t). */

struct tensor {
    gemm_type t;
    size_t n;
    std::vector<float> h;
    float *cpu;
    void *gpu;
};

static void tensor_put(tensor &x)
{
    g_cpu.i->upload(g_cpu.ctx, x.cpu, x.h.data(), x.n * 4);
    std::vector<uint16_t> b(x.n);
    if (x.t == GEMM_F32) {
        g_gpu.i->upload(g_gpu.ctx, x.gpu, x.h.data(), x.n * 4);
        return;
    }
    for (size_t i = 0; i < x.n; i++) {
        if (x.t == GEMM_F16) {
            __half h = __float2half_rn(x.h[i]);
            memcpy(&b[i], &h, 2);
        } else {
            __nv_bfloat16 h = __float2bfloat16_rn(x.h[i]);
            memcpy(&b[i], &h, 2);
        }
    }
    g_gpu.i->upload(g_gpu.ctx, x.gpu, b.data(), x.n * 2);
}

static tensor tensor_make(gemm_type t, size_t n, float lo, float hi)
{
    tensor x{t, n, std::vector<float>(n), (float *)g_cpu.i->alloc(g_cpu.ctx, n * 4 + 4),
             g_gpu.i->alloc(g_gpu.ctx, n * type_size(t) + 4)};
    for (size_t i = 0; i < n; i++) x.h[i] = round_to(t, uniform(lo, hi));
    tensor_put(x);
    return x;
}

static void tensor_free(tensor &x)
{
    g_cpu.i->release(g_cpu.ctx, x.cpu);
    g_gpu.i->release(g_gpu.ctx, x.gpu);
}

/* The device's values as fp32. */
static std::vector<float> gpu_get(gemm_type t, const void *p, size_t n)
{
    std::vector<float> out(n);
    if (t == GEMM_F32) {
        g_gpu.i->download(g_gpu.ctx, out.data(), p, n * 4);
        return out;
    }
    std::vector<uint16_t> b(n);
    g_gpu.i->download(g_gpu.ctx, b.data(), p, n * 2);
    for (size_t i = 0; i < n; i++) {
        if (t == GEMM_F16) {
            __half h;
            memcpy(&h, &b[i], 2);
            out[i] = __half2float(h);
        } else {
            __nv_bfloat16 h;
            memcpy(&h, &b[i], 2);
            out[i] = __bfloat162float(h);
        }
    }
    return out;
}

static std::vector<float> cpu_get(const float *p, size_t n)
{
    std::vector<float> out(n);
    g_cpu.i->download(g_cpu.ctx, out.data(), p, n * 4);
    return out;
}

/* ------------------------------------------------------------------------
 * Windows. */

struct windows {
    backend_windows cpu, gpu;
    int32_t *cu_cpu, *cu_gpu;
    std::vector<int32_t> cu;
    const char *name;
};

/* Padded B x T windows, or packed ones of lengths lens[B]. */
static windows windows_of(int packed, int B, int T, const int *lens, const char *name)
{
    windows w{};
    w.name = name;
    if (!packed) {
        w.cpu = w.gpu = backend_windows_padded(B, T, NULL);
        return w;
    }
    w.cu.push_back(0);
    for (int b = 0; b < B; b++) w.cu.push_back(w.cu.back() + lens[b]);
    w.cu_cpu = (int32_t *)g_cpu.i->alloc(g_cpu.ctx, (B + 1) * 4);
    w.cu_gpu = (int32_t *)g_gpu.i->alloc(g_gpu.ctx, (B + 1) * 4);
    g_cpu.i->upload(g_cpu.ctx, w.cu_cpu, w.cu.data(), (B + 1) * 4);
    g_gpu.i->upload(g_gpu.ctx, w.cu_gpu, w.cu.data(), (B + 1) * 4);
    int max_len = 0;
    for (int b = 0; b < B; b++) max_len = lens[b] > max_len ? lens[b] : max_len;
    w.cpu = backend_windows_packed(w.cu_cpu, B, T, w.cu.back(), max_len);
    w.gpu = backend_windows_packed(w.cu_gpu, B, T, w.cu.back(), max_len);
    return w;
}

static void windows_free(windows &w)
{
    if (w.cu_cpu) g_cpu.i->release(g_cpu.ctx, w.cu_cpu);
    if (w.cu_gpu) g_gpu.i->release(g_gpu.ctx, w.cu_gpu);
}

static philox_stream g_rng = {20261207ull, 3, 5 * 16 + 2};

/* Writes the rounding of the CPU buffer's values to t back into it. */
static std::vector<float> cpu_round(gemm_type t, float *p, size_t n)
{
    std::vector<float> v = cpu_get(p, n);
    for (float &x : v) x = round_to(t, x);
    g_cpu.i->upload(g_cpu.ctx, p, v.data(), n * 4);
    return v;
}

static int synced(const char *what)
{
    int rc = g_gpu.i->sync(g_gpu.ctx);
    if (rc) check(0, "%s: the device reported an error: %s", what, err_msg());
    return rc == 0;
}

#endif
