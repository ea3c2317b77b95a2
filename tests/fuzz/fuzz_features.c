/* features_cache_load on arbitrary bytes, for a fixed small data set (three
 * paragraphs, embedded below) and the bert-base-uncased vocabulary, with
 * max_seq_length 64 and doc_stride 16.
 *
 * The cache is keyed, sized by its header and checksummed, so random bytes
 * are only ever a miss. To reach the code behind those checks the input is
 * read in one of four ways:
 *   raw        an input that starts with the magic "BERTCFT\n" (the seeds
 *              in corpus/features/): the harness overwrites the key (bytes
 *              16..55 of the header: data, vocab and code hashes, casing and
 *              options) with the right one and the trailing CRC-32C with the
 *              right value; the magic, version, counts and arrays stay as
 *              fuzzed.
 *   otherwise byte 0 picks (modulo 3):
 *   0 overlay  the valid cache of the data set with the rest of the input
 *              copied over it at the offset in bytes 1-2 (the header too, so
 *              the key, the counts and the stale checks are reached), the
 *              size kept and the CRC made right;
 *   1 tokens   a cache built from the input: per question and per context a
 *              token count, ids and character spans drawn from the input
 *              bytes, offsets consistent, the header and CRC right. Its
 *              windows are then built as from a real tokenisation, so the
 *              windowing code (features_from_tokens) sees token layouts the
 *              tokenizer never makes: questions too long for T, empty or
 *              overlapping spans, contexts of one token or hundreds. When
 *              every id is in the vocabulary and every span inside its
 *              context the cache must not be a miss.
 *   2 raw      as raw above, without the magic test.
 * What a hit returns must be usable: ids in the vocabulary, labels and
 * example indices in range, offsets inside their context.
 *
 * FUZZ_FEATURES_SEED=FILE writes a valid cache there and exits (that is how
 * tests/fuzz/corpus/features/ was made). */
#include "fuzz.h"
#include "core/crc32c.h"
#include "core/fileio.h"
#include "data/features.h"

static const char squad_json[] =
    "{\"version\": \"1.1\", \"data\": [{\"title\": \"t\", \"paragraphs\": ["
    "{\"context\": \"Super Bowl 50 was an American football game to determine the champion of the National "
    "Football League (NFL) for the 2015 season. The American Football Conference (AFC) champion Denver Broncos "
    "defeated the National Football Conference (NFC) champion Carolina Panthers 24\\u201310 to earn their third "
    "Super Bowl title. The game was played on February 7, 2016, at Levi's Stadium in the San Francisco Bay Area "
    "at Santa Clara, California.\", \"qas\": ["
    "{\"id\": \"q1\", \"question\": \"Which NFL team represented the AFC at Super Bowl 50?\", \"answers\": "
    "[{\"text\": \"Denver Broncos\", \"answer_start\": 177}]},"
    "{\"id\": \"q2\", \"question\": \"Where was the game played?\", \"answers\": "
    "[{\"text\": \"Santa Clara, California\", \"answer_start\": 403}]},"
    "{\"id\": \"q3\", \"question\": \"What is missing?\", \"answers\": [{\"text\": \"not there\", \"answer_start\": 3}]}]},"
    "{\"context\": \"Caf\\u00e9 na\\u00efve r\\u00e9sum\\u00e9: \\u6211\\u7231\\u5317\\u4eac. "
    "Stra\\u00dfe \\u0130stanbul \\ufb01le.\", \"qas\": ["
    "{\"id\": \"q4\", \"question\": \"  what city?\", \"answers\": [{\"text\": \"\\u5317\\u4eac\", \"answer_start\": 22}]}]},"
    "{\"context\": \"short\", \"qas\": [{\"id\": \"q5\", \"question\": \"x\", \"answers\": []}]}"
    "]}]}";

static squad_data data;
static vocab *voc;
static tokenizer *tok;
static const feature_opts opts = {64, 16, 0};
static unsigned char key[40]; /* header bytes 16..55 of a valid cache */
static unsigned char *ref;    /* the valid cache of the data set */
static size_t ref_len;
#define HEADER_BYTES 80         /* sizeof(cache_header) in features_cache.c */

