#!/usr/bin/env bash
# bertc predict: --help, errors, and the outputs of a run on a small file.
source "$(dirname "$0")/lib/cli.sh"
M=tests/ref/train3/init
D=tests/data/train_small.json
expect_help predict "usage: bertc predict --model DIR --data FILE --out PRED.json" --nbest --dump --max-seq-length \
    --doc-stride --batch --threads
expect 2 "missing required option --data"  -- predict --model $M --out $cli_tmp/p.json
expect 2 "unknown option '--bogus'"        -- predict --model $M --data $D --out $cli_tmp/p.json --bogus
expect 2 "predict --batch: 0 is out of range" -- predict --model $M --data $D --out $cli_tmp/p.json --batch 0
expect 2 "--doc-stride 64 must be below --max-seq-length 64" -- predict --model $M --data $D --out $cli_tmp/p.json --max-seq-length 64 --doc-stride 64
expect 2 "--out $cli_tmp: is a directory"  -- predict --model $M --data $D --out $cli_tmp
expect 2 "$cli_tmp/none: no such model dir" -- predict --model $cli_tmp/none --data $D --out $cli_tmp/p.json
expect 2 "$cli_tmp/none.json"              -- predict --model $M --data $cli_tmp/none.json --out $cli_tmp/p.json
"$BERTC" predict --model $M --data $D --out "$cli_tmp/p.json" --nbest "$cli_tmp/n.json" --dump "$cli_tmp/dump" \
    --max-seq-length 64 --doc-stride 16 --threads 2 2>"$cli_tmp/err"
rc=$?
echo "predict -> exit $rc: $(cat "$cli_tmp/err")"
[ "$rc" -eq 0 ] || cli_bad "predict failed"
n=$(grep -c '^    "' "$cli_tmp/p.json")
[ "$n" -eq 24 ] || cli_bad "predictions.json has $n answers, want 24"
grep -q '"probability"' "$cli_tmp/n.json" || cli_bad "nbest file lacks probabilities"
for f in start_logits end_logits; do
    [ "$(head -c 6 "$cli_tmp/dump/$f.npy" | tail -c 5)" = "NUMPY" ] || cli_bad "$f.npy is not a .npy file"
    grep -qa "'shape': (46, 64)" "$cli_tmp/dump/$f.npy" || cli_bad "$f.npy shape is not (46, 64)"
done
finish
