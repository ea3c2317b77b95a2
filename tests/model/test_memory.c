/* The memory planner: its figures against the tables the allocations come
 * from and against sums worked out by hand, the largest micro-batch against
 * its definition, pipeline stages and the sharded optimizer, the default
 * pipeline split, and bad or huge sizes. */
#include "testutil.h"

#include "backend/workspace_rules.h"
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
    memory_answer p;
    int rc = memory_plan(&(memory_query){.cfg = &cfg, .micro = 4, .T = T, .prec = PREC_BF16}, &p);
    CHECK(rc == 0, "%s: %s", name, err_msg());
    int64_t n = param_formula(&cfg);
    bert_model_opts mo = {.cfg = &cfg, .max_B = 4, .T = T, .att_lse = memory_attention_lse(&cfg, PREC_BF16),
                          .act_bytes = memory_act_bytes(PREC_BF16)};
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
 * the largest op's, worked out by hand. fp32: attention's q, k, v, dout
 * copies and the fp32 output, 5 x 32*384*768*4 = 188743680, plus P'
 * 32*12*384*384*4 = 226492416. bf16 (16-bit activations; the flash
 * kernels need only dvec 12*12288*4 = 589824, and the GEMMs read the
 * 16-bit activations as they are, the weights from their copy): the
 * embeddings' backward, the sorted ids and values 3 x 49152, the type
 * flags 256, the sort's storage bound 12288 x 8 + 1 MiB = 1146880 and the
 * token-type partial sums 96 x 16 x 768 x 4 = 4718592: 6013184 (before the
 * 16-bit activations skipped the GEMM's input copies, the FFN-in layer's
 * matmul_backward, 95551488, was the largest), and the 16-bit copy of the
 * 108,893,186 parameters: their
 * block 435572744 B rounded to 435572992, half of it 217786496 rounded to
 * 217786624. The fixed part
 * includes adamw_multi's table: 199 tensors x 64 B = 12736, rounded to
 * 12800. */
static void check_base_workspace(void)
{
    bert_config cfg;
    config_named("base", 30522, &cfg);
    memory_answer p32, p16, pt;
    memory_query q = {.cfg = &cfg, .micro = 32, .T = 384, .prec = PREC_FP32};
    CHECK(memory_plan(&q, &p32) == 0, "%s", err_msg());
    q.prec = PREC_BF16;
    CHECK(memory_plan(&q, &p16) == 0, "%s", err_msg());
    q.prec = PREC_TF32;
    CHECK(memory_plan(&q, &pt) == 0, "%s", err_msg());
    int64_t fixed = (32 << 20) + 1024 * 8 + 256 + 12800;
    int64_t want32 = fixed + 188743680 + 226492416, want16 = fixed + 6013184 + 217786624;
    printf("base 32x384 workspace: fp32 %lld (want %lld), bf16 %lld (want %lld), tf32 %lld\n", (long long)p32.workspace,
           (long long)want32, (long long)p16.workspace, (long long)want16, (long long)pt.workspace);
    CHECK(p32.workspace == want32, "fp32 workspace");
    CHECK(p16.workspace == want16, "bf16 workspace");
    CHECK(pt.workspace == p32.workspace, "tf32 takes fp32's memory");
    memory_answer pa, pf;
    q.prec = PREC_AUTO;
    memory_plan(&q, &pa);
    q.prec = PREC_FP16;
    memory_plan(&q, &pf);
    CHECK(pa.total == p16.total && pf.total == p16.total, "auto, fp16 and bf16 take the same memory");
    /* 108,893,186 parameters: bert-base-uncased's 109,482,240 less the
     * pooler (768*768 + 768) plus qa_outputs (768*2 + 2). */
    CHECK(p16.n_params == 109482240 - 768 * 768 - 768 + 768 * 2 + 2, "base parameters %lld", (long long)p16.n_params);
}

