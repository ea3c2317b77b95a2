/* TensorBoard event files: the protobuf encodings against bytes made by
 * TensorBoard's own protobuf classes (event_pb2, summary_pb2) and its
 * RecordWriter, then a round trip: write a file with tb_*, read it back with
 * a minimal TFRecord + protobuf decoder written here, check every CRC and
 * every value. tools/tb_check.py does the same read-back with the tensorboard
 * Python package. */
#define _GNU_SOURCE
#include "testutil.h"
#include "core/clock.h"
#include "core/crc32c.h"
#include "core/err.h"
#include "core/fileio.h"
#include "obs/tb.h"

#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Made by tools/tb_check.py --golden (tensorboard 2.21's protobuf classes). */
static const uint8_t gold_version[] = "\x09\x00\x00\x20\x40\xfc\x54\xd9\x41\x1a\x0d\x62\x72\x61\x69\x6e\x2e\x45\x76\x65\x6e\x74\x3a\x32";
static const uint8_t gold_scalar[] = "\x09\x00\x00\x20\x40\xfc\x54\xd9\x41\x10\x2a\x2a\x13\x0a\x11\x0a\x0a\x74\x72\x61\x69\x6e\x2f\x6c\x6f\x73\x73\x15\x00\x00\xa0\x3f";
static const uint8_t gold_session[] = "\x09\x00\x00\x50\x40\xfc\x54\xd9\x41\x10\xac\x02\x3a\x02\x08\x01";
static const uint8_t gold_negative[] = "\x09\x00\x00\x00\x00\x00\x00\xf0\x3f\x10\xfd\xff\xff\xff\xff\xff\xff\xff\xff\x01\x2a\x0a\x0a\x08\x0a\x01\x78\x15\x00\x00\x00\x80";
static const uint8_t gold_record[] = "\x20\x00\x00\x00\x00\x00\x00\x00\x29\xed\xa9\x50\x09\x00\x00\x20\x40\xfc\x54\xd9\x41\x10\x2a\x2a\x13\x0a\x11\x0a\x0a\x74\x72\x61\x69\x6e\x2f\x6c\x6f\x73\x73\x15\x00\x00\xa0\x3f\xc1\xb3\x60\x5b";

static void check_bytes(const char *what, const uint8_t *got, size_t ngot, const uint8_t *want, size_t nwant)
{
    int same = ngot == nwant && memcmp(got, want, nwant) == 0;
    printf("%-40s %zu bytes (want %zu) %s\n", what, ngot, nwant, same ? "ok" : "MISMATCH");
    CHECK(same, "%s differs from the protobuf reference", what);
    if (!same) {
        for (size_t i = 0; i < ngot; i++) fprintf(stderr, "%02x", got[i]);
        fputc('\n', stderr);
    }
}

static void test_golden(void)
{
    uint8_t b[256];
    size_t n = tb_encode_version_event(b, sizeof b, 1700000000.5);
    check_bytes("version event", b, n, gold_version, sizeof gold_version - 1);
    n = tb_encode_scalar_event(b, sizeof b, 1700000000.5, 42, "train/loss", 1.25f);
    check_bytes("scalar event", b, n, gold_scalar, sizeof gold_scalar - 1);
    n = tb_encode_session_start(b, sizeof b, 1700000001.25, 300);
    check_bytes("session start event", b, n, gold_session, sizeof gold_session - 1);
    n = tb_encode_scalar_event(b, sizeof b, 1.0, -3, "x", -0.0f);
    check_bytes("negative step, -0.0", b, n, gold_negative, sizeof gold_negative - 1);
    uint8_t ev[64], rec[128];
    size_t ne = tb_encode_scalar_event(ev, sizeof ev, 1700000000.5, 42, "train/loss", 1.25f);
    n = tb_frame(rec, sizeof rec, ev, ne);
    check_bytes("TFRecord framing", rec, n, gold_record, sizeof gold_record - 1);
    /* a too-small buffer: size reported, nothing written past cap */
    memset(b, 0xAB, sizeof b);
    n = tb_encode_scalar_event(b, 5, 1.0, 1, "train/loss", 1.0f);
    CHECK(n == 32 && b[5] == 0xAB, "size-only encode: n=%zu b[5]=%02x", n, b[5]);
    CHECK(tb_frame(rec, 10, ev, ne) == ne + 16, "tb_frame size query");
}

