/* bertc plan: the memory planner's prediction (model/memory.h) for training
 * a model on the CUDA backend: the bytes of parameters, gradients,
 * optimizer state, activations and workspace per micro-batch size, and the
 * largest micro-batch that fits a GPU (--gpu-mem, or the GPU this machine
 * has). Needs no GPU: the figures are arithmetic on the model's tables.
 * With --pipeline-stages and --shard-optimizer --ranks, the same per stage
 * and rank (model/memory.h's layouts); --format markdown prints a table row
 * per stage, for comparing layouts; --json one GPU's plan for scripts. */
#include "backend/select.h"
#include "cli/options.h"
#include "core/args.h"
#include "core/err.h"
#include "core/fileio.h"
#include "core/sbuf.h"
#include "model/config.h"
#include "model/memory.h"
#include "train/pipeline.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

const char cmd_plan_summary[] = "predict GPU memory for training: per micro-batch, and the largest that fits (also per pipeline stage, with a sharded optimizer)";

#define PLAN_MAX_MICRO (1 << 20)

static const char plan_usage[] =
    "bertc plan --model DIR|--config NAME --seq N [--precision P] [--recompute none|layer] [--gpu-mem SIZE] "
    "[--batch N] [--pipeline-stages S [--pipeline-split LIST]] [--shard-optimizer --ranks D] "
    "[--format text|markdown] [--json]";

static int load_config(const char *model, const char *name, int vocab_size, int vocab_seen, bert_config *cfg)
{
    if ((model != NULL) == (name != NULL))
        return err_set(ERR_INPUT, "plan: give one of --model DIR or --config NAME");
    if (name) {
        if (!config_is_named(name))
            return err_set(ERR_INPUT, "--config %s: not a named config (tiny, mini, small, minilm, base, large)", name);
        return config_named(name, vocab_size, cfg);
    }
    if (vocab_seen) return err_set(ERR_INPUT, "--vocab-size goes with --config; --model reads it from config.json");
    char p[PATH_MAX];
    const char *file = model;
    if (path_is_dir(model)) file = path_join(p, sizeof p, model, "config.json");
    if (!path_exists(file)) return err_set(ERR_INPUT, "--model %s: no config.json there", model);
    return config_load(file, cfg);
}

static void print_row(int micro, const memory_answer *p)
{
    char a[32], w[32], t[32];
    printf("  %11d  %15lld B %11s  %13lld B %11s  %15lld B %11s\n", micro, (long long)p->activations,
           memory_fmt_bytes(a, sizeof a, p->activations), (long long)p->workspace,
           memory_fmt_bytes(w, sizeof w, p->workspace), (long long)p->total, memory_fmt_bytes(t, sizeof t, p->total));
}

/* The tables' head of the activations: their type as the plan counts it (memory_act_bytes). */
static const char *act_head(precision_kind prec)
{
    return memory_act_bytes(prec) == 2 ? "activations (16-bit)" : "activations (fp32)";
}

/* --packing varlen: the plan of packed micro-batches of `batch` windows, by
 * real tokens (--max-tokens, default batch x seq), and with a card the
 * largest --max-tokens that fits. */
static int plan_packed(const memory_query *one, int batch, int64_t max_tokens, int64_t card)
{
    char b1[32], b2[32];
    int seq = one->T;
    memory_query q = *one;
    q.micro = batch;
    q.max_tokens = max_tokens > 0 ? max_tokens : (int64_t)batch * seq;
    int64_t mt = q.max_tokens;
    memory_answer p;
    int rc = memory_plan(&q, &p);
    if (rc) return err_wrap(rc, "plan");
    printf("packed (--packing varlen): micro-batches of up to %d windows and %lld real tokens\n", batch,
           (long long)mt);
    printf("  max tokens       %-34sworkspace                        total\n", act_head(q.prec));
    for (q.max_tokens = seq; q.max_tokens < mt; q.max_tokens *= 2)
        if (memory_plan(&q, &p) == 0) print_row((int)q.max_tokens, &p);
    q.max_tokens = mt;
    memory_plan(&q, &p);
    print_row((int)mt, &p);
    err_clear();
    if (card <= 0) return 0;
    int64_t budget = memory_budget_for_card(card);
    int64_t best = memory_largest(&q, MEMORY_FIT_TOKENS, budget, (int64_t)batch * seq);
    if (best < 1) printf("largest --max-tokens for %s: none fits\n", memory_fmt_bytes(b1, sizeof b1, card));
    else {
        q.max_tokens = best;
        memory_plan(&q, &p);
        printf("largest --max-tokens for %s and %d windows: %lld (peak %s)\n", memory_fmt_bytes(b1, sizeof b1, card),
               batch, (long long)best, memory_fmt_bytes(b2, sizeof b2, p.total));
    }
    return 0;
}

