/* Reading the binary reference files of tools/postprocess_ref.py and
 * tools/postprocess_v2_ref.py (little-endian fields, strings with a u16
 * length), and building the squad_data they describe. Shared by
 * test_postprocess.c and test_postprocess_squad2.c. */
#ifndef BERTC_TESTS_POSTPROCESS_REF_H
#define BERTC_TESTS_POSTPROCESS_REF_H

#include "data/squad.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#define PPREF_UNUSED __attribute__((unused))

typedef struct {
    const unsigned char *p, *end;
    int bad;
} reader;

PPREF_UNUSED static const void *take(reader *r, size_t n)
{
    if (r->bad || (size_t)(r->end - r->p) < n) {
        r->bad = 1;
        return NULL;
    }
    const void *q = r->p;
    r->p += n;
    return q;
}
PPREF_UNUSED static uint32_t rd_u32(reader *r) { uint32_t v = 0; const void *q = take(r, 4); if (q) memcpy(&v, q, 4); return v; }
PPREF_UNUSED static uint16_t rd_u16(reader *r) { uint16_t v = 0; const void *q = take(r, 2); if (q) memcpy(&v, q, 2); return v; }
PPREF_UNUSED static float rd_f32(reader *r) { float v = 0; const void *q = take(r, 4); if (q) memcpy(&v, q, 4); return v; }
PPREF_UNUSED static double rd_f64(reader *r) { double v = 0; const void *q = take(r, 8); if (q) memcpy(&v, q, 8); return v; }
PPREF_UNUSED static uint64_t rd_u64(reader *r) { uint64_t v = 0; const void *q = take(r, 8); if (q) memcpy(&v, q, 8); return v; }
PPREF_UNUSED static char *rd_str(reader *r)
{
    uint16_t n = rd_u16(r);
    const char *q = take(r, n);
    char *s = calloc(1, (size_t)n + 1);
    if (q) memcpy(s, q, n);
    return s;
}

PPREF_UNUSED static void set_context(squad_context *c, const char *text)
{
    c->text = strdup(text);
    c->nbytes = strlen(text);
    c->cp_byte = malloc(sizeof(int32_t) * (c->nbytes + 1));
    int n = 0;
    for (size_t i = 0; i < c->nbytes;) {
        int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)c->text + i, (utf8proc_ssize_t)(c->nbytes - i), &cp);
        c->cp_byte[n++] = (int32_t)i;
        i += k > 0 ? (size_t)k : 1;
    }
    c->cp_byte[n] = (int32_t)c->nbytes;
    c->ncp = n;
}

PPREF_UNUSED static void free_data(squad_data *d)
{
    for (int i = 0; i < d->n; i++) free(d->ex[i].id);
    for (int i = 0; i < d->ncontexts; i++) {
        free(d->contexts[i].text);
        free(d->contexts[i].cp_byte);
    }
    free(d->ex);
    free(d->contexts);
}

#endif
