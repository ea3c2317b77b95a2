/* The pipeline's 1F1B schedule and split (train/pipeline.h), as pure
 * functions: for S = 1..6 stages and M = 1..12 micro-batches every stage
 * runs each micro-batch's forward once and backward once, the backwards in
 * micro-batch order, forwards in order, at most min(S - s, M) micro-batches
 * in flight, a micro-batch's set free when it starts, and after the warm-up
 * forwards and backwards alternate; the schedule never deadlocks, and with
 * every op taking the same time the bubble (idle / step time) is
 * (S-1)/(M+S-1). The default split is even; bad splits are refused. */
#include "core/err.h"
#include "train/pipeline.h"
#include "testutil.h"

#include <math.h>
#include <string.h>

static void check_stage(int S, int s, int M)
{
    int fwd = 0, bwd = 0, bad_order = 0, bad_set = 0, max_flight = 0, alternate_bad = 0;
    int sets = pipe_sets(S, s, M);
    int owner[64];
    for (int k = 0; k < 64; k++) owner[k] = -1;
    int warm = S - s - 1 < M ? S - s - 1 : M;
    for (int i = 0; i < 2 * M; i++) {
        pipe_op op = pipe_op_at(S, s, M, i);
        if (op.kind == PIPE_FORWARD) {
            bad_order += op.micro != fwd;
            fwd++;
            /* the set must be free: no micro-batch holds it */
            bad_set += op.set < 0 || op.set >= sets || owner[op.set] >= 0;
            if (op.set >= 0 && op.set < sets) owner[op.set] = op.micro;
        } else {
            bad_order += op.micro != bwd || op.micro >= fwd;
            bwd++;
            bad_set += op.set < 0 || op.set >= sets || owner[op.set] != op.micro;
            if (op.set >= 0 && op.set < sets) owner[op.set] = -1;
        }
        if (fwd - bwd > max_flight) max_flight = fwd - bwd;
        /* steady state: after the warm-up, F and B alternate while forwards remain */
        if (i >= warm && i < warm + 2 * (M - warm))
            alternate_bad += op.kind != ((i - warm) % 2 ? PIPE_BACKWARD : PIPE_FORWARD);
    }
    CHECK(fwd == M && bwd == M, "S %d stage %d M %d: %d forwards, %d backwards", S, s, M, fwd, bwd);
    CHECK(bad_order == 0, "S %d stage %d M %d: %d ops out of order", S, s, M, bad_order);
    CHECK(bad_set == 0, "S %d stage %d M %d: %d ops on a busy or wrong set", S, s, M, bad_set);
    CHECK(max_flight <= sets && sets == (S - s < M ? S - s : M), "S %d stage %d M %d: %d in flight, %d sets", S, s, M,
          max_flight, sets);
    CHECK(alternate_bad == 0, "S %d stage %d M %d: the steady state does not alternate", S, s, M);
}

static void print_schedule(int S, int M)
{
    printf("S %d, M %d:\n", S, M);
    for (int s = 0; s < S; s++) {
        printf("  stage %d (%d sets):", s, pipe_sets(S, s, M));
        for (int i = 0; i < 2 * M; i++) {
            pipe_op op = pipe_op_at(S, s, M, i);
            printf(" %c%d", op.kind == PIPE_FORWARD ? 'F' : 'B', op.micro);
        }
        printf("\n");
    }
}

