/* utils_qa.py's postprocess_qa_predictions in C (see predict.h), and the
 * JSON files it writes (through infer/pyjson.h). */
#include "infer/predict.h"

#include "core/alloc.h"
#include "core/err.h"
#include "core/fileio.h"
#include "core/sbuf.h"
#include "infer/pyjson.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Indexes of the k largest x, largest first; equal values: higher index
 * first (np.argsort(x, kind="stable")[::-1]). Returns how many (min(k, T)). */
static int top_k(const float *x, int T, int k, int *idx)
{
    int n = 0;
    for (int i = 0; i < T; i++) {
        /* i comes after every kept index with an equal value (it is higher) */
        if (n == k && !(x[i] >= x[idx[n - 1]])) continue;
        int j = n < k ? n++ : n - 1;
        while (j > 0 && x[i] >= x[idx[j - 1]]) {
            idx[j] = idx[j - 1];
            j--;
        }
        idx[j] = i;
    }
    return n;
}

typedef struct {
    float score, start_logit, end_logit;
    int begin, end; /* code points */
    int seq;        /* insertion order: the sort must be stable */
} candidate;

static int cand_cmp(const void *a, const void *b)
{
    const candidate *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

/* context[begin:end] with Python's slice clamping. */
static char *slice_context(const squad_context *c, int begin, int end)
{
    if (begin < 0) begin = 0;
    if (end > c->ncp) end = c->ncp;
    if (begin >= end) return xstrdup("");
    size_t b = (size_t)c->cp_byte[begin], e = (size_t)c->cp_byte[end];
    char *s = xmalloc(e - b + 1);
    memcpy(s, c->text + b, e - b);
    s[e - b] = 0;
    return s;
}

/* numpy's pairwise summation for float32 reductions of fewer than 128
 * elements: eight running sums, combined pairwise, then the tail (checked
 * against np.sum for n = 2..20). numpy's float32 exp is its own SIMD code
 * and differs from expf in the last bit for about a third of inputs, so the
 * probabilities agree to about 1e-7, not bit for bit. */
static float np_sum_f32(const float *a, int n)
{
    if (n < 8) {
        float r = 0.f;
        for (int i = 0; i < n; i++) r += a[i];
        return r;
    }
    float r[8];
    for (int j = 0; j < 8; j++) r[j] = a[j];
    int i;
    for (i = 8; i < n - n % 8; i += 8)
        for (int j = 0; j < 8; j++) r[j] += a[i + j];
    float res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; i++) res += a[i];
    return res;
}

static void softmax(qa_answer *a, int n, int as_double)
{
    if (as_double) {
        double m = -INFINITY, sum = 0;
        for (int i = 0; i < n; i++) m = fmax(m, (double)a[i].score);
        for (int i = 0; i < n; i++) sum += exp((double)a[i].score - m);
        for (int i = 0; i < n; i++) a[i].probability = exp((double)a[i].score - m) / sum;
        return;
    }
    float m = a[0].score, e[64];
    float *ex = n <= 64 ? e : xmalloc(sizeof *ex * (size_t)n);
    for (int i = 1; i < n; i++) m = a[i].score > m ? a[i].score : m;
    for (int i = 0; i < n; i++) ex[i] = expf(a[i].score - m);
    float sum = np_sum_f32(ex, n);
    for (int i = 0; i < n; i++) a[i].probability = (double)(ex[i] / sum);
    if (ex != e) free(ex);
}

/* v2 (version_2_with_negative): the null answer of an example and what it
 * decides. */
typedef struct {
    int on;
    float threshold;   /* null_score_diff_threshold as numpy compares it with a float32: rounded to float32 */
    int pred;          /* out: index of the prediction in the n-best, -1 for the null answer "" */
    float score_diff;  /* out: null score - best non-null start_logit - end_logit */
} null_choice;

