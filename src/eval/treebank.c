/* nltk's word tokenizer (NLTKWordTokenizer, the improved Treebank tokenizer
 * that nltk.word_tokenize runs on each sentence), as CMRC 2018's metric uses
 * it on the non-Chinese runs of an answer.
 *
 * NLTKWordTokenizer is a fixed list of regex substitutions that pad tokens
 * with spaces, then a whitespace split. Each pass below is one substitution,
 * written as the scan that re.sub does for that pattern (leftmost,
 * non-overlapping, lookbehind on the input of the pass). The list is nltk
 * 3.9's; parentheses are not converted to -LRB- (word_tokenize's default).
 * Differences: (?i) folds ASCII letters only, and '$' matches only at the
 * very end (Python's also matches before a final newline). */
#include "eval/treebank.h"

#include "core/alloc.h"

#include <stdlib.h>
#include <string.h>

typedef pytext_cps cps;

static int at(const cps *s, size_t i) { return i < s->n ? s->cp[i] : -1; }
static int lower_ascii(int c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }
static int in_set(int c, const char *set)
{
    for (; *set; set++)
        if ((unsigned char)*set == c) return 1;
    return 0;
}
static void push_str(cps *o, const char *s)
{
    for (; *s; s++) pytext_push(o, (unsigned char)*s);
}
/* the pass's output becomes the next pass's input */
static void next_pass(cps *s, cps *o)
{
    cps t = *s;
    *s = *o;
    *o = t;
    o->n = 0;
}

/* X -> " X " for every code point with pred(X) */
static void pad_each(cps *s, cps *o, int (*pred)(int))
{
    for (size_t i = 0; i < s->n; i++) {
        if (pred(s->cp[i])) {
            pytext_push(o, ' ');
            pytext_push(o, s->cp[i]);
            pytext_push(o, ' ');
        } else {
            pytext_push(o, s->cp[i]);
        }
    }
    next_pass(s, o);
}

/* every non-overlapping occurrence of the two code points ab -> " ab " */
static void pad_pair(cps *s, cps *o, int a, int b)
{
    for (size_t i = 0; i < s->n;) {
        if (s->cp[i] == a && at(s, i + 1) == b) {
            pytext_push(o, ' ');
            pytext_push(o, a);
            pytext_push(o, b);
            pytext_push(o, ' ');
            i += 2;
        } else {
            pytext_push(o, s->cp[i++]);
        }
    }
    next_pass(s, o);
}

static int open_quote(int c) { return c == 0xAB || c == 0x201C || c == 0x2018 || c == 0x201E; }
static int close_quote(int c) { return c == 0xBB || c == 0x201D || c == 0x2019; }
static int punct_a(int c) { return c == ';' || c == '@' || c == '#' || c == '$' || c == '%' || c == '&'; }
static int dash(int c) { return c >= 0x2012 && c <= 0x2015; }
static int qmark(int c) { return c == '?' || c == '!'; }
static int star(int c) { return c == '*'; }
static int bracket(int c) { return c < 0x80 && in_set(c, "[](){}<>"); }

/* ([^\.])(\.)(CLOSERS*)\s*$ -> "\1 \2 \3 " (with_space: CLOSERS has the
 * space and the Unicode closing quotes, and the replacement pads \2 on
 * both sides) */
static void final_period(cps *s, cps *o, int with_space)
{
    for (size_t p = 0; p + 1 < s->n; p++) {
        if (s->cp[p] == '.' || s->cp[p + 1] != '.') continue;
        size_t q = p + 2;
        while (q < s->n && ((s->cp[q] < 0x80 && in_set(s->cp[q], "])}>\"'")) ||
                            (with_space && (s->cp[q] == ' ' || close_quote(s->cp[q])))))
            q++;
        size_t r = q;
        while (r < s->n && pytext_isspace(s->cp[r])) r++;
        if (r != s->n) continue;
        for (size_t i = 0; i <= p; i++) pytext_push(o, s->cp[i]);
        pytext_push(o, ' ');
        pytext_push(o, '.');
        if (with_space) pytext_push(o, ' ');
        for (size_t i = p + 2; i < q; i++) pytext_push(o, s->cp[i]);
        pytext_push(o, ' ');
        next_pass(s, o);
        return;
    }
}

