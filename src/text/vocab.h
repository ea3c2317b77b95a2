/* The WordPiece vocabulary (vocab.txt): tokens and their ids, the special
 * tokens, and the file's hash. The tokenizer (tokenizer.h) reads it; the
 * table's layout is private to vocab.c and tokenizer.c (vocab_internal.h). */
#ifndef BERTC_VOCAB_H
#define BERTC_VOCAB_H

#include <stddef.h>
#include <stdint.h>

typedef struct vocab vocab;

/* Splits on '\n' only (bert-base-chinese has tokens holding U+2028); a '\r'
 * before the '\n' is dropped (CRLF files), as transformers' loaders do.
 * Errors: empty file, duplicate token, invalid UTF-8, NUL byte, missing
 * [PAD]/[UNK]/[CLS]/[SEP]; all name the file (and line where there is one). */
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
/* id of [MASK], or -1 when the vocabulary has none (it is optional). */
int vocab_mask(const vocab *v);
/* Hash of the vocabulary file's bytes (features cache key). */
uint64_t vocab_hash(const vocab *v);

#endif
