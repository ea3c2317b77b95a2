/* bertc plan: the memory planner's prediction (model/memory.h) for training
 * a model on the CUDA backend: the bytes of parameters, gradients,
 * optimizer state, activations and workspace per micro-batch size, and the
 * largest micro-batch that fits a GPU (--gpu-mem, or the GPU this machine
 * has). Needs no GPU: the figures are arithmetic on the model's tables. */
#include "backend/select.h"
#include "cli/options.h"
#include "core/args.h"
#include "core/err.h"
#include "core/fileio.h"
#include "model/config.h"
#include "model/memory.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

const char cmd_plan_summary[] = "predict GPU memory for training: per micro-batch, and the largest that fits";

#define PLAN_MAX_MICRO (1 << 20)

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

static void print_row(int micro, const memory_plan *p)
{
    char a[32], w[32], t[32];
    printf("  %11d  %15lld B %11s  %13lld B %11s  %15lld B %11s\n", micro, (long long)p->activations,
           memory_fmt_bytes(a, sizeof a, p->activations), (long long)p->workspace,
           memory_fmt_bytes(w, sizeof w, p->workspace), (long long)p->total, memory_fmt_bytes(t, sizeof t, p->total));
}

/* --packing varlen: the plan of packed micro-batches of `batch` windows, by
 * real tokens (--max-tokens, default batch x seq), and with a card the
 * largest --max-tokens that fits. */
static int plan_packed(const bert_config *cfg, int batch, int seq, int64_t max_tokens, precision_kind eff,
                       recompute_kind rec, int64_t card)
{
    char b1[32], b2[32];
    int64_t mt = max_tokens > 0 ? max_tokens : (int64_t)batch * seq;
    memory_plan p;
    int rc = memory_plan_compute_tokens(cfg, batch, seq, mt, eff, rec, &p);
    if (rc) return err_wrap(rc, "plan");
    printf("packed (--packing varlen): micro-batches of up to %d windows and %lld real tokens\n", batch,
           (long long)mt);
    printf("  max tokens       activations (fp32)                workspace                        total\n");
    for (int64_t t = seq; t < mt; t *= 2)
        if (memory_plan_compute_tokens(cfg, batch, seq, t, eff, rec, &p) == 0) print_row((int)t, &p);
    memory_plan_compute_tokens(cfg, batch, seq, mt, eff, rec, &p);
    print_row((int)mt, &p);
    err_clear();
    if (card <= 0) return 0;
    int64_t budget = memory_budget_for_card(card);
    int64_t best = memory_largest_tokens(cfg, batch, seq, eff, rec, budget, (int64_t)batch * seq);
    if (best < 1) printf("largest --max-tokens for %s: none fits\n", memory_fmt_bytes(b1, sizeof b1, card));
    else {
        memory_plan_compute_tokens(cfg, batch, seq, best, eff, rec, &p);
        printf("largest --max-tokens for %s and %d windows: %lld (peak %s)\n", memory_fmt_bytes(b1, sizeof b1, card),
               batch, (long long)best, memory_fmt_bytes(b2, sizeof b2, p.total));
    }
    return 0;
}

