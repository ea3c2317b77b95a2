/* BERT tokenizer: vocab.txt, BasicTokenizer + WordPiece, character offsets.
 *
 * Behaves as transformers' BertTokenizerFast (DESIGN.md, Numerics): clean
 * text, CJK spacing, lower case + NFD + strip Mn when uncased, punctuation
 * split, greedy longest-match WordPiece with "##", [UNK] for words with no
 * match or over 100 characters. Offsets are Unicode code point indices into
 * the original text, [begin, end), as offset_mapping gives them. Where the
 * slow Python BertTokenizer differs, the fast one is followed: its Unicode
 * tables (src/text/unicode_tables.c), accents stripped before lower casing,
 * U+2B820..U+2B91F not spaced as CJK, special tokens matched in the text. */
#ifndef BERTC_TOKENIZER_H
#define BERTC_TOKENIZER_H

#include "text/vocab.h"

#include <stddef.h>
#include <stdint.h>

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
/* Appends the tokens of text[0..n) (UTF-8 bytes) to out; no [CLS]/[SEP] are
 * added, but "[CLS]", "[SEP]", "[PAD]", "[UNK]" and "[MASK]" written in the
 * text are matched as those tokens, as the fast tokenizer does. Offsets are
 * code point indices into text; token_list's arrays grow as needed.
 * Thread-safe: several threads may encode with one tokenizer at once.
 * Invalid UTF-8 counts as U+FFFD (one per maximal invalid prefix, as Python's
 * decode(errors="replace")) and is dropped like U+FFFD. Errors: ERR_INPUT for
 * text over 2^31-1 bytes, ERR_RUNTIME when out of memory. */
int tokenizer_encode(const tokenizer *t, const char *text, size_t n, token_list *out);

/* Loads DIR/vocab.txt and the lower-case setting from DIR/tokenizer_config.json
 * (do_lower_case; 1 when the file or the field is absent), as
 * BertTokenizerFast.from_pretrained(DIR) would. Settings bertc cannot honour
 * (strip_accents different from do_lower_case, tokenize_chinese_chars false)
 * are errors naming the file. On success the caller frees both. */
int tokenizer_load_dir(const char *model_dir, vocab **v, tokenizer **t);

#endif
