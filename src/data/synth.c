/* The demo's synthetic SQuAD-format data (see synth.h). Everything here is
 * ASCII, so character offsets are byte offsets. */
#include "data/synth.h"

#include "core/alloc.h"
#include "core/err.h"
#include "core/fileio.h"

#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { T_NONE = -1, T_PERSON, T_CITY, T_COMPANY, T_RIVER, T_YEAR, T_NUMBER, T_NTYPES };
enum { SPLIT_TRAIN, SPLIT_TEST };
enum { YEAR_FIRST = 1820, YEAR_LAST = 2019 };

const char *const synth_baseline_names[SYNTH_NBASELINES] = {"first", "first-not-in-question", "random"};

/* A relation: its subject type, up to two objects (A, B), sentence templates
 * that state it ({S} subject, {A}, {B} objects) and question templates
 * whose answer is A or B. */
typedef struct {
    int subj;
    int a, b;
    int a_lo, a_hi, a_step; /* values of A when it is a number: lo, lo + step, ..., hi */
    const char *sentences[6];
    const char *ask_a[6];
    const char *ask_b[6];
} relation;

static const relation relations[] = {
    {T_COMPANY, T_PERSON, T_YEAR, 0, 0, 0,
     {"{S} was founded by {A} in {B}.", "{A} founded {S} in {B}.", "In {B}, {A} started a company called {S}.",
      "{S} was started in {B} by {A}.", "{A} set up {S} in {B}."},
     {"Who founded {S}?", "Who was the founder of {S}?", "{S} was founded by whom?", "Which person started {S}?",
      "Who set up {S}?"},
     {"When was {S} founded?", "In what year was {S} founded?", "In which year did {A} start {S}?",
      "What year was {S} established?"}},
    {T_COMPANY, T_CITY, T_NONE, 0, 0, 0,
     {"{S} is based in {A}.", "The headquarters of {S} are in {A}.", "{S} has its main office in {A}.",
      "From its offices in {A}, {S} sells to many countries."},
     {"Where is {S} based?", "In which city is {S} headquartered?", "Where are the headquarters of {S}?",
      "What city is home to {S}?"},
     {0}},
    {T_COMPANY, T_NUMBER, T_NONE, 100, 9950, 50,
     {"{S} employs {A} people.", "{S} has {A} employees.", "About {A} people work for {S}.",
      "The staff of {S} numbers {A}."},
     {"How many people does {S} employ?", "How many employees does {S} have?", "How many people work for {S}?",
      "What is the size of the staff of {S}?"},
     {0}},
    {T_COMPANY, T_PERSON, T_NONE, 0, 0, 0,
     {"The chief executive of {S} is {A}.", "{A} runs {S} as its chief executive.", "{S} is led by {A}.",
      "Since last year, {A} has been in charge of {S}."},
     {"Who is the chief executive of {S}?", "Who leads {S}?", "Who runs {S}?", "Who is in charge of {S}?"},
     {0}},
    {T_PERSON, T_CITY, T_YEAR, 0, 0, 0,
     {"{S} was born in {A} in {B}.", "{S} was born in {B} in the city of {A}.", "Born in {A} in {B}, {S} grew up by the sea.",
      "In {B}, {S} was born in {A}."},
     {"Where was {S} born?", "In which city was {S} born?", "What is the birthplace of {S}?", "{S} was born in which city?"},
     {"When was {S} born?", "In what year was {S} born?", "What is the birth year of {S}?", "{S} was born in which year?"}},
    {T_PERSON, T_CITY, T_NONE, 0, 0, 0,
     {"{S} studied at the university of {A}.", "{S} went to university in {A}.", "As a student, {S} lived in {A}."},
     {"Where did {S} study?", "In which city did {S} go to university?", "Where did {S} live as a student?"},
     {0}},
    {T_PERSON, T_COMPANY, T_NONE, 0, 0, 0,
     {"{S} works as an engineer at {A}.", "{S} is a lawyer for {A}.", "{S} has a job at {A}.",
      "{A} hired {S} as a designer."},
     {"Where does {S} work?", "Which company employs {S}?", "For which company does {S} work?", "Who hired {S}?"},
     {0}},
    {T_CITY, T_PERSON, T_NONE, 0, 0, 0,
     {"The mayor of {S} is {A}.", "{A} serves as mayor of {S}.", "{S} is governed by mayor {A}.",
      "{A} was elected mayor of {S}."},
     {"Who is the mayor of {S}?", "Who governs {S}?", "Which person is mayor of {S}?", "Who was elected mayor of {S}?"},
     {0}},
    {T_CITY, T_NUMBER, T_NONE, 10000, 995000, 5000,
     {"{S} has a population of {A}.", "About {A} people live in {S}.", "{S} is home to {A} residents.",
      "The population of {S} is {A}."},
     {"What is the population of {S}?", "How many people live in {S}?", "How many residents does {S} have?",
      "How large is the population of {S}?"},
     {0}},
    {T_CITY, T_RIVER, T_NONE, 0, 0, 0,
     {"{S} lies on the {A}.", "The {A} flows through {S}.", "{S} was built on the banks of the {A}."},
     {"Which river flows through {S}?", "On which river does {S} lie?", "What river runs through {S}?"},
     {0}},
    {T_CITY, T_YEAR, T_NONE, 0, 0, 0,
     {"{S} was founded in {A}.", "The town of {S} dates back to {A}.", "Settlers founded {S} in {A}."},
     {"When was {S} founded?", "In what year was {S} founded?", "Since which year has {S} existed?"},
     {0}},
    {T_CITY, T_NUMBER, T_NONE, 10, 2990, 10,
     {"{S} lies {A} metres above the sea.", "The centre of {S} is {A} metres above sea level."},
     {"How high above the sea does {S} lie?", "At what height does {S} lie?", "How many metres above the sea is {S}?"},
     {0}},
    {T_PERSON, T_PERSON, T_NONE, 0, 0, 0,
     {"{S} married {A}.", "{S} is married to {A}.", "The wife of {S} is {A}."},
     {"Who is {S} married to?", "Whom did {S} marry?", "Who is the wife of {S}?"},
     {0}},
    {T_COMPANY, T_PERSON, T_NONE, 0, 0, 0,
     {"The chairman of {S} is {A}.", "{A} chairs the board of {S}.", "{S} has {A} as its chairman."},
     {"Who is the chairman of {S}?", "Who chairs the board of {S}?", "Who heads the board of {S}?"},
     {0}},
    {T_COMPANY, T_CITY, T_NONE, 0, 0, 0,
     {"{S} builds its products in a factory in {A}.", "The factory of {S} is in {A}.", "{S} makes its goods in {A}."},
     {"Where does {S} build its products?", "In which city is the factory of {S}?", "Where are the goods of {S} made?"},
     {0}},
    {T_COMPANY, T_YEAR, T_NONE, 0, 0, 0,
     {"{S} went public in {A}.", "Shares of {S} were first sold in {A}.", "In {A}, {S} listed its shares."},
     {"When did {S} go public?", "In which year were shares of {S} first sold?", "When did {S} list its shares?"},
     {0}},
    {T_PERSON, T_CITY, T_NONE, 0, 0, 0,
     {"{S} now lives in {A}.", "Today {S} has a house in {A}.", "{S} moved to {A} after retiring."},
     {"Where does {S} live now?", "In which city does {S} have a house?", "Where did {S} move after retiring?"},
     {0}},
    {T_PERSON, T_YEAR, T_NONE, 0, 0, 0,
     {"{S} won a prize for science in {A}.", "In {A}, {S} was given a science prize.", "The science prize went to {S} in {A}."},
     {"When did {S} win a prize?", "In which year was {S} given a science prize?", "In what year did {S} win the science prize?"},
     {0}},
    {T_CITY, T_CITY, T_NONE, 0, 0, 0,
     {"{S} is twinned with {A}.", "{S} and {A} are sister cities.", "Since long ago, {S} has had {A} as its twin town."},
     {"Which city is twinned with {S}?", "What is the sister city of {S}?", "Which town is the twin of {S}?"},
     {0}},
    {T_CITY, T_COMPANY, T_NONE, 0, 0, 0,
     {"The largest employer in {S} is {A}.", "Most people in {S} work for {A}.", "{A} is the biggest company in {S}."},
     {"What is the largest employer in {S}?", "Which company employs most people in {S}?", "Which is the biggest company in {S}?"},
     {0}},
};
enum { NREL = (int)(sizeof relations / sizeof relations[0]) };

