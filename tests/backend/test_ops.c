/* CPU backend ops against double-precision references written out here:
 * every forward is compared with its reference, and every backward with a
 * central finite difference, in double, of a random linear functional
 * L = sum(r * out) of the reference forward (r is the dout given to the
 * backward). AdamW and the helpers are compared with double transcriptions
 * of their formulas. (Run-to-run determinism is in test_dropout.c.)
 *
 * Sizes are tiny (B=2, T=5, C=8, NH=2, I=16, padding in one row) so every
 * element can be perturbed; a directional derivative checks attention at a
 * length long enough for its row blocks. Packed windows (backend_windows)
 * are checked against the same references at their real positions. */
#include "backend/backend.h"
#include "backend/cpu/cpu_math.h"
#include "core/err.h"
#include "testutil.h"

#include <cblas.h>
#include <float.h>
#include <math.h>
#undef I /* complex.h's, via cblas.h: the sizes below use the letter */
#include <stdlib.h>
#include <string.h>

enum { B = 2, T = 5, NH = 2, HS = 4, C = NH * HS, I = 16, N = B * T, V = 6, P = 7, TV = 2 };

static backend be;

static void to_double(double *d, const float *f, size_t n)
{
    for (size_t i = 0; i < n; i++) d[i] = f[i];
}

static double dot(const double *a, const double *b, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* Compares floats with doubles elementwise: rtol, and atol rtol times the
 * largest reference value. Gradients against finite differences use 1e-3. */
static void check_fwd(const char *name, const float *got, const double *want, size_t n, double rtol)
{
    float *w = malloc(n * sizeof *w);
    double mx = 1e-6;
    for (size_t i = 0; i < n; i++) {
        w[i] = (float)want[i];
        if (fabs(want[i]) > mx) mx = fabs(want[i]);
    }
    tu_close(name, got, w, n, rtol, rtol * mx);
    free(w);
}

static void check_grad(const char *name, const float *got, const double *want, size_t n)
{
    check_fwd(name, got, want, n, 1e-3);
}

/* L, the loss of a problem of type TYPE for its numerical gradient: the
 * reference REF computes p->out, and the loss is r . out over COUNT values
 * (an expression of the problem p). */
#define LOSS_OF(L, type, ref, count)                  \
    static double L(void *vp)                         \
    {                                                 \
        type *p = vp;                                 \
        ref(p);                                       \
        return dot(p->out, p->r, (size_t)(count));    \
    }

/* Central differences of L(prob) for every element of x (which L reads). */
static void numgrad(double (*L)(void *), void *prob, double *x, size_t n, double *g)
{
    for (size_t i = 0; i < n; i++) {
        double save = x[i], h = 1e-6 * (fabs(save) > 1 ? fabs(save) : 1);
        x[i] = save + h;
        double lp = L(prob);
        x[i] = save - h;
        double lm = L(prob);
        x[i] = save;
        g[i] = (lp - lm) / (2 * h);
    }
}

/* ------------------------------------------- the vector exp and erf, in ulps */

/* x[i]: random bit patterns (every exponent, NaN and inf among them), the
 * odd ones with the exponent held to [e0, e0 + ne) (the ranges where the
 * approximations work); with y, y[i] a number in [-2, 2) from the same
 * draw. */
static void bit_patterns(float *x, int n, uint64_t s, unsigned e0, unsigned ne, float *y)
{
    for (int i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        uint32_t u = (uint32_t)(s >> 32);
        if (i % 2) u = (u & 0x807FFFFFu) | ((uint32_t)(e0 + (s >> 20) % ne) << 23);
        memcpy(&x[i], &u, sizeof u);
        if (y) y[i] = (float)((s >> 11) % 1000) / 250.0f - 2.0f;
    }
}

static double ulps(float got, double want)
{
    float w = (float)want;
    float u = nextafterf(fabsf(w), INFINITY) - fabsf(w);
    return fabs((double)got - want) / u;
}

static void test_math(void)
{
    int n = tu_sanitized() ? 200000 : 2000000;
    double eu = 0, ru = 0;
    float ex = 0, rx = 0;
    for (int i = 0; i <= n; i++) {
        float x = -87.0f + 175.0f * (float)i / n; /* exp over the normal range */
        double u = ulps(cpu_expf(x), exp((double)x));
        if (u > eu) eu = u, ex = x;
        x = -5.0f + 10.0f * (float)i / n;
        u = ulps(cpu_erff(x), erf((double)x));
        if (u > ru) ru = u, rx = x;
    }
    printf("cpu_expf: max %.3f ulp (at %g); cpu_erff: max %.3f ulp (at %g)\n", eu, ex, ru, rx);
    CHECK(eu <= 1.5, "cpu_expf error %.3f ulp at %g", eu, ex);
    CHECK(ru <= 2.0, "cpu_erff error %.3f ulp at %g", ru, rx);
    CHECK(cpu_expf(-INFINITY) == 0 && cpu_expf(INFINITY) == INFINITY && isnan(cpu_expf(NAN)) &&
              cpu_expf(-FLT_MAX) == 0 && cpu_expf(100.0f) == INFINITY && cpu_expf(-100.0f) > 0,
          "cpu_expf at the ends: inf, nan, overflow, gradual underflow");
    CHECK(cpu_erff(INFINITY) == 1 && cpu_erff(-INFINITY) == -1 && isnan(cpu_erff(NAN)) && cpu_erff(0.0f) == 0 &&
              signbit(cpu_erff(-0.0f)) && ulps(cpu_erff(1e-30f), erf((double)1e-30f)) <= 1,
          "cpu_erff at the ends: inf, nan, signed zero, tiny");
}

#ifdef CPU_HAVE_AVX2_MATH
__attribute__((target("avx512f,avx512dq"))) static void exp_erf16(const float *x, float *e, float *r)
{
    __m512 v = _mm512_loadu_ps(x);
    _mm512_storeu_ps(e, cpu_expf16(v));
    _mm512_storeu_ps(r, cpu_erff16(v));
}
#endif

/* cpu_expf16 and cpu_erff16 (softmax's and GELU's avx512 code) against
 * cpu_expf and cpu_erff, bit for bit, on random bit patterns (every
 * exponent, NaN and inf among them), the ranges' edges and runs of
 * neighbours where the approximations switch (tools/check_vector_math.c
 * checks all 2^32). */
static void test_math16(void)
{
#ifdef CPU_HAVE_AVX2_MATH
    if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512dq")) {
        printf("cpu_expf16/cpu_erff16: no AVX-512 here, not checked\n");
        return;
    }
    enum { NV = 1 << 18 };
    static float x[NV], e[NV], r[NV];
    const float edge[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 0.921875f, -0.921875f, 3.92f, -3.92f,
                          -104.0f, 89.0f, 88.8f, -87.4f, 1e-30f, -1e-38f, FLT_MAX, -FLT_MAX};
    bit_patterns(x, NV, 0x2545f4914f6cdd1dull, 118, 16, NULL); /* odd ones |x| in [2^-9, 2^7) */
    for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++) x[i] = edge[i];
    for (int i = 0; i < 4096; i++) { /* neighbours of the switch points, both signs */
        float a = i < 2048 ? 0.921875f : 3.92f;
        uint32_t u;
        memcpy(&u, &a, sizeof u);
        u += (uint32_t)(i % 1024) - 512u;
        u |= (uint32_t)(i / 1024 % 2) << 31;
        memcpy(&x[1024 + i], &u, sizeof u);
    }
    for (int i = 0; i < NV; i += 16) exp_erf16(x + i, e + i, r + i);
    size_t bad = 0;
    for (int i = 0; i < NV; i++) {
        float we = cpu_expf(x[i]), wr = cpu_erff(x[i]);
        bad += memcmp(&we, &e[i], sizeof we) != 0 || memcmp(&wr, &r[i], sizeof wr) != 0;
    }
    printf("cpu_expf16/cpu_erff16: %zu of %d values differ from cpu_expf/cpu_erff's bits\n", bad, NV);
    CHECK(bad == 0, "cpu_expf16/cpu_erff16: %zu values differ from the scalar bits", bad);
