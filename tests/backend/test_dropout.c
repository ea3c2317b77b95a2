/* Randomness and determinism of the CPU backend. Dropout masks: a pure
 * function of (seed, step, stream, element) that agrees with philox_keep,
 * keeps 1 - p of the elements within a statistical bound, scales the kept
 * ones by 1/(1-p), and is the same mask in the dropout op, its backward and
 * inside attention. Determinism: a training-like sequence of every op, run
 * twice, gives the same bytes, with 2 threads and with 1. */
#include "backend/backend.h"
#include "backend/cpu/cpu.h"
#include "core/err.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static backend be;

/* n elements as one window of n rows of 1 column: the flat index */
#define FLAT(n) (&(backend_windows){NULL, NULL, 1, (int)(n), (int)(n), (int)(n)})

/* The kept mask of dropout_forward on all-ones input. */
static void mask_of(unsigned char *keep, float *out, const float *ones, size_t n, float p, philox_stream s)
{
    be.i->dropout_forward(be.ctx, out, ones, FLAT(n), 1, p, s);
    for (size_t i = 0; i < n; i++) keep[i] = out[i] != 0;
}

static size_t count_diff(const unsigned char *a, const unsigned char *b, size_t n)
{
    size_t d = 0;
    for (size_t i = 0; i < n; i++) d += a[i] != b[i];
    return d;
}

static void test_masks(float p, size_t n)
{
    float *ones = malloc(n * sizeof *ones), *out = malloc(n * sizeof *out);
    unsigned char *k0 = malloc(n), *k1 = malloc(n);
    for (size_t i = 0; i < n; i++) ones[i] = 1.0f;
    philox_stream s = {0x5eed0123456789ull, 17, 2 * 16 + 3};

    mask_of(k0, out, ones, n, p, s);
    mask_of(k1, out, ones, n, p, s);
    CHECK(memcmp(k0, k1, n) == 0, "p=%.2f: the same (seed, step, stream) gave another mask", p);

    /* the kept fraction: Binomial(n, 1-p), within 5 sigma */
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) kept += k0[i];
    double want = n * (1.0 - p), sigma = sqrt(n * p * (1.0 - p)), z = (kept - want) / sigma;
    printf("p=%.2f n=%zu: kept %zu, expected %.0f, z = %+.2f sigma\n", p, n, kept, want, z);
    CHECK(fabs(z) < 5, "p=%.2f: kept %zu of %zu is %.1f sigma from %.0f", p, kept, n, z, want);

    /* every element agrees with philox_keep, and kept ones are exactly 1/(1-p) */
    size_t disagree = 0, badscale = 0;
    float scale = 1.0f / (1.0f - p);
    for (size_t i = 0; i < n; i++) {
        disagree += k0[i] != philox_keep(s, i, p);
        badscale += k0[i] && out[i] != scale;
    }
    CHECK(disagree == 0, "p=%.2f: %zu elements disagree with philox_keep", p, disagree);
    CHECK(badscale == 0, "p=%.2f: %zu kept elements are not scaled by 1/(1-p) = %.9g", p, badscale, scale);

    /* another step, stream or seed: another mask; two independent masks
     * differ in 2p(1-p) of the elements */
    philox_stream other[3] = {{s.seed, s.step + 1, s.stream}, {s.seed, s.step, s.stream + 1}, {s.seed + 1, s.step, s.stream}};
    const char *what[3] = {"step", "stream", "seed"};
    for (int j = 0; j < 3; j++) {
        mask_of(k1, out, ones, n, p, other[j]);
        size_t d = count_diff(k0, k1, n);
        double dw = n * 2.0 * p * (1.0 - p), ds = sqrt(n * 2.0 * p * (1.0 - p) * (1 - 2.0 * p * (1.0 - p)));
        printf("p=%.2f: another %s differs in %zu elements (independent masks: %.0f +- %.0f)\n", p, what[j], d, dw, ds);
        CHECK(fabs(d - dw) < 5 * ds, "p=%.2f: another %s: %zu differences, expected %.0f", p, what[j], d, dw);
    }

    /* the forward on data: out = x * mask exactly; in place gives the same;
     * backward accumulates dout * mask */
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), *g = malloc(n * sizeof *g);
    for (size_t i = 0; i < n; i++) x[i] = (float)((double)(i % 1001) / 250.0 - 2.0);
    be.i->dropout_forward(be.ctx, y, x, FLAT(n), 1, p, s);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += y[i] != (k0[i] ? x[i] * scale : 0.0f);
    CHECK(bad == 0, "p=%.2f: %zu outputs are not x * 1/(1-p) or 0", p, bad);
    memcpy(g, x, n * sizeof *g);
    be.i->dropout_forward(be.ctx, g, g, FLAT(n), 1, p, s);
    CHECK(memcmp(g, y, n * sizeof *g) == 0, "p=%.2f: in-place dropout differs", p);
    for (size_t i = 0; i < n; i++) g[i] = 1.0f;
    be.i->dropout_backward(be.ctx, g, x, FLAT(n), 1, p, s);
    bad = 0;
    for (size_t i = 0; i < n; i++) bad += g[i] != 1.0f + (k0[i] ? x[i] * scale : 0.0f);
    CHECK(bad == 0, "p=%.2f: %zu gradients are not 1 + dout * mask", p, bad);

    /* a window that starts mid-block draws the same elements as the whole */
    size_t off = 4099, len = n - off < 1003 ? n - off : 1003;
    be.i->dropout_forward(be.ctx, y, ones, FLAT(n), 1, p, s);
    bad = 0;
    for (size_t i = 0; i < len; i++) bad += (y[off + i] != 0) != philox_keep(s, off + i, p);
    CHECK(bad == 0, "p=%.2f: %zu mismatches in a window at %zu", p, bad, off);
    free(x);
    free(y);
    free(g);
    free(ones);
    free(out);
    free(k0);
    free(k1);
}

