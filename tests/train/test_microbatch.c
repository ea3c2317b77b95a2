/* Micro-batches and --micro-batch auto without a GPU: the cut of a step
 * into micro-batches (every row once, in order, whatever the halvings),
 * the planner's choice, and the out-of-memory back-off run for real on the
 * CPU backend behind a fake allocator with a capacity, so that bert.c's
 * own allocations are what runs out. The step's gradient after the
 * back-off equals the one-micro-batch gradient. */
#include "testutil.h"

#include "backend/backend.h"
#include "core/err.h"
#include "model/bert.h"
#include "model/memory.h"
#include "model/params.h"
#include "train/microbatch.h"
#include "train/step.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------
 * The fake allocator: the CPU backend's table with alloc/release that
 * count bytes and refuse past a capacity, with the backend's message. */

enum { MAX_RECS = 256 };

static struct {
    const backend_i *cpu;
    int64_t cap, used, peak, refusals;
    void *ptr[MAX_RECS];
    size_t size[MAX_RECS];
} fa;

static void *fa_alloc(void *ctx, size_t bytes)
{
    if (fa.used + (int64_t)bytes > fa.cap) {
        fa.refusals++;
        err_set(ERR_RUNTIME, "fake allocator: out of memory: %zu bytes requested, %lld in use, capacity %lld", bytes,
                (long long)fa.used, (long long)fa.cap);
        return NULL;
    }
    int slot = -1;
    for (int i = 0; i < MAX_RECS && slot < 0; i++)
        if (!fa.ptr[i]) slot = i;
    if (slot < 0) {
        err_set(ERR_RUNTIME, "fake allocator: table full");
        return NULL;
    }
    void *p = fa.cpu->alloc(ctx, bytes);
    if (!p) return NULL;
    fa.ptr[slot] = p;
    fa.size[slot] = bytes;
    fa.used += (int64_t)bytes;
    if (fa.used > fa.peak) fa.peak = fa.used;
    return p;
}

static void fa_release(void *ctx, void *p)
{
    for (int i = 0; i < MAX_RECS; i++)
        if (fa.ptr[i] == p && p) {
            fa.used -= (int64_t)fa.size[i];
            fa.ptr[i] = NULL;
        }
    fa.cpu->release(ctx, p);
}

static backend_i fake_i;
static backend cpu_be, fake_be;

static void fake_init(void)
{
    if (backend_cpu_create(&cpu_be, 1) != 0) {
        fprintf(stderr, "backend_cpu_create: %s\n", err_msg());
        exit(1);
    }
    fa.cpu = cpu_be.i;
    fake_i = *cpu_be.i;
    fake_i.name = "fake";
    fake_i.alloc = fa_alloc;
    fake_i.release = fa_release;
    fake_be.i = &fake_i;
    fake_be.ctx = cpu_be.ctx;
}

/* ------------------------------------------------------------------------
 * A tiny model and one step's data. */

enum { BATCH = 12, T = 16 };

/* dropout off */
static bert_config test_config(void)
{
    bert_config c = tu_small_config(60, 2, 4);
    c.hidden_dropout_prob = c.attention_probs_dropout_prob = 0;
    return c;
}

static int32_t ids[BATCH * T], types[BATCH * T], mask[BATCH * T], sp[BATCH], ep[BATCH];

static void make_data(void)
{
    int lens[BATCH];
    for (int b = 0; b < BATCH; b++) {
        lens[b] = T - b % 4;
        sp[b] = 4 + b % 5;
        ep[b] = sp[b] + b % 3;
    }
    tu_batch_spec spec = {BATCH, T, lens, .vocab = 60, .row_mul = 11, .tok_mul = 7, .seg_start = 4};
    tu_make_batch(&spec, ids, types, mask);
}

typedef struct {
    backend *be;
    bert_config cfg;
    bert_model *m;
    float *host;         /* the parameters, kept on the host across rebuilds */
    int64_t ws_per_row;  /* bytes a step takes per row besides the model's (a GPU's workspace) */
    int fail_input;      /* trial returns ERR_INPUT */
    int builds, trials;
} env_t;

