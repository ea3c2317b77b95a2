/* features_build against run_qa.py (tools/features_parity.py writes
 * tests/ref/features/): identical input_ids, token_type_ids, attention
 * masks, offsets, start/end labels and window-to-example maps for SQuAD dev
 * and CMRC 2018 trial at T=384/stride 128 and T=64/stride 16. Then the
 * window layout on a hand-made example, the "question too long" errors,
 * max_query_length, thread-count determinism and the .npy writer. */
#include "testutil.h"
#include "features_equal.h"
#include "core/err.h"
#include "core/fileio.h"
#include "core/rng.h"
#include "core/npy.h"
#include "data/features.h"
#include "data/squad.h"
#include "text/tokenizer.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* --- the hashes of tools/features_parity.py ------------------------------ */

/* One splitmix64 step from x, as the Python does it. */
static uint64_t splitmix64(uint64_t x) { return splitmix64_next(&x); }

/* Row sums of the five arrays of feature i. */
static void row_sums(const features *f, int i, const uint64_t *m, uint64_t sums[5])
{
    const int32_t *rows[5] = {f->input_ids, f->token_type_ids, f->attention_mask, f->offset_begin, f->offset_end};
    int T = f->T;
    for (int a = 0; a < 5; a++) {
        uint64_t s = 0;
        const int32_t *r = rows[a] + (size_t)i * T;
        for (int k = 0; k < T; k++) s += (uint64_t)(int64_t)r[k] * m[a * T + k];
        sums[a] = s;
    }
}

typedef struct {
    int n, T, stride, nfull, nex;
    uint64_t array_hash[5];
    const int32_t *start, *end, *example;
    const char *row_hash; /* [n] uint64, not 8-aligned in the file */
    const int32_t *full; /* [nfull][5][T] */
    char *buf;
} ref_file;

static int ref_load(const char *path, ref_file *r)
{
    size_t len;
    memset(r, 0, sizeof *r);
    if (file_read_all(path, &r->buf, &len)) return -1;
    int32_t h[8];
    if (len < 8 + 32 + 40 || memcmp(r->buf, "BERTCFR1", 8)) return -1;
    memcpy(h, r->buf + 8, 32);
    r->n = h[0], r->T = h[1], r->stride = h[2], r->nfull = h[3], r->nex = h[4];
    size_t want = 8 + 32 + 40 + (size_t)r->n * 20 + (size_t)r->nfull * 5 * r->T * 4;
    if (r->n < 0 || r->nfull < 0 || r->nfull > r->n || len != want) return -1;
    memcpy(r->array_hash, r->buf + 40, 40);
    const char *p = r->buf + 80;
    r->start = (const int32_t *)p;
    r->end = r->start + r->n;
    r->example = r->end + r->n;
    r->row_hash = p + (size_t)r->n * 12;
    r->full = (const int32_t *)(p + (size_t)r->n * 20);
    return 0;
}

static const char *array_names[5] = {"input_ids", "token_type_ids", "attention_mask", "offset_begin", "offset_end"};

static void print_row(const char *what, const int32_t *r, int T)
{
    printf("    %-15s", what);
    for (int k = 0; k < T && k < 48; k++) printf(" %d", r[k]);
    printf(T > 48 ? " ...\n" : "\n");
}

