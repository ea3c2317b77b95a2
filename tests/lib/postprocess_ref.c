#include "postprocess_ref.h"

#include "core/err.h"
#include "core/fileio.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

const void *rd_take(ppref_reader *r, size_t n)
{
    if (r->bad || (size_t)(r->end - r->p) < n) {
        r->bad = 1;
        return NULL;
    }
    const void *q = r->p;
    r->p += n;
    return q;
}

#define RD(name, type)                            \
    type name(ppref_reader *r)                    \
    {                                             \
        type v = 0;                               \
        const void *q = rd_take(r, sizeof v);     \
        if (q) memcpy(&v, q, sizeof v);           \
        return v;                                 \
    }
RD(rd_u16, uint16_t)
RD(rd_u32, uint32_t)
RD(rd_u64, uint64_t)
RD(rd_f32, float)
RD(rd_f64, double)
#undef RD

char *rd_str(ppref_reader *r)
{
    uint16_t n = rd_u16(r);
    const char *q = rd_take(r, n);
    char *s = calloc(1, (size_t)n + 1);
    if (q) memcpy(s, q, n);
    return s;
}

void ppref_set_context(squad_context *c, const char *text)
{
    c->text = strdup(text);
    c->nbytes = strlen(text);
    c->cp_byte = malloc(sizeof(int32_t) * (c->nbytes + 1));
    int n = 0;
    for (size_t i = 0; i < c->nbytes;) {
        int32_t cp;
        utf8proc_ssize_t k =
            utf8proc_iterate((const utf8proc_uint8_t *)c->text + i, (utf8proc_ssize_t)(c->nbytes - i), &cp);
        c->cp_byte[n++] = (int32_t)i;
        i += k > 0 ? (size_t)k : 1;
    }
    c->cp_byte[n] = (int32_t)c->nbytes;
    c->ncp = n;
}

void ppref_hand_init(ppref_hand *h, const char *y_id)
{
    h->c = (squad_context){0};
    ppref_set_context(&h->c, "ab cd é f");
    h->ex[0] = (squad_example){.id = "x", .context = 0};
    h->ex[1] = (squad_example){.id = (char *)y_id, .context = 0};
    h->d = (squad_data){.ex = h->ex, .n = 2, .contexts = &h->c, .ncontexts = 1};
}

json_t *ppref_contexts(const char *squad_path)
{
    json_error_t je;
    json_t *squad = json_load_file(squad_path, 0, &je), *ctx = json_object();
    CHECK(squad != NULL, "load %s: %s", squad_path, je.text);
    size_t a, b, q;
    json_t *art, *para, *qa;
    json_array_foreach(json_object_get(squad, "data"), a, art) {
        json_array_foreach(json_object_get(art, "paragraphs"), b, para) {
            json_array_foreach(json_object_get(para, "qas"), q, qa) {
                json_object_set(ctx, json_string_value(json_object_get(qa, "id")), json_object_get(para, "context"));
            }
        }
    }
    json_decref(squad);
    return ctx;
}

/* One offset of a feature: 0xFFFF stands for -1 (not in the context). */
static int32_t rd_offset(ppref_reader *r)
{
    uint16_t v = rd_u16(r);
    return v == 0xFFFF ? -1 : v;
}

