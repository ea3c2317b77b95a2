/* bertc bench: times full training steps (forward, backward, AdamW) on
 * random data, dropout on, and prints what it measured. A step is the
 * trainer's: train_step_grads (train/step.h: the micro-batch, padding or
 * packing and loss code `bertc train` runs) on one micro-batch of --batch
 * windows, then optim_step.
 *
 * FLOPs per step (bert_flops, model/config.h; stated in the output as "flops_formula"):
 *   6 * P_mm * B * T            every weight matmul, forward (2) and backward (4),
 *                               P_mm = L (4 C^2 + 2 C I) + 2 C  (Q, K, V, output,
 *                               the FFN, qa_outputs; embeddings are lookups)
 * + 12 * L * B * T^2 * C        attention: Q K^T and P V, 2 T^2 C each per
 *                               sequence forward, twice that backward
 * LayerNorm, softmax, GELU, dropout, the loss and AdamW are not counted;
 * padded tokens are (the work is done for them). */
#include "backend/backend.h"
#include "backend/select.h"
#include "cli/options.h"
#include "core/args.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/sbuf.h"
#include "data/features.h"
#include "data/loader.h"
#include "data/random_batch.h"
#include "core/rng.h"
#include "model/bert.h"
#include "model/hf_dir.h"
#include "model/init.h"
#include "model/memory.h"
#include "train/lossscale.h"
#include "train/microbatch.h"
#include "train/optim.h"
#include "train/step.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

const char cmd_bench_summary[] = "time training steps (forward, backward, AdamW) on random data";

typedef struct {
    const char *config_name, *model_dir, *lengths_path;
    int seq, batch, steps, warmup, threads, vocab, json, gpu, max_batch;
    int64_t seed, mem_limit;
    device_kind device;
    precision_kind prec;
    recompute_kind recompute;
    packing_kind packing;
    int *lens, nlens; /* --lengths, shuffled; NULL: random windows */
} bench_opts;

/* What was measured, over the timed steps. */
typedef struct {
    double total_s, best_s, cpu_s;
    double forward_s, backward_s, optimizer_s;
    double real_tokens, flops; /* summed over the timed steps (--lengths) */
    float loss_first, loss_last, loss_scale;
    int64_t skipped;    /* fp16 steps skipped for non-finite gradients */
    int64_t peak_bytes; /* the GPU's high-water mark (CUDA), the process's peak RSS (CPU) */
    int largest_batch, planned_batch; /* --max-batch: found, and the planner's figure (0: none) */
    backend_info info;
} bench_result;

/* The same per step, as printed. */
typedef struct {
    double ms, ms_best, examples_per_s, gflops, flops, cpu_ms, forward_ms, backward_ms, optimizer_ms, real_tokens;
} bench_figures;

/* --batch windows of --seq tokens, as a features table (the ids, types,
 * mask and labels the trainer's step reads): the benchmarks' random batch
 * (data/random_batch.h). */
static int windows_init(features *w, int B, int T, int V, uint64_t seed)
{
    size_t BT = (size_t)B * T;
    memset(w, 0, sizeof *w);
    int32_t *block = malloc((3 * BT + 2 * (size_t)B) * sizeof *block);
    if (!block) return err_set(ERR_RUNTIME, "bench: out of memory for the batch");
    w->n = B;
    w->T = T;
    w->input_ids = block;
    w->token_type_ids = block + BT;
    w->attention_mask = block + 2 * BT;
    w->start_positions = block + 3 * BT;
    w->end_positions = w->start_positions + B;
    random_batch_fill(w->input_ids, w->token_type_ids, w->attention_mask, w->start_positions, w->end_positions, B, T,
                      V, 0, seed);
    return 0;
}

/* Step k of --lengths: the next --batch lengths of the shuffled list, each
 * window's mask (and labels) cut to its length; adds the step's real
 * tokens and FLOPs (padded windows count --seq) to *tokens and *flops. */
