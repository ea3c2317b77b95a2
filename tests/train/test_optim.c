/* The optimizer (optim.h) and the training step around it: the schedule,
 * the clipping coefficient, AdamW against a float64 host computation with
 * the decay exclusions, state save/restore, a non-finite gradient skipping
 * the step, the sharded optimizer (pieces of the block, the global norm
 * summed by the caller) against the whole one, gradient accumulation over
 * micro-batches, and determinism of
 * whole training steps on 2 threads with dropout on. */
#include "backend/backend.h"
#include "core/err.h"
#include "core/piece.h"
#include "model/bert.h"
#include "model/init.h"
#include "train/optim.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void test_schedule(void)
{
    /* get_linear_schedule_with_warmup(warmup 2, total 10): 0, 0.5, 1 (peak), then down by 1/8 to 0. */
    struct { int64_t k, w, n; double want; } c[] = {
        {0, 2, 10, 0.0}, {1, 2, 10, 0.5}, {2, 2, 10, 1.0}, {6, 2, 10, 0.5}, {9, 2, 10, 0.125},
        {10, 2, 10, 0.0}, {13, 2, 10, 0.0}, /* past the end: floored at 0 */
        {0, 0, 10, 1.0}, {5, 0, 10, 0.5},   /* no warm-up */
        {3, 5, 5, 0.6}, {5, 5, 5, 0.0},     /* all warm-up: max(1, total - warmup) */
        {0, 1, 1, 0.0}, {1, 1, 1, 0.0},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        double got = optim_lr_lambda(c[i].k, c[i].w, c[i].n);
        CHECK(fabs(got - c[i].want) < 1e-15, "lambda(k=%lld, warmup %lld, total %lld) = %.17g, want %g",
              (long long)c[i].k, (long long)c[i].w, (long long)c[i].n, got, c[i].want);
    }
    /* get_warmup_steps: ratios round up (0.07 * 100 is 7.000000000000001 in
     * double, so Python's math.ceil gives 8), numbers >= 1 are steps. */
    struct { double r; int64_t n, want; } w[] = {
        {0.1, 1000, 100}, {0.1, 7, 1}, {0.07, 100, 8}, {0.0, 100, 0}, {5, 100, 5}, {2.7, 100, 2}, {0.5, 0, 0},
    };
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) {
        int64_t got = optim_warmup_steps(w[i].r, w[i].n);
        CHECK(got == w[i].want, "warmup_steps(%g, total %lld) = %lld, want %lld", w[i].r, (long long)w[i].n,
              (long long)got, (long long)w[i].want);
    }
    printf("schedule: %zu lambda values and %zu warm-up conversions checked\n", sizeof c / sizeof c[0],
           sizeof w / sizeof w[0]);
}

static void test_clip_coef(void)
{
    CHECK(fabs(optim_clip_coef(4.0, 1.0) - 1.0 / (4.0 + 1e-6)) < 1e-15, "coef(4, 1) = %.17g",
          optim_clip_coef(4.0, 1.0));
    CHECK(optim_clip_coef(0.5, 1.0) == 1.0, "no clipping below max_norm: %g", optim_clip_coef(0.5, 1.0));
    /* Exactly at max_norm the +1e-6 keeps the coefficient just below 1: clip_grad_norm_ scales. */
    CHECK(optim_clip_coef(1.0, 1.0) < 1.0, "coef(1, 1) = %.17g", optim_clip_coef(1.0, 1.0));
    CHECK(optim_clip_coef(100.0, 0.0) == 1.0, "max_norm 0 disables clipping");
}

static float frand(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((*s >> 40) & 0xffffff) / 16777216.0f * 2.0f - 1.0f;
}

/* AdamW in double on the host, as torch.optim.AdamW does it, with grads
 * multiplied by the clipping coefficient in fp32 (as clip_grad_norm_) and
 * p, m, v rounded to fp32 after each step. */
