/* evaluate-v1.1.py in C (see squad_eval.h), and the file-level driver that
 * both metrics share. */
#include "eval/squad_eval.h"

#include "core/alloc.h"
#include "core/err.h"
#include "core/fileio.h"
#include "eval/pytext.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int is_ascii_punct(int32_t c)
{
    /* string.punctuation */
    return c < 0x80 && c > 0x20 && c != 0x7F && !(c >= '0' && c <= '9') && !(c >= 'a' && c <= 'z') &&
           !(c >= 'A' && c <= 'Z');
}

static int is_article(const int32_t *w, size_t n)
{
    if (n == 1) return w[0] == 'a';
    if (n == 2) return w[0] == 'a' && w[1] == 'n';
    if (n == 3) return w[0] == 't' && w[1] == 'h' && w[2] == 'e';
    return 0;
}

char *squad_normalize_answer(const char *s, size_t n, size_t *len)
{
    pytext_cps in = {0}, low = {0}, t = {0}, out = {0};
    pytext_decode(s, n, &in);
    pytext_lower(&in, &low);
    for (size_t i = 0; i < low.n; i++)
        if (!is_ascii_punct(low.cp[i])) pytext_push(&t, low.cp[i]);
    /* re.sub(r'\b(a|an|the)\b', ' ', text): a match is a maximal run of word
     * characters that is one of the articles, so compare whole runs. */
    pytext_cps art = {0};
    for (size_t i = 0; i < t.n;) {
        if (!pytext_isword(t.cp[i])) {
            pytext_push(&art, t.cp[i++]);
            continue;
        }
        size_t j = i;
        while (j < t.n && pytext_isword(t.cp[j])) j++;
        if (is_article(t.cp + i, j - i)) pytext_push(&art, ' ');
        else
            for (size_t k = i; k < j; k++) pytext_push(&art, t.cp[k]);
        i = j;
    }
    /* ' '.join(text.split()) */
    for (size_t i = 0; i < art.n;) {
        while (i < art.n && pytext_isspace(art.cp[i])) i++;
        if (i == art.n) break;
        if (out.n) pytext_push(&out, ' ');
        while (i < art.n && !pytext_isspace(art.cp[i])) pytext_push(&out, art.cp[i++]);
    }
    char *r = pytext_encode(&out, len);
    pytext_cps_free(&in);
    pytext_cps_free(&low);
    pytext_cps_free(&t);
    pytext_cps_free(&art);
    pytext_cps_free(&out);
    return r;
}

int squad_exact_match(const char *pred, size_t npred, const char *gold, size_t ngold)
{
    size_t a, b;
    char *p = squad_normalize_answer(pred, npred, &a);
    char *g = squad_normalize_answer(gold, ngold, &b);
    int eq = a == b && memcmp(p, g, a) == 0;
    free(p);
    free(g);
    return eq;
}

typedef struct {
    const char *s;
    size_t n;
} token;

static int token_cmp(const void *x, const void *y)
{
    const token *a = x, *b = y;
    size_t n = a->n < b->n ? a->n : b->n;
    int c = memcmp(a->s, b->s, n);
    if (c) return c;
    return a->n < b->n ? -1 : a->n > b->n;
}

/* A normalised string's tokens: it holds single spaces between tokens. */
static token *split_normalized(const char *s, size_t n, int *count)
{
    int k = 0;
    for (size_t i = 0; i < n; i++) k += s[i] == ' ';
    token *t = xmalloc(sizeof *t * (size_t)(k + 1));
    k = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && s[j] != ' ') j++;
        t[k].s = s + i;
        t[k].n = j - i;
        k++;
        i = j + 1;
    }
    *count = k;
    return t;
}

double squad_f1(const char *pred, size_t npred, const char *gold, size_t ngold)
{
    size_t a, b;
    char *p = squad_normalize_answer(pred, npred, &a);
    char *g = squad_normalize_answer(gold, ngold, &b);
    int np, ng;
    token *tp = split_normalized(p, a, &np), *tg = split_normalized(g, b, &ng);
    /* sum((Counter(pred) & Counter(gold)).values()) by merging sorted lists */
    qsort(tp, (size_t)np, sizeof *tp, token_cmp);
    qsort(tg, (size_t)ng, sizeof *tg, token_cmp);
    int same = 0;
    for (int i = 0, j = 0; i < np && j < ng;) {
        int c = token_cmp(&tp[i], &tg[j]);
        if (c == 0) {
            same++;
            i++;
            j++;
        } else if (c < 0) {
            i++;
        } else {
            j++;
        }
    }
    double f1 = 0;
    if (same > 0) {
        double precision = 1.0 * same / np;
        double recall = 1.0 * same / ng;
        f1 = (2 * precision * recall) / (precision + recall);
    }
    free(tp);
    free(tg);
    free(p);
    free(g);
    return f1;
}

