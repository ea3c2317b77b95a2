/* tokenizer_encode on arbitrary bytes with the real vocabularies. The first
 * byte picks the vocabulary and casing (bert-base-uncased lower-cased or
 * cased, bert-base-chinese lower-cased or not); the rest is the text.
 * Every id is in the vocabulary, offsets are ordered code point ranges
 * inside the text, and encoding twice gives the same tokens. */
#include "fuzz.h"
#include "text/tokenizer.h"

static vocab *vocabs[2];
static tokenizer *toks[4];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    log_quiet(1);
    const char *files[2] = {"vocab/bert-base-uncased-vocab.txt", "vocab/bert-base-chinese-vocab.txt"};
    for (int i = 0; i < 2; i++) {
        if (vocab_load(fuzz_data(files[i]), &vocabs[i])) {
            fprintf(stderr, "fuzz_tokenizer: %s (set BERTC_DATA to the shared data dir)\n", err_msg());
            exit(1);
        }
        for (int lower = 0; lower < 2; lower++)
            if (tokenizer_create(&toks[2 * i + lower], vocabs[i], lower)) {
                fprintf(stderr, "fuzz_tokenizer: %s\n", err_msg());
                exit(1);
            }
    }
    return 0;
}

/* Code points as Python's decode(errors="replace") counts them are at most
 * one per byte. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) return 0;
    const tokenizer *tok = toks[data[0] & 3];
    const char *text = (const char *)data + 1;
    size_t n = size - 1;
    int nv = vocab_size(tokenizer_vocab(tok));
    token_list a = {0}, b = {0};
    int rc = tokenizer_encode(tok, text, n, &a);
    FUZZ_ASSERT(rc == 0, "tokenizer_encode: %s", err_msg());
    for (int i = 0; i < a.n; i++) {
        FUZZ_ASSERT(a.ids[i] >= 0 && a.ids[i] < nv, "token %d: id %d of %d", i, a.ids[i], nv);
        FUZZ_ASSERT(a.begin[i] >= 0 && a.begin[i] <= a.end[i] && (size_t)a.end[i] <= n,
                    "token %d: offsets [%d, %d) in %zu bytes", i, a.begin[i], a.end[i], n);
        if (i > 0)
            FUZZ_ASSERT(a.begin[i] >= a.begin[i - 1] && a.end[i] >= a.end[i - 1],
                        "token %d: offsets [%d, %d) after [%d, %d)", i, a.begin[i], a.end[i], a.begin[i - 1],
                        a.end[i - 1]);
    }
    rc = tokenizer_encode(tok, text, n, &b);
    FUZZ_ASSERT(rc == 0 && a.n == b.n, "second encoding: %d tokens, first %d", b.n, a.n);
    FUZZ_ASSERT(a.n == 0 || (!memcmp(a.ids, b.ids, a.n * sizeof *a.ids) && !memcmp(a.begin, b.begin, a.n * sizeof *a.begin) &&
                             !memcmp(a.end, b.end, a.n * sizeof *a.end)),
                "two encodings of the same text differ");
    token_list_free(&a);
    token_list_free(&b);
    return 0;
}
