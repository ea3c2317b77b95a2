/* vocab.txt: one token per line, id = line number from 0.
 *
 * Lines are split on '\n' only: bert-base-chinese has two tokens that hold U+2028, which a
 * Unicode-aware line reader would split. A '\r' before the '\n' (or at the end of the file) is
 * dropped, as both transformers loaders do for CRLF files (BertTokenizer's load_vocab reads in
 * universal-newline mode; tokenizers' WordPiece::read_file uses Rust's lines() and trim_end()).
 * Unlike tokenizers, other trailing whitespace is kept, so that id 343 of bert-base-chinese is
 * "\u2028" and not "": no text can ever match such a token, since whitespace splits words.
 *
 * Lookup is an open-addressing hash table (linear probing) that holds every token under its full text
 * and, for a "##" token, also under the text after "##" (kind 1), so WordPiece looks up continuation
 * pieces without building "##" strings. Short keys sit in the slot itself (vocab_internal.h). Hashes are FNV-1a 64, byte by byte, so that the tokenizer can hash
 * every prefix of a word in one pass (vocab_hash_byte). */
#include "text/vocab.h"
#include "text/vocab_internal.h"

#include "core/alloc.h"
#include "core/err.h"
#include "core/fileio.h"

#include <stdlib.h>
#include <string.h>

/* Returns the byte offset of the first invalid UTF-8 sequence in s[0..n), or n. */
static size_t utf8_invalid_at(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        uint32_t cp;
        int k = utf8_decode(s + i, n - i, &cp);
        /* a real U+FFFD is EF BF BD; anything else decoding to it is an error */
        if (cp == 0xFFFD && !(k == 3 && s[i] == 0xEF && s[i + 1] == 0xBF && s[i + 2] == 0xBD)) return i;
        i += (size_t)k;
    }
    return n;
}

static uint8_t key_kl(size_t len, int kind)
{
    return (uint8_t)(kind << 7 | (len <= VOCAB_KEY_INLINE ? len : VOCAB_KEY_LONG));
}

static void table_insert(vocab *v, uint64_t h, int id, const char *key, size_t len, int kind)
{
    uint64_t m = vocab_hash_final(h);
    uint32_t i = (uint32_t)m & v->mask;
    while (v->slots[i].id >= 0) i = (i + 1) & v->mask;
    vocab_slot *s = &v->slots[i];
    s->id = id;
    s->tag = (uint8_t)(m >> 56);
    s->kl = key_kl(len, kind);
    if (len <= VOCAB_KEY_INLINE) memcpy(s->key, key, len);
}

int vocab_find_kind(const vocab *v, uint64_t h, const char *s, size_t len, int kind)
{
    uint64_t m = vocab_hash_final(h);
    uint32_t i = (uint32_t)m & v->mask;
    uint8_t tag = (uint8_t)(m >> 56), kl = key_kl(len, kind);
    for (;; i = (i + 1) & v->mask) {
        const vocab_slot *sl = &v->slots[i];
        if (sl->id < 0) return -1;
        if (sl->tag != tag || sl->kl != kl) continue;
        if (len <= VOCAB_KEY_INLINE) {
            size_t k = 0;
            while (k < len && sl->key[k] == s[k]) k++;
            if (k == len) return sl->id;
        } else {
            const char *tok = v->pool + v->off[sl->id] + 2 * kind;
            if (v->len[sl->id] == len + 2 * (size_t)kind && !memcmp(tok, s, len)) return sl->id;
        }
    }
}

static uint64_t hash_bytes(const char *s, size_t n, int kind)
{
    uint64_t h = vocab_hash_seed(kind);
    for (size_t i = 0; i < n; i++) h = vocab_hash_byte(h, (unsigned char)s[i]);
    return h;
}

int vocab_find(const vocab *v, const char *tok, size_t len)
{
    if (!v || (!tok && len)) return -1;
    return vocab_find_kind(v, hash_bytes(tok, len, 0), tok, len, 0);
}

/* Splits data into lines: token i is data[off[i] .. off[i] + len[i]). */
static int parse_lines(vocab *v, const char *path, const char *data, size_t size)
{
    size_t ntok = 0, cap = 1024;
    uint32_t *off = xmalloc(cap * sizeof *off), *len = xmalloc(cap * sizeof *len);
    size_t pos = 0;
    while (pos < size) {
        const char *nl = memchr(data + pos, '\n', size - pos);
        size_t end = nl ? (size_t)(nl - data) : size, l = end - pos;
        if (l && data[pos + l - 1] == '\r') l--;
        if (ntok == cap) {
            cap *= 2;
            off = xrealloc(off, cap * sizeof *off);
            len = xrealloc(len, cap * sizeof *len);
        }
        if (memchr(data + pos, 0, l)) {
            free(off);
            free(len);
            return err_set(ERR_INPUT, "%s:%zu: NUL byte inside a token", path, ntok + 1);
        }
        off[ntok] = (uint32_t)pos;
        len[ntok] = (uint32_t)l;
        ntok++;
        if (ntok >= 0x7FFFFFFF) {
            free(off);
            free(len);
            return err_set(ERR_INPUT, "%s: more than 2^31 tokens", path);
        }
        pos = end + 1;
    }
    v->off = off;
    v->len = len;
    v->n = (int)ntok;
    return 0;
}

