/* evaluate-v2.0.py in C (see squad2_eval.h). */
#include "eval/squad2_eval.h"

#include "core/alloc.h"
#include "core/err.h"
#include "eval/pytext.h"
#include "eval/squad_eval.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* compute_exact / compute_f1 maxed over the gold answers of one question,
 * golds already filtered as get_raw_scores filters them (ngold 0: [""]). */
static void score_question(const char *pred, size_t npred, const char *const *gold, const size_t *gold_len, int ngold,
                           int *em, double *f1, int *f1_int)
{
    /* compute_f1 returns a Python int (0, or 1 when both sides are empty)
     * or a float (the formula, > 0); max keeps the first of equal values.
     * Whether it is an int matters to Python 3.12's sum() (py_sum). */
    *f1_int = ngold == 0;
    size_t np;
    char *p = squad_normalize_answer(pred, npred, &np);
    int best_em = 0;
    double best_f1 = 0;
    if (ngold == 0) { /* gold [""]: tokens [] */
        best_em = np == 0;
        best_f1 = np == 0;
    }
    for (int i = 0; i < ngold; i++) {
        size_t ng;
        char *g = squad_normalize_answer(gold[i], gold_len[i], &ng);
        int e = ng == np && memcmp(g, p, np) == 0;
        /* a kept gold has tokens: an empty prediction scores 0 */
        double f = np == 0 ? 0.0 : squad_f1(pred, npred, gold[i], gold_len[i]);
        if (e > best_em) best_em = e;
        if (i == 0 || f > best_f1) {
            best_f1 = f;
            *f1_int = f == 0.0;
        }
        free(g);
    }
    free(p);
    *em = best_em;
    *f1 = best_f1;
}

/* Python's sum() of ints and floats from the int 0: ints add exactly while
 * no float came; the first float turns the sum into a float; after that,
 * Python 3.11 adds plainly, 3.12 and later compensate the floats' rounding
 * (Neumaier, as CPython's builtin_sum) and add ints plainly. */
typedef struct {
    int py312, in_float;
    long long i;
    double f, c;
} py_sum;

static void py_sum_int(py_sum *s, long long v)
{
    if (!s->in_float) s->i += v;
    else s->f += (double)v;
}

static void py_sum_float(py_sum *s, double x)
{
    if (!s->in_float) {
        s->in_float = 1;
        s->f = (double)s->i + x;
        s->c = 0.0;
        return;
    }
    if (!s->py312) {
        s->f += x;
        return;
    }
    double t = s->f + x;
    if (fabs(s->f) >= fabs(x)) s->c += (s->f - t) + x;
    else s->c += (x - t) + s->f;
    s->f = t;
}

static double py_sum_value(const py_sum *s)
{
    if (!s->in_float) return (double)s->i;
    return s->c != 0.0 && isfinite(s->c) ? s->f + s->c : s->f;
}

/* 1 when normalize_answer(s) is not empty (the gold filter). */
static int normalizes_nonempty(const char *s, size_t n)
{
    size_t len;
    char *t = squad_normalize_answer(s, n, &len);
    free(t);
    return len > 0;
}

/* One entry of the no-answer file, in file order. */
typedef struct {
    int q;        /* question index, -1 when the id is not in the data */
    double value;
    int seq;
    char repr[40];
} na_entry;