/* ---- a minimal reader ---- */

typedef struct {
    double wall_time;
    int64_t step;
    char version[32];
    int session_start;
    char tag[600];
    float value;
    int has_value;
} event;

static int rd_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    *v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (*p >= end) return -1;
        uint8_t c = *(*p)++;
        *v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) return 0;
    }
    return -1;
}

static uint64_t rd_le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* Decodes one message level; calls itself for Summary, Value, SessionLog. */
static int decode(const uint8_t *p, const uint8_t *end, int level, event *e)
{
    while (p < end) {
        uint64_t key, v;
        if (rd_varint(&p, end, &key)) return -1;
        int field = (int)(key >> 3), wire = (int)(key & 7);
        if (wire == 0) {
            if (rd_varint(&p, end, &v)) return -1;
            if (level == 0 && field == 2) e->step = (int64_t)v;
            if (level == 3 && field == 1) e->session_start = v == 1;
        } else if (wire == 1) {
            if (end - p < 8) return -1;
            v = rd_le(p, 8);
            p += 8;
            if (level == 0 && field == 1) memcpy(&e->wall_time, &v, 8);
        } else if (wire == 5) {
            if (end - p < 4) return -1;
            uint32_t u = (uint32_t)rd_le(p, 4);
            p += 4;
            if (level == 2 && field == 2) {
                memcpy(&e->value, &u, 4);
                e->has_value = 1;
            }
        } else if (wire == 2) {
            if (rd_varint(&p, end, &v) || v > (uint64_t)(end - p)) return -1;
            const uint8_t *q = p;
            p += v;
            if (level == 0 && field == 3) snprintf(e->version, sizeof e->version, "%.*s", (int)v, (const char *)q);
            else if (level == 0 && field == 5) { if (decode(q, p, 1, e)) return -1; }
            else if (level == 0 && field == 7) { if (decode(q, p, 3, e)) return -1; }
            else if (level == 1 && field == 1) { if (decode(q, p, 2, e)) return -1; }
            else if (level == 2 && field == 1) snprintf(e->tag, sizeof e->tag, "%.*s", (int)v, (const char *)q);
        } else {
            return -1;
        }
    }
    return 0;
}

/* Reads every record of a file; -1 on a framing or CRC error (which is
 * printed). */
static int read_events(const char *path, event **out, size_t *n)
{
    char *data;
    size_t len;
    *out = NULL;
    *n = 0;
    if (file_read_all(path, &data, &len)) return -1;
    const uint8_t *p = (const uint8_t *)data, *end = p + len;
    size_t cap = 0;
    int rc = 0;
    while (p < end) {
        if (end - p < 12) { fprintf(stderr, "short header at %td\n", p - (const uint8_t *)data); rc = -1; break; }
        uint64_t rl = rd_le(p, 8);
        uint32_t lcrc = (uint32_t)rd_le(p + 8, 4);
        if (lcrc != crc32c_mask(crc32c(p, 8))) { fprintf(stderr, "length CRC mismatch\n"); rc = -1; break; }
        if (rl > (uint64_t)(end - p - 16)) { fprintf(stderr, "record past the end\n"); rc = -1; break; }
        const uint8_t *d = p + 12;
        uint32_t dcrc = (uint32_t)rd_le(d + rl, 4);
        if (dcrc != crc32c_mask(crc32c(d, rl))) { fprintf(stderr, "data CRC mismatch\n"); rc = -1; break; }
        if (*n == cap) {
            cap = cap ? cap * 2 : 64;
            *out = realloc(*out, cap * sizeof **out);
        }
        event *e = &(*out)[*n];
        memset(e, 0, sizeof *e);
        if (decode(d, d + rl, 0, e)) { fprintf(stderr, "bad protobuf\n"); rc = -1; break; }
        (*n)++;
        p = d + rl + 4;
    }
    free(data);
    return rc;
}

static int list_events(const char *dir, char names[][512], int cap)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL)
        if (!strncmp(e->d_name, "events.out.tfevents.", 20) && n < cap) snprintf(names[n++], 512, "%s/%s", dir, e->d_name);
    if (d) closedir(d);
    return n;
}

