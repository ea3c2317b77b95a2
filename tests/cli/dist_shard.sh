# bertc train --shard-optimizer (ZeRO stage 1) under mpirun, on a tiny
# model, 50 steps (the settings of dist_train.sh):
#  - 2 sharded ranks against 2 unsharded ranks: every step's loss and grad
#    norm within 1e-6 relative, final weights within 1e-6 (the sums of every
#    gradient float are the same; only the norm's sum is taken in another
#    order); against 1 process: losses 1e-6, weights dist_train.sh's 1e-5;
#  - 3 sharded ranks (pieces of unequal length; a rank with no examples in
#    an epoch's last step) against 1 process, the same bounds;
#  - two sharded runs: byte-identical final model and metrics;
#  - the start-up report says what each rank holds; info.csv and
#    state.json record it; the checkpoint's optimizer.safetensors (the Adam
#    moments gathered to rank 0) matches the unsharded run's within 1e-6;
#  - loss scaling with non-finite steps (BERTC_DEBUG_LOSS_SCALE,
#    BERTC_DEBUG_NONFINITE: a NaN in rank 0's piece only): every rank skips
#    the same steps, as the unsharded run does;
#  - --save-every-minutes by rank 0's clock: every rank saves at the same
#    steps (a sharded checkpoint is collective: a disagreement would hang);
#  - rank 1 SIGKILLed after step 23, then the same command: resumes
#    byte-identical to the uninterrupted sharded run; that killed run
#    resumed by 1 process unsharded, and an unsharded 2-rank run killed the
#    same way resumed sharded: each says so, and ends within the bounds;
#  - bad input: --shard-optimizer without ranks (one process, mpirun -np
#    1), with a value: exit 2, one line per rank.
source "$(dirname "$0")/lib/cli.sh"
source "$(dirname "$0")/lib/mpi.sh"
dist_train_setup
MPI_TIMEOUT=300 # every mpirun here ends within 5 minutes (exit 124: the ranks hung)