void eval_question(eval_metric m, const char *pred, size_t npred, const char *const *gold, const size_t *gold_len,
                   int ngold, int *em, double *f1)
{
    int best_em = 0;
    double best_f1 = 0;
    for (int i = 0; i < ngold; i++) {
        size_t n = gold_len ? gold_len[i] : strlen(gold[i]);
        int e;
        double f;
        if (m == EVAL_METRIC_CMRC) {
            e = cmrc_exact_match(pred, npred, gold[i], n);
            f = cmrc_f1(pred, npred, gold[i], n);
        } else {
            e = squad_exact_match(pred, npred, gold[i], n);
            f = squad_f1(pred, npred, gold[i], n);
        }
        if (e > best_em) best_em = e;
        if (f > best_f1) best_f1 = f;
    }
    *em = best_em;
    *f1 = best_f1;
}

/* Both scripts: 100.0 * sum / total, the sums taken in file order. */
static void finish(eval_result *r, long em_sum, double f1_sum)
{
    r->exact_match = 100.0 * (double)em_sum / r->total;
    r->f1 = 100.0 * f1_sum / r->total;
}

int eval_examples(const squad_data *d, const char *const *pred, eval_metric m, eval_result *out)
{
    memset(out, 0, sizeof *out);
    if (!d || d->n <= 0) return err_set(ERR_INPUT, "eval: no questions to evaluate");
    long em_sum = 0;
    double f1_sum = 0;
    out->total = d->n;
    for (int i = 0; i < d->n; i++) {
        const squad_example *ex = &d->ex[i];
        if (ex->n_answers <= 0) out->no_gold++;
        if (ex->is_impossible) out->impossible++;
        if (!pred[i]) {
            out->unanswered++;
            continue;
        }
        int em;
        double f1;
        eval_question(m, pred[i], strlen(pred[i]), (const char *const *)ex->answer_text, NULL, ex->n_answers, &em,
                      &f1);
        em_sum += em;
        f1_sum += f1;
    }
    finish(out, em_sum, f1_sum);
    return 0;
}