static void host_adamw(const param_table *t, double *p, double *m, double *v, const float *g, double lr,
                       double wd, float coef, int64_t step)
{
    const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
    double bc1 = 1 - pow(b1, (double)step), bc2 = 1 - pow(b2, (double)step);
    for (int i = 0; i < t->n; i++)
        for (size_t j = t->info[i].offset; j < t->info[i].offset + t->info[i].numel; j++) {
            double gj = (double)(g[j] * coef);
            if (t->info[i].decay) p[j] *= 1 - lr * wd;
            m[j] = b1 * m[j] + (1 - b1) * gj;
            v[j] = b2 * v[j] + (1 - b2) * gj * gj;
            p[j] -= lr / bc1 * m[j] / (sqrt(v[j]) / sqrt(bc2) + eps);
            /* The state is stored in fp32 between steps, as torch stores it. */
            p[j] = (float)p[j];
            m[j] = (float)m[j];
            v[j] = (float)v[j];
        }
}

/* What a test's checks share: the table, the host and device buffers,
 * the settings, and the stream the gradients are drawn from (in order). */
typedef struct {
    backend *be;
    const param_table *t;
    size_t n, bytes;
    float *hp, *hg; /* host: the starting parameters, a step's gradients */
    float *dp, *dg; /* device: parameters, gradients */
    optim_config c;
    uint64_t *s;
} opt_rig;

/* Restoring the state saved before step 2 (saved_*) and replaying steps 2
 * and 3 (gradients gk) gives the same bytes as got. */
static void check_replay(const opt_rig *g, const float *saved_m, const float *saved_v, int64_t saved_t,
                         const float *saved_p, float *const *gk, const float *got)
{
    backend *be = g->be;
    optim *o2 = NULL;
    if (optim_create(&o2, be, g->t)) return;
    CHECK(optim_set_state(o2, saved_m, saved_v, saved_t, 0) == 0, "set_state");
    CHECK(optim_t(o2) == 2, "restored t = %lld", (long long)optim_t(o2));
    be->i->upload(be->ctx, g->dp, saved_p, g->bytes);
    for (int k = 2; k < 4; k++) {
        be->i->upload(be->ctx, g->dg, gk[k], g->bytes);
        CHECK(optim_step(o2, g->dp, g->dg, &g->c, k, 1.0f, NULL) == 0, "replay step %d: %s", k, err_msg());
    }
    float *replay = malloc(g->bytes);
    be->i->download(be->ctx, replay, g->dp, g->bytes);
    CHECK(memcmp(replay, got, g->bytes) == 0, "state save/restore: replayed steps give identical parameters");
    free(replay);
    optim_free(o2);
}

/* Gradients scaled by 4 with grad_unscale 1/4 give the same bytes (powers of 2 are exact). */
static void check_unscale(const opt_rig *g)
{
    backend *be = g->be;
    size_t n = g->n, bytes = g->bytes;
    float *hg = g->hg;
    optim *o3 = NULL, *o4 = NULL;
    if (!optim_create(&o3, be, g->t) && !optim_create(&o4, be, g->t)) {
        float *dp2 = be->i->alloc(be->ctx, bytes);
        be->i->upload(be->ctx, g->dp, g->hp, bytes);
        be->i->upload(be->ctx, dp2, g->hp, bytes);
        for (size_t j = 0; j < n; j++) hg[j] = 0.05f * frand(g->s);
        be->i->upload(be->ctx, g->dg, hg, bytes);
        optim_result r1, r2;
        optim_step(o3, g->dp, g->dg, &g->c, 1, 1.0f, &r1);
        for (size_t j = 0; j < n; j++) hg[j] *= 4;
        be->i->upload(be->ctx, g->dg, hg, bytes);
        optim_step(o4, dp2, g->dg, &g->c, 1, 0.25f, &r2);
        float *a = malloc(bytes), *b = malloc(bytes);
        be->i->download(be->ctx, a, g->dp, bytes);
        be->i->download(be->ctx, b, dp2, bytes);
        CHECK(r1.grad_norm == r2.grad_norm && memcmp(a, b, bytes) == 0,
              "grad_unscale: norms %.17g %.17g, parameters identical", r1.grad_norm, r2.grad_norm);
        free(a), free(b);
        be->i->release(be->ctx, dp2);
    }
    optim_free(o3);
    optim_free(o4);
}