static const char *const fillers[] = {
    "It is known for its quiet streets.", "Little else is recorded about those early years.",
    "Visitors often mention the local food.", "The region has long, cold winters.",
    "Many stories are told about that time.", "The archives of that period were lost in a fire.",
    "Local newspapers wrote about it often.", "Some of this history is still debated.",
    "The summers there are short but warm.", "Few photographs from that time survive.",
};
enum { NFILL = (int)(sizeof fillers / sizeof fillers[0]) };

static const char *const company_suffixes[] = {"Labs", "Systems", "Industries", "Motors", "Foods", "Networks", "Works", "Group"};
static const char *const consonants = "bdfgklmnprstvz";
static const char *const vowels = "aeiou";

/* ---- random numbers: splitmix64 ---- */
typedef struct {
    uint64_t s;
} rng;

static uint64_t rnext(rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static int rint_(rng *r, int n) { return (int)(rnext(r) % (uint64_t)n); }

/* ---- the word list (template words, for the vocab and name checks) ---- */
typedef struct {
    char **w;
    int n, cap;
} strlist;

static int strlist_has(const strlist *l, const char *s)
{
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->w[i], s)) return 1;
    return 0;
}
static void strlist_add(strlist *l, const char *s)
{
    if (strlist_has(l, s)) return;
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 256;
        l->w = xrealloc(l->w, (size_t)l->cap * sizeof *l->w);
    }
    l->w[l->n++] = xstrdup(s);
}
static void strlist_free(strlist *l)
{
    for (int i = 0; i < l->n; i++) free(l->w[i]);
    free(l->w);
    memset(l, 0, sizeof *l);
}