static void check_recompute(void)
{
    bert_config cfg;
    config_named("base", 30522, &cfg);
    memory_answer none, layer;
    memory_query q = {.cfg = &cfg, .micro = 8, .T = 384, .prec = PREC_BF16};
    memory_plan(&q, &none);
    q.recompute = RECOMPUTE_LAYER;
    memory_plan(&q, &layer);
    printf("base 8x384 activations: none %lld, layer %lld (%.1f%%)\n", (long long)none.activations,
           (long long)layer.activations, 100.0 * (double)layer.activations / (double)none.activations);
    CHECK(layer.activations < none.activations / 4, "recompute should keep well under a quarter for 12 layers");
    /* layer = a one-layer model's activations + 11 more layer inputs (N*C
     * activations each, of memory_act_bytes). */
    bert_config one = cfg;
    one.num_hidden_layers = 1;
    size_t e = memory_act_bytes(PREC_BF16);
    int64_t want = (int64_t)bert_activation_bytes(&(bert_model_opts){.cfg = &one, .max_B = 8, .T = 384,
                                                                      .att_lse = memory_attention_lse(&cfg, PREC_BF16),
                                                                      .act_bytes = e}) +
                   11LL * 8 * 384 * 768 * (int64_t)e;
    CHECK(layer.activations == want, "recompute layer activations %lld, want %lld", (long long)layer.activations,
          (long long)want);
    /* A one-layer model has nothing to recompute. */
    memory_answer n1, l1;
    q.cfg = &one;
    memory_plan(&q, &l1);
    q.recompute = RECOMPUTE_NONE;
    memory_plan(&q, &n1);
    CHECK(n1.activations == l1.activations, "one layer: %lld vs %lld", (long long)n1.activations,
          (long long)l1.activations);
}

static void check_largest(void)
{
    bert_config cfg;
    config_named("base", 30522, &cfg);
    memory_query q = {.cfg = &cfg, .T = 384, .prec = PREC_BF16};
    int64_t prev = 0;
    for (q.micro = 1; q.micro <= 64; q.micro++) {
        int m = q.micro;
        memory_answer p;
        memory_plan(&q, &p);
        CHECK(p.total > prev, "total must grow with the micro-batch (m %d)", m);
        prev = p.total;
    }
    int64_t budgets[] = {(int64_t)16 << 30, (int64_t)40 << 30, (int64_t)3 << 30, (int64_t)80 << 30};
    for (int i = 0; i < 4; i++) {
        int64_t budget = memory_budget_for_card(budgets[i]);
        int best = (int)memory_largest(&q, MEMORY_FIT_MICRO, budget, 100000);
        memory_answer a, b;
        q.micro = best;
        memory_plan(&q, &a);
        q.micro = best + 1;
        memory_plan(&q, &b);
        printf("card %lld GiB: budget %lld, largest micro-batch %d (%lld B; %d takes %lld B)\n",
               (long long)(budgets[i] >> 30), (long long)budget, best, (long long)a.total, best + 1, (long long)b.total);
        CHECK(best >= 1, "something fits %lld GiB", (long long)(budgets[i] >> 30));
        CHECK(a.total <= budget && b.total > budget, "largest micro-batch %d is not the boundary", best);
    }
    int64_t b16 = memory_budget_for_card((int64_t)16 << 30);
    CHECK(memory_largest(&q, MEMORY_FIT_MICRO, b16, 12) == 12, "capped at max_micro");
    CHECK(memory_largest(&q, MEMORY_FIT_MICRO, 1000, 64) == 0, "1000 bytes fit nothing");
    CHECK(memory_largest(&q, MEMORY_FIT_MICRO, b16, 0) == 0, "max_micro 0");
    int ln = (int)memory_largest(&q, MEMORY_FIT_MICRO, b16, 100000);
    q.recompute = RECOMPUTE_LAYER;
    int lr = (int)memory_largest(&q, MEMORY_FIT_MICRO, b16, 100000);
    printf("16 GiB card, base, T 384: largest micro-batch %d without recompute, %d with\n", ln, lr);
    CHECK(lr >= 3 * ln, "recompute should fit several times more (%d vs %d)", lr, ln);
    CHECK(memory_budget_for_card(MEMORY_CONTEXT_RESERVE / 2) == 0, "budget of a tiny card");
    CHECK(memory_budget_for_card(((int64_t)16 << 30)) == ((int64_t)16 << 30) - MEMORY_CONTEXT_RESERVE, "budget");
}

