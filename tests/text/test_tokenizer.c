/* The tokenizer against transformers' BertTokenizerFast: ids and offsets of every context and question
 * of SQuAD v1.1 dev (uncased vocab, lower case on and off), CMRC 2018 trial and XQuAD zh (chinese
 * vocab, lower case off) and tests/data/hard_strings.txt, and what it does with every code point on
 * its own. References: tests/ref/tokenizer/ (tools/tokenizer_parity.py). Also: invalid UTF-8, special
 * tokens, appending, and concurrent encodes with one tokenizer. */
#include "testutil.h"

#include "core/fileio.h"
#include "text/tokenizer.h"
#include "text/unicode.h"

#include <jansson.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char **s;
    size_t *len;
    int n, cap;
} strings;

static void strings_add(strings *ss, const char *s, size_t len)
{
    if (ss->n == ss->cap) {
        ss->cap = ss->cap ? ss->cap * 2 : 256;
        ss->s = realloc(ss->s, (size_t)ss->cap * sizeof *ss->s);
        ss->len = realloc(ss->len, (size_t)ss->cap * sizeof *ss->len);
    }
    ss->s[ss->n] = malloc(len + 1);
    memcpy(ss->s[ss->n], s, len);
    ss->s[ss->n][len] = 0;
    ss->len[ss->n++] = len;
}

static void strings_free(strings *ss)
{
    for (int i = 0; i < ss->n; i++) free(ss->s[i]);
    free(ss->s);
    free(ss->len);
    memset(ss, 0, sizeof *ss);
}

/* Every context and question in JSON order, iterated here (not with the project's SQuAD reader) so
 * that this test depends on nothing but the tokenizer. */
static int squad_strings(const char *path, strings *ss)
{
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root) {
        fprintf(stderr, "%s:%d:%d: %s\n", path, je.line, je.column, je.text);
        return -1;
    }
    size_t i, j, k;
    json_t *art, *par, *qa;
    json_array_foreach(json_object_get(root, "data"), i, art) {
        json_array_foreach(json_object_get(art, "paragraphs"), j, par) {
            json_t *c = json_object_get(par, "context");
            strings_add(ss, json_string_value(c), json_string_length(c));
            json_array_foreach(json_object_get(par, "qas"), k, qa) {
                json_t *q = json_object_get(qa, "question");
                strings_add(ss, json_string_value(q), json_string_length(q));
            }
        }
    }
    json_decref(root);
    return 0;
}

static int hard_strings(strings *ss)
{
    char *data;
    size_t n;
    if (file_read_all("tests/data/hard_strings.txt", &data, &n)) {
        fprintf(stderr, "tests/data/hard_strings.txt: cannot read\n");
        return -1;
    }
    int line = 0;
    for (char *p = data, *nl; p < data + n; p = nl + 1) {
        nl = memchr(p, '\n', (size_t)(data + n - p));
        if (!nl) nl = data + n;
        line++;
        if (nl == p || *p == '#') continue;
        json_error_t je;
        json_t *s = json_loadb(p, (size_t)(nl - p), JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
        if (!json_is_string(s)) {
            fprintf(stderr, "hard_strings.txt:%d: not a JSON string: %s\n", line, je.text);
            free(data);
            return -1;
        }
        strings_add(ss, json_string_value(s), json_string_length(s));
        json_decref(s);
    }
    free(data);
    return 0;
}

static uint64_t token_hash(const token_list *l)
{
    uint64_t h = HASH64_INIT;
    for (int i = 0; i < l->n; i++) {
        int32_t t[3] = {l->ids[i], l->begin[i], l->end[i]};
        h = hash64(t, sizeof t, h); /* little-endian int32s, as the script packs them */
    }
    return h;
}

static void print_escaped(const char *s, size_t n)
{
    size_t lim = n > 300 ? 300 : n;
    for (size_t i = 0; i < lim; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f) fprintf(stderr, "\\x%02x", c);
        else fputc(c, stderr);
    }
    if (lim < n) fprintf(stderr, "... (%zu bytes)", n);
}

typedef struct {
    const char *name, *ref, *vocab, *data; /* data NULL: the hard strings */
    int lower;
} parity_set;