/* Adds the lower-cased letter runs of s, skipping {X} placeholders. */
static void add_words(strlist *l, const char *s)
{
    char w[64];
    int n = 0;
    for (const char *p = s;; p++) {
        if (*p == '{') {
            while (*p && *p != '}') p++;
            if (!*p) break;
            continue;
        }
        if (isalpha((unsigned char)*p) && n < 63) {
            w[n++] = (char)tolower((unsigned char)*p);
            continue;
        }
        if (n) {
            w[n] = 0;
            strlist_add(l, w);
            n = 0;
        }
        if (!*p) break;
    }
}

static void collect_template_words(strlist *l)
{
    for (int r = 0; r < NREL; r++) {
        const relation *rel = &relations[r];
        for (int i = 0; i < 6; i++) {
            if (rel->sentences[i]) add_words(l, rel->sentences[i]);
            if (rel->ask_a[i]) add_words(l, rel->ask_a[i]);
            if (rel->ask_b[i]) add_words(l, rel->ask_b[i]);
        }
    }
    for (int i = 0; i < NFILL; i++) add_words(l, fillers[i]);
    for (size_t i = 0; i < sizeof company_suffixes / sizeof *company_suffixes; i++) add_words(l, company_suffixes[i]);
    add_words(l, "River");
}

/* ---- names ---- */
/* A set of strings (open addressing), for the names used so far. */
typedef struct {
    char **slot;
    size_t cap, n;
} strset;

static uint64_t str_hash(const char *s) { return hash64(s, strlen(s), HASH64_INIT); }

static int strset_add(strset *t, const char *s) /* 0 when already present */
{
    if (2 * (t->n + 1) > t->cap) {
        strset old = *t;
        t->cap = old.cap ? old.cap * 2 : 1024;
        t->slot = xcalloc(t->cap, sizeof *t->slot);
        t->n = 0;
        for (size_t i = 0; i < old.cap; i++)
            if (old.slot[i]) {
                size_t h = str_hash(old.slot[i]) & (t->cap - 1);
                while (t->slot[h]) h = (h + 1) & (t->cap - 1);
                t->slot[h] = old.slot[i];
                t->n++;
            }
        free(old.slot);
    }
    size_t h = str_hash(s) & (t->cap - 1);
    for (; t->slot[h]; h = (h + 1) & (t->cap - 1))
        if (!strcmp(t->slot[h], s)) return 0;
    t->slot[h] = xstrdup(s);
    t->n++;
    return 1;
}

