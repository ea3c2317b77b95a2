/* Micro-batches and --micro-batch auto (microbatch.h). */
#include "train/microbatch.h"

#include "core/err.h"

#include <stdio.h>
#include <string.h>

static void set_micro(microbatch_plan *p, int micro)
{
    p->micro = micro;
    p->accum = (p->batch + micro - 1) / micro;
}

int microbatch_fixed(microbatch_plan *p, int batch, int micro)
{
    memset(p, 0, sizeof *p);
    if (batch < 1) return err_set(ERR_INPUT, "--batch %d: must be at least 1", batch);
    if (micro < 1 || micro > batch)
        return err_set(ERR_INPUT, "--micro-batch %d: must be between 1 and --batch %d", micro, batch);
    p->batch = batch;
    set_micro(p, micro);
    return 0;
}

int microbatch_choose(microbatch_plan *p, const bert_config *cfg, int T, precision_kind prec, recompute_kind rc,
                      int64_t budget, int batch)
{
    memset(p, 0, sizeof *p);
    if (batch < 1) return err_set(ERR_INPUT, "--batch %d: must be at least 1", batch);
    memory_query q = {.cfg = cfg, .micro = 1, .T = T, .prec = prec, .recompute = rc};
    memory_answer one;
    int r = memory_plan(&q, &one);
    if (r) return err_wrap(r, "--micro-batch auto");
    int micro = (int)memory_largest(&q, MEMORY_FIT_MICRO, budget, batch);
    if (micro < 1) {
        char need[32], have[32];
        return err_set(ERR_RUNTIME,
                       "--micro-batch auto: out of memory: micro-batch 1 of %d tokens needs %s (L%d H%d, %s, "
                       "recompute %s) and %s is available; try --recompute layer, a shorter --max-seq-length "
                       "or a smaller model",
                       T, memory_fmt_bytes(need, sizeof need, one.total), cfg->num_hidden_layers, cfg->hidden_size,
                       select_precision_name(prec), memory_recompute_name(rc),
                       memory_fmt_bytes(have, sizeof have, budget > 0 ? budget : 0));
    }
    p->batch = batch;
    set_micro(p, micro);
    return 0;
}

int64_t microbatch_budget(const backend_mem *m)
{
    int64_t all = m->free + m->used;
    int64_t margin = all / 50;
    if (margin < ((int64_t)64 << 20)) margin = (int64_t)64 << 20;
    return all > margin ? all - margin : 0;
}

int microbatch_halve(microbatch_plan *p)
{
    if (p->micro <= 1)
        return err_set(ERR_RUNTIME, "out of memory with micro-batch 1: nothing left to halve (try --recompute layer, "
                                    "a shorter --max-seq-length or a smaller model)");
    set_micro(p, (p->micro + 1) / 2);
    p->backoffs++;
    return 0;
}

int microbatch_slice(const microbatch_plan *p, int count, int k, int *at, int *rows)
{
    if (k < 0 || p->micro < 1 || count < 1) return 0;
    int64_t start = (int64_t)k * p->micro;
    if (start >= count) return 0;
    *at = (int)start;
    *rows = count - *at < p->micro ? count - *at : p->micro;
    return 1;
}

int microbatch_is_oom(int rc)
{
    return rc == ERR_RUNTIME && strstr(err_msg(), "out of memory") != NULL;
}

int microbatch_auto(microbatch_plan *p, const microbatch_env *env)
{
    if (p->micro < 1 || p->batch < 1) return err_set(ERR_INPUT, "microbatch_auto: no micro-batch chosen");
    for (;;) {
        int rc = env->build(env->user, p->micro);
        if (!rc) rc = env->trial(env->user, p->micro);
        if (!rc) return 0;
        if (!microbatch_is_oom(rc)) return rc;
        char why[200];
        snprintf(why, sizeof why, "%s", err_msg());
        int was = p->micro, was_accum = p->accum;
        if (microbatch_halve(p)) return err_wrap(ERR_RUNTIME, "%s", why);
        err_clear();
        log_info("micro-batch %d ran out of memory (%s): trying %d (%d -> %d micro-batches per step of %d)", was,
                 why, p->micro, was_accum, p->accum, p->batch);
    }
}
