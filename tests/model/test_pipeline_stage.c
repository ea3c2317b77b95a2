/* Pipeline stages in one process (bert_model_opts' stage_lo, stage_hi and
 * sets): a model cut
 * into stages of contiguous layers, each stage's output copied into the
 * next one's input and each stage's input gradient into the previous one's
 * output gradient, must give the loss, the logits and every gradient of the
 * whole model bit for bit: the same ops on the same numbers in the same
 * order, the dropout masks drawn per global layer index. Three accumulated
 * micro-batches with dropout, each in its own activation set (all forwards
 * first, then the backwards, so that the sets must not share anything a
 * backward reads), padded and packed, with and without recompute, at 1 and
 * 2 threads, for the splits 0,2,4 and 0,1,3,4. Also: each stage's table is
 * its slice of the whole table, the gradient buckets of the stages are the
 * whole model's, and a stage's activations take less memory. */
#include "backend/backend.h"
#include "core/err.h"
#include "model/bert.h"
#include "model/pack.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

enum { B = 3, T = 24, L = 4, K = 3, MAXS = 4 };

/* Micro-batch k: B rows (the last micro-batch 2) of windows 24 - 5 b - k tokens long. */
typedef struct {
    int32_t ids[B * T], types[B * T], mask[B * T], sp[B], ep[B];
    int32_t pids[B * T], ptypes[B * T], cu[B + 1];
    bert_batch padded, packed;
} micro;

static micro mb[K];

static void make_batches(void)
{
    for (int k = 0; k < K; k++) {
        micro *u = &mb[k];
        int rows = k == K - 1 ? 2 : B, lens[B];
        for (int b = 0; b < rows; b++) lens[b] = T - 5 * b - k;
        tu_make_batch(&(tu_batch_spec){.B = rows, .T = T, .lens = lens, .vocab = 60, .row_mul = 11, .tok_mul = 17,
                                       .offset = 5 * k, .seg_start = 6},
                      u->ids, u->types, u->mask);
        for (int b = 0; b < rows; b++) {
            u->sp[b] = 3 + b + k;
            u->ep[b] = 6 + 2 * b + k;
        }
        pack_piece(u->ids, u->types, u->mask, T, NULL, NULL, rows, u->pids, u->ptypes, u->cu);
        bert_batch p = {rows, T, u->ids, u->types, u->mask, u->sp, u->ep, NULL, 0};
        bert_batch q = {rows, T, u->pids, u->ptypes, NULL, u->sp, u->ep, u->cu, 0};
        u->padded = p;
        u->packed = q;
    }
}

typedef struct {
    float loss[K], logits[K][2 * B * T];
    float *grads;
    size_t buckets[2 * (L + 2)]; /* (offset, count) in the whole block, in the order reported */
    int nbuckets;
} outcome;

typedef struct {
    outcome *o;
    size_t poff;
} bucket_log;

static int log_bucket(void *arg, size_t off, size_t n)
{
    bucket_log *g = arg;
    if (g->o->nbuckets < L + 2) {
        g->o->buckets[2 * g->o->nbuckets] = g->poff + off;
        g->o->buckets[2 * g->o->nbuckets + 1] = n;
    }
    g->o->nbuckets++;
    return 0;
}

static philox_stream rng_of(int k)
{
    philox_stream r = {.seed = 9, .step = 40 + (uint32_t)k};
    return r;
}

static const bert_batch *batch_of(int k, int packed) { return packed ? &mb[k].packed : &mb[k].padded; }

static float weight_of(int k) { return (float)batch_of(k, 0)->B / (float)(2 * B + 2); }

/* The whole model: forward and backward of each micro-batch in turn. */
static int run_whole(backend *be, const bert_config *cfg, const float *p0, size_t n, int packed,
                     recompute_kind recompute, outcome *o)
{
    bert_model *m = NULL;
    int rc = bert_model_create(&m, &(bert_model_opts){.cfg = cfg, .be = be, .max_B = B, .T = T, .recompute = recompute});
    if (!rc) rc = bert_model_set_params(m, p0);
    if (rc) goto out;
    bert_zero_grad(m);
    bucket_log g = {o, 0};
    for (int k = 0; k < K && !rc; k++) {
        rc = bert_forward(m, batch_of(k, packed), 0.2f, 0.2f, rng_of(k), &o->loss[k], o->logits[k],
                          o->logits[k] + B * T);
        bert_model_set_grads_ready(m, k == K - 1 ? log_bucket : NULL, &g);
        if (!rc) rc = bert_backward(m, weight_of(k));
    }
    o->grads = calloc(n, sizeof(float));
    if (!rc) rc = be->i->download(be->ctx, o->grads, bert_model_grads(m), n * sizeof(float));
out:
    bert_model_free(m);
    return rc;
}

static size_t rows_of(const bert_batch *b) { return b->cu_seqlens ? (size_t)b->cu_seqlens[b->B] : (size_t)b->B * b->T; }

/* The stages of split[0..S]: every micro-batch forward through all stages
 * (set k on each), then every backward from the last stage down. */
