/* The memory planner: its figures against the tables the allocations come
 * from and against sums worked out by hand, the largest micro-batch against
 * its definition, and bad or huge sizes. */
#include "testutil.h"

#include "backend/cuda/cuda_ws.h"
#include "core/err.h"
#include "model/bert.h"
#include "model/config.h"
#include "model/memory.h"
#include "model/params.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Parameters of BertForQuestionAnswering by the formula, not the table. */
static int64_t param_formula(const bert_config *c)
{
    int64_t C = c->hidden_size, I = c->intermediate_size, L = c->num_hidden_layers;
    int64_t emb = (int64_t)c->vocab_size * C + (int64_t)c->max_position_embeddings * C + (int64_t)c->type_vocab_size * C +
                  2 * C;
    int64_t layer = 4 * (C * C + C) + 2 * C + (I * C + I) + (C * I + C) + 2 * C;
    return emb + L * layer + 2 * C + 2;
}

static void check_config(const char *name, int vocab, int T)
{
    bert_config cfg;
    CHECK(config_named(name, vocab, &cfg) == 0, "%s", err_msg());
    memory_plan p;
    int rc = memory_plan_compute(&cfg, 4, T, PREC_BF16, RECOMPUTE_NONE, &p);
    CHECK(rc == 0, "%s: %s", name, err_msg());
    int64_t n = param_formula(&cfg);
    bert_model_opts mo = {.cfg = &cfg, .max_B = 4, .T = T};
    printf("%s T=%d: %lld parameters (formula %lld), activations %lld B (bert.c %zu B), workspace %lld B, total %lld B\n",
           name, T, (long long)p.n_params, (long long)n, (long long)p.activations, bert_activation_bytes(&mo),
           (long long)p.workspace, (long long)p.total);
    CHECK(p.n_params == n, "%s: %lld parameters, formula says %lld", name, (long long)p.n_params, (long long)n);
    CHECK(p.params == 4 * n && p.grads == 4 * n && p.optimizer == 8 * n, "%s: fp32 blocks", name);
    CHECK(p.activations == (int64_t)bert_activation_bytes(&mo), "%s: activations differ from bert.c's", name);
    CHECK(p.total == p.params + p.grads + p.optimizer + p.activations + p.workspace, "%s: total is not the sum", name);
    CHECK(p.workspace >= (int64_t)CUDA_WS_FIXED, "%s: workspace below the fixed part", name);
}

/* BERT-base, micro-batch 32, T 384: the workspace is the fixed part plus
 * attention's, worked out by hand. fp32: q, k, v, dout copies and the fp32
 * output, 5 x 32*384*768*4 = 188743680, plus P' 32*12*384*384*4 =
 * 226492416. bf16: 4 x 18874368 + 113246208 + 37748736 = 226492416. */
static void check_base_workspace(void)
{
    bert_config cfg;
    config_named("base", 30522, &cfg);
    memory_plan p32, p16, pt;
    CHECK(memory_plan_compute(&cfg, 32, 384, PREC_FP32, RECOMPUTE_NONE, &p32) == 0, "%s", err_msg());
    CHECK(memory_plan_compute(&cfg, 32, 384, PREC_BF16, RECOMPUTE_NONE, &p16) == 0, "%s", err_msg());
    CHECK(memory_plan_compute(&cfg, 32, 384, PREC_TF32, RECOMPUTE_NONE, &pt) == 0, "%s", err_msg());
    int64_t fixed = (32 << 20) + 1024 * 8 + 256;
    int64_t want32 = fixed + 188743680 + 226492416, want16 = fixed + 226492416;
    printf("base 32x384 workspace: fp32 %lld (want %lld), bf16 %lld (want %lld), tf32 %lld\n", (long long)p32.workspace,
           (long long)want32, (long long)p16.workspace, (long long)want16, (long long)pt.workspace);
    CHECK(p32.workspace == want32, "fp32 workspace");
    CHECK(p16.workspace == want16, "bf16 workspace");
    CHECK(pt.workspace == p32.workspace, "tf32 takes fp32's memory");
    memory_plan pa, pf;
    memory_plan_compute(&cfg, 32, 384, PREC_AUTO, RECOMPUTE_NONE, &pa);
    memory_plan_compute(&cfg, 32, 384, PREC_FP16, RECOMPUTE_NONE, &pf);
    CHECK(pa.total == p16.total && pf.total == p16.total, "auto, fp16 and bf16 take the same memory");
    /* 108,893,186 parameters: bert-base-uncased's 109,482,240 less the
     * pooler (768*768 + 768) plus qa_outputs (768*2 + 2). */
    CHECK(p16.n_params == 109482240 - 768 * 768 - 768 + 768 * 2 + 2, "base parameters %lld", (long long)p16.n_params);
}