int ppref_read(ppref *ref, const char *name, int squad2, json_t *contexts, const char *source)
{
    memset(ref, 0, sizeof *ref);
    char path[256];
    snprintf(path, sizeof path, "tests/ref/postprocess/%s", name);
    size_t len;
    if (file_read_all(path, &ref->buf, &len) != 0) {
        CHECK(0, "read %s: %s", path, err_msg());
        return -1;
    }
    ppref_reader *r = &ref->r;
    *r = (ppref_reader){(const unsigned char *)ref->buf, (const unsigned char *)ref->buf + len, 0};
    const char *magic = rd_take(r, 8);
    CHECK(magic && memcmp(magic, squad2 ? "BQAPP2v1" : "BQAPP001", 8) == 0, "%s: magic", path);
    ref->ne = (int)rd_u32(r);
    ref->nf = (int)rd_u32(r);
    ref->T = (int)rd_u32(r);
    ref->n_best = (int)rd_u32(r);
    ref->max_len = (int)rd_u32(r);
    if (squad2) {
        ref->nt = (int)rd_u32(r);
        CHECK(ref->nt >= 1 && ref->nt <= 8, "%s: %d thresholds", path, ref->nt);
        if (ref->nt < 1 || ref->nt > 8) ref->nt = 1;
        for (int i = 0; i < ref->nt; i++) ref->thr[i] = rd_f64(r);
    }

    int ne = ref->ne, nf = ref->nf, T = ref->T;
    squad_data *d = &ref->d;
    *d = (squad_data){.n = ne, .ncontexts = ne};
    d->ex = calloc((size_t)ne, sizeof *d->ex);
    d->contexts = calloc((size_t)ne, sizeof *d->contexts);
    int missing = 0;
    for (int i = 0; i < ne; i++) {
        d->ex[i].id = rd_str(r);
        d->ex[i].context = i;
        json_t *ctx = json_object_get(contexts, d->ex[i].id);
        if (!ctx) missing++;
        ppref_set_context(&d->contexts[i], ctx ? json_string_value(ctx) : "");
    }
    CHECK(missing == 0, "%s: %d ids not in %s", path, missing, source);

    features *f = &ref->f;
    *f = (features){.n = nf, .T = T};
    f->example = malloc(sizeof(int32_t) * (size_t)nf);
    f->offset_begin = malloc(sizeof(int32_t) * (size_t)nf * T);
    f->offset_end = malloc(sizeof(int32_t) * (size_t)nf * T);
    ref->start_logits = malloc(sizeof(float) * (size_t)nf * T);
    ref->end_logits = malloc(sizeof(float) * (size_t)nf * T);
    for (int i = 0; i < nf; i++) {
        size_t row = (size_t)i * T;
        f->example[i] = (int32_t)rd_u32(r);
        for (int t = 0; t < T; t++) f->offset_begin[row + t] = rd_offset(r);
        for (int t = 0; t < T; t++) f->offset_end[row + t] = rd_offset(r);
        for (int t = 0; t < T; t++) ref->start_logits[row + t] = rd_f32(r);
        for (int t = 0; t < T; t++) ref->end_logits[row + t] = rd_f32(r);
    }
    CHECK(!r->bad, "%s: truncated features", path);
    return 0;
}

int ppref_predict(const ppref *ref, const postprocess_opts *po, qa_predictions *p)
{
    postprocess_opts o = *po;
    o.n_best = ref->n_best;
    o.max_answer_length = ref->max_len;
    return postprocess_predictions(&ref->d, &ref->f, ref->start_logits, ref->end_logits, &o, p);
}

uint64_t ppref_file_hash(const char *path, size_t *len)
{
    char *s;
    size_t n;
    *len = 0;
    if (file_read_all(path, &s, &n) != 0) return 0;
    uint64_t h = hash64(s, n, HASH64_INIT);
    free(s);
    *len = n;
    return h;
}

void ppref_free(ppref *ref)
{
    for (int i = 0; i < ref->d.n; i++) free(ref->d.ex[i].id);
    for (int i = 0; i < ref->d.ncontexts; i++) {
        free(ref->d.contexts[i].text);
        free(ref->d.contexts[i].cp_byte);
    }
    free(ref->d.ex);
    free(ref->d.contexts);
    free(ref->f.example);
    free(ref->f.offset_begin);
    free(ref->f.offset_end);
    free(ref->start_logits);
    free(ref->end_logits);
    free(ref->buf);
}

void ppref_compare_nbest(ppref_reader *r, const char *name, const qa_predictions *p, int i, ppref_nbest_diff *diff)
{
    int nb = rd_u16(r);
    if (nb != p->n_nbest[i] && diff->nbest_bad++ < 5)
        fprintf(stderr, "%s example %d: %d n-best, want %d\n", name, i, p->n_nbest[i], nb);
    for (int k = 0; k < nb; k++) {
        float score = rd_f32(r), s = rd_f32(r), e = rd_f32(r);
        double prob = rd_f64(r);
        uint64_t h = rd_u64(r);
        if (k >= p->n_nbest[i]) continue;
        const qa_answer *a = &p->nbest[i][k];
        diff->n_answers++;
        diff->n_null_entries += a->text[0] == 0;
        double ds = fabs((double)a->score - score), dp = fabs(a->probability - prob);
        if (ds > diff->max_score) diff->max_score = ds;
        if (dp > diff->max_prob) diff->max_prob = dp;
        uint64_t gh = hash64(a->text, strlen(a->text), HASH64_INIT);
        if ((gh != h || a->start_logit != s || a->end_logit != e) && diff->order_bad++ < 5)
            fprintf(stderr, "%s example %d rank %d: '%s' (%g %g) differs from Python (%g %g)\n", name, i, k, a->text,
                    a->start_logit, a->end_logit, s, e);
    }
}

void ppref_check_written(ppref_writer write, const char *name, const char *what, const squad_data *d,
                         const qa_predictions *p, const char *want)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", tu_tmpdir(), name);
    CHECK(write(path, d, p) == 0, "write");
    char *s;
    size_t n;
    if (file_read_all(path, &s, &n) == 0) {
        CHECK(strcmp(s, want) == 0, "%s:\n%s", what, s);
        free(s);
    }
}
