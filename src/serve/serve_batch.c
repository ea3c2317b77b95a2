/* The inference queue and its worker thread (see serve_batch.h). */
#include "serve/serve_batch.h"

#include "core/alloc.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/philox.h"
#include "model/pack.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct serve_batcher {
    qa_model *m;
    serve_batch_opts o;
    int rows, T;       /* rows: the most windows a forward holds (the model's max_B) */
    int fill;          /* the windows a padded forward takes: the batch the worker waits for */
    int64_t budget;    /* tokens a forward may hold (pack_cut's max_tokens) */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    serve_job *head, *tail;
    int queued_jobs, queued_windows; /* windows not yet put into a batch */
    int stop;
    pthread_t th;
    int32_t *ids, *tt, *mask;
    float *st, *en;
    serve_job **slot_job; /* [rows] */
    int *slot_win;        /* [rows] */
    int *slot_len;        /* [rows]: the tokens each window counts for the cut */
    int32_t *cu;          /* [rows + 1]: --packing varlen's window offsets */
    serve_batch_stats stats;
};

static void wait_until(serve_batcher *b, double t)
{
    struct timespec ts;
    ts.tv_sec = (time_t)t;
    ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&b->cv, &b->mu, &ts);
}

static serve_job *pop_head(serve_batcher *b)
{
    serve_job *j = b->head;
    b->head = j->next;
    if (!b->head) b->tail = NULL;
    j->next = NULL;
    b->queued_jobs--;
    return j;
}

static void finish(serve_job *j, int status, const char *msg)
{
    j->status = status;
    snprintf(j->msg, sizeof j->msg, "%s", msg ? msg : "");
    j->done(j, j->arg);
}

/* --packing varlen: the rows' real tokens concatenated (no padding
 * computed), the logits put back at each window's positions with -inf at
 * its padding, as `bertc predict --packing varlen` has them. */
static int forward_packed(serve_batcher *b, int nrow, philox_stream rng)
{
    int T = b->T;
    pack_rows p = pack_rows_begin(b->ids, b->tt, b->cu);
    for (int r = 0; r < nrow; r++) {
        const features *f = b->slot_job[r]->f;
        size_t src = (size_t)b->slot_win[r] * (size_t)T;
        pack_rows_add(&p, f->input_ids + src, f->token_type_ids + src, pack_window_len(f->attention_mask + src, T));
    }
    bert_batch bb = {nrow, T, b->ids, b->tt, NULL, NULL, NULL, b->cu, 0};
    int rc = bert_forward(b->m->model, &bb, 0.0f, 0.0f, rng, NULL, b->st, b->en);
    for (int r = 0; r < nrow; r++) {
        serve_job *j = b->slot_job[r];
        size_t dst = (size_t)b->slot_win[r] * (size_t)T;
        int l = b->cu[r + 1] - b->cu[r];
        if (rc) {
            j->status = 500;
            continue;
        }
        pack_unpack_row(b->st + b->cu[r], l, T, j->start + dst);
        pack_unpack_row(b->en + b->cu[r], l, T, j->end + dst);
    }
    return rc;
}

/* Removes job j (prev: the one before it, NULL at the head) from the queue. */
static void unlink_job(serve_batcher *b, serve_job *prev, serve_job *j)
{
    if (prev) prev->next = j->next;
    else b->head = j->next;
    if (b->tail == j) b->tail = prev;
    j->next = NULL;
    b->queued_jobs--;
}

/* The windows of the next forward, from the oldest jobs on, into slot_job
 * and slot_win: as many as the packing rule (pack_cut) puts into one piece
 * of the model's max_B windows and the token budget, a padded window
 * counting T tokens and a packed one its real tokens. A job that waited
 * past its deadline before any of its windows ran goes to *expired
 * instead. Under b->mu. */
