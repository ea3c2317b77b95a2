/* bertc tokenize: one input line -> one line of token ids (no [CLS]/[SEP]). */
#include "core/args.h"
#include "core/err.h"
#include "text/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char cmd_tokenize_summary[] = "tokenize stdin, one line of token ids per input line";

static char *put_int(char *p, int32_t v)
{
    char tmp[12];
    int n = 0;
    uint32_t u = v < 0 ? (uint32_t)0 - (uint32_t)v : (uint32_t)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0) *p++ = '-';
    while (n) *p++ = tmp[--n];
    return p;
}

int cmd_tokenize(int argc, char **argv)
{
    const char *vocab_path = NULL;
    int cased = 0, offsets = 0;
    const arg_spec specs[] = {
        {"vocab", ARG_STR, &vocab_path, "FILE", "WordPiece vocab.txt", .required = 1},
        {"cased", ARG_FLAG, &cased, NULL, "keep case and accents (default: lower case and strip accents, as uncased models)",
         .min = 0},
        {"offsets", ARG_FLAG, &offsets, NULL, "print each token as id:begin-end (code point offsets into the line)", .min = 0},
        {0},
    };
    int rc = args_parse("tokenize",
                        "bertc tokenize --vocab FILE [--cased] [--offsets] < text\n\n"
                        "Reads UTF-8 text from stdin; for each line (ended by \\n or \\r\\n) prints one line of\n"
                        "token ids separated by spaces, without [CLS]/[SEP], as BertTokenizerFast would give them.",
                        specs, argc, argv, NULL, NULL);
    if (rc == ARGS_HELP) return 0;
    if (rc) return rc;

    vocab *v = NULL;
    tokenizer *t = NULL;
    if ((rc = vocab_load(vocab_path, &v))) return rc;
    if ((rc = tokenizer_create(&t, v, !cased))) {
        vocab_free(v);
        return rc;
    }
    token_list tl = {0};
    char *line = NULL, *obuf = NULL;
    size_t linecap = 0, ocap = 0;
    ssize_t len;
    static char stdout_buf[1 << 16];
    setvbuf(stdout, stdout_buf, _IOFBF, sizeof stdout_buf);
    while ((len = getline(&line, &linecap, stdin)) > 0) {
        size_t n = (size_t)len;
        if (n && line[n - 1] == '\n') n--;
        if (n && line[n - 1] == '\r') n--;
        token_list_clear(&tl);
        if ((rc = tokenizer_encode(t, line, n, &tl))) break;
        size_t need = (size_t)tl.n * 40 + 2;
        if (need > ocap) {
            char *nb = realloc(obuf, need);
            if (!nb) {
                rc = err_set(ERR_RUNTIME, "tokenize: out of memory for %d tokens", tl.n);
                break;
            }
            obuf = nb;
            ocap = need;
        }
        char *p = obuf;
        for (int i = 0; i < tl.n; i++) {
            if (i) *p++ = ' ';
            p = put_int(p, tl.ids[i]);
            if (offsets) {
                *p++ = ':';
                p = put_int(p, tl.begin[i]);
                *p++ = '-';
                p = put_int(p, tl.end[i]);
            }
        }
        *p++ = '\n';
        if (fwrite(obuf, 1, (size_t)(p - obuf), stdout) != (size_t)(p - obuf)) {
            rc = err_set(ERR_RUNTIME, "tokenize: writing stdout failed");
            break;
        }
    }
    if (!rc && ferror(stdin)) rc = err_set(ERR_RUNTIME, "tokenize: reading stdin failed");
    if (fflush(stdout) != 0 && !rc) rc = err_set(ERR_RUNTIME, "tokenize: writing stdout failed");
    free(line);
    free(obuf);
    token_list_free(&tl);
    tokenizer_free(t);
    vocab_free(v);
    return rc;
}
