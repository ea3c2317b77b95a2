#!/usr/bin/env bash
# Out-of-memory back-off in `bertc train`: a step that runs out of memory is
# redone with half the micro-batch (twice the micro-batches), the model
# rebuilt with the same parameters; the examples of the step and their order
# stay. No GPU here, so the test hook BERTC_DEBUG_OOM=N[@S] makes any
# micro-batch of more than N rows fail (from step S on) with the error the
# CUDA backend gives when an allocation fails.
#  A. --micro-batch 4, OOM above 2 rows from step 1: the run warns once, goes
#     on with micro-batch 2 and ends with the same model.safetensors and loss
#     column as a run with --micro-batch 2 from the start.
#  B. the same from step 7: steps 1-6 as the micro-batch 4 run (loss column
#     identical), then micro-batch 2; all 12 steps, a final model; info.csv
#     records the back-off.
#  C. OOM at any size (N = 0): exit 1, the message says micro-batch 1 cannot
#     be halved and what to try; the checkpoints before stay valid.
source "$(dirname "$0")/../reliability/lib.sh"

r_make_model "$r_tmp/model"
O=(--max-steps 12 --save-every 3 --save-every-minutes 0 --keep 0)
loss() { cut -d, -f1-5 "$1/metrics.csv"; }

# ---- A ----
r_train "$r_tmp/m2" "${O[@]}" --micro-batch 2 >"$r_tmp/m2.out" 2>&1
rc1=$?
BERTC_DEBUG_OOM=2 r_train "$r_tmp/a" "${O[@]}" --micro-batch 4 >"$r_tmp/a.out" 2>"$r_tmp/a.err"
rc2=$?
echo "A: --micro-batch 2 -> exit $rc1; --micro-batch 4 with OOM above 2 rows -> exit $rc2"
cat "$r_tmp/a.err"
r_check "A: both exit 0" [ "$rc1" -eq 0 -a "$rc2" -eq 0 ]
r_check "A: one warning, naming the step, both sizes and the cause" \
    bash -c "[ \$(grep -c 'out of memory' '$r_tmp/a.err') = 1 ] &&
             grep -q 'step 1: out of memory with micro-batch 4 (.*BERTC_DEBUG_OOM.*): going on with micro-batch 2, 2 per step of 4' '$r_tmp/a.err'"
r_check "A: the same final model as --micro-batch 2, bit for bit" \
    cmp -s "$r_tmp/m2/final/model.safetensors" "$r_tmp/a/final/model.safetensors"
r_check "A: the same loss, lr and grad_norm columns" cmp -s <(loss "$r_tmp/m2") <(loss "$r_tmp/a")

# ---- B ----
r_train "$r_tmp/m4" "${O[@]}" --micro-batch 4 >"$r_tmp/m4.out" 2>&1
BERTC_DEBUG_OOM=2@7 r_train "$r_tmp/b" "${O[@]}" --micro-batch 4 >"$r_tmp/b.out" 2>"$r_tmp/b.err"
rc=$?
echo "B: OOM above 2 rows from step 7 -> exit $rc; $(cat "$r_tmp/b.err")"
r_check "B: exit 0, 12 steps, a final model" \
    bash -c "[ $rc -eq 0 ] && [ \$(tail -n +2 '$r_tmp/b/metrics.csv' | wc -l) = 12 ] && [ -s '$r_tmp/b/final/model.safetensors' ]"
r_check "B: the warning names step 7" grep -q 'step 7: out of memory with micro-batch 4' "$r_tmp/b.err"
r_check "B: steps 1-6 identical to the micro-batch 4 run" \
    cmp -s <(loss "$r_tmp/m4" | head -n 7) <(loss "$r_tmp/b" | head -n 7)
r_check "B: checkpoint 6 identical to the micro-batch 4 run's" \
    cmp -s "$(r_ckpt_dir "$r_tmp/m4" 6)/model.safetensors" "$(r_ckpt_dir "$r_tmp/b" 6)/model.safetensors"
r_check "B: info.csv records the back-off" grep -q 'micro_batch.*2 (after 1 out-of-memory back-off)' "$r_tmp/b/info.csv"

# ---- C ----
BERTC_DEBUG_OOM=0@4 r_train "$r_tmp/c" "${O[@]}" --micro-batch 4 >"$r_tmp/c.out" 2>"$r_tmp/c.err"
rc=$?
echo "C: OOM at any size from step 4 -> exit $rc; stderr: $(tail -n 1 "$r_tmp/c.err")"
r_check "C: exit 1" [ "$rc" -eq 1 ]
r_check "C: the error says micro-batch 1 cannot be halved and what to try" \
    grep -q 'out of memory with micro-batch 1: nothing left to halve (try --recompute layer' "$r_tmp/c.err"
r_check "C: checkpoint 3 is there and valid for a resume without the hook" \
    bash -c "'$BERTC' train --model '$R_MODEL' --train '$R_TRAIN' --out '$r_tmp/c' ${R_OPTS[*]} ${O[*]} --micro-batch 4 >'$r_tmp/c2.out' 2>&1 &&
             grep -q '^  resume    from .*step 3 of 12' '$r_tmp/c2.out'"
finish