#endif
}

/* The backend's gelu (AVX2 vectors where the CPU has them) against the
 * scalar formula with cpu_erff and cpu_expf, bit for bit: random bit
 * patterns (every exponent, NaN and inf among them) and the edges of the
 * approximations' ranges, with lengths that leave a scalar tail. */
static void test_gelu_exact(void)
{
    enum { NE = 100003 };
    static float x[NE], out[NE], dinp[NE], dout[NE];
    const float edge[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 0.921875f / 0.70710678f, 3.92f / 0.70710678f,
                          -104.0f, 89.0f, 1e-30f, -1e-38f, 13.0f, -13.0f, 5.5f, -5.5f, FLT_MAX, -FLT_MAX};
    bit_patterns(x, NE, 0x9e3779b97f4a7c15ull, 120, 14, dout); /* odd ones |x| in [2^-7, 2^6) */
    for (int i = 0; i < NE; i++) dinp[i] = 0.25f;
    for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++) x[i] = edge[i];
    be.i->gelu_forward(be.ctx, out, x, NE);
    be.i->gelu_backward(be.ctx, dinp, x, dout, NE);
    size_t bad = 0;
    const float alpha = 0.70710678118654752440f, beta = 0.39894228040143267794f;
    for (int i = 0; i < NE; i++) {
        float xi = x[i];
        float want = xi * 0.5f * (1.0f + cpu_erff(xi * alpha));
        float cdf = 0.5f * (1.0f + cpu_erff(xi * alpha)), pdf = beta * cpu_expf(xi * xi * -0.5f);
        float dwant = 0.25f + dout[i] * (cdf + xi * pdf);
        bad += memcmp(&out[i], &want, sizeof want) != 0 || memcmp(&dinp[i], &dwant, sizeof dwant) != 0;
    }
    printf("gelu: %zu of %d values differ from the scalar formula's bits\n", bad, NE);
    CHECK(bad == 0, "gelu: %zu values differ from the scalar cpu_erff/cpu_expf formula", bad);
}

/* ---------------------------------------------------------------- layernorm */

typedef struct {
    double inp[N * C], w[C], b[C], r[N * C], out[N * C];
    double eps;
} ln_prob;

static void ref_layernorm(ln_prob *p)
{
    for (int n = 0; n < N; n++) {
        const double *x = p->inp + n * C;
        double m = 0, v = 0;
        for (int c = 0; c < C; c++) m += x[c];
        m /= C;
        for (int c = 0; c < C; c++) v += (x[c] - m) * (x[c] - m);
        v /= C;
        double rs = 1 / sqrt(v + p->eps);
        for (int c = 0; c < C; c++) p->out[n * C + c] = (x[c] - m) * rs * p->w[c] + p->b[c];
    }
}

LOSS_OF(L_layernorm, ln_prob, ref_layernorm, N * C)

static void test_layernorm(void)
{
    static ln_prob p;
    float inp[N * C], w[C], b[C], r[N * C], out[N * C], mean[N], rstd[N];
    tu_fill(inp, N * C, -2, 3);
    tu_fill(w, C, 0.5, 1.5);
    tu_fill(b, C, -0.5, 0.5);
    tu_fill(r, N * C, -1, 1);
    /* a row with a large mean and small spread, where a one-pass variance fails */
    for (int c = 0; c < C; c++) inp[3 * C + c] += 10.0f;
    to_double(p.inp, inp, N * C);
    to_double(p.w, w, C);
    to_double(p.b, b, C);
    to_double(p.r, r, N * C);
    p.eps = 1e-5;
    be.i->layernorm_forward(be.ctx, out, mean, rstd, inp, w, b, N, C, 1e-5f);
    ref_layernorm(&p);
    check_fwd("layernorm forward", out, p.out, N * C, 1e-5);

    float dinp[N * C] = {0}, dw[C] = {0}, db[C] = {0};
    be.i->layernorm_backward(be.ctx, dinp, dw, db, r, inp, w, mean, rstd, N, C);
    double g[N * C];
    numgrad(L_layernorm, &p, p.inp, N * C, g);
    check_grad("layernorm d inp", dinp, g, N * C);
    numgrad(L_layernorm, &p, p.w, C, g);
    check_grad("layernorm d w", dw, g, C);
    numgrad(L_layernorm, &p, p.b, C, g);
    check_grad("layernorm d b", db, g, C);

    /* backward accumulates: a second call doubles every gradient */
    float dinp2[N * C], dw2[C];
    memcpy(dinp2, dinp, sizeof dinp);
    memcpy(dw2, dw, sizeof dw);
    be.i->layernorm_backward(be.ctx, dinp2, dw2, NULL, r, inp, w, mean, rstd, N, C);
    for (int i = 0; i < N * C; i++) dinp[i] *= 2;
    for (int i = 0; i < C; i++) dw[i] *= 2;
    tu_close("layernorm backward accumulates (+=) d inp", dinp2, dinp, N * C, 1e-6, 1e-6);
    tu_close("layernorm backward accumulates (+=) d w, NULL db", dw2, dw, C, 1e-6, 1e-6);
}

/* ------------------------------------------------------------------- matmul */

enum { OC = 5 };

typedef struct {
    double inp[N * C], w[OC * C], b[OC], r[N * OC], out[N * OC];
    int has_bias;
} mm_prob;

static void ref_matmul(mm_prob *p)
{
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) {
            double s = p->has_bias ? p->b[o] : 0;
            for (int c = 0; c < C; c++) s += p->inp[n * C + c] * p->w[o * C + c];
            p->out[n * OC + o] = s;
        }
}

LOSS_OF(L_matmul, mm_prob, ref_matmul, N * OC)

