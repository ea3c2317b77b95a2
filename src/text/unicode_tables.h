/* Generated tables (unicode_tables.c, made by tools/tokenizer_parity.py --tables): where the fast
 * tokenizer's Unicode data differs from utf8proc's. Only unicode.c reads them. */
#ifndef BERTC_UNICODE_TABLES_H
#define BERTC_UNICODE_TABLES_H

#include <stdint.h>

enum {
    UEX_CLASS = 1,  /* cls replaces the class from utf8proc's category */
    UEX_MN = 2,     /* mn replaces "category is Mn" */
    UEX_CCC0 = 4,   /* tokenizers' NFD does not know the combining class: 0 */
    UEX_DECOMP = 8, /* NFD is uni_pool[dec_at .. dec_at+dec_n) */
    UEX_LOWER = 16, /* lower case is uni_pool[low_at .. low_at+low_n) */
};

typedef struct {
    uint32_t cp;
    uint8_t flags, cls, mn;
    uint16_t dec_at;
    uint8_t dec_n;
    uint16_t low_at;
    uint8_t low_n;
} uni_exception;

extern const char uni_tables_version[];
extern const uni_exception uni_exceptions[]; /* sorted by cp */
extern const int uni_nexceptions;
extern const uint32_t uni_pool[];
extern const uint32_t uni_assigned[][2]; /* sorted, disjoint */
extern const int uni_nassigned;

#endif
