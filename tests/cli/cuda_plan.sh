# bertc plan: the memory planner from the command line, on any machine
# (it needs no GPU, and says so when it has none to size the largest
# micro-batch for). Also the binary's start with or without a CUDA driver:
# it runs, finds no GPU or one, and never crashes.
source "$(dirname "$0")/lib/cli.sh"

expect_help plan "usage: bertc plan" --model --config --seq --precision --recompute --gpu-mem --batch --vocab-size
expect 2 "missing required option --seq" -- plan --config base
expect 2 "give one of --model DIR or --config NAME" -- plan --seq 384
expect 2 "give one of --model DIR or --config NAME" -- plan --seq 384 --config base --model tests/ref/tiny/model
expect 2 "--config huge: not a named config" -- plan --config huge --seq 384
expect 2 "--precision: 'fp8' is not one of auto, fp32, tf32, fp16, bf16" -- plan --config base --seq 384 --precision fp8
expect 2 "--recompute: 'all' is not one of none, layer" -- plan --config base --seq 384 --recompute all
expect 2 "--gpu-mem: must be more than 0 bytes" -- plan --config base --seq 384 --gpu-mem 0
expect 2 "has an unknown unit" -- plan --config base --seq 384 --gpu-mem 16XB
expect 2 "sequence length 1024 exceeds max_position_embeddings 512" -- plan --config base --seq 1024
expect 2 "--vocab-size goes with --config" -- plan --model tests/ref/tiny/model --seq 64 --vocab-size 100
expect 2 "--model /nonexistent: no config.json there" -- plan --model /nonexistent --seq 64
expect 2 "unexpected argument 'extra'" -- plan --config base --seq 384 extra

# BERT-base at 384 on a 16 GiB card: the exact parameter bytes, a row per
# listed micro-batch, a plausible largest micro-batch (the planner's
# arithmetic is checked in test_memory).
cli_n=$((cli_n + 1))
"$BERTC" plan --config base --seq 384 --gpu-mem 16GiB --precision bf16 --batch 32 >"$cli_tmp/out" 2>"$cli_tmp/err"
rc=$?
echo "case $cli_n: bertc plan --config base --seq 384 --gpu-mem 16GiB -> exit $rc"
cat "$cli_tmp/out"
[ "$rc" -eq 0 ] || cli_bad "exit $rc"
[ -s "$cli_tmp/err" ] && cli_bad "stderr not empty: $(cat "$cli_tmp/err")"
grep -qF "parameters   108893186 elements" "$cli_tmp/out" || cli_bad "parameter count"
grep -qE "^  weights +435572744 B" "$cli_tmp/out" || cli_bad "weight bytes"
grep -qE "^  optimizer +871145488 B" "$cli_tmp/out" || cli_bad "optimizer bytes"
rows=$(grep -cE "^ +(1|2|4|8|16|32) +[0-9]+ B" "$cli_tmp/out")
[ "$rows" -eq 6 ] || cli_bad "$rows micro-batch rows, want 6"
best=$(sed -nE 's/^largest micro-batch for 16.00 GiB: ([0-9]+) .*/\1/p' "$cli_tmp/out")
if [ -z "$best" ] || [ "$best" -lt 20 ] || [ "$best" -gt 80 ]; then cli_bad "largest micro-batch '$best'"; fi
# recompute fits several times more; the plan's header names the mode
"$BERTC" plan --config base --seq 384 --gpu-mem 16GiB --precision bf16 --recompute layer >"$cli_tmp/out2" 2>&1
best2=$(sed -nE 's/^largest micro-batch for 16.00 GiB: ([0-9]+) .*/\1/p' "$cli_tmp/out2")
if [ -z "$best2" ] || [ -z "$best" ] || [ "$best2" -lt $((3 * best)) ]; then
    cli_bad "recompute layer: largest micro-batch '$best2' vs '$best'"
fi
grep -qE "^bertc plan: .*recompute layer" "$cli_tmp/out2" || cli_bad "recompute: the header does not name the mode"
! grep -qi "does not recompute" "$cli_tmp/out2" || cli_bad "recompute: an outdated note says it is not implemented"
# a card too small for micro-batch 1
"$BERTC" plan --config base --seq 384 --gpu-mem 1GiB >"$cli_tmp/out3" 2>&1
grep -qF "largest micro-batch for 1.00 GiB: none fits" "$cli_tmp/out3" || cli_bad "1 GiB: $(tail -1 "$cli_tmp/out3")"

# Without --gpu-mem the machine's GPU sizes it; without one, a reason and
# exit 0 (this is where a binary built with CUDA meets a machine without a
# driver: cudaGetDeviceCount failing must be a fall-back, not a crash).
cli_n=$((cli_n + 1))
"$BERTC" plan --model tests/ref/tiny/model --seq 64 >"$cli_tmp/out" 2>"$cli_tmp/err"
rc=$?
echo "case $cli_n: bertc plan --model tests/ref/tiny/model --seq 64 -> exit $rc: $(tail -1 "$cli_tmp/out")"
[ "$rc" -eq 0 ] || cli_bad "exit $rc: $(cat "$cli_tmp/err")"
grep -qE "^largest micro-batch: no GPU to size it for \(.+\); give --gpu-mem SIZE$|^largest micro-batch for GPU 0 \(" \
    "$cli_tmp/out" || cli_bad "neither a GPU nor a reason: $(tail -1 "$cli_tmp/out")"
finish