static uint32_t rd32(const unsigned char *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t rd64(const unsigned char *p) { return rd32(p) | (uint64_t)rd32(p + 4) << 32; }

static void run_set(const parity_set *ps)
{
    char refpath[256];
    snprintf(refpath, sizeof refpath, "tests/ref/tokenizer/%s.bin", ps->ref);
    char *ref;
    size_t reflen;
    if (file_read_all(refpath, &ref, &reflen) || reflen < 16 || memcmp(ref, "BTKREF1", 8)) {
        CHECK(0, "%s: missing or not a reference file", refpath);
        return;
    }
    const unsigned char *r = (const unsigned char *)ref;
    uint32_t nstr = rd32(r + 8), nfull = rd32(r + 12);
    strings ss = {0};
    int rc = ps->data ? squad_strings(tu_data(ps->data), &ss) : hard_strings(&ss);
    vocab *v = NULL;
    tokenizer *t = NULL;
    if (rc || vocab_load(tu_data(ps->vocab), &v) || tokenizer_create(&t, v, ps->lower)) {
        CHECK(0, "%s: cannot load the data or the vocab", ps->name);
        free(ref);
        strings_free(&ss);
        vocab_free(v);
        return;
    }
    CHECK((uint32_t)ss.n == nstr, "%s: %d strings in the data, %u in %s", ps->name, ss.n, nstr, refpath);
    size_t need = 16 + (size_t)nstr * 20;
    const unsigned char *full = r + need;
    int n = ss.n < (int)nstr ? ss.n : (int)nstr, same_text = 0, same = 0, shown = 0;
    long tokens = 0;
    token_list tl = {0};
    for (int i = 0; i < n && need <= reflen; i++) {
        const unsigned char *rec = r + 16 + (size_t)i * 20;
        uint64_t th = rd64(rec), kh = rd64(rec + 8);
        uint32_t nt = rd32(rec + 16);
        const unsigned char *fi = NULL;
        if ((uint32_t)i < nfull) {
            fi = full;
            full += (size_t)nt * 12;
            if ((size_t)(full - r) > reflen) break;
        }
        same_text += hash64(ss.s[i], ss.len[i], HASH64_INIT) == th;
        token_list_clear(&tl);
        if (tokenizer_encode(t, ss.s[i], ss.len[i], &tl)) {
            CHECK(0, "%s #%d: encode failed", ps->name, i);
            continue;
        }
        tokens += tl.n;
        if ((uint32_t)tl.n == nt && token_hash(&tl) == kh) {
            same++;
            continue;
        }
        if (shown++ >= 5) continue;
        fprintf(stderr, "MISMATCH %s #%d: %d tokens, want %u: ", ps->name, i, tl.n, nt);
        print_escaped(ss.s[i], ss.len[i]);
        fputc('\n', stderr);
        if (!fi) continue;
        for (uint32_t k = 0; k < nt || k < (uint32_t)tl.n; k++) {
            int32_t wi = k < nt ? (int32_t)rd32(fi + 4 * k) : -1, wb = k < nt ? (int32_t)rd32(fi + 4 * (nt + k)) : -1,
                    we = k < nt ? (int32_t)rd32(fi + 4 * (2 * nt + k)) : -1;
            int gi = k < (uint32_t)tl.n ? tl.ids[k] : -1, gb = k < (uint32_t)tl.n ? tl.begin[k] : -1,
                ge = k < (uint32_t)tl.n ? tl.end[k] : -1;
            if (wi == gi && wb == gb && we == ge) continue;
            fprintf(stderr, "  token %u: got %d:%d-%d (%s) want %d:%d-%d (%s)\n", k, gi, gb, ge,
                    gi >= 0 ? vocab_token(v, gi) : "-", wi, wb, we, wi >= 0 ? vocab_token(v, wi) : "-");
            break;
        }
    }
    printf("%-14s %6d strings, %6d same text, %6d same ids+offsets, %8ld tokens (%s)\n", ps->name, n, same_text,
           same, tokens, refpath);
    CHECK(same_text == (int)nstr, "%s: %d of %u strings differ from the ones the reference was made from", ps->name,
          (int)nstr - same_text, nstr);
    CHECK(same == (int)nstr, "%s: %d of %u strings tokenized differently", ps->name, (int)nstr - same, nstr);
    token_list_free(&tl);
    tokenizer_free(t);
    vocab_free(v);
    strings_free(&ss);
    free(ref);
}

/* Every code point alone: class and lower-cased normalization, against codepoints.txt. */
static void codepoints(void)
{
    char *data;
    size_t n;
    if (file_read_all("tests/ref/tokenizer/codepoints.txt", &data, &n)) {
        CHECK(0, "tests/ref/tokenizer/codepoints.txt: cannot read");
        return;
    }
    char *cls = malloc(0x110000);
    memset(cls, 'O', 0x110000);
    uint32_t(*norm)[9] = calloc(0x110000, sizeof *norm); /* [0] = count + 1 when listed */
    uint64_t want_hash = 0;
    for (char *p = data, *nl; p < data + n; p = nl + 1) {
        nl = memchr(p, '\n', (size_t)(data + n - p));
        if (!nl) nl = data + n;
        *nl = 0;
        unsigned a, b;
        char k;
        if (sscanf(p, "range %x %x %c", &a, &b, &k) == 3 && b < 0x110000) {
            for (unsigned c = a; c <= b; c++) cls[c] = k;
        } else if (!strncmp(p, "normhash ", 9)) {
            want_hash = strtoull(p + 9, NULL, 16);
        } else if (!strncmp(p, "norm ", 5)) {
            char *q = p + 5;
            unsigned cp = (unsigned)strtoul(q, &q, 16), m = 0;
            while (*q == ' ' && m < 8) norm[cp < 0x110000 ? cp : 0][1 + m++] = (uint32_t)strtoul(q, &q, 16);
            if (cp < 0x110000) norm[cp][0] = m + 1;
        }
    }
    static const char letter[] = {'O', 'X', 'P', 'W', 'C'};
    int bad_cls = 0, bad_norm = 0, checked = 0;
    uint64_t h = HASH64_INIT;
    for (uint32_t cp = 0; cp < 0x110000; cp++) {
        if (cp >= 0xD800 && cp < 0xE000) continue;
        uni_props p;
        uni_get(cp, &p);
        checked++;
        if (letter[p.cls] != cls[cp] && bad_cls++ < 5)
            fprintf(stderr, "MISMATCH U+%04X: class %c, want %c\n", cp, letter[p.cls], cls[cp]);
        if (cls[cp] != 'O' && cls[cp] != 'P' && cls[cp] != 'C') continue;
        uint32_t out[UNI_MAXDECOMP * UNI_MAXLOWER];
        int m = uni_normalize_one(cp, out);
        char buf[4 * UNI_MAXDECOMP * UNI_MAXLOWER + 8];
        int nb = 0;
        for (int i = 0; i < m; i++) nb += utf8_encode(out[i], buf + nb);
        buf[nb++] = 0;
        unsigned char le[4] = {cp & 255, (cp >> 8) & 255, (cp >> 16) & 255, 0};
        h = hash64(le, 4, h);
        h = hash64(buf, (size_t)nb, h);
        if (cp >= 0xAC00 && cp <= 0xD7A3) continue; /* Hangul: only the hash covers them */
        int ok;
        if (norm[cp][0]) {
            ok = (uint32_t)m == norm[cp][0] - 1;
            for (int i = 0; ok && i < m; i++) ok = out[i] == norm[cp][1 + i];
        } else {
            ok = m == 1 && out[0] == cp;
        }
        if (!ok && bad_norm++ < 5) {
            fprintf(stderr, "MISMATCH U+%04X: normalized to", cp);
            for (int i = 0; i < m; i++) fprintf(stderr, " %04X", out[i]);
            fprintf(stderr, ", want");
            if (!norm[cp][0]) fprintf(stderr, " %04X", cp);
            for (uint32_t i = 1; i < norm[cp][0]; i++) fprintf(stderr, " %04X", norm[cp][i]);
            fputc('\n', stderr);
        }
    }
    printf("code points    %d checked: %d class differences, %d normalization differences, hash %s "
           "(tables Unicode %s, utf8proc Unicode %s)\n", checked, bad_cls, bad_norm,
           h == want_hash ? "same" : "DIFFERS", uni_tables_unicode_version(), uni_runtime_unicode_version());
    CHECK(bad_cls == 0, "%d code points classed differently", bad_cls);
    CHECK(bad_norm == 0, "%d code points normalized differently", bad_norm);
    CHECK(h == want_hash, "normalization hash %016llx, want %016llx", (unsigned long long)h,
          (unsigned long long)want_hash);
    free(cls);
    free(norm);
    free(data);
}

/* Expected from BertTokenizerFast on text.decode("utf-8", "replace"). */
static void invalid_utf8(const tokenizer *t)
{
    static const struct {
        const char *s;
        int ntok, begin, end;
    } cases[] = {
        {"a\xff" "b", 1, 0, 3}, {"a\xe2\x82" "b", 1, 0, 3}, {"\xf0\x9f\x98x", 1, 1, 2}, {"\xed\xa0\x80x", 1, 3, 4},
        {"\xc0\xafx", 1, 2, 3}, {"ab\xe2\x82", 1, 0, 2}, {"\xf4\x90\x80\x80 y", 1, 5, 6},
    };
    token_list l = {0};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        token_list_clear(&l);
        int rc = tokenizer_encode(t, cases[i].s, strlen(cases[i].s), &l);
        CHECK(rc == 0 && l.n == cases[i].ntok && l.begin[l.n - 1] == cases[i].begin && l.end[l.n - 1] == cases[i].end,
              "invalid UTF-8 case %zu: rc %d, %d tokens, last %d-%d; want %d tokens, last %d-%d", i, rc, l.n,
              l.n ? l.begin[l.n - 1] : -1, l.n ? l.end[l.n - 1] : -1, cases[i].ntok, cases[i].begin, cases[i].end);
    }
    /* NUL bytes inside the text are removed, not an end */
    token_list_clear(&l);
    tokenizer_encode(t, "abcd", 4, &l);
    int n4 = l.n, id0 = l.ids[0];
    token_list_clear(&l);
    CHECK(tokenizer_encode(t, "ab\0cd", 5, &l) == 0 && l.n == n4 && l.ids[0] == id0 && l.end[l.n - 1] == 5,
          "NUL inside a word: %d tokens ending at %d, want %d as abcd ending at 5", l.n, l.n ? l.end[l.n - 1] : -1, n4);
    /* encode appends */
    token_list_clear(&l);
    tokenizer_encode(t, "hello", 5, &l);
    tokenizer_encode(t, "world", 5, &l);
    const vocab *v = tokenizer_vocab(t);
    CHECK(l.n == 2 && l.ids[0] == vocab_find(v, "hello", 5) && l.ids[1] == vocab_find(v, "world", 5) && l.begin[1] == 0,
          "encode appends: %d tokens", l.n);
    token_list_clear(&l);
    CHECK(tokenizer_encode(t, NULL, 0, &l) == 0 && l.n == 0, "empty text: %d tokens", l.n);
    CHECK(tokenizer_encode(t, "[SEP]", 5, &l) == 0 && l.n == 1 && l.ids[0] == vocab_sep(v), "[SEP] in text");
    token_list_free(&l);
    printf("invalid UTF-8, NUL, appending, special tokens: checked\n");
}