int eval_load_json(const char *path, json_t **out)
{
    char *buf;
    size_t len;
    int rc = file_read_all(path, &buf, &len);
    if (rc) {
        /* an input file that cannot be read is bad input (exit 2), whatever errno says */
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", err_msg());
        return err_set(ERR_INPUT, "%s", msg);
    }
    json_error_t je;
    *out = json_loadb(buf, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    free(buf);
    if (!*out) return err_set(ERR_INPUT, "%s:%d:%d: invalid JSON: %s", path, je.line, je.column, je.text);
    return 0;
}

/* The script's str.strip() of the question id (CMRC only); caller frees. */
static char *strip_id(const char *id)
{
    pytext_cps t = {0};
    pytext_decode(id, strlen(id), &t);
    size_t b = 0, e = t.n;
    while (b < e && pytext_isspace(t.cp[b])) b++;
    while (e > b && pytext_isspace(t.cp[e - 1])) e--;
    pytext_cps s = {t.cp + b, e - b, e - b};
    char *r = pytext_encode(&s, NULL);
    pytext_cps_free(&t);
    return r;
}

int eval_data_array(const char *path, json_t *doc, json_t **data)
{
    *data = json_is_object(doc) ? json_object_get(doc, "data") : NULL;
    if (!json_is_array(*data))
        return err_set(ERR_INPUT, "%s: not a SQuAD-format file (no \"data\" array at the top)", path);
    return 0;
}

int eval_check_predictions(const char *path, json_t *pred)
{
    if (!json_is_object(pred)) return err_set(ERR_INPUT, "%s: predictions must be a JSON object {\"id\": \"answer\"}", path);
    const char *key;
    json_t *v;
    json_object_foreach(pred, key, v) {
        if (!json_is_string(v))
            return err_set(ERR_INPUT, "%s: the prediction for id '%s' is not a string", path, key);
    }
    return 0;
}

int eval_walk_questions(const char *path, json_t *data, int id_prec, int (*keep)(const char *s, size_t n),
                        eval_question_fn fn, void *user)
{
    size_t ai, pi, qi, gi;
    json_t *art, *para, *qa, *ans;
    const char **gold = NULL;
    size_t *gold_len = NULL, gold_cap = 0;
    int rc = 0;
    json_array_foreach(data, ai, art) {
        json_t *paras = json_object_get(art, "paragraphs");
        if (!json_is_array(paras)) {
            rc = err_set(ERR_INPUT, "%s: data[%zu]: \"paragraphs\" missing or not an array", path, ai);
            goto done;
        }
        json_array_foreach(paras, pi, para) {
            json_t *qas = json_object_get(para, "qas");
            if (!json_is_array(qas)) {
                rc = err_set(ERR_INPUT, "%s: data[%zu].paragraphs[%zu]: \"qas\" missing or not an array", path, ai, pi);
                goto done;
            }
            json_array_foreach(qas, qi, qa) {
                json_t *jid = json_object_get(qa, "id"), *answers = json_object_get(qa, "answers");
                if (!json_is_string(jid)) {
                    rc = err_set(ERR_INPUT, "%s: data[%zu].paragraphs[%zu].qas[%zu]: \"id\" missing or not a string",
                                 path, ai, pi, qi);
                    goto done;
                }
                const char *id = json_string_value(jid);
                if (!json_is_array(answers)) {
                    rc = err_set(ERR_INPUT, "%s: question '%.*s': \"answers\" missing or not an array", path, id_prec,
                                 id);
                    goto done;
                }
                size_t na = json_array_size(answers);
                if (na > gold_cap) {
                    gold_cap = na;
                    gold = xrealloc(gold, na * sizeof *gold);
                    gold_len = xrealloc(gold_len, na * sizeof *gold_len);
                }
                int ng = 0;
                json_array_foreach(answers, gi, ans) {
                    json_t *text = json_object_get(ans, "text");
                    if (!json_is_string(text)) {
                        rc = err_set(ERR_INPUT, "%s: question '%.*s': answers[%zu].text missing or not a string",
                                     path, id_prec, id, gi);
                        goto done;
                    }
                    if (keep && !keep(json_string_value(text), json_string_length(text))) continue;
                    gold[ng] = json_string_value(text);
                    gold_len[ng++] = json_string_length(text);
                }
                fn(user, qa, id, na, gold, gold_len, ng);
            }
        }
    }
done:
    free(gold);
    free(gold_len);
    return rc;
}

typedef struct {
    json_t *pred;
    eval_metric m;
    eval_result *out;
    long em_sum;
    double f1_sum;
} score_state;

/* Scores one question of eval_files. */
static void score_one(void *user, json_t *qa, const char *id, size_t na, const char **gold, const size_t *gold_len,
                      int ng)
{
    score_state *st = user;
    st->out->total++;
    if (na == 0) st->out->no_gold++;
    if (json_is_true(json_object_get(qa, "is_impossible"))) st->out->impossible++;
    char *sid = st->m == EVAL_METRIC_CMRC ? strip_id(id) : NULL;
    json_t *p = json_object_get(st->pred, sid ? sid : id);
    free(sid);
    if (!p) {
        st->out->unanswered++;
        return;
    }
    int em;
    double f1;
    eval_question(st->m, json_string_value(p), json_string_length(p), gold, gold_len, ng, &em, &f1);
    st->em_sum += em;
    st->f1_sum += f1;
}

int eval_files(const char *data_path, const char *pred_path, eval_metric m, eval_result *out)
{
    memset(out, 0, sizeof *out);
    json_t *dj = NULL, *pj = NULL;
    int rc = eval_load_json(data_path, &dj);
    if (rc) goto done;
    rc = eval_load_json(pred_path, &pj);
    if (rc) goto done;
    json_t *data;
    if ((rc = eval_data_array(data_path, dj, &data)) || (rc = eval_check_predictions(pred_path, pj))) goto done;
    if (m == EVAL_METRIC_SQUAD) {
        json_t *v = json_object_get(dj, "version");
        const char *ver = json_is_string(v) ? json_string_value(v) : NULL;
        if (!ver || strcmp(ver, "1.1") != 0)
            log_warn("Evaluation expects v-1.1, but got dataset with v-%s (%s)", ver ? ver : "(none)", data_path);
    }
    score_state st = {pj, m, out, 0, 0};
    if ((rc = eval_walk_questions(data_path, data, -1, NULL, score_one, &st))) goto done;
    if (out->total == 0) {
        rc = err_set(ERR_INPUT, "%s: no questions in the data", data_path);
        goto done;
    }
    finish(out, st.em_sum, st.f1_sum);
done:
    json_decref(dj);
    json_decref(pj);
    return rc;
}

int eval_result_json(const eval_result *r, char *buf, size_t cap)
{
    char em[32], f1[32];
    pytext_float_repr(r->exact_match, em, sizeof em);
    pytext_float_repr(r->f1, f1, sizeof f1);
    return snprintf(buf, cap, "{\"exact_match\": %s, \"f1\": %s}", em, f1);
}