static void check_recompute(void)
{
    bert_config cfg;
    config_named("base", 30522, &cfg);
    memory_plan none, layer;
    memory_plan_compute(&cfg, 8, 384, PREC_BF16, RECOMPUTE_NONE, &none);
    memory_plan_compute(&cfg, 8, 384, PREC_BF16, RECOMPUTE_LAYER, &layer);
    printf("base 8x384 activations: none %lld, layer %lld (%.1f%%)\n", (long long)none.activations,
           (long long)layer.activations, 100.0 * (double)layer.activations / (double)none.activations);
    CHECK(layer.activations < none.activations / 4, "recompute should keep well under a quarter for 12 layers");
    /* layer = a one-layer model's activations + 11 more layer inputs (N*C floats each). */
    bert_config one = cfg;
    one.num_hidden_layers = 1;
    int64_t want = (int64_t)bert_activation_bytes(&(bert_model_opts){.cfg = &one, .max_B = 8, .T = 384}) +
                   11LL * 8 * 384 * 768 * 4;
    CHECK(layer.activations == want, "recompute layer activations %lld, want %lld", (long long)layer.activations,
          (long long)want);
    /* A one-layer model has nothing to recompute. */
    memory_plan n1, l1;
    memory_plan_compute(&one, 8, 384, PREC_BF16, RECOMPUTE_NONE, &n1);
    memory_plan_compute(&one, 8, 384, PREC_BF16, RECOMPUTE_LAYER, &l1);
    CHECK(n1.activations == l1.activations, "one layer: %lld vs %lld", (long long)n1.activations,
          (long long)l1.activations);
}

static void check_largest(void)
{
    bert_config cfg;
    config_named("base", 30522, &cfg);
    int64_t prev = 0;
    for (int m = 1; m <= 64; m++) {
        memory_plan p;
        memory_plan_compute(&cfg, m, 384, PREC_BF16, RECOMPUTE_NONE, &p);
        CHECK(p.total > prev, "total must grow with the micro-batch (m %d)", m);
        prev = p.total;
    }
    int64_t budgets[] = {(int64_t)16 << 30, (int64_t)40 << 30, (int64_t)3 << 30, (int64_t)80 << 30};
    for (int i = 0; i < 4; i++) {
        int64_t budget = memory_budget_for_card(budgets[i]);
        int best = memory_largest_micro(&cfg, 384, PREC_BF16, RECOMPUTE_NONE, budget, 100000);
        memory_plan a, b;
        memory_plan_compute(&cfg, best, 384, PREC_BF16, RECOMPUTE_NONE, &a);
        memory_plan_compute(&cfg, best + 1, 384, PREC_BF16, RECOMPUTE_NONE, &b);
        printf("card %lld GiB: budget %lld, largest micro-batch %d (%lld B; %d takes %lld B)\n",
               (long long)(budgets[i] >> 30), (long long)budget, best, (long long)a.total, best + 1, (long long)b.total);
        CHECK(best >= 1, "something fits %lld GiB", (long long)(budgets[i] >> 30));
        CHECK(a.total <= budget && b.total > budget, "largest micro-batch %d is not the boundary", best);
    }
    int64_t b16 = memory_budget_for_card((int64_t)16 << 30);
    CHECK(memory_largest_micro(&cfg, 384, PREC_BF16, RECOMPUTE_NONE, b16, 12) == 12, "capped at max_micro");
    CHECK(memory_largest_micro(&cfg, 384, PREC_BF16, RECOMPUTE_NONE, 1000, 64) == 0, "1000 bytes fit nothing");
    CHECK(memory_largest_micro(&cfg, 384, PREC_BF16, RECOMPUTE_NONE, b16, 0) == 0, "max_micro 0");
    int lr = memory_largest_micro(&cfg, 384, PREC_BF16, RECOMPUTE_LAYER, b16, 100000);
    int ln = memory_largest_micro(&cfg, 384, PREC_BF16, RECOMPUTE_NONE, b16, 100000);
    printf("16 GiB card, base, T 384: largest micro-batch %d without recompute, %d with\n", ln, lr);
    CHECK(lr >= 3 * ln, "recompute should fit several times more (%d vs %d)", lr, ln);
    CHECK(memory_budget_for_card(MEMORY_CONTEXT_RESERVE / 2) == 0, "budget of a tiny card");
    CHECK(memory_budget_for_card(((int64_t)16 << 30)) == ((int64_t)16 << 30) - MEMORY_CONTEXT_RESERVE, "budget");
}