static void test_matmul(int has_bias)
{
    static mm_prob p;
    float inp[N * C], w[OC * C], b[OC], r[N * OC], out[N * OC];
    tu_fill(inp, N * C, -1, 1);
    tu_fill(w, OC * C, -1, 1);
    tu_fill(b, OC, -1, 1);
    tu_fill(r, N * OC, -1, 1);
    to_double(p.inp, inp, N * C);
    to_double(p.w, w, OC * C);
    to_double(p.b, b, OC);
    to_double(p.r, r, N * OC);
    p.has_bias = has_bias;
    be.i->matmul_forward(be.ctx, out, inp, w, has_bias ? b : NULL, N, C, OC);
    ref_matmul(&p);
    check_fwd(has_bias ? "matmul forward (bias)" : "matmul forward (no bias)", out, p.out, N * OC, 1e-5);

    float dinp[N * C], dw[OC * C], db[OC];
    /* nonzero starting gradients: backward must add to them */
    for (int i = 0; i < N * C; i++) dinp[i] = 0.25f;
    for (int i = 0; i < OC * C; i++) dw[i] = -0.5f;
    for (int i = 0; i < OC; i++) db[i] = 1.0f;
    be.i->matmul_backward(be.ctx, dinp, dw, has_bias ? db : NULL, r, inp, w, N, C, OC);
    double g[OC * C > N * C ? OC * C : N * C];
    numgrad(L_matmul, &p, p.inp, N * C, g);
    for (int i = 0; i < N * C; i++) g[i] += 0.25;
    check_grad(has_bias ? "matmul d inp (bias)" : "matmul d inp (no bias)", dinp, g, N * C);
    numgrad(L_matmul, &p, p.w, OC * C, g);
    for (int i = 0; i < OC * C; i++) g[i] -= 0.5;
    check_grad(has_bias ? "matmul d w (bias)" : "matmul d w (no bias)", dw, g, OC * C);
    if (has_bias) {
        numgrad(L_matmul, &p, p.b, OC, g);
        for (int i = 0; i < OC; i++) g[i] += 1.0;
        check_grad("matmul d b", db, g, OC);
    }
}

/* --------------------------------------------------------------------- gelu */

enum { NG = 61, NE = 64 };

/* An elementwise op's problem (GELU, dropout): out = f(x) over n <= NE
 * values, the loss r . out; ref computes out. */
typedef struct ew_prob {
    int n;
    double x[NE], r[NE], out[NE];
    float p;
    philox_stream rng;
    void (*ref)(struct ew_prob *e);
} ew_prob;

LOSS_OF(L_elementwise, ew_prob, p->ref, p->n)

/* The op's forward (out) and backward (dinp) against the reference and its
 * numerical gradient, x and r the problem's in floats; note ends the names
 * of the checks. */
static void check_elementwise(ew_prob *e, const char *name, const char *note, const float *out, const float *dinp)
{
    char what[96];
    e->ref(e);
    snprintf(what, sizeof what, "%s forward%s", name, note);
    check_fwd(what, out, e->out, (size_t)e->n, 1e-6);
    double g[NE];
    numgrad(L_elementwise, e, e->x, (size_t)e->n, g);
    snprintf(what, sizeof what, "%s d inp%s", name, note);
    check_grad(what, dinp, g, (size_t)e->n);
}

static void ref_gelu(ew_prob *p)
{
    for (int i = 0; i < p->n; i++) p->out[i] = 0.5 * p->x[i] * (1 + erf(p->x[i] / sqrt(2.0)));
}

static void test_gelu(void)
{
    static ew_prob p = {.n = NG, .ref = ref_gelu};
    float x[NG], r[NG], out[NG], dinp[NG] = {0};
    tu_fill(x, NG, -5, 5);
    x[0] = 0;
    x[1] = -12;
    x[2] = 12;
    x[3] = 1e-3f;
    tu_fill(r, NG, -1, 1);
    to_double(p.x, x, NG);
    to_double(p.r, r, NG);
    be.i->gelu_forward(be.ctx, out, x, NG);
    be.i->gelu_backward(be.ctx, dinp, x, r, NG);
    check_elementwise(&p, "gelu", "", out, dinp);
}

/* ---------------------------------------------------------------- attention */

/* The reference at any size: q, k, v, r are (B,T,C) doubles. */
typedef struct {
    int B, T, NH, HS;
    double *q, *k, *v, *r, *out, *probs;
    const int32_t *mask;
    float p;
    philox_stream rng;
} att_prob;

static void ref_attention(att_prob *a)
{
    int Bn = a->B, Tn = a->T, H = a->NH, S = a->HS, Cn = H * S;
    double scale = 1 / sqrt((double)S), keep_mul = a->p > 0 ? 1.0 / (1.0 - a->p) : 1.0;
    double *row = malloc((size_t)Tn * sizeof *row);
    for (int b = 0; b < Bn; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < Tn; t++) {
                const double *qt = a->q + ((size_t)b * Tn + t) * Cn + h * S;
                double mx = -INFINITY, sum = 0;
                for (int s = 0; s < Tn; s++) {
                    const double *ks = a->k + ((size_t)b * Tn + s) * Cn + h * S;
                    double d = 0;
                    for (int j = 0; j < S; j++) d += qt[j] * ks[j];
                    row[s] = d * scale + (a->mask && a->mask[b * Tn + s] == 0 ? -FLT_MAX : 0.0);
                    if (row[s] > mx) mx = row[s];
                }
                for (int s = 0; s < Tn; s++) sum += (row[s] = exp(row[s] - mx));
                size_t pbase = (((size_t)b * H + h) * Tn + t) * Tn;
                for (int s = 0; s < Tn; s++) {
                    row[s] /= sum;
                    if (a->probs) a->probs[pbase + s] = row[s];
                    if (a->p > 0) row[s] *= philox_keep(a->rng, pbase + s, a->p) ? keep_mul : 0.0;
                }
                double *ot = a->out + ((size_t)b * Tn + t) * Cn + h * S;
                for (int j = 0; j < S; j++) {
                    double o = 0;
                    for (int s = 0; s < Tn; s++) o += row[s] * a->v[((size_t)b * Tn + s) * Cn + h * S + j];
                    ot[j] = o;
                }
            }
    free(row);
}

LOSS_OF(L_attention, att_prob, ref_attention, (size_t)p->B * p->T * p->NH * p->HS)

