#!/usr/bin/env bash
# The memory planner's table of layouts (bertc plan --format markdown):
# BERT-base and BERT-large at T 384 and 512 on one 16 GiB card (a T4),
# alone, with --recompute layer, with 2 pipeline stages (1F1B), with the
# optimizer sharded over 2 and 4 ranks, and combinations. One row per
# stage: its parameters, the bytes of weights + gradients, Adam's m and v
# (per rank), activations and workspace at the largest micro-batch that
# fits every stage, the peak, and that micro-batch. Arithmetic only: no GPU.
#
#   BERTC=build/bertc bash bench/gpu/plan_layouts.sh [GPU_MEM] [PRECISION]
set -euo pipefail
BERTC=${BERTC:-build/bertc}
MEM=${1:-16GiB}
PREC=${2:-fp16}
echo "bertc plan: largest micro-batch and peak per stage on a $MEM card, precision $PREC ($("$BERTC" version | head -1))"
echo
first=1
for cfg in base large; do
    for seq in 384 512; do
        for lay in "" "--recompute layer" "--pipeline-stages 2" "--pipeline-stages 2 --recompute layer" \
            "--shard-optimizer --ranks 2" "--shard-optimizer --ranks 4" \
            "--pipeline-stages 2 --shard-optimizer --ranks 2" \
            "--pipeline-stages 2 --shard-optimizer --ranks 4 --recompute layer"; do
            # shellcheck disable=SC2086 # $lay is a list of options
            out=$("$BERTC" plan --config "$cfg" --seq "$seq" --gpu-mem "$MEM" --precision "$PREC" --format markdown $lay)
            if [ "$first" = 1 ]; then echo "$out"; first=0; else echo "$out" | tail -n +3; fi
        done
    done
done