static int run_stages(backend *be, const bert_config *cfg, const float *p0, size_t n, int packed,
                      recompute_kind recompute, const int *split, int S, outcome *o)
{
    bert_model *st[MAXS] = {0};
    int rc = 0, C = cfg->hidden_size;
    for (int s = 0; s < S && !rc; s++) {
        rc = bert_model_create(&st[s], &(bert_model_opts){.cfg = cfg, .be = be, .max_B = B, .T = T,
                                                          .recompute = recompute, .stage_lo = split[s],
                                                          .stage_hi = split[s + 1], .sets = K});
        if (!rc) rc = bert_model_set_params(st[s], p0);
        if (!rc) bert_zero_grad(st[s]);
    }
    for (int k = 0; k < K && !rc; k++)
        for (int s = 0; s < S && !rc; s++) {
            const bert_batch *b = batch_of(k, packed);
            if (s > 0)
                be->i->copy(be->ctx, bert_stage_x_in(st[s], k), bert_stage_x_out(st[s - 1], k),
                            rows_of(b) * C * bert_model_act_size(st[s]));
            rc = bert_stage_forward(st[s], k, b, 0.2f, 0.2f, rng_of(k), &o->loss[k], o->logits[k],
                                    o->logits[k] + B * T);
        }
    bucket_log g[MAXS];
    for (int k = 0; k < K && !rc; k++)
        for (int s = S - 1; s >= 0 && !rc; s--) {
            const bert_batch *b = batch_of(k, packed);
            if (s < S - 1)
                be->i->copy(be->ctx, bert_stage_dx_out(st[s], k), bert_stage_dx_in(st[s + 1], k),
                            rows_of(b) * C * bert_model_act_size(st[s]));
            g[s].o = o;
            bert_model_stage(st[s], NULL, NULL, &g[s].poff);
            bert_model_set_grads_ready(st[s], k == K - 1 ? log_bucket : NULL, &g[s]);
            rc = bert_stage_backward(st[s], k, weight_of(k));
        }
    o->grads = calloc(n, sizeof(float));
    for (int s = 0; s < S && !rc; s++) {
        size_t off;
        bert_model_stage(st[s], NULL, NULL, &off);
        const param_table *t = bert_model_stage_table(st[s]);
        rc = be->i->download(be->ctx, o->grads + off, bert_model_grads(st[s]), t->total * sizeof(float));
    }
    for (int s = 0; s < S; s++) bert_model_free(st[s]);
    return rc;
}

static void compare(const bert_config *cfg, const float *p0, size_t n, int threads, int packed,
                    recompute_kind recompute, const int *split, int S)
{
    backend be;
    outcome a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    char what[128];
    int w = snprintf(what, sizeof what, "%d threads, %s%s, split", threads, packed ? "packed" : "padded",
                     recompute ? ", recompute" : "");
    for (int s = 0; s <= S; s++) w += snprintf(what + w, sizeof what - (size_t)w, "%s%d", s ? "," : " ", split[s]);
    int rc = backend_cpu_create(&be, threads);
    if (!rc) rc = run_whole(&be, cfg, p0, n, packed, recompute, &a);
    if (!rc) rc = run_stages(&be, cfg, p0, n, packed, recompute, split, S, &b);
    CHECK(rc == 0, "%s: %s", what, err_msg());
    if (!rc) {
        size_t diff = 0;
        for (size_t j = 0; j < n; j++) diff += memcmp(&a.grads[j], &b.grads[j], sizeof(float)) != 0;
        int same_loss = !memcmp(a.loss, b.loss, sizeof a.loss), same_logits = !memcmp(a.logits, b.logits, sizeof a.logits);
        double norm = 0;
        for (size_t j = 0; j < n; j++) norm += (double)a.grads[j] * a.grads[j];
        printf("%s: losses %.9g %.9g %.9g whole vs %.9g %.9g %.9g stages; logits %s; %zu of %zu gradients differ "
               "(|g|^2 %.4g); %d buckets each\n",
               what, (double)a.loss[0], (double)a.loss[1], (double)a.loss[2], (double)b.loss[0], (double)b.loss[1],
               (double)b.loss[2], same_logits ? "identical" : "DIFFER", diff, n, norm, b.nbuckets);
        CHECK(same_loss, "%s: the losses differ", what);
        CHECK(same_logits, "%s: the logits differ", what);
        CHECK(diff == 0, "%s: %zu gradients differ", what, diff);
        CHECK(norm > 0, "%s: the gradient is zero", what);
        CHECK(a.nbuckets == L + 2 && b.nbuckets == L + 2, "%s: %d and %d buckets, want %d", what, a.nbuckets,
              b.nbuckets, L + 2);
        CHECK(!memcmp(a.buckets, b.buckets, sizeof a.buckets), "%s: the stages' buckets are not the whole model's",
              what);
    }
    free(a.grads);
    free(b.grads);
    backend_free(&be);
}