static void tag_of(char *buf, size_t cap, int i)
{
    static const char *tags[] = {"train/loss", "train/lr", "gpu/temp_c", "中文/标签"};
    snprintf(buf, cap, "%s", tags[i % 4]);
}

static void test_round_trip(void)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s/rt/tb", tu_tmpdir());
    double t0 = clock_unix_s();
    tb_writer *w;
    CHECK(tb_open(&w, dir) == 0, "tb_open: %s", err_msg());
    if (!w) return;
    CHECK(tb_session_start(w, 5) == 0, "session start");
    const int N = 300;
    for (int i = 0; i < N; i++) {
        char tag[64];
        tag_of(tag, sizeof tag, i);
        CHECK(tb_scalar(w, 5 + i, tag, (float)i * 0.37f - 20.0f, 0) == 0, "tb_scalar %d", i);
    }
    char longtag[520];
    memset(longtag, 'a', 519);
    longtag[519] = 0;
    CHECK(tb_scalar(w, 1LL << 40, longtag, 3.5f, 12345.0) == 0, "long tag");
    CHECK(tb_close(w) == 0, "tb_close: %s", err_msg());
    double t1 = clock_unix_s();

    char names[4][512];
    int nf = list_events(dir, names, 4);
    CHECK(nf == 1, "one events file in %s, found %d", dir, nf);
    if (nf < 1) return;
    const char *base = strrchr(names[0], '/') + 1;
    long stamp = strtol(base + 20, NULL, 10);
    CHECK(stamp >= (long)t0 - 1 && stamp <= (long)t1 + 1 && base[30] == '.', "file name %s has the time", base);
    event *ev;
    size_t n;
    CHECK(read_events(names[0], &ev, &n) == 0, "framing and CRCs of %s", names[0]);
    printf("read %zu records from %s\n", n, base);
    CHECK(n == (size_t)N + 3, "records: %zu, want %d", n, N + 3);
    if (n == (size_t)N + 3) {
        CHECK(!strcmp(ev[0].version, "brain.Event:2"), "first record file_version '%s'", ev[0].version);
        CHECK(ev[0].wall_time >= t0 - 1 && ev[0].wall_time <= t1 + 1, "wall time %.3f in [%.3f, %.3f]", ev[0].wall_time, t0, t1);
        CHECK(ev[1].session_start && ev[1].step == 5, "session start at 5: %d %lld", ev[1].session_start, (long long)ev[1].step);
        int bad = 0;
        for (int i = 0; i < N; i++) {
            event *e = &ev[2 + i];
            char tag[64];
            tag_of(tag, sizeof tag, i);
            float want = (float)i * 0.37f - 20.0f;
            if (e->step != 5 + i || strcmp(e->tag, tag) || !e->has_value || memcmp(&e->value, &want, 4) ||
                e->wall_time < t0 - 1 || e->wall_time > t1 + 1) {
                if (!bad) fprintf(stderr, "record %d: step %lld tag %s value %g\n", i, (long long)e->step, e->tag, e->value);
                bad++;
            }
        }
        CHECK(bad == 0, "%d of %d scalars differ", bad, N);
        event *l = &ev[N + 2];
        CHECK(l->step == 1LL << 40 && strlen(l->tag) == 519 && l->value == 3.5f && l->wall_time == 12345.0,
              "long-tag record: step %lld tag length %zu", (long long)l->step, strlen(l->tag));
    }
    free(ev);

    /* a flipped byte must be caught by the CRC check */
    char *data;
    size_t len;
    if (file_read_all(names[0], &data, &len) == 0) {
        data[len / 2] ^= 0x10;
        char bad[600];
        snprintf(bad, sizeof bad, "%s/flipped", tu_tmpdir());
        file_write_atomic(bad, data, len);
        free(data);
        CHECK(read_events(bad, &ev, &n) != 0, "flipped byte not detected");
        free(ev);
    }

    /* a second writer in the same second gets its own file */
    tb_writer *a, *b;
    CHECK(tb_open(&a, dir) == 0 && tb_open(&b, dir) == 0, "two more writers");
    CHECK(strcmp(tb_path(a), tb_path(b)) != 0, "distinct files %s %s", tb_path(a), tb_path(b));
    tb_close(a);
    tb_close(b);
    CHECK(list_events(dir, names, 4) == 3, "three files now");
}