static void windows_set_lengths(features *w, const bench_opts *o, const bert_config *cfg, int k, double *tokens,
                                double *flops)
{
    int T = w->T;
    for (int r = 0; r < w->n; r++) {
        int len = o->lens[((size_t)k * w->n + r) % (size_t)o->nlens];
        for (int t = 0; t < T; t++) {
            size_t i = (size_t)r * T + t;
            w->attention_mask[i] = t < len;
            if (t >= len) w->input_ids[i] = w->token_type_ids[i] = 0;
            else if (w->input_ids[i] == 0) w->input_ids[i] = 1;
        }
        int32_t *sp = w->start_positions + r, *ep = w->end_positions + r;
        if (*sp >= len) *sp = len - 1;
        if (*ep >= len) *ep = len - 1;
        if (*ep < *sp) *ep = *sp;
        *tokens += len;
        *flops += bert_flops(cfg, 1, o->packing == PACKING_VARLEN ? len : T); /* padded windows count seq */
    }
}

/* --lengths FILE: one window length a line, each in 1..seq; shuffled with
 * seed (Fisher-Yates on splitmix64) so that each step draws a mix. */
static int read_lengths(const char *path, int seq, uint64_t seed, int **out, int *n_out)
{
    FILE *f = fopen(path, "r");
    if (!f) return err_set(ERR_INPUT, "bench: --lengths %s: cannot open", path);
    int cap = 1024, n = 0, line = 0, rc = 0;
    int *v = malloc((size_t)cap * sizeof *v);
    char buf[64];
    while (v && fgets(buf, sizeof buf, f)) {
        line++;
        char *end;
        long x = strtol(buf, &end, 10);
        while (*end == ' ' || *end == '\t' || *end == '\r' || *end == '\n') end++;
        if (end == buf || *end || x < 1 || x > seq) {
            rc = err_set(ERR_INPUT, "bench: %s line %d: a window length must be 1..%d (--seq)", path, line, seq);
            break;
        }
        if (n == cap) {
            int *w = realloc(v, (size_t)(cap *= 2) * sizeof *v);
            if (!w) break;
            v = w;
        }
        v[n++] = (int)x;
    }
    fclose(f);
    if (!rc && !v) rc = err_set(ERR_RUNTIME, "bench: out of memory for the lengths");
    if (!rc && n == 0) rc = err_set(ERR_INPUT, "bench: %s: no window lengths", path);
    if (rc) {
        free(v);
        return rc;
    }
    uint64_t s = seed;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(splitmix64_next(&s) % (uint64_t)(i + 1)), t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
    *out = v;
    *n_out = n;
    return 0;
}

/* The options; ARGS_HELP after --help. o->lens is read here (the caller
 * frees it). */
