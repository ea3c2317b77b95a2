# bertc plan: the memory planner from the command line, on any machine
# (it needs no GPU, and says so when it has none to size the largest
# micro-batch for), also per pipeline stage and with a sharded optimizer.
# Also the binary's start with or without a CUDA driver: it runs, finds no
# GPU or one, and never crashes.
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
# (110 with 16-bit activations and no 16-bit copies of them in the workspace:
# at least issue 47's 75, at most twice that)
if [ -z "$best" ] || [ "$best" -lt 75 ] || [ "$best" -gt 150 ]; then cli_bad "largest micro-batch '$best'"; fi
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

# --json: the same plan for scripts (bench/lib/bert_configs.py reads it):
# the text's figures, the FLOPs of bert_flops (6 P T + 12 L T^2 C per
# window, a third of it forward), one GPU only.
cli_n=$((cli_n + 1))
"$BERTC" plan --config base --seq 384 --gpu-mem 16GiB --precision bf16 --batch 32 --json >"$cli_tmp/json" 2>"$cli_tmp/err"
rc=$?
echo "case $cli_n: bertc plan --config base --seq 384 --gpu-mem 16GiB --json -> exit $rc"
[ "$rc" -eq 0 ] || cli_bad "exit $rc: $(cat "$cli_tmp/err")"
python3 - "$cli_tmp/json" "$cli_tmp/out" <<'PY' || cli_bad "--json: $(cat "$cli_tmp/json")"
import json, re, sys
j = json.load(open(sys.argv[1]))
text = open(sys.argv[2]).read()
L, C, I, T = j["layers"], j["hidden"], j["intermediate"], j["seq"]
step = 6 * (L * (4 * C * C + 2 * C * I) + 2 * C) * T + 12 * L * T * T * C
assert (L, C, j["heads"], I, T) == (12, 768, 12, 3072, 384), j
assert j["flops_per_example_step"] == step and j["flops_per_example_forward"] * 3 == step, j
assert j["params"] == 108893186 and j["weights_bytes"] == 435572744 and j["optimizer_bytes"] == 871145488, j
rows = {int(m): (int(a), int(w), int(t)) for m, a, w, t in
        re.findall(r"^ +(\d+) +(\d+) B +\S+ \S+ +(\d+) B +\S+ \S+ +(\d+) B", text, re.M)}
got = {r["micro"]: (r["activations_bytes"], r["workspace_bytes"], r["total_bytes"]) for r in j["micro_batches"]}
assert got == rows and len(rows) == 6, (got, rows)
assert j["activation_bytes_per_window"] == rows[1][0], j
best = re.search(r"^largest micro-batch for 16.00 GiB: (\d+) ", text, re.M).group(1)
assert j["largest_micro_batch"] == int(best) and j["gpu_mem_bytes"] == 16 << 30, j
PY
expect 2 "plan --json: one GPU's padded plan only" -- plan --config base --seq 384 --json --pipeline-stages 2

# Pipeline stages and the sharded optimizer: the arithmetic seen from the
# command line (test_memory checks it against bert.c's tables).
expect_help plan "usage: bertc plan" --pipeline-stages --shard-optimizer --ranks --format
expect 2 "plan --shard-optimizer: give --ranks D, D >= 2" -- plan --config base --seq 384 --shard-optimizer
expect 2 "plan --shard-optimizer: give --ranks D, D >= 2" -- plan --config base --seq 384 --shard-optimizer --ranks 1
expect 2 "plan --ranks 2: goes with --shard-optimizer" -- plan --config base --seq 384 --ranks 2
expect 2 "plan --pipeline-stages 13: more stages than the model's 12 layers" -- plan --config base --seq 384 \
    --pipeline-stages 13
expect 2 "--pipeline-stages: 0 is out of range [1, 64]" -- plan --config base --seq 384 --pipeline-stages 0
expect 2 "plan --pipeline-split: the boundaries must run from 0 to the model's 12 layers (got 0 .. 11)" -- plan --config base \
    --seq 384 --pipeline-stages 2 --pipeline-split 0,6,11
expect 2 "plan --pipeline-split 0,6,12: needs --pipeline-stages 2 or more" -- plan --config base --seq 384 \
    --pipeline-split 0,6,12
expect 2 "plan --format html: expected text or markdown" -- plan --config base --seq 384 --format html
expect 2 "plan --packing varlen: planned for one GPU in text only" -- plan --config base --seq 384 --packing varlen \
    --pipeline-stages 2
