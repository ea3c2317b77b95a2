#!/usr/bin/env bash
# bertc ask: --help, errors, and an answer with its score and context.
source "$(dirname "$0")/lib/cli.sh"
M=tests/ref/train3/init
CTX="Kopa Labs was founded by Dire Pogu in 1953. The chief executive of Kopa Labs is Vima Tesa."
expect_help ask "usage: bertc ask --model DIR --context TEXT|@FILE --question TEXT" --nbest --max-seq-length --around
expect 2 "missing required option --question" -- ask --model $M --context "$CTX"
expect 2 "ask --nbest: 0 is out of range"     -- ask --model $M --context "$CTX" --question "Who?" --nbest 0
expect 2 "$cli_tmp/none.txt"                  -- ask --model $M --context @$cli_tmp/none.txt --question "Who?"
printf 'bad \xff byte' >"$cli_tmp/bad.txt"
expect 2 "invalid UTF-8"                      -- ask --model $M --context @$cli_tmp/bad.txt --question "Who?"
expect 2 "no such model dir"                  -- ask --model $cli_tmp/none --context "$CTX" --question "Who?"
"$BERTC" ask --model $M --context "$CTX" --question "Who founded Kopa Labs?" --max-seq-length 64 --doc-stride 16 \
    --nbest 3 >"$cli_tmp/out" 2>"$cli_tmp/err"
rc=$?
echo "ask -> exit $rc"; cat "$cli_tmp/out"
[ "$rc" -eq 0 ] || cli_bad "ask failed: $(cat "$cli_tmp/err")"
for k in 1 2 3; do grep -q "^$k\. answer: " "$cli_tmp/out" || cli_bad "no answer $k"; done
grep -qE '^   score: -?[0-9.]+ \(start -?[0-9.]+ \+ end -?[0-9.]+\), probability [0-9.]+$' "$cli_tmp/out" || cli_bad "no score line"
grep -qF '   context: ' "$cli_tmp/out" || cli_bad "no context line"
grep -q '\[.*\]' "$cli_tmp/out" || cli_bad "the answer is not marked in the context"
echo "$CTX" >"$cli_tmp/ctx.txt"
"$BERTC" ask --model $M --context "@$cli_tmp/ctx.txt" --question "Who founded Kopa Labs?" --max-seq-length 64 \
    --doc-stride 16 >"$cli_tmp/out2" 2>/dev/null || cli_bad "ask --context @FILE failed"
head -1 "$cli_tmp/out" | sed 's/^1\. //' >"$cli_tmp/a1"
head -1 "$cli_tmp/out2" >"$cli_tmp/a2"
cmp -s "$cli_tmp/a1" "$cli_tmp/a2" || cli_bad "@FILE gives another answer: $(cat "$cli_tmp/a2")"
# A model with fewer positions than the default 384 (as bertc demo's): without
# --max-seq-length, ask uses the model's max_position_embeddings; a given
# length that does not fit is an error.
P=$(grep -o '"max_position_embeddings": *[0-9]*' $M/config.json | grep -o '[0-9]*$')
"$BERTC" ask --model $M --context "$CTX" --question "Who founded Kopa Labs?" >"$cli_tmp/out3" 2>"$cli_tmp/err3"
rc=$?
echo "ask without --max-seq-length (model has $P positions) -> exit $rc: $(cat "$cli_tmp/err3")"
[ "$rc" -eq 0 ] && grep -q '^answer: ' "$cli_tmp/out3" || cli_bad "ask without --max-seq-length failed"
grep -q "max_position_embeddings $P: windows of $P tokens" "$cli_tmp/err3" || cli_bad "no line about the shorter windows"
expect 2 "--max-seq-length 384 exceeds the model's max_position_embeddings $P" -- ask --model $M --context "$CTX" \
    --question "Who?" --max-seq-length 384
finish