static void compare_ref(const char *name, const features *f, const squad_data *d, const ref_file *r)
{
    CHECK(f->n == r->n && f->T == r->T, "%s: %d features of %d (reference %d of %d)", name, f->n, f->T, r->n, r->T);
    if (f->n != r->n || f->T != r->T) return;
    int T = f->T;
    uint64_t *m = malloc(5 * (size_t)T * sizeof *m);
    for (int a = 0; a < 5; a++)
        for (int k = 0; k < T; k++) m[a * T + k] = splitmix64(0x5EED0000ull + (uint64_t)a * 4096 + (uint64_t)k) | 1;
    uint64_t acc[5] = {0};
    int bad_rows = 0, bad_start = 0, bad_end = 0, bad_ex = 0, first_bad = -1;
    for (int i = 0; i < f->n; i++) {
        uint64_t s[5], tot = 0;
        row_sums(f, i, m, s);
        for (int a = 0; a < 5; a++) {
            tot += s[a];
            acc[a] += splitmix64(s[a]) * (2 * (uint64_t)i + 1);
        }
        int bad = 0;
        uint64_t want;
        memcpy(&want, r->row_hash + (size_t)i * 8, 8);
        if (splitmix64(tot) != want) bad_rows++, bad = 1;
        if (f->start_positions[i] != r->start[i]) bad_start++, bad = 1;
        if (f->end_positions[i] != r->end[i]) bad_end++, bad = 1;
        if (f->example[i] != r->example[i]) bad_ex++, bad = 1;
        if (bad && first_bad < 0) first_bad = i;
    }
    int inside = 0, quirk = 0;
    for (int i = 0; i < f->n; i++) {
        inside += f->start_positions[i] != 0 || f->end_positions[i] != 0;
        quirk += f->start_positions[i] == T - 1;
    }
    printf("%-18s %6d features, %6d hold their answer, %3d with start T-1: rows differ %d, start %d, end %d, example %d\n",
           name, f->n, inside, quirk, bad_rows, bad_start, bad_end, bad_ex);
    for (int a = 0; a < 5; a++) {
        uint64_t h = splitmix64(acc[a]);
        CHECK(h == r->array_hash[a], "%s: %s differs from run_qa.py's", name, array_names[a]);
    }
    CHECK(bad_rows == 0 && bad_start == 0 && bad_end == 0 && bad_ex == 0,
          "%s: %d rows, %d starts, %d ends, %d example maps differ; first at feature %d", name, bad_rows, bad_start,
          bad_end, bad_ex, first_bad);
    if (first_bad >= 0) {
        int i = first_bad, e = f->example[i];
        printf("  first difference: feature %d (example %d, id %s); bertc start %d end %d, run_qa %d %d\n", i, e,
               e >= 0 && e < d->n ? d->ex[e].id : "?", f->start_positions[i], f->end_positions[i], r->start[i],
               r->end[i]);
        const int32_t *rows[5] = {f->input_ids, f->token_type_ids, f->attention_mask, f->offset_begin, f->offset_end};
        for (int a = 0; a < 5; a++) {
            print_row(array_names[a], rows[a] + (size_t)i * T, T);
            if (i < r->nfull) print_row("run_qa", r->full + ((size_t)i * 5 + a) * T, T);
        }
        if (i >= r->nfull)
            printf("  (run_qa's rows: python3 tools/features_parity.py --show %s %d)\n", name, i);
    }
    /* The first features in full, so a mismatch in the hashes above is
     * never a mismatch of the hash code. */
    int full_bad = 0;
    for (int i = 0; i < r->nfull; i++) {
        const int32_t *rows[5] = {f->input_ids, f->token_type_ids, f->attention_mask, f->offset_begin, f->offset_end};
        for (int a = 0; a < 5; a++)
            full_bad += memcmp(rows[a] + (size_t)i * T, r->full + ((size_t)i * 5 + a) * T, (size_t)T * 4) != 0;
    }
    CHECK(full_bad == 0, "%s: %d of the first %d features' rows differ", name, full_bad, r->nfull);
    free(m);
}

typedef struct {
    vocab *v;
    tokenizer *t;
} tok_pair;

static int tok_open(const char *vocab_rel, int lower, tok_pair *p)
{
    memset(p, 0, sizeof *p);
    int rc = vocab_load(tu_data(vocab_rel), &p->v);
    if (!rc) rc = tokenizer_create(&p->t, p->v, lower);
    CHECK(rc == 0, "tokenizer %s: %s", vocab_rel, err_msg());
    return rc;
}

static void tok_close(tok_pair *p)
{
    tokenizer_free(p->t);
    vocab_free(p->v);
}

