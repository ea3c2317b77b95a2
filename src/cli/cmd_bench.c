/* bertc bench: times full training steps (forward, backward, AdamW) on
 * random data, dropout on, and prints what it measured.
 *
 * FLOPs per step (stated in the output as "flops_formula"):
 *   6 * P_mm * B * T            every weight matmul, forward (2) and backward (4),
 *                               P_mm = L (4 C^2 + 2 C I) + 2 C  (Q, K, V, output,
 *                               the FFN, qa_outputs; embeddings are lookups)
 * + 12 * L * B * T^2 * C        attention: Q K^T and P V, 2 T^2 C each per
 *                               sequence forward, twice that backward
 * LayerNorm, softmax, GELU, dropout, the loss and AdamW are not counted;
 * padded tokens are (the work is done for them). */
#include "backend/cpu_kernels.h"
#include "backend/backend.h"
#include "core/args.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/rng.h"
#include "core/sbuf.h"
#include "model/bert.h"
#include "model/hf_dir.h"
#include "model/init.h"
#include "model/memory.h"
#include "train/optim.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char cmd_bench_summary[] = "time training steps (forward, backward, AdamW) on random data";

/* Random ids; every other row padded over its last quarter; question part
 * of type 0, the rest of type 1; random labels inside the sequence. */
static void random_batch(int B, int T, int V, uint64_t seed, int32_t *ids, int32_t *types, int32_t *mask,
                         int32_t *sp, int32_t *ep)
{
    uint64_t s = seed;
    for (int b = 0; b < B; b++) {
        int len = b % 2 ? T - T / 4 : T;
        if (len < 1) len = 1;
        for (int t = 0; t < T; t++) {
            size_t i = (size_t)b * T + t;
            ids[i] = t < len ? (int32_t)(splitmix64_next(&s) % (uint64_t)V) : 0;
            types[i] = t >= T / 4 && t < len;
            mask[i] = t < len;
        }
        sp[b] = (int32_t)(splitmix64_next(&s) % (uint64_t)len);
        ep[b] = sp[b] + (int32_t)(splitmix64_next(&s) % 8);
        if (ep[b] >= len) ep[b] = len - 1;
    }
}

static double step_flops(const bert_config *c, int B, int T)
{
    /* Not I: <complex.h>, which cblas.h may pull in, defines it. */
    double C = c->hidden_size, FF = c->intermediate_size, L = c->num_hidden_layers;
    double p_mm = L * (4 * C * C + 2 * C * FF) + 2 * C;
    return 6.0 * p_mm * B * T + 12.0 * L * B * (double)T * T * C;
}

/* FLOPs of one window of len tokens (the work done for it: padded windows
 * count seq). */