static int take_windows(serve_batcher *b, double now, serve_job **expired)
{
    int n = 0;
    serve_job *prev = NULL;
    for (serve_job *j = b->head, *next; j && n < b->rows; j = next) {
        next = j->next;
        if (j->sent == 0 && j->deadline > 0 && now > j->deadline) {
            unlink_job(b, prev, j);
            b->queued_windows -= j->f->n;
            b->stats.timeouts++;
            j->next = *expired;
            *expired = j;
            continue;
        }
        for (int w = j->sent; w < j->f->n && n < b->rows; w++, n++) {
            b->slot_job[n] = j;
            b->slot_win[n] = w;
            b->slot_len[n] = b->m->packing ? pack_window_len(j->f->attention_mask + (size_t)w * (size_t)b->T, b->T)
                                           : b->T;
        }
        prev = j;
    }
    n = pack_cut(b->slot_len, n, b->rows, b->budget, NULL);
    /* the windows taken are the first of the queue's: a job is done with when its last one is */
    for (int r = 0; r < n; r++) {
        serve_job *j = b->slot_job[r];
        j->sent++;
        b->queued_windows--;
        if (j->sent == j->f->n) pop_head(b);
    }
    return n;
}

static void *worker(void *arg)
{
    serve_batcher *b = arg;
    int T = b->T;
    philox_stream rng = {0, 0, 0};
    pthread_mutex_lock(&b->mu);
    for (;;) {
        while (!b->head && !b->stop) pthread_cond_wait(&b->cv, &b->mu);
        if (!b->head) break;
        double t_end = b->head->t_submit + 1e-6 * b->o.wait_us;
        while (!b->stop && b->queued_windows < b->fill && clock_now_s() < t_end) wait_until(b, t_end);
        serve_job *expired = NULL;
        int nrow = take_windows(b, clock_now_s(), &expired);
        pthread_mutex_unlock(&b->mu);
        while (expired) {
            serve_job *j = expired;
            expired = j->next;
            finish(j, 504, "the request waited in the queue past its timeout (--timeout-ms)");
        }
        int rc = 0;
        double t0 = clock_now_s();
        if (nrow > 0 && b->m->packing) {
            rc = forward_packed(b, nrow, rng);
        } else if (nrow > 0) {
            for (int r = 0; r < nrow; r++) {
                const features *f = b->slot_job[r]->f;
                size_t src = (size_t)b->slot_win[r] * (size_t)T, dst = (size_t)r * (size_t)T;
                memcpy(b->ids + dst, f->input_ids + src, (size_t)T * sizeof *b->ids);
                memcpy(b->tt + dst, f->token_type_ids + src, (size_t)T * sizeof *b->tt);
                memcpy(b->mask + dst, f->attention_mask + src, (size_t)T * sizeof *b->mask);
            }
            bert_batch bb = {nrow, T, b->ids, b->tt, b->mask, NULL, NULL, NULL, 0};
            rc = bert_forward(b->m->model, &bb, 0.0f, 0.0f, rng, NULL, b->st, b->en);
            for (int r = 0; r < nrow; r++) {
                serve_job *j = b->slot_job[r];
                size_t src = (size_t)r * (size_t)T, dst = (size_t)b->slot_win[r] * (size_t)T;
                if (!rc) {
                    memcpy(j->start + dst, b->st + src, (size_t)T * sizeof *j->start);
                    memcpy(j->end + dst, b->en + src, (size_t)T * sizeof *j->end);
                } else {
                    j->status = 500;
                }
            }
        }
        double dt = clock_now_s() - t0;
        char emsg[200];
        snprintf(emsg, sizeof emsg, "inference failed: %s", rc ? err_msg() : "");
        /* Completion: the last row of a job in this batch whose windows are all in. */
        for (int r = 0; r < nrow; r++) {
            serve_job *j = b->slot_job[r];
            j->finished++;
            if (j->finished == j->f->n) finish(j, j->status == 500 ? 500 : 200, j->status == 500 ? emsg : NULL);
        }
        pthread_mutex_lock(&b->mu);
        if (nrow > 0) {
            b->stats.forwards++;
            b->stats.windows += (uint64_t)nrow;
            b->stats.forward_seconds += dt;
            int h = 0;
            while (h < 7 && nrow > (1 << h)) h++;
            b->stats.batch_hist[h]++;
        }
    }
    pthread_mutex_unlock(&b->mu);
    return NULL;
}