/* "emb + 0-5", "6-11 + qa": what a stage holds. */
static void stage_desc(char *buf, size_t cap, const memory_answer *st)
{
    snprintf(buf, cap, "%s%d-%d%s", st->embeddings ? "emb + " : "", st->layer_first, st->layer_end - 1,
             st->qa_head ? " + qa" : "");
}

/* "2 stages, sharded /4, recompute" (or "1 GPU"): the layout in a table row. */
static void layout_desc(char *buf, size_t cap, const memory_query *lay)
{
    size_t n = 0;
    buf[0] = 0;
    if (lay->stages > 1) n += (size_t)snprintf(buf + n, cap - n, "%d stages", lay->stages);
    if (lay->shard_ranks > 1 && n < cap)
        n += (size_t)snprintf(buf + n, cap - n, "%ssharded /%d", n ? ", " : "", lay->shard_ranks);
    if (lay->recompute == RECOMPUTE_LAYER && n < cap)
        n += (size_t)snprintf(buf + n, cap - n, "%srecompute", n ? ", " : "");
    if (!n) snprintf(buf, cap, "1 GPU");
}

/* --pipeline-stages S: the split given (--pipeline-split) or the one
 * bertc train would choose at micro-batches of q's (memory_split). */
static int plan_split(const memory_query *q, const char *given, int *split)
{
    int n, rc, S = q->stages;
    if (given && ((rc = cli_parse_pipeline_split("plan", given, S, split, &n)) ||
                  (rc = pipe_split_check(split, S, q->cfg->num_hidden_layers, "plan --pipeline-split"))))
        return rc;
    if (!given && (rc = memory_split(q, split))) return err_wrap(rc, "plan");
    return 0;
}

/* The split's line: its boundaries, where they came from, and each
 * stage's share of a window's FLOPs. */
static void print_split(const bert_config *cfg, int seq, int micro, int S, const int *split, int given)
{
    double all = bert_stage_flops(cfg, seq, 0, cfg->num_hidden_layers, 1, 1);
    printf("split: ");
    for (int s = 0; s <= S; s++) printf("%s%d", s ? "," : "", split[s]);
    if (given) printf(" (--pipeline-split)");
    else printf(" (bertc train --pipeline-stages %d's default at micro-batch %d: the smallest largest stage time, then "
                "the smallest largest stage peak)", S, micro);
    printf("; FLOPs per stage:");
    for (int s = 0; s < S; s++)
        printf(" %.1f %%", 100.0 * bert_stage_flops(cfg, seq, split[s], split[s + 1], s == 0, s == S - 1) / all);
    printf("\n");
}

/* Stage s of lay at micro-batches of `micro`: 0, or the planner's error. */
static int plan_stage(const memory_query *lay, int micro, int s, memory_answer *st)
{
    memory_query q = *lay;
    q.micro = micro;
    q.stage = s;
    return memory_plan(&q, st);
}

/* The head of the layout's text: what the layout is, and per stage what it
 * holds and its parameters, gradients and Adam state. */