static void test_attention(float p)
{
    const int32_t mask[B * T] = {1, 1, 1, 1, 1, 1, 1, 1, 0, 0};
    philox_stream rng = {1234, 7, 1 * 16 + 1};
    float q[N * C], k[N * C], v[N * C], r[N * C], out[N * C], probs[B * NH * T * T], scratch[B * NH * T * T];
    double dq_[N * C], dk_[N * C], dv_[N * C], dr[N * C], dout_[N * C], dprobs[B * NH * T * T];
    tu_fill(q, N * C, -1.5, 1.5);
    tu_fill(k, N * C, -1.5, 1.5);
    tu_fill(v, N * C, -1, 1);
    tu_fill(r, N * C, -1, 1);
    to_double(dq_, q, N * C);
    to_double(dk_, k, N * C);
    to_double(dv_, v, N * C);
    to_double(dr, r, N * C);
    att_prob a = {B, T, NH, HS, dq_, dk_, dv_, dr, dout_, dprobs, mask, p, rng};
    backend_windows w = backend_windows_padded(B, T, mask);
    be.i->attention_forward(be.ctx, out, probs, q, k, v, &w, NH, HS, p, rng);
    ref_attention(&a);
    char name[96];
    snprintf(name, sizeof name, "attention forward out (p=%.2f)", p);
    check_fwd(name, out, dout_, N * C, 1e-5);
    snprintf(name, sizeof name, "attention forward probs (p=%.2f)", p);
    check_fwd(name, probs, dprobs, B * NH * T * T, 1e-5);
    if (be.i->probs_optional) {
        // a forward-only call (probs NULL) gives the same out, bit for bit
        float out2[N * C];
        be.i->attention_forward(be.ctx, out2, NULL, q, k, v, &w, NH, HS, p, rng);
        CHECK(!memcmp(out, out2, sizeof out), "attention forward without probs (p=%.2f): out differs", p);
        printf("attention forward without probs (p=%.2f): out bit for bit as with probs\n", p);
    }

    float dq[N * C] = {0}, dk[N * C] = {0}, dv[N * C] = {0};
    be.i->attention_backward(be.ctx, dq, dk, dv, scratch, r, q, k, v, probs, &w, NH, HS, p, rng);
    double g[N * C];
    numgrad(L_attention, &a, dq_, N * C, g);
    snprintf(name, sizeof name, "attention d q (p=%.2f)", p);
    check_grad(name, dq, g, N * C);
    numgrad(L_attention, &a, dk_, N * C, g);
    snprintf(name, sizeof name, "attention d k (p=%.2f)", p);
    check_grad(name, dk, g, N * C);
    numgrad(L_attention, &a, dv_, N * C, g);
    snprintf(name, sizeof name, "attention d v (p=%.2f)", p);
    check_grad(name, dv, g, N * C);
    /* padded keys get no gradient: their probabilities are exactly 0 */
    float pad_max = 0;
    for (int c = 0; c < C; c++) pad_max = fmaxf(pad_max, fmaxf(fabsf(dk[(T + 3) * C + c]), fabsf(dk[(T + 4) * C + c])));
    CHECK(pad_max == 0, "d k of padded keys is %g, want 0", pad_max);
}

/* A long sequence (several row blocks of scratch, two batch rows with
 * different padding): forward against the reference and backward as a
 * directional derivative, sum(grad . d) vs (L(x + h d) - L(x - h d)) / 2h
 * for one random direction d over q, k and v together. packed: the same
 * windows packed (their real rows only), against the same reference at the
 * real positions, the padding queries left out of L. */
static void test_attention_long(float p, int packed)
{
    int Bn = 2, Tn = 300, H = 2, S = 8, Cn = H * S; /* 2 row blocks of the default scratch */
    size_t n = (size_t)Bn * Tn * Cn, np = (size_t)Bn * H * Tn * Tn;
    float *f = malloc((5 * n + 2 * np) * sizeof *f);
    float *q = f, *k = q + n, *v = k + n, *r = v + n, *out = r + n, *probs = out + n, *scratch = probs + np;
    double *d = malloc((9 * n + np) * sizeof *d);
    double *xq = d, *xk = xq + n, *xv = xk + n, *xr = xv + n, *xo = xr + n, *dirq = xo + n, *dirk = dirq + n,
           *dirv = dirk + n, *want = dirv + n, *xp = want + n;
    int32_t *mask = malloc((size_t)Bn * Tn * sizeof *mask);
    /* the packed row of padded row i, or -1 */
    int *row_of = malloc((size_t)Bn * Tn * sizeof *row_of);
    int32_t cu[3] = {0, Tn, 2 * Tn - 37};
    for (int i = 0; i < Bn * Tn; i++) {
        mask[i] = !(i >= Tn && i % Tn >= Tn - 37);
        row_of[i] = mask[i] ? cu[i / Tn] + i % Tn : -1;
    }
    philox_stream rng = {99, 3, 5 * 16 + 1};
    tu_fill(q, n, -1, 1);
    tu_fill(k, n, -1, 1);
    tu_fill(v, n, -1, 1);
    tu_fill(r, n, -1, 1);
    if (packed)
        for (int i = 0; i < Bn * Tn; i++)
            if (!mask[i]) memset(r + (size_t)i * Cn, 0, (size_t)Cn * sizeof *r);
    to_double(xq, q, n);
    to_double(xk, k, n);
    to_double(xv, v, n);
    to_double(xr, r, n);
    for (size_t i = 0; i < n; i++) {
        dirq[i] = tu_urand() - 0.5;
        dirk[i] = tu_urand() - 0.5;
        dirv[i] = tu_urand() - 0.5;
    }
    backend_windows w = backend_windows_padded(Bn, Tn, mask);
    size_t nk = n, npk = np;
    if (packed) { /* the real rows to the front, in order */
        w = backend_windows_packed(cu, Bn, Tn, cu[2], Tn);
        for (int i = 0; i < Bn * Tn; i++)
            if (row_of[i] >= 0) {
                size_t dst = (size_t)row_of[i] * Cn, src = (size_t)i * Cn, sz = (size_t)Cn * sizeof *q;
                memmove(q + dst, q + src, sz);
                memmove(k + dst, k + src, sz);
                memmove(v + dst, v + src, sz);
                memmove(r + dst, r + src, sz);
            }
        nk = (size_t)cu[2] * Cn;
        npk = (size_t)H * ((size_t)Tn * Tn + (size_t)(Tn - 37) * (Tn - 37));
    }
    att_prob a = {Bn, Tn, H, S, xq, xk, xv, xr, xo, xp, mask, p, rng};
    be.i->attention_forward(be.ctx, out, probs, q, k, v, &w, H, S, p, rng);
    ref_attention(&a);
    const double *wo = xo, *wp = xp;
    if (packed) { /* the reference at the real positions, in packed order */
        for (int i = 0; i < Bn * Tn; i++)
            if (row_of[i] >= 0) memcpy(want + (size_t)row_of[i] * Cn, xo + (size_t)i * Cn, (size_t)Cn * sizeof *xo);
        size_t at = 0;
        for (int b = 0; b < Bn; b++) {
            int len = cu[b + 1] - cu[b];
            for (int h = 0; h < H; h++)
                for (int i = 0; i < len; i++)
                    for (int j = 0; j < len; j++) xp[at++] = xp[(((size_t)b * H + h) * Tn + i) * Tn + j];
        }
        wo = want;
    }
    char name[96];
    const char *kind = packed ? "packed " : "";
    snprintf(name, sizeof name, "%sattention T=%d forward out (p=%.2f)", kind, Tn, p);
    check_fwd(name, out, wo, nk, 1e-5);
    snprintf(name, sizeof name, "%sattention T=%d forward probs (p=%.2f)", kind, Tn, p);
    check_fwd(name, probs, wp, npk, 1e-5);

    float *dq = calloc(3 * n, sizeof *dq), *dk = dq + n, *dv = dk + n;
    be.i->attention_backward(be.ctx, dq, dk, dv, scratch, r, q, k, v, probs, &w, H, S, p, rng);
    double analytic = 0;
    for (int i = 0; i < Bn * Tn; i++) {
        int row = packed ? row_of[i] : i;
        if (row < 0) continue;
        for (int c = 0; c < Cn; c++) {
            size_t g = (size_t)row * Cn + c, x = (size_t)i * Cn + c;
            analytic += dq[g] * dirq[x] + dk[g] * dirk[x] + dv[g] * dirv[x];
        }
    }
    double h = 1e-5, lp, lm;
    a.probs = NULL;
    for (size_t i = 0; i < n; i++) {
        xq[i] += h * dirq[i];
        xk[i] += h * dirk[i];
        xv[i] += h * dirv[i];
    }
    lp = L_attention(&a);
    for (size_t i = 0; i < n; i++) {
        xq[i] -= 2 * h * dirq[i];
        xk[i] -= 2 * h * dirk[i];
        xv[i] -= 2 * h * dirv[i];
    }
    lm = L_attention(&a);
    double numeric = (lp - lm) / (2 * h), rel = fabs(analytic - numeric) / fabs(numeric);
    printf("%sattention T=%d (p=%.2f) directional derivative: backward %.9g numeric %.9g rel %.2e\n", kind, Tn, p,
           analytic, numeric, rel);
    CHECK(rel < 1e-4, "%sattention T=%d directional derivative rel error %.3e", kind, Tn, rel);
    free(dq);
    free(f);
    free(d);
    free(mask);
    free(row_of);
}