static void check_bad(void)
{
    bert_config cfg;
    config_named("tiny", 1000, &cfg);
    memory_answer p;
    memory_query q = {.cfg = &cfg, .micro = 0, .T = 64, .prec = PREC_BF16};
    CHECK(memory_plan(&q, &p) == ERR_INPUT, "micro 0");
    q.micro = 1;
    q.T = 0;
    CHECK(memory_plan(&q, &p) == ERR_INPUT, "T 0");
    q.T = 513;
    CHECK(memory_plan(&q, &p) == ERR_INPUT, "T past positions");
    CHECK(strstr(err_msg(), "max_position_embeddings") != NULL, "message: %s", err_msg());
    q.T = 64;
    q.prec = (precision_kind)9;
    CHECK(memory_plan(&q, &p) == ERR_INPUT, "precision 9");
    q.prec = PREC_BF16;
    q.recompute = (recompute_kind)5;
    CHECK(memory_plan(&q, &p) == ERR_INPUT, "recompute 5");
    q.recompute = RECOMPUTE_NONE;
    q.micro = 10000000;
    q.T = 512;
    CHECK(memory_plan(&q, &p) == ERR_INPUT, "huge micro-batch");
    CHECK(strstr(err_msg(), "too large") != NULL, "message: %s", err_msg());
    bert_config bad = cfg;
    bad.num_attention_heads = 3; /* does not divide 128 */
    q = (memory_query){.cfg = &bad, .micro = 1, .T = 64, .prec = PREC_BF16};
    CHECK(memory_plan(&q, &p) == ERR_INPUT, "heads not dividing hidden");
    /* Sizes whose byte counts pass 2^32 many times over: no wrap. */
    CHECK(config_named("large", 1 << 24, &cfg) == 0, "%s", err_msg());
    cfg.hidden_size = 16384;
    cfg.num_attention_heads = 128;
    cfg.intermediate_size = 65536;
    cfg.num_hidden_layers = 96;
    q = (memory_query){.cfg = &cfg, .micro = 1, .T = 128, .prec = PREC_FP32};
    CHECK(memory_plan(&q, &p) == 0, "%s", err_msg());
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

static int64_t r64(int64_t n) { return (n + 63) & ~(int64_t)63; }

static int plans_equal(const memory_answer *a, const memory_answer *b)
{
    return a->n_params == b->n_params && a->params == b->params && a->grads == b->grads &&
           a->optimizer == b->optimizer && a->activations == b->activations && a->workspace == b->workspace &&
           a->total == b->total;
}

static void check_layouts_refused(void);

/* Pipeline stages and the sharded optimizer (memory_plan's layouts): one stage
 * is the whole model's plan; stages' parameters, gradients and Adam state
 * sum to the whole; sharding over D ranks divides Adam's m and v by D up to
 * the pieces' remainders; stage activations against bert.c's table for a
 * model of the stage's layer count; the largest micro-batch of a layout
 * against its definition. */
static void check_layouts(void)
{
    const char *names[] = {"base", "large"};
    for (int ci = 0; ci < 2; ci++) {
        bert_config cfg;
        config_named(names[ci], 30522, &cfg);
        int L = cfg.num_hidden_layers;
        for (int rc = 0; rc < 2; rc++) {
            recompute_kind rk = rc ? RECOMPUTE_LAYER : RECOMPUTE_NONE;
            int micro = 4, T = 384;
            memory_query q = {.cfg = &cfg, .micro = micro, .T = T, .prec = PREC_BF16, .recompute = rk};
            memory_answer whole;
            memory_plan(&q, &whole);
            memory_query one = q;
            one.stages = one.shard_ranks = 1;
            memory_answer st;
            CHECK(memory_plan(&one, &st) == 0, "%s", err_msg());
            CHECK(plans_equal(&st, &whole) && st.in_flight == 1 && st.layer_first == 0 && st.layer_end == L &&
                      st.embeddings && st.qa_head,
                  "%s recompute %d: one stage is the whole model's plan", names[ci], rc);
            /* 2 stages */
            memory_query two = q;
            two.stages = 2;
            memory_answer s0, s1;
            int r0 = memory_plan(&two, &s0);
            two.stage = 1;
            CHECK(r0 == 0 && memory_plan(&two, &s1) == 0, "%s", err_msg());
            CHECK(s0.layer_first == 0 && s0.layer_end == L / 2 && s1.layer_first == L / 2 && s1.layer_end == L &&
                      s0.embeddings && !s0.qa_head && !s1.embeddings && s1.qa_head && s0.in_flight == 2 &&
                      s1.in_flight == 1, "%s: the stages' layers and in-flight counts", names[ci]);
            CHECK(s0.n_params + s1.n_params == whole.n_params && s0.params + s1.params == whole.params &&
                      s0.grads + s1.grads == whole.grads && s0.optimizer + s1.optimizer == whole.optimizer,
                  "%s: 2 stages' parameters %lld + %lld, gradients and Adam state sum to the whole's %lld", names[ci],
                  (long long)s0.n_params, (long long)s1.n_params, (long long)whole.n_params);
            /* activations against bert.c for a model of L/2 layers: stage 1
             * is it without the embeddings; stage 0 keeps 2 micro-batches of
             * it without the QA head and the working buffers, and those once */
            bert_config half = cfg;
            half.num_hidden_layers = L / 2;
            int lse = memory_attention_lse(&cfg, PREC_BF16);
            int64_t e = (int64_t)memory_act_bytes(PREC_BF16);
            int64_t A = (int64_t)bert_activation_bytes(&(bert_model_opts){
                .cfg = &half, .max_B = micro, .T = T, .recompute = rc ? RECOMPUTE_LAYER : RECOMPUTE_NONE, .att_lse = lse,
                .act_bytes = (size_t)e});
            int64_t N = (int64_t)micro * T, C = cfg.hidden_size, I = cfg.intermediate_size, NH = cfg.num_attention_heads;
            /* bytes: activations e each, statistics fp32, each tensor to 64 bytes; bf16: attention saves lse
             * [NH,N] (to a multiple of 64) and its 16-bit output, counted in floats, no scratch */
            int64_t nc = r64(N * C * e), ni = r64(N * I * e), n1 = r64(N * 4);
            int64_t att = lse ? r64(4 * ((NH * N + 63) / 64 * 64 + (N * C + 1) / 2)) : r64(N * NH * T * 4);
            int64_t scr = lse ? 0 : att;
            int64_t emb = nc + 2 * n1, head = r64(2 * N * e) + 64, head_work = r64(2 * N * e);
            int64_t layer = 7 * nc + att + 4 * n1 + 2 * ni;
            int64_t work = 7 * nc + 2 * ni + scr + (rc ? layer : 0), ints = 4 * (4 * N + 3 * micro + 1);
            int64_t want1 = A - emb, want0 = 2 * (A - head - head_work - work - ints) + work + ints;
            printf("%s recompute %d, 2 stages, micro 4 x 384: activations stage 0 %lld (want %lld), stage 1 %lld (want "
                   "%lld); one stage %lld\n", names[ci], rc, (long long)s0.activations, (long long)want0,
                   (long long)s1.activations, (long long)want1, (long long)whole.activations);
            CHECK(s1.activations == want1 && s0.activations == want0, "%s: stage activations", names[ci]);
            /* sharding */
            for (int D = 2; D <= 8; D *= 2) {
                memory_query sh = q, sh2 = q;
                sh.shard_ranks = sh2.shard_ranks = D;
                sh2.stages = 2;
                memory_answer a, b0, b1;
                memory_plan(&sh, &a);
                memory_plan(&sh2, &b0);
                sh2.stage = 1;
                memory_plan(&sh2, &b1);
                int64_t over = (int64_t)D * a.optimizer - whole.optimizer;
                CHECK(over >= 0 && over < 8LL * D * (D - 1) * (L + 2),
                      "%s: Adam state over %d ranks %lld B per rank, whole %lld B (D x per rank - whole = %lld)",
                      names[ci], D, (long long)a.optimizer, (long long)whole.optimizer, (long long)over);
                CHECK(a.params == whole.params && a.grads == whole.grads && a.activations == whole.activations &&
                          a.total == whole.total - whole.optimizer + a.optimizer,
                      "%s: sharding over %d changes the Adam state alone", names[ci], D);
                CHECK(memory_optimizer_bytes_per_rank(&cfg, D) == a.optimizer, "optimizer bytes per rank");
                int64_t over2 = (int64_t)D * (b0.optimizer + b1.optimizer) - whole.optimizer;
                CHECK(over2 >= 0 && over2 < 8LL * D * (D - 1) * (L + 2), "%s: 2 stages over %d ranks: Adam %lld + %lld",
                      names[ci], D, (long long)b0.optimizer, (long long)b1.optimizer);
                if (rc == 0 && D == 2)
                    printf("%s: Adam m and v %lld B whole, %lld B per rank over 2 ranks\n", names[ci],
                           (long long)whole.optimizer, (long long)a.optimizer);
            }
            /* the largest micro-batch of a layout: the boundary */
            int64_t budget = memory_budget_for_card((int64_t)16 << 30);
            const int lays[3][2] = {{1, 1}, {2, 1}, {2, 4}};
            for (int li = 0; li < 3; li++) {
                memory_query lay = q;
                lay.stages = lays[li][0];
                lay.shard_ranks = lays[li][1];
                int best = (int)memory_largest(&lay, MEMORY_FIT_MICRO, budget, 4096);
                int64_t peak_best = 0, peak_next = 0;
                for (lay.stage = 0; lay.stage < lay.stages; lay.stage++) {
                    memory_answer x, y;
                    lay.micro = best > 0 ? best : 1;
                    memory_plan(&lay, &x);
                    lay.micro = best + 1;
                    memory_plan(&lay, &y);
                    if (x.total > peak_best) peak_best = x.total;
                    if (y.total > peak_next) peak_next = y.total;
                }
                CHECK((best == 0 || peak_best <= budget) && peak_next > budget,
                      "%s recompute %d, %d stages, %d ranks: largest micro-batch %d is not the boundary", names[ci], rc,
                      lay.stages, lay.shard_ranks, best);
                if (li == 0)
                    CHECK(best == memory_largest(&q, MEMORY_FIT_MICRO, budget, 4096),
                          "one stage: the whole model's answer");
            }
        }
    }
    check_layouts_refused();
}

/* Layouts memory_plan refuses: stages or ranks out of range, a stage past
 * the last, packed micro-batches on stages. */
static void check_layouts_refused(void)
{
    bert_config cfg;
    config_named("base", 30522, &cfg);
    memory_answer st;
    const int bad[3][2] = {{-1, 1}, {13, 1}, {2, -1}};
    for (int i = 0; i < 3; i++) {
        memory_query q = {.cfg = &cfg, .micro = 1, .T = 384, .prec = PREC_BF16, .stages = bad[i][0],
                          .shard_ranks = bad[i][1]};
        CHECK(memory_plan(&q, &st) == ERR_INPUT, "layout %d stages %d ranks refused", bad[i][0], bad[i][1]);
    }
    memory_query two = {.cfg = &cfg, .micro = 1, .T = 384, .prec = PREC_BF16, .stages = 2, .stage = 2};
    CHECK(memory_plan(&two, &st) == ERR_INPUT, "stage 2 of 2");
    two = (memory_query){.cfg = &cfg, .micro = 8, .T = 384, .max_tokens = 2000, .prec = PREC_BF16, .stages = 2};
    CHECK(memory_plan(&two, &st) == ERR_INPUT, "packed micro-batches on 2 stages");
    err_clear();
}

/* The largest stage time and peak of a split, by memory_plan and
 * bert_stage_flops. */
static void split_cost(const bert_config *cfg, int micro, int T, int S, const int *sp, double *time, int64_t *peak)
{
    memory_query lay = {.cfg = cfg, .micro = micro, .T = T, .prec = PREC_BF16, .stages = S, .split = sp};
    *time = 0;
    *peak = 0;
    for (int s = 0; s < S; s++) {
        memory_answer st;
        lay.stage = s;
        CHECK(memory_plan(&lay, &st) == 0, "%s", err_msg());
        double t = bert_stage_flops(cfg, T, sp[s], sp[s + 1], s == 0, s == S - 1);
        if (t > *time) *time = t;
        if (st.total > *peak) *peak = st.total;
    }
}

/* Every split of L layers into S stages (boundary k of S onwards from
 * sp[k - 1] + 1): the best (time, then peak) into *best_t, *best_p. */
static void split_all(const bert_config *cfg, int micro, int T, int S, int *sp, int k, double *best_t, int64_t *best_p)
{
    int L = cfg->num_hidden_layers;
    if (k == S) {
        double t;
        int64_t p;
        split_cost(cfg, micro, T, S, sp, &t, &p);
        if (*best_t < 0 || t < *best_t || (t == *best_t && p < *best_p)) *best_t = t, *best_p = p;
        return;
    }
    for (int b = sp[k - 1] + 1; b <= L - (S - k); b++) {
        sp[k] = b;
        split_all(cfg, micro, T, S, sp, k + 1, best_t, best_p);
    }
}

static int split_is(const int *sp, int S, const char *want)
{
    char got[256];
    size_t n = 0;
    for (int s = 0; s <= S; s++) n += (size_t)snprintf(got + n, sizeof got - n, "%s%d", s ? "," : "", sp[s]);
    if (strcmp(got, want)) printf("split %s, want %s\n", got, want);
    return !strcmp(got, want);
}

/* memory_split (the default pipeline split): hand-worked cases, and
 * against every split of small models (the smallest largest stage time,
 * then the smallest largest stage peak). */
static void check_stage_split(void)
{
    bert_config cfg;
    config_named("base", 30522, &cfg);
    int sp[32];
    memory_query q = {.cfg = &cfg, .micro = 8, .T = 384, .prec = PREC_BF16, .stages = 1};
    CHECK(memory_split(&q, sp) == 0 && split_is(sp, 1, "0,12"), "S = 1");
    q.stages = 2;
    CHECK(memory_split(&q, sp) == 0 && split_is(sp, 2, "0,6,12"), "12 layers in 2 stages");
    q.stages = 12;
    CHECK(memory_split(&q, sp) == 0 && split_is(sp, 12, "0,1,2,3,4,5,6,7,8,9,10,11,12"), "S = L");
    /* 12 in 5: 3 layers is the least the largest stage can have; the
     * 3-layer stages go where the embeddings' and the head's FLOPs are not;
     * of those splits the smallest largest peak: at 32 x 384 stage 0 (5
     * micro-batches in flight) takes 2 layers, at 1 x 384 the embeddings'
     * weights weigh more and it takes 1 (in bf16 the attention saves its
     * lse, not the probabilities, and the activations are 16-bit: at 16 x
     * 384 too) */
    q.stages = 5;
    q.micro = 32;
    CHECK(memory_split(&q, sp) == 0 && split_is(sp, 5, "0,2,4,7,10,12"), "12 layers in 5 stages, micro-batch 32");
    q.micro = 16;
    CHECK(memory_split(&q, sp) == 0 && split_is(sp, 5, "0,1,4,7,10,12"), "12 layers in 5 stages, micro-batch 16");
    q.micro = 1;
    CHECK(memory_split(&q, sp) == 0 && split_is(sp, 5, "0,1,4,7,10,12"), "12 layers in 5 stages, micro-batch 1");
    /* 3 layers in 2 stages: the embeddings (30 C a token) cost more than
     * the QA head (12 C), so stage 0 takes the single layer */
    bert_config three = cfg;
    three.num_hidden_layers = 3;
    memory_query q3 = {.cfg = &three, .micro = 8, .T = 384, .prec = PREC_BF16, .stages = 2};
    CHECK(memory_split(&q3, sp) == 0 && split_is(sp, 2, "0,1,3"), "3 layers in 2 stages");
    q.micro = 8;
    q.stages = 13;
    int r13 = memory_split(&q, sp);
    q.stages = 0;
    CHECK(r13 == ERR_INPUT && memory_split(&q, sp) == ERR_INPUT, "more stages than layers, no stage: refused");
    err_clear();
    /* against every split */
    const char *names[] = {"mini", "base"};
    const int maxS[] = {4, 5};
    for (int ci = 0; ci < 2; ci++) {
        config_named(names[ci], 30522, &cfg);
        for (int micro = 1; micro <= 16; micro *= 4)
            for (int S = 1; S <= maxS[ci]; S++) {
                double want_t = -1, got_t;
                int64_t want_p = 0, got_p;
                int all[32] = {0};
                all[S] = cfg.num_hidden_layers;
                split_all(&cfg, micro, 128, S, all, 1, &want_t, &want_p);
                q = (memory_query){.cfg = &cfg, .micro = micro, .T = 128, .prec = PREC_BF16, .stages = S};
                CHECK(memory_split(&q, sp) == 0, "%s", err_msg());
                split_cost(&cfg, micro, 128, S, sp, &got_t, &got_p);
                CHECK(got_t == want_t && got_p == want_p,
                      "%s, %d stages, micro-batch %d: the split's time %.6g and peak %lld, the best %.6g and %lld",
                      names[ci], S, micro, got_t, (long long)got_p, want_t, (long long)want_p);
            }
    }
    /* a layout's split: refused when it does not run from 0 to L in increasing boundaries */
    config_named("base", 30522, &cfg);
    const int bad[3][3] = {{0, 6, 11}, {1, 6, 12}, {0, 0, 12}};
    memory_query lay = {.cfg = &cfg, .micro = 1, .T = 384, .prec = PREC_BF16, .stages = 2};
    memory_answer st;
    for (int i = 0; i < 3; i++) {
        lay.split = bad[i];
        CHECK(memory_plan(&lay, &st) == ERR_INPUT, "bad split %d", i);
    }
    const int given[3] = {0, 5, 12};
    lay.split = given;
    lay.stage = 1;
    CHECK(memory_plan(&lay, &st) == 0 && st.layer_first == 5 && st.layer_end == 12 && st.qa_head && !st.embeddings,
          "a given split's stage 1");
    err_clear();
}

static void check_ws_helpers(void)
{
    CHECK(cuda_ws_round(0) == 0 && cuda_ws_round(1) == 256 && cuda_ws_round(256) == 256 && cuda_ws_round(257) == 512,
          "round");
    CHECK(cuda_ws_round(SIZE_MAX - 3) == SIZE_MAX, "round saturates");
    CHECK(sat_mul(SIZE_MAX / 2, 3) == SIZE_MAX && sat_add(SIZE_MAX, 1) == SIZE_MAX, "saturation");
    CHECK(cuda_ws_matmul_forward(0, 0, 100, 100, 100) == 0, "fp32 matmul converts nothing");
    /* the input's copy only: the weight is read from its 16-bit copy */
    CHECK(cuda_ws_matmul_forward(1, 0, 100, 64, 32) == cuda_ws_round(12800),
          "bf16 matmul forward on fp32 activations");
    CHECK(cuda_ws_matmul_forward(1, 1, 100, 64, 32) == 0, "bf16 matmul forward on 16-bit activations");
    /* the bias gradient's part, plus dout's and inp's copies only with fp32 activations */
    CHECK(cuda_ws_matmul_backward(1, 1, 100, 64, 32) == cuda_ws_part(32, 4) &&
              cuda_ws_matmul_backward(1, 0, 100, 64, 32) ==
                  cuda_ws_part(32, 4) + cuda_ws_part(3200, 2) + cuda_ws_part(6400, 2) &&
              cuda_ws_matmul_backward(0, 0, 100, 64, 32) == cuda_ws_part(32, 4),
          "matmul backward: the 16-bit copies only where activations are fp32");
    CHECK(cuda_ws_weight_copy(0, 1000) == 0 && cuda_ws_weight_copy(1, 1000) == 2048 &&
              cuda_ws_weight_copy(1, 65) == 256 && cuda_ws_weight_copy(1, 129) == 512,
          "the 16-bit weight copy: half the parameter block's allocation, rounded");
    CHECK(cuda_ws_colsum_chunks(1) == 1 && cuda_ws_colsum_chunks(CUDA_WS_COLSUM_ROWS) == 1 &&
          cuda_ws_colsum_chunks(CUDA_WS_COLSUM_ROWS + 1) == 2, "chunks");
    char buf[32];
    CHECK(!strcmp(memory_fmt_bytes(buf, sizeof buf, 900), "900 B"), "%s", buf);
    CHECK(!strcmp(memory_fmt_bytes(buf, sizeof buf, 1536), "1.5 KiB"), "%s", buf);
    CHECK(!strcmp(memory_fmt_bytes(buf, sizeof buf, (int64_t)3 << 29), "1.50 GiB"), "%s", buf);
    CHECK(!strcmp(memory_fmt_bytes(buf, sizeof buf, INT64_MAX), "overflow"), "%s", buf);
}

/* 16-bit activations (bert_model_opts.act_bytes 2, what the CUDA backend
 * keeps in fp16/bf16 once its ops take them): BERT-base, 8 x 384, the
 * attention saving the lse, by hand. Activations 2 bytes: x (13
 * boundaries), 7 (N,C) and 2 (N,I) per layer, the embeddings' (N,C),
 * logits and dlogits (N,2), backward's 7 (N,C) and 2 (N,I); fp32: 4
 * statistics (N) per layer and 2 for the embeddings, the loss (64 bytes),
 * the lse's probs (lse [NH,N] then the 16-bit output, in floats); ints
 * 4N + 3B + 1. Every term is a multiple of 64 here. 0 is fp32's 4. */
static void check_act16(void)
{
    bert_config cfg;
    config_named("base", 30522, &cfg);
    int64_t N = 8 * 384, C = 768, I = 3072, NH = 12, L = 12;
    bert_model_opts o = {.cfg = &cfg, .max_B = 8, .T = 384, .att_lse = 1, .act_bytes = 2};
    int64_t probs = 4 * ((NH * N + 63) / 64 * 64 + (N * C + 1) / 2);
    int64_t want = 2 * (N * C * (L + 1 + 7 * L + 1 + 7) + N * I * (2 * L + 2) + 2 * (2 * N)) +
                   4 * (N * (4 * L + 2)) + 64 + L * probs + 4 * (4 * N + 3 * 8 + 1);
    int64_t got = (int64_t)bert_activation_bytes(&o);
    o.act_bytes = 4;
    int64_t f32 = (int64_t)bert_activation_bytes(&o);
    o.act_bytes = 0;
    int64_t dflt = (int64_t)bert_activation_bytes(&o);
    printf("base 8 x 384, lse: activations %.1f MiB in 16 bits (by hand %.1f MiB), %.1f MiB in fp32\n",
           got / 1048576.0, want / 1048576.0, f32 / 1048576.0);
    CHECK(got == want, "16-bit activations %lld B, by hand %lld B", (long long)got, (long long)want);
    CHECK(dflt == f32, "act_bytes 0 is fp32 (%lld vs %lld)", (long long)dflt, (long long)f32);
    /* what fp32 adds: the 2-byte part again */
    int64_t half = 2 * (N * C * (L + 1 + 7 * L + 1 + 7) + N * I * (2 * L + 2) + 2 * (2 * N));
    CHECK(f32 - got == half, "fp32 - 16-bit = %lld B, want the activations' 16-bit part %lld B", (long long)(f32 - got),
          (long long)half);
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
    check_layouts();
    check_stage_split();
    check_ws_helpers();
    check_act16();
    return tu_done();
}