/* A NaN, then an infinity, in the gradients: o's step is skipped and
 * counted, nothing changes (got: scratch for the parameters). */
static void check_nonfinite(const opt_rig *g, optim *o, float *got)
{
    backend *be = g->be;
    size_t n = g->n, bytes = g->bytes;
    float *hg = g->hg;
    for (int trial = 0; trial < 2; trial++) {
        be->i->download(be->ctx, got, g->dp, bytes);
        int64_t t0 = optim_t(o), sk0 = optim_skipped(o);
        for (size_t j = 0; j < n; j++) hg[j] = 0.05f * frand(g->s);
        hg[n / 3] = trial ? INFINITY : NAN;
        be->i->upload(be->ctx, g->dg, hg, bytes);
        optim_result r;
        int rc = optim_step(o, g->dp, g->dg, &g->c, 4, 1.0f, &r);
        float *after = malloc(bytes);
        be->i->download(be->ctx, after, g->dp, bytes);
        CHECK(rc == 0 && r.skipped == 1, "%s gradient: skipped (%d)", trial ? "inf" : "NaN", r.skipped);
        CHECK(optim_t(o) == t0 && optim_skipped(o) == sk0 + 1, "t stays %lld (%lld), skipped counts %lld",
              (long long)t0, (long long)optim_t(o), (long long)optim_skipped(o));
        CHECK(memcmp(after, got, bytes) == 0, "parameters unchanged after a skipped step");
        free(after);
    }
    printf("non-finite gradients: 2 steps skipped, %lld counted\n", (long long)optim_skipped(o));
}

/* The AdamW tests' recipe: large steps (lr 1e-2, weight decay 0.1,
 * clipping at 1) over a schedule of `total` steps, one of warm-up. */
static optim_config test_config(int64_t total)
{
    optim_config c = optim_config_default();
    c.lr = 1e-2;
    c.weight_decay = 0.1;
    c.max_grad_norm = 1.0;
    c.warmup_steps = 1;
    c.total_steps = total;
    return c;
}

