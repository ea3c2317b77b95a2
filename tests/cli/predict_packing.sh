#!/usr/bin/env bash
# bertc predict --packing varlen: bad options refused with one line, and on a
# small file the same predictions.json as the padded path (the packed
# logits equal the padded ones at every real position; test_packing_predict
# checks that on SQuAD dev).
source "$(dirname "$0")/lib/cli.sh"
M=tests/ref/train3/init
D=tests/data/train_small.json
expect 2 "--packing dense: expected none or varlen" -- predict --model $M --data $D --out $cli_tmp/p.json --packing dense
expect 2 "--max-tokens needs --packing varlen" -- predict --model $M --data $D --out $cli_tmp/p.json --max-tokens 512
expect 2 "--max-tokens 32 is below the sequence length 64" -- predict --model $M --data $D --out $cli_tmp/p.json \
    --max-seq-length 64 --doc-stride 16 --packing varlen --max-tokens 32
[ ! -e "$cli_tmp/p.json" ] || cli_bad "a refused run wrote predictions"
run() {
    local name=$1
    shift
    "$BERTC" predict --model $M --data $D --out "$cli_tmp/$name.json" --max-seq-length 64 --doc-stride 16 --threads 2 \
        "$@" 2>"$cli_tmp/err" || cli_bad "predict $* failed: $(cat "$cli_tmp/err")"
    echo "predict $* -> $(cat "$cli_tmp/err")"
}
run none
run varlen --packing varlen --max-tokens 200 --batch 8
cmp -s "$cli_tmp/none.json" "$cli_tmp/varlen.json" && echo "predictions.json identical" ||
    cli_bad "predictions differ: $(diff "$cli_tmp/none.json" "$cli_tmp/varlen.json" | head -5)"
finish