static void test_edges(void)
{
    float x[7] = {1, -2, 3, -4, 5, NAN, INFINITY}, y[7];
    philox_stream s = {1, 2, 3};
    be.i->dropout_forward(be.ctx, y, x, FLAT(7), 1, 0.0f, s);
    CHECK(memcmp(x, y, sizeof x) == 0, "p=0 must copy");
    float g[7] = {0};
    be.i->dropout_backward(be.ctx, g, x, FLAT(5), 1, 0.0f, s);
    CHECK(g[0] == 1 && g[1] == -2 && g[4] == 5, "p=0 backward must add dout");
    be.i->dropout_forward(be.ctx, y, x, FLAT(5), 1, 1.0f, s);
    int zero = 1;
    for (int i = 0; i < 5; i++) zero &= y[i] == 0;
    CHECK(zero, "p=1 gives zeros, as torch");
    /* as torch (input * mask): a dropped NaN or inf is NaN, not 0 */
    be.i->dropout_forward(be.ctx, y, x, FLAT(7), 1, 0.9999f, s);
    CHECK(isnan(y[5]) && isnan(y[6]), "dropped NaN/inf: %g %g, want NaN as torch's x * 0", y[5], y[6]);
}

/* Attention draws its probability dropout from the flat index into probs:
 * with HS = T and v the identity in every head, out = P' itself, so it must
 * equal probs * philox_keep(rng, index) / (1 - p). */
