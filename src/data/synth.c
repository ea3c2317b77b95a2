/* The demo's synthetic SQuAD-format data (see synth.h). Everything here is
 * ASCII, so character offsets are byte offsets. */
#include "data/synth.h"

#include "core/alloc.h"
#include "core/err.h"
#include "core/fileio.h"
#include "core/rng.h"

#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { T_NONE = -1, T_PERSON, T_CITY, T_COMPANY, T_RIVER, T_YEAR, T_NUMBER, T_NTYPES };
enum { SPLIT_TRAIN, SPLIT_TEST };
enum { YEAR_FIRST = 1900, YEAR_LAST = 2019 };

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

/* Every question form of a relation shares its key words with every
 * sentence form ("founded", "chief executive", "born in"), as real
 * questions mostly share words with the sentence that answers them; the
 * relations of one answer type have different key words, so the model has
 * to find the sentence whose subject and key words are the question's. */
static const relation relations[] = {
    {T_COMPANY, T_PERSON, T_YEAR, 0, 0, 0,
     {"{S} was founded by {A} in {B}.", "{A} founded {S} in {B}.", "In {B}, {A} founded a company called {S}."},
     {"Who founded {S}?", "{S} was founded by whom?", "Which person founded {S}?"},
     {"When was {S} founded?", "In what year was {S} founded?", "In which year did {A} found {S}?"}},
    {T_COMPANY, T_CITY, T_NONE, 0, 0, 0,
     {"The headquarters of {S} are in {A}.", "{S} has its headquarters in {A}.", "In {A} stand the headquarters of {S}."},
     {"Where are the headquarters of {S}?", "In which city does {S} have its headquarters?", "The headquarters of {S} are in which city?"},
     {0}},
    {T_COMPANY, T_NUMBER, T_NONE, 10, 990, 10,
     {"{S} has {A} employees.", "The number of employees of {S} is {A}.", "With {A} employees, {S} is not small."},
     {"How many employees does {S} have?", "What is the number of employees of {S}?", "{S} has how many employees?"},
     {0}},
    {T_COMPANY, T_PERSON, T_NONE, 0, 0, 0,
     {"The chief executive of {S} is {A}.", "{A} is the chief executive of {S}.", "{S} hired {A} as chief executive."},
     {"Who is the chief executive of {S}?", "Which person is chief executive of {S}?", "Who did {S} hire as chief executive?"},
     {0}},
    {T_PERSON, T_CITY, T_YEAR, 0, 0, 0,
     {"{S} was born in {A} in {B}.", "{S} was born in {B} in the city of {A}.", "In {B}, {S} was born in {A}."},
     {"Where was {S} born?", "In which city was {S} born?", "{S} was born in which city?"},
     {"When was {S} born?", "In what year was {S} born?", "{S} was born in which year?"}},
    {T_PERSON, T_CITY, T_NONE, 0, 0, 0,
     {"{S} studied at the university of {A}.", "{S} went to university in {A}.", "At the university of {A}, {S} studied law."},
     {"Where did {S} study?", "In which city did {S} go to university?", "At which university did {S} study?"},
     {0}},
    {T_PERSON, T_COMPANY, T_NONE, 0, 0, 0,
     {"{S} works as an engineer at {A}.", "{S} works for {A}.", "At {A}, {S} works as a designer."},
     {"Where does {S} work?", "For which company does {S} work?", "At which company does {S} work?"},
     {0}},
    {T_CITY, T_PERSON, T_NONE, 0, 0, 0,
     {"The mayor of {S} is {A}.", "{A} is the mayor of {S}.", "{S} elected {A} as mayor."},
     {"Who is the mayor of {S}?", "Which person is mayor of {S}?", "Whom did {S} elect as mayor?"},
     {0}},
    {T_CITY, T_NUMBER, T_NONE, 10, 990, 10,
     {"{S} has a population of {A}.", "The population of {S} is {A}.", "With a population of {A}, {S} is growing."},
     {"What is the population of {S}?", "How large is the population of {S}?", "{S} has what population?"},
     {0}},
    {T_CITY, T_RIVER, T_NONE, 0, 0, 0,
     {"{S} lies on the {A}.", "The {A} flows through {S}.", "{S} was built where the {A} flows into the sea."},
     {"Which river flows through {S}?", "On which river does {S} lie?", "What river flows through {S}?"},
     {0}},
    {T_CITY, T_YEAR, T_NONE, 0, 0, 0,
     {"{S} was settled in {A}.", "Settlers first came to {S} in {A}.", "In {A}, the first settlers came to {S}."},
     {"When was {S} settled?", "In what year did the first settlers come to {S}?", "When did settlers first come to {S}?"},
     {0}},
    {T_CITY, T_NUMBER, T_NONE, 10, 990, 10,
     {"{S} lies {A} metres above the sea.", "The centre of {S} is {A} metres above the sea.", "At {A} metres above the sea, {S} is cool."},
     {"How many metres above the sea does {S} lie?", "How high above the sea is {S}?", "At how many metres above the sea is {S}?"},
     {0}},
    {T_PERSON, T_PERSON, T_NONE, 0, 0, 0,
     {"{S} married {A}.", "{S} is married to {A}.", "{A} married {S} last spring."},
     {"Who did {S} marry?", "Who is {S} married to?", "Whom did {S} marry?"},
     {0}},
    {T_COMPANY, T_PERSON, T_NONE, 0, 0, 0,
     {"The chairman of {S} is {A}.", "{A} is chairman of the board of {S}.", "{S} has {A} as its chairman."},
     {"Who is the chairman of {S}?", "Who is chairman of the board of {S}?", "Which person is the chairman of {S}?"},
     {0}},
    {T_COMPANY, T_CITY, T_NONE, 0, 0, 0,
     {"The factory of {S} is in {A}.", "{S} builds its products in a factory in {A}.", "In {A}, {S} opened its factory."},
     {"Where is the factory of {S}?", "In which city is the factory of {S}?", "Where did {S} open its factory?"},
     {0}},
    {T_COMPANY, T_YEAR, T_NONE, 0, 0, 0,
     {"{S} went public in {A}.", "In {A}, {S} went public.", "Shares of {S} were first sold in {A}, when it went public."},
     {"When did {S} go public?", "In which year did {S} go public?", "{S} went public in which year?"},
     {0}},
    {T_PERSON, T_CITY, T_NONE, 0, 0, 0,
     {"{S} now lives in {A}.", "Today {S} lives in {A}.", "After retiring, {S} moved to {A} and lives there now."},
     {"Where does {S} live now?", "In which city does {S} live today?", "Where does {S} live?"},
     {0}},
    {T_PERSON, T_YEAR, T_NONE, 0, 0, 0,
     {"{S} won a science prize in {A}.", "In {A}, {S} won a science prize.", "The science prize of {A} was won by {S}."},
     {"When did {S} win a science prize?", "In which year did {S} win a science prize?", "{S} won a science prize in what year?"},
     {0}},
    {T_CITY, T_CITY, T_NONE, 0, 0, 0,
     {"{S} is twinned with {A}.", "{A} is the twin town of {S}.", "Since long ago, {S} has been twinned with {A}."},
     {"Which city is twinned with {S}?", "What is the twin town of {S}?", "{S} is twinned with which city?"},
     {0}},
    {T_CITY, T_COMPANY, T_NONE, 0, 0, 0,
     {"The largest employer in {S} is {A}.", "{A} is the largest employer in {S}.", "In {S}, the largest employer is {A}."},
     {"What is the largest employer in {S}?", "Which company is the largest employer in {S}?", "Who is the largest employer in {S}?"},
     {0}},
    {T_PERSON, T_PERSON, T_NONE, 0, 0, 0,
     {"The best friend of {S} is {A}.", "{A} is the best friend of {S}.", "{S} calls {A} a best friend."},
     {"Who is the best friend of {S}?", "Which person is the best friend of {S}?", "Whom does {S} call a best friend?"},
     {0}},
    {T_PERSON, T_PERSON, T_NONE, 0, 0, 0,
     {"{S} learned the trade from {A}.", "{A} taught {S} the trade.", "It was {A} who taught the trade to {S}."},
     {"From whom did {S} learn the trade?", "Who taught {S} the trade?", "Who taught the trade to {S}?"},
     {0}},
    {T_CITY, T_PERSON, T_NONE, 0, 0, 0,
     {"The most famous singer from {S} is {A}.", "{A} is the most famous singer from {S}.", "{S} is proud of {A}, its most famous singer."},
     {"Who is the most famous singer from {S}?", "Which singer from {S} is the most famous?", "Who is {S}'s most famous singer?"},
     {0}},
    {T_CITY, T_PERSON, T_NONE, 0, 0, 0,
     {"The chief of police in {S} is {A}.", "{A} is the chief of police in {S}.", "{S} made {A} its chief of police."},
     {"Who is the chief of police in {S}?", "Which person is chief of police in {S}?", "Whom did {S} make its chief of police?"},
     {0}},
    {T_CITY, T_NUMBER, T_NONE, 10, 990, 10,
     {"{S} covers {A} square kilometres.", "The area of {S} is {A} square kilometres.", "Covering {A} square kilometres, {S} is large."},
     {"How many square kilometres does {S} cover?", "What is the area of {S} in square kilometres?", "{S} covers how many square kilometres?"},
     {0}},
    {T_COMPANY, T_NUMBER, T_NONE, 10, 990, 10,
     {"{S} runs {A} shops.", "The number of shops of {S} is {A}.", "Today {S} runs {A} shops."},
     {"How many shops does {S} run?", "What is the number of shops of {S}?", "{S} runs how many shops?"},
     {0}},
    {T_COMPANY, T_NUMBER, T_NONE, 10, 990, 10,
     {"{S} owns {A} lorries.", "The lorries of {S} number {A}.", "With {A} lorries, {S} delivers fast."},
     {"How many lorries does {S} own?", "What number of lorries does {S} own?", "{S} owns how many lorries?"},
     {0}},
    {T_COMPANY, T_CITY, T_NONE, 0, 0, 0,
     {"The research centre of {S} is in {A}.", "{S} does its research in a centre in {A}.", "In {A}, {S} built its research centre."},
     {"Where is the research centre of {S}?", "In which city is the research centre of {S}?", "Where did {S} build its research centre?"},
     {0}},
    {T_COMPANY, T_YEAR, T_NONE, 0, 0, 0,
     {"{S} opened its first shop in {A}.", "In {A}, {S} opened its first shop.", "The first shop of {S} opened in {A}."},
     {"When did {S} open its first shop?", "In which year did {S} open its first shop?", "{S} opened its first shop in what year?"},
     {0}},
    {T_PERSON, T_YEAR, T_NONE, 0, 0, 0,
     {"{S} retired in {A}.", "In {A}, {S} retired.", "{S} stopped working and retired in {A}."},
     {"When did {S} retire?", "In which year did {S} retire?", "{S} retired in what year?"},
     {0}},
    {T_CITY, T_YEAR, T_NONE, 0, 0, 0,
     {"{S} got its railway station in {A}.", "In {A}, a railway station was built in {S}.", "The railway station of {S} opened in {A}."},
     {"When did {S} get its railway station?", "In which year did {S} get a railway station?", "When did the railway station of {S} open?"},
     {0}},
    {T_CITY, T_YEAR, T_NONE, 0, 0, 0,
     {"{S} hosted a great fair in {A}.", "In {A}, {S} hosted a great fair.", "The great fair of {A} was hosted by {S}."},
     {"When did {S} host a great fair?", "In which year did {S} host a great fair?", "{S} hosted a great fair in what year?"},
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

/* ---- random numbers: splitmix64 (core/rng.h) ---- */
typedef struct {
    uint64_t s;
} rng;

static int rint_(rng *r, int n) { return (int)(splitmix64_next(&r->s) % (uint64_t)n); }

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

static int rel_has_type(const relation *rel, int type) { return rel->a == type || rel->b == type; }

/* A question's target: a relation and its slot (0 = A, 1 = B). */
typedef struct {
    int rel, slot;
} target;

/* The targets of a subject type whose answers have type t. */
static int targets_of(int subj, int t, target *out)
{
    int n = 0;
    for (int i = 0; i < NREL; i++) {
        if (relations[i].subj != subj) continue;
        if (relations[i].a == t) out[n++] = (target){i, 0};
        if (relations[i].b != T_NONE && relations[i].b == t) out[n++] = (target){i, 1};
    }
    return n;
}

static void shuffle_targets(rng *r, target *v, int n)
{
    for (int i = n - 1; i > 0; i--) {
        int j = rint_(r, i + 1);
        target t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
}

static void make_paragraph(split_out *so, rng *r, const synth_opts *o, pool pools[T_NTYPES], int split, int index)
{
    static const int main_types[3] = {T_COMPANY, T_PERSON, T_CITY};
    enum { MAXF = 16, MAXT = 2 * NREL };
    /* One subject and o->groups answer types, each with o->group_size
     * relations of the subject (a founder, a chief executive and a
     * chairman; a year of founding, of going public and of the first
     * shop): every question has that many candidate answers of its type in
     * the paragraph, and only its relation's words tell them apart. */
    int main_type = main_types[rint_(r, 3)];
    const char *subject = draw(&pools[main_type], r);
    int types[T_NTYPES], nt = 0;
    for (int t = 0; t < T_NTYPES; t++) {
        target tmp[MAXT];
        if (targets_of(main_type, t, tmp) >= o->group_size) types[nt++] = t;
    }
    shuffle_ints(r, types, nt);
    target asks[MAXT];
    int na = 0;
    for (int g = 0; g < nt && g < o->groups; g++) {
        target grp[MAXT];
        int n = targets_of(main_type, types[g], grp);
        shuffle_targets(r, grp, n);
        for (int i = 0; i < o->group_size && na < MAXF; i++) asks[na++] = grp[i];
    }
    /* The facts: the relations of those targets, and sometimes
     * (extra_pct) one more relation of the subject, with answers of
     * other types. */
    fact facts[MAXF];
    int nf = 0, fact_of[MAXT];
    for (int i = 0; i < na; i++) {
        int k = 0;
        while (k < nf && facts[k].rel != asks[i].rel) k++;
        if (k == nf) facts[nf++].rel = asks[i].rel;
        fact_of[i] = k;
    }
    if (rint_(r, 100) < o->extra_pct && nf < MAXF) {
        int cand[NREL], nc = 0;
        for (int i = 0; i < NREL; i++) {
            int used = relations[i].subj != main_type;
            for (int k = 0; k < nf && !used; k++) used = facts[k].rel == i;
            for (int g = 0; g < nt && g < o->groups && !used; g++) used = rel_has_type(&relations[i], types[g]);
            if (!used) cand[nc++] = i;
        }
        if (nc) facts[nf++].rel = cand[rint_(r, nc)];
    }
    for (int i = 0; i < nf; i++) {
        const relation *rel = &relations[facts[i].rel];
        facts[i].subj = xstrdup(subject);
        facts[i].a = fill_slot(r, pools, rel, rel->a);
        facts[i].b = rel->b != T_NONE ? fill_slot(r, pools, rel, rel->b) : NULL;
    }
    /* Sentence order: the facts, shuffled, and sometimes a filler. */
    int order[MAXF + 2], n = 0, nfill = rint_(r, 100) < o->filler_pct;
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
        expand(&p, rel->sentences[rint_(r, limit(count_templates(rel->sentences), o->sentence_forms))], f, &f->m_subj,
               &f->m_a, &f->m_b);
    }
    /* The questions: o->questions of the targets, at most one per fact. */
    json_t *qas = json_array();
    int idx[MAXT], asked[MAXF] = {0}, nq = 0;
    for (int i = 0; i < na; i++) idx[i] = i;
    shuffle_ints(r, idx, na);
    for (int k = 0; k < na && nq < o->questions; k++) {
        int ti = idx[k];
        if (asked[fact_of[ti]]++) continue;
        fact *f = &facts[fact_of[ti]];
        const relation *rel = &relations[f->rel];
        int on_b = asks[ti].slot;
        const char *const *tpl = on_b ? rel->ask_b : rel->ask_a;
        char *question = expand(NULL, tpl[rint_(r, limit(count_templates(tpl), o->question_forms))], f, NULL, NULL, NULL);
        mention *m = &p.m[on_b ? f->m_b : f->m_a];
        char id[64], text[128];
        snprintf(id, sizeof id, "%s-%05d-%d", split == SPLIT_TRAIN ? "train" : "test", index, nq);
        snprintf(text, sizeof text, "%.*s", m->len, p.text + m->begin);
        json_t *ans = json_array();
        json_array_append_new(ans, json_pack("{s:s, s:i}", "text", text, "answer_start", m->begin));
        json_array_append_new(qas, json_pack("{s:s, s:s, s:o}", "id", id, "question", question, "answers", ans));
        int words = count_words(p.text) + count_words(question);
        if (words > so->max_words) so->max_words = words;
        baselines(so, r, &p, id, question, on_b ? rel->b : rel->a);
        free(question);
        so->questions++;
        nq++;
    }
    json_t *para_j = json_pack("{s:s, s:o}", "context", p.text, "qas", qas);
    json_t *art = json_pack("{s:s, s:[o]}", "title", subject, "paragraphs", para_j);
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
    synth_opts o = {seed, train_paragraphs, test_paragraphs, 1, 3, 3, 0, 20, 1, 0};
    return o;
}

int synth_generate(const synth_opts *o, const char *dir, synth_stats *st)
{
    memset(st, 0, sizeof *st);
    if (o->train_paragraphs < 1 || o->test_paragraphs < 1)
        return err_set(ERR_INPUT, "synth: paragraph counts must be positive");
    if (o->groups < 1 || o->group_size < 1 || o->group_size > 3 || o->questions < 1 || o->extra_pct < 0 ||
        o->extra_pct > 100 || o->filler_pct < 0 || o->filler_pct > 100)
        return err_set(ERR_INPUT, "synth: bad paragraph shape (groups %d of %d, %d questions, extra %d%%, filler %d%%)",
                       o->groups, o->group_size, o->questions, o->extra_pct, o->filler_pct);
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
        rng pr = {splitmix64_next(&r.s)};
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