int vocab_load(const char *path, vocab **out)
{
    *out = NULL;
    char *data = NULL;
    size_t size = 0;
    int rc = file_read_all(path, &data, &size);
    if (rc) return rc;
    if (size == 0) {
        free(data);
        return err_set(ERR_INPUT, "%s: empty vocabulary file", path);
    }
    if (size >= 0xFFFFFFFFu) {
        free(data);
        return err_set(ERR_INPUT, "%s: vocabulary file over 4 GiB", path);
    }
    size_t bad = utf8_invalid_at((const unsigned char *)data, size);
    if (bad < size) {
        size_t line = 1, col = 1;
        for (size_t i = 0; i < bad; i++) {
            if (data[i] == '\n') { line++; col = 1; }
            else col++;
        }
        err_set(ERR_INPUT, "%s:%zu: invalid UTF-8 (byte 0x%02X at byte %zu of the line)", path, line,
                (unsigned char)data[bad], col);
        free(data);
        return ERR_INPUT;
    }
    vocab *v = xcalloc(1, sizeof *v);
    v->pool = data;
    v->file_hash = hash64(data, size, HASH64_INIT);
    rc = parse_lines(v, path, data, size);
    if (rc) {
        vocab_free(v);
        return rc;
    }
    /* tokens become NUL-terminated strings in place: each is followed by '\r' or '\n' or the
     * terminator file_read_all adds */
    for (int i = 0; i < v->n; i++) data[v->off[i] + v->len[i]] = 0;

    size_t nkeys = (size_t)v->n, nslots = 16;
    for (int i = 0; i < v->n; i++) nkeys += v->len[i] > 2 && data[v->off[i]] == '#' && data[v->off[i] + 1] == '#';
    while (nslots < nkeys + nkeys / 2) nslots *= 2; /* load at most 2/3 */
    v->slots = malloc(nslots * sizeof *v->slots);
    if (!v->slots) {
        vocab_free(v);
        return err_set(ERR_RUNTIME, "%s: out of memory for the token table", path);
    }
    for (size_t i = 0; i < nslots; i++) v->slots[i].id = -1;
    v->mask = (uint32_t)(nslots - 1);
    v->pad = v->unk = v->cls = v->sep = v->mask_id = -1;
    for (int i = 0; i < v->n; i++) {
        const char *tok = v->pool + v->off[i];
        size_t l = v->len[i];
        uint64_t h = hash_bytes(tok, l, 0);
        int prev = vocab_find_kind(v, h, tok, l, 0);
        if (prev >= 0) {
            err_set(ERR_INPUT, "%s:%d: duplicate token '%.*s' (also on line %d)", path, i + 1, (int)(l > 80 ? 80 : l),
                    tok, prev + 1);
            vocab_free(v);
            return ERR_INPUT;
        }
        table_insert(v, h, i, tok, l, 0);
        if ((int)l > v->max_len[0]) v->max_len[0] = (int)l;
        if (l > 2 && tok[0] == '#' && tok[1] == '#') {
            table_insert(v, hash_bytes(tok + 2, l - 2, 1), i, tok + 2, l - 2, 1);
            if ((int)l - 2 > v->max_len[1]) v->max_len[1] = (int)l - 2;
        }
        if (!strcmp(tok, "[PAD]")) v->pad = i;
        else if (!strcmp(tok, "[UNK]")) v->unk = i;
        else if (!strcmp(tok, "[CLS]")) v->cls = i;
        else if (!strcmp(tok, "[SEP]")) v->sep = i;
        else if (!strcmp(tok, "[MASK]")) v->mask_id = i;
    }
    const char *missing = v->pad < 0 ? "[PAD]" : v->unk < 0 ? "[UNK]" : v->cls < 0 ? "[CLS]" : v->sep < 0 ? "[SEP]" : NULL;
    if (missing) {
        err_set(ERR_INPUT, "%s: no %s token (a BERT vocab.txt has [PAD], [UNK], [CLS] and [SEP], one per line)", path,
                missing);
        vocab_free(v);
        return ERR_INPUT;
    }
    *out = v;
    return 0;
}

void vocab_free(vocab *v)
{
    if (!v) return;
    free(v->pool);
    free(v->off);
    free(v->len);
    free(v->slots);
    free(v);
}

int vocab_size(const vocab *v) { return v ? v->n : 0; }
const char *vocab_token(const vocab *v, int id) { return v && id >= 0 && id < v->n ? v->pool + v->off[id] : NULL; }
int vocab_pad(const vocab *v) { return v->pad; }
int vocab_unk(const vocab *v) { return v->unk; }
int vocab_cls(const vocab *v) { return v->cls; }
int vocab_sep(const vocab *v) { return v->sep; }
int vocab_mask(const vocab *v) { return v->mask_id; }
uint64_t vocab_hash(const vocab *v) { return v->file_hash; }
