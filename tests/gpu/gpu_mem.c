/* gpu_check memory, oom, bench and maxbatch (gpu_check.h).
 *
 * memory: for a few (config, sequence, micro-batch, precision) cases, one
 *   full training step (forward with dropout, backward, AdamW) on a fresh
 *   (--small: minilm-sized cases, a 4096-token vocabulary)
 *   CUDA backend; the planner's total against (a) the allocator's
 *   high-water mark and (b) the device's used memory (cudaMemGetInfo) after
 *   the step less before the backend existed. Both within 10 %. The CUDA
 *   context's size (what the device uses before bertc allocates) is
 *   printed next to the planner's reserve for it.
 * oom: BERT-base, T 384, --batch 32, a memory limit of 6 GiB (--small:
 *   minilm with a 4096-token vocabulary, T 64, 448 MiB): the planner's
 *   honest choice must train without a back-off; a choice made with twice
 *   the budget must run out of memory, halve, and train. The limit is
 *   never passed.
 * bench: one configuration, timed full training steps, one JSON line.
 * maxbatch: the largest micro-batch that trains one step under a limit,
 *   by bisection, next to the planner's prediction; one JSON line. */
#include "gpu_check.h"

#include "backend/cuda/cuda_backend.h"
#include "core/args.h"
#include "core/clock.h"
#include "core/err.h"
#include "model/init.h"
#include "model/params.h"
#include "train/lossscale.h"
#include "train/microbatch.h"
#include "train/optim.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* --name value options of the bench and maxbatch subcommands. */
typedef struct {
    const char *config;
    int seq, batch, steps, warmup, vocab;
    precision_kind prec;
    recompute_kind rc;
    int64_t limit;
} gm_opts;

static int parse_opts(int argc, char **argv, gm_opts *o)
{
    o->config = "base";
    o->seq = 384;
    o->batch = 32;
    o->steps = 20;
    o->warmup = 3;
    o->vocab = 30522;
    o->prec = PREC_AUTO;
    o->rc = RECOMPUTE_NONE;
    o->limit = 0;
    for (int i = 1; i < argc; i += 2) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int rc = 0;
        int64_t x = 0;
        if (!v) return err_set(ERR_INPUT, "option %s needs a value", k);
        if (!strcmp(k, "--config")) o->config = v;
        else if (!strcmp(k, "--seq")) rc = parse_int64(v, 1, 1 << 20, k, &x), o->seq = (int)x;
        else if (!strcmp(k, "--batch")) rc = parse_int64(v, 1, 1 << 20, k, &x), o->batch = (int)x;
        else if (!strcmp(k, "--steps")) rc = parse_int64(v, 1, 1 << 20, k, &x), o->steps = (int)x;
        else if (!strcmp(k, "--warmup")) rc = parse_int64(v, 0, 1 << 20, k, &x), o->warmup = (int)x;
        else if (!strcmp(k, "--vocab-size")) rc = parse_int64(v, 2, 1 << 24, k, &x), o->vocab = (int)x;
        else if (!strcmp(k, "--precision")) rc = select_parse_precision(v, &o->prec);
        else if (!strcmp(k, "--recompute")) rc = memory_parse_recompute(v, &o->rc);
        else if (!strcmp(k, "--limit")) rc = parse_size(v, "--limit", &o->limit);
        else if (strcmp(k, "--out") != 0) return err_set(ERR_INPUT, "unknown option %s", k);
        if (rc) return rc;
    }
    return 0;
}

/* Everything one training configuration holds on a backend. */
typedef struct {
    backend be;
    int have_be;
    bert_config cfg;
    param_table table;
    float *host;
    optim *opt;
    bert_model *m;
    gc_batch data;
    int T;
    recompute_kind recompute;
    loss_scaler ls;
    int64_t step;
} rig;

static void rig_close(rig *r)
{
    bert_model_free(r->m);
    optim_free(r->opt);
    if (r->have_be) backend_free(&r->be);
    gc_batch_free(&r->data);
    free(r->host);
    if (r->table.info) param_table_free(&r->table);
    memset(r, 0, sizeof *r);
}