/* (?!(?:re|ve|ll|m|t|s|d|n)\b) at i, case-insensitive */
static int contraction_follows(const cps *s, size_t i)
{
    static const char *alt[] = {"re", "ve", "ll", "m", "t", "s", "d", "n"};
    for (int k = 0; k < 8; k++) {
        size_t j = 0;
        while (alt[k][j] && lower_ascii(at(s, i + j)) == alt[k][j]) j++;
        if (!alt[k][j] && !(i + j < s->n && pytext_isword(s->cp[i + j]))) return 1;
    }
    return 0;
}

/* (?i)\b(first)(second)\b -> " \1 \2 " (\b at the end: the next is not a
 * word character, or, when space_after, (?=\s)) */
static void split_word(cps *s, cps *o, const char *first, const char *second, int space_after)
{
    size_t nf = strlen(first), ns = strlen(second);
    for (size_t i = 0; i < s->n;) {
        int ok = i == 0 || !pytext_isword(s->cp[i - 1]);
        for (size_t k = 0; ok && k < nf + ns; k++)
            ok = lower_ascii(at(s, i + k)) == (k < nf ? first[k] : second[k - nf]);
        if (ok) {
            int nx = at(s, i + nf + ns);
            ok = space_after ? (nx >= 0 && pytext_isspace(nx)) : !(nx >= 0 && pytext_isword(nx));
        }
        if (!ok) {
            pytext_push(o, s->cp[i++]);
            continue;
        }
        pytext_push(o, ' ');
        for (size_t k = 0; k < nf; k++) pytext_push(o, s->cp[i + k]);
        pytext_push(o, ' ');
        for (size_t k = nf; k < nf + ns; k++) pytext_push(o, s->cp[i + k]);
        pytext_push(o, ' ');
        i += nf + ns;
    }
    next_pass(s, o);
}

/* STARTING_QUOTES and the opening-quote rules */
static void starting_quotes(cps *s, cps *o)
{
    /* STARTING_QUOTES: ([«“‘„]|[`]+) -> " \1 " */
    for (size_t i = 0; i < s->n;) {
        if (open_quote(s->cp[i]) || s->cp[i] == '`') {
            size_t j = i + 1;
            if (s->cp[i] == '`')
                while (j < s->n && s->cp[j] == '`') j++;
            pytext_push(o, ' ');
            for (; i < j; i++) pytext_push(o, s->cp[i]);
            pytext_push(o, ' ');
        } else {
            pytext_push(o, s->cp[i++]);
        }
    }
    next_pass(s, o);
    /* ^" -> `` */
    if (s->n && s->cp[0] == '"') {
        push_str(o, "``");
        for (size_t i = 1; i < s->n; i++) pytext_push(o, s->cp[i]);
        next_pass(s, o);
    }
    pad_pair(s, o, '`', '`');
    /* ([ \(\[{<])(\"|\'{2}) -> "\1 `` " */
    for (size_t i = 0; i < s->n;) {
        int c = s->cp[i];
        size_t k = 0;
        if (c < 0x80 && in_set(c, " ([{<")) {
            if (at(s, i + 1) == '"') k = 2;
            else if (at(s, i + 1) == '\'' && at(s, i + 2) == '\'') k = 3;
        }
        if (k) {
            pytext_push(o, c);
            push_str(o, " `` ");
            i += k;
        } else {
            pytext_push(o, s->cp[i++]);
        }
    }
    next_pass(s, o);
    /* (?i)(?<!\w)(\')(?!(?:re|ve|ll|m|t|s|d|n)\b)(?=\w) -> "\1 " */
    for (size_t i = 0; i < s->n; i++) {
        pytext_push(o, s->cp[i]);
        if (s->cp[i] == '\'' && !(i > 0 && pytext_isword(s->cp[i - 1])) && i + 1 < s->n && pytext_isword(s->cp[i + 1]) &&
            !contraction_follows(s, i + 1))
            pytext_push(o, ' ');
    }
    next_pass(s, o);
}

