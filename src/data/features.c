/* Features (features.h): tokenise, cut windows, label, as run_qa.py does.
 *
 * Two stages. features_tokens_build tokenises each context once and each
 * question once (in parallel; order does not matter, every item has its own
 * slot). features_from_tokens then plans the windows of every example
 * (serially: it is O(examples) and its errors must be deterministic), and
 * fills the rows in parallel, each example writing its own rows, so the
 * output is the same for any thread count. */
#include "data/features_impl.h"
#include "core/alloc.h"
#include "core/err.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void free_each(void *const *p, size_t n)
{
    for (size_t i = 0; i < n; i++) free(p[i]);
}

void features_tokens_free(features_tokens *t)
{
    if (!t) return;
    void *const arrays[] = {t->ctx_off, t->ctx_ids, t->ctx_begin, t->ctx_end, t->q_off, t->q_ids};
    free_each(arrays, sizeof arrays / sizeof arrays[0]);
    free(t);
}

void features_free(features *f)
{
    if (!f) return;
    void *const arrays[] = {f->input_ids,       f->token_type_ids, f->attention_mask, f->start_positions,
                            f->end_positions, f->example,        f->offset_begin,   f->offset_end};
    free_each(arrays, sizeof arrays / sizeof arrays[0]);
    features_tokens_free(f->tokens);
    memset(f, 0, sizeof *f);
}

int features_check_opts(const feature_opts *o)
{
    if (o->max_seq_length < 4 || o->max_seq_length > (1 << 20))
        return err_set(ERR_INPUT, "features: max_seq_length %d is out of range [4, %d]", o->max_seq_length, 1 << 20);
    if (o->doc_stride < 0 || o->doc_stride >= o->max_seq_length)
        return err_set(ERR_INPUT, "features: doc_stride %d must be in [0, max_seq_length %d)", o->doc_stride,
                       o->max_seq_length);
    if (o->max_query_length < 0)
        return err_set(ERR_INPUT, "features: max_query_length %d is negative", o->max_query_length);
    return 0;
}

int features_trainable(const features *f, const squad_data *d, int i)
{
    if (i < 0 || i >= f->n) return 0;
    int e = f->example[i];
    if (e < 0 || e >= d->n) return 0;
    if (f->version_2_with_negative && d->ex[e].is_impossible) return 1;
    return !(d->ex[e].n_answers > 0 && d->ex[e].train_answer < 0);
}

/* Length of the code point at s (valid UTF-8, as Jansson guarantees). */
static int utf8_len(unsigned char c)
{
    return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
}

/* Python's str.lstrip(): drops the leading characters str.isspace() calls
 * whitespace. */