/* Each stage's table is its slice; the slices tile the whole table. */
static void check_tables(const bert_config *cfg)
{
    backend be;
    int rc = backend_cpu_create(&be, 1);
    CHECK(rc == 0, "%s", err_msg());
    param_table whole;
    param_table_init(&whole, cfg);
    const int split[] = {0, 1, 3, 4};
    size_t next = 0;
    for (int s = 0; s < 3 && !rc; s++) {
        bert_model *m = NULL;
        rc = bert_model_create(&m, &(bert_model_opts){.cfg = cfg, .be = &be, .max_B = B, .T = T,
                                                      .stage_lo = split[s], .stage_hi = split[s + 1], .sets = 2});
        CHECK(rc == 0, "stage %d: %s", s, err_msg());
        if (rc) break;
        const param_table *t = bert_model_stage_table(m);
        size_t off;
        int lo, hi;
        bert_model_stage(m, &lo, &hi, &off);
        int first = whole.n, bad = 0;
        for (int i = 0; i < whole.n; i++)
            if (whole.info[i].offset == off) first = i;
        for (int i = 0; i < t->n; i++)
            bad += first + i >= whole.n || strcmp(t->info[i].name, whole.info[first + i].name) ||
                   t->info[i].offset + off != whole.info[first + i].offset;
        printf("stage %d: layers [%d, %d), tensors %s .. %s, floats [%zu, %zu) of %zu\n", s, lo, hi, t->info[0].name,
               t->info[t->n - 1].name, off, off + t->total, whole.total);
        CHECK(lo == split[s] && hi == split[s + 1], "stage %d: layers [%d, %d)", s, lo, hi);
        CHECK(bad == 0 && off == next, "stage %d: its table is not the whole table's slice at %zu", s, next);
        CHECK(bert_model_sets(m) == 2, "stage %d: %d sets", s, bert_model_sets(m));
        next = off + t->total;
        bert_model_free(m);
    }
    CHECK(next == whole.total, "the stages hold %zu of %zu floats", next, whole.total);
    bert_model *m = NULL;
    bert_model_opts o = {.cfg = cfg, .be = &be, .max_B = B, .T = T};
    o.stage_lo = 2, o.stage_hi = 2;
    CHECK(bert_model_create(&m, &o) == ERR_INPUT, "a stage without layers is refused");
    o.stage_lo = 0, o.stage_hi = 5;
    CHECK(bert_model_create(&m, &o) == ERR_INPUT, "layers past L are refused");
    o.stage_hi = 4, o.sets = -1;
    CHECK(bert_model_create(&m, &o) == ERR_INPUT, "a negative count of activation sets is refused");
    err_clear();
    param_table_free(&whole);
    backend_free(&be);
}

static void check_memory(void)
{
    bert_config base;
    CHECK(config_named("base", 30522, &base) == 0, "%s", err_msg());
    bert_model_opts o = {.cfg = &base, .max_B = 8, .T = 384};
    size_t whole = bert_activation_bytes(&o);
    o.stage_lo = 0, o.stage_hi = 12, o.sets = 1;
    size_t same = bert_activation_bytes(&o);
    o.stage_hi = 6, o.sets = 2;
    size_t s0 = bert_activation_bytes(&o);
    o.recompute = RECOMPUTE_LAYER;
    size_t r0 = bert_activation_bytes(&o);
    o.recompute = RECOMPUTE_NONE, o.stage_lo = 6, o.stage_hi = 12, o.sets = 1;
    size_t s1 = bert_activation_bytes(&o);
    printf("BERT-base, 8 x 384: whole %.1f MiB; 2 stages: stage 0 (2 sets) %.1f MiB, stage 1 (1 set) %.1f MiB; "
           "stage 0 with recompute %.1f MiB\n", whole / 1048576.0, s0 / 1048576.0, s1 / 1048576.0, r0 / 1048576.0);
    CHECK(same == whole, "the whole model as one stage: %zu vs %zu bytes", same, whole);
    CHECK(s1 < whole / 2 + whole / 20, "stage 1 holds about half");
    CHECK(s0 > s1 && s0 < whole + whole / 10, "stage 0 with 2 sets holds about as much as the whole model");
    CHECK(r0 < s0 / 3, "recompute shares the layer slot between the sets");
}

int main(void)
{
    log_quiet(1);
    make_batches();
    bert_config cfg = tu_small_config(60, L, 4);
    param_table t;
    param_table_init(&t, &cfg);
    float *p0 = tu_model_params(&cfg, &t, 5, 5); /* attention far from uniform */
    const int two[] = {0, 2, 4}, three[] = {0, 1, 3, 4};
    for (int threads = 1; threads <= 2; threads++)
        for (int packed = 0; packed <= 1; packed++)
            for (recompute_kind recompute = RECOMPUTE_NONE; recompute <= RECOMPUTE_LAYER; recompute++) {
                compare(&cfg, p0, t.total, threads, packed, recompute, two, 2);
                compare(&cfg, p0, t.total, threads, packed, recompute, three, 3);
            }
    check_tables(&cfg);
    check_memory();
    free(p0);
    param_table_free(&t);
    return tu_done();
}
