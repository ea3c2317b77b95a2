/* core/apikey.h: which keys are refused, the match (equal, one byte off at
 * either end, a prefix, one byte longer, the longest key, a guess over the
 * limit), the verdicts of Authorization headers and ?key=, the loopback
 * rule of the open-bind warning, and that the match takes the same time
 * whether a guess is wrong at its first byte, at its last or in its length
 * (the fastest of interleaved batches, the least disturbed by a busy
 * machine; a loose bound: it catches an early exit, not a cache effect). */
#include "core/apikey.h"
#include "core/clock.h"
#include "core/err.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

static void check_valid(void)
{
    char why[160];
    static const struct {
        const char *s;
        int bad;
        const char *why;
    } cases[] = {
        {"s3cret-Key_1", 0, ""},        {"a", 0, ""},
        {"~!#$%&'()*+,./:;<=>?@[]^{|}", 0, ""},
        {"", 1, "empty"},               {"two words", 1, "byte 3 is a space"},
        {"line\nbreak", 1, "byte 4 is a line break"}, {"tab\tkey", 1, "byte 3 is a tab"},
        {"caf\xc3\xa9", 1, "byte 3 is not ASCII"},    {"del\x7f", 1, "byte 3 is a control byte"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        why[0] = 0;
        int bad = apikey_valid(cases[i].s, strlen(cases[i].s), why, sizeof why);
        printf("valid(\"%s\") -> %d %s\n", cases[i].s, bad, why);
        CHECK(bad == cases[i].bad && strstr(why, cases[i].why), "case %zu: %d '%s'", i, bad, why);
    }
    char big[APIKEY_MAX + 2];
    memset(big, 'k', sizeof big);
    CHECK(apikey_valid(big, APIKEY_MAX, why, sizeof why) == 0, "%d bytes", APIKEY_MAX);
    CHECK(apikey_valid(big, APIKEY_MAX + 1, why, sizeof why) == 1 && strstr(why, "over the limit"), "%s", why);
    apikey k;
    int rc = apikey_set(&k, "bad key", "test --api-key");
    printf("apikey_set(\"bad key\") -> %d: %s\n", rc, err_msg());
    CHECK(rc == ERR_INPUT && strstr(err_msg(), "test --api-key: not a usable API key: byte 3 is a space"), "set");
    err_clear();
    CHECK(apikey_set(&k, NULL, "x") == 0 && k.n == 0, "no key");
    CHECK(apikey_check(&k, NULL, NULL) == APIKEY_OK, "no key lets everything in");
}

static void check_match(void)
{
    apikey k;
    const char *key = "s3cret-Key_1";
    CHECK(apikey_set(&k, key, "x") == 0 && k.n == strlen(key), "set");
    static const struct {
        const char *given;
        int want;
    } cases[] = {
        {"s3cret-Key_1", 1},  {"s3cret-Key_2", 0}, {"t3cret-Key_1", 0}, {"s3cret-Key_", 0},
        {"s3cret-Key_1x", 0}, {"", 0},             {"S3CRET-KEY_1", 0}, {"s3cret-Key_1 ", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int got = apikey_match(&k, cases[i].given, strlen(cases[i].given));
        printf("match(\"%s\") -> %d (want %d)\n", cases[i].given, got, cases[i].want);
        CHECK(got == cases[i].want, "case %zu", i);
    }
    /* the longest key, and guesses past the limit */
    char big[APIKEY_MAX + 8];
    memset(big, 'k', sizeof big);
    big[APIKEY_MAX] = 0;
    CHECK(apikey_set(&k, big, "x") == 0, "longest key");
    CHECK(apikey_match(&k, big, APIKEY_MAX) == 1, "longest key matches");
    CHECK(apikey_match(&k, big, APIKEY_MAX + 1) == 0, "one byte more");
    CHECK(apikey_match(&k, big, APIKEY_MAX + 8) == 0, "eight bytes more");
    CHECK(apikey_match(&k, big, APIKEY_MAX - 1) == 0, "one byte less");
    apikey_wipe(&k);
    CHECK(k.n == 0 && k.b[0] == 0 && k.b[APIKEY_MAX - 1] == 0, "wiped");
}

static void check_verdicts(void)
{
    apikey k;
    CHECK(apikey_set(&k, "s3cret-Key_1", "x") == 0, "set");
    static const struct {
        const char *auth, *query;
        apikey_verdict want;
    } cases[] = {
        {"Bearer s3cret-Key_1", NULL, APIKEY_OK},
        {"bearer s3cret-Key_1", NULL, APIKEY_OK},
        {"BEARER   s3cret-Key_1  ", NULL, APIKEY_OK},
        {NULL, "s3cret-Key_1", APIKEY_OK},
        {NULL, NULL, APIKEY_MISSING},
        {"Bearer wrong", NULL, APIKEY_WRONG},
        {"Bearer s3cret-Key_2", NULL, APIKEY_WRONG},
        {"Bearer s3cret-Key_", NULL, APIKEY_WRONG},
        {NULL, "s3cret-Key_12", APIKEY_WRONG},
        {NULL, "", APIKEY_WRONG},
        {"Basic czNjcmV0", NULL, APIKEY_MALFORMED},
        {"Bearer", NULL, APIKEY_MALFORMED},
        {"Bearer    ", NULL, APIKEY_MALFORMED},
        {"Bearers3cret-Key_1", NULL, APIKEY_MALFORMED},
        {"s3cret-Key_1", NULL, APIKEY_MALFORMED},
        /* the header wins over ?key= */
        {"Bearer wrong", "s3cret-Key_1", APIKEY_WRONG},
    };
    static const char *names[] = {"ok", "missing", "malformed", "wrong"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        apikey_verdict v = apikey_check(&k, cases[i].auth, cases[i].query);
        printf("Authorization %s%s%s, ?key=%s -> %s\n", cases[i].auth ? "'" : "", cases[i].auth ? cases[i].auth : "none",
               cases[i].auth ? "'" : "", cases[i].query ? cases[i].query : "none", names[v]);
        CHECK(v == cases[i].want, "case %zu: %s, want %s", i, names[v], names[cases[i].want]);
        CHECK((v == APIKEY_OK) == (apikey_verdict_msg(v) == NULL), "message of case %zu", i);
    }
    CHECK(strstr(apikey_challenge(APIKEY_MISSING), "Bearer realm=") == apikey_challenge(APIKEY_MISSING), "challenge");
    CHECK(strstr(apikey_challenge(APIKEY_WRONG), "error=\"invalid_token\""), "invalid_token");
}

static void check_loopback(void)
{
    static const struct {
        const char *addr;
        int want;
    } cases[] = {
        {"127.0.0.1", 1}, {"127.1.2.3", 1}, {"::1", 1},      {"::ffff:127.0.0.1", 1}, {"0.0.0.0", 0},
        {"::", 0},        {"10.0.0.1", 0},  {"128.0.0.1", 0}, {"::2", 0},             {"::ffff:10.0.0.1", 0},
        {"fe80::1", 0},   {"nonsense", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int got = apikey_is_loopback(cases[i].addr);
        printf("loopback(%s) -> %d\n", cases[i].addr, got);
        CHECK(got == cases[i].want, "%s", cases[i].addr);
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Interleaved batches of guesses at the longest key: wrong at the first
 * byte, at the last, one byte short, and the key itself. Each round runs
 * the four back to back. Two estimates of slowest / fastest: the median
 * over rounds of a round's ratio, and the ratio of the four medians; a
 * busy machine only inflates either, an early exit makes both large, so
 * the smaller is checked. */
static void check_timing(void)
{
    enum { KINDS = 4, ROUNDS = 61 };
    const int CALLS = tu_sanitized() ? 100 : 2000; /* a batch of about 1 ms either way */
    static char key[APIKEY_MAX + 1], guess[KINDS][APIKEY_MAX + 1];
    for (int i = 0; i < APIKEY_MAX; i++) key[i] = (char)('a' + i % 26);
    apikey k;
    CHECK(apikey_set(&k, key, "x") == 0, "set");
    size_t len[KINDS];
    for (int g = 0; g < KINDS; g++) {
        memcpy(guess[g], key, sizeof key);
        len[g] = APIKEY_MAX;
    }
    guess[0][0] = 'X';
    guess[1][APIKEY_MAX - 1] = 'X';
    len[2]--;
    static const char *names[] = {"first byte wrong", "last byte wrong", "one byte short", "right key"};
    static double t[KINDS][ROUNDS], ratio[ROUNDS];
    volatile int sink = 0;
    for (int r = 0; r < ROUNDS; r++) {
        double lo = 1e9, hi = 0;
        for (int g = 0; g < KINDS; g++) {
            double a = clock_now_s();
            for (int c = 0; c < CALLS; c++) sink += apikey_match(&k, guess[g], len[g]);
            t[g][r] = clock_now_s() - a;
            lo = t[g][r] < lo ? t[g][r] : lo;
            hi = t[g][r] > hi ? t[g][r] : hi;
        }
        ratio[r] = hi / lo;
    }
    CHECK(sink == ROUNDS * CALLS, "only the right key matched: %d", sink);
    double lo = 1e9, hi = 0;
    for (int g = 0; g < KINDS; g++) {
        qsort(t[g], ROUNDS, sizeof t[g][0], cmp_double);
        double med = t[g][ROUNDS / 2];
        lo = med < lo ? med : lo;
        hi = med > hi ? med : hi;
        printf("match, 512-byte key, %s: median %.1f ns a call\n", names[g], med / CALLS * 1e9);
    }
    qsort(ratio, ROUNDS, sizeof ratio[0], cmp_double);
    double r = ratio[ROUNDS / 2] < hi / lo ? ratio[ROUNDS / 2] : hi / lo;
    printf("slowest / fastest: %.2f a round (median over %d rounds), %.2f of the medians (an exit at the first "
           "differing byte makes both several times)\n", ratio[ROUNDS / 2], ROUNDS, hi / lo);
    CHECK(r < 1.5, "the match's time depends on the guess: %.2f", r);
}

int main(void)
{
    log_quiet(1);
    check_valid();
    check_match();
    check_verdicts();
    check_loopback();
    check_timing();
    return tu_done();
}