static int env_build(void *user, int micro)
{
    env_t *e = user;
    e->builds++;
    bert_model_free(e->m);
    e->m = NULL;
    int rc = bert_model_create(&e->m, &(bert_model_opts){.cfg = &e->cfg, .be = e->be, .max_B = micro, .T = T});
    if (!rc) rc = bert_model_set_params(e->m, e->host);
    return rc;
}

/* forward + backward of rows [at, at + rows), grad_scale w */
static int run_rows(env_t *e, int at, int rows, float w)
{
    size_t o = (size_t)at * T;
    bert_batch b = {rows, T, ids + o, types + o, mask + o, sp + at, ep + at, NULL, 0};
    philox_stream rng = {1, 0, 0};
    float loss;
    int rc = bert_forward(e->m, &b, 0.0f, 0.0f, rng, &loss, NULL, NULL);
    if (!rc) rc = bert_backward(e->m, w);
    return rc;
}

static int env_trial(void *user, int micro)
{
    env_t *e = user;
    e->trials++;
    if (e->fail_input) return err_set(ERR_INPUT, "trial: a bad batch");
    void *ws = NULL;
    if (e->ws_per_row > 0) {
        ws = e->be->i->alloc(e->be->ctx, (size_t)(e->ws_per_row * micro));
        if (!ws) return err_wrap(ERR_RUNTIME, "trial step");
    }
    int rc = run_rows(e, 0, micro, 1.0f);
    if (ws) e->be->i->release(e->be->ctx, ws);
    bert_zero_grad(e->m);
    return rc;
}

/* One optimizer step's gradient with the plan's micro-batches. */
static int step_grads(env_t *e, const microbatch_plan *p, int count, float *out)
{
    bert_zero_grad(e->m);
    int at, rows;
    for (int k = 0; microbatch_slice(p, count, k, &at, &rows); k++) {
        int rc = run_rows(e, at, rows, (float)rows / (float)count);
        if (rc) return rc;
    }
    const param_table *t = bert_model_table(e->m);
    return e->be->i->download(e->be->ctx, out, bert_model_grads(e->m), t->total * sizeof(float));
}

/* ------------------------------------------------------------------------ */

static void check_slices(void)
{
    int bad = 0, cases = 0;
    for (int batch = 1; batch <= 40; batch++)
        for (int micro = 1; micro <= batch; micro++) {
            microbatch_plan p;
            if (microbatch_fixed(&p, batch, micro)) {
                bad++;
                continue;
            }
            int counts[3] = {batch, batch > 1 ? batch - 1 : 1, 1};
            for (int c = 0; c < 3; c++) {
                int count = counts[c], next = 0, n = 0, at, rows;
                double wsum = 0;
                for (int k = 0; microbatch_slice(&p, count, k, &at, &rows); k++, n++) {
                    if (at != next || rows < 1 || rows > micro) bad++;
                    next = at + rows;
                    wsum += (double)rows / count;
                }
                cases++;
                if (next != count || n != (count + micro - 1) / micro || fabs(wsum - 1) > 1e-12) bad++;
            }
            /* Halving an even micro-batch splits each micro-batch in two. */
            if (micro % 2 == 0) {
                microbatch_plan h = p;
                microbatch_halve(&h);
                int a0, r0, a1, r1, a2, r2;
                for (int k = 0; microbatch_slice(&p, batch, k, &a0, &r0); k++) {
                    int have1 = microbatch_slice(&h, batch, 2 * k, &a1, &r1);
                    int have2 = microbatch_slice(&h, batch, 2 * k + 1, &a2, &r2);
                    int covered = (have1 ? r1 : 0) + (have2 ? r2 : 0);
                    if (!have1 || a1 != a0 || covered != r0) bad++;
                }
            }
        }
    printf("slices: %d (batch, micro, count) cases, %d bad\n", cases, bad);
    CHECK(bad == 0, "%d bad slicings", bad);
    microbatch_plan p;
    int at, rows;
    CHECK(microbatch_fixed(&p, 12, 5) == 0 && p.accum == 3, "12 by 5: accum %d", p.accum);
    CHECK(microbatch_slice(&p, 12, 2, &at, &rows) && at == 10 && rows == 2, "last slice of 12 by 5");
    CHECK(!microbatch_slice(&p, 12, 3, &at, &rows) && !microbatch_slice(&p, 12, -1, &at, &rows), "no slice 3 or -1");
    CHECK(microbatch_fixed(&p, 12, 13) == ERR_INPUT, "micro > batch");
    CHECK(strstr(err_msg(), "--micro-batch 13: must be between 1 and --batch 12") != NULL, "message: %s", err_msg());
    CHECK(microbatch_fixed(&p, 12, 0) == ERR_INPUT && microbatch_fixed(&p, 0, 1) == ERR_INPUT, "zeroes");
    err_clear();
}

