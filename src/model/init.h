/* Random initialisation of BERT's parameters. */
#ifndef BERTC_MODEL_INIT_H
#define BERTC_MODEL_INIT_H

#include "model/config.h"
#include "model/params.h"

#include <stdint.h>

/* transformers' _init_weights: N(0, initializer_range) for weights and
 * embeddings, LayerNorm 1 and 0, biases 0, the pad_token_id row of the word
 * embeddings 0. Each tensor draws from its own Philox stream, keyed by seed
 * and its name, with Box-Muller in double rounded once to float: the same
 * seed gives the same bytes whatever the thread count. */
void model_init_random(const bert_config *cfg, const param_table *t, float *block, uint64_t seed);
/* One tensor of the table as model_init_random initialises it (the same
 * values: its stream depends on its name only). */
void model_init_param(const bert_config *cfg, const param_info *p, float *block, uint64_t seed);

#endif