/* Random strings from pieces that stress the tokenizer (invalid UTF-8, marks, special tokens, NUL):
 * no failure, offsets inside the text and in order, ids inside the vocabulary, same result twice. */
static void fuzz(const tokenizer *t, int lower)
{
    static const char *const pieces[] = {
        "a", "Zq", "e\xcc\x81", "\xcc\x81", "\xcc\x96", "\xf0\x9d\x85\xa5", "\xe0\xa2\x98", " ", "\t", "\r\n", ",",
        "[", "[SEP]", "[SE", "]", "\xff", "\xe2\x82", "\xf0\x9f\x98", "\xe4\xb8\xad", "\xea\xb0\x80", "\xef\xbf\xbd",
        "\xe2\x80\x8b", "##", "\xc4\xb0", "\xef\xac\x81", "\xc3\xa9", "unaffable", "\xf0\xa0\x80\x80", "\xc2\xa0", "1",
        "\xe3\x82\xab\xe3\x82\x99", "\xd9\x8e", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    };
    const int npieces = (int)(sizeof pieces / sizeof pieces[0]);
    const vocab *v = tokenizer_vocab(t);
    uint64_t x = 0x9E3779B97F4A7C15ull;
    char buf[8192];
    token_list a = {0}, b = {0};
    int iters = tu_sanitized() ? 300 : 3000, bad = 0;
    long tokens = 0;
    for (int it = 0; it < iters; it++) {
        size_t n = 0;
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        int np = (int)(x % 120);
        for (int k = 0; k < np; k++) {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            const char *pc = pieces[x % (uint64_t)npieces];
            size_t l = strlen(pc);
            if (x % 97 == 0) { buf[n++] = 0; continue; }
            memcpy(buf + n, pc, l);
            n += l;
        }
        int ncp = 0;
        for (size_t i = 0; i < n;) {
            uint32_t cp;
            i += (size_t)utf8_decode((const unsigned char *)buf + i, n - i, &cp);
            ncp++;
        }
        token_list_clear(&a);
        token_list_clear(&b);
        int ok = tokenizer_encode(t, buf, n, &a) == 0 && tokenizer_encode(t, buf, n, &b) == 0 && a.n == b.n;
        for (int i = 0; ok && i < a.n; i++) {
            ok = a.ids[i] == b.ids[i] && a.begin[i] == b.begin[i] && a.end[i] == b.end[i] && a.ids[i] >= 0 &&
                 a.ids[i] < vocab_size(v) && a.begin[i] >= 0 && a.begin[i] < a.end[i] && a.end[i] <= ncp &&
                 (i == 0 || a.begin[i] >= a.begin[i - 1]);
        }
        tokens += a.n;
        if (!ok && bad++ < 3) {
            fprintf(stderr, "FUZZ %s #%d: bad tokens for: ", lower ? "uncased" : "cased", it);
            print_escaped(buf, n);
            fputc('\n', stderr);
        }
    }
    printf("fuzz %-9s %d random strings, %ld tokens: %d with bad tokens\n", lower ? "uncased" : "cased", iters, tokens,
           bad);
    CHECK(bad == 0, "fuzz: %d strings gave bad tokens", bad);
    token_list_free(&a);
    token_list_free(&b);
}