static void test_attention_mask(void)
{
    enum { B = 2, T = 24, NH = 3, HS = T, C = NH * HS };
    float p = 0.25f, scale = 1.0f / (1.0f - p);
    philox_stream s = {7, 3, 4 * 16 + 1};
    float *q = malloc(sizeof(float) * B * T * C * 4), *k = q + B * T * C, *v = k + B * T * C, *out = v + B * T * C;
    float *probs = malloc(sizeof(float) * B * NH * T * T);
    int32_t mask[B * T];
    for (int i = 0; i < B * T; i++) mask[i] = !(i >= T && i % T >= T - 5);
    for (int i = 0; i < B * T * C; i++) {
        q[i] = (float)sin(i * 0.37);
        k[i] = (float)cos(i * 0.11);
    }
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < NH; h++)
                for (int j = 0; j < HS; j++) v[(b * T + t) * C + h * HS + j] = t == j;
    backend_windows w = backend_windows_padded(B, T, mask);
    be.i->attention_forward(be.ctx, out, probs, q, k, v, &w, NH, HS, p, s);
    size_t bad = 0, dropped = 0, total = 0;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++)
                for (int j = 0; j < T; j++) {
                    size_t idx = (((size_t)b * NH + h) * T + t) * T + j;
                    int keep = philox_keep(s, idx, p);
                    float want = keep ? probs[idx] * scale : 0.0f;
                    float got = out[(b * T + t) * C + h * HS + j];
                    bad += fabsf(got - want) > 1e-6f * (fabsf(want) + 1e-6f);
                    dropped += !keep;
                    total++;
                }
    printf("attention dropout: %zu of %zu probabilities dropped, %zu mismatches with philox_keep(flat index)\n",
           dropped, total, bad);
    CHECK(bad == 0, "attention dropout: %zu elements disagree with probs * philox_keep / (1-p)", bad);
    free(q);
    free(probs);
}

/* The mask generator itself (vector paths and scalar edges) against
 * philox_keep: odd starts and lengths, probabilities whose integer
 * threshold is and is not exact, and a window across element 2^34, where
 * the block number's high word changes. */
static void test_generator(void)
{
    const float ps[] = {0.1f, 0.5f, 0.25f, 0.3333f, 1e-9f, 0.99999994f, 0.0f, 0.7f, 1.0f, 2.0f, -1.0f, NAN};
    const uint64_t starts[] = {0, 3, 4097, ((uint64_t)1 << 34) - 1001, ((uint64_t)1 << 35) + 5};
    enum { LEN = 2003 };
    float mul[LEN];
    philox_stream s = {0xfeedbeefcafeull, 123456, 11 * 16 + 2};
    size_t bad = 0, total = 0;
    for (size_t a = 0; a < sizeof ps / sizeof ps[0]; a++)
        for (size_t b = 0; b < sizeof starts / sizeof starts[0]; b++) {
            cpu_dropout_mask(mul, s, starts[b], LEN, ps[a], 2.0f);
            for (size_t i = 0; i < LEN; i++, total++)
                bad += mul[i] != (philox_keep(s, starts[b] + i, ps[a]) ? 2.0f : 0.0f);
        }
    printf("mask generator: %zu of %zu elements disagree with philox_keep\n", bad, total);
    CHECK(bad == 0, "mask generator: %zu of %zu elements disagree with philox_keep", bad, total);
}

/* The keep bits (cpu_dropout_bits) against philox_keep, including the last
 * word's unused bits, which must be 0; and the products of the bits
 * (cpu_dropout_apply_bits, _bits2) against those of the multipliers. */