static void test_parity(const char *name, const char *data_rel, const char *vocab_rel, int lower, int T, int S)
{
    char ref_path[256], setting[64];
    snprintf(setting, sizeof setting, "%s_T%d_S%d", name, T, S);
    snprintf(ref_path, sizeof ref_path, "tests/ref/features/%s.bin", setting);
    ref_file r;
    int ok = ref_load(ref_path, &r) == 0;
    CHECK(ok, "%s: cannot read the reference (run from the repo root)", ref_path);
    tok_pair tp;
    squad_data d;
    if (!ok || tok_open(vocab_rel, lower, &tp)) {
        free(r.buf);
        return;
    }
    int rc = squad_load(tu_data(data_rel), &d);
    CHECK(rc == 0, "%s: %s", data_rel, err_msg());
    if (rc == 0) {
        CHECK(d.n == r.nex, "%s: %d examples, reference %d", setting, d.n, r.nex);
        feature_opts o = {.max_seq_length = T, .doc_stride = S};
        features f;
        rc = features_build(&d, tp.t, &o, 0, &f);
        CHECK(rc == 0, "%s: features_build: %s", setting, err_msg());
        if (rc == 0) compare_ref(setting, &f, &d, &r);
        features_free(&f);
        squad_free(&d);
    }
    tok_close(&tp);
    free(r.buf);
}

/* --- hand-made examples ----------------------------------------------------- */

/* One paragraph "w0 w1 ... w39" (each wN is the two tokens w ##N, so 80
 * context tokens) and the given questions as JSON. */
static int load_words(const char *name, const char *qas, squad_data *d)
{
    char json[8192], ctx[512] = "";
    size_t k = 0;
    for (int i = 0; i < 40; i++) k += (size_t)snprintf(ctx + k, sizeof ctx - k, i ? " w%d" : "w%d", i);
    snprintf(json, sizeof json, "{\"data\": [{\"paragraphs\": [{\"context\": \"%s\", \"qas\": [%s]}]}]}", ctx, qas);
    int rc = squad_load(tu_write_tmp(name, json), d);
    CHECK(rc == 0, "%s: %s", name, err_msg());
    return rc;
}

