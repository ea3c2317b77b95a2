/* BERT tokenizer: vocab.txt, BasicTokenizer + WordPiece, character offsets.
 *
 * Behaves as transformers' BertTokenizer / BertTokenizerFast (DESIGN.md,
 * Numerics): clean text, CJK spacing, lower case + NFD + strip Mn when
 * uncased, punctuation split, greedy longest-match WordPiece with "##",
 * [UNK] for words with no match or over 100 characters. Offsets are Unicode
 * code point indices into the original text, [begin, end), as
 * offset_mapping gives them. */
#ifndef BERTC_TOKENIZER_H
#define BERTC_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

typedef struct vocab vocab;

/* Splits on '\n' only (bert-base-chinese has tokens holding U+2028), as
 * transformers' load_vocab reads it. Errors: empty file, duplicate token,
 * invalid UTF-8, missing [PAD]/[UNK]/[CLS]/[SEP]; all name the file:line. */
int vocab_load(const char *path, vocab **out);
void vocab_free(vocab *v);
int vocab_size(const vocab *v);
/* id of the token (bytes tok[0..len)), or -1 when absent. */
int vocab_find(const vocab *v, const char *tok, size_t len);
const char *vocab_token(const vocab *v, int id);
int vocab_pad(const vocab *v);
int vocab_unk(const vocab *v);
int vocab_cls(const vocab *v);
int vocab_sep(const vocab *v);
/* Hash of the vocabulary file's bytes (features cache key). */
uint64_t vocab_hash(const vocab *v);

typedef struct {
    int32_t *ids;
    int32_t *begin, *end; /* code point offsets into the encoded text */
    int n, cap;
} token_list;

void token_list_clear(token_list *l);
void token_list_free(token_list *l);

typedef struct tokenizer tokenizer;

/* lower_case = 1 for uncased models (also strips accents, as BertTokenizer
 * does when strip_accents is unset). The tokenizer keeps a pointer to v. */
int tokenizer_create(tokenizer **out, const vocab *v, int lower_case);
void tokenizer_free(tokenizer *t);
const vocab *tokenizer_vocab(const tokenizer *t);
int tokenizer_lower_case(const tokenizer *t);
/* Appends the tokens of text[0..n) (UTF-8 bytes) to out; no [CLS]/[SEP].
 * Thread-safe: several threads may encode with one tokenizer at once.
 * Invalid UTF-8 bytes are treated as U+FFFD (and so dropped). */
int tokenizer_encode(const tokenizer *t, const char *text, size_t n, token_list *out);

#endif