typedef struct {
    tb_writer *w;
    int id, n;
} writer_arg;

static void *writer_main(void *p)
{
    writer_arg *a = p;
    char tag[32];
    snprintf(tag, sizeof tag, "thread/%d", a->id);
    for (int i = 0; i < a->n; i++) tb_scalar(a->w, i, tag, (float)i, 0);
    return NULL;
}

/* The trainer and the monitor thread write to one file at once. */
static void test_threads(void)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s/threads", tu_tmpdir());
    tb_writer *w;
    if (tb_open(&w, dir) != 0) {
        CHECK(0, "tb_open: %s", err_msg());
        return;
    }
    int per = tu_sanitized() ? 500 : 5000;
    pthread_t th[2];
    writer_arg args[2] = {{w, 0, per}, {w, 1, per}};
    for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, writer_main, &args[i]);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    tb_close(w);
    char names[2][512];
    list_events(dir, names, 2);
    event *ev;
    size_t n;
    CHECK(read_events(names[0], &ev, &n) == 0, "framing after concurrent writes");
    int next[2] = {0, 0}, ordered = 1;
    for (size_t i = 1; i < n; i++) {
        int id = ev[i].tag[7] - '0';
        if (id < 0 || id > 1 || ev[i].step != next[id] || ev[i].value != (float)next[id]) ordered = 0;
        else next[id]++;
    }
    printf("concurrent writers: %zu records, %d + %d in order\n", n, next[0], next[1]);
    CHECK(n == (size_t)(2 * per + 1) && ordered, "concurrent records: %zu, ordered %d", n, ordered);
    free(ev);
}

static void test_errors(void)
{
    char file[600], dir[700];
    snprintf(file, sizeof file, "%s/plainfile", tu_tmpdir());
    file_write_atomic(file, "x", 1);
    snprintf(dir, sizeof dir, "%s/tb", file);
    tb_writer *w = (tb_writer *)1;
    err_clear();
    int rc = tb_open(&w, dir);
    printf("tb_open under a file: rc %d: %s\n", rc, err_msg());
    CHECK(rc == ERR_RUNTIME && w == NULL && strstr(err_msg(), "plainfile"), "rc %d msg %s", rc, err_msg());
}

/* A full disk (RLIMIT_FSIZE in a child process): the first failed write is
 * an error, later ones return it at once without writing, close reports it,
 * and nothing crashes. */
static void test_full_disk(void)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s/full", tu_tmpdir());
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        tb_writer *w;
        if (tb_open(&w, dir) != 0) _exit(10);
        struct rlimit rl = {4096, 4096};
        setrlimit(RLIMIT_FSIZE, &rl);
        int first_fail = -1, later_ok = 0;
        for (int i = 0; i < 2000; i++) {
            int rc = tb_scalar(w, i, "train/loss", 1.0f, 0);
            if (rc && first_fail < 0) first_fail = i;
            if (!rc && first_fail >= 0) later_ok++;
            if (i % 100 == 0 && tb_flush(w) && first_fail < 0) first_fail = i;
        }
        int crc = tb_close(w);
        printf("full disk: first failure at record %d, %d later writes claimed success, close rc %d: %s\n", first_fail,
               later_ok, crc, err_msg());
        fflush(stdout);
        _exit(first_fail > 0 && later_ok == 0 && crc == ERR_RUNTIME && strstr(err_msg(), "write failed") ? 0 : 11);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "full-disk child: status %d", status);
    char names[2][512];
    struct stat st;
    if (list_events(dir, names, 2) == 1 && stat(names[0], &st) == 0) {
        printf("full disk: the file stopped at %lld bytes\n", (long long)st.st_size);
        CHECK(st.st_size <= 4096, "size %lld", (long long)st.st_size);
    }
}

int main(void)
{
    test_golden();
    test_round_trip();
    test_threads();
    test_errors();
    test_full_disk();
    return tu_done();
}