static void test_layout(const tok_pair *tp)
{
    squad_data d;
    /* "w3" is code points 9..11; "w39" is the last word, 2 tokens. */
    if (load_words("words.json",
                   "{\"id\": \"a\", \"question\": \"  what is it?\", \"answers\": [{\"text\": \"w3\", \"answer_start\": 9}]},"
                   "{\"id\": \"b\", \"question\": \"what is it?\", \"answers\": [{\"text\": \"w39\", \"answer_start\": 146}]},"
                   "{\"id\": \"c\", \"question\": \"what is it?\", \"answers\": [{\"text\": \"tea\", \"answer_start\": 0}]},"
                   "{\"id\": \"d\", \"question\": \"what is it?\", \"answers\": [{\"text\": \"39\", \"answer_start\": 147}]}",
                   &d))
        return;
    feature_opts o = {.max_seq_length = 24, .doc_stride = 4};
    features f;
    int rc = features_build(&d, tp->t, &o, 2, &f);
    CHECK(rc == 0, "words: %s", err_msg());
    if (rc) {
        squad_free(&d);
        return;
    }
    /* Hugging Face: L = 24 - 3 - 4 = 17 context tokens a window, starts 0, 13, 26, 39, 52, 65: 6 windows, the
     * last holding 15 tokens then padding. */
    CHECK(f.n == 24 && f.T == 24, "words: %d features (want 4 x 6)", f.n);
    int cls = vocab_cls(tp->v), sep = vocab_sep(tp->v), pad = vocab_pad(tp->v);
    int what = vocab_find(tp->v, "what", 4), w = vocab_find(tp->v, "w", 1), h6 = vocab_find(tp->v, "##6", 3);
    const int32_t *r0 = f.input_ids, *r1 = f.input_ids + 24, *r5 = f.input_ids + 5 * 24;
    CHECK(r0[0] == cls && r0[1] == what && r0[5] == sep && r0[6] == w && r0[23] == sep, "window 0 layout");
    CHECK(r1[6] == h6 && f.offset_begin[24 + 6] == 19 && f.offset_end[24 + 6] == 20,
          "window 1 starts at context token 13 (##6, code points 19..20): id %d begin %d", r1[6], f.offset_begin[24 + 6]);
    CHECK(r5[21] == sep && r5[22] == pad && r5[23] == pad && f.attention_mask[5 * 24 + 21] == 1 &&
              f.attention_mask[5 * 24 + 22] == 0 && f.token_type_ids[5 * 24 + 21] == 1 && f.token_type_ids[5 * 24 + 22] == 0,
          "last window: 15 context tokens, [SEP], 2 pads");
    int tt_ok = 1, off_ok = 1;
    for (int k = 0; k < 24; k++) {
        tt_ok &= f.token_type_ids[k] == (k >= 6);
        off_ok &= (k >= 6 && k < 23) == (f.offset_begin[k] >= 0);
    }
    CHECK(tt_ok && off_ok, "window 0: token types 0 then 1 from the context on; offsets -1 outside the context");
    for (int i = 0; i < 24; i++) CHECK(f.example[i] == i / 6, "feature %d belongs to example %d", i, f.example[i]);
    /* a: w3 = tokens 6, 7 of the context -> row 12, 13 in window 0 only. */
    CHECK(f.start_positions[0] == 12 && f.end_positions[0] == 13, "a window 0 labels %d %d", f.start_positions[0],
          f.end_positions[0]);
    CHECK(f.start_positions[1] == 0 && f.end_positions[1] == 0, "a window 1 labels %d %d", f.start_positions[1],
          f.end_positions[1]);
    /* b: w39 = the last two context tokens (78, 79) -> window 5 (starts at 65), rows 19, 20;
     * window 4 (context tokens 52..68) does not hold it. */
    CHECK(f.start_positions[6 + 5] == 19 && f.end_positions[6 + 5] == 20, "b last window labels %d %d",
          f.start_positions[11], f.end_positions[11]);
    /* c: its answer is not in the context: (0, 0) everywhere, and not trainable. */
    int c_zero = 1;
    for (int i = 12; i < 18; i++) c_zero &= f.start_positions[i] == 0 && f.end_positions[i] == 0;
    CHECK(c_zero && d.n_unfound == 1, "c: unfound answer labelled (0,0) (unfound %d)", d.n_unfound);
    /* d: "39" lies within the last context token (##39) of the last window: run_qa.py's start loop runs on
     * over [SEP] and padding to the end of the row, so start T-1 = 23, end 20 (checked with run_qa's code). */
    CHECK(f.start_positions[23] == 23 && f.end_positions[23] == 20, "d last window labels %d %d (want 23 20)",
          f.start_positions[23], f.end_positions[23]);
    CHECK(features_trainable(&f, &d, 0) && features_trainable(&f, &d, 11) && !features_trainable(&f, &d, 12),
          "features_trainable: a yes, b yes, c no");
    features_free(&f);

    /* max_query_length 2 keeps "what is": L = 24 - 3 - 2 = 19. */
    o.max_query_length = 2;
    rc = features_build(&d, tp->t, &o, 1, &f);
    CHECK(rc == 0 && f.input_ids[1] == what && f.input_ids[3] == sep && f.token_type_ids[4] == 1 &&
              f.offset_begin[4] == 0,
          "max_query_length 2: [CLS] what is [SEP] w ...: %s", rc ? err_msg() : "");
    CHECK(rc == 0 && f.start_positions[0] == 10 && f.end_positions[0] == 11, "max_query_length 2: labels %d %d",
          f.start_positions[0], f.end_positions[0]);
    features_free(&f);
    squad_free(&d);
}

static void expect_build_error(const tok_pair *tp, const char *name, const char *qas, int T, int S, const char *want)
{
    squad_data d;
    if (load_words(name, qas, &d)) return;
    feature_opts o = {.max_seq_length = T, .doc_stride = S};
    features f;
    err_clear();
    int rc = features_build(&d, tp->t, &o, 2, &f);
    printf("%-16s rc=%d: %s\n", name, rc, rc ? err_msg() : "(built)");
    CHECK(rc == ERR_INPUT && strstr(err_msg(), "question \"long\"") && strstr(err_msg(), want),
          "%s: rc %d, message lacks '%s': %s", name, rc, want, err_msg());
    CHECK(f.n == 0 && f.input_ids == NULL, "%s: output not cleared", name);
    if (rc == 0) features_free(&f);
    squad_free(&d);
}

