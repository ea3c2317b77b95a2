#!/usr/bin/env bash
# SQuAD 2.0 in bertc's own commands, on tests/data/train_small_squad2.json (8 of 24
# questions without answers): a short `bertc train --version-2-with-negative`
# writes RUN/predictions.json and RUN/null_odds.json and an eval.csv row that
# `bertc eval --version-2-with-negative` agrees with; `bertc predict` on
# RUN/final gives the same two files; --null-score-diff-threshold moves every
# answer to "" or none; the flag is part of the resume fingerprint; usage errors.
source "$(dirname "$0")/lib/cli.sh"
D=tests/data/train_small_squad2.json
R=$cli_tmp/run
W="--max-seq-length 64 --doc-stride 16 --threads 2"
"$BERTC" train --model tests/ref/train3/init --train $D --dev $D --out "$R" $W --batch 8 --max-steps 6 --lr 3e-3 \
    --save-every 3 --save-every-minutes 0 --monitor-interval 0 --version-2-with-negative >"$cli_tmp/out" 2>"$cli_tmp/err"
rc=$?
echo "train --version-2-with-negative -> exit $rc"; cat "$cli_tmp/out"
[ "$rc" -eq 0 ] || cli_bad "train failed: $(cat "$cli_tmp/err")"
grep -q "24 questions -> .* windows, .* trainable" "$cli_tmp/out" || cli_bad "no data line"
grep -q "squad 2.0 --version-2-with-negative: 8 unanswerable training questions" "$cli_tmp/out" ||
    cli_bad "the start-up report does not name the option"
for f in predictions.json null_odds.json eval.csv; do [ -s "$R/$f" ] || cli_bad "missing $f"; done
[ "$(grep -c '^    "' "$R/null_odds.json")" -eq 24 ] || cli_bad "null_odds.json does not hold 24 questions"
grep -q '"--version-2-with-negative": "yes"' "$R/checkpoints/step-00000006/state.json" || cli_bad "fingerprint lacks the option"

ev=$("$BERTC" eval --version-2-with-negative $D "$R/predictions.json")
echo "bertc eval --version-2-with-negative: $(echo $ev)"
got=$(echo "$ev" | awk -F': ' '/"exact"/ { e = $2 } /"f1"/ { f = $2 } END { printf "%.2f %.2f", e, f }')
want=$(awk -F, 'END { printf "%.2f %.2f", $3, $4 }' "$R/eval.csv")
echo "eval.csv: $want, bertc eval: $got"
[ "$got" = "$want" ] || cli_bad "eval.csv ($want) disagrees with bertc eval --version-2-with-negative ($got)"
"$BERTC" eval --version-2-with-negative $D "$R/predictions.json" --na-prob-file "$R/null_odds.json" | grep -q '"best_f1_thresh"' ||
    cli_bad "eval with the null odds has no best_f1_thresh"

# --batch 8 as the trainer's evaluation: the same micro-batches, the same logits to the last bit
"$BERTC" predict --model "$R/final" --data $D --out "$cli_tmp/p.json" --null-odds "$cli_tmp/odds.json" $W \
    --version-2-with-negative --batch 8 2>"$cli_tmp/err"
echo "predict --version-2-with-negative -> exit $?: $(cat "$cli_tmp/err")"
cmp -s "$cli_tmp/p.json" "$R/predictions.json" || cli_bad "bertc predict differs from the trainer's predictions.json"
cmp -s "$cli_tmp/odds.json" "$R/null_odds.json" || cli_bad "bertc predict --null-odds differs from RUN/null_odds.json"
for t in -1e9 1e9; do
    "$BERTC" predict --model "$R/final" --data $D --out "$cli_tmp/p$t.json" $W --version-2-with-negative \
        --null-score-diff-threshold $t 2>/dev/null
    n=$(grep -c '": ""' "$cli_tmp/p$t.json")
    echo "threshold $t: $n null answers"
    want=0; [ "$t" = -1e9 ] && want=24
    [ "$n" -eq "$want" ] || cli_bad "threshold $t: $n null answers, want $want"
done

# the option is part of the resume fingerprint
expect 2 "--version-2-with-negative" -- train --model tests/ref/train3/init --train $D --out "$R" $W --batch 8 \
    --max-steps 6 --lr 3e-3 --monitor-interval 0
expect 2 "need --version-2-with-negative" -- predict --model "$R/final" --data $D --out "$cli_tmp/q.json" --null-odds "$cli_tmp/o.json"
expect 2 "need --version-2-with-negative" -- predict --model "$R/final" --data $D --out "$cli_tmp/q.json" --null-score-diff-threshold 1
expect 2 "predict --null-score-diff-threshold" -- predict --model "$R/final" --data $D --out "$cli_tmp/q.json" \
    --version-2-with-negative --null-score-diff-threshold nan
finish
