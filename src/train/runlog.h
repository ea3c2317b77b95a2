/* The run's CSV files (metrics.csv, eval.csv): a header line, then rows
 * whose first cell is the optimizer step. A resumed run keeps the rows up to
 * its checkpoint's step and drops the rest (the rows a killed process wrote
 * after its last checkpoint, which the resumed run writes again), so the
 * file ends up as if the run had never stopped. */
#ifndef BERTC_RUNLOG_H
#define BERTC_RUNLOG_H

#include <stdint.h>
#include <stdio.h>

typedef struct {
    FILE *f;
    char path[4096];
} runlog;

/* Opens PATH for appending rows. keep_upto < 0: a new file with the
 * header. Otherwise the existing rows with step <= keep_upto are kept (the
 * file is rewritten atomically first); a file with another header, or none,
 * starts over. */
int runlog_open(runlog *l, const char *path, const char *header, int64_t keep_upto);
/* One row (the text without the newline), flushed. */
int runlog_row(runlog *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* fsync (at checkpoints). */
int runlog_sync(runlog *l);
void runlog_close(runlog *l);

#endif
