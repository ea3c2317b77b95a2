/* vocab.txt loading: the real vocabularies (ids of the special tokens, the U+2028 tokens of
 * bert-base-chinese, every token found under its own id), line endings, the errors for bad files,
 * and tokenizer_load_dir with tokenizer_config.json. */
#include "testutil.h"

#include "core/err.h"
#include "core/fileio.h"
#include "text/tokenizer.h"

#include <stdlib.h>
#include <string.h>

static void real_vocab(const char *rel, int size, int mask)
{
    vocab *v = NULL;
    const char *path = tu_data(rel);
    int rc = vocab_load(path, &v);
    CHECK(rc == 0, "%s: %s", path, err_msg());
    if (rc) return;
    CHECK(vocab_size(v) == size, "%s: %d tokens, want %d", rel, vocab_size(v), size);
    CHECK(vocab_pad(v) == 0 && vocab_unk(v) == 100 && vocab_cls(v) == 101 && vocab_sep(v) == 102 && vocab_mask(v) == mask,
          "%s: special ids %d %d %d %d %d", rel, vocab_pad(v), vocab_unk(v), vocab_cls(v), vocab_sep(v), vocab_mask(v));
    int found = 0;
    for (int i = 0; i < vocab_size(v); i++) {
        const char *t = vocab_token(v, i);
        found += vocab_find(v, t, strlen(t)) == i;
    }
    CHECK(found == vocab_size(v), "%s: %d of %d tokens found under their own id", rel, found, vocab_size(v));
    char *data;
    size_t n;
    if (file_read_all(path, &data, &n) == 0) {
        CHECK(vocab_hash(v) == hash64(data, n, HASH64_INIT), "%s: vocab_hash is not the hash of the file", rel);
        free(data);
    }
    CHECK(vocab_find(v, "no-such-token", 13) == -1 && vocab_token(v, -1) == NULL && vocab_token(v, size) == NULL,
          "%s: absent tokens and ids", rel);
    printf("%-40s %d tokens, %d found by lookup, [MASK] %d\n", rel, vocab_size(v), found, vocab_mask(v));
    vocab_free(v);
}

static void chinese_u2028(void)
{
    vocab *v = NULL;
    if (vocab_load(tu_data("vocab/bert-base-chinese-vocab.txt"), &v)) {
        CHECK(0, "chinese vocab: %s", err_msg());
        return;
    }
    const char *t343 = vocab_token(v, 343), *t13502 = vocab_token(v, 13502);
    CHECK(t343 && !strcmp(t343, "\xe2\x80\xa8"), "token 343 is not U+2028");
    CHECK(t13502 && !strcmp(t13502, "##\xe2\x80\xa8"), "token 13502 is not ##U+2028");
    CHECK(vocab_find(v, "\xe2\x80\xa8", 3) == 343 && vocab_find(v, "##\xe2\x80\xa8", 5) == 13502,
          "U+2028 tokens found at %d and %d", vocab_find(v, "\xe2\x80\xa8", 3), vocab_find(v, "##\xe2\x80\xa8", 5));
    /* the token after each keeps its id: nothing was split at U+2028 */
    CHECK(vocab_find(v, "\xe5\x8d\x83", 3) == 1283, "token 1283 (U+5343) at %d", vocab_find(v, "\xe5\x8d\x83", 3));
    printf("bert-base-chinese: U+2028 tokens at 343 and 13502\n");
    vocab_free(v);
}

static void expect_error(const char *what, const char *name, const char *data, size_t n, const char *needle)
{
    const char *path = tu_write_tmp_bytes(name, data, n);
    vocab *v = NULL;
    err_clear();
    int rc = vocab_load(path, &v);
    tu_expect_input_error(what, rc, path, needle, NULL);
    CHECK(v == NULL, "%s: a vocabulary came back", what);
    vocab_free(v);
}

static void bad_files(void)
{
    expect_error("empty file", "empty.txt", "", 0, "empty");
    expect_error("duplicate token", "dup.txt", "[PAD]\n[UNK]\nhello\n[CLS]\n[SEP]\nhello\n", 36, ":6: duplicate token 'hello' (also on line 3)");
    expect_error("invalid UTF-8", "utf8.txt", "[PAD]\n[UNK]\n[CLS]\nab\xff\n[SEP]\n", 27, ":4: invalid UTF-8");
    expect_error("overlong UTF-8", "overlong.txt", "[PAD]\n\xc0\xaf\n", 9, ":2: invalid UTF-8");
    expect_error("surrogate in UTF-8", "surr.txt", "[PAD]\n[UNK]\n\xed\xa0\x80\n", 16, ":3: invalid UTF-8");
    expect_error("NUL byte", "nul.txt", "[PAD]\n[UNK]\na\0b\n[CLS]\n[SEP]\n", 28, ":3: NUL byte");
    expect_error("missing [PAD]", "nopad.txt", "[UNK]\n[CLS]\n[SEP]\n", 18, "no [PAD]");
    expect_error("missing [UNK]", "nounk.txt", "[PAD]\n[CLS]\n[SEP]\n", 18, "no [UNK]");
    expect_error("missing [CLS]", "nocls.txt", "[PAD]\n[UNK]\n[SEP]\n", 18, "no [CLS]");
    expect_error("missing [SEP]", "nosep.txt", "[PAD]\n[UNK]\n[CLS]\nfoo", 21, "no [SEP]");
    vocab *v = NULL;
    err_clear();
    int rc = vocab_load("/nonexistent/vocab.txt", &v);
    CHECK(rc == ERR_INPUT && strstr(err_msg(), "/nonexistent/vocab.txt"), "missing file: rc %d, '%s'", rc, err_msg());
}