static void test_adamw(backend *be)
{
    bert_config cfg = tu_small_config(50, 2, 2);
    param_table t;
    param_table_init(&t, &cfg);
    size_t n = t.total, bytes = n * sizeof(float);
    float *hp = malloc(bytes), *hg = malloc(bytes), *got = malloc(bytes);
    double *ep = malloc(n * sizeof *ep), *em = calloc(n, sizeof *em), *ev = calloc(n, sizeof *ev);
    uint64_t s = 7;
    for (size_t j = 0; j < n; j++) ep[j] = hp[j] = 0.05f * frand(&s);
    float *dp = be->i->alloc(be->ctx, bytes), *dg = be->i->alloc(be->ctx, bytes);
    optim *o = NULL;
    if (!dp || !dg || optim_create(&o, be, &t)) {
        CHECK(0, "setup: %s", err_msg());
        return;
    }
    be->i->upload(be->ctx, dp, hp, bytes);
    optim_config c = test_config(4);
    int decay_tensors = 0;
    for (int i = 0; i < t.n; i++) decay_tensors += t.info[i].decay;
    CHECK(decay_tensors > 0 && decay_tensors < t.n, "the table mixes decay (%d) and no-decay tensors (%d)",
          decay_tensors, t.n - decay_tensors);

    float *saved_m = malloc(bytes), *saved_v = malloc(bytes), *saved_p = malloc(bytes);
    int64_t saved_t = 0;
    float *gk[4];
    for (int k = 0; k < 4; k++) {
        /* Step 2 has small gradients: no clipping there. */
        float amp = k == 2 ? 1e-4f : 0.05f;
        for (size_t j = 0; j < n; j++) hg[j] = amp * frand(&s);
        gk[k] = malloc(bytes);
        memcpy(gk[k], hg, bytes);
        be->i->upload(be->ctx, dg, hg, bytes);
        if (k == 2) {
            optim_get_state(o, saved_m, saved_v, &saved_t, NULL);
            be->i->download(be->ctx, saved_p, dp, bytes);
        }
        optim_result r;
        int rc = optim_step(o, dp, dg, &c, k, 1.0f, &r);
        CHECK(rc == 0, "optim_step %d: %s", k, err_msg());
        double sq = 0;
        for (size_t j = 0; j < n; j++) sq += (double)hg[j] * hg[j];
        double norm = sqrt(sq), coef = norm > 1.0 ? 1.0 / (norm + 1e-6) : 1.0;
        CHECK(fabs(r.grad_norm - norm) <= 1e-9 * norm, "step %d: norm %.12g, host %.12g", k, r.grad_norm, norm);
        CHECK(fabs(r.clip_coef - coef) < 1e-12, "step %d: clip coef %.12g, host %.12g", k, r.clip_coef, coef);
        CHECK(fabs(r.lr - c.lr * optim_lr_lambda(k, 1, 4)) < 1e-15, "step %d: lr %g", k, r.lr);
        printf("adamw step %d: norm %.6f coef %.6f lr %g\n", k, r.grad_norm, r.clip_coef, r.lr);
        host_adamw(&t, ep, em, ev, hg, r.lr, c.weight_decay, (float)coef, k + 1);
    }
    be->i->download(be->ctx, got, dp, bytes);
    float *want = malloc(bytes);
    for (size_t j = 0; j < n; j++) want[j] = (float)ep[j];
    /* fp32 arithmetic within a step: a few ulps of an update of ~lr, and one ulp of p. */
    tu_close("AdamW, 4 steps, clipping and decay exclusions, vs float64 host (rtol 1e-6 atol 1e-8)", got, want, n,
             1e-6, 1e-8);

    opt_rig g = {be, &t, n, bytes, hp, hg, dp, dg, c, &s};
    check_replay(&g, saved_m, saved_v, saved_t, saved_p, gk, got);
    check_unscale(&g);
    check_nonfinite(&g, o, got);

    free(saved_m), free(saved_v), free(saved_p), free(want);
    for (int k = 0; k < 4; k++) free(gk[k]);
    optim_free(o);
    be->i->release(be->ctx, dp);
    be->i->release(be->ctx, dg);
    free(hp), free(hg), free(got), free(ep), free(em), free(ev);
    param_table_free(&t);
}

/* The gradient buckets test_sharded cuts the block into, over D ranks:
 * [0, layer 0), each layer, the QA head. */
typedef struct {
    int nb, D;
    size_t bo[8], bl[8];
} buckets;

/* Rank r's pieces (piece_of) of every bucket, as offsets in the block. */
static void rank_pieces(const buckets *k, int r, size_t *po, size_t *pl)
{
    for (int i = 0; i < k->nb; i++) piece_of(k->bl[i], k->D, r, &po[i], &pl[i]), po[i] += k->bo[i];
}

/* The moments gathered from the shards' packed state into gm, gv, against
 * the whole optimizer's. */
static void check_gathered(const buckets *k, size_t n, optim *full, optim *const *sh, float *gm, float *gv)
{
    float *fm = malloc(n * sizeof *fm), *fv = malloc(n * sizeof *fv);
    optim_get_state(full, fm, fv, NULL, NULL);
    for (int r = 0; r < k->D; r++) {
        size_t k_floats = optim_state_floats(sh[r]), at = 0, po[8], pl[8];
        float *pm = malloc((k_floats + 1) * sizeof *pm), *pv = malloc((k_floats + 1) * sizeof *pv);
        optim_get_state(sh[r], pm, pv, NULL, NULL);
        rank_pieces(k, r, po, pl);
        for (int i = 0; i < k->nb; i++) {
            memcpy(gm + po[i], pm + at, pl[i] * sizeof *gm);
            memcpy(gv + po[i], pv + at, pl[i] * sizeof *gv);
            at += pl[i];
        }
        free(pm), free(pv);
    }
    tu_close("sharded Adam m gathered vs whole", gm, fm, n, 1e-6, 1e-12);
    tu_close("sharded Adam v gathered vs whole", gv, fv, n, 1e-6, 1e-16);
    free(fm), free(fv);
}

