/* --precision bf16 on the CPU (backend_cpu_set_bf16, backend/cpu/bf16.h,
 * onednn_gemm_bf16):
 *   - bf16 rounding: round to nearest even (ties to even both ways), NaN
 *     stays NaN, overflow to inf, subnormals to signed zero (as the
 *     instruction), on hand-picked values; the vector
 *     conversion (VCVTNEPS2BF16 where the CPU has it) equals the portable
 *     one bit for bit on random and special values, 1 and 2 threads.
 * Where this CPU trains in bf16 (AVX512-BF16 or AMX-BF16, the avx512 level,
 * oneDNN 2 loaded; the output says which):
 *   - oneDNN's bf16 GEMM, all four transpose cases, beta 0 and 1, sizes 1 to
 *     1536: the products of bf16 numbers are exact in fp32, so the result is
 *     the double sum over the bf16-rounded operands within the first-order
 *     bound of a K-term fp32 sum, (K + 3) 2^-24 (sum |a b| + |beta c|); and
 *     it is further than that from the product of the unrounded operands
 *     (the operands really were rounded);
 *   - the backend's matmul forward (with bias) and backward (dinp, dw
 *     accumulated onto what was there, db) in bf16 against the same
 *     reference; a batch-invariant backend computes in fp32, bit for bit the
 *     result with bf16 off.
 * Elsewhere: backend_cpu_set_bf16 is one ERR_INPUT naming the reason, and the
 * backend stays fp32. */
#include "backend/backend.h"
#include "backend/cpu/bf16.h"
#include "backend/cpu/onednn_dl.h"
#include "backend/cpu_kernels.h"
#include "core/err.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static float f_of(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

static void check_rounding(void)
{
    static const struct {
        uint32_t in;
        uint16_t want;
    } cases[] = {
        {0x3f800000u, 0x3f80}, /* 1.0 */
        {0x3f808000u, 0x3f80}, /* tie, even below: down */
        {0x3f818000u, 0x3f82}, /* tie, odd below: up */
        {0x3f808001u, 0x3f81}, /* above the tie: up */
        {0x3f807fffu, 0x3f80}, /* below the tie: down */
        {0xbf818000u, 0xbf82}, /* negative tie: away from zero to even */
        {0x7f7fffffu, 0x7f80}, /* FLT_MAX rounds to inf */
        {0x7f800000u, 0x7f80}, /* inf */
        {0xff800000u, 0xff80}, /* -inf */
        {0x00000001u, 0x0000}, /* smallest subnormal: 0 */
        {0x807fffffu, 0x8000}, /* largest subnormal: -0, as VCVTNEPS2BF16 (torch would give 0x8080) */
        {0x00800000u, 0x0080}, /* smallest normal stays */
        {0x80000000u, 0x8000}, /* -0 */
    };
    int ok = 1;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint16_t got = bf16_round(f_of(cases[i].in));
        if (got != cases[i].want) {
            ok = 0;
            fprintf(stderr, "bf16_round(0x%08x) = 0x%04x, want 0x%04x\n", cases[i].in, got, cases[i].want);
        }
    }
    uint16_t nan1 = bf16_round(f_of(0x7f800001u)), nan2 = bf16_round(f_of(0xffc00000u));
    CHECK(ok, "hand-picked roundings");
    CHECK((nan1 & 0x7f80) == 0x7f80 && (nan1 & 0x7f) && (nan2 & 0x7f80) == 0x7f80 && (nan2 & 0x7f),
          "NaN stays NaN: 0x%04x 0x%04x", nan1, nan2);
    printf("bf16_round: %zu hand-picked values and two NaNs\n", sizeof cases / sizeof cases[0]);

    /* vector == portable, random bits (NaNs and subnormals included) and ties */
    size_t n = 300007;
    float *x = malloc(n * sizeof *x);
    uint16_t *got = malloc(n * sizeof *got);
    CHECK(x && got, "alloc");
    if (!x || !got) return;
    tu_rng_state = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)(tu_urand() * 4294967296.0);
        if (i % 5 == 0) u = (u & 0xffff0000u) | 0x8000u; /* a tie */
        memcpy(&x[i], &u, sizeof u);
    }
    for (int threads = 1; threads <= 2; threads++) {
        for (size_t len = n; len + 20 > n; len -= 7) { /* tails of every length mod 16 */
            memset(got, 0xa5, n * sizeof *got);
            bf16_from_float(got, x, len, threads);
            size_t bad = 0;
            for (size_t i = 0; i < len; i++) {
                uint16_t w = bf16_round(x[i]);
                int both_nan = (w & 0x7f80) == 0x7f80 && (w & 0x7f) && (got[i] & 0x7f80) == 0x7f80 && (got[i] & 0x7f);
                if (got[i] != w && !both_nan) bad++;
            }
            size_t past = 0;
            for (size_t i = len; i < n; i++) past += got[i] != 0xa5a5;
            CHECK(bad == 0 && past == 0, "%d threads, %zu values: %zu differ, %zu written past the end", threads, len,
                  bad, past);
        }
    }
    const cpu_kernels_state *k = cpu_kernels();
    printf("bf16_from_float (%s) == bf16_round on %zu random floats, 3 tail lengths, 1 and 2 threads\n",
           k->cpu.avx512_bf16 && k->level >= CPU_ISA_AVX512 ? "VCVTNEPS2BF16" : "portable C", n);
    free(x);
    free(got);
}