static int bench_parse(int argc, char **argv, bench_opts *o)
{
    const char *precision = "auto", *recompute = "none", *packing = "none", *device = "cpu", *limit = NULL;
    memset(o, 0, sizeof *o);
    o->steps = 5;
    o->warmup = 1;
    o->vocab = 30522;
    o->seed = 42;
    const arg_spec specs[] = {
        {"config", ARG_STR, &o->config_name, "NAME", "named config: tiny, mini, small, minilm, base, large", .required = 0},
        {"model", ARG_STR, &o->model_dir, "DIR", "model dir (its config and weights) instead of --config", .required = 0},
        {"seq", ARG_INT, &o->seq, "N", "sequence length", .min = 1, .max = 1 << 20, .required = 1},
        {"batch", ARG_INT, &o->batch, "N", "rows per step", .min = 1, .max = 1 << 20, .required = 1},
        {"steps", ARG_INT, &o->steps, "N", "timed steps (default 5)", .min = 1, .max = 1000000},
        {"warmup-steps", ARG_INT, &o->warmup, "N", "untimed steps first (default 1)", .min = 0, .max = 1000000},
        {"threads", ARG_INT, &o->threads, "N", "CPU threads (default: all cores)", .min = 0, .max = 4096},
        {"vocab-size", ARG_INT, &o->vocab, "N", "vocabulary size with --config (default 30522)", .min = 1,
         .max = 1 << 30},
        {"device", ARG_STR, &device, "D", "cpu|cuda|auto (default cpu; auto: the GPU when there is a usable one)",
         .required = 0},
        {"gpu", ARG_INT, &o->gpu, "N", "the CUDA device to use", .min = 0, .max = 1023},
        {"precision", ARG_STR, &precision, "P",
         "auto|fp32|tf32|fp16|bf16 (auto: bf16 on compute capability 8.0+, fp16 on 7.x, fp32 on the CPU; bf16 on a CPU with AVX512-BF16)",
         .required = 0},
        {"gpu-mem-limit", ARG_STR, &limit, "SIZE", "device memory bertc may use, e.g. 16GiB (a T4's card)",
         .required = 0},
        {"max-batch", ARG_FLAG, &o->max_batch, NULL,
         "find the largest --batch that trains (needs a GPU: doubles from the planner's figure, then bisects; "
         "--batch is the first guess when the planner has none)", .required = 0},
        {"seed", ARG_I64, &o->seed, "N", "seed of the data, the weights and dropout (default 42)", .min = 0,
         .max = 9.2e18},
        {"recompute", ARG_STR, &recompute, "MODE", "none|layer (layer: recompute each layer in backward)", .required = 0},
        {"json", ARG_FLAG, &o->json, NULL, "print one JSON object", .required = 0},
        {"lengths", ARG_STR, &o->lengths_path, "FILE",
         "real window lengths, one a line (bench/squad_dev_lengths.txt): each step takes the next --batch of them, "
         "shuffled by --seed", .required = 0},
        {"packing", ARG_STR, &packing, "P", "none|varlen (varlen: real tokens only; needs --lengths)", .required = 0},
        {0},
    };
    int rc = args_parse("bench", "bertc bench --config NAME|--model DIR --seq N --batch N [options]", specs, argc,
                        argv, NULL, NULL);
    if (rc) return rc;
    if (!o->config_name == !o->model_dir) return err_set(ERR_INPUT, "bench: give exactly one of --config and --model");
    if ((rc = cli_parse_device("bench", device, &o->device))) return rc;
    if ((rc = cli_parse_precision("bench", precision, &o->prec))) return rc;
    if (limit && (rc = parse_size(limit, "bench --gpu-mem-limit", &o->mem_limit))) return rc;
    if (o->max_batch && o->device != DEVICE_CUDA)
        return err_set(ERR_INPUT, "bench: --max-batch needs --device cuda (on the CPU the limit is the host's memory: "
                                  "bertc plan estimates it)");
    if ((rc = cli_parse_recompute("bench", recompute, &o->recompute))) return rc;
    if ((rc = cli_parse_packing("bench", packing, &o->packing))) return rc;
    if (o->packing == PACKING_VARLEN && !o->lengths_path)
        return err_set(ERR_INPUT, "bench: --packing varlen needs --lengths FILE");
    if (o->lengths_path) return read_lengths(o->lengths_path, o->seq, (uint64_t)o->seed, &o->lens, &o->nlens);
    return 0;
}

/* The model of --model DIR, or --config NAME with random weights. */
static int bench_model(const bench_opts *o, bert_config *cfg, param_table *table, float **host)
{
    int rc;
    if (o->model_dir) {
        int qa_init = 0;
        rc = model_load(o->model_dir, (uint64_t)o->seed, cfg, table, host, &qa_init);
    } else if (!(rc = config_named(o->config_name, o->vocab, cfg))) {
        param_table_init(table, cfg);
        *host = malloc(table->total * sizeof **host);
        if (!*host) return err_set(ERR_RUNTIME, "bench: out of memory for %zu parameters", table->total);
        model_init_random(cfg, table, *host, (uint64_t)o->seed);
    }
    if (!rc && o->seq > cfg->max_position_embeddings)
        rc = err_set(ERR_INPUT, "bench: --seq %d exceeds max_position_embeddings %d", o->seq,
                     cfg->max_position_embeddings);
    return rc;
}

