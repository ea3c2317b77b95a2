/* Features: the windows that the model sees, as run_qa.py makes them with a
 * fast tokenizer (DESIGN.md, Numerics): [CLS] question [SEP] context [SEP]
 * padded to T; long contexts split into windows overlapping by doc_stride
 * tokens; labels (0, 0) when the window does not hold the whole answer. */
#ifndef BERTC_FEATURES_H
#define BERTC_FEATURES_H

#include "data/squad.h"
#include "text/tokenizer.h"

#include <stdint.h>

typedef struct {
    int max_seq_length;   /* T, default 384 */
    int doc_stride;       /* default 128 */
    int max_query_length; /* 0 = no truncation of the question (run_qa.py) */
} feature_opts;

typedef struct {
    int n, T;
    int32_t *input_ids;       /* [n*T] */
    int32_t *token_type_ids;  /* [n*T] */
    int32_t *attention_mask;  /* [n*T] */
    int32_t *start_positions; /* [n] training labels (prepare_train_features) */
    int32_t *end_positions;   /* [n] */
    int32_t *example;         /* [n] index of the example the window belongs to */
    int32_t *offset_begin;    /* [n*T] code point offsets into the context; -1 where the */
    int32_t *offset_end;      /* token is not context (question, specials, padding) */
} features;

/* nthreads <= 0 means all cores. Deterministic whatever the thread count. */
int features_build(const squad_data *d, const tokenizer *tok, const feature_opts *o, int nthreads, features *out);
void features_free(features *f);

/* Features cache: a versioned binary file with a CRC, keyed by the data
 * hash, the vocab hash, lower_case and the options. features_cache_load
 * returns 0 and fills *out on a hit, 1 on a miss (missing, stale or damaged:
 * the reason is logged), or an error code. */
int features_cache_load(const char *path, const squad_data *d, const tokenizer *tok, const feature_opts *o, features *out);
int features_cache_save(const char *path, const squad_data *d, const tokenizer *tok, const feature_opts *o, const features *f);

#endif