static void die(const char *what)
{
    fprintf(stderr, "fuzz_features: %s: %s\n", what, err_msg());
    exit(1);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    log_quiet(1);
    char path[512];
    snprintf(path, sizeof path, "%s", fuzz_write("data.json", squad_json, sizeof squad_json - 1));
    if (squad_load(path, &data)) die("squad_load");
    if (vocab_load(fuzz_data("vocab/bert-base-uncased-vocab.txt"), &voc)) die("vocab_load (set BERTC_DATA)");
    if (tokenizer_create(&tok, voc, 1)) die("tokenizer_create");
    features f;
    if (features_build(&data, tok, &opts, 1, &f)) die("features_build");
    const char *seed = getenv("FUZZ_FEATURES_SEED");
    snprintf(path, sizeof path, "%s", seed && *seed ? seed : fuzz_path("ref.cache"));
    if (features_cache_save(path, &data, tok, &opts, &f)) die("features_cache_save");
    features_free(&f);
    char *buf;
    size_t len;
    if (file_read_all(path, &buf, &len) || len < 56 + 4) die("reading the cache back");
    memcpy(key, buf + 16, sizeof key);
    ref = (unsigned char *)buf;
    ref_len = len;
    if (seed && *seed) {
        fprintf(stderr, "fuzz_features: wrote %s (%zu bytes)\n", seed, len);
        exit(0);
    }
    return 0;
}

/* Reads the input as a byte stream; zeros once it is used up. */
typedef struct {
    const uint8_t *p;
    size_t n, at;
} stream;
static unsigned next_byte(stream *s) { return s->at < s->n ? s->p[s->at++] : 0; }
static unsigned next_u16(stream *s) { return next_byte(s) | next_byte(s) << 8; }

/* Mode 1: a cache from token counts, ids and spans drawn from the input.
 * *strict: every id is in the vocabulary and every span in its context. */