static int strset_has(const strset *t, const char *s)
{
    if (!t->cap) return 0;
    for (size_t h = str_hash(s) & (t->cap - 1); t->slot[h]; h = (h + 1) & (t->cap - 1))
        if (!strcmp(t->slot[h], s)) return 1;
    return 0;
}

static void strset_free(strset *t)
{
    for (size_t i = 0; i < t->cap; i++) free(t->slot[i]);
    free(t->slot);
    memset(t, 0, sizeof *t);
}

typedef struct {
    char syl[80][3];
    int nsyl;
    const strlist *words;
    strset used;        /* every name made so far: no two entities share one */
    strset train_words; /* the words of the training split's names */
    int split;          /* the split names are being made for */
} namer;

static void namer_init(namer *nm, const strlist *words)
{
    memset(nm, 0, sizeof *nm);
    nm->words = words;
    for (const char *c = consonants; *c; c++)
        for (const char *v = vowels; *v; v++) {
            char s[3] = {*c, *v, 0};
            if (strlist_has(words, s)) continue; /* "to", "be", ...: keep names apart from words */
            memcpy(nm->syl[nm->nsyl++], s, 3);
        }
}

/* A template word that is a prefix of the name would make WordPiece's
 * greedy match start with that word and then fail mid-syllable ([UNK]). */
static int clashes_with_word(const namer *nm, const char *lower)
{
    for (int i = 0; i < nm->words->n; i++) {
        const char *w = nm->words->w[i];
        size_t n = strlen(w);
        if (n >= 3 && !strncmp(lower, w, n)) return 1;
    }
    return 0;
}

/* One capitalised word of lo..hi syllables. */
static void make_word(namer *nm, rng *r, int lo, int hi, char *out, size_t cap)
{
    for (;;) {
        int k = lo + rint_(r, hi - lo + 1);
        char lower[32] = {0};
        for (int i = 0; i < k; i++) strcat(lower, nm->syl[rint_(r, nm->nsyl)]);
        if (clashes_with_word(nm, lower)) continue;
        snprintf(out, cap, "%s", lower);
        out[0] = (char)toupper((unsigned char)out[0]);
        return;
    }
}

/* A name of the type never made before (in either split). */
static char *make_name(namer *nm, rng *r, int type)
{
    char w[2][40], out[96];
    for (;;) {
        int nw = 1;
        make_word(nm, r, 2, 2, w[0], sizeof w[0]);
        switch (type) {
        case T_PERSON:
            make_word(nm, r, 2, 2, w[1], sizeof w[1]);
            nw = 2;
            snprintf(out, sizeof out, "%s %s", w[0], w[1]);
            break;
        case T_COMPANY:
            snprintf(out, sizeof out, "%s %s", w[0],
                     company_suffixes[rint_(r, (int)(sizeof company_suffixes / sizeof *company_suffixes))]);
            break;
        case T_RIVER:
            snprintf(out, sizeof out, "%s River", w[0]);
            break;
        default:
            snprintf(out, sizeof out, "%s", w[0]);
            break;
        }
        /* A test entity shares no made-up word with a training one (a test
         * city "Rise" must not be the first name of a training person). */
        int clash = 0;
        for (int i = 0; i < nw && nm->split == SPLIT_TEST; i++) clash |= strset_has(&nm->train_words, w[i]);
        if (clash || !strset_add(&nm->used, out)) continue;
        for (int i = 0; i < nw && nm->split == SPLIT_TRAIN; i++) strset_add(&nm->train_words, w[i]);
        return xstrdup(out);
    }
}

/* ---- paragraphs ---- */
typedef struct {
    int begin, len, type;
} mention;

typedef struct {
    int rel;
    char *subj, *a, *b;
    int sentence;          /* index of its sentence in the paragraph */
    int m_subj, m_a, m_b;  /* mention indices */
} fact;

typedef struct {
    char *text;
    size_t len, cap;
    mention *m;
    int nm, mcap;
} para;

static void para_put(para *p, const char *s, size_t n)
{
    if (p->len + n + 1 > p->cap) {
        p->cap = (p->len + n + 1) * 2;
        p->text = xrealloc(p->text, p->cap);
    }
    memcpy(p->text + p->len, s, n);
    p->len += n;
    p->text[p->len] = 0;
}