/* The whole block's state (gm, gv, the whole optimizer's t) into a fresh
 * last shard, then back out: its pieces, t and skipped; that shard alone
 * changes only its pieces. */
static void check_reshard(const opt_rig *g, const buckets *k, int64_t t_full, const float *gm, const float *gv)
{
    backend *be = g->be;
    size_t n = g->n, po[8], pl[8], at = 0;
    optim *re = NULL;
    rank_pieces(k, k->D - 1, po, pl);
    if (optim_create_pieces(&re, be, g->t, po, pl, k->nb) != 0) return;
    CHECK(optim_set_state_block(re, gm, gv, t_full, 1) == 0, "set_state_block: %s", err_msg());
    size_t kf = optim_state_floats(re);
    float *pm = malloc((kf + 1) * sizeof *pm), *pv = malloc((kf + 1) * sizeof *pv);
    int64_t tt = 0, sk = 0;
    optim_get_state(re, pm, pv, &tt, &sk);
    int ok = tt == t_full && sk == 1;
    for (int i = 0; i < k->nb; i++) {
        ok &= memcmp(pm + at, gm + po[i], pl[i] * sizeof *pm) == 0 &&
              memcmp(pv + at, gv + po[i], pl[i] * sizeof *pv) == 0;
        at += pl[i];
    }
    CHECK(ok, "the whole block's state into the last shard and out again: its pieces, t and skipped");
    free(pm), free(pv);
    /* this shard alone changes only its pieces */
    float *b = malloc(g->bytes);
    be->i->upload(be->ctx, g->dp, g->hp, g->bytes);
    for (size_t j = 0; j < n; j++) g->hg[j] = 0.05f * frand(g->s);
    be->i->upload(be->ctx, g->dg, g->hg, g->bytes);
    optim_apply(re, g->dp, g->dg, &g->c, 4, 1.0f, 1.0, NULL);
    be->i->download(be->ctx, b, g->dp, g->bytes);
    size_t changed_out = 0, changed_in = 0;
    for (size_t j = 0; j < n; j++) {
        int in = 0;
        for (int i = 0; i < k->nb; i++) in |= j >= po[i] && j < po[i] + pl[i];
        if (b[j] != g->hp[j]) {
            if (in) changed_in++;
            else changed_out++;
        }
    }
    CHECK(changed_out == 0 && changed_in > 0, "one shard's step changed %zu of its parameters and %zu others",
          changed_in, changed_out);
    free(b);
    optim_free(re);
}

/* --shard-optimizer's arithmetic in one process: D optimizers, each with
 * its pieces (piece_of) of ranges cut like the gradient buckets (the
 * embeddings, each layer, the QA head), update one parameter block with the
 * sum of their squared norms added in rank order, as the ranks do between
 * the reduce-scatter and the all-gather. Against one whole optimizer: the
 * same norms and skip decisions, parameters and moments within a rounding
 * of the norm (identical where no clipping applies); each touches only its
 * pieces; state round trips through the whole block. */