static void test_bits(void)
{
    const float ps[] = {0.1f, 0.5f, 0.3333f, 1e-9f, 0.99999994f, 0.0f, 1.0f, NAN};
    const uint64_t starts[] = {0, 1, 2, 3, 384, 4097, ((uint64_t)1 << 34) - 1001, ((uint64_t)1 << 34) - 5};
    const size_t lens[] = {1, 7, 64, 100, 383, 384, 4099, 9000};
    enum { MAXLEN = 9000, W = (MAXLEN + 63) / 64 + 1 };
    static uint64_t bits[W];
    static float mul[MAXLEN], x[MAXLEN], d[MAXLEN], out[MAXLEN], out2[MAXLEN], dx[MAXLEN];
    philox_stream s = {0x1234abcdull, 77, 5 * 16 + 3};
    size_t bad = 0, badmul = 0, total = 0;
    for (size_t i = 0; i < MAXLEN; i++) {
        x[i] = (float)tu_urand() * 2.0f - 1.0f;
        d[i] = (float)tu_urand() * 2.0f - 1.0f;
    }
    x[5] = NAN;
    x[6] = INFINITY;
    for (size_t a = 0; a < sizeof ps / sizeof ps[0]; a++)
        for (size_t b = 0; b < sizeof starts / sizeof starts[0]; b++)
            for (size_t c = 0; c < sizeof lens / sizeof lens[0]; c++) {
                size_t n = lens[c], nw = (n + 63) / 64;
                memset(bits, 0xA5, sizeof bits);
                cpu_dropout_bits(bits, s, starts[b], n, ps[a]);
                for (size_t i = 0; i < nw * 64; i++, total++) {
                    int want = i < n ? philox_keep(s, starts[b] + i, ps[a]) : 0;
                    bad += (int)((bits[i / 64] >> (i % 64)) & 1) != want;
                }
                bad += bits[nw] != 0xA5A5A5A5A5A5A5A5ull; /* nothing written past the last word */
                cpu_dropout_mask(mul, s, starts[b], n, ps[a], 1.25f);
                memcpy(dx, d, n * sizeof *dx);
                cpu_dropout_apply_bits(out, x, bits, n, 1.25f);
                cpu_dropout_apply_bits2(dx, out2, x, bits, n, 1.25f);
                for (size_t i = 0; i < n; i++) {
                    float want = x[i] * mul[i], dwant = mul[i] * d[i];
                    badmul += memcmp(&out[i], &want, sizeof want) != 0 || memcmp(&out2[i], &want, sizeof want) != 0 ||
                              memcmp(&dx[i], &dwant, sizeof dwant) != 0;
                }
            }
    /* cpu_probs_store: rows at every alignment and of every length mod 8 */
    size_t badstore = 0;
    static float probs[MAXLEN + 16], xs[MAXLEN], drop[MAXLEN];
    cpu_dropout_mask(mul, s, 0, MAXLEN, 0.5f, 1.25f);
    cpu_dropout_bits(bits, s, 0, MAXLEN, 0.5f);
    for (size_t shift = 0; shift < 9; shift++)
        for (size_t c = 0; c < sizeof lens / sizeof lens[0]; c++)
            for (int withdrop = 0; withdrop < 2; withdrop++) {
                size_t n = lens[c];
                float inv = 1.0f / 3.0f;
                memcpy(xs, x, n * sizeof *xs);
                cpu_probs_store(probs + shift, xs, inv, n, withdrop ? drop : NULL, withdrop ? bits : NULL, 1.25f);
                cpu_probs_store_done();
                for (size_t i = 0; i < n; i++) {
                    float y = x[i] * inv, yd = y * mul[i];
                    badstore += memcmp(&probs[shift + i], &y, sizeof y) != 0;
                    badstore += withdrop ? memcmp(&drop[i], &yd, sizeof yd) != 0 : memcmp(&xs[i], &y, sizeof y) != 0;
                }
            }
    CHECK(badstore == 0, "cpu_probs_store: %zu values differ from x * inv (and its products)", badstore);
    printf("keep bits: %zu of %zu bits disagree with philox_keep, %zu products differ from the multipliers'\n", bad,
           total, badmul);
    CHECK(bad == 0, "keep bits: %zu of %zu bits disagree with philox_keep", bad, total);
    CHECK(badmul == 0, "keep bits: %zu products differ from those of cpu_dropout_mask's multipliers", badmul);
}

/* The mask cache cases' second CPU backend, one that never ran their forward; where it cannot be
 * made, the case fails and its buffer f is freed. */
