/* BERT tokenizer: one pass over the UTF-8 text, as the fast tokenizer's BertNormalizer,
 * BertPreTokenizer and WordPiece do it in three.
 *
 * Each code point of the text is removed, a word break, a CJK word, punctuation or a word
 * character (unicode.h). When lower casing, word characters go through NFD: the decomposed
 * characters with combining class 0 go straight on; the others wait in a "run" until the next
 * starter, are sorted stably by combining class (canonical ordering), and then marks are dropped
 * and the rest lower-cased. The surviving characters are punctuation (a word of their own) or are
 * appended to the current word, which WordPiece splits when it ends.
 *
 * Offsets: every normalized character comes from one original code point, and a token spans
 * [origin of its first character, origin of its last + 1). Where NFD reorders characters the fast
 * tokenizer gives them origins by position, not by where they came from: in a sorted run, the k-th
 * character that began a decomposition takes the origin of the k-th original character of the run,
 * and the other decomposed characters take the origin of the one before them. That is reproduced
 * here; it only shows with stacked combining marks.
 *
 * No allocation per word or token: the word lives in a fixed buffer (a word over 100 characters is
 * [UNK] whatever it holds, so only the first 101 are kept), and WordPiece hashes all prefixes of the
 * rest of a word in one pass and looks them up from the longest, never longer than the vocabulary's
 * longest token. */
#include "text/tokenizer.h"
#include "text/unicode.h"
#include "text/vocab_internal.h"

#include "core/alloc.h"
#include "core/err.h"
#include "core/fileio.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#define WORD_MAX 100 /* max_input_chars_per_word */
#define WORD_CAP (WORD_MAX + 1)
#define RUN_INLINE 32

enum { A_REMOVED, A_SPACE, A_PUNCT, A_WORD };

struct tokenizer {
    const vocab *v;
    int lower;
    uint8_t ascii_cls[128];
    int32_t ascii_id[128]; /* the one-character word of each ASCII punctuation character */
    int nspecial;
    struct {
        const char *s;
        int len, id;
    } special[5];
};

typedef struct {
    uint32_t cp;
    int32_t orig;
    uint8_t ccc, first;
} run_entry;

typedef struct {
    const tokenizer *t;
    const vocab *v;
    token_list *out;
    int err;
    /* the current word: normalized UTF-8 of its first WORD_CAP characters */
    int nc, nb;
    int32_t last_orig;
    uint16_t cb[WORD_CAP + 1]; /* byte offset of each character in wb */
    int32_t orig[WORD_CAP];
    char wb[WORD_CAP * 4];
    /* the NFD run waiting for canonical ordering */
    run_entry *run;
    int32_t *run_first; /* origins of the run's first-of-decomposition characters, in text order */
    int nrun, nfirst, caprun;
    int32_t consumed; /* origin of the last character that took a position */
    run_entry run_inline[RUN_INLINE];
    int32_t first_inline[RUN_INLINE];
} enc;

void token_list_clear(token_list *l)
{
    if (l) l->n = 0;
}

void token_list_free(token_list *l)
{
    if (!l) return;
    free(l->ids);
    free(l->begin);
    free(l->end);
    memset(l, 0, sizeof *l);
}

static int list_grow(token_list *l)
{
    if (l->cap > (1 << 29)) return err_set(ERR_RUNTIME, "tokenizer_encode: over 2^29 tokens");
    int cap = l->cap < 64 ? 64 : l->cap * 2;
    int32_t *a = realloc(l->ids, (size_t)cap * sizeof *a);
    if (a) l->ids = a;
    int32_t *b = realloc(l->begin, (size_t)cap * sizeof *b);
    if (b) l->begin = b;
    int32_t *c = realloc(l->end, (size_t)cap * sizeof *c);
    if (c) l->end = c;
    if (!a || !b || !c) return err_set(ERR_RUNTIME, "tokenizer_encode: out of memory for %d tokens", cap);
    l->cap = cap;
    return 0;
}

static inline void push(enc *e, int32_t id, int32_t begin, int32_t end)
{
    token_list *l = e->out;
    if (l->n == l->cap && !e->err) e->err = list_grow(l);
    if (e->err) return;
    l->ids[l->n] = id;
    l->begin[l->n] = begin;
    l->end[l->n] = end;
    l->n++;
}

/* ---- words ---- */