static void test_sharded(backend *be, int D)
{
    bert_config cfg = tu_small_config(50, 2, 2);
    param_table t;
    param_table_init(&t, &cfg);
    size_t n = t.total, bytes = n * sizeof(float);
    int L = cfg.num_hidden_layers;
    buckets bk = {.nb = L + 2, .D = D};
    for (int k = 0; k <= L; k++) {
        int first = k == 0 ? 0 : 5 + 16 * (k - 1), end = 5 + 16 * k;
        bk.bo[k] = t.info[first].offset;
        bk.bl[k] = t.info[end - 1].offset + t.info[end - 1].numel - bk.bo[k];
    }
    bk.bo[L + 1] = bk.bo[L] + bk.bl[L];
    bk.bl[L + 1] = n - bk.bo[L + 1];
    int nb = bk.nb;
    optim *full = NULL, *sh[4] = {NULL};
    size_t owned = 0, most = 0;
    int rc = optim_create(&full, be, &t);
    for (int r = 0; r < D && !rc; r++) {
        size_t po[8], pl[8];
        rank_pieces(&bk, r, po, pl);
        rc = optim_create_pieces(&sh[r], be, &t, po, pl, nb);
        if (!rc) owned += optim_state_floats(sh[r]);
        if (!rc && optim_state_floats(sh[r]) > most) most = optim_state_floats(sh[r]);
    }
    CHECK(rc == 0, "sharded set-up: %s", err_msg());
    if (rc) return;
    CHECK(owned == n && most <= n / (size_t)D + (size_t)nb * (size_t)(D - 1),
          "%d shards hold %zu of %zu floats of m (the most on one: %zu, at most n/D + buckets x (D-1))", D, owned, n,
          most);
    float *hp = malloc(bytes), *hg = malloc(bytes), *a = malloc(bytes), *b = malloc(bytes);
    uint64_t s = 11;
    for (size_t j = 0; j < n; j++) hp[j] = 0.05f * frand(&s);
    float *pf = be->i->alloc(be->ctx, bytes), *ps = be->i->alloc(be->ctx, bytes), *dg = be->i->alloc(be->ctx, bytes);
    be->i->upload(be->ctx, pf, hp, bytes);
    be->i->upload(be->ctx, ps, hp, bytes);
    optim_config c = test_config(6);
    int same_norm = 1, same_skip = 1;
    for (int k = 0; k < 5; k++) {
        /* steps 0, 1, 3, 4 clipped; step 2 not; step 3 has a NaN (skipped) */
        float amp = k == 2 ? 1e-4f : 0.05f;
        for (size_t j = 0; j < n; j++) hg[j] = amp * frand(&s);
        if (k == 3) hg[n / 2] = NAN;
        be->i->upload(be->ctx, dg, hg, bytes);
        optim_result rf, rs[4];
        optim_step(full, pf, dg, &c, k, 1.0f, &rf);
        double ss = 0;
        for (int r = 0; r < D; r++) ss += optim_sum_squares(sh[r], dg);
        for (int r = 0; r < D; r++) {
            CHECK(optim_apply(sh[r], ps, dg, &c, k, 1.0f, ss, &rs[r]) == 0, "shard %d step %d: %s", r, k, err_msg());
            same_skip &= rs[r].skipped == rf.skipped;
            same_norm &= rf.skipped ? !isfinite(rs[r].grad_norm) : fabs(rs[r].grad_norm - rf.grad_norm) <= 1e-12 * rf.grad_norm;
        }
        printf("sharded over %d, step %d: norm %.15g (whole %.15g), coef %.9g, skipped %d\n", D, k, rs[0].grad_norm,
               rf.grad_norm, rs[0].clip_coef, rs[0].skipped);
    }
    CHECK(same_skip && same_norm, "every shard has the whole optimizer's norm (1e-12) and skip decision");
    be->i->download(be->ctx, a, pf, bytes);
    be->i->download(be->ctx, b, ps, bytes);
    size_t ident = 0;
    for (size_t j = 0; j < n; j++) ident += memcmp(&a[j], &b[j], sizeof *a) == 0;
    printf("sharded over %d: %zu of %zu parameters bit-identical to the whole optimizer's\n", D, ident, n);
    tu_close("sharded vs whole optimizer, 5 steps (clipping, decay, a skipped step)", b, a, n, 1e-6, 1e-9);
    CHECK(optim_t(sh[0]) == optim_t(full) && optim_skipped(sh[D - 1]) == optim_skipped(full), "t %lld, skipped %lld",
          (long long)optim_t(sh[0]), (long long)optim_skipped(sh[D - 1]));

    float *gm = calloc(n, sizeof *gm), *gv = calloc(n, sizeof *gv);
    check_gathered(&bk, n, full, sh, gm, gv);
    opt_rig g = {be, &t, n, bytes, hp, hg, ps, dg, c, &s};
    check_reshard(&g, &bk, optim_t(full), gm, gv);
    free(gm), free(gv);
    for (int r = 0; r < D; r++) optim_free(sh[r]);
    optim_free(full);
    be->i->release(be->ctx, pf);
    be->i->release(be->ctx, ps);
    be->i->release(be->ctx, dg);
    free(hp), free(hg), free(a), free(b);
    param_table_free(&t);
}