static int fresh_backend(backend *fresh, float *f)
{
    if (backend_cpu_create(fresh, 2) == 0) return 1;
    CHECK(0, "backend_cpu_create: %s", err_msg());
    free(f);
    return 0;
}

/* Attention with dropout reads its forward's mask from the mask cache in
 * the backward (and in a forward run again, as recompute does); a backward
 * that finds no mask draws it. All three must give the same bytes: a packed
 * batch (rows of odd lengths, bits per row) and a padded one of T = 128
 * (the rows one run of bits). */
static void attention_case(const backend_windows *w, int NH, int HS, const char *what)
{
    int C = NH * HS;
    size_t n = (size_t)w->N * C, np = 0;
    for (int b = 0; b < w->B; b++) {
        size_t l = (size_t)(w->cu_seqlens ? w->cu_seqlens[b + 1] - w->cu_seqlens[b] : w->T);
        np += (size_t)NH * l * l;
    }
    float *f = calloc(16 * n + 3 * np, sizeof *f);
    float *q = f, *k = q + n, *v = k + n, *dout = v + n, *out[3] = {dout + n, dout + 2 * n, dout + 3 * n};
    float *g = dout + 4 * n; /* dq, dk, dv of the three runs: 9 n */
    float *probs[2] = {g + 9 * n, g + 9 * n + np}, *scratch = g + 9 * n + 2 * np;
    for (size_t i = 0; i < 4 * n; i++) q[i] = (float)sin((double)i * 0.37) * 2.0f;
    philox_stream s = {99, 5, 2 * 16 + 1};
    float p = 0.3f;
    backend fresh;
    if (!fresh_backend(&fresh, f)) return;
    const backend_i *o = be.i;
    /* run 0: forward, backward (the cached mask) */
    o->attention_forward(be.ctx, out[0], probs[0], q, k, v, w, NH, HS, p, s);
    o->attention_backward(be.ctx, g, g + n, g + 2 * n, scratch, dout, q, k, v, probs[0], w, NH, HS, p, s);
    /* run 1: backward on a backend that never ran the forward (drawn) */
    o->attention_backward(fresh.ctx, g + 3 * n, g + 4 * n, g + 5 * n, scratch, dout, q, k, v, probs[0], w, NH, HS, p,
                          s);
    /* run 2: forward twice (the second reads the first's mask), backward */
    o->attention_forward(be.ctx, out[1], probs[1], q, k, v, w, NH, HS, p, s);
    o->attention_forward(be.ctx, out[2], probs[1], q, k, v, w, NH, HS, p, s);
    o->attention_backward(be.ctx, g + 6 * n, g + 7 * n, g + 8 * n, scratch, dout, q, k, v, probs[1], w, NH, HS, p, s);
    int same_fwd = !memcmp(out[0], out[1], n * sizeof *f) && !memcmp(out[0], out[2], n * sizeof *f);
    int same_drawn = !memcmp(g, g + 3 * n, 3 * n * sizeof *f), same_again = !memcmp(g, g + 6 * n, 3 * n * sizeof *f);
    printf("attention mask cache, %s: forward again %s, backward with a drawn mask %s, after recompute %s\n", what,
           same_fwd ? "same" : "DIFFERS", same_drawn ? "same" : "DIFFERS", same_again ? "same" : "DIFFERS");
    CHECK(same_fwd && same_drawn && same_again, "attention mask cache (%s): results depend on the cache", what);
    backend_free(&fresh);
    free(f);
}

/* Hidden dropout through the mask cache: the forward keeps its keep bits,
 * the backward reads them; the same backward on a backend without them
 * draws multipliers. Rows of C = 40 in packed windows put the windows'
 * ends anywhere in a 64-bit word. */