static unsigned char *build_tokens_cache(stream *in, size_t *size, int *strict)
{
    int nv = vocab_size(voc);
    int64_t nct = 0, nqt = 0;
    int qn[64], cn[64];
    /* counts first: questions 0..95 tokens (T is 64), contexts 0..255 */
    for (int i = 0; i < data.n; i++) nqt += qn[i] = (int)(next_byte(in) % 96);
    for (int c = 0; c < data.ncontexts; c++) nct += cn[c] = (int)next_byte(in);
    *size = HEADER_BYTES + 8 * (size_t)(data.ncontexts + 1) + 12 * (size_t)nct + 8 * (size_t)(data.n + 1) +
            4 * (size_t)nqt + 4;
    unsigned char *buf = calloc(1, *size);
    FUZZ_ASSERT(buf, "calloc");
    memcpy(buf, ref, HEADER_BYTES);
    memcpy(buf + 64, &nct, 8);
    memcpy(buf + 72, &nqt, 8);
    unsigned char *p = buf + HEADER_BYTES;
    int64_t off = 0;
    memcpy(p, &off, 8), p += 8;
    for (int c = 0; c < data.ncontexts; c++) off += cn[c], memcpy(p, &off, 8), p += 8;
    int32_t *ids = (int32_t *)p, *begin = ids + nct, *end = begin + nct;
    *strict = 1;
    int64_t k = 0;
    for (int c = 0; c < data.ncontexts; c++) {
        int ncp = data.contexts[c].ncp, at = 0;
        for (int j = 0; j < cn[c]; j++, k++) {
            unsigned r = next_u16(in);
            int32_t id = (int32_t)(r % (unsigned)nv), b, e;
            unsigned step = next_byte(in);
            if ((step & 0xe0) == 0xe0) { /* now and then a span anywhere, in or out of range */
                b = (int32_t)(next_byte(in) % (unsigned)(ncp + 3)) - 1;
                e = b + (int32_t)(step & 7) - 1;
            } else { /* mostly in order: skip 0..3 characters, 0..7 long */
                b = at + (int32_t)(step & 3);
                e = b + (int32_t)((step >> 2) & 7);
                if (e > ncp) e = ncp;
                if (b > e) b = e;
                at = e;
            }
            if ((r >> 15) && (step & 0x10)) id = nv + (int32_t)(step & 1) - 2 * (int32_t)(step & 2); /* nv, nv+1, -2.. */
            ids[k] = id;
            begin[k] = b;
            end[k] = e;
            if (id < 0 || id >= nv || b < 0 || b > e || e > ncp) *strict = 0;
        }
    }
    p = (unsigned char *)(end + nct);
    off = 0;
    memcpy(p, &off, 8), p += 8;
    for (int i = 0; i < data.n; i++) off += qn[i], memcpy(p, &off, 8), p += 8;
    int32_t *q = (int32_t *)p;
    for (int64_t j = 0; j < nqt; j++) q[j] = (int32_t)(next_u16(in) % (unsigned)nv);
    uint32_t crc = crc32c(buf, *size - 4);
    memcpy(buf + *size - 4, &crc, 4);
    return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t size)
{
    unsigned char *buf;
    int strict = 0;
    int raw = size >= 8 && !memcmp(in, "BERTCFT\n", 8);
    int mode = raw ? 2 : size ? in[0] % 3 : 2;
    stream st = {in + (raw ? 0 : 1), size - (raw || !size ? 0 : 1), 0};
    if (mode == 0) { /* overlay on the valid cache */
        buf = malloc(ref_len);
        FUZZ_ASSERT(buf, "malloc");
        memcpy(buf, ref, ref_len);
        size_t at = next_u16(&st) % (ref_len - 4), n = st.n - st.at;
        if (n > ref_len - 4 - at) n = ref_len - 4 - at;
        memcpy(buf + at, st.p + st.at, n);
        uint32_t crc = crc32c(buf, ref_len - 4);
        memcpy(buf + ref_len - 4, &crc, 4);
        size = ref_len;
    } else if (mode == 1) {
        buf = build_tokens_cache(&st, &size, &strict);
    } else { /* raw, key and CRC made right */
        size = st.n;
        buf = malloc(size + 1);
        FUZZ_ASSERT(buf, "malloc");
        if (size) memcpy(buf, st.p, size);
        if (size >= 56 + 4) {
            memcpy(buf + 16, key, sizeof key);
            uint32_t crc = crc32c(buf, size - 4);
            memcpy(buf + size - 4, &crc, 4);
        }
    }
    char path[512];
    snprintf(path, sizeof path, "%s", fuzz_write("features.cache", buf, size));
    free(buf);
    features f;
    int rc = features_cache_load(path, &data, tok, &opts, &f);
    FUZZ_ASSERT(!(strict && rc == 1), "a consistent cache was a miss: %s", err_msg());
    if (rc == 1) return 0; /* a miss: fine, whatever the bytes */
    fuzz_check_rc(rc, "features_cache_load");
    if (rc) return 0;
    int nv = vocab_size(voc), T = f.T;
    FUZZ_ASSERT(T == opts.max_seq_length && f.n >= 0, "T %d n %d", T, f.n);
    for (int i = 0; i < f.n; i++) {
        int e = f.example[i];
        FUZZ_ASSERT(e >= 0 && e < data.n, "window %d: example %d", i, e);
        FUZZ_ASSERT(f.start_positions[i] >= 0 && f.start_positions[i] < T && f.end_positions[i] >= 0 &&
                        f.end_positions[i] < T,
                    "window %d: labels %d %d", i, f.start_positions[i], f.end_positions[i]);
        int ncp = data.contexts[data.ex[e].context].ncp;
        for (int k = 0; k < T; k++) {
            size_t c = (size_t)i * T + k;
            FUZZ_ASSERT(f.input_ids[c] >= 0 && f.input_ids[c] < nv, "window %d token %d: id %d", i, k, f.input_ids[c]);
            FUZZ_ASSERT(f.offset_begin[c] >= -1 && f.offset_begin[c] <= ncp && f.offset_end[c] >= -1 &&
                            f.offset_end[c] <= ncp,
                        "window %d token %d: offsets %d %d of %d", i, k, f.offset_begin[c], f.offset_end[c], ncp);
        }
    }
    features_free(&f);
    return 0;
}