static double rnd(float x)
{
    return (double)bf16_to_float(bf16_round(x));
}

/* C (M,N) = op(A) op(B) + beta C0 in double, over bf16-rounded (round 1) or
 * unrounded operands; mag = sum |a b| + |beta c0|. */
static void ref_gemm(int ta, int tb, int M, int N, int K, const float *A, const float *B, float beta, const float *C0,
                     int round, double *C, double *mag)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0, m = 0;
            for (int k = 0; k < K; k++) {
                float a = ta ? A[(size_t)k * M + i] : A[(size_t)i * K + k];
                float b = tb ? B[(size_t)j * K + k] : B[(size_t)k * N + j];
                double p = round ? rnd(a) * rnd(b) : (double)a * b;
                s += p;
                m += fabs(p);
            }
            double c = beta != 0.0f ? (double)beta * C0[(size_t)i * N + j] : 0.0;
            C[(size_t)i * N + j] = s + c;
            mag[(size_t)i * N + j] = m + fabs(c);
        }
}

/* max over elements of |got - ref| / bound, bound = (K + 3) 2^-24 mag */
static double worst(const float *got, const double *ref, const double *mag, size_t n, int K)
{
    double w = 0;
    for (size_t i = 0; i < n; i++) {
        double bound = (K + 3) * ldexp(1.0, -24) * mag[i] + 1e-30;
        double r = fabs((double)got[i] - ref[i]) / bound;
        if (!(r <= w)) w = r; /* NaN too */
    }
    return w;
}

static void check_gemm(void)
{
    static const int sizes[][3] = {{1, 1, 1}, {5, 7, 3}, {37, 129, 65}, {384, 96, 300}, {300, 1536, 384}, {96, 64, 1536}};
    int cases = 0;
    double worst_rounded = 0, least_unrounded = 1e300;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int M = sizes[s][0], N = sizes[s][1], K = sizes[s][2];
        size_t na = (size_t)M * K, nb = (size_t)K * N, nc = (size_t)M * N;
        float *A = malloc(na * 4), *B = malloc(nb * 4), *C0 = malloc(nc * 4), *C = malloc(nc * 4);
        uint16_t *Ab = malloc(na * 2), *Bb = malloc(nb * 2);
        double *ref = malloc(nc * 8), *mag = malloc(nc * 8), *ref_u = malloc(nc * 8), *mag_u = malloc(nc * 8);
        if (!A || !B || !C0 || !C || !Ab || !Bb || !ref || !mag || !ref_u || !mag_u) {
            CHECK(0, "alloc");
            return;
        }
        tu_fill(A, na, -1, 1);
        tu_fill(B, nb, -1, 1);
        tu_fill(C0, nc, -1, 1);
        bf16_from_float(Ab, A, na, 2);
        bf16_from_float(Bb, B, nb, 2);
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (int beta = 0; beta < 2; beta++) {
                    memcpy(C, C0, nc * 4);
                    int rc = onednn_gemm_bf16(ta, tb, M, N, K, Ab, ta ? M : K, Bb, tb ? K : N, (float)beta, C, N);
                    ref_gemm(ta, tb, M, N, K, A, B, (float)beta, C0, 1, ref, mag);
                    double w = worst(C, ref, mag, nc, K);
                    CHECK(rc == 0 && w <= 1.0, "M %d N %d K %d ta %d tb %d beta %d: rc %d, error %.3g of the bound", M,
                          N, K, ta, tb, beta, rc, w);
                    if (w > worst_rounded) worst_rounded = w;
                    if (K >= 65) {
                        ref_gemm(ta, tb, M, N, K, A, B, (float)beta, C0, 0, ref_u, mag_u);
                        double wu = worst(C, ref_u, mag_u, nc, K);
                        CHECK(wu > 1.0, "M %d N %d K %d: within fp32 rounding of the unrounded product (%.3g)", M, N,
                              K, wu);
                        if (wu < least_unrounded) least_unrounded = wu;
                    }
                    cases++;
                }
        /* a non-dense leading dimension is refused, not misread */
        CHECK(onednn_gemm_bf16(0, 0, M, N, K, Ab, K + 1, Bb, N, 0.0f, C, N) != 0, "lda %d refused", K + 1);
        free(A), free(B), free(C0), free(C), free(Ab), free(Bb), free(ref), free(mag), free(ref_u), free(mag_u);
    }
    printf("onednn_gemm_bf16 (%s): %d cases, error at most %.3f of the fp32-sum bound over the rounded operands; "
           "at least %.1f times that bound from the unrounded product\n",
           onednn_bf16_impl(), cases, worst_rounded, least_unrounded);
}

