/* The features cache: a save/load round trip gives the same features; a
 * flipped byte, a truncated file, other options, another vocabulary or
 * casing, other data, a foreign file and a well-formed file with a bad token
 * id are all misses (with the reason) that features_load_or_build rebuilds. */
#include "testutil.h"
#include "features_equal.h"
#include "core/crc32c.h"
#include "core/err.h"
#include "core/fileio.h"
#include "data/features.h"
#include "data/squad.h"
#include "text/tokenizer.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    squad_data *d;
    const tokenizer *tok;
    feature_opts o;
    const features *ref; /* what a correct load must give */
} setup;

/* features_cache_load must miss with a reason holding `why`, and
 * features_load_or_build must then rebuild (hit 0), rewrite the file, and
 * hit on the next call. */
static void expect_miss(const char *name, const char *path, const setup *s, const char *why)
{
    features f;
    err_clear();
    int rc = features_cache_load(path, s->d, s->tok, &s->o, &f);
    printf("%-22s rc=%d: %s\n", name, rc, err_msg());
    CHECK(rc == 1, "%s: features_cache_load returned %d, want a miss", name, rc);
    CHECK(strstr(err_msg(), why) != NULL, "%s: reason '%s' lacks '%s'", name, err_msg(), why);
    CHECK(f.n == 0 && f.input_ids == NULL, "%s: output filled on a miss", name);
    if (rc == 0) features_free(&f);
    int hit = -1;
    rc = features_load_or_build(path, s->d, s->tok, &s->o, 2, &f, &hit);
    CHECK(rc == 0 && hit == 0, "%s: load_or_build rc %d hit %d (want a rebuild)", name, rc, hit);
    if (rc == 0) {
        if (s->ref) CHECK(features_equal(&f, s->ref), "%s: rebuilt features differ", name);
        features_free(&f);
    }
    rc = features_load_or_build(path, s->d, s->tok, &s->o, 2, &f, &hit);
    CHECK(rc == 0 && hit == 1, "%s: after the rebuild: rc %d hit %d (want a hit)", name, rc, hit);
    if (rc == 0) {
        if (s->ref) CHECK(features_equal(&f, s->ref), "%s: features from the rewritten cache differ", name);
        features_free(&f);
    }
}

static void copy_file(const char *from, const char *to)
{
    char *b;
    size_t n;
    if (file_read_all(from, &b, &n) == 0) {
        file_write_atomic(to, b, n);
        free(b);
    }
}

static void mutate(const char *path, long at, int flip, size_t truncate_to)
{
    char *b;
    size_t n;
    if (file_read_all(path, &b, &n)) return;
    if (flip && at >= 0 && (size_t)at < n) b[at] ^= (char)flip;
    if (truncate_to && truncate_to < n) n = truncate_to;
    file_write_atomic(path, b, n);
    free(b);
}

/* A save/load round trip gives the same features, and saving them again
 * the same file. */
static void check_round_trip(const char *path, const setup *s)
{
    features got;
    int rc = features_cache_save(path, s->d, s->tok, &s->o, s->ref);
    CHECK(rc == 0, "save: %s", err_msg());
    rc = features_cache_load(path, s->d, s->tok, &s->o, &got);
    CHECK(rc == 0, "load after save: rc %d %s", rc, err_msg());
    if (rc == 0) {
        CHECK(features_equal(&got, s->ref), "loaded features differ from the built ones");
        /* What was loaded can be saved again, byte for byte the same file. */
        char p2[600];
        snprintf(p2, sizeof p2, "%s.again", path);
        rc = features_cache_save(p2, s->d, s->tok, &s->o, &got);
        char *a, *b;
        size_t na, nb;
        int same = rc == 0 && file_read_all(path, &a, &na) == 0 && file_read_all(p2, &b, &nb) == 0 && na == nb &&
                   !memcmp(a, b, na);
        CHECK(same, "re-saved cache differs");
        if (rc == 0) {
            free(a);
            free(b);
        }
        printf("round trip: %d features of %d, cache %zu bytes\n", got.n, got.T, na);
        features_free(&got);
    }
}

/* Misses: a missing file, a flipped byte, a truncated file, a foreign one
 * (saved: a good cache to damage at path). */
static void check_damaged(const char *path, const char *saved, const setup *s)
{
    char missing[600];
    snprintf(missing, sizeof missing, "%s/none.features", tu_tmpdir());
    expect_miss("missing", missing, s, "not found");

    /* A flipped byte anywhere: in the data, in the header counts, in the CRC. */
    char *buf;
    size_t len = 0;
    if (file_read_all(saved, &buf, &len) == 0) free(buf);
    long spots[] = {(long)len / 2, (long)len - 2, 8, 76, 100};
    const char *whys[] = {"CRC", "CRC", "version", "header says", "CRC"};
    for (int i = 0; i < 5; i++) {
        char name[64];
        snprintf(name, sizeof name, "flipped byte %ld", spots[i]);
        copy_file(saved, path);
        mutate(path, spots[i], 0x10, 0);
        expect_miss(name, path, s, whys[i]);
    }
    /* Truncated: mid-file, inside the header, empty. */
    size_t cuts[] = {len - 1, len / 3, 40, 0};
    for (int i = 0; i < 4; i++) {
        char name[64];
        snprintf(name, sizeof name, "truncated to %zu", cuts[i]);
        copy_file(saved, path);
        if (cuts[i]) mutate(path, -1, 0, cuts[i]);
        else file_write_atomic(path, "", 0);
        expect_miss(name, path, s, "truncated");
    }
    /* Something else entirely. */
    file_write_atomic(path, "{\"not\": \"a cache\", \"padding\": \"..................................................................................................\"}", 120);
    expect_miss("foreign file", path, s, "bad magic");
}