static void check_bad(void)
{
    bert_config cfg;
    config_named("tiny", 1000, &cfg);
    memory_plan p;
    CHECK(memory_plan_compute(&cfg, 0, 64, PREC_BF16, RECOMPUTE_NONE, &p) == ERR_INPUT, "micro 0");
    CHECK(memory_plan_compute(&cfg, 1, 0, PREC_BF16, RECOMPUTE_NONE, &p) == ERR_INPUT, "T 0");
    CHECK(memory_plan_compute(&cfg, 1, 513, PREC_BF16, RECOMPUTE_NONE, &p) == ERR_INPUT, "T past positions");
    CHECK(strstr(err_msg(), "max_position_embeddings") != NULL, "message: %s", err_msg());
    CHECK(memory_plan_compute(&cfg, 1, 64, (precision_kind)9, RECOMPUTE_NONE, &p) == ERR_INPUT, "precision 9");
    CHECK(memory_plan_compute(&cfg, 1, 64, PREC_BF16, (recompute_kind)5, &p) == ERR_INPUT, "recompute 5");
    CHECK(memory_plan_compute(&cfg, 10000000, 512, PREC_BF16, RECOMPUTE_NONE, &p) == ERR_INPUT, "huge micro-batch");
    CHECK(strstr(err_msg(), "too large") != NULL, "message: %s", err_msg());
    bert_config bad = cfg;
    bad.num_attention_heads = 3; /* does not divide 128 */
    CHECK(memory_plan_compute(&bad, 1, 64, PREC_BF16, RECOMPUTE_NONE, &p) == ERR_INPUT, "heads not dividing hidden");
    /* Sizes whose byte counts pass 2^32 many times over: no wrap. */
    CHECK(config_named("large", 1 << 24, &cfg) == 0, "%s", err_msg());
    cfg.hidden_size = 16384;
    cfg.num_attention_heads = 128;
    cfg.intermediate_size = 65536;
    cfg.num_hidden_layers = 96;
    CHECK(memory_plan_compute(&cfg, 1, 128, PREC_FP32, RECOMPUTE_NONE, &p) == 0, "%s", err_msg());
    int64_t want_params = param_formula(&cfg);
    printf("L96 H16384 with a 2^24 vocabulary: %lld parameters, %lld B total\n", (long long)p.n_params,
           (long long)p.total);
    CHECK(p.n_params == want_params, "%lld parameters, formula %lld", (long long)p.n_params, (long long)want_params);
    CHECK(p.total > 16 * want_params, "big totals stay big");
    recompute_kind r;
    CHECK(memory_parse_recompute("layer", &r) == 0 && r == RECOMPUTE_LAYER, "layer");
    CHECK(memory_parse_recompute("none", &r) == 0 && r == RECOMPUTE_NONE, "none");
    CHECK(memory_parse_recompute("all", &r) == ERR_INPUT, "all");
    CHECK(strstr(err_msg(), "--recompute: 'all' is not one of none, layer") != NULL, "message: %s", err_msg());
    CHECK(memory_parse_recompute(NULL, &r) == ERR_INPUT, "NULL");
    err_clear();
}

static void check_ws_helpers(void)
{
    CHECK(cuda_ws_round(0) == 0 && cuda_ws_round(1) == 256 && cuda_ws_round(256) == 256 && cuda_ws_round(257) == 512,
          "round");
    CHECK(cuda_ws_round(SIZE_MAX - 3) == SIZE_MAX, "round saturates");
    CHECK(cuda_ws_sat_mul(SIZE_MAX / 2, 3) == SIZE_MAX && cuda_ws_sat_add(SIZE_MAX, 1) == SIZE_MAX, "saturation");
    CHECK(cuda_ws_matmul_forward(0, 100, 100, 100) == 0, "fp32 matmul converts nothing");
    CHECK(cuda_ws_matmul_forward(1, 100, 64, 32) == cuda_ws_round(12800) + cuda_ws_round(4096), "bf16 matmul forward");
    CHECK(cuda_ws_colsum_chunks(1) == 1 && cuda_ws_colsum_chunks(CUDA_WS_COLSUM_ROWS) == 1 &&
          cuda_ws_colsum_chunks(CUDA_WS_COLSUM_ROWS + 1) == 2, "chunks");
    char buf[32];
    CHECK(!strcmp(memory_fmt_bytes(buf, sizeof buf, 900), "900 B"), "%s", buf);
    CHECK(!strcmp(memory_fmt_bytes(buf, sizeof buf, 1536), "1.5 KiB"), "%s", buf);
    CHECK(!strcmp(memory_fmt_bytes(buf, sizeof buf, (int64_t)3 << 29), "1.50 GiB"), "%s", buf);
    CHECK(!strcmp(memory_fmt_bytes(buf, sizeof buf, INT64_MAX), "overflow"), "%s", buf);
}

int main(void)
{
    check_config("tiny", 30522, 128);
    check_config("minilm", 30522, 384);
    check_config("base", 21128, 512);
    check_config("large", 30522, 64);
    check_base_workspace();
    check_recompute();
    check_largest();
    check_bad();
    check_ws_helpers();
    return tu_done();
}