/* Backend, parameters on the host, optimizer state: what does not depend
 * on the micro-batch. */
static int rig_open(rig *r, const char *config, int vocab, int T, precision_kind prec, int64_t limit)
{
    memset(r, 0, sizeof *r);
    r->T = T;
    int rc = config_named(config, vocab, &r->cfg);
    if (rc) return rc;
    param_table_init(&r->table, &r->cfg);
    r->host = malloc(r->table.total * sizeof(float));
    if (!r->host) return err_set(ERR_RUNTIME, "host memory for %zu parameters", r->table.total);
    /* model_init_random takes seconds for BERT-base on one core; the
     * checks open the same config many times, so keep the last one. */
    static char cached_name[32];
    static int cached_vocab;
    static float *cached;
    static size_t cached_n;
    if (!cached || strcmp(cached_name, config) || cached_vocab != vocab || cached_n != r->table.total) {
        free(cached);
        cached = malloc(r->table.total * sizeof(float));
        if (!cached) return err_set(ERR_RUNTIME, "host memory for %zu parameters", r->table.total);
        model_init_random(&r->cfg, &r->table, cached, 11);
        snprintf(cached_name, sizeof cached_name, "%s", config);
        cached_vocab = vocab;
        cached_n = r->table.total;
    }
    memcpy(r->host, cached, r->table.total * sizeof(float));
    if ((rc = gc_cuda(&r->be, prec, limit))) return rc;
    r->have_be = 1;
    lossscale_init(&r->ls, precision_needs_loss_scaling(cuda_backend_precision(r->be.ctx)));
    return optim_create(&r->opt, &r->be, &r->table);
}

/* (Re)creates the model for micro-batches of `micro` rows. */
static int rig_build(void *user, int micro)
{
    rig *r = user;
    bert_model_free(r->m);
    r->m = NULL;
    backend_mem_trim(&r->be);
    gc_batch_free(&r->data);
    gc_batch_init(&r->data, micro, r->T, r->cfg.vocab_size, 5);
    int rc = bert_model_create(
        &r->m, &(bert_model_opts){.cfg = &r->cfg, .be = &r->be, .max_B = micro, .T = r->T, .recompute = r->recompute});
    if (!rc) rc = bert_model_set_params(r->m, r->host);
    return rc;
}

/* Forward (dropout on) and backward of the whole batch. */
static int rig_fwd_bwd(rig *r)
{
    bert_batch b = gc_bert_batch(&r->data);
    philox_stream rng = {42, (uint32_t)r->step, 0};
    float loss = NAN;
    bert_zero_grad(r->m);
    int rc = bert_forward(r->m, &b, r->cfg.hidden_dropout_prob, r->cfg.attention_probs_dropout_prob, rng, &loss,
                          NULL, NULL);
    if (!rc) rc = bert_backward(r->m, lossscale_scale(&r->ls));
    return rc;
}

/* The confirmation step of --micro-batch auto: no update. */
static int rig_trial(void *user, int micro)
{
    (void)micro;
    rig *r = user;
    int rc = rig_fwd_bwd(r);
    bert_zero_grad(r->m);
    return rc;
}

/* One full training step: forward, backward, AdamW. */
static int rig_step(rig *r)
{
    int rc = rig_fwd_bwd(r);
    if (rc) return rc;
    optim_config oc = optim_config_default();
    oc.warmup_steps = 1;
    oc.total_steps = 1000000;
    optim_result res;
    rc = optim_step(r->opt, bert_model_params(r->m), bert_model_grads(r->m), &oc, r->step, lossscale_unscale(&r->ls),
                    &res);
    if (!rc) lossscale_update(&r->ls, res.skipped);
    r->step++;
    return rc;
}

static int64_t device_used(void)
{
    size_t fr = 0, tot = 0;
    if (cudaMemGetInfo(&fr, &tot) != cudaSuccess) return -1;
    return (int64_t)(tot - fr);
}

/* ------------------------------------------------------------------------ */

