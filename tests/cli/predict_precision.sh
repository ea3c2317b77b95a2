#!/usr/bin/env bash
# Answers in bf16 and int8 on the CPU (--precision for predict, ask, serve;
# run_squad --predict_precision; train --eval-precision):
# - bad values and the commands that cannot take int8 get one line, exit 2;
# - where `bertc version` says this CPU answers in a precision (a fast
#   kernel: AVX512-BF16; for int8 AVX2 or above, and no BERTC_CPU_ISA cap
#   below it), predict in it
#   works, its summary line names it, and predictions.json is the same with
#   --batch 1 and --batch 8 and with --packing varlen (batch-invariant
#   products); train --eval-precision evaluates in it;
# - where it does not (bf16 in the avx2 variant of this test: BERTC_CPU_ISA=avx2),
#   predict and train --eval-precision are refused in one line naming what
#   is missing, before anything is written.
source "$(dirname "$0")/lib/cli.sh"
M=tests/ref/train3/init
D=tests/data/train_small.json
W=(--max-seq-length 64 --doc-stride 16 --threads 2)
expect 2 "predict --precision: 'fp8' is not one of auto, fp32, tf32, fp16, bf16, int8" -- \
    predict --model $M --data $D --out "$cli_tmp/p.json" --precision fp8
expect 2 "train --precision int8: int8 is for answers" -- train --model $M --train $D --out "$cli_tmp/r" --precision int8
expect 2 "bench --precision int8: int8 is for answers" -- bench --config tiny --seq 32 --precision int8
expect 2 "train --eval-precision: 'fp16' is not one of auto, fp32, bf16, int8" -- \
    train --model $M --train $D --out "$cli_tmp/r" --eval-precision fp16
expect 2 "run_squad --predict_precision: 'int4' is not one of" -- \
    run_squad --vocab_file=x --bert_config_file=y --output_dir="$cli_tmp/rs" --predict_precision=int4
[ ! -e "$cli_tmp/r" ] && [ ! -e "$cli_tmp/rs" ] || cli_bad "a refused run left a directory"

"$BERTC" version >"$cli_tmp/v"
line=$(grep '^answers on the cpu: ' "$cli_tmp/v") || cli_bad "bertc version has no 'answers on the cpu' line"
echo "bertc version: $line"
"$BERTC" predict --model $M --data $D --out "$cli_tmp/fp32.json" "${W[@]}" 2>"$cli_tmp/err" ||
    cli_bad "fp32 predict failed: $(cat "$cli_tmp/err")"
for p in bf16 int8; do
    if echo "$line" | grep -q "; $p ("; then
        for b in 1 8; do
            cli_n=$((cli_n + 1))
            "$BERTC" predict --model $M --data $D --out "$cli_tmp/$p-$b.json" "${W[@]}" --precision $p --batch $b \
                2>"$cli_tmp/err" || cli_bad "predict --precision $p --batch $b: $(cat "$cli_tmp/err")"
            echo "case $cli_n: predict --precision $p --batch $b -> $(tail -1 "$cli_tmp/err")"
            grep -q " windows, [0-9.]*s, $p -> " "$cli_tmp/err" || cli_bad "the summary line does not name $p"
        done
        "$BERTC" predict --model $M --data $D --out "$cli_tmp/$p-v.json" "${W[@]}" --precision $p --packing varlen \
            2>"$cli_tmp/err" || cli_bad "predict --precision $p --packing varlen: $(cat "$cli_tmp/err")"
        cmp -s "$cli_tmp/$p-1.json" "$cli_tmp/$p-8.json" && cmp -s "$cli_tmp/$p-1.json" "$cli_tmp/$p-v.json" &&
            echo "$p: predictions.json identical with --batch 1, --batch 8 and --packing varlen" ||
            cli_bad "$p: predictions depend on the batch"
        jq -e 'keys' "$cli_tmp/$p-1.json" >"$cli_tmp/k1" && jq -e 'keys' "$cli_tmp/fp32.json" >"$cli_tmp/k0" &&
            cmp -s "$cli_tmp/k0" "$cli_tmp/k1" || cli_bad "$p: not the same questions as fp32"
        echo "$p: $(jq -n --slurpfile a "$cli_tmp/fp32.json" --slurpfile b "$cli_tmp/$p-1.json" \
            '[$a[0] | to_entries[] | select($b[0][.key] == .value)] | length') of $(jq length "$cli_tmp/fp32.json") answers as fp32's"
        cli_n=$((cli_n + 1))
        "$BERTC" train --model $M --train $D --dev $D --out "$cli_tmp/t$p" "${W[@]}" --batch 4 --max-steps 2 \
            --monitor-interval 0 --device cpu --eval-precision $p >"$cli_tmp/out" 2>"$cli_tmp/err" ||
            cli_bad "train --eval-precision $p: $(cat "$cli_tmp/err")"
        echo "case $cli_n: train --eval-precision $p -> $(tail -1 "$cli_tmp/t$p/eval.csv" 2>/dev/null)"
        [ "$(grep -c . "$cli_tmp/t$p/eval.csv" 2>/dev/null)" -ge 2 ] || cli_bad "train --eval-precision $p: no evaluation"
    else
        why=$(echo "$line" | grep -o "no $p ([^)]*)" | sed "s/^no $p (//; s/)\$//")
        echo "$p: not on this CPU ($why)"
        expect 2 "--precision $p: $why" -- predict --model $M --data $D --out "$cli_tmp/$p.json" "${W[@]}" --precision $p
        [ ! -e "$cli_tmp/$p.json" ] || cli_bad "a refused predict wrote predictions"
        expect 2 "--precision $p: $why" -- train --model $M --train $D --dev $D --out "$cli_tmp/t$p" "${W[@]}" \
            --device cpu --eval-precision $p
    fi
done
finish
