/* API keys: validation, the constant-time match, Bearer headers (apikey.h). */
#include "core/apikey.h"

#include "core/err.h"

#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

int apikey_valid(const char *s, size_t n, char *why, size_t whysz)
{
    if (n == 0) return snprintf(why, whysz, "empty"), 1;
    if (n > APIKEY_MAX) return snprintf(why, whysz, "%zu bytes, over the limit of %d", n, APIKEY_MAX), 1;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x21 || c > 0x7e) {
            snprintf(why, whysz, "byte %zu is %s (a key is visible ASCII: letters, digits, punctuation)", i,
                     c == ' ' ? "a space" : c == '\n' || c == '\r' ? "a line break" : c == '\t' ? "a tab" :
                     c < 0x20 || c == 0x7f ? "a control byte" : "not ASCII");
            return 1;
        }
    }
    return 0;
}

int apikey_set(apikey *k, const char *s, const char *what)
{
    apikey_wipe(k);
    if (!s || !*s) return 0;
    size_t n = strlen(s);
    char why[160];
    if (apikey_valid(s, n, why, sizeof why)) return err_set(ERR_INPUT, "%s: not a usable API key: %s", what, why);
    memcpy(k->b, s, n);
    k->n = n;
    return 0;
}

void apikey_wipe(apikey *k)
{
    volatile unsigned char *p = (volatile unsigned char *)k;
    for (size_t i = 0; i < sizeof *k; i++) p[i] = 0;
}

int apikey_match(const apikey *k, const char *given, size_t n)
{
    /* The guess zero-padded as the key is (its copy takes a time that
     * depends on the client's length only), then every byte of both
     * compared, whatever the lengths. */
    unsigned char g[APIKEY_MAX] = {0};
    memcpy(g, given, n < APIKEY_MAX ? n : APIKEY_MAX);
    unsigned diff = 0;
    for (size_t i = 0; i < APIKEY_MAX; i++) diff |= (unsigned)(k->b[i] ^ g[i]);
    uint64_t dl = (uint64_t)k->n ^ (uint64_t)n;
    diff |= (unsigned)((dl | (0 - dl)) >> 63); /* 1 when the lengths differ, without a branch */
    return k->n > 0 && diff == 0;
}

/* The token of "Bearer TOKEN" (scheme case-insensitive, spaces around the
 * token ignored) into *tok and *len; 0 when h is not of that form. */
static int bearer_token(const char *h, const char **tok, size_t *len)
{
    if (strncasecmp(h, "Bearer", 6) != 0 || (h[6] != ' ' && h[6] != '\t')) return 0;
    const char *t = h + 6;
    while (*t == ' ' || *t == '\t') t++;
    size_t n = strlen(t);
    while (n && (t[n - 1] == ' ' || t[n - 1] == '\t')) n--;
    if (!n) return 0;
    *tok = t;
    *len = n;
    return 1;
}

apikey_verdict apikey_check(const apikey *k, const char *authorization, const char *query_key)
{
    if (k->n == 0) return APIKEY_OK;
    const char *tok;
    size_t n;
    if (authorization) {
        if (!bearer_token(authorization, &tok, &n)) return APIKEY_MALFORMED;
    } else if (query_key) {
        tok = query_key;
        n = strlen(query_key);
    } else {
        return APIKEY_MISSING;
    }
    return apikey_match(k, tok, n) ? APIKEY_OK : APIKEY_WRONG;
}

const char *apikey_verdict_msg(apikey_verdict v)
{
    switch (v) {
    case APIKEY_OK: return NULL;
    case APIKEY_MISSING: return "this server needs an API key: send the header 'Authorization: Bearer KEY' (a browser: open the "
                                  "page as /?key=KEY)";
    case APIKEY_MALFORMED: return "the Authorization header is not 'Bearer KEY'";
    case APIKEY_WRONG: break;
    }
    return "wrong API key";
}

const char *apikey_challenge(apikey_verdict v)
{
    return v == APIKEY_WRONG ? "Bearer realm=\"bertc\", error=\"invalid_token\"" : "Bearer realm=\"bertc\"";
}

int apikey_is_loopback(const char *addr)
{
    unsigned char a[16];
    if (inet_pton(AF_INET, addr, a) == 1) return a[0] == 127;
    if (inet_pton(AF_INET6, addr, a) != 1) return 0;
    static const unsigned char v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (!memcmp(a, v4mapped, 12)) return a[12] == 127;
    for (int i = 0; i < 15; i++)
        if (a[i]) return 0;
    return a[15] == 1;
}