# close A B COLUMN TOL: metrics.csv column COLUMN of every step within TOL relative
close() {
    cli_n=$((cli_n + 1))
    local out
    out=$(awk -F, -v col="$3" -v tol="$4" 'NR==FNR { a[FNR] = $col; next }
        FNR > 1 { n++; d = $col - a[FNR]; if (d < 0) d = -d; m = a[FNR] < 0 ? -a[FNR] : a[FNR];
                  r = m > 0 ? d / m : d; if (r > w) w = r }
        END { printf "%d steps, worst relative difference %.3g", n, w; exit !(n == 50 && w <= tol) }' \
        "$1/metrics.csv" "$2/metrics.csv")
    local rc=$?
    echo "case $cli_n: metrics.csv column $3 of $(basename "$2") against $(basename "$1"): $out (bound $4)"
    [ "$rc" -eq 0 ] || cli_bad "column $3 differs by more than $4 (or not 50 steps)"
}
weights_close() { # weights_close A B TOL [SKIP]
    cli_n=$((cli_n + 1))
    local out
    out=$("$CMP" --compare "$1/final/model.safetensors" "$2/final/model.safetensors" "$3" ${4:+"$4"} 2>&1)
    local rc=$?
    echo "case $cli_n: weights of $(basename "$2") against $(basename "$1"): $out"
    [ "$rc" -eq 0 ] || cli_bad "final weights differ by more than $3"
}
identical() {
    cli_n=$((cli_n + 1))
    echo "case $cli_n: $(basename "$2") byte-identical to $(basename "$1")?"
    cmp -s "$1/final/model.safetensors" "$2/final/model.safetensors" || cli_bad "final models differ"
    cmp -s <(cut -d, -f3-6 "$1/metrics.csv") <(cut -d, -f3-6 "$2/metrics.csv") || cli_bad "loss/lr/grad norm/scale differ"
}

expect_help train "usage: bertc train" --shard-optimizer
grep -q "ZeRO stage 1" "$cli_tmp/out" || cli_bad "train --help does not explain --shard-optimizer"

echo "2 ranks sharded against 2 ranks and 1 process, batch 8 = 4 micro-batches of 2"
train1 "$T/one8" --batch 8 || cli_bad "one8 failed: $(tail -3 "$T/one8.log")"
trainN 2 "$T/two8" --batch 8 || cli_bad "two8 failed: $(tail -5 "$T/two8.log")"
trainN 2 "$T/sh8" --batch 8 --shard-optimizer || cli_bad "sh8 failed: $(tail -5 "$T/sh8.log")"
close "$T/two8" "$T/sh8" 3 1e-6
close "$T/two8" "$T/sh8" 5 1e-6
weights_close "$T/two8" "$T/sh8" 1e-6
cmp -s "$T/two8/final/model.safetensors" "$T/sh8/final/model.safetensors" &&
    echo "  (byte-identical to the unsharded 2-rank run here)"
close "$T/one8" "$T/sh8" 3 1e-6
weights_close "$T/one8" "$T/sh8" "$WEIGHT_TOL" "$ZERO_GRAD"
trainN 2 "$T/sh8b" --batch 8 --shard-optimizer || cli_bad "sh8b failed"
identical "$T/sh8" "$T/sh8b"

cli_n=$((cli_n + 1))
echo "case $cli_n: $(grep -m1 "^  sharded " "$T/sh8.log")"
grep -qE "^  sharded +--shard-optimizer: AdamW m and v of 15393 of the 30786 parameters on each rank" "$T/sh8.log" ||
    cli_bad "the start-up report does not say what a rank holds"
grep -q "^shard_optimizer,1$" "$T/sh8/info.csv" || cli_bad "info.csv lacks shard_optimizer,1"
grep -q '"shard_optimizer": 1' "$T/sh8/checkpoints/step-00000050/state.json" || cli_bad "state.json lacks shard_optimizer"
grep -q '"shard_optimizer"' "$T/two8/checkpoints/step-00000050/state.json" && cli_bad "an unsharded state.json names it"
cli_n=$((cli_n + 1))
out=$("$CMP" --compare "$T/two8/checkpoints/step-00000050/optimizer.safetensors" \
    "$T/sh8/checkpoints/step-00000050/optimizer.safetensors" 1e-6 2>&1)
rc=$?
echo "case $cli_n: optimizer.safetensors of sh8 (gathered) against two8's at step 50: $out"
[ "$rc" -eq 0 ] || cli_bad "the gathered Adam moments differ"

echo "3 ranks sharded against 1 process, batch 6 = 3 micro-batches of 2"
train1 "$T/one6" --batch 6 || cli_bad "one6 failed"
trainN 3 "$T/sh6" --batch 6 --shard-optimizer || cli_bad "sh6 failed: $(tail -5 "$T/sh6.log")"
close "$T/one6" "$T/sh6" 3 1e-6
weights_close "$T/one6" "$T/sh6" "$WEIGHT_TOL" "$ZERO_GRAD"

echo "loss scaling, steps 5-6 non-finite (a NaN in rank 0's piece): every rank skips them alike"
for v in two sh; do
    extra=()
    [ $v = sh ] && extra=(--shard-optimizer)
    BERTC_DEBUG_LOSS_SCALE=1 BERTC_DEBUG_NONFINITE=5:2 trainN 2 "$T/ls_$v" --batch 8 "${extra[@]}" ||
        cli_bad "ls_$v failed: $(tail -5 "$T/ls_$v.log")"
done
cli_n=$((cli_n + 1))
echo "case $cli_n: skipped_steps: unsharded $(grep '^skipped_steps,' "$T/ls_two/info.csv"), sharded $(grep '^skipped_steps,' "$T/ls_sh/info.csv"); loss_scale column identical?"
grep -q "^skipped_steps,2$" "$T/ls_sh/info.csv" || cli_bad "sharded: not 2 skipped steps"
cmp -s <(cut -d, -f6 "$T/ls_two/metrics.csv") <(cut -d, -f6 "$T/ls_sh/metrics.csv") || cli_bad "the loss scales differ"
weights_close "$T/ls_two" "$T/ls_sh" 1e-6

echo "--save-every-minutes 0.0003 (about every step): the ranks save at the same steps"
trainN 2 "$T/minutes" --batch 8 --shard-optimizer --save-every 0 --save-every-minutes 0.0003 --keep 0 ||
    cli_bad "minutes failed (exit 124: the ranks hung): $(tail -5 "$T/minutes.log")"
cli_n=$((cli_n + 1))
n=$(ls "$T/minutes/checkpoints" | grep -c "^step-[0-9]*$")
echo "case $cli_n: $n checkpoints"
[ "$n" -ge 3 ] || cli_bad "only $n checkpoints"
identical "$T/sh8" "$T/minutes"

echo "rank 1 killed after step 23, then the same command again"
K=$T/kill8
cli_n=$((cli_n + 1))
mpi_run 2 sh -c 'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then export BERTC_DEBUG_KILL=step:23; fi; exec "$@"' sh \
    "$BERTC" train "${COMMON[@]}" --out "$K" --batch 8 --shard-optimizer >"$K.log" 2>&1
rc=$?
echo "case $cli_n: killed run -> exit $rc; checkpoints: $(ls "$K/checkpoints" | tr '\n' ' ')"
[ "$rc" -ne 0 ] || cli_bad "the job did not fail"
grep -q "killing myself at step 23" "$K.log" || cli_bad "no kill message"
[ -e "$K/final" ] && cli_bad "a final model after the kill"
cp -r "$K" "$T/kill8_one"
trainN 2 "$K" --batch 8 --shard-optimizer || cli_bad "the resumed run failed: $(tail -5 "$K.log")"
grep -q "resume    from .*step-00000020" "$K.log" || cli_bad "did not resume from step 20"
grep -q "resuming a run saved" "$K.log" && cli_bad "a note on sharding where nothing changed"
identical "$T/sh8" "$K"
echo "the killed sharded run resumed by 1 process, unsharded"
train1 "$T/kill8_one" --batch 8 || cli_bad "resume with 1 process failed: $(tail -3 "$T/kill8_one.log")"
cli_n=$((cli_n + 1))
echo "case $cli_n: $(grep "^resuming a run" "$T/kill8_one.log" | tr '\n' ' ')"
grep -q "resuming a run saved with --shard-optimizer without it" "$T/kill8_one.log" || cli_bad "the change is not said"
grep -q "resuming a run of 2 ranks with 1" "$T/kill8_one.log" || cli_bad "the rank count is not said"
weights_close "$T/sh8" "$T/kill8_one" "$WEIGHT_TOL" "$ZERO_GRAD"
echo "an unsharded 2-rank run killed after step 23, resumed sharded"
U=$T/killu
mpi_run 2 sh -c 'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then export BERTC_DEBUG_KILL=step:23; fi; exec "$@"' sh \
    "$BERTC" train "${COMMON[@]}" --out "$U" --batch 8 >"$U.log" 2>&1
trainN 2 "$U" --batch 8 --shard-optimizer || cli_bad "the sharded resume failed: $(tail -5 "$U.log")"
cli_n=$((cli_n + 1))
echo "case $cli_n: $(grep "^resuming a run" "$U.log")"
grep -q "resuming a run saved without --shard-optimizer with it" "$U.log" || cli_bad "the change is not said"
close "$T/two8" "$U" 3 1e-6
weights_close "$T/two8" "$U" 1e-6

echo "bad input"
expect 2 "train --shard-optimizer: needs data-parallel ranks" -- train "${COMMON[@]}" --out "$T/bad" --batch 8 \
    --shard-optimizer
[ -e "$T/bad" ] && cli_bad "the run dir was made"
expect 2 "option '--shard-optimizer' takes no value" -- train "${COMMON[@]}" --out "$T/bad" --shard-optimizer=1
cli_n=$((cli_n + 1))
mpi_run 1 "$BERTC" train "${COMMON[@]}" --out "$T/bad" --batch 8 --shard-optimizer >"$T/bad.out" 2>"$T/bad.err"
rc=$?
echo "case $cli_n: mpirun -np 1 ... --shard-optimizer -> exit $rc: $(head -1 "$T/bad.err")"
[ "$rc" -eq 2 ] || cli_bad "exit $rc, want 2"
[ "$(grep -c "^bertc: train --shard-optimizer: needs data-parallel ranks.*a job of 1 rank" "$T/bad.err")" -eq 1 ] ||
    cli_bad "not one line naming the job of 1 rank: $(cat "$T/bad.err")"
[ -e "$T/bad" ] && cli_bad "the run dir was made"
cli_n=$((cli_n + 1))
mpi_run 2 "$BERTC" train "${COMMON[@]}" --out "$T/bad" --batch 8 --shard-optimizer --supervise 2 >"$T/bad.out" 2>"$T/bad.err"
rc=$?
echo "case $cli_n: mpirun -np 2 ... --shard-optimizer --supervise 2 -> exit $rc: $(head -1 "$T/bad.err")"
[ "$rc" -eq 2 ] || cli_bad "exit $rc, want 2"
[ "$(grep -c "^bertc: .*--supervise: cannot restart one rank" "$T/bad.err")" -eq 2 ] || cli_bad "not 2 lines"
finish