static void test_errors(const tok_pair *tp)
{
    char q[2048];
    int k = snprintf(q, sizeof q, "{\"id\": \"ok\", \"question\": \"why?\", \"answers\": []}, {\"id\": \"long\", \"question\": \"");
    for (int i = 0; i < 21; i++) k += snprintf(q + k, sizeof q - (size_t)k, "what ");
    snprintf(q + k, sizeof q - (size_t)k, "\", \"answers\": []}");
    /* 21 question tokens in T=24: nothing left for the context (HF: "Sequence to truncate too short"). */
    expect_build_error(tp, "qlong.json", q, 24, 4, "no room for the context");
    /* T=30: 6 context tokens a window, not more than the stride 6 (HF panics: stride < max_len). */
    expect_build_error(tp, "qstride.json", q, 30, 6, "--doc-stride");
    /* Options. */
    squad_data d;
    if (load_words("opts.json", "", &d)) return;
    features f;
    feature_opts bad[] = {{24, 24, 0, 0}, {24, -1, 0, 0}, {2, 0, 0, 0}, {24, 4, -1, 0}};
    for (int i = 0; i < 4; i++) {
        int rc = features_build(&d, tp->t, &bad[i], 1, &f);
        CHECK(rc == ERR_INPUT, "options T %d stride %d mql %d accepted", bad[i].max_seq_length, bad[i].doc_stride,
              bad[i].max_query_length);
        if (rc == 0) features_free(&f);
    }
    /* No questions at all: zero features, no error. */
    feature_opts o = {.max_seq_length = 384, .doc_stride = 128};
    int rc = features_build(&d, tp->t, &o, 1, &f);
    CHECK(rc == 0 && f.n == 0, "no questions: rc %d, %d features", rc, f.n);
    features_free(&f);
    squad_free(&d);
}

/* Inputs run_qa.py never meets (it would fail on some): empty context,
 * empty question, a context of blanks with a blank answer. No crash, one
 * window each; where run_qa.py works, its labels. */
static void test_edges(const tok_pair *tp)
{
    const char *json =
        "{\"data\": [{\"paragraphs\": ["
        "{\"context\": \"\", \"qas\": [{\"id\": \"e1\", \"question\": \"who?\", \"answers\": []}]},"
        "{\"context\": \"   \", \"qas\": [{\"id\": \"e2\", \"question\": \"\", \"answers\": [{\"text\": \" \", \"answer_start\": 1}]}]},"
        "{\"context\": \"a b\", \"qas\": [{\"id\": \"e3\", \"question\": \"\\u3000 \\u00a0\", \"answers\": [{\"text\": \"b\", \"answer_start\": 2}]}]}"
        "]}]}";
    squad_data d;
    int rc = squad_load(tu_write_tmp("edges.json", json), &d);
    CHECK(rc == 0, "edges.json: %s", err_msg());
    if (rc) return;
    feature_opts o = {.max_seq_length = 8, .doc_stride = 2};
    features f;
    rc = features_build(&d, tp->t, &o, 2, &f);
    CHECK(rc == 0 && f.n == 3, "edges: rc %d, %d features: %s", rc, f.n, rc ? err_msg() : "");
    if (rc == 0 && f.n == 3) {
        int m0 = 0, m1 = 0, m2 = 0;
        for (int k = 0; k < 8; k++) m0 += f.attention_mask[k], m1 += f.attention_mask[8 + k], m2 += f.attention_mask[16 + k];
        printf("edges: masks %d %d %d, labels (%d,%d) (%d,%d) (%d,%d)\n", m0, m1, m2, f.start_positions[0],
               f.end_positions[0], f.start_positions[1], f.end_positions[1], f.start_positions[2], f.end_positions[2]);
        CHECK(m0 == 5 && m1 == 3 && m2 == 5, "edges: attention masks %d %d %d (want 5 3 5)", m0, m1, m2);
        CHECK(f.start_positions[1] == 0 && f.end_positions[1] == 0, "blank context: labels not (0,0)");
        /* e3: a question of blanks only is [CLS] [SEP]; "b" is the last context token (row 3), so run_qa's
         * labels are (T-1, 3) = (7, 3) (checked with its code). */
        CHECK(f.input_ids[16 + 1] == vocab_sep(tp->v) && f.start_positions[2] == 7 && f.end_positions[2] == 3,
              "blank question: labels %d %d (want 7 3)", f.start_positions[2], f.end_positions[2]);
        features_free(&f);
    }
    squad_free(&d);
}