/* One example: its windows' candidates -> out (n_best at most, + "empty"). */
static void example_answers(const squad_context *ctx, const features *f, const int *feats, int nfeat,
                            const float *start_logits, const float *end_logits, int n_best, int max_len,
                            candidate **cbuf, size_t *ccap, qa_answer **out, int *nout, null_choice *nul)
{
    int T = f->T;
    int *si = xmalloc(sizeof *si * (size_t)n_best), *ei = xmalloc(sizeof *ei * (size_t)n_best);
    size_t nc = 0;
    int have_null = 0;
    candidate null = {0};
    for (int w = 0; w < nfeat; w++) {
        size_t fi = (size_t)feats[w];
        const float *sl = start_logits + fi * (size_t)T, *el = end_logits + fi * (size_t)T;
        const int32_t *ob = f->offset_begin + fi * (size_t)T, *oe = f->offset_end + fi * (size_t)T;
        /* the minimum null prediction: [CLS] start + end, the first window with the least */
        float null_score = sl[0] + el[0];
        if (nul->on && (!have_null || null.score > null_score)) {
            have_null = 1;
            null.score = null_score;
            null.start_logit = sl[0];
            null.end_logit = el[0];
        }
        int ns = top_k(sl, T, n_best, si), ne = top_k(el, T, n_best, ei);
        for (int a = 0; a < ns; a++) {
            int s = si[a];
            if (ob[s] < 0 || oe[s] < 0) continue;
            for (int b = 0; b < ne; b++) {
                int e = ei[b];
                if (ob[e] < 0 || oe[e] < 0) continue;
                if (e < s || e - s + 1 > max_len) continue;
                if (nc == *ccap) {
                    *ccap = *ccap ? 2 * *ccap : 256;
                    *cbuf = xrealloc(*cbuf, *ccap * sizeof **cbuf);
                }
                candidate *c = &(*cbuf)[nc];
                c->start_logit = sl[s];
                c->end_logit = el[e];
                c->score = sl[s] + el[e];
                c->begin = ob[s];
                c->end = oe[e];
                c->seq = (int)nc++;
            }
        }
    }
    free(si);
    free(ei);
    if (have_null) { /* appended after every span: it sorts after spans of an equal score */
        if (nc == *ccap) {
            *ccap = *ccap ? 2 * *ccap : 256;
            *cbuf = xrealloc(*cbuf, *ccap * sizeof **cbuf);
        }
        null.begin = null.end = 0;
        null.seq = (int)nc;
        (*cbuf)[nc++] = null;
    }
    candidate *cs = *cbuf;
    if (nc > 1) qsort(cs, nc, sizeof *cs, cand_cmp);
    int keep = nc < (size_t)n_best ? (int)nc : n_best;
    if (have_null) { /* added back when it fell out of the n best (any offsets (0, 0) counts) */
        int kept = 0;
        for (int i = 0; i < keep && !kept; i++) kept = cs[i].begin == 0 && cs[i].end == 0;
        if (!kept) cs[keep++] = null; /* its slot is free: nc > keep or it was kept */
    }
    qa_answer *ans = xcalloc((size_t)keep + 1, sizeof *ans);
    for (int i = 0; i < keep; i++) {
        ans[i + 1].text = slice_context(ctx, cs[i].begin, cs[i].end);
        ans[i + 1].start_logit = cs[i].start_logit;
        ans[i + 1].end_logit = cs[i].end_logit;
        ans[i + 1].score = cs[i].score;
        ans[i + 1].begin_cp = cs[i].begin;
        ans[i + 1].end_cp = cs[i].end;
    }
    int n = keep;
    qa_answer *first = ans + 1;
    int inserted = keep == 0 || (keep == 1 && first[0].text[0] == 0);
    if (inserted) {
        /* utils_qa.py inserts a fake prediction so that there is an answer;
         * its Python 0.0 score turns numpy's score array into float64 */
        ans[0].text = xstrdup("empty");
        ans[0].begin_cp = ans[0].end_cp = -1;
        first = ans;
        n++;
    } else {
        memmove(ans, ans + 1, sizeof *ans * (size_t)keep);
        memset(ans + keep, 0, sizeof *ans);
    }
    softmax(ans, n, inserted);
    if (have_null) {
        /* the best non-null prediction: the first whose text is not empty
         * (utils_qa.py would run off the list when there is none; here the
         * null answer's logits are compared with 0) */
        int b = 0;
        while (b < n && ans[b].text[0] == 0) b++;
        float s = b < n ? ans[b].start_logit : 0.f, e = b < n ? ans[b].end_logit : 0.f;
        volatile float diff = null.score - s; /* float32, as numpy: no wider intermediate */
        diff = diff - e;
        nul->score_diff = diff;
        nul->pred = (b < n && !(diff > nul->threshold)) ? b : -1;
    }
    *out = ans;
    *nout = n;
}