/* A random batch of B rows of T tokens, row 1 padded, labels inside. */
static void random_batch(int B, int T, int V, uint64_t seed, int32_t *ids, int32_t *types, int32_t *mask,
                         int32_t *sp, int32_t *ep)
{
    uint64_t s = seed;
    for (int b = 0; b < B; b++) {
        int len = b % 2 ? T - T / 4 : T;
        for (int t = 0; t < T; t++) {
            size_t i = (size_t)b * T + t;
            ids[i] = t < len ? 1 + (int)((frand(&s) + 1) * 0.5f * (V - 2)) : 0;
            types[i] = t >= T / 3 && t < len;
            mask[i] = t < len;
        }
        sp[b] = 2 + b;
        ep[b] = 4 + b;
    }
}

/* A model of tu_small_config(50, 2, 2) with random weights (seed 5), and
 * a random batch of B <= RIG_MAX_B rows of RIG_T tokens (random_batch's
 * seed): what the accumulation and determinism tests start from. */
enum { RIG_MAX_B = 3, RIG_T = 16 };
typedef struct {
    bert_config cfg;
    param_table t;
    float *params; /* the initial weights */
    int32_t ids[RIG_MAX_B * RIG_T], types[RIG_MAX_B * RIG_T], mask[RIG_MAX_B * RIG_T], sp[RIG_MAX_B], ep[RIG_MAX_B];
    bert_batch batch;
    bert_model *m;
} model_rig;

static int rig_open(model_rig *r, backend *be, int B, uint64_t seed)
{
    r->cfg = tu_small_config(50, 2, 2);
    param_table_init(&r->t, &r->cfg);
    r->params = malloc(r->t.total * sizeof *r->params);
    model_init_random(&r->cfg, &r->t, r->params, 5);
    random_batch(B, RIG_T, r->cfg.vocab_size, seed, r->ids, r->types, r->mask, r->sp, r->ep);
    r->batch = (bert_batch){B, RIG_T, r->ids, r->types, r->mask, r->sp, r->ep, NULL, 0};
    r->m = NULL;
    int rc = bert_model_create(&r->m, &(bert_model_opts){.cfg = &r->cfg, .be = be, .max_B = B, .T = RIG_T});
    if (!rc) rc = bert_model_set_params(r->m, r->params);
    CHECK(rc == 0, "model: %s", err_msg());
    return rc;
}

static void rig_close(model_rig *r)
{
    if (r->m) bert_model_free(r->m);
    param_table_free(&r->t);
    free(r->params);
}

