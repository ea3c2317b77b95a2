/* TensorBoard event files: hand-written protobuf encoding and TFRecord
 * framing (see tb.h for the message layout). */
#define _GNU_SOURCE
#include "obs/tb.h"
#include "core/alloc.h"
#include "core/clock.h"
#include "core/crc32c.h"
#include "core/err.h"
#include "core/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct tb_writer {
    FILE *f;
    char path[4096];
    pthread_mutex_t lock;
    double last_flush;
    int err;          /* first error; later writes are dropped */
    char errmsg[4400];
};

/* A small writer over a caller's buffer: counts every byte, stores those
 * that fit, so one pass gives both the size and the encoding. */
typedef struct {
    uint8_t *p;
    size_t cap, n;
} pbuf;

static void put_byte(pbuf *b, uint8_t v)
{
    if (b->n < b->cap) b->p[b->n] = v;
    b->n++;
}

static void put_varint(pbuf *b, uint64_t v)
{
    while (v >= 0x80) {
        put_byte(b, (uint8_t)(v | 0x80));
        v >>= 7;
    }
    put_byte(b, (uint8_t)v);
}

static void put_le(pbuf *b, uint64_t v, int nbytes)
{
    for (int i = 0; i < nbytes; i++) put_byte(b, (uint8_t)(v >> (8 * i)));
}

