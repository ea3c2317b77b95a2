/* Internals shared by features.c and features_cache.c: the tokenisation a
 * features set is made from, and the step that makes windows from it. */
#ifndef BERTC_FEATURES_IMPL_H
#define BERTC_FEATURES_IMPL_H

#include "data/features.h"

#include <stdint.h>

/* Flat arrays, so the cache can write and read them as they are. Question
 * tokens are stored whole (before max_query_length). */
struct features_tokens {
    int ncontexts, n;
    int64_t *ctx_off;  /* [ncontexts + 1] into ctx_* */
    int32_t *ctx_ids;  /* [ctx_off[ncontexts]] */
    int32_t *ctx_begin, *ctx_end; /* code point offsets into the context */
    int64_t *q_off;    /* [n + 1] into q_ids */
    int32_t *q_ids;
};

void features_tokens_free(features_tokens *t);
/* Windows, labels and offsets from tokens; on success out->tokens = t (owned
 * by out), on failure t is left to the caller. */
int features_from_tokens(const squad_data *d, features_tokens *t, const tokenizer *tok, const feature_opts *o,
                         int nthreads, features *out);

#endif
