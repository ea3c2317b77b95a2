#!/usr/bin/env bash
# The quality of answers in bf16 and int8 against fp32: `bertc predict` of one
# fine-tuned model over held-out questions at each --precision, scored by
# `bertc eval` (SQuAD v1.1's EM/F1), with the wall time of each command.
#
# usage: bench/accuracy/answer_precision.sh RUN_OR_MODEL [--data FILE] [--threads N] [--max-seq-length N]
#   RUN_OR_MODEL: a model dir, or a run dir of bench/accuracy/minilm_squad.sh (its bertc/final
#   model and eval.json, articles 38-47 of SQuAD v1.1 dev, T 256 as it trained)
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -ge 1 ] || { echo "usage: $0 RUN_OR_MODEL [--data FILE] [--threads N] [--max-seq-length N]" >&2; exit 2; }
SRC=$1
shift
THREADS=$(nproc) DATA="" T=256
source scripts/lib.sh
parse_opts "$0 RUN_OR_MODEL [--data FILE] [--threads N] [--max-seq-length N]" \
    --data DATA --threads THREADS --max-seq-length T -- "$@"
BERTC=${BERTC:-build/bertc}
MODEL=$SRC
[ -f "$SRC/bertc/final/config.json" ] && MODEL=$SRC/bertc/final
[ -n "$DATA" ] || DATA=$SRC/eval.json
[ -f "$MODEL/config.json" ] && [ -f "$DATA" ] || { echo "$0: no model at $MODEL or no data at $DATA" >&2; exit 2; }
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, threads $THREADS"
echo "model $MODEL, data $DATA, T $T, stride 128, --packing varlen"
"$BERTC" version | grep '^answers'
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for p in fp32 bf16 int8; do
    t0=$(date +%s.%N)
    env -u OPENBLAS_CORETYPE "$BERTC" predict --model "$MODEL" --data "$DATA" --out "$out/$p.json" --threads "$THREADS" \
        --max-seq-length "$T" --doc-stride 128 --packing varlen --precision $p 2>"$out/$p.err" ||
        { echo "$p: $(tail -1 "$out/$p.err")"; continue; }
    t1=$(date +%s.%N)
    ev=$("$BERTC" eval "$DATA" "$out/$p.json")
    same=$([ -f "$out/fp32.json" ] && jq -n --slurpfile a "$out/fp32.json" --slurpfile b "$out/$p.json" \
        '[$a[0] | to_entries[] | select($b[0][.key] == .value)] | length' || echo "-")
    printf '%s: %s wall %.1f s, answers equal to fp32: %s\n' "$p" "$ev" "$(echo "$t1 - $t0" | bc)" "$same"
done
