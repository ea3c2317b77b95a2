/* Features: the windows that the model sees, as run_qa.py makes them with a
 * fast tokenizer (DESIGN.md, Numerics): [CLS] question [SEP] context [SEP]
 * padded to T; long contexts split into windows overlapping by doc_stride
 * tokens; labels (0, 0) when the window does not hold the whole answer.
 *
 * Windows, exactly as Hugging Face tokenizers lays them out for
 * truncation="only_second" with return_overflowing_tokens: with nq question
 * tokens (after max_query_length) and nc context tokens, when
 * nq + nc + 3 <= T there is one window; otherwise each window holds
 * L = T - 3 - nq context tokens, window k starts at k * (L - doc_stride),
 * and the last is the first that reaches the end of the context. When
 * L <= 0 or L <= doc_stride, Hugging Face fails ("Sequence to truncate too
 * short" / "stride must be strictly less than max_len"); features_build
 * fails too (ERR_INPUT naming the question id) rather than guess.
 *
 * Labels, exactly as prepare_train_features computes them from the first
 * usable answer (squad_example.train_answer), including its edge case: when
 * the answer lies within the last context token of a window, the start
 * label is T - 1 (its loop runs on through [SEP] and padding, whose offsets
 * are (0, 0)). Examples without a usable answer (v2.0 impossible questions,
 * answers whose text is not in the context) get (0, 0) in every window, as
 * run_qa.py labels an empty answer list. For v1.1 data a trainer should
 * leave out the windows of examples with train_answer < 0 and
 * !is_impossible (their answer text is not in the context, so (0, 0) would
 * teach "no answer" for a question that has one); features_trainable()
 * says which: every window except those of examples that have answers of
 * which none is usable. */
#ifndef BERTC_FEATURES_H
#define BERTC_FEATURES_H

#include "data/squad.h"
#include "text/tokenizer.h"

#include <stdint.h>

typedef struct {
    int max_seq_length;   /* T, default 384 */
    int doc_stride;       /* default 128; must be below T */
    int max_query_length; /* 0 = no truncation of the question (run_qa.py); else its first N tokens */
    /* SQuAD 2.0 (--version-2-with-negative): a question marked is_impossible
     * is labelled (0, 0), [CLS], in every window even when its answers list
     * is not empty (as run_squad.py; run_qa.py labels from the answers, and
     * SQuAD 2.0's unanswerable questions have none, so both agree on real
     * v2 data), and is trained on. The windows and the tokens (the cache)
     * do not depend on it. */
    int version_2_with_negative;
} feature_opts;

/* The tokenisation the features are made from (what the cache stores). */
typedef struct features_tokens features_tokens;

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
    features_tokens *tokens;  /* kept for features_cache_save; owned */
    int version_2_with_negative; /* the labelling used (feature_opts) */
} features;

/* nthreads <= 0 means all cores. Deterministic whatever the thread count.
 * Each context is tokenised once, however many questions share it. */
int features_build(const squad_data *d, const tokenizer *tok, const feature_opts *o, int nthreads, features *out);
void features_free(features *f);
/* Checks the options (ERR_INPUT naming the bad one). */
int features_check_opts(const feature_opts *o);
/* 1 when window i should be trained on (see the opening comment; with
 * version_2_with_negative also every window of an is_impossible question). */
int features_trainable(const features *f, const squad_data *d, int i);

/* Features cache: a versioned binary file with a CRC, keyed by the data
 * hash, the vocab hash, lower_case and the options. features_cache_load
 * returns 0 and fills *out on a hit, 1 on a miss (missing, stale or damaged:
 * the reason is logged and left in err_msg() with err_code() 0), or an
 * error code. It stores the tokenisation (per
 * context and per question), from which the windows and labels are rebuilt
 * on load: that is the slow part, and the file stays small.
 * features_cache_save writes atomically; f must come from features_build or
 * features_cache_load. */
int features_cache_load(const char *path, const squad_data *d, const tokenizer *tok, const feature_opts *o, features *out);
int features_cache_save(const char *path, const squad_data *d, const tokenizer *tok, const feature_opts *o, const features *f);
/* Loads from the cache when it is valid, else builds and saves it (a failed
 * save is logged, not an error). path NULL: no cache. *hit (may be NULL) says
 * which happened. */
int features_load_or_build(const char *path, const squad_data *d, const tokenizer *tok, const feature_opts *o,
                           int nthreads, features *out, int *hit);

#endif