static int para_mention(para *p, const char *s, int type)
{
    if (p->nm == p->mcap) {
        p->mcap = p->mcap ? p->mcap * 2 : 32;
        p->m = xrealloc(p->m, (size_t)p->mcap * sizeof *p->m);
    }
    p->m[p->nm] = (mention){(int)p->len, (int)strlen(s), type};
    para_put(p, s, strlen(s));
    return p->nm++;
}

/* Expands a template into p (or, when p is NULL, into a new string). */
static char *expand(para *p, const char *tpl, const fact *f, int *ms, int *ma, int *mb)
{
    const relation *rel = &relations[f->rel];
    para tmp = {0};
    para *dst = p ? p : &tmp;
    for (const char *c = tpl; *c; c++) {
        if (c[0] == '{' && c[1] && c[2] == '}') {
            int which = c[1];
            const char *v = which == 'S' ? f->subj : which == 'A' ? f->a : f->b;
            int type = which == 'S' ? rel->subj : which == 'A' ? rel->a : rel->b;
            int mi = para_mention(dst, v, type);
            if (which == 'S' && ms) *ms = mi;
            if (which == 'A' && ma) *ma = mi;
            if (which == 'B' && mb) *mb = mi;
            c += 2;
            continue;
        }
        para_put(dst, c, 1);
    }
    if (p) return NULL;
    free(tmp.m);
    return tmp.text ? tmp.text : xstrdup("");
}

static int limit(int n, int max) { return max > 0 && n > max ? max : n; }

static int count_templates(const char *const *t)
{
    int n = 0;
    while (n < 6 && t[n]) n++;
    return n;
}

/* Entity pools per split and type. */
typedef struct {
    char **names;
    int n;
} pool;

static const char *draw(pool *pl, rng *r) { return pl->names[rint_(r, pl->n)]; }

static char *value_text(rng *r, const relation *rel, int type)
{
    char buf[32];
    if (type == T_YEAR) snprintf(buf, sizeof buf, "%d", YEAR_FIRST + rint_(r, YEAR_LAST - YEAR_FIRST + 1));
    else snprintf(buf, sizeof buf, "%d", rel->a_lo + rel->a_step * rint_(r, (rel->a_hi - rel->a_lo) / rel->a_step + 1));
    return xstrdup(buf);
}

static char *fill_slot(rng *r, pool pools[T_NTYPES], const relation *rel, int type)
{
    if (type == T_YEAR || type == T_NUMBER) return value_text(r, rel, type);
    return xstrdup(draw(&pools[type], r));
}

/* Relations whose subject has this type. */
static int rels_for(int subj_type, int *out)
{
    int n = 0;
    for (int i = 0; i < NREL; i++)
        if (relations[i].subj == subj_type) out[n++] = i;
    return n;
}

