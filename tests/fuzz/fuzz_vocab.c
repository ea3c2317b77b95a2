/* vocab_load on arbitrary bytes: loads or fails with ERR_INPUT; a loaded
 * vocabulary finds every token under its own id, and a tokenizer made from
 * it (cased and uncased) encodes the same bytes as text without going
 * outside the vocabulary. */
#include "fuzz.h"
#include "text/tokenizer.h"

FUZZ_QUIET_INIT

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write("vocab.txt", data, size);
    vocab *v;
    int rc = vocab_load(path, &v);
    fuzz_check_rc(rc, "vocab_load");
    if (rc) {
        FUZZ_ASSERT(v == NULL, "vocab_load failed but returned a vocabulary");
        return 0;
    }
    int n = vocab_size(v);
    FUZZ_ASSERT(n >= 4, "%d tokens, but [PAD], [UNK], [CLS] and [SEP] are required", n);
    for (int i = 0; i < n; i++) {
        const char *t = vocab_token(v, i);
        FUZZ_ASSERT(t != NULL, "token %d", i);
        int id = vocab_find(v, t, strlen(t));
        FUZZ_ASSERT(id == i, "token %d ('%s') found as %d", i, t, id);
    }
    FUZZ_ASSERT(vocab_token(v, -1) == NULL && vocab_token(v, n) == NULL, "out-of-range ids");
    int specials[] = {vocab_pad(v), vocab_unk(v), vocab_cls(v), vocab_sep(v)};
    for (int k = 0; k < 4; k++) FUZZ_ASSERT(specials[k] >= 0 && specials[k] < n, "special %d is %d", k, specials[k]);
    for (int lower = 0; lower < 2; lower++) {
        tokenizer *tok;
        rc = tokenizer_create(&tok, v, lower);
        FUZZ_ASSERT(rc == 0, "tokenizer_create: %s", err_msg());
        token_list l = {0};
        rc = tokenizer_encode(tok, (const char *)data, size, &l);
        FUZZ_ASSERT(rc == 0, "tokenizer_encode: %s", err_msg());
        for (int i = 0; i < l.n; i++) {
            FUZZ_ASSERT(l.ids[i] >= 0 && l.ids[i] < n, "token %d: id %d of %d", i, l.ids[i], n);
            FUZZ_ASSERT(l.begin[i] >= 0 && l.begin[i] <= l.end[i] && (size_t)l.end[i] <= size,
                        "token %d: offsets [%d, %d) in %zu bytes", i, l.begin[i], l.end[i], size);
        }
        token_list_free(&l);
        tokenizer_free(tok);
    }
    vocab_free(v);
    return 0;
}