static void check_halving(void)
{
    microbatch_plan p;
    microbatch_fixed(&p, 32, 32);
    int seq[8], n = 0;
    while (microbatch_halve(&p) == 0) {
        seq[n++] = p.micro;
        CHECK(p.accum * p.micro >= 32 && (p.accum - 1) * p.micro < 32, "accum %d for micro %d", p.accum, p.micro);
    }
    printf("32 halves to:");
    for (int i = 0; i < n; i++) printf(" %d", seq[i]);
    printf(" (then: %s)\n", err_msg());
    CHECK(n == 5 && seq[0] == 16 && seq[4] == 1 && p.backoffs == 5, "32 -> 16 8 4 2 1");
    CHECK(strstr(err_msg(), "out of memory with micro-batch 1") != NULL, "message: %s", err_msg());
    microbatch_fixed(&p, 12, 5);
    microbatch_halve(&p);
    CHECK(p.micro == 3 && p.accum == 4, "5 halves to 3 (accum %d)", p.accum);
    err_clear();
    backend_mem m = {0};
    m.free = ((int64_t)10 << 30) - (32 << 20);
    m.used = 32 << 20; /* what the backend holds already counts in the plan */
    CHECK(microbatch_budget(&m) == ((int64_t)10 << 30) - (((int64_t)10 << 30) / 50), "2%% margin on 10 GiB: %lld",
          (long long)microbatch_budget(&m));
    m.free = (int64_t)1 << 30;
    m.used = 0;
    CHECK(microbatch_budget(&m) == m.free - ((int64_t)64 << 20), "64 MiB margin on 1 GiB");
    m.free = 1000;
    CHECK(microbatch_budget(&m) == 0, "nothing left");
}

static void check_choose(void)
{
    bert_config cfg = test_config();
    memory_answer p5, p1;
    memory_plan(&(memory_query){.cfg = &cfg, .micro = 5, .T = T, .prec = PREC_BF16}, &p5);
    memory_plan(&(memory_query){.cfg = &cfg, .micro = 1, .T = T, .prec = PREC_BF16}, &p1);
    microbatch_plan mp;
    CHECK(microbatch_choose(&mp, &cfg, T, PREC_BF16, RECOMPUTE_NONE, p5.total, BATCH) == 0 && mp.micro == 5 &&
              mp.accum == 3,
          "budget = plan(5): micro %d accum %d", mp.micro, mp.accum);
    CHECK(microbatch_choose(&mp, &cfg, T, PREC_BF16, RECOMPUTE_NONE, p5.total - 1, BATCH) == 0 && mp.micro == 4,
          "budget just under plan(5): micro %d", mp.micro);
    CHECK(microbatch_choose(&mp, &cfg, T, PREC_BF16, RECOMPUTE_NONE, INT64_MAX, BATCH) == 0 && mp.micro == BATCH &&
              mp.accum == 1,
          "plenty: the whole batch");
    int rc = microbatch_choose(&mp, &cfg, T, PREC_BF16, RECOMPUTE_NONE, p1.total - 1, BATCH);
    printf("choose with too little: %d: %s\n", rc, err_msg());
    CHECK(rc == ERR_RUNTIME && microbatch_is_oom(rc), "nothing fits is an out-of-memory error");
    CHECK(strstr(err_msg(), "--recompute layer") != NULL, "the message says what to try");
    err_clear();
}

/* The back-off on a fake allocator: capacities that fail at build time, at
 * the trial step, never, or always. */
