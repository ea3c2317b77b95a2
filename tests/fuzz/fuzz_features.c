/* features_cache_load on arbitrary bytes, for a fixed small data set (three
 * paragraphs, embedded below) and the bert-base-uncased vocabulary, with
 * max_seq_length 64 and doc_stride 16.
 *
 * The cache is keyed and checksummed, so random bytes are only ever a miss.
 * To reach the code behind those checks the harness overwrites the key
 * (bytes 16..55 of the header: data, vocab and code hashes, casing and
 * options) with the right one and the trailing CRC-32C with the right
 * value; the magic, version, counts and every array stay as fuzzed. What a
 * hit returns must be usable: ids in the vocabulary, labels and example
 * indices in range, offsets inside their context.
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
    free(buf);
    if (seed && *seed) {
        fprintf(stderr, "fuzz_features: wrote %s (%zu bytes)\n", seed, len);
        exit(0);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t size)
{
    unsigned char *buf = malloc(size + 1);
    FUZZ_ASSERT(buf, "malloc");
    if (size) memcpy(buf, in, size);
    if (size >= 56 + 4) {
        memcpy(buf + 16, key, sizeof key);
        uint32_t crc = crc32c(buf, size - 4);
        memcpy(buf + size - 4, &crc, 4);
    }
    char path[512];
    snprintf(path, sizeof path, "%s", fuzz_write("features.cache", buf, size));
    free(buf);
    features f;
    int rc = features_cache_load(path, &data, tok, &opts, &f);
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