static void test_threads_and_npy(void)
{
    tok_pair tp;
    if (tok_open("vocab/bert-base-chinese-vocab.txt", 0, &tp)) return;
    squad_data d;
    int rc = squad_load(tu_data("cmrc2018/cmrc2018_trial.json"), &d);
    CHECK(rc == 0, "cmrc: %s", err_msg());
    if (rc == 0) {
        feature_opts o = {.max_seq_length = 64, .doc_stride = 16};
        features f1, f3;
        int r1 = features_build(&d, tp.t, &o, 1, &f1), r3 = features_build(&d, tp.t, &o, 3, &f3);
        CHECK(r1 == 0 && r3 == 0 && features_equal(&f1, &f3), "1 and 3 threads give different features (%d, %d)", r1, r3);
        printf("threads: 1 and 3 threads give %s features (%d windows)\n", features_equal(&f1, &f3) ? "identical" : "DIFFERENT", f1.n);
        /* .npy round trip of the [F,T] and [F] arrays. */
        char path[512];
        int64_t shape[2] = {f1.n, f1.T};
        snprintf(path, sizeof path, "%s/input_ids.npy", tu_tmpdir());
        rc = npy_write_i32(path, f1.input_ids, 2, shape);
        npy_dtype dt;
        int nd;
        int64_t sh[NPY_MAX_DIMS];
        void *data = NULL;
        if (!rc) rc = npy_read(path, &dt, &nd, sh, &data);
        CHECK(rc == 0 && dt == NPY_I32 && nd == 2 && sh[0] == f1.n && sh[1] == f1.T &&
                  !memcmp(data, f1.input_ids, (size_t)f1.n * f1.T * 4),
              "npy round trip of input_ids: %s", rc ? err_msg() : "contents differ");
        free(data);
        snprintf(path, sizeof path, "%s/start.npy", tu_tmpdir());
        rc = npy_write_i32(path, f1.start_positions, 1, shape);
        data = NULL;
        if (!rc) rc = npy_read(path, &dt, &nd, sh, &data);
        CHECK(rc == 0 && nd == 1 && sh[0] == f1.n && !memcmp(data, f1.start_positions, (size_t)f1.n * 4),
              "npy round trip of start_positions: %s", rc ? err_msg() : "contents differ");
        free(data);
        /* A truncated .npy is refused. */
        char *buf;
        size_t len;
        if (file_read_all(path, &buf, &len) == 0) {
            file_write_atomic(path, buf, len - 3);
            free(buf);
            data = NULL;
            rc = npy_read(path, &dt, &nd, sh, &data);
            CHECK(rc == ERR_INPUT && strstr(err_msg(), "does not match"), "truncated npy: rc %d %s", rc, err_msg());
            free(data);
        }
        features_free(&f1);
        features_free(&f3);
        squad_free(&d);
    }
    tok_close(&tp);
}

/* SQuAD 2.0: SQuAD dev made v2 (tests/data/squad2_dev_slice.json, a third of
 * the questions without answers) against run_qa.py's prepare_train_features
 * (tests/ref/features/squad2_T128_S32.bin): the same windows and labels with
 * and without version_2_with_negative (unanswerable questions have no
 * answers, so both label them (0, 0)); every window of an unanswerable
 * question is trainable. And a question marked is_impossible that still
 * lists an answer: (0, 0) and trainable under v2, its answer under v1. */