static void dropout_case(const backend_windows *w, int C, const char *what)
{
    size_t n = (size_t)w->N * C;
    float *f = calloc(7 * n, sizeof *f), *x = f, *y0 = x + n, *y1 = y0 + n, *y2 = y1 + n, *g0 = y2 + n, *g1 = g0 + n,
          *g2 = g1 + n;
    for (size_t i = 0; i < n; i++) x[i] = (float)sin((double)i * 0.91) * 3.0f;
    philox_stream s = {1234, 8, 4 * 16 + 2};
    backend fresh;
    if (!fresh_backend(&fresh, f)) return;
    const backend_i *o = be.i;
    for (size_t i = 0; i < n; i++) g0[i] = g1[i] = g2[i] = 0.5f;
    o->dropout_forward(be.ctx, y0, x, w, C, 0.2f, s);  /* draws, keeps the bits */
    o->dropout_forward(be.ctx, y1, x, w, C, 0.2f, s);  /* reads them */
    o->dropout_backward(be.ctx, g0, x, w, C, 0.2f, s); /* reads them, drops them */
    o->dropout_backward(be.ctx, g1, x, w, C, 0.2f, s); /* draws multipliers */
    o->dropout_forward(fresh.ctx, y2, x, w, C, 0.2f, s);
    o->dropout_backward(fresh.ctx, g2, x, w, C, 0.2f, s);
    int same = !memcmp(y0, y1, n * sizeof *f) && !memcmp(y0, y2, n * sizeof *f) && !memcmp(g0, g1, n * sizeof *f) &&
               !memcmp(g0, g2, n * sizeof *f);
    size_t bad = 0;
    for (int b = 0; b < w->B; b++) {
        int r0 = w->cu_seqlens ? w->cu_seqlens[b] : b * w->T;
        int len = w->cu_seqlens ? w->cu_seqlens[b + 1] - r0 : w->T;
        for (size_t i = 0; i < (size_t)len * C; i++) {
            size_t at = (size_t)r0 * C + i;
            int keep = philox_keep(s, (size_t)b * w->T * C + i, 0.2f);
            bad += y0[at] != (keep ? x[at] * 1.25f : 0.0f * x[at]);
        }
    }
    printf("hidden dropout mask cache, %s: cached, read again, drawn: %s; %zu outputs disagree with philox_keep\n", what,
           same ? "same" : "DIFFER", bad);
    CHECK(same && bad == 0, "hidden dropout mask cache (%s): results depend on the cache", what);
    backend_free(&fresh);
    free(f);
}

static void test_mask_cache(void)
{
    static const int32_t cu[4] = {0, 70, 73, 203};
    backend_windows packed = backend_windows_packed(cu, 3, 130, 203, 130);
    attention_case(&packed, 2, 16, "packed 70+3+130");
    static int32_t mask[2 * 128];
    for (int i = 0; i < 2 * 128; i++) mask[i] = i % 128 < 100 || i < 128;
    backend_windows padded = backend_windows_padded(2, 128, mask);
    attention_case(&padded, 3, 16, "padded 2x128");
    dropout_case(&packed, 40, "packed 70+3+130, C 40");
    dropout_case(&padded, 40, "padded 2x128, C 40");
    static const int32_t cu2[3] = {0, 5000, 5031};
    backend_windows big = backend_windows_packed(cu2, 2, 5000, 5031, 5000);
    dropout_case(&big, 52, "packed 5000+31, C 52 (threaded)");
}

/* ------------------------------------------------------------- determinism */


/* One training-like op sequence at a size where every op runs threaded;
 * returns a hash of every output and gradient. */
