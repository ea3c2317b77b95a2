/* Reading a run dir's files: the one reader behind `bertc report`, the live
 * page (obs_http.h) and `bertc watch`, so the three show the same numbers.
 *
 *   metrics.csv   step,epoch,loss,lr,grad_norm,loss_scale,examples_per_s,elapsed_s
 *                 (columns found by name; missing ones are NULL series)
 *   eval.csv      step,[epoch,]exact_match,f1 (also em/EM/exact, F1, or these
 *                 columns inside metrics.csv on the evaluation rows)
 *   monitor.csv   monitor.h's columns
 *   info.csv      key,value (obs_open / obs_set_info)
 *   checkpoints/step-N/   complete checkpoints (a .tmp dir is a write in progress)
 *   restarts.csv  the supervisor's restarts
 *
 * A file that is missing is simply not loaded; one that cannot be parsed,
 * or has rows with the wrong number of cells, gives a line in notes (plain
 * text, one note per line) instead of an error: a killed run leaves a
 * half-written last line, and that is when one most wants to look. */
#ifndef BERTC_OBS_RUNDIR_H
#define BERTC_OBS_RUNDIR_H

#include "obs/csv.h"
#include "obs/svg.h"

#include <stddef.h>

typedef struct {
    csv_table t;
    int loaded;
} rundir_table;

typedef struct {
    const char *dir;
    rundir_table metrics, eval, monitor, info;
    sbuf notes;          /* plain-text lines */
    char first_err[512]; /* the first file that could not be read */
    /* metrics.csv (n rows; step is the row index when there is no step column) */
    double *step, *epoch, *loss, *lr, *gnorm, *scale, *eps, *elapsed, *skipped;
    size_t n;
    /* evaluations (ne rows) */
    double *estep, *em, *f1;
    size_t ne;
    /* monitor.csv (nm rows); t is the time since the first sample in the unit
     * tunit names (s, min or h: whichever suits the span); unix is unix_time */
    double *t, *unix_t, *util, *mutil, *mused, *mtotal, *temp, *power, *plimit, *cpu, *rss, *avail; /* GiB for memory */
    size_t nm;
    const char *tunit;
} rundir;

/* Loads what there is. ERR_INPUT only when dir is not a directory. */
int rundir_load(rundir *r, const char *dir);
void rundir_free(rundir *r);

/* A column of a loaded table as numbers (NaN where empty); NULL when the
 * table is not loaded or has no such column. malloc'ed. */
double *rundir_column(const rundir_table *s, const char *name);
/* info.csv's value of key (the last one wins), NULL when absent or empty. */
const char *rundir_info(const rundir *r, const char *key);
/* Complete checkpoint dirs under dir/checkpoints: their count, and the name
 * of the newest ("step-00001200", "" when none) in latest. */
int rundir_checkpoints(const char *dir, char *latest, size_t cap);
/* Supervisor restarts recorded in dir/restarts.csv. */
long rundir_restarts(const char *dir);

/* Small statistics over the finite values of v[0..n) (NaN when none). */
double rundir_last(const double *v, size_t n);
double rundir_max(const double *v, size_t n);
double rundir_mean(const double *v, size_t n);
/* The mean of the last (up to) want finite values of v (n values, or
 * NULL), newest first; *count says how many were taken (0: returns 0). */
double rundir_tail_mean(const double *v, size_t n, int want, int *count);
double rundir_median(const double *v, size_t n);
size_t rundir_count(const double *v, size_t n);

#endif