static void print_layout_stages(const memory_query *lay)
{
    char b1[32], b2[32], b3[32];
    int S = lay->stages, D = lay->shard_ranks;
    if (S > 1)
        printf("layout: %d pipeline stages (the 1F1B schedule: stage s keeps the activations of %d - s micro-batches "
               "in flight)%s", S, S, D > 1 ? "; " : "\n");
    if (D > 1)
        printf("%sAdamW sharded over %d data-parallel ranks%s (ZeRO stage 1: each rank keeps the moments of 1/%d of "
               "the parameters; weights and gradients whole)\n", S > 1 ? "" : "layout: ", D, S > 1 ? " per stage" : "",
               D);
    printf("predicted peak of what bertc allocates on the CUDA backend, per stage and rank (the CUDA context comes on "
           "top):\n");
    for (int s = 0; s < S; s++) {
        memory_answer st;
        plan_stage(lay, 1, s, &st);
        printf("  stage %d: %slayers %d-%d%s, %d micro-batch%s in flight\n", s, st.embeddings ? "embeddings + " : "",
               st.layer_first, st.layer_end - 1, st.qa_head ? " + QA head" : "", st.in_flight,
               st.in_flight > 1 ? "es" : "");
        printf("    parameters   %lld elements\n", (long long)st.n_params);
        printf("    weights      %15lld B %11s  fp32 master copy\n", (long long)st.params,
               memory_fmt_bytes(b1, sizeof b1, st.params));
        printf("    gradients    %15lld B %11s  fp32\n", (long long)st.grads,
               memory_fmt_bytes(b2, sizeof b2, st.grads));
        if (D > 1) {
            memory_query unsharded = *lay;
            unsharded.shard_ranks = 1;
            memory_answer su;
            plan_stage(&unsharded, 1, s, &su);
            printf("    optimizer    %15lld B %11s  AdamW m and v, fp32: the most one of %d ranks keeps (unsharded %s)\n",
                   (long long)st.optimizer, memory_fmt_bytes(b3, sizeof b3, st.optimizer), D,
                   memory_fmt_bytes(b1, sizeof b1, su.optimizer));
        } else {
            printf("    optimizer    %15lld B %11s  AdamW m and v, fp32\n", (long long)st.optimizer,
                   memory_fmt_bytes(b3, sizeof b3, st.optimizer));
        }
    }
}

/* --pipeline-stages / --shard-optimizer: the plan of each stage, per
 * micro-batch, and the largest micro-batch every stage fits. */
static void plan_layout_text(const memory_query *lay, int batch, int64_t card, const char *where)
{
    char b1[32], b2[32];
    int S = lay->stages;
    print_layout_stages(lay);
    printf("  micro-batch");
    for (int s = 0; s < S; s++) printf("  stage %d activations     stage %d total", s, s);
    printf("\n");
    for (int m = 1;; m *= 2) {
        int mb = m < batch ? m : batch;
        printf("  %11d", mb);
        for (int s = 0; s < S; s++) {
            memory_answer st;
            if (plan_stage(lay, mb, s, &st) != 0) {
                printf("  too large (%s)", err_msg());
                err_clear();
                m = batch; /* ends the loop */
                break;
            }
            printf("  %20s  %15s", memory_fmt_bytes(b1, sizeof b1, st.activations),
                   memory_fmt_bytes(b2, sizeof b2, st.total));
        }
        printf("\n");
        if (mb >= batch) break;
    }
    if (card <= 0) {
        printf("largest micro-batch: no GPU to size it for; give --gpu-mem SIZE\n");
        return;
    }
    int64_t budget = memory_budget_for_card(card);
    int best = (int)memory_largest(lay, MEMORY_FIT_MICRO, budget, PLAN_MAX_MICRO);
    if (best < 1) {
        printf("largest micro-batch for %s: none fits (the budget is %s)\n", where,
               memory_fmt_bytes(b1, sizeof b1, budget));
        return;
    }
    printf("largest micro-batch for %s: %d (peak", where, best);
    for (int s = 0; s < S; s++) {
        memory_answer st;
        plan_stage(lay, best, s, &st);
        printf("%s stage %d %s", s ? "," : "", s, memory_fmt_bytes(b1, sizeof b1, st.total));
    }
    printf(" of a %s budget)\n", memory_fmt_bytes(b1, sizeof b1, budget));
}

/* --format markdown: one table row per stage at the largest micro-batch
 * that fits the card (at micro-batch 1, and "-", without one). */