/* The steps, warm-up first: each the trainer's forward and backward passes
 * (train_step_grads, one micro-batch of --batch windows) and optim_step.
 * Every phase ends with a backend sync (inside bert_forward, bert_backward
 * and optim_step), so the phase times are real on any backend. */
static int bench_run(const bench_opts *o, const bert_config *cfg, const float *host, bench_result *r)
{
    memset(r, 0, sizeof *r);
    backend be = {0};
    bert_model *m = NULL;
    optim *opt = NULL;
    features w = {0};
    loader_batch mb = {0};
    int32_t *idx = malloc((size_t)o->batch * sizeof *idx);
    int rc = idx ? 0 : err_set(ERR_RUNTIME, "bench: out of memory for the batch");
    if (!rc) rc = windows_init(&w, o->batch, o->seq, cfg->vocab_size, (uint64_t)o->seed);
    bert_model_opts mo = {.cfg = cfg, .be = &be, .max_B = o->batch, .T = o->seq, .recompute = o->recompute};
    backend_opts bo = backend_opts_default();
    bo.device = o->device;
    bo.precision = o->prec;
    bo.threads = o->threads;
    bo.gpu = o->gpu;
    bo.mem_limit = o->mem_limit;
    loss_scaler ls;
    if (!rc) rc = backend_select(&be, &bo, &r->info);
    lossscale_init(&ls, precision_needs_loss_scaling(r->info.precision));
    if (!rc) rc = bert_model_create(&m, &mo);
    if (!rc) rc = bert_model_set_params(m, host);
    if (!rc) rc = optim_create(&opt, &be, bert_model_table(m));
    if (!rc) rc = loader_batch_init(&mb, o->batch, o->seq);
    if (rc) goto done;
    for (int i = 0; i < o->batch; i++) idx[i] = i;
    optim_config oc = optim_config_default();
    oc.warmup_steps = 1;
    oc.total_steps = o->warmup + o->steps + 1;
    train_step_timing tm = {0};
    train_step_opts so = {.model = m, .f = &w, .mb = &mb, .micro = o->batch, .micro_batches = 1,
                          .packing = o->packing, .drop_hidden = cfg->hidden_dropout_prob,
                          .drop_attn = cfg->attention_probs_dropout_prob, .seed = (uint64_t)o->seed,
                          .scale = lossscale_scale(&ls), .timing = &tm};
    r->loss_first = r->loss_last = NAN;
    r->best_s = INFINITY;
    for (int k = 0; k < o->warmup + o->steps; k++) {
        int timed = k >= o->warmup;
        if (k == o->warmup) tm = (train_step_timing){0};
        double c0 = clock_cpu_s(), t0 = clock_now_s(), loss = NAN, tokens = 0, flops = 0;
        if (o->lens) windows_set_lengths(&w, o, cfg, k, &tokens, &flops);
        so.step = k;
        so.scale = lossscale_scale(&ls);
        if ((rc = train_step_grads(&so, idx, 0, o->batch, o->batch, &loss))) goto done;
        double t2 = clock_now_s();
        optim_result res = {0};
        rc = optim_step(opt, bert_model_params(m), bert_model_grads(m), &oc, k, lossscale_unscale(&ls), &res);
        if (rc) goto done;
        lossscale_update(&ls, res.skipped);
        double t3 = clock_now_s(), dt = t3 - t0;
        if (timed) {
            r->total_s += dt;
            r->best_s = dt < r->best_s ? dt : r->best_s;
            r->cpu_s += clock_cpu_s() - c0;
            r->optimizer_s += t3 - t2;
            r->real_tokens += tokens;
            r->flops += flops;
        }
        if (k == 0) r->loss_first = (float)loss;
        r->loss_last = (float)loss;
        if (!o->json)
            fprintf(stderr, "step %d%s: %.1f ms, loss %.4f\n", k, timed ? "" : " (warm-up)", 1e3 * dt, loss);
    }
    r->forward_s = tm.forward_s;
    r->backward_s = tm.backward_s;
    r->loss_scale = lossscale_scale(&ls);
    r->skipped = ls.skipped;
    backend_mem mem;
    if (r->info.is_cuda && !backend_mem_query(&be, &mem)) {
        r->peak_bytes = mem.peak;
    } else {
        struct rusage ru;
        if (!getrusage(RUSAGE_SELF, &ru)) r->peak_bytes = (int64_t)ru.ru_maxrss * 1024;
    }
done:
    loader_batch_free(&mb);
    optim_free(opt);
    bert_model_free(m);
    if (be.i) backend_free(&be);
    free(w.input_ids);
    free(idx);
    return rc;
}

