/* The features cache (features.h): the tokenisation of a data set, keyed by
 * everything that decides it, in one file with a CRC-32C.
 *
 * Layout (native little-endian; another byte order reads as stale):
 *   header (cache_header below)
 *   int64 ctx_off[ncontexts + 1]; int32 ctx_ids[nct], ctx_begin[nct], ctx_end[nct]
 *   int64 q_off[n + 1]; int32 q_ids[nqt]
 *   uint32 CRC-32C of all the bytes before it
 * A file is trusted only when the magic, version, key, sizes, CRC and every
 * offset and id check out; anything else is a miss that names the reason. */
#include "data/features_impl.h"
#include "core/crc32c.h"
#include "core/err.h"
#include "core/fileio.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CACHE_MAGIC "BERTCFT\n"
/* Bump when the tokeniser's output or this layout changes. */
#define CACHE_VERSION 1u
#define CACHE_ENDIAN 0x01020304u

/* The arrays after the header, in file order, with their sizes in bytes
 * (t the features, h the header): X(array, bytes) for each. */
#define CACHE_ARRAYS(X)                                                                                                \
    X(t->ctx_off, 8 * ((size_t)h.ncontexts + 1));                                                                      \
    X(t->ctx_ids, 4 * (size_t)h.nct);                                                                                  \
    X(t->ctx_begin, 4 * (size_t)h.nct);                                                                                \
    X(t->ctx_end, 4 * (size_t)h.nct);                                                                                  \
    X(t->q_off, 8 * ((size_t)h.n + 1));                                                                                \
    X(t->q_ids, 4 * (size_t)h.nqt);

typedef struct {
    char magic[8];
    uint32_t version, endian;
    uint64_t data_hash, vocab_hash, code_hash;
    int32_t lower_case, max_seq_length, doc_stride, max_query_length;
    int32_t n, ncontexts;
    int64_t nct, nqt; /* context and question tokens */
} cache_header;

static uint64_t code_hash(void)
{
    return hash64(BERTC_VERSION, strlen(BERTC_VERSION), HASH64_INIT);
}

static void header_fill(cache_header *h, const squad_data *d, const tokenizer *tok, const feature_opts *o)
{
    memset(h, 0, sizeof *h);
    memcpy(h->magic, CACHE_MAGIC, 8);
    h->version = CACHE_VERSION;
    h->endian = CACHE_ENDIAN;
    h->data_hash = d->hash;
    h->vocab_hash = vocab_hash(tokenizer_vocab(tok));
    h->code_hash = code_hash();
    h->lower_case = tokenizer_lower_case(tok);
    h->max_seq_length = o->max_seq_length;
    h->doc_stride = o->doc_stride;
    h->max_query_length = o->max_query_length;
    h->n = d->n;
    h->ncontexts = d->ncontexts;
}

/* Bytes of the file for these counts, or 0 when it would overflow. */
static size_t cache_size(int64_t ncontexts, int64_t n, int64_t nct, int64_t nqt)
{
    if (ncontexts < 0 || n < 0 || nct < 0 || nqt < 0 || nct > INT64_MAX / 16 || nqt > INT64_MAX / 16 ||
        ncontexts > INT32_MAX || n > INT32_MAX)
        return 0;
    uint64_t s = sizeof(cache_header) + 8 * (uint64_t)(ncontexts + 1) + 12 * (uint64_t)nct + 8 * (uint64_t)(n + 1) +
                 4 * (uint64_t)nqt + 4;
    return s > SIZE_MAX ? 0 : (size_t)s;
}

int features_cache_save(const char *path, const squad_data *d, const tokenizer *tok, const feature_opts *o,
                        const features *f)
{
    const features_tokens *t = f->tokens;
    if (!t) return err_set(ERR_INPUT, "%s: features_cache_save: the features hold no tokens", path);
    if (t->n != d->n || t->ncontexts != d->ncontexts)
        return err_set(ERR_INPUT, "%s: features_cache_save: the features are for other data", path);
    cache_header h;
    header_fill(&h, d, tok, o);
    h.nct = t->ctx_off[t->ncontexts];
    h.nqt = t->q_off[t->n];
    size_t size = cache_size(h.ncontexts, h.n, h.nct, h.nqt);
    char *buf = size ? malloc(size) : NULL;
    if (!buf) return err_set(ERR_RUNTIME, "%s: out of memory for a %zu-byte cache", path, size);
    char *p = buf;
#define PUT(src, bytes) (memcpy(p, (src), (bytes)), p += (bytes))
    PUT(&h, sizeof h);
    CACHE_ARRAYS(PUT)
#undef PUT
    uint32_t crc = crc32c(buf, (size_t)(p - buf));
    memcpy(p, &crc, 4);
    int rc = file_write_atomic(path, buf, size);
    free(buf);
    return rc;
}

static int offsets_ok(const int64_t *off, int n, int64_t total)
{
    if (off[0] != 0 || off[n] != total) return 0;
    for (int i = 0; i < n; i++)
        if (off[i + 1] < off[i]) return 0;
    return 1;
}

/* Every value the windows code will index with: ids in the vocabulary,
 * offsets within their context and ordered. */