static void line_endings(void)
{
    /* CRLF, no final newline, a blank line (a token, as transformers counts it), a '\r' inside */
    const char data[] = "[PAD]\r\n[UNK]\r\n[CLS]\n[SEP]\n\nfoo\rbar\n##x\nlast";
    vocab *v = NULL;
    int rc = vocab_load(tu_write_tmp_bytes("crlf.txt", data, sizeof data - 1), &v);
    CHECK(rc == 0, "crlf vocab: %s", err_msg());
    if (rc) return;
    CHECK(vocab_size(v) == 8, "crlf vocab: %d tokens, want 8", vocab_size(v));
    CHECK(vocab_pad(v) == 0 && vocab_unk(v) == 1 && vocab_mask(v) == -1, "crlf vocab: [PAD] %d [UNK] %d [MASK] %d",
          vocab_pad(v), vocab_unk(v), vocab_mask(v));
    CHECK(!strcmp(vocab_token(v, 4), "") && !strcmp(vocab_token(v, 5), "foo\rbar") && !strcmp(vocab_token(v, 7), "last"),
          "crlf vocab: tokens 4, 5, 7 are '%s' '%s' '%s'", vocab_token(v, 4), vocab_token(v, 5), vocab_token(v, 7));
    CHECK(vocab_find(v, "##x", 3) == 6 && vocab_find(v, "last", 4) == 7, "crlf vocab: lookups");
    vocab_free(v);
    printf("line endings: CRLF, no final newline, blank line, inner CR: checked\n");
}

static void load_dir(void)
{
    char dir[600], path[700];
    snprintf(dir, sizeof dir, "%s/model", tu_tmpdir());
    mkdir_p(dir);
    vocab *v = NULL;
    tokenizer *t = NULL;
    err_clear();
    int rc = tokenizer_load_dir(dir, &v, &t);
    CHECK(rc == ERR_INPUT && strstr(err_msg(), "vocab.txt"), "no vocab.txt: rc %d '%s'", rc, err_msg());
    printf("%-26s -> %s\n", "model dir without vocab", err_msg());

    snprintf(path, sizeof path, "%s/vocab.txt", dir);
    const char voc[] = "[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n";
    file_write_atomic(path, voc, sizeof voc - 1);
    rc = tokenizer_load_dir(dir, &v, &t);
    CHECK(rc == 0 && tokenizer_lower_case(t) == 1 && vocab_size(tokenizer_vocab(t)) == 5, "no config: rc %d", rc);
    tokenizer_free(t);
    vocab_free(v);

    static const struct {
        const char *json, *needle;
        int rc, lower;
    } cases[] = {
        {"{\"do_lower_case\": false, \"model_max_length\": 512}", NULL, 0, 0},
        {"{\"do_lower_case\": true, \"strip_accents\": null}", NULL, 0, 1},
        {"{\"model_max_length\": 512}", NULL, 0, 1},
        {"{\"do_lower_case\": \"yes\"}", "do_lower_case must be true or false", ERR_INPUT, 0},
        {"{\"do_lower_case\": true,\n \"strip_accents\": false}", "strip_accents false with do_lower_case true", ERR_INPUT, 0},
        {"{\"tokenize_chinese_chars\": false}", "tokenize_chinese_chars false", ERR_INPUT, 0},
        {"{\"do_lower_case\": true,\n  oops}", "tokenizer_config.json:2:", ERR_INPUT, 0},
        {"[1, 2]", "not a JSON object", ERR_INPUT, 0},
    };
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        file_write_atomic(path, cases[i].json, strlen(cases[i].json));
        v = NULL;
        t = NULL;
        err_clear();
        rc = tokenizer_load_dir(dir, &v, &t);
        if (cases[i].rc == 0) {
            CHECK(rc == 0 && t && tokenizer_lower_case(t) == cases[i].lower, "config %zu: rc %d (%s)", i, rc, err_msg());
        } else {
            CHECK(rc == cases[i].rc && !v && !t && strstr(err_msg(), path) && strstr(err_msg(), cases[i].needle),
                  "config %zu: rc %d, message '%s' should name the file and say '%s'", i, rc, err_msg(), cases[i].needle);
            printf("%-26s -> %s\n", "bad tokenizer_config", err_msg());
        }
        tokenizer_free(t);
        vocab_free(v);
    }
}

int main(void)
{
    real_vocab("vocab/bert-base-uncased-vocab.txt", 30522, 103);
    real_vocab("vocab/bert-base-chinese-vocab.txt", 21128, 103);
    chinese_u2028();
    bad_files();
    line_endings();
    load_dir();
    return tu_done();
}