/* One "key": value pair of the JSON object in b. */
static void json_key(sbuf *b, const char *key)
{
    sb_puts(b, b->n ? ", " : "{");
    sb_json_string(b, key, SB_JSON_UNICODE);
    sb_puts(b, ": ");
}

static void json_str(sbuf *b, const char *key, const char *v)
{
    json_key(b, key);
    sb_json_string(b, v, SB_JSON_UNICODE);
}

static void json_int(sbuf *b, const char *key, long long v)
{
    json_key(b, key);
    sb_printf(b, "%lld", v);
}

/* v with `decimals` digits after the point. */
static void json_fixed(sbuf *b, const char *key, int decimals, double v)
{
    json_key(b, key);
    sb_printf(b, "%.*f", decimals, v);
}

static bench_figures bench_figures_of(const bench_opts *o, const bert_config *cfg, const bench_result *r)
{
    bench_figures f;
    double n = o->steps, step_s = r->total_s / n;
    f.ms = 1e3 * step_s;
    f.ms_best = 1e3 * r->best_s;
    f.flops = o->lens ? r->flops / n : bert_flops(cfg, o->batch, o->seq);
    f.examples_per_s = o->batch / step_s;
    f.gflops = f.flops / step_s * 1e-9;
    f.cpu_ms = 1e3 * r->cpu_s / n;
    f.forward_ms = 1e3 * r->forward_s / n;
    f.backward_ms = 1e3 * r->backward_s / n;
    f.optimizer_ms = 1e3 * r->optimizer_s / n;
    f.real_tokens = o->lens ? r->real_tokens / n : (double)o->batch * o->seq;
    return f;
}

