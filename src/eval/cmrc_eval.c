/* CMRC 2018's official metric (cmrc2018_evaluate.py, "v5 - special", the
 * one for SQuAD-format files), from its published definition:
 *
 *   text   = answer.lower().strip()        (Python 2: simple case mapping)
 *   EM     = 1 when some gold answer equals the prediction after both drop
 *            every character of the punctuation list SP below
 *   tokens = mixed_segmentation(text): SP characters dropped; every CJK
 *            ideograph U+4E00..U+9FA5 is a token; the runs of other characters
 *            between them are tokenised with nltk.word_tokenize
 *   F1     = from the longest common contiguous run of tokens (LCS length L):
 *            P = L / len(pred tokens), R = L / len(gold tokens),
 *            F1 = 2PR / (P + R), 0 when L = 0; the max over gold answers
 *   result = 100 * sum / questions, unanswered questions counted as 0.
 *
 * word_tokenize is nltk's NLTKWordTokenizer, ported in treebank.c (the
 * sentence split that word_tokenize does first is left out: answers are
 * short, and punkt's model is data that C does not have). ':' '-' '*' and
 * the other ASCII characters of SP are removed before tokenising, as in the
 * script.
 * The script's SP list includes the two-character string '……', which never
 * equals a single character, so '…' is kept, as there. */
#include "eval/squad_eval.h"

#include "core/alloc.h"
#include "eval/pytext.h"
#include "eval/treebank.h"

#include <stdlib.h>
#include <string.h>

static int cmrc_punct(int32_t c)
{
    static const int32_t sp[] = {'-', ':', '_', '*', '^', '/', '\\', '~', '`', '+', '=', 0xFF0C, 0x3002, 0xFF1A,
                                 0xFF1F, 0xFF01, 0x201C, 0x201D, 0xFF1B, 0x2019, 0x300A, 0x300B, 0xB7, 0x3001,
                                 0x300C, 0x300D, 0xFF08, 0xFF09, 0xFF0D, 0xFF5E, 0x300E, 0x300F};
    for (size_t i = 0; i < sizeof sp / sizeof sp[0]; i++)
        if (sp[i] == c) return 1;
    return 0;
}

static int cmrc_cjk(int32_t c) { return c >= 0x4E00 && c <= 0x9FA5; }

/* Python 2.7's unicode.isspace() also counts U+180E (Zs in Unicode 5.2). */
static int py2_isspace(int32_t c) { return pytext_isspace(c) || c == 0x180E; }

/* lower().strip() */
static void lower_strip(const char *s, size_t n, pytext_cps *out)
{
    pytext_cps t = {0};
    pytext_decode(s, n, &t);
    size_t b = 0, e = t.n;
    while (b < e && py2_isspace(t.cp[b])) b++;
    while (e > b && py2_isspace(t.cp[e - 1])) e--;
    for (size_t i = b; i < e; i++) pytext_push(out, pytext_lower_simple(t.cp[i]));
    pytext_cps_free(&t);
}

typedef struct {
    pytext_cps text; /* the tokens, each followed by a 0 separator */
    size_t *start;
    int n, cap;
} token_list;

static void tok_add(token_list *l, const int32_t *cp, size_t n)
{
    if (n == 0) return;
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 16;
        l->start = xrealloc(l->start, (size_t)l->cap * sizeof *l->start);
    }
    l->start[l->n++] = l->text.n;
    for (size_t i = 0; i < n; i++) pytext_push(&l->text, cp[i]);
    pytext_push(&l->text, 0);
}

static void emit_token(void *ctx, const int32_t *cp, size_t n) { tok_add(ctx, cp, n); }

static void word_tokenize(const int32_t *run, size_t n, token_list *out)
{
    if (n) treebank_tokenize(run, n, emit_token, out);
}

/* mixed_segmentation(s, rm_punc=True) */
static void mixed_segmentation(const char *s, size_t n, token_list *out)
{
    pytext_cps t = {0}, run = {0};
    lower_strip(s, n, &t);
    for (size_t i = 0; i < t.n; i++) {
        int32_t c = t.cp[i];
        if (cmrc_punct(c)) continue;
        if (cmrc_cjk(c)) {
            word_tokenize(run.cp, run.n, out);
            run.n = 0;
            tok_add(out, &c, 1);
        } else {
            pytext_push(&run, c);
        }
    }
    word_tokenize(run.cp, run.n, out);
    pytext_cps_free(&t);
    pytext_cps_free(&run);
}

static void tok_free(token_list *l)
{
    pytext_cps_free(&l->text);
    free(l->start);
}

static int tok_eq(const token_list *a, int i, const token_list *b, int j)
{
    const int32_t *x = a->text.cp + a->start[i], *y = b->text.cp + b->start[j];
    while (*x && *x == *y) x++, y++;
    return *x == *y;
}

double cmrc_f1(const char *pred, size_t npred, const char *gold, size_t ngold)
{
    token_list g = {0}, p = {0};
    mixed_segmentation(gold, ngold, &g);
    mixed_segmentation(pred, npred, &p);
    /* find_lcs: longest common contiguous run, one DP row at a time */
    int *prev = xcalloc((size_t)p.n + 1, sizeof *prev), *cur = xcalloc((size_t)p.n + 1, sizeof *cur);
    int lcs = 0;
    for (int i = 0; i < g.n; i++) {
        for (int j = 0; j < p.n; j++) {
            cur[j + 1] = tok_eq(&g, i, &p, j) ? prev[j] + 1 : 0;
            if (cur[j + 1] > lcs) lcs = cur[j + 1];
        }
        int *tmp = prev;
        prev = cur;
        cur = tmp;
    }
    double f1 = 0;
    if (lcs > 0) {
        double precision = 1.0 * lcs / p.n;
        double recall = 1.0 * lcs / g.n;
        f1 = (2 * precision * recall) / (precision + recall);
    }
    free(prev);
    free(cur);
    tok_free(&g);
    tok_free(&p);
    return f1;
}

int cmrc_exact_match(const char *pred, size_t npred, const char *gold, size_t ngold)
{
    pytext_cps a = {0}, b = {0};
    lower_strip(pred, npred, &a);
    lower_strip(gold, ngold, &b);
    size_t i = 0, j = 0;
    int eq;
    for (;;) {
        while (i < a.n && cmrc_punct(a.cp[i])) i++;
        while (j < b.n && cmrc_punct(b.cp[j])) j++;
        if (i == a.n || j == b.n) {
            eq = i == a.n && j == b.n;
            break;
        }
        if (a.cp[i++] != b.cp[j++]) {
            eq = 0;
            break;
        }
    }
    pytext_cps_free(&a);
    pytext_cps_free(&b);
    return eq;
}