static uint64_t op_sequence(backend *bk, uint64_t *bytes_hash)
{
    /* T = 288: attention in two row blocks; N*C above CPU_PAR_MIN, so every
     * op runs threaded */
    enum { DB = 4, DT = 288, DH = 8, DS = 32, DC = DH * DS, DI = 4 * DC, DN = DB * DT, DV = 50 };
    tu_rng_state = 0x1234567ull;
    size_t nf = 2 * DV * DC + 2 * DT * DC + 8 * DC + 4 * DC * DC + 4 * DI * DC + 14 * DN * DC + 4 * DN * DI +
                2 * (size_t)DB * DH * DT * DT + 4 * DN;
    float *buf = calloc(nf, sizeof *buf), *f = buf;
#define TAKE(n) (f += (n), f - (n))
    float *wte = TAKE(DV * DC), *wpe = TAKE(DT * DC), *wtt = TAKE(2 * DC), *lnw = TAKE(DC), *lnb = TAKE(DC),
          *qw = TAKE(DC * DC), *kw = TAKE(DC * DC), *vw = TAKE(DC * DC), *fw = TAKE(DI * DC), *qb = TAKE(DC);
    float *emb = TAKE(DN * DC), *ln = TAKE(DN * DC), *q = TAKE(DN * DC), *k = TAKE(DN * DC), *v = TAKE(DN * DC),
          *att = TAKE(DN * DC), *ff = TAKE(DN * DI), *ge = TAKE(DN * DI), *probs = TAKE(DB * DH * DT * DT),
          *scratch = TAKE(DB * DH * DT * DT), *dro = TAKE(DN * DC), *ddro = TAKE(DN * DC),
          *datt = TAKE(DN * DC);
    float *dq = TAKE(DN * DC), *dk = TAKE(DN * DC), *dv = TAKE(DN * DC), *dln = TAKE(DN * DC), *demb = TAKE(DN * DC),
          *dge = TAKE(DN * DI), *dff = TAKE(DN * DI), *dqw = TAKE(DC * DC), *dfw = TAKE(DI * DC), *dwte = TAKE(DV * DC),
          *dwpe = TAKE(DT * DC), *dlnw = TAKE(DC), *dlnb = TAKE(DC), *logits = TAKE(DN * 2),
          *dlogits = TAKE(DN * 2), *dqb = TAKE(DC), *mom = TAKE(DI * DC), *vel = TAKE(DI * DC);
    static float mean[DN], rstd[DN];
    float loss;
    static int32_t ids[DN], types[DN], mask[DN];
    int32_t st[DB] = {3, 40, 0, 300}, en[DB] = {7, 200, 0, -1};
    for (int i = 0; i < DN; i++) {
        ids[i] = (int32_t)(tu_urand() * DV);
        types[i] = i % DT > DT / 3;
        mask[i] = !(i >= DT && i % DT > DT - 20);
    }
    tu_fill(wte, DV * DC, -1, 1);
    tu_fill(wpe, DT * DC, -1, 1);
    tu_fill(wtt, 2 * DC, -1, 1);
    tu_fill(lnw, DC, 0.5, 1.5);
    tu_fill(lnb, DC, -0.1, 0.1);
    tu_fill(qw, 3 * DC * DC, -0.2, 0.2);
    tu_fill(fw, DI * DC, -0.2, 0.2);
    tu_fill(qb, DC, -0.1, 0.1);
    philox_stream rng = {42, 9, 3 * 16 + 1};
    void *c = bk->ctx;
    const backend_i *o = bk->i;
    backend_windows w = backend_windows_padded(DB, DT, mask), wl = backend_windows_padded(DB, DT, NULL);
    o->embedding_forward(c, emb, ids, types, NULL, wte, wpe, wtt, DN, DT, DC);
    o->layernorm_forward(c, ln, mean, rstd, emb, lnw, lnb, DN, DC, 1e-12f);
    o->matmul_forward(c, q, ln, qw, qb, DN, DC, DC);
    o->matmul_forward(c, k, ln, kw, NULL, DN, DC, DC);
    o->matmul_forward(c, v, ln, vw, qb, DN, DC, DC);
    o->attention_forward(c, att, probs, q, k, v, &w, DH, DS, 0.1f, rng);
    o->matmul_forward(c, ff, att, fw, NULL, DN, DC, DI);
    o->gelu_forward(c, ge, ff, (size_t)DN * DI);
    o->dropout_forward(c, dro, att, &w, DC, 0.1f, rng);
    for (int i = 0; i < DN; i++) logits[2 * i] = ge[i * DI], logits[2 * i + 1] = dro[i * DC + 1];
    o->qa_loss(c, &loss, dlogits, logits, st, en, &wl, 1.0f);
    for (int i = 0; i < DN; i++) dge[i * DI] = dlogits[2 * i], ddro[i * DC + 1] = dlogits[2 * i + 1];
    o->gelu_backward(c, dff, ff, dge, (size_t)DN * DI);
    o->matmul_backward(c, datt, dfw, NULL, dff, att, fw, DN, DC, DI);
    o->dropout_backward(c, datt, ddro, &w, DC, 0.1f, rng);
    o->attention_backward(c, dq, dk, dv, scratch, datt, q, k, v, probs, &w, DH, DS, 0.1f, rng);
    o->matmul_backward(c, dln, dqw, dqb, dq, ln, qw, DN, DC, DC);
    o->layernorm_backward(c, demb, dlnw, dlnb, dln, emb, lnw, mean, rstd, DN, DC);
    o->embedding_backward(c, dwte, dwpe, NULL, demb, ids, types, NULL, DN, DT, DC);
    double ss = o->sum_squares(c, dfw, (size_t)DI * DC);
    o->adamw(c, fw, dfw, mom, vel, (size_t)DI * DC, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 1, 1.0f);
    uint64_t h = 1469598103934665603ull;
    const unsigned char *bytes = (const unsigned char *)emb;
    size_t nb = (size_t)(f - emb) * sizeof(float);
    for (size_t i = 0; i < nb; i++) h = (h ^ bytes[i]) * 1099511628211ull;
    for (size_t i = 0; i < (size_t)DI * DC * sizeof(float); i++)
        h = (h ^ ((unsigned char *)fw)[i]) * 1099511628211ull;
    h = (h ^ (uint64_t)(ss * 1e6)) * 1099511628211ull;
    uint32_t lb;
    memcpy(&lb, &loss, sizeof lb);
    h = (h ^ lb) * 1099511628211ull;
    *bytes_hash = h;
    CHECK((size_t)(f - buf) == nf, "op sequence buffer: used %zu of %zu floats", (size_t)(f - buf), nf);
    free(buf);
#undef TAKE
    return h;
}