static void check_auto(void)
{
    bert_config cfg = test_config();
    param_table t;
    param_table_init(&t, &cfg);
    env_t e = {0};
    e.be = &fake_be;
    e.cfg = cfg;
    e.host = malloc(t.total * sizeof(float));
    uint64_t s = 12345;
    for (size_t i = 0; i < t.total; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        e.host[i] = (float)((double)(s >> 40) / (double)(1ull << 24) - 0.5) * 0.1f;
    }
    int64_t model_fixed = 2 * (int64_t)t.total * 4;
    /* What the fake will be asked for at micro m: the model's blocks and,
     * in the trial, the simulated workspace. */
#define NEED_BUILD(m)                                                                                                  \
    (model_fixed + (int64_t)bert_activation_bytes(&(bert_model_opts){.cfg = &cfg, .max_B = (m), .T = T}))
#define NEED_STEP(m) (NEED_BUILD(m) + e.ws_per_row * (m))

    /* 1: build fails at 12 and 6, works at 3. */
    e.ws_per_row = 0;
    fa.cap = NEED_BUILD(3) + 10;
    microbatch_plan p;
    microbatch_fixed(&p, BATCH, BATCH);
    int rc = microbatch_auto(&p, &(microbatch_env){&e, env_build, env_trial});
    printf("build-time OOM: rc %d, micro %d, accum %d, backoffs %d, builds %d, trials %d, refusals %lld\n", rc, p.micro,
           p.accum, p.backoffs, e.builds, e.trials, (long long)fa.refusals);
    CHECK(rc == 0 && p.micro == 3 && p.accum == 4 && p.backoffs == 2, "12 -> 6 -> 3");
    CHECK(e.builds == 3 && e.trials == 1, "trial only once the build worked");
    CHECK(fa.peak <= fa.cap, "never past the capacity");

    /* 2: the build fits at 12 but the step's workspace does not; 6 fits. */
    e.ws_per_row = 1 << 20;
    fa.cap = NEED_STEP(6) + 10;
    CHECK(NEED_BUILD(12) <= fa.cap && NEED_STEP(12) > fa.cap, "scenario 2 is what it says");
    e.builds = e.trials = 0;
    microbatch_fixed(&p, BATCH, BATCH);
    rc = microbatch_auto(&p, &(microbatch_env){&e, env_build, env_trial});
    printf("step-time OOM: rc %d, micro %d, accum %d, builds %d, trials %d\n", rc, p.micro, p.accum, e.builds,
           e.trials);
    CHECK(rc == 0 && p.micro == 6 && p.accum == 2 && e.trials == 2, "12 -> 6 after a failed trial");

    /* The step with 2 micro-batches of 6 gives the gradient of the whole
     * batch in one micro-batch (no example lost, the same mean). */
    float *g6 = malloc(t.total * sizeof(float)), *g12 = malloc(t.total * sizeof(float));
    CHECK(step_grads(&e, &p, BATCH, g6) == 0, "%s", err_msg());
    fa.cap = INT64_MAX;
    microbatch_plan whole;
    microbatch_fixed(&whole, BATCH, BATCH);
    CHECK(env_build(&e, BATCH) == 0 && step_grads(&e, &whole, BATCH, g12) == 0, "%s", err_msg());
    double norm = 0;
    for (size_t i = 0; i < t.total; i++) norm += (double)g12[i] * g12[i];
    printf("gradient norm %.6g\n", sqrt(norm));
    CHECK(norm > 0, "a gradient at all");
    tu_close("gradient: 2 x 6 vs 1 x 12", g6, g12, t.total, 1e-4, 1e-7);
    /* A shorter last step (11 rows) after a halving to 3: 3+3+3+2. */
    microbatch_plan p3;
    microbatch_fixed(&p3, BATCH, 6);
    microbatch_halve(&p3);
    CHECK(env_build(&e, 3) == 0 && step_grads(&e, &p3, 11, g6) == 0, "%s", err_msg());
    CHECK(env_build(&e, 11) == 0 && step_grads(&e, &whole, 11, g12) == 0, "%s", err_msg());
    tu_close("gradient of 11 rows: 3+3+3+2 vs 11", g6, g12, t.total, 1e-4, 1e-7);

    /* 3: not even micro-batch 1. */
    fa.cap = NEED_BUILD(1) / 2;
    microbatch_fixed(&p, BATCH, 4);
    rc = microbatch_auto(&p, &(microbatch_env){&e, env_build, env_trial});
    printf("nothing fits: rc %d: %s\n", rc, err_msg());
    CHECK(rc == ERR_RUNTIME && strstr(err_msg(), "out of memory with micro-batch 1") != NULL, "micro 1 fails");
    CHECK(strstr(err_msg(), "fake allocator: out of memory") != NULL, "the allocator's message is kept");

    /* 4: another error is returned as it is, without halving. */
    fa.cap = INT64_MAX;
    e.fail_input = 1;
    microbatch_fixed(&p, BATCH, 8);
    rc = microbatch_auto(&p, &(microbatch_env){&e, env_build, env_trial});
    CHECK(rc == ERR_INPUT && p.micro == 8 && p.backoffs == 0, "non-OOM error: rc %d micro %d", rc, p.micro);
    e.fail_input = 0;
    err_clear();

    bert_model_free(e.m);
    e.m = NULL;
    CHECK(fa.used == 0, "everything released (%lld bytes left)", (long long)fa.used);
    free(g6);
    free(g12);
    free(e.host);
    param_table_free(&t);
}