static inline void word_add(enc *e, uint32_t c, int32_t orig)
{
    if (e->nc < WORD_CAP) {
        e->cb[e->nc] = (uint16_t)e->nb;
        e->orig[e->nc] = orig;
        e->nb += utf8_encode(c, e->wb + e->nb);
    }
    e->nc++;
    e->last_orig = orig;
}

/* Greedy longest-match-first WordPiece over the current word. */
static void word_end(enc *e)
{
    int nc = e->nc;
    if (!nc) return;
    e->nc = 0;
    const vocab *v = e->v;
    if (nc > WORD_MAX) {
        e->nb = 0;
        push(e, v->unk, e->orig[0], e->last_orig + 1);
        return;
    }
    e->cb[nc] = (uint16_t)e->nb;
    e->nb = 0;
    const unsigned char *w = (const unsigned char *)e->wb;
    const uint16_t *cb = e->cb;
    uint64_t hs[WORD_CAP + 1];
    int save = e->out->n, start = 0;
    while (start < nc) {
        int kind = start > 0, base = cb[start], maxb = v->max_len[kind], j = start;
        uint64_t h = vocab_hash_seed(kind);
        while (j < nc && cb[j + 1] - base <= maxb) {
            for (int k = cb[j]; k < cb[j + 1]; k++) h = vocab_hash_byte(h, w[k]);
            hs[++j] = h;
        }
        /* the probes below are independent: start all their memory loads at once */
        for (int k = j; k > start; k--) vocab_prefetch(v, hs[k]);
        int id = -1;
        for (; j > start; j--) {
            id = vocab_find_kind(v, hs[j], e->wb + base, (size_t)(cb[j] - base), kind);
            if (id >= 0) break;
        }
        if (id < 0) {
            if (!e->err) e->out->n = save;
            push(e, v->unk, e->orig[0], e->orig[nc - 1] + 1);
            return;
        }
        push(e, id, e->orig[start], e->orig[j - 1] + 1);
        start = j;
    }
}

/* A character as the pre-tokenizer sees it: punctuation is a word of its own. */
static inline void pretok_char(enc *e, uint32_t c, int cls, int32_t orig)
{
    if (cls == UNI_PUNCT) {
        word_end(e);
        word_add(e, c, orig);
        word_end(e);
    } else if (cls == UNI_SPACE) {
        word_end(e);
    } else {
        word_add(e, c, orig);
    }
}

/* A character out of NFD: drop it if a mark, else lower-case it. */
static void emit_nfd(enc *e, uint32_t c, int32_t orig)
{
    uni_props p;
    uni_get(c, &p);
    if (p.mn) return;
    uint32_t l[UNI_MAXLOWER];
    int nl = uni_lower(c, l);
    for (int i = 0; i < nl; i++) {
        if (l[i] != c) uni_get(l[i], &p);
        pretok_char(e, l[i], p.cls, orig);
    }
}

/* ---- NFD runs ---- */

static void run_sort(enc *e)
{
    run_entry *r = e->run;
    int n = e->nrun;
    if (n <= RUN_INLINE) {
        for (int i = 1; i < n; i++) {
            run_entry x = r[i];
            int j = i;
            for (; j > 0 && r[j - 1].ccc > x.ccc; j--) r[j] = r[j - 1];
            r[j] = x;
        }
        return;
    }
    /* long runs (stacked marks in hostile text): counting sort, stable and linear */
    run_entry *tmp = malloc((size_t)n * sizeof *tmp);
    if (!tmp) {
        e->err = err_set(ERR_RUNTIME, "tokenizer_encode: out of memory for %d combining marks", n);
        return;
    }
    int count[257] = {0};
    for (int i = 0; i < n; i++) count[r[i].ccc + 1]++;
    for (int c = 1; c < 257; c++) count[c] += count[c - 1];
    for (int i = 0; i < n; i++) tmp[count[r[i].ccc]++] = r[i];
    memcpy(r, tmp, (size_t)n * sizeof *r);
    free(tmp);
}

static void run_flush(enc *e)
{
    run_sort(e);
    int k = 0;
    for (int i = 0; i < e->nrun && !e->err; i++) {
        if (e->run[i].first) e->consumed = e->run_first[k++];
        emit_nfd(e, e->run[i].cp, e->consumed);
    }
    e->nrun = e->nfirst = 0;
}

