#!/usr/bin/env bash
# A short bertc train with --dev: the run dir holds what DESIGN.md lists
# (checkpoints with MANIFEST, metrics.csv and eval.csv with their headers,
# final/ as a model dir, predictions.json), `bertc predict` on RUN/final
# gives the same predictions as the trainer's own evaluation, `bertc eval`
# agrees with eval.csv, and the final checkpoint is also a model dir.
source "$(dirname "$0")/lib/cli.sh"
R=$cli_tmp/run
"$BERTC" train --model tests/ref/train3/init --train tests/data/train_small.json --dev tests/data/train_small.json \
    --out "$R" --max-seq-length 64 --doc-stride 16 --batch 8 --micro-batch 4 --max-steps 12 --lr 3e-3 --save-every 5 \
    --keep 2 --eval-every 6 --threads 2 --save-every-minutes 0 --monitor-interval 0 >"$cli_tmp/out" 2>"$cli_tmp/err"
rc=$?
echo "train -> exit $rc"; cat "$cli_tmp/out"
[ "$rc" -eq 0 ] || cli_bad "train failed: $(cat "$cli_tmp/err")"
for f in metrics.csv eval.csv predictions.json final/config.json final/model.safetensors final/vocab.txt \
         final/tokenizer_config.json checkpoints/step-00000010/MANIFEST checkpoints/step-00000012/state.json \
         checkpoints/step-00000012/optimizer.safetensors cache/train.features; do
    [ -s "$R/$f" ] || cli_bad "missing $f"
done
[ -d "$R/checkpoints/step-00000005" ] && cli_bad "--keep 2 left step 5"
[ "$(head -1 "$R/metrics.csv")" = "step,epoch,loss,lr,grad_norm,loss_scale,examples_per_s,elapsed_s" ] || cli_bad "metrics.csv header"
[ "$(head -1 "$R/eval.csv")" = "step,epoch,exact_match,f1" ] || cli_bad "eval.csv header"
[ "$(cut -d, -f1 "$R/eval.csv" | tr '\n' ' ')" = "step 6 12 " ] || cli_bad "eval.csv steps: $(cut -d, -f1 "$R/eval.csv" | tr '\n' ' ')"
[ "$(($(wc -l <"$R/metrics.csv") - 1))" -eq 12 ] || cli_bad "metrics.csv rows"
awk -F, 'NR > 1 && $6 != 1 { bad = 1 } END { exit bad }' "$R/metrics.csv" || cli_bad "loss_scale is not 1"
grep -q '"step": 12' "$R/checkpoints/step-00000012/state.json" || cli_bad "state.json step"
"$BERTC" predict --model "$R/final" --data tests/data/train_small.json --out "$cli_tmp/pred.json" \
    --max-seq-length 64 --doc-stride 16 --threads 2 2>"$cli_tmp/err"
echo "predict -> exit $?: $(cat "$cli_tmp/err")"
cmp -s "$cli_tmp/pred.json" "$R/predictions.json" || cli_bad "bertc predict differs from the trainer's predictions.json"
ev=$("$BERTC" eval tests/data/train_small.json "$R/predictions.json")
last=$(tail -1 "$R/eval.csv")
echo "bertc eval: $ev; eval.csv: $last"
python_like=$(awk -F, -v e="$ev" 'END { printf "%.2f %.2f", $3, $4 }' "$R/eval.csv")
got=$(echo "$ev" | sed -E 's/.*"exact_match": ([0-9.]+), "f1": ([0-9.]+).*/\1 \2/' | awk '{ printf "%.2f %.2f", $1, $2 }')
[ "$python_like" = "$got" ] || cli_bad "eval.csv ($python_like) disagrees with bertc eval ($got)"
"$BERTC" predict --model "$R/checkpoints/step-00000012" --data tests/data/train_small.json --out "$cli_tmp/pred2.json" \
    --max-seq-length 64 --doc-stride 16 --threads 2 2>/dev/null
cmp -s "$cli_tmp/pred2.json" "$R/predictions.json" || cli_bad "the last checkpoint does not predict like final/"
finish
