/* The inference queue of `bertc serve`: one worker thread owns the model
 * (the backends are not thread-safe); other threads submit jobs (the
 * windows of one request, features_build's layout) and are called back
 * when the job's logits are ready.
 *
 * Batching: the worker takes the oldest job, then waits up to wait_us
 * (from that job's arrival) for more, until the queued windows reach
 * max_tokens / T; it runs as many of them as the packing rule (pack_cut,
 * model/pack.h) puts into one piece of at most the model's max_B windows
 * and max_tokens tokens, a padded window counting T and a packed one its
 * real tokens (a long context's windows may span several forwards), and
 * scatters the logits back to their jobs. Every window is padded to T as
 * `bertc predict` pads it: the padding positions' logits take part in
 * postprocess_predictions' n-best selection, so cutting the padding would
 * change answers. A row's logits do not depend on the other rows of the
 * batch beyond float rounding (tests/serve/test_serve.c checks that the answers
 * are identical and the logits agree).
 *
 * A job that waited in the queue past its deadline is not run: it comes
 * back with status 504. serve_batcher_submit refuses (returns 1) when the
 * queued windows would exceed queue_limit. */
#ifndef BERTC_SERVE_BATCH_H
#define BERTC_SERVE_BATCH_H

#include "data/features.h"
#include "infer/qa_model.h"

#include <stdint.h>

typedef struct serve_job serve_job;
struct serve_job {
    const features *f;   /* the windows (f->T must be the model's T) */
    float *start, *end;  /* [f->n * T], filled by the worker */
    double deadline;     /* monotonic seconds; 0 = none */
    int status;          /* set before done(): 200, 504 (timed out in the queue) or 500 */
    char msg[256];       /* the reason when status != 200 */
    void (*done)(serve_job *job, void *arg); /* called on the worker thread, no lock held */
    void *arg;
    /* the batcher's */
    serve_job *next;
    int sent, finished;  /* windows put into a batch / whose logits are in */
    double t_submit;
};

typedef struct {
    int wait_us;       /* how long a batch may wait for more requests */
    int max_tokens;    /* tokens per forward (pack_cut's budget; at least one window) */
    int queue_limit;   /* windows waiting, at most */
} serve_batch_opts;

typedef struct serve_batcher serve_batcher;

/* Statistics for /metrics (a snapshot, under the batcher's lock). */
typedef struct {
    int queued_jobs, queued_windows;
    uint64_t forwards, windows, timeouts;
    uint64_t batch_hist[8];  /* forwards with <= 1, 2, 4, 8, 16, 32, 64, more windows */
    double forward_seconds;
} serve_batch_stats;

/* m must be started (qa_model_start) for max_B >= 1 rows of T; a forward
 * takes at most m->max_B windows (padded: min(max_tokens / T, m->max_B)).
 * Starts the worker. */
int serve_batcher_create(serve_batcher **out, qa_model *m, const serve_batch_opts *o);
/* Queues job (0), or returns 1 when the queue is full or the batcher is
 * stopping; called with job->f, start, end, deadline, done, arg set. */
int serve_batcher_submit(serve_batcher *b, serve_job *job);
/* Windows one padded forward takes (a packed one may take more short ones). */
int serve_batcher_rows(const serve_batcher *b);
void serve_batcher_stats(serve_batcher *b, serve_batch_stats *s);
/* Runs what is queued, then stops the worker and frees b. */
void serve_batcher_free(serve_batcher *b);

#endif
