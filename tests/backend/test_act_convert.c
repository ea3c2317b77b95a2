/* Host conversions between floats and 16-bit activations
 * (backend_act_from_float / backend_act_to_float, act_convert.c): the bits
 * must be the ones the CUDA stand-in's __float2half_rn / __float2bfloat16_rn
 * give (tests/cudaemu/include), which kernels use to store an activation,
 * over a sweep of every 4099th float and the edge cases (ties, subnormals,
 * overflow, NaN); every 16-bit value widens exactly; backend_act_round is
 * the round trip; fp32 copies; and the CPU backend's uploads stay fp32. */
#include "backend/backend.h"
#include "testutil.h"

#include "../cudaemu/include/cuda_bf16.h"
#include "../cudaemu/include/cuda_fp16.h"

#include <math.h>
#include <string.h>

static float of_bits(uint32_t x)
{
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

/* One float each way; counts mismatches against the stand-in. */
static int check_one(float f, long *bad16, long *badbf)
{
    uint16_t h, b;
    backend_act_from_float(BACKEND_F16, &h, &f, 1);
    backend_act_from_float(BACKEND_BF16, &b, &f, 1);
    int ok = 1;
    if (h != cudaemu_f2h_bits(f)) {
        if ((*bad16)++ < 5) fprintf(stderr, "fp16 of %a (bits %08x): %04x, the stand-in %04x\n", (double)f,
                                    (unsigned)cudaemu_f32_bits(f), h, cudaemu_f2h_bits(f));
        ok = 0;
    }
    if (b != cudaemu_f2bf_bits(f)) {
        if ((*badbf)++ < 5) fprintf(stderr, "bf16 of %a: %04x, the stand-in %04x\n", (double)f, b, cudaemu_f2bf_bits(f));
        ok = 0;
    }
    return ok;
}

static void sweep(void)
{
    long bad16 = 0, badbf = 0, n = 0;
    for (uint64_t x = 0; x <= 0xffffffffu; x += 4099, n++) check_one(of_bits((uint32_t)x), &bad16, &badbf);
    /* edges: fp16's ties at 2^-25 (to zero) and just above, the least
     * subnormal, the largest subnormal's carry into the least normal, 65504,
     * 65519.99 (stays), 65520 (inf), ties to even in the normals, inf, NaN */
    const float edge[] = {0.0f, -0.0f, 0x1p-25f, 0x1.000002p-25f, 0x1p-24f, 0x1.8p-24f, 0x1.ffcp-15f, 0x1.ffep-15f,
                          0x1.fffp-15f, 65504.0f, 65519.99f, 65520.0f, -65520.0f, 1.0f + 0x1p-11f,
                          1.0f + 0x1.8p-10f, 1.0f + 0x1p-8f, 1.0f + 0x1.8p-7f, 3.3895314e38f, INFINITY, -INFINITY,
                          NAN, -NAN, 0x1p-126f, 0x1p-149f};
    for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++, n++) check_one(edge[i], &bad16, &badbf);
    printf("%ld floats: fp16 %ld and bf16 %ld conversions differ from the stand-in's\n", n, bad16, badbf);
    CHECK(bad16 == 0 && badbf == 0, "host conversions equal the stand-in's");
}

/* Every 16-bit value widens to the stand-in's float (NaNs: a NaN). */
static void widen(void)
{
    long bad = 0;
    for (uint32_t v = 0; v <= 0xffff; v++) {
        uint16_t h = (uint16_t)v;
        float a, b;
        backend_act_to_float(BACKEND_F16, &a, &h, 1);
        backend_act_to_float(BACKEND_BF16, &b, &h, 1);
        float wa = cudaemu_h2f_bits(h), wb = cudaemu_bf2f_bits(h);
        if (!(isnan(wa) ? isnan(a) : memcmp(&a, &wa, 4) == 0)) bad++;
        if (!(isnan(wb) ? isnan(b) : memcmp(&b, &wb, 4) == 0)) bad++;
    }
    printf("65536 values of each 16-bit type widened: %ld differ from the stand-in's\n", bad);
    CHECK(bad == 0, "widening equals the stand-in's");
}

/* round = from then to; fp32 copies bit for bit. */
static void round_trip(void)
{
    float x[64], r[64], w[64];
    uint16_t h[64];
    tu_rng_state = 99;
    tu_fill(x, 64, -70000, 70000);
    x[0] = 0x1p-20f;
    for (int t = BACKEND_F16; t <= BACKEND_BF16; t++) {
        memcpy(r, x, sizeof x);
        backend_act_round((backend_dtype)t, r, 64);
        backend_act_from_float((backend_dtype)t, h, x, 64);
        backend_act_to_float((backend_dtype)t, w, h, 64);
        CHECK(memcmp(r, w, sizeof r) == 0, "backend_act_round is the round trip (%s)", t == BACKEND_F16 ? "fp16" : "bf16");
    }
    memcpy(r, x, sizeof x);
    backend_act_round(BACKEND_F32, r, 64);
    backend_act_from_float(BACKEND_F32, w, x, 64);
    CHECK(memcmp(r, x, sizeof x) == 0 && memcmp(w, x, sizeof x) == 0, "fp32 rounds and converts to itself");
}

/* The CPU backend's activations are fp32: upload / download are plain. */
static void cpu_plain(void)
{
    backend be;
    CHECK(backend_cpu_create(&be, 1) == 0, "cpu backend");
    float x[5] = {1.0f / 3, -2.5e-30f, 7e37f, 0x1p-140f, -1.0f}, y[5];
    void *d = be.i->alloc(be.ctx, sizeof x);
    CHECK(backend_act_upload(&be, d, x, 5) == 0 && backend_act_download(&be, y, d, 5) == 0, "upload, download");
    CHECK(memcmp(x, y, sizeof x) == 0, "the CPU's activations keep every float's bits");
    be.i->release(be.ctx, d);
    backend_free(&be);
}

int main(void)
{
    sweep();
    widen();
    round_trip();
    cpu_plain();
    return tu_done();
}