/* ------------------------------------------------------------------ dropout */

enum { ND = 37 };

static void ref_dropout(ew_prob *d)
{
    for (int i = 0; i < d->n; i++)
        d->out[i] = philox_keep(d->rng, (uint64_t)i, d->p) ? d->x[i] / (1.0 - d->p) : 0.0;
}

static void test_dropout_grad(void)
{
    static ew_prob d = {.n = ND, .ref = ref_dropout};
    float x[ND], r[ND], out[ND], dinp[ND] = {0};
    tu_fill(x, ND, -2, 2);
    tu_fill(r, ND, -1, 1);
    to_double(d.x, x, ND);
    to_double(d.r, r, ND);
    d.p = 0.3f;
    d.rng = (philox_stream){5, 11, 2};
    backend_windows w = backend_windows_padded(1, ND, NULL);
    be.i->dropout_forward(be.ctx, out, x, &w, 1, d.p, d.rng);
    be.i->dropout_backward(be.ctx, dinp, r, &w, 1, d.p, d.rng);
    check_elementwise(&d, "dropout", " (p=0.30)", out, dinp);
}

/* ---------------------------------------------------------------- embedding */

typedef struct {
    double wte[V * C], wpe[P * C], wtt[TV * C], r[N * C], out[N * C];
    const int32_t *ids, *types;
} emb_prob;

static void ref_embedding(emb_prob *e)
{
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++)
            e->out[n * C + c] = e->wte[e->ids[n] * C + c] + e->wpe[(n % T) * C + c] + e->wtt[e->types[n] * C + c];
}

LOSS_OF(L_embedding, emb_prob, ref_embedding, N * C)

static void test_embedding(void)
{
    static emb_prob e;
    /* repeated ids within and across rows; id 5 unused */
    const int32_t ids[N] = {2, 0, 2, 2, 4, 1, 2, 3, 0, 0};
    const int32_t types[N] = {0, 0, 1, 1, 1, 0, 0, 0, 1, 1};
    float wte[V * C], wpe[P * C], wtt[TV * C], r[N * C], out[N * C];
    tu_fill(wte, V * C, -1, 1);
    tu_fill(wpe, P * C, -1, 1);
    tu_fill(wtt, TV * C, -1, 1);
    tu_fill(r, N * C, -1, 1);
    to_double(e.wte, wte, V * C);
    to_double(e.wpe, wpe, P * C);
    to_double(e.wtt, wtt, TV * C);
    to_double(e.r, r, N * C);
    e.ids = ids;
    e.types = types;
    be.i->embedding_forward(be.ctx, out, ids, types, NULL, wte, wpe, wtt, N, T, C);
    ref_embedding(&e);
    check_fwd("embedding forward", out, e.out, N * C, 1e-6);
    float dwte[V * C] = {0}, dwpe[P * C] = {0}, dwtt[TV * C] = {0};
    be.i->embedding_backward(be.ctx, dwte, dwpe, dwtt, r, ids, types, NULL, N, T, C);
    double g[P * C]; /* P > V */
    numgrad(L_embedding, &e, e.wte, V * C, g);
    check_grad("embedding d wte (repeated ids)", dwte, g, V * C);
    numgrad(L_embedding, &e, e.wpe, P * C, g);
    check_grad("embedding d wpe (rows >= T untouched)", dwpe, g, P * C);
    numgrad(L_embedding, &e, e.wtt, TV * C, g);
    check_grad("embedding d wtt", dwtt, g, TV * C);
}

/* ------------------------------------------------------------------ qa_loss */

enum { QB = 4 };

typedef struct {
    double logits[QB * T * 2];
    const int32_t *start, *end;
    double grad_scale;
    double side[2];
} qa_prob;

static double ref_qa_loss(void *vp)
{
    qa_prob *q = vp;
    for (int side = 0; side < 2; side++) {
        const int32_t *pos = side ? q->end : q->start;
        double sum = 0;
        int count = 0;
        for (int b = 0; b < QB; b++) {
            int tgt = pos[b] < 0 ? 0 : pos[b] > T ? T : pos[b];
            if (tgt == T) continue;
            double mx = -INFINITY, se = 0;
            for (int t = 0; t < T; t++) mx = fmax(mx, q->logits[(b * T + t) * 2 + side]);
            for (int t = 0; t < T; t++) se += exp(q->logits[(b * T + t) * 2 + side] - mx);
            sum += mx + log(se) - q->logits[(b * T + tgt) * 2 + side];
            count++;
        }
        q->side[side] = sum / count;
    }
    return q->grad_scale * (q->side[0] + q->side[1]) / 2;
}

static void test_qa_loss(void)
{
    static qa_prob q;
    /* start: normal, beyond T (ignored), negative (-> 0), last; end: normal,
     * exactly T (ignored), 0, negative (-> 0) */
    const int32_t start[QB] = {1, 7, -3, 4}, end[QB] = {2, 5, 0, -1};
    float logits[QB * T * 2], dlogits[QB * T * 2], loss;
    tu_fill(logits, QB * T * 2, -3, 3);
    to_double(q.logits, logits, QB * T * 2);
    q.start = start;
    q.end = end;
    q.grad_scale = 1;
    double want = ref_qa_loss(&q);
    backend_windows w = backend_windows_padded(QB, T, NULL);
    be.i->qa_loss(be.ctx, &loss, dlogits, logits, start, end, &w, 1.0f);
    printf("qa_loss: got %.9g want %.9g\n", loss, want);
    CHECK(fabs(loss - want) <= 1e-6 * fabs(want), "qa_loss %.9g want %.9g", loss, want);
    q.grad_scale = 0.375;
    be.i->qa_loss(be.ctx, &loss, dlogits, logits, start, end, &w, 0.375f);
    double g[QB * T * 2];
    numgrad(ref_qa_loss, &q, q.logits, QB * T * 2, g);
    check_grad("qa_loss d logits (grad_scale 0.375)", dlogits, g, QB * T * 2);
    float ignored_max = 0;
    for (int t = 0; t < T; t++) ignored_max = fmaxf(ignored_max, fabsf(dlogits[(1 * T + t) * 2 + 0]));
    CHECK(ignored_max == 0, "an ignored start row has gradient %g", ignored_max);

    /* every end ignored: torch's mean over no rows is NaN, so is the loss;
     * the end gradient is 0 and the start gradient is unchanged */
    const int32_t none[QB] = {5, 6, 100, 5};
    float dl2[QB * T * 2];
    be.i->qa_loss(be.ctx, &loss, dl2, logits, start, none, &w, 0.375f);
    CHECK(isnan(loss), "all-ignored end: loss %g, want NaN as torch", loss);
    int ok = 1;
    for (int i = 0; i < QB * T; i++) ok &= dl2[2 * i + 1] == 0 && dl2[2 * i] == dlogits[2 * i];
    CHECK(ok, "all-ignored end: end gradient must be 0 and start gradient unchanged");
    printf("qa_loss with every end ignored: loss %g (NaN as torch), end gradient 0\n", loss);
}