/* --json: one object on one line (bench/compare.sh and bench/packing.sh read it). */
static void print_json(const bench_opts *o, const char *name, const bert_config *cfg, int nthreads,
                       const bench_result *r)
{
    bench_figures f = bench_figures_of(o, cfg, r);
    sbuf b = {0};
    json_str(&b, "impl", "bertc");
    json_str(&b, "backend", r->info.is_cuda ? "cuda" : "cpu");
    json_str(&b, "precision", select_precision_name(r->info.precision));
    json_str(&b, "device", r->info.desc);
    if (r->info.is_cuda) json_str(&b, "gpu", r->info.gpu_name);
    json_str(&b, "config", name);
    json_int(&b, "layers", cfg->num_hidden_layers);
    json_int(&b, "hidden", cfg->hidden_size);
    json_int(&b, "heads", cfg->num_attention_heads);
    json_int(&b, "intermediate", cfg->intermediate_size);
    json_int(&b, "vocab", cfg->vocab_size);
    json_int(&b, "seq", o->seq);
    json_int(&b, "batch", o->batch);
    json_int(&b, "steps", o->steps);
    json_int(&b, "warmup_steps", o->warmup);
    json_int(&b, "threads", nthreads);
    json_str(&b, "openblas_core", openblas_get_corename());
    char kern[512], gemm[96];
    char isa[32];
    json_str(&b, "isa", backend_kernel_info("cpu", "isa", isa, sizeof isa));
    json_str(&b, "gemm", backend_kernel_info("cpu", "gemm", gemm, sizeof gemm));
    json_str(&b, "kernels", backend_kernel_info("cpu", "kernels", kern, sizeof kern));
    json_fixed(&b, "ms_per_step", 2, f.ms);
    json_fixed(&b, "ms_best", 2, f.ms_best);
    json_fixed(&b, "examples_per_s", 4, f.examples_per_s);
    json_fixed(&b, "gflops", 2, f.gflops);
    json_key(&b, "flops_per_step");
    sb_printf(&b, "%.6g", f.flops);
    json_str(&b, "flops_formula", "6*(L*(4C^2+2CI)+2C)*B*T + 12*L*B*T^2*C");
    json_fixed(&b, "cpu_ms_per_step", 2, f.cpu_ms);
    json_fixed(&b, "forward_ms", 2, f.forward_ms);
    json_fixed(&b, "backward_ms", 2, f.backward_ms);
    json_fixed(&b, "optimizer_ms", 2, f.optimizer_ms);
    json_key(&b, "dropout");
    sb_printf(&b, "[%g, %g]", cfg->hidden_dropout_prob, cfg->attention_probs_dropout_prob);
    json_str(&b, "recompute", memory_recompute_name(o->recompute));
    json_fixed(&b, "loss_first", 6, r->loss_first);
    json_fixed(&b, "loss_last", 6, r->loss_last);
    json_str(&b, "packing", cli_packing_name(o->packing));
    json_str(&b, "lengths", o->lens ? "file" : "random");
    json_int(&b, "peak_bytes", r->peak_bytes);
    json_str(&b, "peak_memory", r->info.is_cuda ? "device high-water mark" : "process peak RSS");
    json_key(&b, "loss_scale");
    sb_printf(&b, "%g", r->loss_scale);
    json_int(&b, "skipped_steps", r->skipped);
    if (o->mem_limit) json_int(&b, "gpu_mem_limit", o->mem_limit);
    if (o->max_batch) {
        json_int(&b, "largest_batch", r->largest_batch);
        json_int(&b, "planned_batch", r->planned_batch);
    }
    json_fixed(&b, "real_tokens_per_step", 1, f.real_tokens);
    sb_puts(&b, "}\n");
    fputs(b.p, stdout);
    sb_free(&b);
}

static void print_text(const bench_opts *o, const char *name, const bert_config *cfg, int nthreads,
                       const bench_result *r)
{
    bench_figures f = bench_figures_of(o, cfg, r);
    printf("bertc bench: %s (L%d H%d A%d I%d), batch %d x seq %d, ", name, cfg->num_hidden_layers, cfg->hidden_size,
           cfg->num_attention_heads, cfg->intermediate_size, o->batch, o->seq);
    if (r->info.is_cuda) printf("%s%s: ", r->info.desc, o->recompute == RECOMPUTE_LAYER ? ", recompute layer" : "");
    else
        printf("%d threads%s, OpenBLAS core %s: ", nthreads, o->recompute == RECOMPUTE_LAYER ? ", recompute layer" : "",
               openblas_get_corename());
    printf("%.1f ms/step (best %.1f; forward %.1f, backward %.1f, optimizer %.1f; CPU time %.1f ms), ", f.ms,
           f.ms_best, f.forward_ms, f.backward_ms, f.optimizer_ms, f.cpu_ms);
    printf("%.2f examples/s, %.1f GFLOP/s (%d timed steps after %d warm-up)\n", f.examples_per_s, f.gflops, o->steps,
           o->warmup);
    char kern[512];
    if (!r->info.is_cuda) printf("  kernels: %s\n", backend_kernel_info("cpu", "kernels", kern, sizeof kern));
    printf("  peak memory: %.2f GiB (%s)", (double)r->peak_bytes / (1 << 30),
           r->info.is_cuda ? "the device's high-water mark" : "the process's peak RSS");
    if (precision_needs_loss_scaling(r->info.precision))
        printf(", loss scale %g, %lld skipped steps", r->loss_scale, (long long)r->skipped);
    printf("\n");
    if (o->max_batch)
        printf("  largest batch that trains%s: %d (the memory planner said %d)\n", o->mem_limit ? " under the limit" : "",
               r->largest_batch, r->planned_batch);
    if (o->lens)
        printf("  windows from %s, packing %s: %.0f real tokens per step of %zu padded\n", o->lengths_path,
               cli_packing_name(o->packing), f.real_tokens, (size_t)o->batch * o->seq);
}

