/* nltk's NLTKWordTokenizer (the word tokenizer of nltk.word_tokenize) on a
 * string of code points: calls emit for each token, in order. Used by the
 * CMRC 2018 metric; see treebank.c for what differs from nltk. */
#ifndef BERTC_TREEBANK_H
#define BERTC_TREEBANK_H

#include "eval/pytext.h"

#include <stddef.h>
#include <stdint.h>

typedef void (*treebank_emit)(void *ctx, const int32_t *token, size_t n);
void treebank_tokenize(const int32_t *text, size_t n, treebank_emit emit, void *ctx);

#endif
