/* The loader: per-epoch permutations that are a pure function of (seed,
 * epoch), partial last steps, exact continuation from a saved position, and
 * micro-batch gathering. */
#include "testutil.h"

#include "core/err.h"
#include "data/loader.h"

#include <stdlib.h>
#include <string.h>

static int is_perm(const int32_t *o, int n)
{
    char *seen = calloc((size_t)n, 1);
    int ok = 1;
    for (int i = 0; i < n; i++) {
        if (o[i] < 0 || o[i] >= n || seen[o[i]]) ok = 0;
        else seen[o[i]] = 1;
    }
    free(seen);
    return ok;
}

static void test_orders(void)
{
    enum { N = 1000 };
    int32_t *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b);
    loader_epoch_order(42, 0, 1, a, N);
    loader_epoch_order(42, 0, 1, b, N);
    CHECK(is_perm(a, N), "epoch 0 is not a permutation");
    CHECK(!memcmp(a, b, N * sizeof *a), "same seed and epoch differ");
    int fixed = 0;
    for (int i = 0; i < N; i++) fixed += a[i] == i;
    CHECK(fixed < 20, "%d fixed points: not shuffled", fixed);
    loader_epoch_order(42, 1, 1, b, N);
    CHECK(is_perm(b, N) && memcmp(a, b, N * sizeof *a), "epoch 1 equals epoch 0");
    loader_epoch_order(43, 0, 1, b, N);
    CHECK(memcmp(a, b, N * sizeof *a), "seed 43 equals seed 42");
    loader_epoch_order(42, 0, 0, b, N);
    int ident = 1;
    for (int i = 0; i < N; i++) ident &= b[i] == i;
    CHECK(ident, "--no-shuffle is not the identity");
    /* Position of feature 0 over many epochs: roughly uniform. */
    int first_half = 0;
    for (int e = 0; e < 400; e++) {
        loader_epoch_order(7, e, 1, b, N);
        for (int i = 0; i < N; i++)
            if (b[i] == 0) first_half += i < N / 2;
    }
    CHECK(first_half > 150 && first_half < 250, "feature 0 in the first half %d of 400 times", first_half);
    printf("orders: permutation, %d fixed points of %d, feature 0 in first half %d/400\n", fixed, N, first_half);
    free(a);
    free(b);
}

static void test_steps(void)
{
    loader l, r;
    CHECK(loader_init(&l, 10, 4, 1, 5) == 0, "%s", err_msg());
    CHECK(loader_steps_per_epoch(&l) == 3, "steps per epoch %lld", (long long)loader_steps_per_epoch(&l));
    int32_t idx[4], all[40];
    int count, counts[9], total = 0;
    int64_t ep, eps[9];
    for (int s = 0; s < 9; s++) {
        loader_next(&l, idx, &count, &ep);
        counts[s] = count;
        eps[s] = ep;
        memcpy(all + total, idx, (size_t)count * sizeof *idx);
        total += count;
    }
    CHECK(counts[0] == 4 && counts[1] == 4 && counts[2] == 2 && counts[5] == 2 && counts[8] == 2, "counts %d %d %d", counts[0], counts[1], counts[2]);
    CHECK(eps[0] == 0 && eps[2] == 0 && eps[3] == 1 && eps[8] == 2, "epochs %lld %lld %lld", (long long)eps[2], (long long)eps[3], (long long)eps[8]);
    CHECK(is_perm(all, 10) && is_perm(all + 10, 10) && is_perm(all + 20, 10), "an epoch misses features");
    CHECK(l.epoch == 3 && l.cursor == 0, "position after 9 steps %lld/%lld", (long long)l.epoch, (long long)l.cursor);

    /* Resume at every boundary: the same batches follow. */
    for (int s = 0; s < 9; s++) {
        loader_init(&r, 10, 4, 1, 5);
        int64_t e = s / 3, c = (s % 3) * 4;
        CHECK(loader_seek(&r, e, c) == 0, "%s", err_msg());
        int off = 0;
        for (int k = 0; k < s; k++) off += counts[k];
        int same = 1;
        for (int k = s; k < 9; k++) {
            loader_next(&r, idx, &count, &ep);
            same &= count == counts[k] && ep == eps[k] && !memcmp(idx, all + off, (size_t)count * sizeof *idx);
            off += count;
        }
        CHECK(same, "resume at step %d differs", s);
        loader_free(&r);
    }
    loader_init(&r, 10, 4, 1, 5);
    CHECK(loader_seek(&r, 0, 3) == ERR_INPUT, "cursor 3 accepted");
    CHECK(loader_seek(&r, 0, 12) == ERR_INPUT, "cursor 12 accepted");
    CHECK(loader_seek(&r, -1, 0) == ERR_INPUT, "epoch -1 accepted");
    printf("seek: %s\n", err_msg());
    loader_free(&r);
    loader_free(&l);
    CHECK(loader_init(&l, 0, 4, 1, 5) == ERR_INPUT, "0 features accepted");
    CHECK(loader_init(&l, 4, 0, 1, 5) == ERR_INPUT, "batch 0 accepted");
}

static void test_gather(void)
{
    enum { F = 5, T = 3 };
    int32_t ids[F * T], types[F * T], mask[F * T], st[F], en[F];
    for (int i = 0; i < F * T; i++) {
        ids[i] = 100 + i;
        types[i] = i % 2;
        mask[i] = i % 3 != 2;
    }
    for (int i = 0; i < F; i++) {
        st[i] = i;
        en[i] = i + 10;
    }
    features f = {.n = F, .T = T, .input_ids = ids, .token_type_ids = types, .attention_mask = mask,
                  .start_positions = st, .end_positions = en};
    loader_batch b;
    CHECK(loader_batch_init(&b, 3, T) == 0, "%s", err_msg());
    int32_t idx[2] = {4, 1};
    loader_gather(&b, &f, idx, 2);
    CHECK(b.B == 2 && b.input_ids[0] == 112 && b.input_ids[3] == 103 && b.input_ids[5] == 105, "ids %d %d", b.input_ids[0], b.input_ids[3]);
    CHECK(b.token_type_ids[0] == 0 && b.token_type_ids[1] == 1 && b.attention_mask[0] == 1 && b.attention_mask[2] == 0 && b.attention_mask[5] == 0, "types/mask");
    CHECK(b.start_positions[0] == 4 && b.end_positions[1] == 11, "labels %d %d", b.start_positions[0], b.end_positions[1]);
    loader_batch_free(&b);
}

int main(void)
{
    test_orders();
    test_steps();
    test_gather();
    return tu_done();
}
