/* The small helpers of src/core: sbuf's JSON strings in both styles
 * (SB_JSON_PYTHON byte for byte as Python's json.dumps(s,
 * ensure_ascii=False)), splitmix64 against its published outputs, the
 * clocks, and shape_str. */
#include "testutil.h"

#include "core/clock.h"
#include "core/rng.h"
#include "core/sbuf.h"
#include "core/shape.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void check_json(const char *what, const char *s, sb_json_style style, const char *want)
{
    sbuf b = {0};
    sb_puts(&b, "x=");
    sb_json_string(&b, s, style);
    CHECK(b.n == strlen(b.p) && !strncmp(b.p, "x=", 2) && !strcmp(b.p + 2, want), "%s: got %s, want %s", what,
          b.p + 2, want);
    sb_free(&b);
}

static void test_json_string(void)
{
    /* every control byte but NUL, the two escaped characters, and bytes that
     * stay as they are: '/', DEL and UTF-8 up to four bytes */
    char all[64];
    size_t n = 0;
    for (int c = 1; c < 0x20; c++) all[n++] = (char)c;
    strcpy(all + n, "\"\\/ \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\x7f");
    /* json.dumps(s, ensure_ascii=False) of the same text */
    check_json("python, all", all, SB_JSON_PYTHON,
               "\"\\u0001\\u0002\\u0003\\u0004\\u0005\\u0006\\u0007\\b\\t\\n\\u000b\\f\\r\\u000e\\u000f\\u0010"
               "\\u0011\\u0012\\u0013\\u0014\\u0015\\u0016\\u0017\\u0018\\u0019\\u001a\\u001b\\u001c\\u001d\\u001e"
               "\\u001f\\\"\\\\/ \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\x7f\"");
    check_json("unicode, all", all, SB_JSON_UNICODE,
               "\"\\u0001\\u0002\\u0003\\u0004\\u0005\\u0006\\u0007\\u0008\\u0009\\u000a\\u000b\\u000c\\u000d"
               "\\u000e\\u000f\\u0010\\u0011\\u0012\\u0013\\u0014\\u0015\\u0016\\u0017\\u0018\\u0019\\u001a"
               "\\u001b\\u001c\\u001d\\u001e\\u001f\\\"\\\\/ \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\x7f\"");
    check_json("empty", "", SB_JSON_PYTHON, "\"\"");
    check_json("plain text", "Denver Broncos", SB_JSON_PYTHON, "\"Denver Broncos\"");
    check_json("escape first and last", "\"a\n", SB_JSON_PYTHON, "\"\\\"a\\n\"");
    /* longer than the buffer's first allocation, escapes spread through it */
    char big[10001];
    for (int i = 0; i < 10000; i++) big[i] = i % 100 == 99 ? '\t' : (char)('a' + i % 26);
    big[10000] = 0;
    sbuf b = {0};
    sb_json_string(&b, big, SB_JSON_PYTHON);
    size_t tabs = 0, letters = 0;
    for (size_t i = 0; i < b.n; i++) {
        tabs += b.p[i] == '\\' && b.p[i + 1] == 't';
        letters += b.p[i] >= 'a' && b.p[i] <= 'z' && !(i > 0 && b.p[i - 1] == '\\');
    }
    CHECK(b.n == 10000 + 100 + 2 && tabs == 100 && letters == 9900, "10000 bytes: length %zu, %zu tabs, %zu letters",
          b.n, tabs, letters);
    sb_free(&b);
}

static void test_splitmix64(void)
{
    /* the outputs of the reference splitmix64.c from seeds 0 and 42 */
    static const uint64_t from0[] = {0xe220a8397b1dcdafull, 0x6e789e6aa1b965f4ull, 0x06c45d188009454full};
    static const uint64_t from42[] = {0xbdd732262feb6e95ull, 0x28efe333b266f103ull};
    uint64_t s = 0;
    for (int i = 0; i < 3; i++) {
        uint64_t v = splitmix64_next(&s);
        CHECK(v == from0[i], "seed 0, draw %d: %016llx, want %016llx", i, (unsigned long long)v,
              (unsigned long long)from0[i]);
    }
    s = 42;
    for (int i = 0; i < 2; i++) {
        uint64_t v = splitmix64_next(&s);
        CHECK(v == from42[i], "seed 42, draw %d: %016llx, want %016llx", i, (unsigned long long)v,
              (unsigned long long)from42[i]);
    }
}

static void test_clocks(void)
{
    double t0 = clock_now_s(), c0 = clock_cpu_s(), u = clock_unix_s();
    time_t wall = time(NULL);
    CHECK(fabs(u - (double)wall) < 2, "clock_unix_s %.3f, time() %lld", u, (long long)wall);
    CHECK(isfinite(c0) && c0 >= 0, "clock_cpu_s %g", c0);
    volatile double x = 0;
    while (clock_now_s() - t0 < 0.05) x += 1;
    usleep(20000);
    double t1 = clock_now_s(), c1 = clock_cpu_s();
    CHECK(t1 - t0 >= 0.07 && t1 - t0 < 5, "monotonic: %.3f s for a 0.05 s spin and a 0.02 s sleep", t1 - t0);
    /* the sleep takes no CPU time; the spin takes some (less on a busy machine) */
    CHECK(c1 > c0 && c1 - c0 <= t1 - t0 + 0.01, "CPU time %.3f s of %.3f s", c1 - c0, t1 - t0);
}

static void test_shape_str(void)
{
    char buf[32];
    int64_t sh[3] = {2, 384, 30522};
    CHECK(!strcmp(shape_str(buf, sizeof buf, 3, sh), "[2, 384, 30522]"), "3 dims: %s", buf);
    CHECK(!strcmp(shape_str(buf, sizeof buf, 0, sh), "[]"), "0 dims: %s", buf);
    CHECK(!strcmp(shape_str(buf, 8, 3, sh), "[2, 384"), "cut to 8 bytes: %s", buf);
}

int main(void)
{
    test_json_string();
    test_splitmix64();
    test_clocks();
    test_shape_str();
    return tu_done();
}
