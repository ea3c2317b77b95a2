#!/usr/bin/env bash
# bertc features with bad usage or bad input: exit 2, one line on stderr
# naming the problem (the option, the file:line:column, the question id).
source "$(dirname "$0")/lib/cli.sh"
t=$cli_tmp
mkdir "$t/m"
cp "$BERTC_DATA/vocab/bert-base-uncased-vocab.txt" "$t/m/vocab.txt"
D="$BERTC_DATA/cmrc2018/cmrc2018_trial.json"
printf '{"data": [{"paragraphs": [{"context": "x",\n "qas": [}]}]}' >"$t/syntax.json"
printf '{"data": [{"paragraphs": [{"context": "a b c d e f g h", "qas": [{"id": "q-long", "question": "one two three four five six seven eight nine ten eleven twelve", "answers": []}]}]}]}' >"$t/long.json"
printf '{"data": [{"paragraphs": [{"context": "a b c", "qas": [{"id": "q1", "question": "who?", "answers": [{"text": "b", "answer_start": "2"}]}]}]}]}' >"$t/type.json"
expect 2 "missing required option --model" -- features --data "$D"
expect 2 "missing required option --data" -- features --model "$t/m"
expect 2 "--doc-stride 384 must be below --max-seq-length 384" -- features --model "$t/m" --data "$D" --doc-stride 384
expect 2 "--doc-stride 500 must be below --max-seq-length 128" -- features --model "$t/m" --data "$D" --max-seq-length 128 --doc-stride 500
expect 2 "--threads" -- features --model "$t/m" --data "$D" --threads 0
expect 2 "--max-seq-length" -- features --model "$t/m" --data "$D" --max-seq-length 12x
expect 2 "unknown option '--stride'" -- features --model "$t/m" --data "$D" --stride 3
expect 2 "$t/none.json" -- features --model "$t/m" --data "$t/none.json"
expect 2 "$t/syntax.json:2:" -- features --model "$t/m" --data "$t/syntax.json"
expect 2 "question \"q1\": field \"answers[0].answer_start\": expected an integer" -- features --model "$t/m" --data "$t/type.json"
expect 2 "vocab.txt" -- features --model "$t/nomodel" --data "$D"
# 12 question tokens in 15: no room for the context (Hugging Face fails here too).
expect 2 "question \"q-long\": its 12 tokens leave no room" -- features --model "$t/m" --data "$t/long.json" --max-seq-length 15 --doc-stride 2
# ... and 12 tokens leave 5 in 20, not more than the stride 8.
expect 2 "--doc-stride" -- features --model "$t/m" --data "$t/long.json" --max-seq-length 20 --doc-stride 8
# --max-query-length 4 makes room: 1 window.
cli_run features --model "$t/m" --data "$t/long.json" --max-seq-length 16 --doc-stride 2 --max-query-length 4
cli_check '[ "$rc" -eq 0 ] && grep -q "^features: 1 " "$cli_tmp/out"'
finish