/* --------------------------------------------------------- packed windows */

/* Three windows of 5, 2 and 4 tokens (T = 5) as a padded batch with its
 * mask and as the packed batch of the same tokens: on the packed rows every
 * windowed op must give what the padded batch gives at its real positions
 * (dropout masks drawn at the padded index). */
enum { PB = 3 };
static const int plens[PB] = {5, 2, 4};

/* cu_seqlens of the windows; returns N */
static int packed_offsets(int32_t *cu)
{
    cu[0] = 0;
    for (int b = 0; b < PB; b++) cu[b + 1] = cu[b] + plens[b];
    return cu[PB];
}

/* packed (N, C) rows <- the real rows of padded (PB, T, C) */
static void pack_rows(float *packed, const float *padded, int Cn)
{
    for (int b = 0, n = 0; b < PB; b++)
        for (int t = 0; t < plens[b]; t++, n++)
            memcpy(packed + (size_t)n * Cn, padded + ((size_t)b * T + t) * Cn, (size_t)Cn * sizeof *packed);
}

static void pack_rows_d(double *packed, const double *padded, int Cn)
{
    for (int b = 0, n = 0; b < PB; b++)
        for (int t = 0; t < plens[b]; t++, n++)
            memcpy(packed + (size_t)n * Cn, padded + ((size_t)b * T + t) * Cn, (size_t)Cn * sizeof *packed);
}

static void test_attention_packed(float p)
{
    enum { NP = PB * T };
    int32_t cu[PB + 1], mask[NP];
    int Nk = packed_offsets(cu);
    for (int i = 0; i < NP; i++) mask[i] = i % T < plens[i / T];
    philox_stream rng = {77, 5, 2 * 16 + 1};
    float q[NP * C], k[NP * C], v[NP * C], r[NP * C];
    tu_fill(q, NP * C, -1.5, 1.5);
    tu_fill(k, NP * C, -1.5, 1.5);
    tu_fill(v, NP * C, -1, 1);
    tu_fill(r, NP * C, -1, 1);
    for (int i = 0; i < NP; i++) /* padding queries do not count in L */
        if (!mask[i]) memset(r + (size_t)i * C, 0, C * sizeof *r);
    static double xq[NP * C], xk[NP * C], xv[NP * C], xr[NP * C], xo[NP * C], xp[PB * NH * T * T];
    to_double(xq, q, NP * C);
    to_double(xk, k, NP * C);
    to_double(xv, v, NP * C);
    to_double(xr, r, NP * C);
    att_prob a = {PB, T, NH, HS, xq, xk, xv, xr, xo, xp, mask, p, rng};
    ref_attention(&a);

    float pq[NP * C], pk[NP * C], pv[NP * C], pr[NP * C], out[NP * C], probs[PB * NH * T * T],
        scratch[PB * NH * T * T];
    pack_rows(pq, q, C);
    pack_rows(pk, k, C);
    pack_rows(pv, v, C);
    pack_rows(pr, r, C);
    backend_windows w = backend_windows_packed(cu, PB, T, Nk, 5);
    be.i->attention_forward(be.ctx, out, probs, pq, pk, pv, &w, NH, HS, p, rng);
    double want[NP * C], wprobs[PB * NH * T * T];
    pack_rows_d(want, xo, C);
    size_t np = 0;
    for (int b = 0; b < PB; b++)
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < plens[b]; i++)
                for (int j = 0; j < plens[b]; j++) wprobs[np++] = xp[(((size_t)b * NH + h) * T + i) * T + j];
    char name[96];
    snprintf(name, sizeof name, "packed attention forward out (p=%.2f)", p);
    check_fwd(name, out, want, (size_t)Nk * C, 1e-5);
    snprintf(name, sizeof name, "packed attention forward probs (p=%.2f)", p);
    check_fwd(name, probs, wprobs, np, 1e-5);

    float dq[NP * C] = {0}, dk[NP * C] = {0}, dv[NP * C] = {0};
    be.i->attention_backward(be.ctx, dq, dk, dv, scratch, pr, pq, pk, pv, probs, &w, NH, HS, p, rng);
    a.probs = NULL;
    double g[NP * C], gw[NP * C];
    double *xs[3] = {xq, xk, xv};
    const float *got[3] = {dq, dk, dv};
    const char *what[3] = {"q", "k", "v"};
    for (int x = 0; x < 3; x++) {
        numgrad(L_attention, &a, xs[x], NP * C, g);
        pack_rows_d(gw, g, C);
        snprintf(name, sizeof name, "packed attention d %s (p=%.2f)", what[x], p);
        check_grad(name, got[x], gw, (size_t)Nk * C);
    }
}

/* Dropout of packed rows at the padded index, at two widths: C = 8 (one
 * chunk holding every window) and 300 (windows across chunks). */
static void test_dropout_packed(void)
{
    int32_t cu[PB + 1];
    int Nk = packed_offsets(cu);
    const int widths[2] = {C, 300};
    const float p = 0.4f, scale = 1.0f / (1.0f - p);
    philox_stream rng = {11, 3, 9};
    backend_windows w = backend_windows_packed(cu, PB, T, Nk, 5);
    for (int k = 0; k < 2; k++) {
        int Cn = widths[k];
        size_t n = (size_t)Nk * Cn;
        float *x = malloc(4 * n * sizeof *x), *y = x + n, *g = y + n, *d = g + n;
        tu_fill(x, n, -2, 2);
        tu_fill(d, n, -1, 1);
        be.i->dropout_forward(be.ctx, y, x, &w, Cn, p, rng);
        for (size_t i = 0; i < n; i++) g[i] = 1.0f;
        be.i->dropout_backward(be.ctx, g, d, &w, Cn, p, rng);
        size_t bad = 0, badg = 0, dropped = 0;
        for (int b = 0, row = 0; b < PB; b++)
            for (int t = 0; t < plens[b]; t++, row++)
                for (int c = 0; c < Cn; c++) {
                    size_t i = (size_t)row * Cn + c;
                    int keep = philox_keep(rng, ((uint64_t)b * T + t) * Cn + c, p);
                    bad += y[i] != (keep ? x[i] * scale : 0.0f);
                    badg += g[i] != 1.0f + (keep ? d[i] * scale : 0.0f);
                    dropped += !keep;
                }
        printf("packed dropout C=%d: %zu of %zu dropped; %zu outputs, %zu gradients off the padded index's mask\n", Cn,
               dropped, n, bad, badg);
        CHECK(bad == 0 && badg == 0, "packed dropout C=%d: %zu outputs, %zu gradients wrong", Cn, bad, badg);
        free(x);
    }
}