/* Stale: other options, other casing (tz_lower), other vocabulary (tu),
 * other data (dx). */
static void check_stale(const char *path, const char *saved, const setup *s, const tokenizer *tz_lower,
                        const tokenizer *tu, squad_data *dx)
{
    static const char *const names[5] = {"other doc_stride", "other max_query_length", "lower_case",
                                          "other vocabulary", "other data"};
    static const char *const whys[5] = {"other feature options", "other feature options",
                                         "another vocabulary or casing", "another vocabulary or casing", "other data"};
    setup v[5];
    for (int i = 0; i < 5; i++) v[i] = *s, v[i].ref = NULL;
    v[0].o.doc_stride = 64;
    v[1].o.max_query_length = 16;
    v[2].tok = tz_lower;
    v[3].tok = tu;
    v[4].d = dx;
    for (int i = 0; i < 5; i++) {
        copy_file(saved, path);
        expect_miss(names[i], path, &v[i], whys[i]);
    }
}

/* Well-formed (right CRC) but a token id outside the vocabulary: not trusted. */
static void check_bad_token(const char *path, const char *saved, const setup *s)
{
    char *buf;
    size_t len = 0;
    copy_file(saved, path);
    if (file_read_all(path, &buf, &len) == 0) {
        size_t at = 80 + 8 * ((size_t)s->d->ncontexts + 1) + 4 * 5; /* the sixth context token id */
        int32_t bad = 1 << 30;
        memcpy(buf + at, &bad, 4);
        uint32_t crc = crc32c(buf, len - 4);
        memcpy(buf + len - 4, &crc, 4);
        file_write_atomic(path, buf, len);
        free(buf);
        expect_miss("bad token id", path, s, "outside the vocabulary");
    }
}

int main(void)
{
    vocab *vz = NULL, *vu = NULL;
    tokenizer *tz = NULL, *tz_lower = NULL, *tu = NULL;
    squad_data d, dx;
    int rc = vocab_load(tu_data("vocab/bert-base-chinese-vocab.txt"), &vz);
    rc = rc ? rc : vocab_load(tu_data("vocab/bert-base-uncased-vocab.txt"), &vu);
    rc = rc ? rc : tokenizer_create(&tz, vz, 0);
    rc = rc ? rc : tokenizer_create(&tz_lower, vz, 1);
    rc = rc ? rc : tokenizer_create(&tu, vu, 1);
    rc = rc ? rc : squad_load(tu_data("cmrc2018/cmrc2018_trial.json"), &d);
    rc = rc ? rc : squad_load(tu_data("xquad/xquad.zh.json"), &dx);
    CHECK(rc == 0, "setup: %s", err_msg());
    if (rc) return tu_done();
    log_quiet(1);

    feature_opts o = {.max_seq_length = 128, .doc_stride = 32};
    features ref, got;
    rc = features_build(&d, tz, &o, 2, &ref);
    CHECK(rc == 0, "build: %s", err_msg());
    if (rc) return tu_done();
    char path[512], saved[512];
    snprintf(path, sizeof path, "%s/cmrc.features", tu_tmpdir());
    snprintf(saved, sizeof saved, "%s/cmrc.features.good", tu_tmpdir());
    setup s = {&d, tz, o, &ref};

    check_round_trip(path, &s);
    copy_file(path, saved);
    check_damaged(path, saved, &s);
    check_stale(path, saved, &s, tz_lower, tu, &dx);
    check_bad_token(path, saved, &s);

    /* A cache that cannot be written is not an error: the features are built. */
    int hit = -1;
    rc = features_load_or_build("/nonexistent-dir/x.features", &d, tz, &o, 1, &got, &hit);
    CHECK(rc == 0 && hit == 0 && features_equal(&got, &ref), "unwritable cache path: rc %d hit %d", rc, hit);
    if (rc == 0) features_free(&got);
    /* features_cache_save needs the tokens that features_build keeps. */
    features bare = ref;
    bare.tokens = NULL;
    rc = features_cache_save(path, &d, tz, &o, &bare);
    CHECK(rc == ERR_INPUT, "save without tokens: rc %d", rc);

    features_free(&ref);
    squad_free(&d);
    squad_free(&dx);
    tokenizer_free(tz);
    tokenizer_free(tz_lower);
    tokenizer_free(tu);
    vocab_free(vz);
    vocab_free(vu);
    return tu_done();
}