static double window_flops(const bert_config *c, int len)
{
    double C = c->hidden_size, FF = c->intermediate_size, L = c->num_hidden_layers;
    double p_mm = L * (4 * C * C + 2 * C * FF) + 2 * C;
    return 6.0 * p_mm * len + 12.0 * L * (double)len * len * C;
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

int cmd_bench(int argc, char **argv)
{
    const char *config_name = NULL, *model_dir = NULL, *precision = "fp32", *recompute = "none";
    const char *lengths_path = NULL, *packing = "none";
    int seq = 0, batch = 0, steps = 5, warmup = 1, threads = 0, vocab = 30522, json = 0;
    int64_t seed = 42;
    int seen_seq = 0, seen_batch = 0;
    const arg_spec specs[] = {
        {"config", ARG_STR, &config_name, "NAME", "named config: tiny, mini, small, minilm, base, large", .required = 0},
        {"model", ARG_STR, &model_dir, "DIR", "model dir (its config and weights) instead of --config", .required = 0},
        {"seq", ARG_INT, &seq, "N", "sequence length", .min = 1, .max = 1 << 20, .required = 1, .seen = &seen_seq},
        {"batch", ARG_INT, &batch, "N", "rows per step", .min = 1, .max = 1 << 20, .required = 1, .seen = &seen_batch},
        {"steps", ARG_INT, &steps, "N", "timed steps (default 5)", .min = 1, .max = 1000000},
        {"warmup-steps", ARG_INT, &warmup, "N", "untimed steps first (default 1)", .min = 0, .max = 1000000},
        {"threads", ARG_INT, &threads, "N", "CPU threads (default: all cores)", .min = 0, .max = 4096},
        {"vocab-size", ARG_INT, &vocab, "N", "vocabulary size with --config (default 30522)", .min = 1,
         .max = 1 << 30},
        {"precision", ARG_STR, &precision, "P", "fp32 (the CPU backend computes in fp32)", .required = 0},
        {"seed", ARG_I64, &seed, "N", "seed of the data, the weights and dropout (default 42)", .min = 0,
         .max = 9.2e18},
        {"recompute", ARG_STR, &recompute, "MODE", "none|layer (layer: recompute each layer in backward)", .required = 0},
        {"json", ARG_FLAG, &json, NULL, "print one JSON object", .required = 0},
        {"lengths", ARG_STR, &lengths_path, "FILE",
         "real window lengths, one a line (bench/squad_dev_lengths.txt): each step takes the next --batch of them, "
         "shuffled by --seed", .required = 0},
        {"packing", ARG_STR, &packing, "P", "none|varlen (varlen: real tokens only; needs --lengths)", .required = 0},
        {0},
    };
    int rc = args_parse("bench", "bertc bench --config NAME|--model DIR --seq N --batch N [options]", specs, argc,
                        argv, NULL, NULL);
    if (rc == ARGS_HELP) return 0;
    if (rc) return rc;
    if (!config_name == !model_dir) return err_set(ERR_INPUT, "bench: give exactly one of --config and --model");
    if (strcmp(precision, "fp32") && strcmp(precision, "auto"))
        return err_set(ERR_INPUT, "bench: --precision %s: the CPU backend computes in fp32", precision);
    recompute_kind rec;
    if ((rc = memory_parse_recompute(recompute, &rec))) return err_wrap(rc, "bench");
    int packed = 0;
    if (!strcmp(packing, "varlen")) packed = 1;
    else if (strcmp(packing, "none")) return err_set(ERR_INPUT, "bench: --packing %s: expected none or varlen", packing);
    if (packed && !lengths_path) return err_set(ERR_INPUT, "bench: --packing varlen needs --lengths FILE");
    int *lens = NULL, nlens = 0;
    if (lengths_path && (rc = read_lengths(lengths_path, seq, (uint64_t)seed, &lens, &nlens))) return rc;

    bert_config cfg;
    param_table table = {0};
    float *host = NULL;
    const char *name = config_name;
    if (model_dir) {
        int qa_init = 0;
        if ((rc = model_load(model_dir, (uint64_t)seed, &cfg, &table, &host, &qa_init))) return rc;
        name = model_dir;
    } else {
        if ((rc = config_named(config_name, vocab, &cfg))) return rc;
        param_table_init(&table, &cfg);
        host = malloc(table.total * sizeof *host);
        if (!host) {
            param_table_free(&table);
            return err_set(ERR_RUNTIME, "bench: out of memory for %zu parameters", table.total);
        }
        model_init_random(&cfg, &table, host, (uint64_t)seed);
    }
    if (seq > cfg.max_position_embeddings) {
        rc = err_set(ERR_INPUT, "bench: --seq %d exceeds max_position_embeddings %d", seq,
                     cfg.max_position_embeddings);
        free(lens);
        free(host);
        param_table_free(&table);
        return rc;
    }

    backend be = {0};
    bert_model *m = NULL;
    optim *opt = NULL;
    size_t BT = (size_t)batch * seq;
    int32_t *ints = malloc((5 * BT + 3 * (size_t)batch + 1) * sizeof *ints);
    double *times = calloc((size_t)steps, sizeof *times);
    if (!ints || !times) {
        rc = err_set(ERR_RUNTIME, "bench: out of memory for the batch");
        goto done;
    }
    int32_t *ids = ints, *types = ids + BT, *mask = types + BT, *sp = mask + BT, *ep = sp + batch;
    int32_t *kids = ep + batch, *ktypes = kids + BT, *cu = ktypes + BT;
    random_batch(batch, seq, cfg.vocab_size, (uint64_t)seed, ids, types, mask, sp, ep);
    bert_batch b = {batch, seq, ids, types, mask, sp, ep, NULL, 0};
    double real_tokens = 0, flops_total = 0;

    if ((rc = backend_cpu_create(&be, threads)) || (rc = bert_model_create_mode(&m, &cfg, &be, batch, seq, rec == RECOMPUTE_LAYER)) ||
        (rc = bert_model_set_params(m, host)) || (rc = optim_create(&opt, &be, bert_model_table(m))))
        goto done;
    int nthreads = threads > 0 ? threads : omp_get_num_procs();

    optim_config oc = optim_config_default();
    oc.warmup_steps = 1;
    oc.total_steps = warmup + steps + 1;
    float loss_first = NAN, loss_last = NAN;
    /* Each phase ends with a backend sync (inside bert_forward, bert_backward
     * and optim_step), so the phase times are real on any backend. */
    double phase[3] = {0}, cpu_total = 0;
    for (int k = 0; k < warmup + steps; k++) {
        double c0 = clock_cpu_s(), t0 = clock_now_s();
        philox_stream rng = {.seed = (uint64_t)seed, .step = (uint32_t)k};
        float loss = NAN;
        if (lens) {
            /* the next --batch windows of the shuffled lengths, padded to --seq or packed */
            int N = 0;
            cu[0] = 0;
            for (int r = 0; r < batch; r++) {
                int len = lens[((size_t)k * batch + r) % (size_t)nlens];
                for (int t = 0; t < seq; t++) {
                    size_t i = (size_t)r * seq + t;
                    mask[i] = t < len;
                    if (t >= len) ids[i] = types[i] = 0;
                    else if (ids[i] == 0) ids[i] = 1;
                    if (t < len) {
                        kids[N] = ids[i];
                        ktypes[N] = types[i];
                        N++;
                    }
                }
                cu[r + 1] = N;
                if (sp[r] >= len) sp[r] = len - 1;
                if (ep[r] >= len) ep[r] = len - 1;
                if (ep[r] < sp[r]) ep[r] = sp[r];
                if (k >= warmup) {
                    real_tokens += len;
                    flops_total += window_flops(&cfg, packed ? len : seq);
                }
            }
            b.mask_loss = 0;
            if (packed) {
                b.input_ids = kids;
                b.token_type_ids = ktypes;
                b.attention_mask = NULL;
                b.cu_seqlens = cu;
            }
        }
        bert_zero_grad(m);
        if ((rc = bert_forward(m, &b, cfg.hidden_dropout_prob, cfg.attention_probs_dropout_prob, rng, &loss, NULL,
                               NULL)))
            goto done;
        double t1 = clock_now_s();
        if ((rc = bert_backward(m, 1.0f))) goto done;
        double t2 = clock_now_s();
        if ((rc = optim_step(opt, bert_model_params(m), bert_model_grads(m), &oc, k, 1.0f, NULL))) goto done;
        double t3 = clock_now_s(), dt = t3 - t0;
        if (k >= warmup) {
            times[k - warmup] = dt;
            cpu_total += clock_cpu_s() - c0;
            phase[0] += t1 - t0;
            phase[1] += t2 - t1;
            phase[2] += t3 - t2;
        }
        if (k == 0) loss_first = loss;
        loss_last = loss;
        if (!json) fprintf(stderr, "step %d%s: %.1f ms, loss %.4f\n", k, k < warmup ? " (warm-up)" : "", 1e3 * dt,
                           loss);
    }

    double total = 0, best = INFINITY;
    for (int k = 0; k < steps; k++) {
        total += times[k];
        if (times[k] < best) best = times[k];
    }
    double ms = 1e3 * total / steps;
    double flops = lens ? flops_total / steps : step_flops(&cfg, batch, seq);
    double eps = batch / (total / steps), gflops = flops / (total / steps) * 1e-9;
    if (json) {
        char kern[512], gemm[96];
        sbuf jname = {0}, jkern = {0}, jgemm = {0}; /* escaped: a model dir path may hold quotes or controls */
        sb_json_string(&jname, name, SB_JSON_UNICODE);
        sb_json_string(&jkern, cpu_kernels_describe(kern, sizeof kern), SB_JSON_UNICODE);
        sb_json_string(&jgemm, cpu_kernels_gemm(gemm, sizeof gemm), SB_JSON_UNICODE);
        printf("{\"impl\": \"bertc\", \"backend\": \"cpu\", \"precision\": \"fp32\", \"config\": %s, "
               "\"layers\": %d, \"hidden\": %d, \"heads\": %d, \"intermediate\": %d, \"vocab\": %d, "
               "\"seq\": %d, \"batch\": %d, \"steps\": %d, \"warmup_steps\": %d, \"threads\": %d, "
               "\"openblas_core\": \"%s\", \"isa\": \"%s\", \"gemm\": %s, \"kernels\": %s, \"ms_per_step\": %.2f, \"ms_best\": %.2f, \"examples_per_s\": %.4f, "
               "\"gflops\": %.2f, \"flops_per_step\": %.6g, "
               "\"flops_formula\": \"6*(L*(4C^2+2CI)+2C)*B*T + 12*L*B*T^2*C\", "
               "\"cpu_ms_per_step\": %.2f, \"forward_ms\": %.2f, \"backward_ms\": %.2f, \"optimizer_ms\": %.2f, "
               "\"dropout\": [%g, %g], \"recompute\": \"%s\", \"loss_first\": %.6f, \"loss_last\": %.6f, "
               "\"packing\": \"%s\", \"lengths\": \"%s\", \"real_tokens_per_step\": %.1f}\n",
               jname.p, cfg.num_hidden_layers, cfg.hidden_size, cfg.num_attention_heads, cfg.intermediate_size,
               cfg.vocab_size, seq, batch, steps, warmup, nthreads, openblas_get_corename(), cpu_isa_name(cpu_kernels()->level),
               jgemm.p, jkern.p, ms, 1e3 * best, eps,
               gflops, flops, 1e3 * cpu_total / steps, 1e3 * phase[0] / steps, 1e3 * phase[1] / steps, 1e3 * phase[2] / steps,
               cfg.hidden_dropout_prob, cfg.attention_probs_dropout_prob, memory_recompute_name(rec), loss_first, loss_last,
               packing, lens ? "file" : "random", lens ? real_tokens / steps : (double)BT);
        sb_free(&jname);
        sb_free(&jkern);
        sb_free(&jgemm);
    } else {
        printf("bertc bench: %s (L%d H%d A%d I%d), batch %d x seq %d, %d threads%s, OpenBLAS core %s: "
               "%.1f ms/step (best %.1f; forward %.1f, backward %.1f, optimizer %.1f; CPU time %.1f ms), %.2f examples/s, "
               "%.1f GFLOP/s "
               "(%d timed steps after %d warm-up)\n",
               name, cfg.num_hidden_layers, cfg.hidden_size, cfg.num_attention_heads, cfg.intermediate_size, batch,
               seq, nthreads, rec == RECOMPUTE_LAYER ? ", recompute layer" : "", openblas_get_corename(), ms, 1e3 * best, 1e3 * phase[0] / steps, 1e3 * phase[1] / steps,
               1e3 * phase[2] / steps, 1e3 * cpu_total / steps, eps, gflops, steps, warmup);
        char kern[512];
        printf("  kernels: %s\n", cpu_kernels_describe(kern, sizeof kern));
        if (lens)
            printf("  windows from %s, packing %s: %.0f real tokens per step of %zu padded\n", lengths_path, packing,
                   real_tokens / steps, BT);
    }
done:
    optim_free(opt);
    bert_model_free(m);
    if (be.i) backend_free(&be);
    free(times);
    free(ints);
    free(lens);
    free(host);
    param_table_free(&table);
    return rc;
}