/* The embedding with positions on the packed rows, and the QA loss of the
 * packed windows, against the padded ops (the loss with the mask): the same
 * floats at every real position, bit for bit; the padded loss's gradient is
 * 0 at the padding. */
static void test_embedding_loss_packed(void)
{
    enum { NP = PB * T };
    int32_t cu[PB + 1], pos[NP], ids[NP], types[NP], kids[NP], ktypes[NP], mask[NP];
    int Nk = packed_offsets(cu);
    for (int i = 0; i < NP; i++) {
        ids[i] = (int32_t)((i * 5 + 1) % V);
        types[i] = i % 3 == 0;
        mask[i] = i % T < plens[i / T];
    }
    for (int b = 0, n = 0; b < PB; b++)
        for (int t = 0; t < plens[b]; t++, n++) {
            pos[n] = t;
            kids[n] = ids[b * T + t];
            ktypes[n] = types[b * T + t];
        }
    float wte[V * C], wpe[P * C], wtt[TV * C], out[NP * C], kout[NP * C], dout[NP * C], kdout[NP * C];
    tu_fill(wte, V * C, -1, 1);
    tu_fill(wpe, P * C, -1, 1);
    tu_fill(wtt, TV * C, -1, 1);
    tu_fill(dout, NP * C, -1, 1);
    for (int i = 0; i < NP; i++)
        if (!mask[i]) memset(dout + (size_t)i * C, 0, C * sizeof *dout);
    pack_rows(kdout, dout, C);
    be.i->embedding_forward(be.ctx, out, ids, types, NULL, wte, wpe, wtt, NP, T, C);
    be.i->embedding_forward(be.ctx, kout, kids, ktypes, pos, wte, wpe, wtt, Nk, T, C);
    float want[NP * C];
    pack_rows(want, out, C);
    CHECK(!memcmp(kout, want, (size_t)Nk * C * sizeof *kout), "packed embedding forward differs from padded");
    float g[3][V * C + P * C + TV * C], kg[3][V * C + P * C + TV * C];
    memset(g, 0, sizeof g);
    memset(kg, 0, sizeof kg);
    be.i->embedding_backward(be.ctx, g[0], g[1], g[2], dout, ids, types, NULL, NP, T, C);
    be.i->embedding_backward(be.ctx, kg[0], kg[1], kg[2], kdout, kids, ktypes, pos, Nk, T, C);
    CHECK(!memcmp(g, kg, sizeof g), "packed embedding backward differs from padded");

    const int32_t st[PB] = {4, 1, 9}, en[PB] = {2, -3, 3};
    float lg[NP * 2], klg[NP * 2], dl[NP * 2], kdl[NP * 2], loss, kloss;
    tu_fill(lg, NP * 2, -3, 3);
    pack_rows(klg, lg, 2);
    backend_windows wp = backend_windows_padded(PB, T, mask), wk = backend_windows_packed(cu, PB, T, Nk, 5);
    be.i->qa_loss(be.ctx, &loss, dl, lg, st, en, &wp, 0.5f);
    be.i->qa_loss(be.ctx, &kloss, kdl, klg, st, en, &wk, 0.5f);
    float wdl[NP * 2];
    pack_rows(wdl, dl, 2);
    float pad_max = 0;
    for (int i = 0; i < NP; i++)
        if (!mask[i]) pad_max = fmaxf(pad_max, fmaxf(fabsf(dl[2 * i]), fabsf(dl[2 * i + 1])));
    printf("masked qa_loss %.9g, packed %.9g; largest gradient at padding %g\n", loss, kloss, pad_max);
    CHECK(loss == kloss && !memcmp(kdl, wdl, (size_t)Nk * 2 * sizeof *kdl) && pad_max == 0,
          "packed qa_loss differs from the masked padded one");
    printf("packed embedding and qa_loss equal the padded ones bit for bit\n");
}

/* ---------------------------------------------------- adamw and the helpers */

static void test_adamw(void)
{
    enum { NA = 1003 };
    float p[NA], g[NA], m[NA] = {0}, v[NA] = {0};
    double pd[NA], md[NA] = {0}, vd[NA] = {0};
    tu_fill(p, NA, -1, 1);
    to_double(pd, p, NA);
    const float lr = 1e-3f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f, wd = 0.01f, gs = 0.5f;
    float pold[NA];
    double dp_want[NA];
    for (int t = 1; t <= 3; t++) {
        tu_fill(g, NA, -2, 2);
        memcpy(pold, p, sizeof p);
        be.i->adamw(be.ctx, p, g, m, v, NA, lr, b1, b2, eps, wd, t, gs);
        /* the backend takes the decimals these floats were written as,
         * as torch gets them from Python */
        const double lrd = 1e-3, b1d = 0.9, b2d = 0.999, wdd = 0.01;
        for (int i = 0; i < NA; i++) {
            double gi = (double)g[i] * gs, p0 = pd[i];
            pd[i] *= 1 - lrd * wdd;
            md[i] = b1d * md[i] + (1 - b1d) * gi;
            vd[i] = b2d * vd[i] + (1 - b2d) * gi * gi;
            double denom = sqrt(vd[i]) / sqrt(1 - pow(b2d, t)) + eps;
            pd[i] -= lrd / (1 - pow(b1d, t)) * md[i] / denom;
            dp_want[i] = pd[i] - p0;
        }
        /* compare the update (p is ~1 and the update ~lr, so p's float
         * rounding is ~1e-4 of the update: atol 1e-4 lr), then the moments;
         * then continue from the float state, so each step is checked alone */
        float dp_got[NA], dpw[NA], mw[NA], vw[NA];
        for (int i = 0; i < NA; i++) {
            dp_got[i] = (float)((double)p[i] - pold[i]);
            dpw[i] = (float)dp_want[i];
            mw[i] = (float)md[i];
            vw[i] = (float)vd[i];
            pd[i] = p[i];
            md[i] = m[i];
            vd[i] = v[i];
        }
        char name[64];
        snprintf(name, sizeof name, "adamw step %d update", t);
        tu_close(name, dp_got, dpw, NA, 1e-3, 1e-4 * lr);
        snprintf(name, sizeof name, "adamw step %d m", t);
        tu_close(name, m, mw, NA, 1e-5, 1e-7); /* m may cancel to ~0: g - m rounds at ~1e-7 */
        snprintf(name, sizeof name, "adamw step %d v", t);
        tu_close(name, v, vw, NA, 1e-5, 1e-12);
    }
    /* wd = 0: no decay factor at all */
    float p1[4] = {1, -2, 3, 0}, g1[4] = {0, 0, 0, 0}, m1[4] = {0}, v1[4] = {0};
    be.i->adamw(be.ctx, p1, g1, m1, v1, 4, 0.1f, b1, b2, eps, 0.0f, 1, 1.0f);
    CHECK(p1[0] == 1 && p1[1] == -2 && p1[2] == 3 && p1[3] == 0, "adamw with zero gradient and wd 0 moved p");
}