static void test_accumulation(backend *be)
{
    enum { B = 2, T = RIG_T };
    model_rig g;
    if (rig_open(&g, be, B, 11)) {
        rig_close(&g);
        return;
    }
    bert_model *m = g.m;
    size_t n = g.t.total;
    philox_stream rng = {.seed = 1};
    float *g1 = malloc(n * sizeof *g1), *g2 = malloc(n * sizeof *g2);
    bert_zero_grad(m);
    int rc = bert_forward(m, &g.batch, 0, 0, rng, NULL, NULL, NULL);
    if (!rc) rc = bert_backward(m, 1.0f);
    CHECK(rc == 0, "whole batch: %s", err_msg());
    be->i->download(be->ctx, g1, bert_model_grads(m), n * sizeof *g1);
    bert_zero_grad(m);
    for (int r = 0; r < B && !rc; r++) {
        bert_batch one = {1, T, g.ids + r * T, g.types + r * T, g.mask + r * T, g.sp + r, g.ep + r, NULL, 0};
        rc = bert_forward(m, &one, 0, 0, rng, NULL, NULL, NULL);
        if (!rc) rc = bert_backward(m, 0.5f);
    }
    CHECK(rc == 0, "micro-batches: %s", err_msg());
    be->i->download(be->ctx, g2, bert_model_grads(m), n * sizeof *g2);
    tu_close("accumulation: 2 micro-batches x 1 row (grad_scale 0.5) vs 1 batch of 2 rows", g2, g1, n, 0, 1e-6);
    double sq = 0;
    for (size_t j = 0; j < n; j++) sq += (double)g1[j] * g1[j];
    CHECK(sq > 1e-6, "the gradients are not trivially zero (norm %g)", sqrt(sq));
    free(g1), free(g2);
    rig_close(&g);
}

/* Three full training steps (dropout on) from the same start; returns the parameters. */
static float *train_run(backend *be, uint64_t seed, size_t *n_out)
{
    model_rig g;
    optim *o = NULL;
    int rc = rig_open(&g, be, 3, 13);
    if (!rc) {
        rc = optim_create(&o, be, bert_model_table(g.m));
        CHECK(rc == 0, "train_run: %s", err_msg());
    }
    if (rc) {
        rig_close(&g);
        return NULL;
    }
    bert_model *m = g.m;
    optim_config c = optim_config_default();
    c.lr = 1e-3;
    c.warmup_steps = 1;
    c.total_steps = 10;
    for (int k = 0; k < 3; k++) {
        philox_stream rng = {.seed = seed, .step = (uint32_t)k};
        bert_zero_grad(m);
        rc = bert_forward(m, &g.batch, 0.1f, 0.1f, rng, NULL, NULL, NULL);
        if (!rc) rc = bert_backward(m, 1.0f);
        if (!rc) rc = optim_step(o, bert_model_params(m), bert_model_grads(m), &c, k, 1.0f, NULL);
        CHECK(rc == 0, "train step %d: %s", k, err_msg());
    }
    float *p = g.params;
    bert_model_get_params(m, p);
    *n_out = g.t.total;
    optim_free(o);
    g.params = NULL; /* the result */
    rig_close(&g);
    return p;
}

static void test_determinism(backend *be)
{
    size_t n = 0;
    float *a = train_run(be, 99, &n), *b = train_run(be, 99, &n), *c = train_run(be, 100, &n);
    if (!a || !b || !c) return;
    CHECK(memcmp(a, b, n * sizeof *a) == 0, "two identical runs (2 threads, dropout on) give identical parameters");
    size_t diff = 0;
    for (size_t j = 0; j < n; j++) diff += a[j] != c[j];
    CHECK(diff > n / 10, "another dropout seed changes the parameters (%zu of %zu differ)", diff, n);
    printf("determinism: 3 steps twice, %zu parameters identical; another seed changes %zu\n", n, diff);
    free(a), free(b), free(c);
}

int main(void)
{
    log_quiet(1);
    test_schedule();
    test_clip_coef();
    backend be;
    if (backend_cpu_create(&be, 2)) {
        fprintf(stderr, "FAIL: backend: %s\n", err_msg());
        return 1;
    }
    test_adamw(&be);
    test_sharded(&be, 2);
    test_sharded(&be, 3);
    test_accumulation(&be);
    test_determinism(&be);
    backend_free(&be);
    return tu_done();
}