typedef struct {
    const tokenizer *t;
    const strings *ss;
    int from, step, n;
    uint64_t *hashes;
    int fails;
} job;

static void *encode_job(void *arg)
{
    job *j = arg;
    token_list l = {0};
    for (int i = j->from; i < j->n; i += j->step) {
        token_list_clear(&l);
        if (tokenizer_encode(j->t, j->ss->s[i], j->ss->len[i], &l)) j->fails++;
        j->hashes[i] = token_hash(&l) ^ (uint64_t)l.n;
    }
    token_list_free(&l);
    return NULL;
}

/* Several threads encode with one tokenizer; each string must come out as it does alone. */
static void threads(void)
{
    strings ss = {0};
    vocab *v = NULL;
    tokenizer *t = NULL;
    if (squad_strings(tu_data("squad-v1.1/dev-v1.1.json"), &ss) || vocab_load(tu_data("vocab/bert-base-uncased-vocab.txt"), &v) ||
        tokenizer_create(&t, v, 1)) {
        CHECK(0, "threads: cannot load");
        return;
    }
    int total = tu_sanitized() && ss.n > 2000 ? 2000 : ss.n;
    uint64_t *one = calloc((size_t)total, 8), *many = calloc((size_t)total, 8);
    job j1 = {t, &ss, 0, 1, total, one, 0};
    encode_job(&j1);
    enum { NT = 4 };
    pthread_t th[NT];
    job jobs[NT];
    for (int k = 0; k < NT; k++) {
        jobs[k] = (job){t, &ss, k, NT, total, many, 0};
        pthread_create(&th[k], NULL, encode_job, &jobs[k]);
    }
    int fails = j1.fails;
    for (int k = 0; k < NT; k++) {
        pthread_join(th[k], NULL);
        fails += jobs[k].fails;
    }
    int diff = 0;
    for (int i = 0; i < total; i++) diff += one[i] != many[i];
    printf("threads        %d strings encoded by %d threads at once: %d differ from one thread, %d failed\n", total,
           NT, diff, fails);
    CHECK(diff == 0 && fails == 0, "concurrent encodes: %d differ, %d failed", diff, fails);
    free(one);
    free(many);
    tokenizer_free(t);
    vocab_free(v);
    strings_free(&ss);
}