static void shuffle_ints(rng *r, int *v, int n)
{
    for (int i = n - 1; i > 0; i--) {
        int j = rint_(r, i + 1), t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
}

typedef struct {
    json_t *data;        /* the "data" array */
    json_t *baseline[SYNTH_NBASELINES];
    int questions, paragraphs, max_words;
} split_out;

static int count_words(const char *s)
{
    int n = 0, in = 0;
    for (; *s; s++) {
        int w = !isspace((unsigned char)*s);
        n += w && !in;
        in = w;
    }
    return n;
}

/* Baselines: mentions of the answer's type, in context order. */
static void baselines(split_out *so, rng *r, const para *p, const char *id, const char *question, int type)
{
    int first = -1, first_nq = -1, cand[64], nc = 0;
    for (int i = 0; i < p->nm; i++) {
        if (p->m[i].type != type) continue;
        if (first < 0) first = i;
        char text[128];
        snprintf(text, sizeof text, "%.*s", p->m[i].len, p->text + p->m[i].begin);
        if (first_nq < 0 && !strstr(question, text)) first_nq = i;
        if (nc < 64) cand[nc++] = i;
    }
    int pick[SYNTH_NBASELINES] = {first, first_nq, nc ? cand[rint_(r, nc)] : -1};
    for (int k = 0; k < SYNTH_NBASELINES; k++) {
        char text[128] = "";
        if (pick[k] >= 0) snprintf(text, sizeof text, "%.*s", p->m[pick[k]].len, p->text + p->m[pick[k]].begin);
        json_object_set_new(so->baseline[k], id, json_string(text));
    }
}

static void make_paragraph(split_out *so, rng *r, const synth_opts *o, pool pools[T_NTYPES], int split, int index)
{
    static const int main_types[3] = {T_COMPANY, T_PERSON, T_CITY};
    enum { MAXF = 16 };
    fact facts[MAXF];
    int nf = 0;
    /* A main subject with several relations, chosen to share answer types
     * where they can (a founder, a chief executive and a chairman), and,
     * in some paragraphs, a second subject of the same type with some of
     * the same relations: a question then has competing answers of its
     * type, and only its relation, and its subject, tell them apart. */
    int main_type = main_types[rint_(r, 3)];
    const char *subjects[2];
    int nsubj = 1 + (rint_(r, 100) < o->two_subjects_pct);
    for (int s = 0; s < nsubj; s++) {
        const char *d;
        int same;
        do {
            d = draw(&pools[main_type], r);
            same = 0;
            for (int k = 0; k < s; k++) same |= subjects[k] == d || subjects[k][0] == d[0];
        } while (same);
        subjects[s] = d;
    }
    int rl[NREL], nr = rels_for(main_type, rl);
    shuffle_ints(r, rl, nr);
    int nrel = o->relations_min + rint_(r, o->relations_max - o->relations_min + 1);
    if (nrel > nr) nrel = nr;
    /* Greedy: each next relation, most of the time, one that shares an
     * answer type with those already chosen. */
    for (int i = 1; i < nrel; i++) {
        if (rint_(r, 10) >= 8) continue;
        for (int j = i; j < nr; j++) {
            const relation *b = &relations[rl[j]];
            int share = 0;
            for (int k = 0; k < i; k++) {
                const relation *a = &relations[rl[k]];
                share |= a->a == b->a || (a->b != T_NONE && a->b == b->a) ||
                         (b->b != T_NONE && (b->b == a->a || b->b == a->b));
            }
            if (share) {
                int t = rl[i];
                rl[i] = rl[j];
                rl[j] = t;
                break;
            }
        }
    }
    for (int s = 0; s < nsubj; s++) {
        int k = s == 0 ? nrel : 1 + rint_(r, nrel);
        for (int i = 0; i < k && nf < MAXF; i++) {
            const relation *rel = &relations[rl[i]];
            fact *f = &facts[nf++];
            f->rel = rl[i];
            f->subj = xstrdup(subjects[s]);
            f->a = fill_slot(r, pools, rel, rel->a);
            f->b = rel->b != T_NONE ? fill_slot(r, pools, rel, rel->b) : NULL;
        }
    }
    /* Sentence order: the facts, shuffled, and rarely a filler. */
    int order[MAXF + 2], n = 0, nfill = rint_(r, 5) == 0;
    for (int i = 0; i < nf; i++) order[n++] = i;
    for (int i = 0; i < nfill; i++) order[n++] = 100 + rint_(r, NFILL);
    shuffle_ints(r, order, n);
    para p = {0};
    for (int k = 0; k < n; k++) {
        if (k) para_put(&p, " ", 1);
        if (order[k] >= 100) {
            para_put(&p, fillers[order[k] - 100], strlen(fillers[order[k] - 100]));
            continue;
        }
        fact *f = &facts[order[k]];
        const relation *rel = &relations[f->rel];
        f->sentence = k;
        f->m_subj = f->m_a = f->m_b = -1;
        expand(&p, rel->sentences[rint_(r, limit(count_templates(rel->sentences), o->templates))], f, &f->m_subj, &f->m_a, &f->m_b);
    }
    json_t *qas = json_array();
    int ask[MAXF];
    for (int i = 0; i < nf; i++) ask[i] = i;
    shuffle_ints(r, ask, nf);
    int nq = nf < 3 ? nf : 3;
    for (int q = 0; q < nq; q++) {
        fact *f = &facts[ask[q]];
        const relation *rel = &relations[f->rel];
        int on_b = rel->b != T_NONE && rint_(r, 2);
        const char *const *tpl = on_b ? rel->ask_b : rel->ask_a;
        char *question = expand(NULL, tpl[rint_(r, limit(count_templates(tpl), o->templates))], f, NULL, NULL, NULL);
        int mi = on_b ? f->m_b : f->m_a;
        mention *m = &p.m[mi];
        char id[64], text[128];
        snprintf(id, sizeof id, "%s-%05d-%d", split == SPLIT_TRAIN ? "train" : "test", index, q);
        snprintf(text, sizeof text, "%.*s", m->len, p.text + m->begin);
        json_t *ans = json_array();
        json_array_append_new(ans, json_pack("{s:s, s:i}", "text", text, "answer_start", m->begin));
        json_array_append_new(qas, json_pack("{s:s, s:s, s:o}", "id", id, "question", question, "answers", ans));
        int words = count_words(p.text) + count_words(question);
        if (words > so->max_words) so->max_words = words;
        baselines(so, r, &p, id, question, on_b ? rel->b : rel->a);
        free(question);
        so->questions++;
    }
    json_t *para_j = json_pack("{s:s, s:o}", "context", p.text, "qas", qas);
    json_t *art = json_pack("{s:s, s:[o]}", "title", subjects[0], "paragraphs", para_j);
    json_array_append_new(so->data, art);
    so->paragraphs++;
    for (int i = 0; i < nf; i++) {
        free(facts[i].subj);
        free(facts[i].a);
        free(facts[i].b);
    }
    free(p.text);
    free(p.m);
}

static int write_json(const char *dir, const char *name, json_t *j)
{
    char path[4096];
    path_join(path, sizeof path, dir, name);
    char *s = json_dumps(j, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    if (!s) return err_set(ERR_RUNTIME, "%s: out of memory", path);
    size_t n = strlen(s);
    s[n] = '\n'; /* json_dumps leaves room: replace the NUL, length n + 1 */
    int rc = file_write_atomic(path, s, n + 1);
    free(s);
    return rc;
}

static int write_split(const char *dir, const char *name, split_out *so)
{
    json_t *root = json_pack("{s:O, s:s}", "data", so->data, "version", "1.1");
    int rc = write_json(dir, name, root);
    json_decref(root);
    return rc;
}

static int write_vocab(const char *dir, const strlist *words, const namer *nm, int *size)
{
    strlist v = {0};
    const char *specials[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
    for (int i = 0; i < 5; i++) strlist_add(&v, specials[i]);
    for (int c = 33; c < 127; c++) {
        if (isalnum(c)) continue;
        char s[2] = {(char)c, 0};
        strlist_add(&v, s);
    }
    for (int d = 0; d < 10; d++) {
        char s[4];
        snprintf(s, sizeof s, "%d", d);
        strlist_add(&v, s);
        snprintf(s, sizeof s, "##%d", d);
        strlist_add(&v, s);
    }
    for (int i = 0; i < words->n; i++) strlist_add(&v, words->w[i]);
    /* Years and counts are whole tokens (as "1987" is in BERT's vocab), so
     * an answer's end is found as easily as its start. */
    char num[24];
    for (int y = YEAR_FIRST; y <= YEAR_LAST; y++) {
        snprintf(num, sizeof num, "%d", y);
        strlist_add(&v, num);
    }
    for (int r = 0; r < NREL; r++)
        if (relations[r].a == T_NUMBER)
            for (int x = relations[r].a_lo; x <= relations[r].a_hi; x += relations[r].a_step) {
                snprintf(num, sizeof num, "%d", x);
                strlist_add(&v, num);
            }
    for (int i = 0; i < nm->nsyl; i++) {
        char s[8];
        strlist_add(&v, nm->syl[i]);
        snprintf(s, sizeof s, "##%s", nm->syl[i]);
        strlist_add(&v, s);
    }
    size_t len = 0;
    for (int i = 0; i < v.n; i++) len += strlen(v.w[i]) + 1;
    char *buf = xmalloc(len + 1), *p = buf;
    for (int i = 0; i < v.n; i++) p += sprintf(p, "%s\n", v.w[i]);
    char path[4096];
    int rc = file_write_atomic(path_join(path, sizeof path, dir, "vocab.txt"), buf, len);
    free(buf);
    *size = v.n;
    strlist_free(&v);
    return rc;
}

synth_opts synth_opts_default(uint64_t seed, int train_paragraphs, int test_paragraphs)
{
    synth_opts o = {seed, train_paragraphs, test_paragraphs, 3, 4, 50, 0};
    return o;
}

int synth_generate(const synth_opts *o, const char *dir, synth_stats *st)
{
    memset(st, 0, sizeof *st);
    if (o->train_paragraphs < 1 || o->test_paragraphs < 1)
        return err_set(ERR_INPUT, "synth: paragraph counts must be positive");
    if (o->relations_min < 1 || o->relations_max < o->relations_min || o->two_subjects_pct < 0 || o->two_subjects_pct > 100)
        return err_set(ERR_INPUT, "synth: bad paragraph shape (relations %d..%d, two subjects %d%%)", o->relations_min,
                       o->relations_max, o->two_subjects_pct);
    int rc = mkdir_p(dir);
    if (rc) return rc;
    rng r = {o->seed ^ 0x5eed5eed5eedull};
    strlist words = {0};
    collect_template_words(&words);
    namer nm;
    namer_init(&nm, &words);
    /* Entity pools, made before any paragraph so both splits draw names
     * from one generator and never share one. */
    static const int train_sizes[T_NTYPES] = {2000, 600, 600, 150, 0, 0};
    pool pools[2][T_NTYPES];
    memset(pools, 0, sizeof pools);
    for (int s = 0; s < 2; s++)
        for (int t = 0; t < T_NTYPES; t++) {
            nm.split = s;
            int n = s == SPLIT_TRAIN ? train_sizes[t] : train_sizes[t] / 4;
            pools[s][t].n = n;
            pools[s][t].names = n ? xcalloc((size_t)n, sizeof(char *)) : NULL;
            for (int i = 0; i < n; i++) pools[s][t].names[i] = make_name(&nm, &r, t);
        }
    split_out out[2];
    for (int s = 0; s < 2; s++) {
        memset(&out[s], 0, sizeof out[s]);
        out[s].data = json_array();
        for (int k = 0; k < SYNTH_NBASELINES; k++) out[s].baseline[k] = json_object();
        int np = s == SPLIT_TRAIN ? o->train_paragraphs : o->test_paragraphs;
        rng pr = {rnext(&r)};
        for (int i = 0; i < np; i++) make_paragraph(&out[s], &pr, o, pools[s], s, i);
    }
    rc = write_split(dir, "train.json", &out[SPLIT_TRAIN]);
    if (!rc) rc = write_split(dir, "test.json", &out[SPLIT_TEST]);
    for (int k = 0; k < SYNTH_NBASELINES && !rc; k++) {
        char name[96];
        snprintf(name, sizeof name, "baseline-%s.json", synth_baseline_names[k]);
        rc = write_json(dir, name, out[SPLIT_TEST].baseline[k]);
    }
    if (!rc) rc = write_vocab(dir, &words, &nm, &st->vocab_size);
    if (!rc) {
        const char *tc = "{\n  \"do_lower_case\": true,\n  \"tokenizer_class\": \"BertTokenizer\"\n}\n";
        char path[4096];
        rc = file_write_atomic(path_join(path, sizeof path, dir, "tokenizer_config.json"), tc, strlen(tc));
    }
    st->train_questions = out[0].questions;
    st->test_questions = out[1].questions;
    st->train_paragraphs = out[0].paragraphs;
    st->test_paragraphs = out[1].paragraphs;
    st->max_words = out[0].max_words > out[1].max_words ? out[0].max_words : out[1].max_words;
    for (int s = 0; s < 2; s++) {
        json_decref(out[s].data);
        for (int k = 0; k < SYNTH_NBASELINES; k++) json_decref(out[s].baseline[k]);
        for (int t = 0; t < T_NTYPES; t++) {
            for (int i = 0; i < pools[s][t].n; i++) free(pools[s][t].names[i]);
            free(pools[s][t].names);
        }
    }
    strset_free(&nm.used);
    strset_free(&nm.train_words);
    strlist_free(&words);
    return rc;
}