int cmd_plan(int argc, char **argv)
{
    const char *model = NULL, *config = NULL, *prec_s = "auto", *rec_s = "none";
    int seq = 0, seq_seen = 0, batch = 32, vocab_size = 30522, vocab_seen = 0, gpu = 0;
    int64_t gpu_mem = 0;
    int gpu_mem_seen = 0;
    const char *packing = "none";
    int max_tokens = 0, max_tokens_seen = 0;
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
        {0},
    };
    int rc = args_parse("plan",
                        "bertc plan --model DIR|--config NAME --seq N [--precision P] [--recompute none|layer] "
                        "[--gpu-mem SIZE] [--batch N]",
                        specs, argc, argv, NULL, NULL);
    if (rc == ARGS_HELP) return 0;
    if (rc) return rc;
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
    precision_kind eff = prec;
    char prec_desc[96];
    if (prec == PREC_AUTO && have_gpu) {
        eff = select_auto_precision(major, minor);
        snprintf(prec_desc, sizeof prec_desc, "%s (auto on compute %d.%d)", select_precision_name(eff), major, minor);
    } else if (prec == PREC_AUTO) {
        snprintf(prec_desc, sizeof prec_desc, "auto (bf16 or fp16: the same memory)");
    } else {
        snprintf(prec_desc, sizeof prec_desc, "%s", select_precision_name(prec));
    }

    memory_plan p1;
    if ((rc = memory_plan_compute(&cfg, 1, seq, eff, rec, &p1))) return rc;
    char b1[32], b2[32], b3[32];
    printf("bertc plan: %s%s (L%d H%d A%d I%d, vocab %d), sequence %d, precision %s, recompute %s\n",
           config ? "config " : "model ", config ? config : model, cfg.num_hidden_layers, cfg.hidden_size,
           cfg.num_attention_heads, cfg.intermediate_size, cfg.vocab_size, seq, prec_desc, memory_recompute_name(rec));
    printf("predicted peak of what bertc allocates on the CUDA backend (the CUDA context comes on top):\n");
    printf("  parameters   %lld elements\n", (long long)p1.n_params);
    printf("  weights      %15lld B %11s  fp32 master copy\n", (long long)p1.params,
           memory_fmt_bytes(b1, sizeof b1, p1.params));
    printf("  gradients    %15lld B %11s  fp32\n", (long long)p1.grads, memory_fmt_bytes(b2, sizeof b2, p1.grads));
    printf("  optimizer    %15lld B %11s  AdamW m and v, fp32\n", (long long)p1.optimizer,
           memory_fmt_bytes(b3, sizeof b3, p1.optimizer));
    printf("  micro-batch      activations (fp32)                workspace                        total\n");
    for (int m = 1;; m *= 2) {
        int mb = m < batch ? m : batch;
        memory_plan p;
        if (memory_plan_compute(&cfg, mb, seq, eff, rec, &p) != 0) {
            printf("  %11d  too large for the model core (%s)\n", mb, err_msg());
            err_clear();
            break;
        }
        print_row(mb, &p);
        if (mb == batch || m > batch / 2) {
            if (mb != batch && memory_plan_compute(&cfg, batch, seq, eff, rec, &p) == 0) print_row(batch, &p);
            err_clear();
            break;
        }
    }

    int64_t card = gpu_mem_seen ? gpu_mem : have_gpu ? total : 0;
    if (pack == PACKING_VARLEN && (rc = plan_packed(&cfg, batch, seq, max_tokens, eff, rec, card))) return rc;
    if (card <= 0) {
        printf("largest micro-batch: no GPU to size it for (%s); give --gpu-mem SIZE\n", why);
        return 0;
    }
    char where[192];
    if (gpu_mem_seen) snprintf(where, sizeof where, "%s", memory_fmt_bytes(b1, sizeof b1, card));
    else snprintf(where, sizeof where, "GPU %d (%s, %s)", gpu, name, memory_fmt_bytes(b1, sizeof b1, card));
    int64_t budget = memory_budget_for_card(card);
    int best = memory_largest_micro(&cfg, seq, eff, rec, budget, PLAN_MAX_MICRO);
    char reserve[32];
    memory_fmt_bytes(reserve, sizeof reserve, MEMORY_CONTEXT_RESERVE);
    if (best < 1) {
        printf("largest micro-batch for %s: none fits (micro-batch 1 needs %s; the budget is %s after %s for the "
               "CUDA context)\n",
               where, memory_fmt_bytes(b2, sizeof b2, p1.total), memory_fmt_bytes(b3, sizeof b3, budget), reserve);
        return 0;
    }
    memory_plan pb;
    memory_plan_compute(&cfg, best, seq, eff, rec, &pb);
    printf("largest micro-batch for %s: %d (peak %s of a %s budget: %s kept for the CUDA context)\n", where, best,
           memory_fmt_bytes(b2, sizeof b2, pb.total), memory_fmt_bytes(b3, sizeof b3, budget), reserve);
    return 0;
}