/* 1 when a batch of `batch` rows trains (a warm-up step and a timed one,
 * so AdamW's state exists) on o's device under o's limit; 0 out of memory;
 * rc < 0 on any other failure. */
static int bench_fits(const bench_opts *o, const bert_config *cfg, const float *host, int batch, int *rc)
{
    bench_opts p = *o;
    p.batch = batch;
    p.steps = 1;
    p.warmup = 1;
    p.json = 1;
    bench_result r;
    *rc = bench_run(&p, cfg, host, &r);
    int oom = *rc && microbatch_is_oom(*rc);
    fprintf(stderr, "bench --max-batch: batch %d: %s\n", batch, *rc ? (oom ? "out of memory" : err_msg()) : "trains");
    if (oom) {
        err_clear();
        *rc = 0;
    }
    return *rc ? -1 : !oom;
}

/* --max-batch: doubles from the planner's figure (or --batch) while it
 * trains, then bisects between the last that trained and the first that
 * did not. *largest 0: not even one row. */
static int bench_max_batch(const bench_opts *o, const bert_config *cfg, const float *host, int *largest, int *planned)
{
    backend_info info = {0};
    precision_kind prec = o->prec;
    int rc = 0;
    if (prec == PREC_AUTO) {
        char why[256];
        if (select_probe_cuda(o->gpu, info.gpu_name, sizeof info.gpu_name, &info.cc_major, &info.cc_minor,
                              &info.gpu_total, why, sizeof why))
            prec = select_auto_precision(info.cc_major, info.cc_minor);
    }
    int64_t budget = o->mem_limit ? o->mem_limit : info.gpu_total;
    memory_query q = {.cfg = cfg, .T = o->seq, .prec = prec, .recompute = o->recompute};
    *planned = budget > 0 && prec != PREC_AUTO ? (int)memory_largest(&q, MEMORY_FIT_MICRO, budget, 1 << 16) : 0;
    int lo = 0, hi = *planned > 0 ? *planned : o->batch, r;
    while ((r = bench_fits(o, cfg, host, hi, &rc)) == 1) {
        lo = hi;
        if (hi >= 1 << 16) break;
        hi *= 2;
    }
    if (r < 0) return rc;
    if (r == 1) hi = lo + 1;
    while (hi - lo > 1) {
        int mid = lo + (hi - lo) / 2;
        if ((r = bench_fits(o, cfg, host, mid, &rc)) < 0) return rc;
        if (r) lo = mid;
        else hi = mid;
    }
    *largest = lo;
    return 0;
}

int cmd_bench(int argc, char **argv)
{
    bench_opts o;
    int rc = bench_parse(argc, argv, &o);
    if (rc == ARGS_HELP) return 0;
    bert_config cfg;
    param_table table = {0};
    float *host = NULL;
    bench_result r;
    if (!rc) rc = bench_model(&o, &cfg, &table, &host);
    int largest = 0, planned = 0;
    if (!rc && o.max_batch && !(rc = bench_max_batch(&o, &cfg, host, &largest, &planned))) {
        if (largest < 1) rc = err_set(ERR_RUNTIME, "bench --max-batch: not even a batch of 1 fits");
        else o.batch = largest; /* then measured, as any other batch */
    }
    if (!rc) rc = bench_run(&o, &cfg, host, &r);
    if (!rc && o.max_batch) {
        r.largest_batch = largest;
        r.planned_batch = planned;
    }
    if (!rc) {
        const char *name = o.model_dir ? o.model_dir : o.config_name;
        int nthreads = o.threads > 0 ? o.threads : omp_get_num_procs();
        if (o.json) print_json(&o, name, &cfg, nthreads, &r);
        else print_text(&o, name, &cfg, nthreads, &r);
    }
    free(o.lens);
    free(host);
    param_table_free(&table);
    return rc;
}