static void test_helpers(void)
{
    size_t n = 300001; /* several sum_squares chunks, not a multiple of 4 */
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), *z = malloc(n * sizeof *z);
    tu_fill(x, n, -1, 1);
    tu_fill(y, n, -1, 1);
    double want = 0;
    for (size_t i = 0; i < n; i++) want += (double)x[i] * x[i];
    double got = be.i->sum_squares(be.ctx, x, n);
    printf("sum_squares: got %.17g want %.17g\n", got, want);
    CHECK(fabs(got - want) <= 1e-12 * want, "sum_squares %.17g want %.17g", got, want);
    CHECK(be.i->sum_squares(be.ctx, x, 0) == 0, "sum_squares of nothing");

    be.i->add(be.ctx, z, x, y, n);
    int ok = 1;
    for (size_t i = 0; i < n; i++) ok &= z[i] == x[i] + y[i];
    CHECK(ok, "add: out = a + b exactly");
    be.i->add(be.ctx, x, x, y, n); /* aliased */
    ok = 1;
    for (size_t i = 0; i < n; i++) ok &= x[i] == z[i];
    CHECK(ok, "add with out == a");

    memcpy(y, z, n * sizeof *z);
    be.i->scale(be.ctx, z, n, 0.3f);
    ok = 1;
    for (size_t i = 0; i < n; i++) ok &= z[i] == y[i] * 0.3f;
    CHECK(ok, "scale: x * s exactly");

    CHECK(be.i->all_finite(be.ctx, z, n) == 1, "all_finite on finite data");
    z[n - 1] = INFINITY;
    CHECK(be.i->all_finite(be.ctx, z, n) == 0, "all_finite misses +inf at the end");
    z[n - 1] = 0;
    z[12345] = NAN;
    CHECK(be.i->all_finite(be.ctx, z, n) == 0, "all_finite misses NaN");
    z[12345] = -INFINITY;
    CHECK(be.i->all_finite(be.ctx, z, n) == 0, "all_finite misses -inf");
    z[12345] = FLT_MAX;
    CHECK(be.i->all_finite(be.ctx, z, n) == 1, "all_finite rejects FLT_MAX");
    free(x);
    free(y);
    free(z);
}

static void test_memory(void)
{
    float *a = be.i->alloc(be.ctx, 1000 * sizeof(float)), *b = be.i->alloc(be.ctx, 1000 * sizeof(float));
    CHECK(a && b && ((uintptr_t)a & 63) == 0 && ((uintptr_t)b & 63) == 0, "alloc: 64-byte aligned");
    float host[1000], back[1000];
    tu_fill(host, 1000, -1, 1);
    CHECK(be.i->upload(be.ctx, a, host, sizeof host) == 0, "upload");
    be.i->copy(be.ctx, b, a, sizeof host);
    CHECK(be.i->download(be.ctx, back, b, sizeof back) == 0, "download");
    CHECK(memcmp(host, back, sizeof host) == 0, "upload, copy, download round trip");
    be.i->zero(be.ctx, b, sizeof host);
    be.i->download(be.ctx, back, b, sizeof back);
    int zero = 1;
    for (int i = 0; i < 1000; i++) zero &= back[i] == 0;
    CHECK(zero, "zero");
    CHECK(be.i->sync(be.ctx) == 0, "sync");
    be.i->release(be.ctx, a);
    be.i->release(be.ctx, b);
    if (!tu_sanitized()) { /* ASan aborts on such a request instead of failing it */
        void *huge = be.i->alloc(be.ctx, (size_t)1 << 62);
        CHECK(huge == NULL, "alloc of 2^62 bytes must fail");
        CHECK(strstr(err_msg(), "out of memory") != NULL, "alloc failure message: %s", err_msg());
    }
}

/* The op list's table and the door (backend.h): the CPU declares fp32
 * activations and has every required op; its extras are found by name,
 * with and without an instance, and an unknown name is NULL. */
static void test_door(void)
{
    CHECK(backend_act_type(&be) == BACKEND_F32 && backend_act_size(&be) == 4, "CPU activations are fp32");
#define BACKEND_OP(name, ret, params) CHECK(be.i->name != NULL, "op %s missing", #name);
#define BACKEND_OPT(name, cpu, cuda, ret, params) CHECK((be.i->name != NULL) == (cpu), "optional op %s", #name);
#include "backend/ops.def"
    CHECK(backend_get_proc(&be, BACKEND_PROC_ANSWER_PRECISION) != NULL, "door: answer precision");
    CHECK(backend_get_proc(&be, BACKEND_PROC_BATCH_INVARIANT) ==
              backend_reg_get_proc("cpu", BACKEND_PROC_BATCH_INVARIANT),
          "door: the same function with and without an instance");
    CHECK(backend_get_proc(&be, "no_such_proc") == NULL && backend_reg_get_proc("cuda", "answer_check") == NULL,
          "door: unknown names are NULL");
    char isa[32];
    CHECK(backend_kernel_info("cpu", "isa", isa, sizeof isa)[0] != 0, "door: the CPU's level");
    CHECK(backend_set_batch_invariant(&be, 1) == 1 && backend_set_batch_invariant(&be, 0) == 1,
          "door: the CPU honours batch invariance");
}

int main(void)
{
    if (backend_cpu_create(&be, 2) != 0) {
        fprintf(stderr, "backend_cpu_create: %s\n", err_msg());
        return 1;
    }
    CHECK(strcmp(be.i->name, "cpu") == 0, "backend name %s", be.i->name);
    test_door();
    /* informational: the core OpenBLAS picked (OPENBLAS_CORETYPE overrides
     * it) and its threading (2 = the OpenMP build the CMake file prefers) */
    printf("%s: core %s, parallel mode %d\n", openblas_get_config(), openblas_get_corename(),
           openblas_get_parallel());
    test_memory();
    test_math();
    test_math16();
    test_layernorm();
    test_matmul(1);
    test_matmul(0);
    test_gelu();
    test_gelu_exact();
    test_attention(0.0f);
    test_attention(0.3f);
    test_attention_long(0.0f, 0);
    test_attention_long(0.2f, 0);
    test_attention_long(0.0f, 1);
    test_attention_long(0.2f, 1);
    test_dropout_grad();
    test_embedding();
    test_qa_loss();
    test_attention_packed(0.0f);
    test_attention_packed(0.3f);
    test_dropout_packed();
    test_embedding_loss_packed();
    test_adamw();
    test_helpers();
    backend_free(&be);
    CHECK(be.i == NULL && be.ctx == NULL, "backend_free clears the handle");
    return tu_done();
}
