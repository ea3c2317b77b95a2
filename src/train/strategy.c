/* The parallel mode of a run (strategy.h): a new one is a new file and a
 * line here. */
#include "train/strategy.h"

const run_strategy *run_strategy_pick(const trainer_opts *o, int ranks)
{
    if (o->pipeline_stages > 1) return &run_strategy_pipeline;
    if (o->shard_optimizer && ranks > 1) return &run_strategy_sharded;
    return &run_strategy_data_parallel;
}