static void plan_markdown(const char *model, const memory_query *lay, int64_t card)
{
    char b[6][32], lay_s[64], d[64];
    int best = card > 0 ? (int)memory_largest(lay, MEMORY_FIT_MICRO, memory_budget_for_card(card), PLAN_MAX_MICRO)
                        : 0;
    layout_desc(lay_s, sizeof lay_s, lay);
    printf("| model | T | layout | stage: layers | parameters | weights + gradients | Adam m, v (per rank) | "
           "activations | workspace | peak | largest micro-batch |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int s = 0; s < lay->stages; s++) {
        memory_answer st;
        plan_stage(lay, best > 0 ? best : 1, s, &st);
        stage_desc(d, sizeof d, &st);
        char best_s[32];
        if (card <= 0) snprintf(best_s, sizeof best_s, "- (at 1: no --gpu-mem)");
        else if (best < 1) snprintf(best_s, sizeof best_s, "none fits");
        else snprintf(best_s, sizeof best_s, "%d", best);
        printf("| %s | %d | %s | %d: %s | %.1f M | %s | %s | %s | %s | %s | %s |\n", model, lay->T, lay_s, s, d,
               (double)st.n_params / 1e6, memory_fmt_bytes(b[0], sizeof b[0], st.params + st.grads),
               memory_fmt_bytes(b[1], sizeof b[1], st.optimizer), memory_fmt_bytes(b[2], sizeof b[2], st.activations),
               memory_fmt_bytes(b[3], sizeof b[3], st.workspace), memory_fmt_bytes(b[4], sizeof b[4], st.total),
               best_s);
    }
}

/* The layout options: --format, --shard-optimizer with --ranks, --pipeline-stages, and what --packing
 * varlen does not plan. */
static int check_layout(const char *format, int shard, int ranks_seen, int ranks, int stages, const bert_config *cfg,
                        int packed)
{
    int markdown = !strcmp(format, "markdown");
    if (!markdown && strcmp(format, "text"))
        return err_set(ERR_INPUT, "plan --format %s: expected text or markdown", format);
    if (shard && (!ranks_seen || ranks < 2))
        return err_set(ERR_INPUT, "plan --shard-optimizer: give --ranks D, D >= 2 (the data-parallel ranks that share "
                                  "the optimizer state)");
    if (ranks_seen && !shard)
        return err_set(ERR_INPUT, "plan --ranks %d: goes with --shard-optimizer (unsharded, each rank needs what one GPU "
                                  "alone does)", ranks);
    if (stages > cfg->num_hidden_layers)
        return err_set(ERR_INPUT, "plan --pipeline-stages %d: more stages than the model's %d layers", stages,
                       cfg->num_hidden_layers);
    if (packed && (stages > 1 || shard || markdown))
        return err_set(ERR_INPUT, "plan --packing varlen: planned for one GPU in text only (not with "
                                  "--pipeline-stages, --shard-optimizer or --format markdown)");
    return 0;
}

/* One GPU: the plan per micro-batch, packed micro-batches, and the
 * largest micro-batch that fits the card (p1: micro-batch 1's plan). */
static int plan_single_text(const memory_query *one, int batch, const memory_answer *p1, int packed, int max_tokens,
                            int64_t card, const char *where, const char *why)
{
    char b1[32], b2[32], b3[32];
    int rc;
    printf("predicted peak of what bertc allocates on the CUDA backend (the CUDA context comes on top):\n");
    printf("  parameters   %lld elements\n", (long long)p1->n_params);
    printf("  weights      %15lld B %11s  fp32 master copy\n", (long long)p1->params,
           memory_fmt_bytes(b1, sizeof b1, p1->params));
    printf("  gradients    %15lld B %11s  fp32\n", (long long)p1->grads, memory_fmt_bytes(b2, sizeof b2, p1->grads));
    printf("  optimizer    %15lld B %11s  AdamW m and v, fp32\n", (long long)p1->optimizer,
           memory_fmt_bytes(b3, sizeof b3, p1->optimizer));
    printf("  micro-batch      %-34sworkspace                        total\n", act_head(one->prec));
    memory_query q = *one;
    for (int m = 1;; m *= 2) {
        int mb = m < batch ? m : batch;
        memory_answer p;
        q.micro = mb;
        if (memory_plan(&q, &p) != 0) {
            printf("  %11d  too large for the model core (%s)\n", mb, err_msg());
            err_clear();
            break;
        }
        print_row(mb, &p);
        if (mb == batch || m > batch / 2) {
            q.micro = batch;
            if (mb != batch && memory_plan(&q, &p) == 0) print_row(batch, &p);
            err_clear();
            break;
        }
    }

    if (packed && (rc = plan_packed(one, batch, max_tokens, card))) return rc;
    if (card <= 0) {
        printf("largest micro-batch: no GPU to size it for (%s); give --gpu-mem SIZE\n", why);
        return 0;
    }
    int64_t budget = memory_budget_for_card(card);
    int best = (int)memory_largest(one, MEMORY_FIT_MICRO, budget, PLAN_MAX_MICRO);
    char reserve[32];
    memory_fmt_bytes(reserve, sizeof reserve, MEMORY_CONTEXT_RESERVE);
    if (best < 1) {
        printf("largest micro-batch for %s: none fits (micro-batch 1 needs %s; the budget is %s after %s for the "
               "CUDA context)\n",
               where, memory_fmt_bytes(b2, sizeof b2, p1->total), memory_fmt_bytes(b3, sizeof b3, budget), reserve);
        return 0;
    }
    memory_answer pb;
    q.micro = best;
    memory_plan(&q, &pb);
    printf("largest micro-batch for %s: %d (peak %s of a %s budget: %s kept for the CUDA context)\n", where, best,
           memory_fmt_bytes(b2, sizeof b2, pb.total), memory_fmt_bytes(b3, sizeof b3, budget), reserve);
    return 0;
}

