/* core/apikey.h on outside bytes: the input, split at its first two NUL
 * bytes, is a key (as --api-key gives it), an Authorization header's value
 * (absent when there is no NUL) and a ?key= value (absent when there is no
 * second NUL). apikey_set accepts
 * exactly what apikey_valid does (else ERR_INPUT with a message); the key
 * matches itself and nothing one byte off; a request is let in exactly
 * when its token, read by the plain rule below, is the key; the loopback
 * test takes any bytes as an address. */
#include "fuzz.h"
#include "core/apikey.h"

#include <strings.h>

FUZZ_QUIET_INIT

/* The plain rule: "Bearer", then spaces or tabs, the token, spaces or tabs. */
static int plain_token(const char *h, char *tok, size_t cap)
{
    if (strncasecmp(h, "bearer", 6) || (h[6] != ' ' && h[6] != '\t')) return 0;
    const char *t = h + 7;
    while (*t == ' ' || *t == '\t') t++;
    size_t n = strlen(t);
    while (n && (t[n - 1] == ' ' || t[n - 1] == '\t')) n--;
    if (!n || n >= cap) return n > 0 ? (tok[0] = 0, 2) : 0; /* 2: a token too long to be any key */
    memcpy(tok, t, n);
    tok[n] = 0;
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size + 1);
    memcpy(buf, data, size);
    buf[size] = 0;
    const char *key = buf, *auth = NULL, *query = NULL;
    size_t kn = strlen(key);
    if (kn < size) {
        auth = buf + kn + 1;
        size_t an = strlen(auth);
        if (kn + 1 + an < size) query = auth + an + 1;
    }
    char why[160];
    int bad = apikey_valid(key, kn, why, sizeof why);
    apikey k;
    int rc = apikey_set(&k, key, "fuzz --api-key");
    FUZZ_ASSERT(rc == 0 || rc == ERR_INPUT, "apikey_set returned %d", rc);
    if (rc) fuzz_check_rc(rc, "apikey_set");
    FUZZ_ASSERT((rc == 0) == (kn == 0 || !bad), "apikey_set %d but apikey_valid %d (%zu bytes)", rc, bad, kn);
    if (rc == 0 && kn) {
        FUZZ_ASSERT(apikey_match(&k, key, kn), "the key does not match itself");
        char other[APIKEY_MAX + 1];
        memcpy(other, key, kn + 1);
        other[kn - 1] ^= 1;
        FUZZ_ASSERT(!apikey_match(&k, other, kn), "a key one byte off matches");
        FUZZ_ASSERT(!apikey_match(&k, key, kn - 1), "a prefix matches");
    }
    apikey_verdict v = apikey_check(&k, auth, query);
    FUZZ_ASSERT(v >= APIKEY_OK && v <= APIKEY_WRONG, "verdict %d", (int)v);
    if (k.n == 0) {
        FUZZ_ASSERT(v == APIKEY_OK, "no key but verdict %d", (int)v);
    } else {
        static char tok[APIKEY_MAX + 2];
        apikey_verdict want;
        if (auth) {
            int t = plain_token(auth, tok, sizeof tok);
            want = !t ? APIKEY_MALFORMED : t == 1 && !strcmp(tok, key) ? APIKEY_OK : APIKEY_WRONG;
        } else if (query) {
            want = !strcmp(query, key) ? APIKEY_OK : APIKEY_WRONG;
        } else {
            want = APIKEY_MISSING;
        }
        FUZZ_ASSERT(v == want, "verdict %d, the plain rule says %d", (int)v, (int)want);
        FUZZ_ASSERT((v == APIKEY_OK) == (apikey_verdict_msg(v) == NULL), "message of verdict %d", (int)v);
    }
    (void)apikey_is_loopback(key);
    apikey_wipe(&k);
    free(buf);
    return 0;
}