static void run_push(enc *e, uint32_t cp, int ccc, int first, int32_t orig)
{
    if (e->nrun == e->caprun) {
        if (e->caprun > (1 << 28)) {
            e->err = err_set(ERR_RUNTIME, "tokenizer_encode: over 2^28 stacked combining marks");
            return;
        }
        int cap = e->caprun * 2;
        run_entry *r = malloc((size_t)cap * sizeof *r);
        int32_t *f = malloc((size_t)cap * sizeof *f);
        if (!r || !f) {
            free(r);
            free(f);
            e->err = err_set(ERR_RUNTIME, "tokenizer_encode: out of memory for %d combining marks", cap);
            return;
        }
        memcpy(r, e->run, (size_t)e->nrun * sizeof *r);
        memcpy(f, e->run_first, (size_t)e->nfirst * sizeof *f);
        if (e->run != e->run_inline) {
            free(e->run);
            free(e->run_first);
        }
        e->run = r;
        e->run_first = f;
        e->caprun = cap;
    }
    e->run[e->nrun++] = (run_entry){cp, orig, (uint8_t)ccc, (uint8_t)first};
    if (first) e->run_first[e->nfirst++] = orig;
}

/* NFD of one original character (lower-case mode). */
static void nfd_char(enc *e, uint32_t cp, int32_t ci)
{
    uint32_t d[UNI_MAXDECOMP];
    int nd = uni_decompose(cp, d);
    for (int k = 0; k < nd && !e->err; k++) {
        uni_props p;
        uni_get(d[k], &p);
        if (p.ccc) {
            run_push(e, d[k], p.ccc, k == 0, ci);
            continue;
        }
        if (e->nrun) run_flush(e);
        if (k == 0) e->consumed = ci;
        emit_nfd(e, d[k], e->consumed);
    }
}

static inline void boundary(enc *e)
{
    if (e->nrun) run_flush(e);
    word_end(e);
}

static int match_special(const tokenizer *t, const unsigned char *s, size_t n, int *id)
{
    for (int k = 0; k < t->nspecial; k++) {
        int len = t->special[k].len;
        if (n >= (size_t)len && !memcmp(s, t->special[k].s, (size_t)len)) {
            *id = t->special[k].id;
            return len;
        }
    }
    return 0;
}

int tokenizer_encode(const tokenizer *t, const char *text, size_t n, token_list *out)
{
    if (!t || !out || (!text && n)) return err_set(ERR_INPUT, "tokenizer_encode: null argument");
    if (n > 0x7FFFFFFF) return err_set(ERR_INPUT, "tokenizer_encode: text of %zu bytes is over the 2 GiB limit", n);
    enc e;
    e.t = t;
    e.v = t->v;
    e.out = out;
    e.err = 0;
    e.nc = e.nb = 0;
    e.last_orig = 0;
    e.run = e.run_inline;
    e.run_first = e.first_inline;
    e.nrun = e.nfirst = 0;
    e.caprun = RUN_INLINE;
    e.consumed = 0;
    const unsigned char *s = (const unsigned char *)text;
    const int lower = t->lower;
    size_t i = 0;
    int32_t ci = 0;
    while (i < n && !e.err) {
        unsigned c = s[i];
        if (c < 0x80) {
            switch (t->ascii_cls[c]) {
            case A_WORD:
                if (e.nrun) run_flush(&e);
                if (lower && c >= 'A' && c <= 'Z') c += 32;
                if (e.nc < WORD_CAP) {
                    e.cb[e.nc] = (uint16_t)e.nb;
                    e.orig[e.nc] = ci;
                    e.wb[e.nb++] = (char)c;
                }
                e.nc++;
                e.last_orig = e.consumed = ci;
                break;
            case A_SPACE:
                boundary(&e);
                e.consumed = ci;
                break;
            case A_PUNCT: {
                int id, len;
                if (c == '[' && (len = match_special(t, s + i, n - i, &id))) {
                    boundary(&e);
                    push(&e, id, ci, ci + len);
                    e.consumed = ci + len - 1;
                    i += (size_t)len;
                    ci += len;
                    continue;
                }
                boundary(&e);
                push(&e, t->ascii_id[c], ci, ci + 1);
                e.consumed = ci;
                break;
            }
            default: /* controls are removed; they break nothing */
                break;
            }
            i++;
            ci++;
            continue;
        }
        uint32_t cp;
        i += (size_t)utf8_decode(s + i, n - i, &cp);
        uni_props p;
        uni_get(cp, &p);
        switch (p.cls) {
        case UNI_REMOVED:
            break;
        case UNI_SPACE:
            boundary(&e);
            e.consumed = ci;
            break;
        case UNI_CJK:
            boundary(&e);
            if (lower) nfd_char(&e, cp, ci);
            else word_add(&e, cp, ci);
            boundary(&e);
            e.consumed = ci;
            break;
        default:
            if (!lower) {
                pretok_char(&e, cp, p.cls, ci);
            } else if (p.simple) {
                if (e.nrun) run_flush(&e);
                e.consumed = ci;
                pretok_char(&e, cp, p.cls, ci);
            } else {
                nfd_char(&e, cp, ci);
            }
        }
        ci++;
    }
    if (!e.err) boundary(&e);
    if (e.run != e.run_inline) {
        free(e.run);
        free(e.run_first);
    }
    return e.err;
}