static int na_cmp(const void *a, const void *b)
{
    const na_entry *x = a, *y = b;
    if (x->value != y->value) return x->value < y->value ? -1 : 1;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

/* What the script computes from the raw scores (per question, data order). */
typedef struct {
    int n;
    const int *has_ans, *pred_nonempty;
    const int *exact_raw;
    const double *f1_raw;
    const int *f1_int;     /* f1_raw[i] is a Python int */
    int py312;             /* sum() as Python 3.12 and later */
    const double *na;      /* per question; NULL: all 0.0 */
} raw_scores;

static void make_eval(const raw_scores *s, double thresh, squad2_result *out)
{
    /* [exact, f1] x [all, HasAns, NoAns]: one sum() each, in data order */
    py_sum sum[2][3];
    memset(sum, 0, sizeof sum);
    for (int g = 0; g < 3; g++) sum[0][g].py312 = sum[1][g].py312 = s->py312;
    int nh = 0, nn = 0;
    for (int i = 0; i < s->n; i++) {
        double na = s->na ? s->na[i] : 0.0;
        int groups[2] = {0, s->has_ans[i] ? 1 : 2};
        nh += s->has_ans[i] != 0;
        nn += !s->has_ans[i];
        for (int k = 0; k < 2; k++) {
            py_sum *e = &sum[0][groups[k]], *f = &sum[1][groups[k]];
            if (na > thresh) { /* float(not has_ans) */
                py_sum_float(e, s->has_ans[i] ? 0.0 : 1.0);
                py_sum_float(f, s->has_ans[i] ? 0.0 : 1.0);
                continue;
            }
            py_sum_int(e, s->exact_raw[i]);
            if (s->f1_int[i]) py_sum_int(f, (long long)s->f1_raw[i]);
            else py_sum_float(f, s->f1_raw[i]);
        }
    }
    out->total = s->n;
    out->exact = 100.0 * py_sum_value(&sum[0][0]) / s->n;
    out->f1 = 100.0 * py_sum_value(&sum[1][0]) / s->n;
    out->has_ans_total = nh;
    out->no_ans_total = nn;
    if (nh) {
        out->has_ans_exact = 100.0 * py_sum_value(&sum[0][1]) / nh;
        out->has_ans_f1 = 100.0 * py_sum_value(&sum[1][1]) / nh;
    }
    if (nn) {
        out->no_ans_exact = 100.0 * py_sum_value(&sum[0][2]) / nn;
        out->no_ans_f1 = 100.0 * py_sum_value(&sum[1][2]) / nn;
    }
}

/* find_best_thresh over the no-answer entries (sorted here). */
static void best_thresh(const raw_scores *s, na_entry *e, int ne, int use_f1, double *best, char *thresh_repr)
{
    double cur = 0;
    for (int i = 0; i < s->n; i++) cur += !s->has_ans[i];
    double best_score = cur;
    snprintf(thresh_repr, 40, "0.0");
    for (int k = 0; k < ne; k++) {
        int q = e[k].q;
        if (q < 0) continue;
        double diff;
        if (s->has_ans[q]) diff = use_f1 ? s->f1_raw[q] : s->exact_raw[q];
        else diff = s->pred_nonempty[q] ? -1 : 0;
        cur += diff;
        if (cur > best_score) {
            best_score = cur;
            memcpy(thresh_repr, e[k].repr, 40);
        }
    }
    *best = 100.0 * best_score / s->n;
}

static void finish(const raw_scores *s, double thresh, na_entry *e, int ne, squad2_result *out)
{
    make_eval(s, thresh, out);
    if (!e) return;
    qsort(e, (size_t)ne, sizeof *e, na_cmp);
    out->have_best = 1;
    best_thresh(s, e, ne, 0, &out->best_exact, out->best_exact_thresh);
    best_thresh(s, e, ne, 1, &out->best_f1, out->best_f1_thresh);
}

typedef struct {
    const char *id;
    int q;
} id_slot;

static int slot_cmp(const void *a, const void *b)
{
    const id_slot *x = a, *y = b;
    int c = strcmp(x->id, y->id);
    return c ? c : (x->q > y->q) - (x->q < y->q);
}

/* Sorted ids of the questions; ERR_INPUT on a duplicate. */
static int index_ids(const char *path, const char *const *ids, int n, id_slot **out)
{
    id_slot *s = xmalloc(sizeof *s * (size_t)(n ? n : 1));
    for (int i = 0; i < n; i++) s[i] = (id_slot){ids[i], i};
    qsort(s, (size_t)n, sizeof *s, slot_cmp);
    for (int i = 1; i < n; i++)
        if (!strcmp(s[i - 1].id, s[i].id)) {
            int rc = err_set(ERR_INPUT, "%s: question '%.120s': duplicate question id", path, s[i].id);
            free(s);
            return rc;
        }
    *out = s;
    return 0;
}

static int find_id(const id_slot *s, int n, const char *id)
{
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        int c = strcmp(s[mid].id, id);
        if (!c) return s[mid].q;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

/* The no-answer file: entries in file order and the value of each question. */
static int read_na(const char *path, json_t *na, const id_slot *ids, int n, const char *const *qid, na_entry **out,
                   int *nout, double *per_q)
{
    if (!json_is_object(na))
        return err_set(ERR_INPUT, "%s: no-answer probabilities must be a JSON object {\"id\": number}", path);
    size_t ne = json_object_size(na);
    na_entry *e = xcalloc(ne ? ne : 1, sizeof *e);
    const char *key;
    json_t *v;
    int k = 0;
    json_object_foreach(na, key, v) {
        if (json_is_integer(v)) {
            e[k].value = (double)json_integer_value(v);
            snprintf(e[k].repr, sizeof e[k].repr, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        } else if (json_is_real(v)) {
            e[k].value = json_real_value(v);
            pytext_float_repr(e[k].value, e[k].repr, sizeof e[k].repr);
        } else {
            free(e);
            return err_set(ERR_INPUT, "%s: the no-answer probability for id '%.120s' is not a number", path, key);
        }
        e[k].q = find_id(ids, n, key);
        e[k].seq = k;
        k++;
    }
    for (int i = 0; i < n; i++) {
        json_t *x = json_object_get(na, qid[i]);
        if (!x) {
            free(e);
            return err_set(ERR_INPUT, "%s: no no-answer probability for question '%.120s'", path, qid[i]);
        }
        per_q[i] = json_is_integer(x) ? (double)json_integer_value(x) : json_real_value(x);
    }
    *out = e;
    *nout = k;
    return 0;
}

typedef struct {
    int n, cap;
    const char **id;
    int *has_ans, *pred_nonempty, *exact;
    double *f1;
    int *f1_int;
} qlist;

static void qlist_push(qlist *l, const char *id, int has_ans, int pred_nonempty, int em, double f1, int f1_int)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 256;
        l->id = xrealloc(l->id, sizeof *l->id * (size_t)l->cap);
        l->has_ans = xrealloc(l->has_ans, sizeof *l->has_ans * (size_t)l->cap);
        l->pred_nonempty = xrealloc(l->pred_nonempty, sizeof *l->pred_nonempty * (size_t)l->cap);
        l->exact = xrealloc(l->exact, sizeof *l->exact * (size_t)l->cap);
        l->f1 = xrealloc(l->f1, sizeof *l->f1 * (size_t)l->cap);
        l->f1_int = xrealloc(l->f1_int, sizeof *l->f1_int * (size_t)l->cap);
    }
    l->id[l->n] = id;
    l->has_ans[l->n] = has_ans;
    l->pred_nonempty[l->n] = pred_nonempty;
    l->exact[l->n] = em;
    l->f1[l->n] = f1;
    l->f1_int[l->n] = f1_int;
    l->n++;
}

static void qlist_free(qlist *l)
{
    free(l->id);
    free(l->has_ans);
    free(l->pred_nonempty);
    free(l->exact);
    free(l->f1);
    free(l->f1_int);
}

typedef struct {
    json_t *pred;
    qlist *l;
    const char **missing;
} score_state;

/* get_raw_scores for one question (eval_walk_questions walks them in file
 * order). */
static void score_one(void *user, json_t *qa, const char *id, size_t na, const char **gold, const size_t *gold_len,
                      int ng)
{
    (void)qa;
    score_state *st = user;
    json_t *p = json_object_get(st->pred, id);
    if (!p) { /* an error once the data is known to be sound */
        if (!*st->missing) *st->missing = id;
        qlist_push(st->l, id, na > 0, 0, 0, 0.0, 1);
        return;
    }
    int em;
    double f1;
    int f1_int;
    score_question(json_string_value(p), json_string_length(p), gold, gold_len, ng, &em, &f1, &f1_int);
    qlist_push(st->l, id, na > 0, json_string_length(p) > 0, em, f1, f1_int);
}

int squad2_eval_files(const char *data_path, const char *pred_path, const char *na_prob_path, double na_prob_thresh,
                      int python_312_sum, squad2_result *out)
{
    memset(out, 0, sizeof *out);
    json_t *dj = NULL, *pj = NULL, *nj = NULL;
    qlist l = {0};
    id_slot *ids = NULL;
    na_entry *ne = NULL;
    double *na = NULL;
    int nne = 0;
    int rc = eval_load_json(data_path, &dj);
    if (!rc) rc = eval_load_json(pred_path, &pj);
    if (!rc && na_prob_path) rc = eval_load_json(na_prob_path, &nj);
    if (rc) goto done;
    json_t *data;
    if ((rc = eval_data_array(data_path, dj, &data)) || (rc = eval_check_predictions(pred_path, pj))) goto done;
    const char *missing = NULL;
    score_state st = {pj, &l, &missing};
    if ((rc = eval_walk_questions(data_path, data, 120, normalizes_nonempty, score_one, &st))) goto done;
    if (l.n == 0) {
        rc = err_set(ERR_INPUT, "%s: no questions in the data", data_path);
        goto done;
    }
    if ((rc = index_ids(data_path, l.id, l.n, &ids))) goto done;
    if (missing) {
        rc = err_set(ERR_INPUT, "%s: no prediction for question '%.120s' (evaluate-v2.0.py stops there with a KeyError)",
                     pred_path, missing);
        goto done;
    }
    if (nj) {
        na = xmalloc(sizeof *na * (size_t)l.n);
        if ((rc = read_na(na_prob_path, nj, ids, l.n, l.id, &ne, &nne, na))) goto done;
    }
    raw_scores s = {.n = l.n, .has_ans = l.has_ans, .pred_nonempty = l.pred_nonempty, .exact_raw = l.exact, .f1_raw = l.f1,
                    .f1_int = l.f1_int, .py312 = python_312_sum != 0, .na = na};
    finish(&s, na_prob_thresh, ne, nne, out);
done:
    free(ne);
    free(na);
    free(ids);
    qlist_free(&l);
    json_decref(dj);
    json_decref(pj);
    json_decref(nj);
    return rc;
}

int squad2_eval_examples(const squad_data *d, const char *const *pred, const double *na_prob, double na_prob_thresh,
                         squad2_result *out)
{
    memset(out, 0, sizeof *out);
    if (!d || d->n <= 0) return err_set(ERR_INPUT, "eval: no questions to evaluate");
    int n = d->n, rc = 0;
    int *has_ans = xmalloc(sizeof *has_ans * (size_t)n), *nonempty = xmalloc(sizeof *nonempty * (size_t)n);
    int *exact = xmalloc(sizeof *exact * (size_t)n);
    double *f1 = xmalloc(sizeof *f1 * (size_t)n);
    int *f1_int = xmalloc(sizeof *f1_int * (size_t)n);
    const char **gold = NULL;
    size_t *gold_len = NULL, gold_cap = 0;
    for (int i = 0; i < n && !rc; i++) {
        const squad_example *e = &d->ex[i];
        if (!pred[i]) {
            rc = err_set(ERR_INPUT, "eval: no prediction for question '%.120s'", e->id);
            break;
        }
        if ((size_t)e->n_answers > gold_cap) {
            gold_cap = (size_t)e->n_answers;
            gold = xrealloc(gold, gold_cap * sizeof *gold);
            gold_len = xrealloc(gold_len, gold_cap * sizeof *gold_len);
        }
        int ng = 0;
        for (int k = 0; k < e->n_answers; k++) {
            size_t len = strlen(e->answer_text[k]);
            if (!normalizes_nonempty(e->answer_text[k], len)) continue;
            gold[ng] = e->answer_text[k];
            gold_len[ng++] = len;
        }
        has_ans[i] = e->n_answers > 0;
        nonempty[i] = pred[i][0] != 0;
        score_question(pred[i], strlen(pred[i]), gold, gold_len, ng, &exact[i], &f1[i], &f1_int[i]);
    }
    if (!rc) {
        na_entry *ne = NULL;
        if (na_prob) {
            ne = xmalloc(sizeof *ne * (size_t)n);
            for (int i = 0; i < n; i++) {
                ne[i].q = i;
                ne[i].value = na_prob[i];
                ne[i].seq = i;
                pytext_float_repr(na_prob[i], ne[i].repr, sizeof ne[i].repr);
            }
        }
        raw_scores s = {.n = n, .has_ans = has_ans, .pred_nonempty = nonempty, .exact_raw = exact, .f1_raw = f1,
                        .f1_int = f1_int, .py312 = 0, .na = na_prob};
        finish(&s, na_prob_thresh, ne, n, out);
        free(ne);
    }
    free(gold);
    free(gold_len);
    free(has_ans);
    free(nonempty);
    free(exact);
    free(f1);
    free(f1_int);
    return rc;
}

int squad2_result_json(const squad2_result *r, int indent, char *buf, size_t cap)
{
    /* json.dumps(indent=2): each item on its own line; json.dump (the
     * script's --out-file): one line, ", " between items */
    const char *first = indent ? "\n  " : "", *sep = indent ? ",\n  " : ", ";
    char a[40], b[40];
    int n = 0, items = 0;
#define ADD(...) n += snprintf(buf + n, (size_t)n < cap ? cap - (size_t)n : 0, __VA_ARGS__)
#define ITEM(key, fmt, val) ADD("%s\"%s\": " fmt, items++ ? sep : first, key, val)
#define GROUP(prefix, ex, f, tot)                                                                                     \
    do {                                                                                                              \
        char k[32];                                                                                                   \
        pytext_float_repr(ex, a, sizeof a);                                                                           \
        pytext_float_repr(f, b, sizeof b);                                                                            \
        snprintf(k, sizeof k, "%sexact", prefix);                                                                     \
        ITEM(k, "%s", a);                                                                                             \
        snprintf(k, sizeof k, "%sf1", prefix);                                                                        \
        ITEM(k, "%s", b);                                                                                             \
        snprintf(k, sizeof k, "%stotal", prefix);                                                                     \
        ITEM(k, "%d", tot);                                                                                           \
    } while (0)
    ADD("{");
    GROUP("", r->exact, r->f1, r->total);
    if (r->has_ans_total) GROUP("HasAns_", r->has_ans_exact, r->has_ans_f1, r->has_ans_total);
    if (r->no_ans_total) GROUP("NoAns_", r->no_ans_exact, r->no_ans_f1, r->no_ans_total);
    if (r->have_best) {
        pytext_float_repr(r->best_exact, a, sizeof a);
        pytext_float_repr(r->best_f1, b, sizeof b);
        ITEM("best_exact", "%s", a);
        ITEM("best_exact_thresh", "%s", r->best_exact_thresh);
        ITEM("best_f1", "%s", b);
        ITEM("best_f1_thresh", "%s", r->best_f1_thresh);
    }
    ADD(indent ? "\n}" : "}");
#undef GROUP
#undef ITEM
#undef ADD
    return n;
}
