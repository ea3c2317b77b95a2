/* API keys of bertc's HTTP servers (`bertc serve --api-key`, the live page
 * of `bertc train --http`): what a key may hold, the comparison, and the
 * "Authorization: Bearer KEY" header.
 *
 * A key is 1 to APIKEY_MAX bytes of visible ASCII (0x21-0x7e: no spaces or
 * control bytes, so that it fits a header line as it is). apikey_match
 * takes the same time whatever the key holds and however much of it a
 * guess gets right, its length included: it always runs over all
 * APIKEY_MAX bytes of the zero-padded key. The time depends only on what
 * the client sent (its length), which the client knows anyway. */
#ifndef BERTC_APIKEY_H
#define BERTC_APIKEY_H

#include <stddef.h>

#define APIKEY_MAX 512

typedef struct {
    unsigned char b[APIKEY_MAX]; /* the key, zero-padded */
    size_t n;                    /* 0: no key (every request is let in) */
} apikey;

/* 0, or where the first byte that cannot be in a key is (n: too long, or
 * empty) as a short reason in why. */
int apikey_valid(const char *s, size_t n, char *why, size_t whysz);
/* k from s (NULL or "": no key). ERR_INPUT, naming `what`, for a key that
 * apikey_valid refuses. */
int apikey_set(apikey *k, const char *s, const char *what);
/* Zeroes k (the key's bytes do not outlive the server). */
void apikey_wipe(apikey *k);
/* 1 when given[0..n) is the key, in constant time (above). */
int apikey_match(const apikey *k, const char *given, size_t n);

typedef enum {
    APIKEY_OK,        /* the key, or no key is set */
    APIKEY_MISSING,   /* no Authorization header (nor ?key=) */
    APIKEY_MALFORMED, /* an Authorization header that is not "Bearer TOKEN" */
    APIKEY_WRONG,     /* a token that is not the key */
} apikey_verdict;

/* A request's credentials: the Authorization header's value (NULL when
 * absent) or, when there is none, query_key (the ?key= of a GET; NULL when
 * absent or not allowed). */
apikey_verdict apikey_check(const apikey *k, const char *authorization, const char *query_key);
/* The message of a 401 for v (APIKEY_OK: NULL). */
const char *apikey_verdict_msg(apikey_verdict v);
/* The WWW-Authenticate header of a 401 for v (RFC 6750: invalid_token for
 * a wrong key). */
const char *apikey_challenge(apikey_verdict v);

/* 1 when addr (an IPv4 or IPv6 literal) is a loopback address:
 * 127.0.0.0/8, ::1, ::ffff:127.0.0.0/104. */
int apikey_is_loopback(const char *addr);

#endif