/* The backend's matmul in bf16 against the rounded reference. */
static void check_backend(backend *be)
{
    const int N = 200, C = 96, OC = 160;
    size_t ni = (size_t)N * C, nw = (size_t)OC * C, no = (size_t)N * OC;
    float *inp = malloc(ni * 4), *w = malloc(nw * 4), *b = malloc(OC * 4), *out = malloc(no * 4);
    float *dout = malloc(no * 4), *dinp = malloc(ni * 4), *dw = malloc(nw * 4), *db = malloc(OC * 4);
    float *dinp0 = malloc(ni * 4), *dw0 = malloc(nw * 4), *bias_rows = malloc(no * 4);
    double *ref = malloc(no * 8), *mag = malloc(no * 8);
    if (!inp || !w || !b || !out || !dout || !dinp || !dw || !db || !dinp0 || !dw0 || !bias_rows || !ref || !mag) {
        CHECK(0, "alloc");
        return;
    }
    tu_fill(inp, ni, -2, 2);
    tu_fill(w, nw, -0.5, 0.5);
    tu_fill(b, OC, -1, 1);
    tu_fill(dout, no, -1, 1);
    tu_fill(dinp0, ni, -1, 1);
    tu_fill(dw0, nw, -1, 1);
    for (int n = 0; n < N; n++) memcpy(bias_rows + (size_t)n * OC, b, OC * 4);

    be->i->matmul_forward(be->ctx, out, inp, w, b, N, C, OC);
    ref_gemm(0, 1, N, OC, C, inp, w, 1.0f, bias_rows, 1, ref, mag);
    double wf = worst(out, ref, mag, no, C);
    memcpy(dinp, dinp0, ni * 4);
    memcpy(dw, dw0, nw * 4);
    memset(db, 0, OC * 4);
    be->i->matmul_backward(be->ctx, dinp, dw, db, dout, inp, w, N, C, OC);
    CHECK(be->i->sync(be->ctx) == 0, "sync: %s", err_msg());
    double *ri = malloc(ni * 8), *mi = malloc(ni * 8), *rw = malloc(nw * 8), *mw = malloc(nw * 8);
    if (!ri || !mi || !rw || !mw) {
        CHECK(0, "alloc");
        return;
    }
    ref_gemm(0, 0, N, C, OC, dout, w, 1.0f, dinp0, 1, ri, mi);
    ref_gemm(1, 0, OC, C, N, dout, inp, 1.0f, dw0, 1, rw, mw);
    double wi = worst(dinp, ri, mi, ni, OC), ww = worst(dw, rw, mw, nw, N);
    double wb = 0;
    for (int j = 0; j < OC; j++) {
        double s = 0, m = 0;
        for (int n = 0; n < N; n++) s += dout[(size_t)n * OC + j], m += fabs(dout[(size_t)n * OC + j]);
        double r = fabs(db[j] - s) / ((N + 3) * ldexp(1.0, -24) * m + 1e-30);
        if (r > wb) wb = r;
    }
    printf("backend matmul in bf16 (N %d, C %d, OC %d), error / bound: out %.3f, dinp %.3f, dw %.3f, db (fp32) %.3f\n",
           N, C, OC, wf, wi, ww, wb);
    CHECK(wf <= 1 && wi <= 1 && ww <= 1 && wb <= 1, "matmul in bf16 within the bound");

    /* batch-invariant: fp32, the bits of bf16 off */
    float *out_inv = malloc(no * 4);
    if (out_inv) {
        backend_set_batch_invariant(be, 1);
        be->i->matmul_forward(be->ctx, out_inv, inp, w, b, N, C, OC);
        CHECK(backend_cpu_set_bf16(be, 0, NULL, 0) == 0, "bf16 off");
        be->i->matmul_forward(be->ctx, out, inp, w, b, N, C, OC);
        CHECK(!memcmp(out, out_inv, no * 4), "batch-invariant ignores bf16");
        printf("batch-invariant backend with bf16 on: the fp32 bits of bf16 off\n");
        backend_set_batch_invariant(be, 0);
        free(out_inv);
    }
    free(inp), free(w), free(b), free(out), free(dout), free(dinp), free(dw), free(db), free(dinp0), free(dw0);
    free(bias_rows), free(ref), free(mag), free(ri), free(mi), free(rw), free(mw);
}

int main(void)
{
    check_rounding();
    backend be;
    if (backend_cpu_create(&be, 2) != 0) {
        CHECK(0, "backend_cpu_create: %s", err_msg());
        return tu_done();
    }
    char impl[96] = "";
    int rc = backend_cpu_set_bf16(&be, 1, impl, sizeof impl);
    if (rc == 0) {
        printf("this CPU trains in bf16: %s\n", impl);
        check_gemm();
        check_backend(&be);
    } else {
        printf("this CPU does not train in bf16: %s\n", err_msg());
        CHECK(rc == ERR_INPUT && strstr(err_msg(), "--precision bf16 on the CPU"), "one clear error");
        const cpu_kernels_state *k = cpu_kernels();
        CHECK(!(k->cpu.avx512_bf16 && k->level >= CPU_ISA_AVX512) || strstr(err_msg(), "oneDNN"),
              "with AVX512-BF16 at the avx512 level, only oneDNN can be missing");
        err_clear();
    }
    backend_free(&be);
    return tu_done();
}
