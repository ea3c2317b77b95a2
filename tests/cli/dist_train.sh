# Data-parallel training under mpirun, on a tiny model, 50 steps:
#  - 2 ranks against 1 process with the same global batch and micro-batch:
#    the loss of every step within 1e-6 relative, the final weights within
#    1e-5 (max |a-b| / max |b| per tensor; see ZERO_GRAD and WEIGHT_TOL below);
#  - 3 ranks against 1 process the same way (batch 6 = 3 micro-batches of 2);
#  - two 2-rank runs: byte-identical final model and losses;
#  - rank 1 SIGKILLed after step 23: the job ends, rank 0 says why, only
#    complete checkpoints; the same mpirun command again resumes and ends
#    byte-identical to the uninterrupted 2-rank run; resuming that killed
#    run with 1 process says so and ends within WEIGHT_TOL of it;
#  - --dev evaluated by 3 ranks (each its part of the windows): the same
#    eval.csv and predictions.json as 1 process;
#  - bad input: more ranks than --batch, micro-batches per step the ranks do
#    not divide, other arguments on one rank, --supervise under mpirun:
#    exit 2, one line per rank naming the problem, nothing written.
source "$(dirname "$0")/lib/cli.sh"
source "$(dirname "$0")/lib/mpi.sh"
dist_train_setup

losses_close() { # losses_close A B: every step's loss within 1e-6 relative
    cli_n=$((cli_n + 1))
    local out
    out=$(awk -F, 'NR==FNR { a[FNR] = $3; next }
        FNR > 1 { n++; d = $3 - a[FNR]; if (d < 0) d = -d; m = a[FNR] < 0 ? -a[FNR] : a[FNR];
                  r = m > 0 ? d / m : d; if (r > w) w = r }
        END { printf "%d steps, worst relative loss difference %.3g", n, w; exit !(n == 50 && w <= 1e-6) }' \
        "$1/metrics.csv" "$2/metrics.csv")
    local rc=$?
    echo "case $cli_n: losses of $(basename "$2") against $(basename "$1"): $out"
    [ "$rc" -eq 0 ] || cli_bad "losses differ by more than 1e-6 (or not 50 steps)"
}
weights_close() { # weights_close A B
    cli_n=$((cli_n + 1))
    local out
    out=$("$CMP" --compare "$1/final/model.safetensors" "$2/final/model.safetensors" "$WEIGHT_TOL" "$ZERO_GRAD" 2>&1)
    local rc=$?
    echo "case $cli_n: weights of $(basename "$2") against $(basename "$1"): $out"
    [ "$rc" -eq 0 ] || cli_bad "final weights differ by more than $WEIGHT_TOL"
}
identical() { # identical A B: final model and loss column byte for byte
    cli_n=$((cli_n + 1))
    echo "case $cli_n: $(basename "$2") byte-identical to $(basename "$1")?"
    cmp -s "$1/final/model.safetensors" "$2/final/model.safetensors" || cli_bad "final models differ"
    cmp -s <(cut -d, -f3-5 "$1/metrics.csv") <(cut -d, -f3-5 "$2/metrics.csv") || cli_bad "losses/lr/grad norms differ"
}

echo "1 process and 2 ranks, batch 8 = 4 micro-batches of 2"
train1 "$T/one8" --batch 8 || cli_bad "one8 failed: $(tail -3 "$T/one8.log")"
trainN 2 "$T/two8" --batch 8 || cli_bad "two8 failed: $(tail -5 "$T/two8.log")"
grep -q "2 data-parallel ranks" "$T/two8.log" || cli_bad "the start-up report does not name the ranks"
grep -q "^ranks,2$" "$T/two8/info.csv" || cli_bad "info.csv lacks ranks,2"
grep -q "^comm_s," "$T/two8/info.csv" || cli_bad "info.csv lacks comm_s"
grep -q "<th>ranks</th><td>2</td>" "$T/two8/report.html" || cli_bad "report.html does not say 2 ranks"
grep -q "<th>comm_s</th>" "$T/two8/report.html" || cli_bad "report.html lacks the communication time"
grep -q "| 2 ranks, comm " "$T/two8.log" || cli_bad "the progress line does not name the ranks"
losses_close "$T/one8" "$T/two8"
weights_close "$T/one8" "$T/two8"
trainN 2 "$T/two8b" --batch 8 || cli_bad "two8b failed"
identical "$T/two8" "$T/two8b"

echo "1 process and 3 ranks, batch 6 = 3 micro-batches of 2 (46 windows: each epoch's last step has 4, 2 micro-batches, so rank 0 has none and sends its gradient buckets empty)"
train1 "$T/one6" --batch 6 || cli_bad "one6 failed"
trainN 3 "$T/three6" --batch 6 || cli_bad "three6 failed: $(tail -5 "$T/three6.log")"
losses_close "$T/one6" "$T/three6"
weights_close "$T/one6" "$T/three6"

echo "packed (--packing varlen): 1 process and 2 ranks, batch 8 = 4 micro-batches of 2"
train1 "$T/onep" --batch 8 --packing varlen || cli_bad "onep failed: $(tail -3 "$T/onep.log")"
trainN 2 "$T/twop" --batch 8 --packing varlen || cli_bad "twop failed: $(tail -5 "$T/twop.log")"
losses_close "$T/onep" "$T/twop"
weights_close "$T/onep" "$T/twop"

echo "a failure in the step of one rank (rank 1 out of memory at step 5): every rank ends, none waits"
cli_n=$((cli_n + 1))
timeout 120 env OMPI_MCA_btl_vader_single_copy_mechanism=none mpirun --oversubscribe $( [ "$(id -u)" -eq 0 ] && echo --allow-run-as-root) \
    --bind-to none -np 2 $( [ "${BERTC_SANITIZED:-0}" = 1 ] && echo "-x ASAN_OPTIONS=detect_leaks=0") \
    sh -c 'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then export BERTC_DEBUG_OOM=1@5; fi; exec "$@"' sh \
    "$BERTC" train "${COMMON[@]}" --out "$T/oom2" --batch 8 >"$T/oom2.log" 2>&1
rc=$?
echo "case $cli_n: -> exit $rc; $(grep -c "^bertc: .*out of memory with 2 ranks" "$T/oom2.log") ranks said: $(grep -m1 "^bertc: " "$T/oom2.log")"
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || cli_bad "exit $rc (124: the ranks hung)"
# Both ranks print the line before either exits, but mpirun may end the job
# before it has forwarded the second rank's output: one line at least.
grep -q "^bertc: rank 1 of 2: step 5: out of memory with 2 ranks" "$T/oom2.log" || cli_bad "no line naming rank 1: $(tail -5 "$T/oom2.log")"
grep -q "rank 0 of 2: rank 1" "$T/oom2.log" && cli_bad "a rank named twice"
[ -e "$T/oom2/final" ] && cli_bad "a final model after the failure"

echo "rank 1 killed after step 23, then the same command again"
K=$T/kill8
cli_n=$((cli_n + 1))
mpi_run 2 sh -c 'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then export BERTC_DEBUG_KILL=step:23; fi; exec "$@"' sh \
    "$BERTC" train "${COMMON[@]}" --out "$K" --batch 8 >"$K.log" 2>&1
killed_checks $? "$K" "rank 0 of 2: got a signal"
for d in "$K"/checkpoints/step-*; do
    case $d in *.tmp) continue ;; esac
    [ -f "$d/state.json" ] || cli_bad "$d: incomplete checkpoint"
