/* A growable text buffer: report.html, SVG charts and the safetensors header
 * are built in one. Always NUL-terminated once anything was appended; an
 * empty sbuf {0} is ready to use. Out of memory aborts (core/alloc.h). */
#ifndef BERTC_SBUF_H
#define BERTC_SBUF_H

#include <stddef.h>

typedef struct {
    char *p;
    size_t n, cap;
} sbuf;

void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sb_puts(sbuf *b, const char *s);
/* Appends s with &, <, >, " and ' escaped (and invalid control bytes dropped). */
void sb_html(sbuf *b, const char *s);
/* Appends s as a JSON string literal: quotes, \" \\ and \u00XX for control bytes. */
void sb_json_string(sbuf *b, const char *s);
void sb_free(sbuf *b);

#endif