int serve_batcher_create(serve_batcher **out, qa_model *m, const serve_batch_opts *o)
{
    serve_batcher *b = xcalloc(1, sizeof *b);
    b->m = m;
    b->o = *o;
    b->T = m->T;
    b->rows = m->max_B;
    b->fill = o->max_tokens / m->T;
    if (b->fill < 1) b->fill = 1;
    if (b->fill > b->rows) b->fill = b->rows;
    b->budget = o->max_tokens;
    if (m->packing && bert_model_max_tokens(m->model) < b->budget) b->budget = bert_model_max_tokens(m->model);
    size_t n = (size_t)b->rows * (size_t)b->T;
    b->ids = xmalloc(n * sizeof *b->ids);
    b->tt = xmalloc(n * sizeof *b->tt);
    b->mask = xmalloc(n * sizeof *b->mask);
    b->st = xmalloc(n * sizeof *b->st);
    b->en = xmalloc(n * sizeof *b->en);
    b->slot_job = xcalloc((size_t)b->rows, sizeof *b->slot_job);
    b->slot_win = xcalloc((size_t)b->rows, sizeof *b->slot_win);
    b->slot_len = xcalloc((size_t)b->rows, sizeof *b->slot_len);
    b->cu = xmalloc(((size_t)b->rows + 1) * sizeof *b->cu);
    pthread_mutex_init(&b->mu, NULL);
    clock_cond_init(&b->cv);
    int e = pthread_create(&b->th, NULL, worker, b);
    if (e) {
        pthread_cond_destroy(&b->cv);
        pthread_mutex_destroy(&b->mu);
        free(b->ids), free(b->tt), free(b->mask), free(b->st), free(b->en), free(b->slot_job), free(b->slot_win), free(b->slot_len), free(b->cu);
        free(b);
        return err_set(ERR_RUNTIME, "serve: cannot start the inference thread: %s", strerror(e));
    }
    *out = b;
    return 0;
}

int serve_batcher_rows(const serve_batcher *b) { return b->fill; }

int serve_batcher_submit(serve_batcher *b, serve_job *job)
{
    pthread_mutex_lock(&b->mu);
    if (b->stop || (b->queued_windows > 0 && b->queued_windows + job->f->n > b->o.queue_limit)) {
        pthread_mutex_unlock(&b->mu);
        return 1;
    }
    job->next = NULL;
    job->sent = job->finished = 0;
    job->status = 0;
    job->msg[0] = 0;
    job->t_submit = clock_now_s();
    if (b->tail) b->tail->next = job;
    else b->head = job;
    b->tail = job;
    b->queued_jobs++;
    b->queued_windows += job->f->n;
    pthread_cond_signal(&b->cv);
    pthread_mutex_unlock(&b->mu);
    return 0;
}

void serve_batcher_stats(serve_batcher *b, serve_batch_stats *s)
{
    pthread_mutex_lock(&b->mu);
    *s = b->stats;
    s->queued_jobs = b->queued_jobs;
    s->queued_windows = b->queued_windows;
    pthread_mutex_unlock(&b->mu);
}

void serve_batcher_free(serve_batcher *b)
{
    if (!b) return;
    pthread_mutex_lock(&b->mu);
    b->stop = 1;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
    pthread_join(b->th, NULL);
    pthread_cond_destroy(&b->cv);
    pthread_mutex_destroy(&b->mu);
    free(b->ids), free(b->tt), free(b->mask), free(b->st), free(b->en), free(b->slot_job), free(b->slot_win), free(b->slot_len), free(b->cu);
    free(b);
}