done
cp -r "$K" "$T/kill8_one"
trainN 2 "$K" --batch 8 || cli_bad "the resumed run failed: $(tail -5 "$K.log")"
grep -q "resume    from .*step-00000020" "$K.log" || cli_bad "did not resume from step 20"
identical "$T/two8" "$K"
echo "the killed run resumed with 1 process"
train1 "$T/kill8_one" --batch 8 || cli_bad "resume with 1 process failed: $(tail -3 "$T/kill8_one.log")"
cli_n=$((cli_n + 1))
echo "case $cli_n: $(grep "resuming a run of" "$T/kill8_one.log")"
grep -q "resuming a run of 2 ranks with 1" "$T/kill8_one.log" || cli_bad "the other rank count is not said"
weights_close "$T/two8" "$T/kill8_one"

echo "--dev evaluation split over 3 ranks and gathered, against 1 process (20 steps, batch 6)"
EV=(--dev tests/data/train_small.json --eval-every 10 --max-steps 20 --batch 6)
train1 "$T/ev1" "${EV[@]}" || cli_bad "ev1 failed: $(tail -3 "$T/ev1.log")"
trainN 3 "$T/ev3" "${EV[@]}" || cli_bad "ev3 failed: $(tail -5 "$T/ev3.log")"
evals_equal "$T/ev1" "$T/ev3" "3 ranks"

echo "bad input"
B=("$BERTC" train "${COMMON[@]}" --out "$T/bad")
mpi_bad 3 "3 ranks but --batch 2" -- "${B[@]}" --batch 2
mpi_bad 2 "is 3 per step, which 2 ranks do not divide" -- "${B[@]}" --batch 6
mpi_bad 2 "the arguments of rank 1 differ from rank 0's" -- \
    sh -c 'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then exec "$@" --lr 1e-2; else exec "$@"; fi' sh "${B[@]}" --batch 8
mpi_bad 2 "--supervise: cannot restart one rank" -- "${B[@]}" --batch 8 --supervise 2
finish