static int postprocess(const squad_data *d, const features *f, const float *start_logits, const float *end_logits,
                       int n_best, int max_answer_length, int v2, double threshold, qa_predictions *out)
{
    memset(out, 0, sizeof *out);
    if (n_best < 1 || max_answer_length < 1)
        return err_set(ERR_INPUT, "postprocess: n_best (%d) and max_answer_length (%d) must be positive", n_best,
                       max_answer_length);
    if (f->n > 0 && f->T < 1) return err_set(ERR_INPUT, "postprocess: features have T = %d", f->T);
    size_t total = mul_size((size_t)(f->n > 0 ? f->n : 0), (size_t)(f->T > 0 ? f->T : 0));
    for (size_t i = 0; i < total; i++)
        if (isnan(start_logits[i]) || isnan(end_logits[i]))
            return err_set(ERR_RUNTIME, "postprocess: NaN logit in feature %zu, token %zu", i / (size_t)f->T,
                           i % (size_t)f->T);
    /* features of each example, in feature order (utils_qa's features_per_example) */
    int *count = xcalloc((size_t)d->n + 1, sizeof *count), *first = xcalloc((size_t)d->n + 1, sizeof *first);
    int *order = xmalloc(sizeof *order * (size_t)(f->n > 0 ? f->n : 1));
    for (int i = 0; i < f->n; i++) {
        int e = f->example[i];
        if (e < 0 || e >= d->n) {
            free(count);
            free(first);
            free(order);
            return err_set(ERR_INPUT, "postprocess: feature %d belongs to example %d of %d", i, e, d->n);
        }
        int c = d->ex[e].context;
        if (c < 0 || c >= d->ncontexts) {
            free(count);
            free(first);
            free(order);
            return err_set(ERR_INPUT, "postprocess: example %d has context %d of %d", e, c, d->ncontexts);
        }
        count[e]++;
    }
    for (int e = 0; e < d->n; e++) first[e + 1] = first[e] + count[e];
    memset(count, 0, sizeof *count * (size_t)d->n);
    for (int i = 0; i < f->n; i++) {
        int e = f->example[i];
        order[first[e] + count[e]++] = i;
    }
    out->n = d->n;
    out->nbest = xcalloc((size_t)d->n + 1, sizeof *out->nbest);
    out->n_nbest = xcalloc((size_t)d->n + 1, sizeof *out->n_nbest);
    if (v2) {
        out->version_2_with_negative = 1;
        out->pred = xcalloc((size_t)d->n + 1, sizeof *out->pred);
        out->score_diff = xcalloc((size_t)d->n + 1, sizeof *out->score_diff);
        out->has_null = xcalloc((size_t)d->n + 1, sizeof *out->has_null);
    }
    candidate *cbuf = NULL;
    size_t ccap = 0;
    for (int e = 0; e < d->n; e++) {
        int c = d->ex[e].context;
        const squad_context *ctx = (c >= 0 && c < d->ncontexts) ? &d->contexts[c] : NULL;
        squad_context none = {.text = "", .cp_byte = (int32_t[]){0}};
        null_choice nul = {.on = v2, .threshold = (float)threshold, .pred = 0};
        example_answers(ctx ? ctx : &none, f, order + first[e], count[e], start_logits, end_logits, n_best,
                        max_answer_length, &cbuf, &ccap, &out->nbest[e], &out->n_nbest[e], &nul);
        if (v2) {
            out->has_null[e] = count[e] > 0;
            out->pred[e] = nul.pred;
            out->score_diff[e] = nul.score_diff;
        }
    }
    free(cbuf);
    free(count);
    free(first);
    free(order);
    return 0;
}

int postprocess_predictions(const squad_data *d, const features *f, const float *start_logits, const float *end_logits,
                            const postprocess_opts *o, qa_predictions *out)
{
    if (o->version_2_with_negative && isnan(o->null_score_diff_threshold)) {
        memset(out, 0, sizeof *out);
        return err_set(ERR_INPUT, "postprocess: the null score difference threshold is NaN");
    }
    return postprocess(d, f, start_logits, end_logits, o->n_best, o->max_answer_length, o->version_2_with_negative != 0,
                       o->null_score_diff_threshold, out);
}

const char *qa_prediction_text(const qa_predictions *p, int i)
{
    if (i < 0 || i >= p->n) return NULL;
    if (p->version_2_with_negative && p->has_null[i]) return p->pred[i] < 0 ? "" : p->nbest[i][p->pred[i]].text;
    return p->n_nbest[i] > 0 ? p->nbest[i][0].text : NULL;
}

void qa_predictions_free(qa_predictions *p)
{
    for (int i = 0; i < p->n; i++) {
        for (int k = 0; p->nbest && k < p->n_nbest[i]; k++) free(p->nbest[i][k].text);
        if (p->nbest) free(p->nbest[i]);
    }
    free(p->nbest);
    free(p->n_nbest);
    free(p->pred);
    free(p->score_diff);
    free(p->has_null);
    memset(p, 0, sizeof *p);
}