/* --json: one GPU's plan as one JSON object on one line, for scripts (the
 * bench's PyTorch sides take the model and the FLOPs from it): the model,
 * the bytes by kind, FLOPs per window, the plan per micro-batch size (the
 * text's rows) and the largest micro-batch that fits the card (null
 * without one). */
static void plan_json(const char *config, const char *model, const memory_query *one, int batch, int64_t card)
{
    const bert_config *cfg = one->cfg;
    sbuf b = {0};
    sb_puts(&b, "{\"config\": ");
    sb_json_string(&b, config ? config : model, SB_JSON_UNICODE);
    sb_printf(&b, ", \"layers\": %d, \"hidden\": %d, \"heads\": %d, \"intermediate\": %d, \"vocab\": %d, "
                  "\"seq\": %d, \"precision\": \"%s\", \"recompute\": \"%s\"",
              cfg->num_hidden_layers, cfg->hidden_size, cfg->num_attention_heads, cfg->intermediate_size,
              cfg->vocab_size, one->T, one->prec == PREC_AUTO ? "auto" : select_precision_name(one->prec),
              memory_recompute_name(one->recompute));
    memory_query q = *one;
    memory_answer p;
    q.micro = 1;
    memory_plan(&q, &p);
    sb_printf(&b, ", \"params\": %lld, \"weights_bytes\": %lld, \"gradients_bytes\": %lld, \"optimizer_bytes\": %lld",
              (long long)p.n_params, (long long)p.params, (long long)p.grads, (long long)p.optimizer);
    sb_printf(&b, ", \"activation_bytes_per_window\": %lld, \"flops_per_example_step\": %.0f, "
                  "\"flops_per_example_forward\": %.0f, \"flops_formula\": \"6*(L*(4C^2+2CI)+2C)*T + 12*L*T^2*C "
                  "per window and step, a third of it forward\"",
              (long long)p.activations, bert_flops(cfg, 1, one->T), bert_forward_flops(cfg, 1, one->T));
    sb_puts(&b, ", \"micro_batches\": [");
    for (int m = 1, first = 1;; m *= 2, first = 0) {
        q.micro = m < batch ? m : batch;
        if (memory_plan(&q, &p) != 0) break;
        sb_printf(&b, "%s{\"micro\": %d, \"activations_bytes\": %lld, \"workspace_bytes\": %lld, \"total_bytes\": %lld}",
                  first ? "" : ", ", q.micro, (long long)p.activations, (long long)p.workspace, (long long)p.total);
        if (q.micro >= batch) break;
    }
    err_clear();
    int best = card > 0 ? (int)memory_largest(one, MEMORY_FIT_MICRO, memory_budget_for_card(card), PLAN_MAX_MICRO) : 0;
    if (card > 0)
        sb_printf(&b, "], \"gpu_mem_bytes\": %lld, \"budget_bytes\": %lld, \"largest_micro_batch\": %d}\n",
                  (long long)card, (long long)memory_budget_for_card(card), best);
    else
        sb_puts(&b, "], \"gpu_mem_bytes\": null, \"budget_bytes\": null, \"largest_micro_batch\": null}\n");
    fputs(b.p, stdout);
    sb_free(&b);
}