static const char *py_lstrip(const char *s)
{
    for (;;) {
        const unsigned char *u = (const unsigned char *)s;
        uint32_t cp;
        int n = utf8_len(u[0]);
        if (u[0] == 0) return s;
        if (n == 1) cp = u[0];
        else if (n == 2) cp = (u[0] & 0x1Fu) << 6 | (u[1] & 0x3Fu);
        else if (n == 3) cp = (u[0] & 0x0Fu) << 12 | (u[1] & 0x3Fu) << 6 | (u[2] & 0x3Fu);
        else cp = (u[0] & 0x07u) << 18 | (u[1] & 0x3Fu) << 12 | (u[2] & 0x3Fu) << 6 | (u[3] & 0x3Fu);
        int space = (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
                    cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
                    cp == 0x202F || cp == 0x205F || cp == 0x3000;
        if (!space) return s;
        s += n;
    }
}

/* The first error raised inside a parallel loop, by lowest item index, so
 * the message does not depend on thread timing. */
typedef struct {
    int index, code;
    char msg[512];
} par_error;

static void par_error_note(par_error *pe, int index, int code)
{
#pragma omp critical(features_error)
    {
        if (pe->index < 0 || index < pe->index) {
            pe->index = index;
            pe->code = code;
            snprintf(pe->msg, sizeof pe->msg, "%s", err_msg());
        }
    }
}

static int resolve_threads(int nthreads)
{
    return nthreads > 0 ? nthreads : omp_get_max_threads();
}

/* Concatenates lists[0..n) into flat arrays with offsets off[n + 1]. */
static int flatten(token_list *lists, int n, int with_offsets, int64_t **off, int32_t **ids, int32_t **begin,
                   int32_t **end)
{
    *off = malloc(((size_t)n + 1) * sizeof **off);
    if (!*off) return err_set(ERR_RUNTIME, "features: out of memory");
    int64_t total = 0;
    for (int i = 0; i < n; i++) {
        (*off)[i] = total;
        total += lists[i].n;
    }
    (*off)[n] = total;
    size_t cnt = total ? (size_t)total : 1;
    *ids = malloc(cnt * sizeof **ids);
    if (with_offsets) {
        *begin = malloc(cnt * sizeof **begin);
        *end = malloc(cnt * sizeof **end);
    }
    if (!*ids || (with_offsets && (!*begin || !*end)))
        return err_set(ERR_RUNTIME, "features: out of memory for %lld tokens", (long long)total);
    for (int i = 0; i < n; i++) {
        size_t k = (size_t)(*off)[i], m = (size_t)lists[i].n;
        if (!m) continue;
        memcpy(*ids + k, lists[i].ids, m * sizeof **ids);
        if (with_offsets) {
            memcpy(*begin + k, lists[i].begin, m * sizeof **begin);
            memcpy(*end + k, lists[i].end, m * sizeof **end);
        }
    }
    return 0;
}

static int features_tokens_build(const squad_data *d, const tokenizer *tok, int nthreads, features_tokens **out)
{
    *out = NULL;
    int nt = resolve_threads(nthreads);
    token_list *cl = calloc(d->ncontexts ? (size_t)d->ncontexts : 1, sizeof *cl);
    token_list *ql = calloc(d->n ? (size_t)d->n : 1, sizeof *ql);
    features_tokens *t = calloc(1, sizeof *t);
    int rc = 0;
    if (!cl || !ql || !t) {
        rc = err_set(ERR_RUNTIME, "features: out of memory");
        goto done;
    }
    t->ncontexts = d->ncontexts;
    t->n = d->n;
    par_error pe = {.index = -1};
    /* Contexts first (long, few), then questions (short, many): one loop
     * each keeps the dynamic schedule's chunks of similar cost. */
#pragma omp parallel for num_threads(nt) schedule(dynamic, 4)
    for (int i = 0; i < d->ncontexts; i++) {
        const squad_context *c = &d->contexts[i];
        int r = tokenizer_encode(tok, c->text, c->nbytes, &cl[i]);
        if (r) par_error_note(&pe, i, r);
    }
    if (pe.index >= 0) {
        rc = err_set(pe.code, "features: context %d: %s", pe.index, pe.msg);
        goto done;
    }
#pragma omp parallel for num_threads(nt) schedule(dynamic, 64)
    for (int i = 0; i < d->n; i++) {
        const char *q = py_lstrip(d->ex[i].question);
        int r = tokenizer_encode(tok, q, strlen(q), &ql[i]);
        if (r) par_error_note(&pe, i, r);
    }
    if (pe.index >= 0) {
        rc = err_set(pe.code, "features: question \"%.120s\": %s", d->ex[pe.index].id, pe.msg);
        goto done;
    }
    rc = flatten(cl, d->ncontexts, 1, &t->ctx_off, &t->ctx_ids, &t->ctx_begin, &t->ctx_end);
    if (!rc) rc = flatten(ql, d->n, 0, &t->q_off, &t->q_ids, NULL, NULL);
done:
    for (int i = 0; cl && i < d->ncontexts; i++) token_list_free(&cl[i]);
    for (int i = 0; ql && i < d->n; i++) token_list_free(&ql[i]);
    free(cl);
    free(ql);
    if (rc) features_tokens_free(t);
    else *out = t;
    return rc;
}

/* The windows of one example (features.h, "Windows"). */
typedef struct {
    int nq, nc;   /* question tokens used, context tokens */
    int L, step;  /* context tokens per window, start of window k = k * step */
    int nwin;
} window_plan;

static int plan_example(const squad_example *e, const features_tokens *t, int i, const feature_opts *o,
                        window_plan *p)
{
    int T = o->max_seq_length, S = o->doc_stride;
    int64_t nq = t->q_off[i + 1] - t->q_off[i];
    int64_t nc = t->ctx_off[e->context + 1] - t->ctx_off[e->context];
    if (o->max_query_length > 0 && nq > o->max_query_length) nq = o->max_query_length;
    p->nq = (int)nq;
    p->nc = (int)nc;
    if (nq + nc + 3 <= T) {
        p->L = (int)nc;
        p->step = 1;
        p->nwin = 1;
        return 0;
    }
    int64_t L = (int64_t)T - 3 - nq;
    if (L <= 0)
        return err_set(ERR_INPUT,
                       "features: question \"%.120s\": its %lld tokens leave no room for the context in "
                       "--max-seq-length %d (Hugging Face: \"Sequence to truncate too short\"); "
                       "use --max-query-length or a larger --max-seq-length", e->id, (long long)nq, T);
    if (S >= L)
        return err_set(ERR_INPUT,
                       "features: question \"%.120s\": its %lld tokens leave %lld context tokens per window in "
                       "--max-seq-length %d, not more than --doc-stride %d (Hugging Face: \"stride must be "
                       "strictly less than max_len\"); use --max-query-length or a smaller --doc-stride",
                       e->id, (long long)nq, (long long)L, T, S);
    p->L = (int)L;
    p->step = (int)(L - S);
    p->nwin = 1 + (int)((nc - L + p->step - 1) / p->step);
    return 0;
}

/* prepare_train_features' labels for one window whose context tokens are
 * ctx tokens [s, s + len) at row positions [q0, q0 + len). */
static void label_window(const squad_example *e, const features_tokens *t, int s, int len, int q0, int T, int v2,
                         int32_t *start, int32_t *end)
{
    *start = *end = 0;
    if (e->train_answer < 0 || len <= 0 || (v2 && e->is_impossible)) return;
    const char *text = e->answer_text[e->train_answer];
    int start_char = e->answer_start[e->train_answer], ncp = 0;
    for (const unsigned char *u = (const unsigned char *)text; *u; u++) ncp += (*u & 0xC0) != 0x80;
    int end_char = start_char + ncp;
    const int32_t *b = t->ctx_begin + t->ctx_off[e->context] + s, *en = t->ctx_end + t->ctx_off[e->context] + s;
    if (!(b[0] <= start_char && en[len - 1] >= end_char)) return;
    int k = 0;
    while (k < len && b[k] <= start_char) k++;
    /* Past the last context token the reference walks on over [SEP] and
     * padding, offsets (0, 0) <= start_char, to the end of the row. */
    *start = k < len ? q0 + k - 1 : T - 1;
    k = len - 1;
    while (k >= 0 && en[k] >= end_char) k--;
    *end = q0 + k + 1; /* k = -1 stops at the [SEP] before the context: end_char > 0 */
}

static void fill_example(const squad_data *d, const features_tokens *t, const tokenizer *tok, int i,
                         const window_plan *p, int64_t first, int T, features *f)
{
    const squad_example *e = &d->ex[i];
    const vocab *v = tokenizer_vocab(tok);
    int32_t cls = vocab_cls(v), sep = vocab_sep(v), pad = vocab_pad(v);
    const int32_t *q = t->q_ids + t->q_off[i];
    int64_t c0 = t->ctx_off[e->context];
    for (int w = 0; w < p->nwin; w++) {
        int64_t r = first + w;
        size_t row = (size_t)r * (size_t)T;
        int32_t *ids = f->input_ids + row, *tt = f->token_type_ids + row, *am = f->attention_mask + row;
        int32_t *ob = f->offset_begin + row, *oe = f->offset_end + row;
        int s = p->nwin == 1 ? 0 : w * p->step;
        int len = p->nwin == 1 ? p->nc : (s + p->L <= p->nc ? p->L : p->nc - s);
        int q0 = p->nq + 2, used = p->nq + len + 3;
        ids[0] = cls;
        memcpy(ids + 1, q, (size_t)p->nq * sizeof *ids);
        ids[p->nq + 1] = sep;
        memcpy(ids + q0, t->ctx_ids + c0 + s, (size_t)len * sizeof *ids);
        ids[q0 + len] = sep;
        for (int k = used; k < T; k++) ids[k] = pad;
        for (int k = 0; k < T; k++) {
            tt[k] = k >= q0 && k < used ? 1 : 0;
            am[k] = k < used;
            ob[k] = oe[k] = -1;
        }
        memcpy(ob + q0, t->ctx_begin + c0 + s, (size_t)len * sizeof *ob);
        memcpy(oe + q0, t->ctx_end + c0 + s, (size_t)len * sizeof *oe);
        f->example[r] = i;
        label_window(e, t, s, len, q0, T, f->version_2_with_negative, &f->start_positions[r], &f->end_positions[r]);
    }
}

int features_from_tokens(const squad_data *d, features_tokens *t, const tokenizer *tok, const feature_opts *o,
                         int nthreads, features *out)
{
    memset(out, 0, sizeof *out);
    int rc = features_check_opts(o);
    if (rc) return rc;
    if (t->n != d->n || t->ncontexts != d->ncontexts)
        return err_set(ERR_INPUT, "features: tokens are for %d questions / %d contexts, data has %d / %d", t->n,
                       t->ncontexts, d->n, d->ncontexts);
    int T = o->max_seq_length;
    window_plan *plan = malloc((d->n ? (size_t)d->n : 1) * sizeof *plan);
    int64_t *first = malloc(((size_t)d->n + 1) * sizeof *first);
    if (!plan || !first) {
        free(plan);
        free(first);
        return err_set(ERR_RUNTIME, "features: out of memory");
    }
    int64_t nf = 0;
    for (int i = 0; i < d->n && !rc; i++) {
        rc = plan_example(&d->ex[i], t, i, o, &plan[i]);
        first[i] = nf;
        nf += plan[i].nwin;
    }
    first[d->n] = nf;
    if (!rc && nf > INT32_MAX / 2) rc = err_set(ERR_INPUT, "features: %lld windows is too many", (long long)nf);
    size_t cells = mul_size((size_t)nf, (size_t)T), rows = nf ? (size_t)nf : 1;
    if (!rc) {
        out->n = (int)nf;
        out->T = T;
        out->version_2_with_negative = o->version_2_with_negative != 0;
        out->input_ids = malloc(mul_size(cells, 4));
        out->token_type_ids = malloc(mul_size(cells, 4));
        out->attention_mask = malloc(mul_size(cells, 4));
        out->offset_begin = malloc(mul_size(cells, 4));
        out->offset_end = malloc(mul_size(cells, 4));
        out->start_positions = malloc(rows * 4);
        out->end_positions = malloc(rows * 4);
        out->example = malloc(rows * 4);
        if ((cells && (!out->input_ids || !out->token_type_ids || !out->attention_mask || !out->offset_begin ||
                       !out->offset_end)) ||
            !out->start_positions || !out->end_positions || !out->example)
            rc = err_set(ERR_RUNTIME, "features: out of memory for %lld windows of %d tokens", (long long)nf, T);
    }
    if (!rc) {
        int nt = resolve_threads(nthreads);
#pragma omp parallel for num_threads(nt) schedule(dynamic, 32)
        for (int i = 0; i < d->n; i++) fill_example(d, t, tok, i, &plan[i], first[i], T, out);
        out->tokens = t;
    } else {
        features_free(out);
    }
    free(plan);
    free(first);
    return rc;
}

int features_build(const squad_data *d, const tokenizer *tok, const feature_opts *o, int nthreads, features *out)
{
    memset(out, 0, sizeof *out);
    int rc = features_check_opts(o);
    if (rc) return rc;
    features_tokens *t;
    if ((rc = features_tokens_build(d, tok, nthreads, &t))) return rc;
    rc = features_from_tokens(d, t, tok, o, nthreads, out);
    if (rc) features_tokens_free(t);
    return rc;
}