static const char *tokens_check(const features_tokens *t, const squad_data *d, int nvocab, int64_t nct, int64_t nqt)
{
    if (!offsets_ok(t->ctx_off, t->ncontexts, nct)) return "damaged context offsets";
    if (!offsets_ok(t->q_off, t->n, nqt)) return "damaged question offsets";
    for (int64_t k = 0; k < nqt; k++)
        if (t->q_ids[k] < 0 || t->q_ids[k] >= nvocab) return "question token id outside the vocabulary";
    for (int c = 0; c < t->ncontexts; c++) {
        int ncp = d->contexts[c].ncp;
        for (int64_t k = t->ctx_off[c]; k < t->ctx_off[c + 1]; k++) {
            if (t->ctx_ids[k] < 0 || t->ctx_ids[k] >= nvocab) return "context token id outside the vocabulary";
            if (t->ctx_begin[k] < 0 || t->ctx_begin[k] > t->ctx_end[k] || t->ctx_end[k] > ncp)
                return "context token offsets outside the context";
        }
    }
    return NULL;
}

/* A miss is not an error, but its reason stays readable in err_msg() (with
 * err_code() 0) for callers and tests. It is not logged here:
 * features_load_or_build logs it once the rebuild worked, so a failing
 * command prints its error line alone. */
static int cache_miss(const char *path, const char *why)
{
    char reason[256];
    snprintf(reason, sizeof reason, "%s", why);
    err_set(ERR_OK, "features cache %s: %s", path, reason);
    return 1;
}

int features_cache_load(const char *path, const squad_data *d, const tokenizer *tok, const feature_opts *o,
                        features *out)
{
    memset(out, 0, sizeof *out);
    if (!path_exists(path)) return cache_miss(path, "not found");
    char *buf;
    size_t len;
    if (file_read_all(path, &buf, &len)) return cache_miss(path, err_msg());
    cache_header h, want;
    header_fill(&want, d, tok, o);
    const char *why = NULL;
    char size_why[128];
    size_t size = 0;
    if (len < sizeof h) why = "truncated (shorter than its header)";
    if (!why) {
        memcpy(&h, buf, sizeof h);
        if (memcmp(h.magic, CACHE_MAGIC, 8) != 0) why = "not a features cache (bad magic)";
        else if (h.version != CACHE_VERSION) why = "written by another version of the cache format";
        else if (h.endian != CACHE_ENDIAN) why = "written on a machine of another byte order";
        else if ((size = cache_size(h.ncontexts, h.n, h.nct, h.nqt)) != len) {
            snprintf(size_why, sizeof size_why, "truncated or damaged (%zu bytes, its header says %zu)", len, size);
            why = size_why;
        }
    }
    if (!why) {
        uint32_t crc;
        memcpy(&crc, buf + len - 4, 4);
        if (crc != crc32c(buf, len - 4)) why = "damaged (CRC mismatch)";
    }
    /* The key is read only from a file that is whole, so a damaged one is
     * not reported as stale. */
    if (!why) {
        if (h.data_hash != want.data_hash || h.n != want.n || h.ncontexts != want.ncontexts)
            why = "stale (made from other data)";
        else if (h.vocab_hash != want.vocab_hash || h.lower_case != want.lower_case)
            why = "stale (made with another vocabulary or casing)";
        else if (h.code_hash != want.code_hash) why = "stale (made by another bertc version)";
        else if (h.max_seq_length != want.max_seq_length || h.doc_stride != want.doc_stride ||
                 h.max_query_length != want.max_query_length)
            why = "stale (made with other feature options)";
    }
    if (why) {
        free(buf);
        return cache_miss(path, why);
    }
    features_tokens *t = calloc(1, sizeof *t);
    int rc = 0;
    if (!t) {
        free(buf);
        return err_set(ERR_RUNTIME, "%s: out of memory", path);
    }
    t->ncontexts = h.ncontexts;
    t->n = h.n;
    const char *p = buf + sizeof h;
#define TAKE(dst, bytes)                                          \
    do {                                                          \
        size_t b_ = (bytes);                                      \
        if (!((dst) = malloc(b_ ? b_ : 1))) rc = ERR_RUNTIME;      \
        else memcpy((dst), p, b_);                                \
        p += b_;                                                  \
    } while (0)
    CACHE_ARRAYS(TAKE)
#undef TAKE
    free(buf);
    if (rc) {
        features_tokens_free(t);
        return err_set(ERR_RUNTIME, "%s: out of memory", path);
    }
    if ((why = tokens_check(t, d, vocab_size(tokenizer_vocab(tok)), h.nct, h.nqt))) {
        features_tokens_free(t);
        return cache_miss(path, why);
    }
    rc = features_from_tokens(d, t, tok, o, 0, out);
    if (rc) features_tokens_free(t);
    return rc;
}

int features_load_or_build(const char *path, const squad_data *d, const tokenizer *tok, const feature_opts *o,
                           int nthreads, features *out, int *hit)
{
    if (hit) *hit = 0;
    int rc = features_check_opts(o);
    if (rc) return rc;
    char miss[512] = "";
    if (path) {
        rc = features_cache_load(path, d, tok, o, out);
        if (rc == 0) {
            if (hit) *hit = 1;
            return 0;
        }
        if (rc != 1) return rc;
        snprintf(miss, sizeof miss, "%s", err_msg());
    }
    if ((rc = features_build(d, tok, o, nthreads, out))) return rc;
    if (path) log_info("%s; rebuilt", miss);
    if (path && features_cache_save(path, d, tok, o, out) != 0)
        log_warn("features cache %s not written: %s", path, err_msg());
    return 0;
}