/* --precision as the text's head line says it: auto resolved on this
 * machine's GPU (have_gpu) to *eff. */
static void describe_precision(precision_kind prec, int have_gpu, int major, int minor, precision_kind *eff,
                               char *desc, size_t cap)
{
    *eff = prec;
    if (prec == PREC_AUTO && have_gpu) {
        *eff = select_auto_precision(major, minor);
        snprintf(desc, cap, "%s (auto on compute %d.%d)", select_precision_name(*eff), major, minor);
    } else if (prec == PREC_AUTO) {
        snprintf(desc, cap, "auto (bf16 or fp16: the same memory)");
    } else {
        snprintf(desc, cap, "%s", select_precision_name(prec));
    }
}

int cmd_plan(int argc, char **argv)
{
    const char *model = NULL, *config = NULL, *prec_s = "auto", *rec_s = "none";
    int seq = 0, seq_seen = 0, batch = 32, vocab_size = 30522, vocab_seen = 0, gpu = 0;
    int64_t gpu_mem = 0;
    int gpu_mem_seen = 0;
    const char *packing = "none";
    int max_tokens = 0, max_tokens_seen = 0;
    int stages = 1, shard = 0, ranks = 1, ranks_seen = 0;
    const char *format = "text", *split_s = NULL;
    int split[PIPE_MAX_STAGES + 1], json = 0;
    const arg_spec specs[] = {
        {"model", ARG_STR, &model, "DIR", "a model dir (its config.json)", .required = 0},
        {"config", ARG_STR, &config, "NAME", "a named config: tiny, mini, small, minilm, base, large", .required = 0},
        {"vocab-size", ARG_INT, &vocab_size, "N", "vocabulary size with --config", .min = 1,
         .max = 100000000, .seen = &vocab_seen},
        {"seq", ARG_INT, &seq, "N", "sequence length (--max-seq-length)", .min = 1, .max = 1 << 20, .required = 1,
         .seen = &seq_seen},
        {"precision", ARG_STR, &prec_s, "P", "auto|fp32|tf32|fp16|bf16", .required = 0},
        {"recompute", ARG_STR, &rec_s, "MODE", "none|layer", .required = 0},
        {"gpu-mem", ARG_SIZE, &gpu_mem, "SIZE", "the card's memory, e.g. 16GiB (default: this machine's GPU)",
         .seen = &gpu_mem_seen},
        {"batch", ARG_INT, &batch, "N", "micro-batch sizes listed: powers of two up to N", .min = 1,
         .max = PLAN_MAX_MICRO},
        {"gpu", ARG_INT, &gpu, "N", "the GPU whose memory sizes the largest micro-batch", .min = 0, .max = 1023},
        {"packing", ARG_STR, &packing, "P", "none|varlen (varlen: also plan packed micro-batches of --batch windows, "
         "by tokens)", .required = 0},
        {"max-tokens", ARG_INT, &max_tokens, "N", "with --packing varlen: real tokens per micro-batch (default batch x seq)",
         .min = 1, .max = 1 << 30, .seen = &max_tokens_seen},
        {"pipeline-stages", ARG_INT, &stages, "S", "pipeline model parallelism: S stages, stage 0 the embeddings and "
         "the first layers, the last the rest and the QA head; stage s keeps S - s micro-batches' activations (1F1B)",
         .min = 1, .max = PIPE_MAX_STAGES},
        {"pipeline-split", ARG_STR, &split_s, "LIST", "with --pipeline-stages S: the S + 1 layer boundaries, e.g. "
         "0,5,12 (default: bertc train's: the smallest largest stage time, then the smallest largest stage peak at "
         "micro-batch --batch)", .min = 0},
        {"shard-optimizer", ARG_FLAG, &shard, NULL, "the AdamW state sharded over --ranks data-parallel ranks (train "
         "--shard-optimizer)", .min = 0},
        {"ranks", ARG_INT, &ranks, "D", "with --shard-optimizer: the ranks (GPUs per stage) sharing the optimizer state",
         .min = 1, .max = 1 << 20, .seen = &ranks_seen},
        {"format", ARG_STR, &format, "F", "text|markdown (markdown: one table row per stage at the largest "
         "micro-batch)", .required = 0},
        {"json", ARG_FLAG, &json, NULL, "one GPU's plan as one JSON object (the model, bytes by kind, FLOPs per window, "
         "each micro-batch, the largest that fits)", .min = 0},
        {0},
    };
    int rc = args_parse("plan", plan_usage, specs, argc, argv, NULL, NULL);
    if (rc) return rc == ARGS_HELP ? 0 : rc;
    precision_kind prec;
    recompute_kind rec;
    bert_config cfg;
    packing_kind pack;
    if ((rc = cli_parse_precision("plan", prec_s, &prec)) || (rc = cli_parse_recompute("plan", rec_s, &rec)) ||
        (rc = load_config(model, config, vocab_size, vocab_seen, &cfg)))
        return rc;
    if (gpu_mem_seen && gpu_mem <= 0) return err_set(ERR_INPUT, "--gpu-mem: must be more than 0 bytes");
    if ((rc = cli_parse_packing("plan", packing, &pack))) return rc;
    if (max_tokens_seen && pack != PACKING_VARLEN)
        return err_set(ERR_INPUT, "plan: --max-tokens needs --packing varlen");
    int packed = pack == PACKING_VARLEN;
    int markdown = !strcmp(format, "markdown");
    if ((rc = check_layout(format, shard, ranks_seen, ranks, stages, &cfg, packed))) return rc;
    if (json && (stages > 1 || shard || packed || markdown))
        return err_set(ERR_INPUT, "plan --json: one GPU's padded plan only (not with --pipeline-stages, "
                                  "--shard-optimizer, --packing varlen or --format markdown)");
    int layered = stages > 1 || shard;
    if (max_tokens_seen && (max_tokens < seq || (int64_t)max_tokens > (int64_t)batch * seq))
        return err_set(ERR_INPUT, "plan: --max-tokens %d must be in %d..%lld (--seq .. --batch x --seq)", max_tokens,
                       seq, (long long)batch * seq);

    /* Without --gpu-mem, the GPU this machine has (if any) sets the budget
     * and what --precision auto means. */
    char name[128] = "", why[256] = "";
    int major = 0, minor = 0, have_gpu = 0;
    int64_t total = 0;
    if (!gpu_mem_seen || prec == PREC_AUTO)
        have_gpu = select_probe_cuda(gpu, name, sizeof name, &major, &minor, &total, why, sizeof why);
    precision_kind eff;
    char prec_desc[96];
    describe_precision(prec, have_gpu, major, minor, &eff, prec_desc, sizeof prec_desc);

    memory_query lay = {.cfg = &cfg, .micro = 1, .T = seq, .prec = eff, .recompute = rec, .stages = stages,
                        .shard_ranks = shard ? ranks : 1};
    memory_answer p1;
    if ((rc = memory_plan(&lay, &p1))) return rc;
    char b1[32];
    int64_t card = gpu_mem_seen ? gpu_mem : have_gpu ? total : 0;
    char where[192];
    if (gpu_mem_seen) snprintf(where, sizeof where, "%s", memory_fmt_bytes(b1, sizeof b1, card));
    else snprintf(where, sizeof where, "GPU %d (%s, %s)", gpu, name, memory_fmt_bytes(b1, sizeof b1, card));
    lay.micro = batch; /* the default split is chosen for --batch */
    if ((stages > 1 || split_s) && (rc = plan_split(&lay, split_s, split))) return rc;
    if (stages > 1) lay.split = split;
    if (markdown) {
        plan_markdown(config ? config : model, &lay, card);
        return 0;
    }
    if (json) {
        plan_json(config, model, &lay, batch, card);
        return 0;
    }
    printf("bertc plan: %s%s (L%d H%d A%d I%d, vocab %d), sequence %d, precision %s, recompute %s\n",
           config ? "config " : "model ", config ? config : model, cfg.num_hidden_layers, cfg.hidden_size,
           cfg.num_attention_heads, cfg.intermediate_size, cfg.vocab_size, seq, prec_desc, memory_recompute_name(rec));
    if (stages > 1) print_split(&cfg, seq, batch, stages, split, split_s != NULL);
    if (layered) {
        plan_layout_text(&lay, batch, card, where);
        return 0;
    }
    return plan_single_text(&lay, batch, &p1, packed, max_tokens, card, where, why);
}