/* PUNCTUATION */
static void punctuation(cps *s, cps *o)
{
    final_period(s, o, 1);
    for (size_t i = 0; i < s->n;) { /* ([:,])([^\d]) -> " \1 \2" */
        int c = s->cp[i];
        if ((c == ':' || c == ',') && i + 1 < s->n && !pytext_isdecimal(s->cp[i + 1])) {
            pytext_push(o, ' ');
            pytext_push(o, c);
            pytext_push(o, ' ');
            pytext_push(o, s->cp[i + 1]);
            i += 2;
        } else {
            pytext_push(o, s->cp[i++]);
        }
    }
    next_pass(s, o);
    if (s->n && (s->cp[s->n - 1] == ':' || s->cp[s->n - 1] == ',')) { /* ([:,])$ -> " \1 " */
        int c = s->cp[--s->n];
        pytext_push(s, ' ');
        pytext_push(s, c);
        pytext_push(s, ' ');
    }
    for (size_t i = 0; i < s->n;) { /* \.{2,} -> " \g<0> " */
        size_t j = i;
        while (j < s->n && s->cp[j] == '.') j++;
        if (j - i >= 2) {
            pytext_push(o, ' ');
            for (; i < j; i++) pytext_push(o, '.');
            pytext_push(o, ' ');
        } else {
            pytext_push(o, s->cp[i++]);
        }
    }
    next_pass(s, o);
    pad_each(s, o, punct_a);
    pad_each(s, o, dash);
    final_period(s, o, 0);
    pad_each(s, o, qmark);
    for (size_t i = 0; i < s->n;) { /* ([^'])' -> "\1 ' " */
        if (s->cp[i] != '\'' && at(s, i + 1) == '\'' && at(s, i + 2) == ' ') {
            pytext_push(o, s->cp[i]);
            push_str(o, " ' ");
            i += 3;
        } else {
            pytext_push(o, s->cp[i++]);
        }
    }
    next_pass(s, o);
    pad_each(s, o, star);
    pad_each(s, o, bracket);
    pad_pair(s, o, '-', '-');
}

/* " " + text + " ", then ENDING_QUOTES */
static void ending_quotes(cps *s, cps *o)
{
    pytext_push(o, ' ');
    for (size_t i = 0; i < s->n; i++) pytext_push(o, s->cp[i]);
    pytext_push(o, ' ');
    next_pass(s, o);
    pad_each(s, o, close_quote);
    for (size_t i = 0; i < s->n;) { /* '' -> " '' ", then " -> " '' " */
        int two = s->cp[i] == '\'' && at(s, i + 1) == '\'';
        if (two || s->cp[i] == '"') {
            push_str(o, " '' ");
            i += two ? 2 : 1;
        } else {
            pytext_push(o, s->cp[i++]);
        }
    }
    next_pass(s, o);
    for (size_t i = 0; i < s->n;) { /* \s+ -> " " */
        if (pytext_isspace(s->cp[i])) {
            while (i < s->n && pytext_isspace(s->cp[i])) i++;
            pytext_push(o, ' ');
        } else {
            pytext_push(o, s->cp[i++]);
        }
    }
    next_pass(s, o);
    for (size_t i = 0; i < s->n;) { /* ([^' ])('[sS]|'[mM]|'[dD]|') -> "\1 \2 " */
        int c = s->cp[i];
        size_t k = 0;
        if (c != '\'' && c != ' ' && at(s, i + 1) == '\'') {
            int x = lower_ascii(at(s, i + 2));
            if ((x == 's' || x == 'm' || x == 'd') && at(s, i + 3) == ' ') k = 2;
            else if (at(s, i + 2) == ' ') k = 1;
        }
        if (k) {
            pytext_push(o, c);
            pytext_push(o, ' ');
            for (size_t j = 1; j <= k; j++) pytext_push(o, s->cp[i + j]);
            pytext_push(o, ' ');
            i += k + 2;
        } else {
            pytext_push(o, s->cp[i++]);
        }
    }
    next_pass(s, o);
    static const char *const ending[] = {"'ll", "'LL", "'re", "'RE", "'ve", "'VE", "n't", "N'T"};
    for (size_t i = 0; i < s->n;) { /* ([^' ])('ll|...|n't|N'T) -> "\1 \2 " */
        int c = s->cp[i], hit = 0;
        if (c != '\'' && c != ' ' && at(s, i + 4) == ' ')
            for (int k = 0; k < 8 && !hit; k++)
                hit = at(s, i + 1) == ending[k][0] && at(s, i + 2) == ending[k][1] && at(s, i + 3) == ending[k][2];
        if (hit) {
            pytext_push(o, c);
            pytext_push(o, ' ');
            for (size_t j = 1; j <= 3; j++) pytext_push(o, s->cp[i + j]);
            pytext_push(o, ' ');
            i += 5;
        } else {
            pytext_push(o, s->cp[i++]);
        }
    }
    next_pass(s, o);
}

