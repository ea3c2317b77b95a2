/* Growable text buffer (see sbuf.h). */
#include "core/sbuf.h"
#include "core/alloc.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sb_printf(sbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char tmp[512];
    int w = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (w < 0) return;
    if ((size_t)w < sizeof tmp) {
        sb_puts(b, tmp);
        return;
    }
    char *big = xmalloc((size_t)w + 1);
    va_start(ap, fmt);
    vsnprintf(big, (size_t)w + 1, fmt, ap);
    va_end(ap);
    sb_puts(b, big);
    free(big);
}

/* Appends s[0..n) and keeps the buffer NUL-terminated. */
static void sb_putn(sbuf *b, const char *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + n + 1) cap *= 2;
        b->p = xrealloc(b->p, cap);
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

void sb_puts(sbuf *b, const char *s) { sb_putn(b, s, strlen(s)); }

void sb_html(sbuf *b, const char *s)
{
    char tmp[2] = {0, 0};
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        switch (c) {
        case '&': sb_puts(b, "&amp;"); break;
        case '<': sb_puts(b, "&lt;"); break;
        case '>': sb_puts(b, "&gt;"); break;
        case '"': sb_puts(b, "&quot;"); break;
        case '\'': sb_puts(b, "&#39;"); break;
        default:
            if (c < 0x20 && c != '\n' && c != '\t') break; /* not allowed in HTML text */
            tmp[0] = (char)c;
            sb_puts(b, tmp);
        }
    }
}

void sb_json_string(sbuf *b, const char *s, sb_json_style style)
{
    sb_putn(b, "\"", 1);
    const char *run = s; /* the first byte not yet appended */
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        sb_putn(b, run, (size_t)(s - run));
        run = s + 1;
        const char *esc = NULL;
        if (c == '"') esc = "\\\"";
        else if (c == '\\') esc = "\\\\";
        else if (style == SB_JSON_PYTHON) {
            switch (c) {
            case '\b': esc = "\\b"; break;
            case '\f': esc = "\\f"; break;
            case '\n': esc = "\\n"; break;
            case '\r': esc = "\\r"; break;
            case '\t': esc = "\\t"; break;
            }
        }
        if (esc) sb_putn(b, esc, 2);
        else sb_printf(b, "\\u%04x", c);
    }
    sb_putn(b, run, (size_t)(s - run));
    sb_putn(b, "\"", 1);
}

void sb_free(sbuf *b)
{
    free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
}
