/* The parallel mode of a run (strategy.h): a new one is a new file and a
 * line here; and the layout of the ranks a checkpoint records. */
#include "train/strategy.h"

#include "core/err.h"

#include <stdio.h>

/* The mode the options ask for. */
static const run_strategy *asked(const trainer_opts *o)
{
    if (o->pipeline_stages > 1) return &run_strategy_pipeline;
    if (o->shard_optimizer) return &run_strategy_sharded;
    return &run_strategy_data_parallel;
}

const run_strategy *run_strategy_pick(const trainer_opts *o, int ranks)
{
    const run_strategy *s = asked(o);
    /* one rank has no one to share the Adam state with (bertc train
     * refuses it: the sharded mode's check) */
    return s == &run_strategy_sharded && ranks < 2 ? &run_strategy_data_parallel : s;
}

int run_strategy_check(const trainer_opts *o, int ranks, int launched)
{
    int D = ranks, rc = asked(o)->check(o, ranks, launched, &D);
    if (rc) return rc;
    if (D > o->batch)
        return err_set(ERR_INPUT, "train: %d ranks but --batch %d: every rank needs at least one example per step "
                       "(--batch is the global batch)", D, o->batch);
    if (D > 1 && o->micro_batch > 0 && ((o->batch + o->micro_batch - 1) / o->micro_batch) % D != 0)
        return err_set(ERR_INPUT, "train: --batch %d in micro-batches of %d is %d per step, which %d ranks do not "
                       "divide (each rank takes whole micro-batches: make ceil(batch/micro-batch) a multiple of %d)",
                       o->batch, o->micro_batch, (o->batch + o->micro_batch - 1) / o->micro_batch, D, D);
    return 0;
}

run_layout run_layout_saved(const train_state *s)
{
    int ranks = s->ranks > 0 ? (int)s->ranks : 1, stages = s->stages > 1 ? (int)s->stages : 1;
    return (run_layout){.ranks = ranks, .replicas = ranks / stages, .stages = stages,
                        .adam_ranks = s->shard_optimizer ? ranks : 1};
}

void run_layout_record(train_state *s, const run_layout *l)
{
    s->ranks = l->ranks;
    s->shard_optimizer = l->adam_ranks > 1;
    s->stages = l->stages;
}

void run_layout_notes(const run_layout *was, const run_layout *now, int batch)
{
    /* Pipeline stages compute the bits of one process (and S x D ranks
     * those of D data-parallel ranks): only the data-parallel count
     * changes the sums. */
    if (was->ranks != now->ranks || was->stages != now->stages) {
        if (was->replicas != now->replicas)
            printf("resuming a run of %d rank%s with %d (the same global batch of %d; the sums are taken in another "
                   "order, so the result is not bit-identical to an uninterrupted run)\n",
                   was->ranks, was->ranks > 1 ? "s" : "", now->ranks, batch);
        else
            printf("resuming a run of %d pipeline stage%s with %d (the same arithmetic: the result is that of an "
                   "uninterrupted run, as long as the threads are the same)\n",
                   was->stages, was->stages > 1 ? "s" : "", now->stages);
    }
    int was_sharded = was->adam_ranks > 1, sharded = now->adam_ranks > 1;
    if (was_sharded != sharded)
        printf("resuming a run saved %s --shard-optimizer %s it (checkpoints hold the whole Adam moments: %s)\n",
               was_sharded ? "with" : "without", sharded ? "with" : "without",
               sharded ? "each rank takes its pieces of them" : "loaded whole");
}