static int id_cmp(const void *a, const void *b)
{
    const squad_example *const *x = a, *const *y = b;
    int c = strcmp((*x)->id, (*y)->id);
    return c ? c : (*x < *y ? -1 : *x > *y);
}

/* For each example, the example whose answer a Python dict keyed by id ends
 * up holding at that example's place: itself, the last one with the same id
 * (at the first one's place), or -1 for a later duplicate, which adds no key. */
static int *dict_slots(const squad_data *d)
{
    int *slot = xmalloc(sizeof *slot * (size_t)(d->n + 1));
    const squad_example **s = xmalloc(sizeof *s * (size_t)(d->n + 1));
    for (int i = 0; i < d->n; i++) s[i] = &d->ex[i];
    qsort(s, (size_t)d->n, sizeof *s, id_cmp);
    for (int i = 0; i < d->n;) {
        int j = i;
        while (j + 1 < d->n && strcmp(s[j + 1]->id, s[i]->id) == 0) j++;
        for (int k = i; k <= j; k++) slot[s[k] - d->ex] = -1;
        slot[s[i] - d->ex] = (int)(s[j] - d->ex);
        i = j + 1;
    }
    free(s);
    return slot;
}

enum { DICT_PREDICTIONS, DICT_NBEST, DICT_NULL_ODDS };

static int write_dict(const char *path, const squad_data *d, const qa_predictions *p, int what)
{
    int nbest = what == DICT_NBEST;
    if (p->n != d->n) return err_set(ERR_INPUT, "%s: %d predictions for %d examples", path, p->n, d->n);
    int *slot = dict_slots(d);
    sbuf b = {0};
    int items = 0;
    sb_puts(&b, "{");
    for (int i = 0; i < d->n; i++) {
        int w = slot[i];
        if (w < 0) continue;
        if (what == DICT_NULL_ODDS && !p->has_null[w]) continue; /* no window: no null score */
        sb_puts(&b, items++ ? ",\n    " : "\n    ");
        sb_json_string(&b, d->ex[i].id, SB_JSON_PYTHON);
        sb_puts(&b, ": ");
        if (what == DICT_NULL_ODDS) {
            pyjson_float(&b, (double)p->score_diff[w]);
            continue;
        }
        if (!nbest) {
            const char *t = qa_prediction_text(p, w);
            if (!t) t = "empty";
            sb_json_string(&b, t, SB_JSON_PYTHON);
            continue;
        }
        if (p->n_nbest[w] == 0) {
            sb_puts(&b, "[]");
            continue;
        }
        sb_puts(&b, "[");
        for (int k = 0; k < p->n_nbest[w]; k++) {
            const qa_answer *a = &p->nbest[w][k];
            sb_puts(&b, k ? ",\n        {\n" : "\n        {\n");
            if (a->begin_cp < 0) { /* the inserted "empty": its dict's own key order */
                sb_puts(&b, "            \"text\": ");
                sb_json_string(&b, a->text, SB_JSON_PYTHON);
                sb_puts(&b, ",\n            \"start_logit\": ");
                pyjson_float(&b, a->start_logit);
                sb_puts(&b, ",\n            \"end_logit\": ");
                pyjson_float(&b, a->end_logit);
            } else {
                sb_puts(&b, "            \"start_logit\": ");
                pyjson_float(&b, a->start_logit);
                sb_puts(&b, ",\n            \"end_logit\": ");
                pyjson_float(&b, a->end_logit);
                sb_puts(&b, ",\n            \"text\": ");
                sb_json_string(&b, a->text, SB_JSON_PYTHON);
            }
            sb_puts(&b, ",\n            \"probability\": ");
            pyjson_float(&b, a->probability);
            sb_puts(&b, "\n        }");
        }
        sb_puts(&b, "\n    ]");
    }
    sb_puts(&b, items ? "\n}\n" : "}\n");
    int rc = file_write_atomic(path, b.p, b.n);
    sb_free(&b);
    free(slot);
    return rc;
}

int predictions_write_json(const char *path, const squad_data *d, const qa_predictions *p)
{
    return write_dict(path, d, p, DICT_PREDICTIONS);
}

int nbest_write_json(const char *path, const squad_data *d, const qa_predictions *p)
{
    return write_dict(path, d, p, DICT_NBEST);
}

int null_odds_write_json(const char *path, const squad_data *d, const qa_predictions *p)
{
    if (!p->version_2_with_negative)
        return err_set(ERR_INPUT, "%s: null odds exist only with --version-2-with-negative", path);
    return write_dict(path, d, p, DICT_NULL_ODDS);
}