"$BERTC" plan --config base --seq 384 --gpu-mem 16GiB --precision fp16 --pipeline-stages 2 >"$cli_tmp/st2" 2>&1
"$BERTC" plan --config base --seq 384 --gpu-mem 16GiB --precision fp16 --shard-optimizer --ranks 4 >"$cli_tmp/sh4" 2>&1
"$BERTC" plan --config base --seq 384 --gpu-mem 16GiB --precision fp16 >"$cli_tmp/one" 2>&1
cli_n=$((cli_n + 1))
params=$(sed -nE 's/^    parameters +([0-9]+) elements/\1/p' "$cli_tmp/st2" | awk '{ s += $1 } END { print s }')
weights=$(sed -nE 's/^    weights +([0-9]+) B.*/\1/p' "$cli_tmp/st2" | awk '{ s += $1 } END { print s }')
adam2=$(sed -nE 's/^    optimizer +([0-9]+) B.*/\1/p' "$cli_tmp/st2" | awk '{ s += $1 } END { print s }')
echo "case $cli_n: 2 stages: parameters $params, weights $weights B, Adam $adam2 B in all"
[ "$params" = 108893186 ] || cli_bad "the stages' parameters do not sum to 108893186"
[ "$weights" = 435572744 ] || cli_bad "the stages' weights do not sum to 435572744 B"
[ "$adam2" = 871145488 ] || cli_bad "the stages' Adam state does not sum to 871145488 B"
grep -q "^split: 0,6,12 (bertc train --pipeline-stages 2's default at micro-batch 32: .*; FLOPs per stage: 50.0 % 50.0 %$" \
    "$cli_tmp/st2" || cli_bad "the split line: $(grep "^split" "$cli_tmp/st2")"
grep -q "^  stage 0: embeddings + layers 0-5, 2 micro-batches in flight" "$cli_tmp/st2" || cli_bad "stage 0's description"
grep -q "^  stage 1: layers 6-11 + QA head, 1 micro-batch in flight" "$cli_tmp/st2" || cli_bad "stage 1's description"
cli_n=$((cli_n + 1))
"$BERTC" plan --config base --seq 384 --pipeline-stages 3 --pipeline-split 0,3,8,12 >"$cli_tmp/st3" 2>&1
echo "case $cli_n: plan --pipeline-stages 3 --pipeline-split 0,3,8,12: $(grep "^split" "$cli_tmp/st3")"
grep -q "^split: 0,3,8,12 (--pipeline-split); FLOPs per stage: 25.0 % 41.7 % 33.3 %$" "$cli_tmp/st3" || cli_bad "split line"
grep -q "^  stage 1: layers 3-7, 2 micro-batches in flight" "$cli_tmp/st3" || cli_bad "stage 1 is not layers 3-7"
cli_n=$((cli_n + 1))
adam4=$(sed -nE 's/^    optimizer +([0-9]+) B.*the most one of 4 ranks keeps.*/\1/p' "$cli_tmp/sh4")
over=$((4 * ${adam4:-0} - 871145488))
echo "case $cli_n: sharded over 4 ranks: Adam $adam4 B per rank; 4 x that - the whole = $over B"
# each of the 14 buckets' last piece holds at most 3 floats more than a quarter
[ -n "$adam4" ] && [ "$over" -ge 0 ] && [ "$over" -lt $((8 * 4 * 3 * 14)) ] || cli_bad "Adam state not divided by 4"
cli_n=$((cli_n + 1))
b1=$(sed -nE 's/^largest micro-batch for 16.00 GiB: ([0-9]+) .*/\1/p' "$cli_tmp/one")
b4=$(sed -nE 's/^largest micro-batch for 16.00 GiB: ([0-9]+) .*/\1/p' "$cli_tmp/sh4")
echo "case $cli_n: largest micro-batch alone $b1, sharded over 4 ranks $b4"
[ -n "$b1" ] && [ -n "$b4" ] && [ "$b4" -gt "$b1" ] || cli_bad "sharding does not fit a larger micro-batch"
cli_n=$((cli_n + 1))
"$BERTC" plan --config large --seq 512 --gpu-mem 16GiB --precision fp16 --pipeline-stages 2 --format markdown \
    >"$cli_tmp/md" 2>"$cli_tmp/err"
rc=$?
echo "case $cli_n: plan --config large --seq 512 --pipeline-stages 2 --format markdown -> exit $rc"
cat "$cli_tmp/md"
[ "$rc" -eq 0 ] || cli_bad "exit $rc"
[ "$(head -1 "$cli_tmp/md" | cut -c1-17)" = "| model | T | lay" ] || cli_bad "no table header"
[ "$(grep -c "^| large | 512 | 2 stages | [01]: " "$cli_tmp/md")" -eq 2 ] || cli_bad "not one row per stage"
[ "$(awk -F'|' 'NR > 2 { print $12 }' "$cli_tmp/md" | sort -u | wc -l)" -eq 1 ] || cli_bad "the stages' micro-batches differ"

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