static void check_bubble(void)
{
    int worst_S = 0, worst_M = 0;
    double worst = 0;
    for (int S = 1; S <= 6; S++)
        for (int M = 1; M <= 12; M++) {
            for (int s = 0; s < S; s++) check_stage(S, s, M);
            double span, idle[PIPE_MAX_STAGES];
            int rc = pipe_simulate(S, M, 1.0, 1.0, &span, idle);
            CHECK(rc == 0, "S %d M %d: %s", S, M, err_msg());
            if (rc) continue;
            double want = (double)(S - 1) / (M + S - 1);
            for (int s = 0; s < S; s++) {
                double d = fabs(idle[s] / span - want);
                if (d > worst) worst = d, worst_S = S, worst_M = M;
            }
        }
    printf("bubble of S = 1..6 stages, M = 1..12 micro-batches, forward = backward: largest difference from "
           "(S-1)/(M+S-1) %.3g (S %d, M %d)\n", worst, worst_S, worst_M);
    CHECK(worst < 1e-12, "the bubble is not (S-1)/(M+S-1)");
    double span, idle[4];
    CHECK(pipe_simulate(4, 8, 1.0, 2.0, &span, idle) == 0, "%s", err_msg());
    printf("S 4, M 8, backward twice the forward: step %.0f, idle %.0f per stage, bubble %.3f (3/11 = %.3f)\n", span,
           idle[0], idle[0] / span, 3.0 / 11);
    CHECK(fabs(span - 11 * 3.0) < 1e-9, "S 4 M 8 with tb = 2 tf: step %g, want 33", span);
}

static void check_split(void)
{
    int sp[PIPE_MAX_STAGES + 1];
    pipe_split_even(12, 5, sp);
    printf("12 layers in 5 stages: %d,%d,%d,%d,%d,%d\n", sp[0], sp[1], sp[2], sp[3], sp[4], sp[5]);
    CHECK(sp[0] == 0 && sp[1] == 2 && sp[2] == 4 && sp[3] == 7 && sp[4] == 9 && sp[5] == 12, "even split of 12 in 5");
    CHECK(pipe_split_check(sp, 5, 12, "--pipeline-split") == 0, "%s", err_msg());
    for (int L = 1; L <= 24; L++)
        for (int S = 1; S <= L; S++) {
            pipe_split_even(L, S, sp);
            int mn = L, mx = 0;
            for (int s = 0; s < S; s++) {
                int n = sp[s + 1] - sp[s];
                if (n < mn) mn = n;
                if (n > mx) mx = n;
            }
            CHECK(pipe_split_check(sp, S, L, "x") == 0 && mx - mn <= 1, "even split of %d in %d: sizes %d..%d", L, S,
                  mn, mx);
        }
    int n = 0;
    CHECK(pipe_split_parse("0,5,12", sp, 8, &n, "--pipeline-split") == 0 && n == 3 && sp[1] == 5, "parse 0,5,12");
    struct {
        const char *s;
        int S, L;
        const char *msg;
    } bad[] = {
        {"0,0,12", 2, 12, "stage 0 would hold no layer"},
        {"0,7,5,12", 3, 12, "stage 1 would hold no layer"},
        {"1,6,12", 2, 12, "from 0 to the model's 12 layers"},
        {"0,6,11", 2, 12, "from 0 to the model's 12 layers"},
        {"0,1,2,3", 3, 2, "3 stages but the model has 2 encoder layers"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = pipe_split_parse(bad[i].s, sp, 8, &n, "--pipeline-split");
        if (!rc) rc = pipe_split_check(sp, n - 1, bad[i].L, "--pipeline-split");
        printf("split %s of %d layers: %s\n", bad[i].s, bad[i].L, err_msg());
        CHECK(rc == ERR_INPUT && strstr(err_msg(), bad[i].msg), "split %s: '%s'", bad[i].s, err_msg());
    }
    const char *unparsable[] = {"", "0,,12", "0,a", "0,5,", "-1,5", "0;5"};
    for (size_t i = 0; i < sizeof unparsable / sizeof unparsable[0]; i++) {
        int rc = pipe_split_parse(unparsable[i], sp, 8, &n, "--pipeline-split");
        CHECK(rc == ERR_INPUT && strstr(err_msg(), "expected layer boundaries"), "'%s' refused: %s", unparsable[i],
              err_msg());
    }
    CHECK(pipe_split_parse("0,1,2,3,4,5,6,7,8", sp, 8, &n, "--pipeline-split") == ERR_INPUT, "too many boundaries");
    err_clear();
}

int main(void)
{
    print_schedule(4, 6);
    print_schedule(2, 1);
    check_bubble();
    check_split();
    return tu_done();
}
