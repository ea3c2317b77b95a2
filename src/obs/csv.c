/* A small in-place CSV reader (see csv.h). */
#include "obs/csv.h"
#include "core/alloc.h"
#include "core/err.h"
#include "core/fileio.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Splits one record starting at *pp into cells (unquoting in place);
 * returns the number of cells (up to cap are stored) and advances *pp past
 * the line end. A quoted cell may span lines. */
static int split_record(char **pp, char *end, char **cells, int cap, size_t *lines)
{
    char *p = *pp;
    int n = 0;
    for (;;) {
        char *out = p, *start = p;
        if (p < end && *p == '"') {
            p++;
            for (;;) {
                if (p >= end) break;
                if (*p == '"') {
                    if (p + 1 < end && p[1] == '"') {
                        *out++ = '"';
                        p += 2;
                        continue;
                    }
                    p++;
                    break;
                }
                if (*p == '\n') (*lines)++;
                *out++ = *p++;
            }
            /* text after the closing quote up to the separator is kept */
            while (p < end && *p != ',' && *p != '\n') *out++ = *p++;
        } else {
            while (p < end && *p != ',' && *p != '\n') p++;
            out = p;
        }
        char sep = p < end ? *p : '\n';
        if (out > start && out[-1] == '\r') out--;
        if (n < cap) cells[n] = start;
        n++;
        *out = 0; /* safe: out <= p, and p is a separator, the end, or the byte after the data */
        if (p < end) p++;
        if (sep == '\n') break;
    }
    *pp = p;
    return n;
}

static int blank_line(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\r')) p++;
    return p >= end || *p == '\n';
}

int csv_parse(char *text, size_t len, int own, const char *what, csv_table *t)
{
    memset(t, 0, sizeof *t);
    if (own) t->data = text;
    char *p = text, *end = text + len;
    size_t line = 1;
    while (p < end && blank_line(p, end)) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        p = nl ? nl + 1 : end;
        line++;
    }
    if (p >= end) {
        err_set(ERR_INPUT, "%s: empty file (no header line)", what);
        csv_free(t);
        return ERR_INPUT;
    }
    enum { MAXCOLS = 256 };
    char *hdr[MAXCOLS];
    size_t hline = line;
    int nh = split_record(&p, end, hdr, MAXCOLS, &line);
    line++;
    /* messages first: the names point into the text that csv_free releases */
    int bad = 0;
    if (nh > MAXCOLS) bad = err_set(ERR_INPUT, "%s:%zu: %d columns in the header (at most %d)", what, hline, nh, MAXCOLS);
    for (int i = 0; i < nh && !bad; i++) {
        if (!hdr[i][0]) bad = err_set(ERR_INPUT, "%s:%zu: column %d of the header has no name", what, hline, i + 1);
        for (int j = 0; j < i && !bad; j++)
            if (!strcmp(hdr[i], hdr[j]))
                bad = err_set(ERR_INPUT, "%s:%zu: column '%.64s' appears twice in the header", what, hline, hdr[i]);
    }
    if (bad) {
        csv_free(t);
        return bad;
    }
    t->ncols = nh;
    t->names = xmalloc(sizeof(char *) * (size_t)nh);
    memcpy(t->names, hdr, sizeof(char *) * (size_t)nh);
    size_t cap = 0;
    char **row = xmalloc(sizeof(char *) * (size_t)nh);
    while (p < end) {
        if (blank_line(p, end)) {
            char *nl = memchr(p, '\n', (size_t)(end - p));
            p = nl ? nl + 1 : end;
            line++;
            continue;
        }
        size_t this_line = line;
        int n = split_record(&p, end, row, nh, &line);
        line++;
        if (n != nh) {
            if (!t->bad_rows) t->first_bad_line = this_line;
            t->bad_rows++;
            continue;
        }
        if (t->nrows == cap) {
            cap = cap ? cap * 2 : 256;
            t->cells = xrealloc(t->cells, mul_size(mul_size(cap, (size_t)nh), sizeof(char *)));
        }
        memcpy(t->cells + t->nrows * (size_t)nh, row, sizeof(char *) * (size_t)nh);
        t->nrows++;
    }
    free(row);
    return 0;
}

int csv_read(const char *path, csv_table *t)
{
    memset(t, 0, sizeof *t);
    char *data;
    size_t len;
    if (file_read_all(path, &data, &len)) return err_code() ? err_code() : ERR_INPUT;
    return csv_parse(data, len, 1, path, t);
}

void csv_free(csv_table *t)
{
    free(t->data);
    free(t->names);
    free(t->cells);
    memset(t, 0, sizeof *t);
}

int csv_col(const csv_table *t, const char *name)
{
    for (int i = 0; i < t->ncols; i++)
        if (!strcmp(t->names[i], name)) return i;
    return -1;
}

const char *csv_cell(const csv_table *t, size_t row, int col)
{
    if (col < 0 || col >= t->ncols || row >= t->nrows) return "";
    return t->cells[row * (size_t)t->ncols + (size_t)col];
}

double csv_num(const csv_table *t, size_t row, int col)
{
    const char *s = csv_cell(t, row, col);
    while (*s == ' ' || *s == '\t') s++;
    if (!*s) return NAN;
    char *e;
    double v = strtod(s, &e);
    while (*e == ' ' || *e == '\t') e++;
    return *e ? NAN : v;
}

void csv_put_cell(FILE *f, const char *s)
{
    if (!strpbrk(s, ",\"\n\r")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}