/* ---- set-up ---- */

int tokenizer_create(tokenizer **out, const vocab *v, int lower_case)
{
    *out = NULL;
    if (!v) return err_set(ERR_INPUT, "tokenizer_create: no vocabulary");
    uni_init();
    tokenizer *t = xcalloc(1, sizeof *t);
    t->v = v;
    t->lower = lower_case != 0;
    for (int c = 0; c < 128; c++) {
        uni_props p;
        uni_get((uint32_t)c, &p);
        t->ascii_cls[c] = p.cls == UNI_REMOVED ? A_REMOVED : p.cls == UNI_SPACE ? A_SPACE
                        : p.cls == UNI_PUNCT ? A_PUNCT : A_WORD;
        char ch = (char)c;
        int id = vocab_find(v, &ch, 1);
        t->ascii_id[c] = id >= 0 ? id : v->unk;
    }
    /* the special tokens the fast tokenizer matches in raw text (its added tokens) */
    static const char *const names[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
    const int ids[] = {v->pad, v->unk, v->cls, v->sep, v->mask_id};
    for (int k = 0; k < 5; k++) {
        if (ids[k] < 0) continue;
        t->special[t->nspecial].s = names[k];
        t->special[t->nspecial].len = (int)strlen(names[k]);
        t->special[t->nspecial].id = ids[k];
        t->nspecial++;
    }
    *out = t;
    return 0;
}

void tokenizer_free(tokenizer *t) { free(t); }
const vocab *tokenizer_vocab(const tokenizer *t) { return t->v; }
int tokenizer_lower_case(const tokenizer *t) { return t->lower; }

static int read_lower_case(const char *path, int *lower)
{
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root) return err_set(ERR_INPUT, "%s:%d:%d: %s", path, je.line, je.column, je.text);
    int rc = 0;
    if (!json_is_object(root)) {
        rc = err_set(ERR_INPUT, "%s: not a JSON object", path);
        goto done;
    }
    json_t *dl = json_object_get(root, "do_lower_case");
    if (dl && !json_is_null(dl)) {
        if (!json_is_boolean(dl)) {
            rc = err_set(ERR_INPUT, "%s: do_lower_case must be true or false", path);
            goto done;
        }
        *lower = json_is_true(dl);
    }
    json_t *sa = json_object_get(root, "strip_accents");
    if (sa && !json_is_null(sa)) {
        if (!json_is_boolean(sa)) {
            rc = err_set(ERR_INPUT, "%s: strip_accents must be true, false or null", path);
            goto done;
        }
        if (json_is_true(sa) != *lower) {
            rc = err_set(ERR_INPUT, "%s: strip_accents %s with do_lower_case %s is not supported (bertc strips "
                         "accents exactly when it lower-cases)", path, json_is_true(sa) ? "true" : "false",
                         *lower ? "true" : "false");
            goto done;
        }
    }
    json_t *cc = json_object_get(root, "tokenize_chinese_chars");
    if (cc && json_is_false(cc)) {
        rc = err_set(ERR_INPUT, "%s: tokenize_chinese_chars false is not supported", path);
        goto done;
    }
done:
    json_decref(root);
    return rc;
}

int tokenizer_load_dir(const char *model_dir, vocab **v, tokenizer **t)
{
    *v = NULL;
    *t = NULL;
    char path[4096];
    int lower = 1, rc;
    path_join(path, sizeof path, model_dir, "tokenizer_config.json");
    if (path_exists(path) && (rc = read_lower_case(path, &lower))) return rc;
    path_join(path, sizeof path, model_dir, "vocab.txt");
    if (!path_exists(path))
        return err_set(ERR_INPUT, "%s: no such file (a BERT model dir needs the WordPiece vocab.txt)", path);
    if ((rc = vocab_load(path, v))) return rc;
    if ((rc = tokenizer_create(t, *v, lower))) {
        vocab_free(*v);
        *v = NULL;
    }
    return rc;
}