/* CONTRACTIONS2 and CONTRACTIONS3 */
static void contractions(cps *s, cps *o)
{
    split_word(s, o, "can", "not", 0);
    split_word(s, o, "d", "'ye", 0);
    split_word(s, o, "gim", "me", 0);
    split_word(s, o, "gon", "na", 0);
    split_word(s, o, "got", "ta", 0);
    split_word(s, o, "lem", "me", 0);
    split_word(s, o, "more", "'n", 0);
    split_word(s, o, "wan", "na", 1);
    for (int k = 0; k < 2; k++) { /* (?i) ('t)(is|was)\b -> " \1 \2 " */
        const char *w = k ? "was" : "is";
        size_t nw = strlen(w);
        for (size_t i = 0; i < s->n;) {
            int ok = s->cp[i] == ' ' && at(s, i + 1) == '\'' && lower_ascii(at(s, i + 2)) == 't';
            for (size_t j = 0; ok && j < nw; j++) ok = lower_ascii(at(s, i + 3 + j)) == w[j];
            if (ok) ok = !(i + 3 + nw < s->n && pytext_isword(s->cp[i + 3 + nw]));
            if (ok) {
                pytext_push(o, ' ');
                pytext_push(o, '\'');
                pytext_push(o, s->cp[i + 2]);
                pytext_push(o, ' ');
                for (size_t j = 0; j < nw; j++) pytext_push(o, s->cp[i + 3 + j]);
                pytext_push(o, ' ');
                i += 3 + nw;
            } else {
                pytext_push(o, s->cp[i++]);
            }
        }
        next_pass(s, o);
    }
}

/* text.split(): each run of non-space code points goes to emit */
static void emit_words(const cps *s, treebank_emit emit, void *ctx)
{
    for (size_t i = 0; i < s->n;) {
        while (i < s->n && pytext_isspace(s->cp[i])) i++;
        size_t j = i;
        while (j < s->n && !pytext_isspace(s->cp[j])) j++;
        if (j > i) emit(ctx, s->cp + i, j - i);
        i = j;
    }
}

void treebank_tokenize(const int32_t *text, size_t n, treebank_emit emit, void *ctx)
{
    cps s = {0}, o = {0};
    for (size_t i = 0; i < n; i++) pytext_push(&s, text[i]);
    starting_quotes(&s, &o);
    punctuation(&s, &o);
    ending_quotes(&s, &o);
    contractions(&s, &o);
    emit_words(&s, emit, ctx);
    pytext_cps_free(&s);
    pytext_cps_free(&o);
}
