/* (context, question) pairs -> squad_data. */
#include "infer/adhoc.h"

#include "core/alloc.h"
#include "core/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int utf8_seq_len(const unsigned char *s, size_t n)
{
    if (!n) return 0;
    if (s[0] < 0x80) return 1;
    int len = s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : s[0] >= 0xe0 && s[0] < 0xf0 ? 3 : s[0] >= 0xc2 && s[0] < 0xe0 ? 2 : 0;
    if (!len || (size_t)len > n) return 0;
    for (int i = 1; i < len; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    uint32_t c = len == 2 ? (s[0] & 0x1fu) : len == 3 ? (s[0] & 0x0fu) : (s[0] & 0x07u);
    for (int i = 1; i < len; i++) c = (c << 6) | (s[i] & 0x3fu);
    if ((len == 3 && (c < 0x800 || (c >= 0xd800 && c <= 0xdfff))) || (len == 4 && (c < 0x10000 || c > 0x10ffff))) return 0;
    return len;
}

int utf8_find_invalid(const char *s, size_t n, size_t *bad_at)
{
    for (size_t i = 0; i < n;) {
        int l = utf8_seq_len((const unsigned char *)s + i, n - i);
        if (!l || s[i] == 0) {
            if (bad_at) *bad_at = i;
            return 1;
        }
        i += (size_t)l;
    }
    return 0;
}

int adhoc_data(squad_data *d, int n, const char *const *contexts, const size_t *lens, const char *const *questions,
               const char *const *ids, const char *what)
{
    memset(d, 0, sizeof *d);
    if (n < 1) return err_set(ERR_INPUT, "%s: no questions", what);
    for (int k = 0; k < n; k++) {
        size_t bad;
        if (utf8_find_invalid(contexts[k], lens[k], &bad)) {
            if (n > 1) return err_set(ERR_INPUT, "%s %d: invalid UTF-8 (or a NUL byte) at byte %zu", what, k, bad);
            return err_set(ERR_INPUT, "%s: invalid UTF-8 (or a NUL byte) at byte %zu", what, bad);
        }
    }
    d->contexts = xcalloc((size_t)n, sizeof *d->contexts);
    d->ex = xcalloc((size_t)n, sizeof *d->ex);
    d->version = xstrdup("");
    for (int k = 0; k < n; k++) {
        size_t len = lens[k];
        char *text = xmalloc(len + 1);
        memcpy(text, contexts[k], len);
        text[len] = 0;
        int32_t *cp = xmalloc((len + 1) * sizeof *cp);
        int ncp = 0;
        for (size_t i = 0; i < len;) {
            cp[ncp++] = (int32_t)i;
            i += (size_t)utf8_seq_len((const unsigned char *)text + i, len - i);
        }
        cp[ncp] = (int32_t)len;
        d->contexts[k] = (squad_context){text, len, ncp, cp};
        d->ncontexts++;
        char num[24];
        snprintf(num, sizeof num, "%d", k);
        d->ex[k].id = xstrdup(ids && ids[k] ? ids[k] : num);
        d->ex[k].question = xstrdup(questions[k]);
        d->ex[k].context = k;
        d->ex[k].train_answer = -1;
        d->n++;
    }
    return 0;
}