static void test_squad2(const tok_pair *tp)
{
    const char *setting = "squad2_T128_S32";
    ref_file r;
    int ok = ref_load("tests/ref/features/squad2_T128_S32.bin", &r) == 0;
    CHECK(ok, "%s: cannot read the reference", setting);
    squad_data d;
    int rc = ok ? squad_load("tests/data/squad2_dev_slice.json", &d) : -1;
    CHECK(!ok || rc == 0, "squad2 slice: %s", err_msg());
    for (int v2 = 0; ok && rc == 0 && v2 < 2; v2++) {
        feature_opts o = {.max_seq_length = 128, .doc_stride = 32, .version_2_with_negative = v2};
        features f;
        int frc = features_build(&d, tp->t, &o, 0, &f);
        CHECK(frc == 0, "%s: %s", setting, err_msg());
        if (frc) continue;
        char name[64];
        snprintf(name, sizeof name, "%s%s", setting, v2 ? " v2" : "");
        compare_ref(name, &f, &d, &r);
        int nimp = 0, imp_cls = 0, imp_train = 0;
        for (int i = 0; i < f.n; i++) {
            const squad_example *e = &d.ex[f.example[i]];
            if (!e->is_impossible) continue;
            nimp++;
            imp_cls += f.start_positions[i] == 0 && f.end_positions[i] == 0;
            imp_train += features_trainable(&f, &d, i);
        }
        printf("%s: %d windows of unanswerable questions, %d labelled [CLS], %d trainable\n", name, nimp, imp_cls, imp_train);
        CHECK(nimp > 100 && imp_cls == nimp && imp_train == nimp, "%s: unanswerable windows %d, at [CLS] %d, trainable %d",
              name, nimp, imp_cls, imp_train);
        features_free(&f);
    }
    if (ok && rc == 0) squad_free(&d);
    if (ok) free(r.buf);

    /* is_impossible with an answer listed */
    if (load_words("impossible.json",
                   "{\"id\": \"i\", \"question\": \"what?\", \"is_impossible\": true, "
                   "\"answers\": [{\"text\": \"w3\", \"answer_start\": 9}]}",
                   &d))
        return;
    for (int v2 = 0; v2 < 2; v2++) {
        feature_opts o = {.max_seq_length = 128, .doc_stride = 32, .version_2_with_negative = v2};
        features f;
        rc = features_build(&d, tp->t, &o, 1, &f);
        CHECK(rc == 0 && f.n == 1, "impossible: %s", err_msg());
        if (rc) continue;
        int at_cls = f.start_positions[0] == 0 && f.end_positions[0] == 0;
        CHECK(v2 ? at_cls : !at_cls, "is_impossible with an answer, v2=%d: labels (%d, %d)", v2, f.start_positions[0],
              f.end_positions[0]);
        CHECK(features_trainable(&f, &d, 0), "is_impossible with an answer, v2=%d: trainable", v2);
        features_free(&f);
    }
    squad_free(&d);
}

int main(void)
{
    /* Under the sanitizers the two T=384 sets are enough: the T=64 ones
     * run the same code over more windows. */
    test_parity("squad", "squad-v1.1/dev-v1.1.json", "vocab/bert-base-uncased-vocab.txt", 1, 384, 128);
    test_parity("cmrc", "cmrc2018/cmrc2018_trial.json", "vocab/bert-base-chinese-vocab.txt", 0, 384, 128);
    if (!tu_sanitized()) {
        test_parity("squad", "squad-v1.1/dev-v1.1.json", "vocab/bert-base-uncased-vocab.txt", 1, 64, 16);
        test_parity("cmrc", "cmrc2018/cmrc2018_trial.json", "vocab/bert-base-chinese-vocab.txt", 0, 64, 16);
    }
    tok_pair tp;
    if (tok_open("vocab/bert-base-uncased-vocab.txt", 1, &tp) == 0) {
        test_layout(&tp);
        test_errors(&tp);
        test_edges(&tp);
        test_squad2(&tp);
        tok_close(&tp);
    }
    test_threads_and_npy();
    return tu_done();
}