int gc_memory(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    struct {
        const char *config;
        int T, micro;
        precision_kind prec;
    } full[] = {
        {"base", 384, 8, PREC_AUTO},   {"base", 384, 24, PREC_AUTO}, {"base", 384, 8, PREC_FP32},
        {"minilm", 384, 32, PREC_FP16}, {"base", 128, 64, PREC_TF32},
    }, small[] = {
        {"minilm", 128, 4, PREC_AUTO}, {"minilm", 128, 8, PREC_FP32}, {"minilm", 64, 8, PREC_FP16},
        {"minilm", 128, 4, PREC_TF32},
    }, *cases = gc_small ? small : full;
    size_t ncases = gc_small ? sizeof small / sizeof small[0] : sizeof full / sizeof full[0];
    cudaFree(0); /* the context exists before the first measurement */
    int64_t context = device_used();
    char b1[32], b2[32];
    printf("device memory in use before bertc allocates (CUDA context, other processes): %s; the planner keeps %s\n",
           memory_fmt_bytes(b1, sizeof b1, context), memory_fmt_bytes(b2, sizeof b2, MEMORY_CONTEXT_RESERVE));
    FILE *f = gc_open("memory.csv");
    if (f) fprintf(f, "config,seq,micro,precision,planned,allocator_peak,device_delta,err_alloc,err_device\n");
    for (size_t i = 0; i < ncases; i++) {
        rig r;
        int64_t before = device_used();
        int rc = rig_open(&r, cases[i].config, gc_small ? 4096 : 30522, cases[i].T, cases[i].prec, 0);
        if (!rc) rc = rig_build(&r, cases[i].micro);
        if (!rc) rc = rig_step(&r);
        if (!rc) rc = r.be.i->sync(r.be.ctx);
        backend_mem m = {0};
        precision_kind prec = r.have_be ? cuda_backend_precision(r.be.ctx) : cases[i].prec;
        if (!rc) rc = backend_mem_query(&r.be, &m);
        int64_t after = device_used();
        memory_answer p;
        memory_query q = {.cfg = &r.cfg, .micro = cases[i].micro, .T = cases[i].T, .prec = prec};
        if (!rc) rc = memory_plan(&q, &p);
        if (rc) {
            gc_result(0, "memory %s T%d micro %d: %s", cases[i].config, cases[i].T, cases[i].micro, err_msg());
            rig_close(&r);
            continue;
        }
        double ea = fabs((double)m.peak - (double)p.total) / (double)p.total;
        double ed = fabs((double)(after - before) - (double)p.total) / (double)p.total;
        char pl[32], pk[32], dd[32];
        gc_result(ea <= 0.10,
                  "memory %-6s T%-3d micro %-3d %-5s planned %s, allocator peak %s: %.2f%% off (bound 10%%)",
                  cases[i].config, cases[i].T, cases[i].micro, select_precision_name(prec),
                  memory_fmt_bytes(pl, sizeof pl, p.total), memory_fmt_bytes(pk, sizeof pk, m.peak), 100 * ea);
        gc_result(ed <= 0.10, "memory %-6s T%-3d micro %-3d %-5s planned %s, device used grew by %s: %.2f%% off (bound 10%%)",
                  cases[i].config, cases[i].T, cases[i].micro, select_precision_name(prec), pl,
                  memory_fmt_bytes(dd, sizeof dd, after - before), 100 * ed);
        if (f)
            fprintf(f, "%s,%d,%d,%s,%lld,%lld,%lld,%.5f,%.5f\n", cases[i].config, cases[i].T, cases[i].micro,
                    select_precision_name(prec), (long long)p.total, (long long)m.peak, (long long)(after - before), ea,
                    ed);
        rig_close(&r);
    }
    if (f) fclose(f);
    gc_result(context <= MEMORY_CONTEXT_RESERVE, "memory: CUDA context %s within the planner's reserve %s",
              memory_fmt_bytes(b1, sizeof b1, context), memory_fmt_bytes(b2, sizeof b2, MEMORY_CONTEXT_RESERVE));
    return gc_failures ? 1 : 0;
}

/* ------------------------------------------------------------------------ */

