/* The packing rule (model/pack.h): window lengths, the cut of a list of
 * windows into pieces, the sort by length, a piece's rows and cu_seqlens,
 * and the logits put back at their padded rows. Training, prediction and
 * serve run what these decide, so a change of the rule shows here first. */
#include "model/pack.h"
#include "testutil.h"

#include <math.h>
#include <string.h>

enum { T = 8, W = 6 };

/* six padded windows of lengths 5, 8, 1, 3, 0 (no tokens), 5 */
static const int want_len[W] = {5, 8, 1, 3, 0, 5};
static int32_t ids[W * T], types[W * T], mask[W * T];

static void make_windows(void)
{
    for (int w = 0; w < W; w++)
        for (int t = 0; t < T; t++) {
            ids[w * T + t] = t < want_len[w] ? 100 * w + t : 0;
            types[w * T + t] = t < want_len[w] && t >= 2 ? 1 : 0;
            mask[w * T + t] = t < want_len[w];
        }
}

static void check_lengths(void)
{
    int len[W];
    pack_lengths(mask, T, NULL, W, len);
    CHECK(!memcmp(len, want_len, sizeof len), "lengths %d %d %d %d %d %d", len[0], len[1], len[2], len[3], len[4],
          len[5]);
    const int32_t rows[3] = {5, 2, 1};
    pack_lengths(mask, T, rows, 3, len);
    CHECK(len[0] == 5 && len[1] == 1 && len[2] == 8, "lengths of rows 5 2 1: %d %d %d", len[0], len[1], len[2]);
    /* only the leading ones count: a 1 after a 0 is not a token */
    const int32_t holed[T] = {1, 1, 0, 1, 1, 0, 0, 0};
    CHECK(pack_window_len(holed, T) == 2, "a mask with a hole: %d", pack_window_len(holed, T));
}

static void check_cut(void)
{
    const int len[] = {5, 8, 1, 3, 6, 2};
    int64_t tok;
    /* windows while they fit: 5 (+8 > 10), then 8 + 1 (+3 > 10), 3 + 6 (+2 > 10), 2 */
    int want[][2] = {{1, 5}, {2, 9}, {2, 9}, {1, 2}};
    for (int i = 0, p = 0, n; i < 6; i += n, p++) {
        n = pack_cut(len + i, 6 - i, 0, 10, &tok);
        CHECK(p < 4 && n == want[p][0] && tok == want[p][1], "piece %d: %d windows, %lld tokens", p, n, (long long)tok);
    }
    /* the first window always goes in, even past the budget */
    CHECK(pack_cut(len + 1, 5, 0, 4, &tok) == 1 && tok == 8, "oversized first window: %lld tokens", (long long)tok);
    /* the window limit */
    CHECK(pack_cut(len, 6, 2, 1000, &tok) == 2 && tok == 13, "two windows at most: %lld tokens", (long long)tok);
    CHECK(pack_cut(len, 6, 0, 1000, NULL) == 6, "everything in one piece");
    CHECK(pack_cut(len, 0, 0, 1000, &tok) == 0 && tok == 0, "no windows, no piece");
}

static void check_sort(void)
{
    const int len[] = {5, 8, 1, 3, 0, 5, 1};
    int32_t order[7];
    CHECK(pack_sort_by_length(len, 7, T, order) == 0, "sort");
    const int32_t want[7] = {4, 2, 6, 3, 0, 5, 1}; /* shortest first, ties in their order */
    CHECK(!memcmp(order, want, sizeof want), "order %d %d %d %d %d %d %d", order[0], order[1], order[2], order[3],
          order[4], order[5], order[6]);
}

static void check_piece(void)
{
    int32_t pid[W * T], pty[W * T], cu[W + 1];
    /* rows 3, 0, 2 of the table: 3 + 5 + 1 tokens */
    const int32_t rows[3] = {3, 0, 2};
    int N = pack_piece(ids, types, mask, T, rows, NULL, 3, pid, pty, cu);
    CHECK(N == 9 && cu[0] == 0 && cu[1] == 3 && cu[2] == 8 && cu[3] == 9, "cu %d %d %d %d", cu[0], cu[1], cu[2], cu[3]);
    CHECK(pid[0] == 300 && pid[2] == 302 && pid[3] == 0 && pid[7] == 4 && pid[8] == 200, "ids");
    CHECK(pty[0] == 0 && pty[2] == 1 && pty[3] == 0 && pty[5] == 1, "types");
    /* given lengths are taken as they are (a prediction's sorted lengths) */
    const int len[2] = {2, 1};
    N = pack_piece(ids, types, NULL, T, NULL, len, 2, pid, pty, cu);
    CHECK(N == 3 && cu[1] == 2 && cu[2] == 3 && pid[1] == 1 && pid[2] == 100, "given lengths: N %d", N);
    /* window by window, from different tables */
    pack_rows p = pack_rows_begin(pid, pty, cu);
    pack_rows_add(&p, ids + 1 * T, types + 1 * T, 8);
    pack_rows_add(&p, ids + 5 * T, types + 5 * T, 5);
    CHECK(p.n == 2 && p.tokens == 13 && cu[1] == 8 && cu[2] == 13 && pid[8] == 500, "rows: %d windows, %d tokens", p.n,
          p.tokens);
}

static void check_unpack(void)
{
    float packed[T] = {1.5f, -2.0f, 0.25f}, row[T];
    pack_unpack_row(packed, 3, T, row);
    int ok = row[0] == 1.5f && row[1] == -2.0f && row[2] == 0.25f;
    for (int t = 3; t < T; t++) ok = ok && isinf(row[t]) && row[t] < 0;
    CHECK(ok, "logits at the real positions, -inf at the padding");
    pack_unpack_row(packed, T, T, row); /* a full window has no padding */
    CHECK(row[0] == 1.5f, "full window");
}

int main(void)
{
    make_windows();
    check_lengths();
    check_cut();
    check_sort();
    check_piece();
    check_unpack();
    return tu_done();
}
