/* Character properties as the fast BERT tokenizer (tokenizers' BertNormalizer and BertPreTokenizer)
 * sees them: utf8proc's data, corrected by the generated tables in unicode_tables.c where the
 * tokenizer's own (older or newer) Unicode tables say otherwise.
 *
 * A code point of the original text is removed (control, format, private use, U+FFFD, NUL),
 * whitespace (becomes a word break), CJK (a word of its own), punctuation (a word of its own) or
 * other (part of a word). When lower casing, a character is replaced by its NFD decomposition;
 * nonspacing marks are dropped and the rest lower-cased, after canonical reordering by combining
 * class. Thread-safe; uni_init() is called by tokenizer_create and may be called again. */
#ifndef BERTC_UNICODE_H
#define BERTC_UNICODE_H

#include <stddef.h>
#include <stdint.h>

enum {
    UNI_OTHER = 0,
    UNI_REMOVED = 1,
    UNI_PUNCT = 2,
    UNI_SPACE = 3,
    UNI_CJK = 4,
};

#define UNI_MAXDECOMP 8
#define UNI_MAXLOWER 4

typedef struct {
    uint8_t cls;    /* UNI_* */
    uint8_t mn;     /* nonspacing mark: dropped when lower casing */
    uint8_t ccc;    /* canonical combining class as the tokenizer's NFD knows it */
    uint8_t simple; /* lower-cased normalization is the code point itself */
} uni_props;

void uni_init(void);
void uni_get(uint32_t cp, uni_props *p);
/* Canonical decomposition (NFD of the code point alone); returns the count (>= 1). */
int uni_decompose(uint32_t cp, uint32_t out[UNI_MAXDECOMP]);
/* Full lower-case mapping; returns the count (>= 1). */
int uni_lower(uint32_t cp, uint32_t out[UNI_MAXLOWER]);
/* What the lower-casing normalizer makes of cp alone: decompose, drop marks, reorder, lower.
 * Returns the count (0 when it is all marks); out needs UNI_MAXDECOMP * UNI_MAXLOWER. For tests. */
int uni_normalize_one(uint32_t cp, uint32_t *out);
/* Unicode version of the generated tables and of the utf8proc in use. */
const char *uni_tables_unicode_version(void);
const char *uni_runtime_unicode_version(void);

/* Decodes one UTF-8 sequence at s[0..n), n >= 1. Returns the bytes used (>= 1); an invalid or
 * truncated sequence gives U+FFFD for its longest valid prefix (at least one byte), as Python's
 * bytes.decode("utf-8", "replace") counts them. */
static inline int utf8_decode(const unsigned char *s, size_t n, uint32_t *cp)
{
    unsigned c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    int len;
    uint32_t v;
    unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
        v = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        v = c & 0x0F;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        v = c & 0x07;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else {
        *cp = 0xFFFD;
        return 1;
    }
    for (int i = 1; i < len; i++) {
        if ((size_t)i >= n || s[i] < lo || s[i] > hi) {
            *cp = 0xFFFD;
            return i;
        }
        v = (v << 6) | (s[i] & 0x3F);
        lo = 0x80;
        hi = 0xBF;
    }
    *cp = v;
    return len;
}

/* Encodes cp (< 0x110000) as UTF-8; returns the byte count. */
static inline int utf8_encode(uint32_t cp, char *out)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

#endif