static int oom_case(const char *what, const char *config, int T, int64_t limit, int64_t budget_factor,
                    int want_backoff)
{
    rig r;
    int rc = rig_open(&r, config, gc_small ? 4096 : 30522, T, PREC_AUTO, limit);
    if (rc) {
        gc_result(0, "oom %s: %s", what, err_msg());
        rig_close(&r);
        return rc;
    }
    backend_mem m;
    backend_mem_query(&r.be, &m);
    int64_t budget = microbatch_budget(&m) * budget_factor;
    precision_kind prec = cuda_backend_precision(r.be.ctx);
    microbatch_plan mp;
    rc = microbatch_choose(&mp, &r.cfg, T, prec, RECOMPUTE_NONE, budget, 32);
    int first = mp.micro;
    if (!rc) rc = microbatch_auto(&mp, &(microbatch_env){&r, rig_build, rig_trial});
    if (!rc) rc = rig_step(&r); /* a real step with what it settled on */
    backend_mem after;
    backend_mem_query(&r.be, &after);
    char lim[32], pk[32];
    if (rc) gc_result(0, "oom %s: %s", what, err_msg());
    else
        gc_result(want_backoff ? mp.backoffs >= 1 : mp.backoffs == 0,
                  "oom %s: limit %s, planner chose %d, trained with %d (%d back-off%s, %d micro-batches per step of "
                  "32), allocator peak %s",
                  what, memory_fmt_bytes(lim, sizeof lim, limit), first, mp.micro, mp.backoffs,
                  mp.backoffs == 1 ? "" : "s", mp.accum, memory_fmt_bytes(pk, sizeof pk, after.peak));
    gc_result(after.peak <= limit, "oom %s: the allocator stayed within the limit (peak %lld <= %lld)", what,
              (long long)after.peak, (long long)limit);
    rig_close(&r);
    return rc;
}

int gc_oom(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    /* --small: minilm (vocabulary 4096) at T 64 under 384 MiB instead of
     * BERT-base at 384 under 5 GiB. The limits leave the step's cap of 32
     * windows out of reach (16-bit activations in bf16: 32 need 409.5 MiB
     * and 5.64 GiB), so that twice the budget must back off. */
    const char *config = gc_small ? "minilm" : "base";
    int T = gc_small ? 64 : 384;
    int64_t limit = gc_small ? (int64_t)384 << 20 : (int64_t)5 << 30;
    oom_case("planner's budget", config, T, limit, 1, 0);
    oom_case("twice the budget", config, T, limit, 2, 1);
    return gc_failures ? 1 : 0;
}

/* ------------------------------------------------------------------------ */

static void gpu_name(char *name, size_t cap)
{
    char why[256];
    int ma, mi;
    int64_t tot;
    if (!cuda_probe(0, name, cap, &ma, &mi, &tot, why, sizeof why)) snprintf(name, cap, "none");
}

int gc_bench(int argc, char **argv)
{
    gm_opts o;
    char name[128];
    if (parse_opts(argc, argv, &o)) {
        fprintf(stderr, "gpu_check bench: %s\n", err_msg());
        return 2;
    }
    gpu_name(name, sizeof name);
    rig r;
    int rc = rig_open(&r, o.config, o.vocab, o.seq, o.prec, o.limit);
    r.recompute = o.rc;
    if (!rc) rc = rig_build(&r, o.batch);
    double t0 = 0;
    for (int k = 0; !rc && k < o.warmup + o.steps; k++) {
        if (k == o.warmup) {
            if ((rc = r.be.i->sync(r.be.ctx))) break;
            t0 = clock_now_s();
        }
        rc = rig_step(&r);
    }
    if (!rc) rc = r.be.i->sync(r.be.ctx);
    double dt = clock_now_s() - t0;
    precision_kind prec = r.have_be ? cuda_backend_precision(r.be.ctx) : o.prec;
    if (rc) {
        printf("{\"impl\": \"bertc\", \"gpu\": \"%s\", \"config\": \"%s\", \"seq\": %d, \"batch\": %d, \"precision\": "
               "\"%s\", \"error\": \"%s\"}\n",
               name, o.config, o.seq, o.batch, select_precision_name(prec),
               microbatch_is_oom(rc) ? "out of memory" : "failed");
        fprintf(stderr, "gpu_check bench: %s\n", err_msg());
        rig_close(&r);
        return microbatch_is_oom(rc) ? 4 : 1;
    }
    backend_mem m;
    backend_mem_query(&r.be, &m);
    double flops = bert_flops(&r.cfg, o.batch, o.seq);
    printf("{\"impl\": \"bertc\", \"gpu\": \"%s\", \"config\": \"%s\", \"seq\": %d, \"batch\": %d, \"precision\": "
           "\"%s\", \"recompute\": \"%s\", \"steps\": %d, \"step_ms\": %.3f, \"examples_per_s\": %.2f, "
           "\"peak_bytes\": %lld, \"flops_per_step\": %.6g, \"tflops\": %.2f, \"loss_scale\": %g, \"skipped\": %lld}\n",
           name, o.config, o.seq, o.batch, select_precision_name(prec), memory_recompute_name(o.rc), o.steps,
           1e3 * dt / o.steps, o.batch * o.steps / dt, (long long)m.peak, flops, flops * o.steps / dt / 1e12,
           (double)r.ls.scale, (long long)r.ls.skipped);
    rig_close(&r);
    return 0;
}

