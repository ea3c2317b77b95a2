/* Reading the run's CSV files (metrics.csv, eval.csv, monitor.csv,
 * info.csv) for the report.
 *
 * The first line is the header. Cells may be quoted ("a, b" with "" for a
 * quote). The reader is lenient on purpose: a run that was killed leaves a
 * half-written last line and a report of a crashed run is exactly when one
 * is wanted, so a row with the wrong number of cells is skipped and counted
 * (bad_rows, first_bad_line) instead of failing the whole file. */
#ifndef BERTC_OBS_CSV_H
#define BERTC_OBS_CSV_H

#include <stddef.h>
#include <stdio.h>

typedef struct {
    char *data;     /* the file; cells are NUL-terminated in place */
    int ncols;
    size_t nrows;
    char **names;   /* [ncols] */
    char **cells;   /* [nrows * ncols] */
    size_t bad_rows;
    size_t first_bad_line; /* 1-based, 0 when none */
} csv_table;

/* ERR_INPUT (file:line) when the file is missing, empty or has no usable
 * header; the table is zeroed on failure. */
int csv_read(const char *path, csv_table *t);
/* Parses text[0..len) (modified in place, and text[len] must be writable:
 * the table keeps pointing into it and takes ownership when own is 1).
 * what names it in messages. */
int csv_parse(char *text, size_t len, int own, const char *what, csv_table *t);
void csv_free(csv_table *t);

/* Column index by name (exact, case-sensitive), -1 when absent. */
int csv_col(const csv_table *t, const char *name);
/* "" for col < 0. */
const char *csv_cell(const csv_table *t, size_t row, int col);
/* The cell as a number; NaN when col < 0, empty or not a number. */
double csv_num(const csv_table *t, size_t row, int col);

/* Writes s as one CSV cell, quoted when it holds a comma, quote or newline. */
void csv_put_cell(FILE *f, const char *s);

#endif
