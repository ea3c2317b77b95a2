/* A growable text buffer: report.html, SVG charts, the safetensors header
 * and the JSON of predictions, serve and the live page are built in one.
 * Always NUL-terminated once anything was appended; an empty sbuf {0} is
 * ready to use. Out of memory aborts (core/alloc.h). */
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

/* How sb_json_string escapes. Both styles write \" and \\ and keep every
 * byte from 0x20 up as it is (UTF-8 stays UTF-8, DEL included); they differ
 * in the control bytes below 0x20. */
typedef enum {
    SB_JSON_UNICODE, /* every control byte as \u00xx */
    SB_JSON_PYTHON,  /* \b \f \n \r \t, the others as \u00xx: Python's json.dumps(s, ensure_ascii=False) */
} sb_json_style;
/* Appends s as a JSON string literal, quotes included. */
void sb_json_string(sbuf *b, const char *s, sb_json_style style);
void sb_free(sbuf *b);

#endif