/* A step's units (step.h, one cut for one process and a pipeline's
 * stages): 5 windows of 8 tokens with 8, 3, 5, 2 and 8 real ones, rows
 * listed backwards, micro-batches of 2; packed into pieces of at most 8
 * tokens, and padded; then rank 1's share of 2 (first 2 rows of 4). */
static void check_units(void)
{
    enum { W = 8, NW = 5 };
    int lens[NW] = {8, 3, 5, 2, 8};
    int32_t wmask[NW * W] = {0}, idx[NW] = {4, 3, 2, 1, 0};
    for (int w = 0; w < NW; w++)
        for (int t = 0; t < lens[w]; t++) wmask[w * W + t] = 1;
    features f = {.n = NW, .T = W, .attention_mask = wmask};
    train_units us = {0};
    /* micro-batch 0: windows 4 (8), 3 (2): two pieces; 1: 2 (5), 1 (3): one; 2: 0 (8): one */
    train_unit want[] = {{0, 0, 1, 0, 8, 2}, {0, 1, 1, 1, 2, 2}, {1, 2, 2, 0, 8, 2}, {2, 4, 1, 0, 8, 1}};
    CHECK(train_units_plan(&us, &f, PACKING_VARLEN, idx, 0, NW, 2, 8) == 0, "packed: %s", err_msg());
    CHECK(us.n == 4, "packed: %d units, 4 expected", us.n);
    for (int i = 0; i < us.n && i < 4; i++)
        CHECK(!memcmp(&us.u[i], &want[i], sizeof want[i]), "packed unit %d: k %d r0 %d n %d piece %d rows %d B %d", i,
              us.u[i].k, us.u[i].r0, us.u[i].n, us.u[i].piece, us.u[i].rows, us.u[i].B);
    philox_stream r = train_unit_stream(&us.u[1], 42, 3, 3);
    CHECK(r.seed == 43 && r.step == 3 * 3 + 0, "unit 1's dropout stream: seed %llu step %u",
          (unsigned long long)r.seed, (unsigned)r.step);
    CHECK(train_units_plan(&us, &f, PACKING_NONE, idx, 2, 2, 2, 8) == 0 && us.n == 1, "padded share: %d units", us.n);
    CHECK(us.n == 1 && us.u[0].k == 1 && us.u[0].r0 == 2 && us.u[0].n == 2 && us.u[0].rows == 2 * W,
          "padded share: micro-batch %d rows %d..", us.u[0].k, us.u[0].r0);
    train_units_free(&us);
}

int main(void)
{
    log_quiet(1);
    fake_init();
    make_data();
    check_slices();
    check_halving();
    check_choose();
    check_auto();
    check_units();
    backend_free(&cpu_be);
    return tu_done();
}