static size_t varint_len(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

enum { WT_VARINT = 0, WT_FIXED64 = 1, WT_LEN = 2, WT_FIXED32 = 5 };

static void put_key(pbuf *b, int field, int wire) { put_varint(b, (uint64_t)field << 3 | (uint64_t)wire); }

static void put_double(pbuf *b, int field, double v)
{
    uint64_t u;
    memcpy(&u, &v, 8);
    put_key(b, field, WT_FIXED64);
    put_le(b, u, 8);
}

static void put_bytes(pbuf *b, int field, const void *data, size_t n)
{
    put_key(b, field, WT_LEN);
    put_varint(b, n);
    for (size_t i = 0; i < n; i++) put_byte(b, ((const uint8_t *)data)[i]);
}

/* Event header fields shared by every event: wall_time and step. A zero
 * step is left out, as protobuf does for default values. */
static void put_event_head(pbuf *b, double wall_time, int64_t step)
{
    put_double(b, 1, wall_time);
    if (step != 0) {
        put_key(b, 2, WT_VARINT);
        put_varint(b, (uint64_t)step); /* negative int64 is a 10-byte varint, as protobuf writes it */
    }
}

size_t tb_encode_version_event(uint8_t *buf, size_t cap, double wall_time)
{
    pbuf b = {buf, cap, 0};
    static const char version[] = "brain.Event:2";
    put_event_head(&b, wall_time, 0);
    put_bytes(&b, 3, version, sizeof version - 1);
    return b.n;
}

size_t tb_encode_scalar_event(uint8_t *buf, size_t cap, double wall_time, int64_t step, const char *tag, float value)
{
    pbuf b = {buf, cap, 0};
    size_t tag_len = strlen(tag);
    /* Value { tag = 1; simple_value = 2 } */
    size_t value_len = 1 + varint_len(tag_len) + tag_len + 1 + 4;
    /* Summary { value = 1 } */
    size_t summary_len = 1 + varint_len(value_len) + value_len;
    put_event_head(&b, wall_time, step);
    put_key(&b, 5, WT_LEN);
    put_varint(&b, summary_len);
    put_key(&b, 1, WT_LEN);
    put_varint(&b, value_len);
    put_bytes(&b, 1, tag, tag_len);
    uint32_t u;
    memcpy(&u, &value, 4);
    put_key(&b, 2, WT_FIXED32);
    put_le(&b, u, 4);
    return b.n;
}

size_t tb_encode_session_start(uint8_t *buf, size_t cap, double wall_time, int64_t step)
{
    pbuf b = {buf, cap, 0};
    put_event_head(&b, wall_time, step);
    put_key(&b, 7, WT_LEN);
    put_varint(&b, 2);
    put_key(&b, 1, WT_VARINT);
    put_varint(&b, 1); /* SessionLog.START */
    return b.n;
}

size_t tb_frame(uint8_t *buf, size_t cap, const uint8_t *data, size_t n)
{
    if (cap < n + 16) return n + 16;
    uint8_t len[8];
    for (int i = 0; i < 8; i++) len[i] = (uint8_t)((uint64_t)n >> (8 * i));
    uint32_t lcrc = crc32c_mask(crc32c(len, 8));
    uint32_t dcrc = crc32c_mask(crc32c(data, n));
    memcpy(buf, len, 8);
    for (int i = 0; i < 4; i++) buf[8 + i] = (uint8_t)(lcrc >> (8 * i));
    memmove(buf + 12, data, n);
    for (int i = 0; i < 4; i++) buf[12 + n + i] = (uint8_t)(dcrc >> (8 * i));
    return n + 16;
}

/* Writes one framed record; the caller holds the lock. */
static int write_record(tb_writer *w, const uint8_t *data, size_t n)
{
    if (w->err) return w->err;
    uint8_t stack[512];
    uint8_t *rec = n + 16 <= sizeof stack ? stack : malloc(n + 16);
    if (!rec) {
        snprintf(w->errmsg, sizeof w->errmsg, "%s: out of memory for a %zu-byte record", w->path, n + 16);
        return w->err = err_set(ERR_RUNTIME, "%s", w->errmsg);
    }
    tb_frame(rec, n + 16, data, n);
    size_t wrote = fwrite(rec, 1, n + 16, w->f);
    if (rec != stack) free(rec);
    if (wrote != n + 16) {
        snprintf(w->errmsg, sizeof w->errmsg, "%s: write failed: %s", w->path, strerror(errno));
        return w->err = err_set(ERR_RUNTIME, "%s", w->errmsg);
    }
    double t = clock_unix_s();
    if (t - w->last_flush > 2.0) {
        w->last_flush = t;
        if (fflush(w->f) != 0) {
            snprintf(w->errmsg, sizeof w->errmsg, "%s: write failed: %s", w->path, strerror(errno));
            return w->err = err_set(ERR_RUNTIME, "%s", w->errmsg);
        }
    }
    return 0;
}

/* Encodes into a stack buffer, or the heap for a very long tag. */
static int write_encoded(tb_writer *w, size_t need, size_t (*enc)(uint8_t *, size_t, void *), void *arg)
{
    uint8_t stack[256];
    uint8_t *b = need <= sizeof stack ? stack : malloc(need);
    if (!b) return err_set(ERR_RUNTIME, "%s: out of memory", w->path);
    enc(b, need, arg);
    pthread_mutex_lock(&w->lock);
    int rc = write_record(w, b, need);
    pthread_mutex_unlock(&w->lock);
    if (b != stack) free(b);
    return rc;
}

typedef struct {
    double wall_time;
    int64_t step;
    const char *tag;
    float value;
} scalar_args;

static size_t enc_scalar(uint8_t *b, size_t cap, void *p)
{
    scalar_args *a = p;
    return tb_encode_scalar_event(b, cap, a->wall_time, a->step, a->tag, a->value);
}

static size_t enc_version(uint8_t *b, size_t cap, void *p)
{
    return tb_encode_version_event(b, cap, ((scalar_args *)p)->wall_time);
}

static size_t enc_session(uint8_t *b, size_t cap, void *p)
{
    scalar_args *a = p;
    return tb_encode_session_start(b, cap, a->wall_time, a->step);
}

int tb_open(tb_writer **out, const char *dir)
{
    *out = NULL;
    if (mkdir_p(dir)) return err_wrap(ERR_RUNTIME, "tb_open");
    char host[256] = "localhost";
    if (gethostname(host, sizeof host - 1) != 0 || !host[0]) snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = 0;
    for (char *c = host; *c; c++)
        if (*c == '/') *c = '_';
    long t = (long)time(NULL);
    tb_writer *w = xcalloc(1, sizeof *w);
    int fd = -1;
    for (int k = 0; k < 1000 && fd < 0; k++) {
        char name[400];
        if (k == 0) snprintf(name, sizeof name, "events.out.tfevents.%010ld.%s", t, host);
        else snprintf(name, sizeof name, "events.out.tfevents.%010ld.%s.%d", t, host, k);
        path_join(w->path, sizeof w->path, dir, name);
        fd = open(w->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        int rc = err_set(ERR_RUNTIME, "tb_open: %s: %s", w->path, strerror(errno));
        free(w);
        return rc;
    }
    w->f = fdopen(fd, "wb");
    if (!w->f) {
        close(fd);
        free(w);
        return err_set(ERR_RUNTIME, "tb_open: fdopen: %s", strerror(errno));
    }
    pthread_mutex_init(&w->lock, NULL);
    w->last_flush = clock_unix_s();
    scalar_args a = {w->last_flush, 0, NULL, 0};
    int rc = write_encoded(w, tb_encode_version_event(NULL, 0, a.wall_time), enc_version, &a);
    if (!rc) rc = tb_flush(w);
    if (rc) {
        tb_close(w);
        return rc;
    }
    *out = w;
    return 0;
}

int tb_scalar(tb_writer *w, int64_t step, const char *tag, float value, double wall_time)
{
    scalar_args a = {wall_time > 0 ? wall_time : clock_unix_s(), step, tag, value};
    return write_encoded(w, tb_encode_scalar_event(NULL, 0, a.wall_time, step, tag, value), enc_scalar, &a);
}

int tb_session_start(tb_writer *w, int64_t step)
{
    scalar_args a = {clock_unix_s(), step, NULL, 0};
    return write_encoded(w, tb_encode_session_start(NULL, 0, a.wall_time, step), enc_session, &a);
}

int tb_flush(tb_writer *w)
{
    pthread_mutex_lock(&w->lock);
    if (!w->err && fflush(w->f) != 0) {
        snprintf(w->errmsg, sizeof w->errmsg, "%s: write failed: %s", w->path, strerror(errno));
        w->err = ERR_RUNTIME;
    }
    w->last_flush = clock_unix_s();
    int rc = w->err;
    pthread_mutex_unlock(&w->lock);
    return rc ? err_set(rc, "%s", w->errmsg) : 0;
}

int tb_close(tb_writer *w)
{
    if (!w) return 0;
    int rc = w->err;
    if (w->f) {
        if (fclose(w->f) != 0 && !rc) {
            snprintf(w->errmsg, sizeof w->errmsg, "%s: close failed: %s", w->path, strerror(errno));
            rc = ERR_RUNTIME;
        }
    }
    if (rc) err_set(rc, "%s", w->errmsg);
    pthread_mutex_destroy(&w->lock);
    free(w);
    return rc;
}

const char *tb_path(const tb_writer *w) { return w->path; }