/* 1 when micro-batch `micro` trains one step under the limit. */
static int fits(const gm_opts *o, int micro)
{
    rig r;
    int rc = rig_open(&r, o->config, o->vocab, o->seq, o->prec, o->limit);
    r.recompute = o->rc;
    if (!rc) rc = rig_build(&r, micro);
    if (!rc) rc = rig_step(&r);
    if (!rc) rc = r.be.i->sync(r.be.ctx);
    int oom = rc && microbatch_is_oom(rc);
    if (rc && !oom) fprintf(stderr, "gpu_check maxbatch: micro-batch %d: %s\n", micro, err_msg());
    printf("  micro-batch %d: %s\n", micro, rc ? (oom ? "out of memory" : "failed") : "trains");
    rig_close(&r);
    err_clear();
    return rc ? (oom ? 0 : -1) : 1;
}

int gc_maxbatch(int argc, char **argv)
{
    gm_opts o;
    char name[128];
    if (parse_opts(argc, argv, &o) || o.limit <= 0) {
        fprintf(stderr, "gpu_check maxbatch: %s\n", o.limit <= 0 ? "--limit SIZE is required" : err_msg());
        return 2;
    }
    gpu_name(name, sizeof name);
    bert_config cfg;
    if (config_named(o.config, o.vocab, &cfg)) {
        fprintf(stderr, "gpu_check maxbatch: %s\n", err_msg());
        return 2;
    }
    precision_kind prec = o.prec;
    char pn[128], why[256];
    int ma = 0, mi = 0;
    int64_t tot = 0;
    if (prec == PREC_AUTO && cuda_probe(0, pn, sizeof pn, &ma, &mi, &tot, why, sizeof why))
        prec = select_auto_precision(ma, mi);
    memory_query q = {.cfg = &cfg, .T = o.seq, .prec = prec, .recompute = o.rc};
    int planned = (int)memory_largest(&q, MEMORY_FIT_MICRO, o.limit, 1 << 16);
    /* Bisection between a size that trains and one that does not. */
    int lo = 0, hi = planned > 0 ? planned + 1 : 2, r;
    while ((r = fits(&o, hi)) == 1) {
        lo = hi;
        hi *= 2;
    }
    if (r < 0) return 1;
    while (hi - lo > 1) {
        int mid = lo + (hi - lo) / 2;
        r = fits(&o, mid);
        if (r < 0) return 1;
        if (r) lo = mid;
        else hi = mid;
    }
    printf("{\"impl\": \"bertc\", \"gpu\": \"%s\", \"config\": \"%s\", \"seq\": %d, \"precision\": \"%s\", "
           "\"recompute\": \"%s\", \"limit_bytes\": %lld, \"largest_micro_batch\": %d, \"planned\": %d}\n",
           name, o.config, o.seq, select_precision_name(prec), memory_recompute_name(o.rc), (long long)o.limit, lo,
           planned);
    return 0;
}