static void test_determinism(void)
{
    uint64_t h[2][2];
    for (int nt = 2; nt >= 1; nt--) {
        backend bk;
        if (backend_cpu_create(&bk, nt) != 0) {
            CHECK(0, "backend_cpu_create(%d): %s", nt, err_msg());
            return;
        }
        for (int run = 0; run < 2; run++) op_sequence(&bk, &h[nt - 1][run]);
        printf("determinism, %d thread(s): run 1 %016llx run 2 %016llx\n", nt, (unsigned long long)h[nt - 1][0],
               (unsigned long long)h[nt - 1][1]);
        CHECK(h[nt - 1][0] == h[nt - 1][1], "%d thread(s): two runs of the op sequence differ", nt);
        backend_free(&bk);
    }
    printf("determinism: 1 thread and 2 threads give %s bytes (not required)\n",
           h[0][0] == h[1][0] ? "the same" : "different");
}

int main(void)
{
    if (backend_cpu_create(&be, 2) != 0) {
        fprintf(stderr, "backend_cpu_create: %s\n", err_msg());
        return 1;
    }
    size_t n = tu_sanitized() ? 100003 : 1000003; /* odd: the last Philox block is partial */
    test_masks(0.1f, n);
    test_masks(0.5f, n);
    test_edges();
    test_generator();
    test_bits();
    test_attention_mask();
    test_mask_cache();
    test_determinism();
    backend_free(&be);
    return tu_done();
}