int main(void)
{
    static const parity_set sets[] = {
        {"squad uncased", "squad_uncased", "vocab/bert-base-uncased-vocab.txt", "squad-v1.1/dev-v1.1.json", 1},
        {"squad cased", "squad_cased", "vocab/bert-base-uncased-vocab.txt", "squad-v1.1/dev-v1.1.json", 0},
        {"cmrc2018", "cmrc", "vocab/bert-base-chinese-vocab.txt", "cmrc2018/cmrc2018_trial.json", 0},
        {"xquad zh", "xquad_zh", "vocab/bert-base-chinese-vocab.txt", "xquad/xquad.zh.json", 0},
        {"hard uncased", "hard_uncased", "vocab/bert-base-uncased-vocab.txt", NULL, 1},
        {"hard cased", "hard_cased", "vocab/bert-base-uncased-vocab.txt", NULL, 0},
        {"hard chinese", "hard_chinese", "vocab/bert-base-chinese-vocab.txt", NULL, 0},
    };
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++) run_set(&sets[i]);
    codepoints();
    vocab *v = NULL;
    tokenizer *t = NULL;
    if (vocab_load(tu_data("vocab/bert-base-uncased-vocab.txt"), &v) == 0 && tokenizer_create(&t, v, 1) == 0) {
        invalid_utf8(t);
        fuzz(t, 1);
        tokenizer_free(t);
        if (tokenizer_create(&t, v, 0) == 0) fuzz(t, 0);
    } else {
        CHECK(0, "cannot load the uncased vocab");
    }
    tokenizer_free(t);
    vocab_free(v);
    threads();
    return tu_done();
}
