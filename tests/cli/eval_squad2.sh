#!/usr/bin/env bash
# bertc eval --version-2-with-negative prints exactly what evaluate-v2.0.py
# prints (tests/data/squad2_hand_expected.json, from tools/squad2_eval_ref.py),
# with and without a no-answer file; the v1.1 metric on SQuAD 2.0 data adds
# one note; the v2 options are checked.
source "$(dirname "$0")/lib/cli.sh"
D=tests/data
want() { # CASE: the expected output of tools/squad2_eval_ref.py for CASE
    sed -n "s/^ \"$1\": \"\\(.*\\)\",\\{0,1\\}\$/\\1/p" "$D/squad2_hand_expected.json" | sed 's/\\n/\n/g; s/\\"/"/g'
}
check() { # CASE ARGS...
    local c=$1
    shift
    cli_n=$((cli_n + 1))
    "$BERTC" eval --version-2-with-negative "$D/squad2_hand_data.json" "$D/squad2_hand_pred.json" "$@" \
        >"$cli_tmp/out" 2>"$cli_tmp/err" </dev/null
    local rc=$?
    want "$c" >"$cli_tmp/want"
    echo "case $cli_n ($c): bertc eval --version-2-with-negative ... $* -> exit $rc, $(wc -l <"$cli_tmp/out") lines"
    [ "$rc" -eq 0 ] || cli_bad "exit $rc: $(cat "$cli_tmp/err")"
    [ -s "$cli_tmp/want" ] || cli_bad "no expected output for $c"
    cmp -s "$cli_tmp/out" "$cli_tmp/want" || cli_bad "output differs: $(diff "$cli_tmp/out" "$cli_tmp/want" | head -5)"
    [ -s "$cli_tmp/err" ] && cli_bad "stderr not empty: $(cat "$cli_tmp/err")"
    return 0
}
check plain
check na --na-prob-file "$D/squad2_hand_na.json"
check na_t0.5 --na-prob-file="$D/squad2_hand_na.json" --na-prob-thresh 0.5
check t-1 --na-prob-thresh -1
check "plain py3.12" --python-sum 3.12
check "na_t0.5 py3.12" --na-prob-file "$D/squad2_hand_na.json" --na-prob-thresh 0.5 --python-sum=3.12

# --out-file: what the script's -o writes (json.dump, one line)
cli_n=$((cli_n + 1))
"$BERTC" eval --version-2-with-negative "$D/squad2_hand_data.json" "$D/squad2_hand_pred.json" \
    --na-prob-file "$D/squad2_hand_na.json" --out-file "$cli_tmp/o.json" >"$cli_tmp/out" 2>&1
rc=$?
want=$(sed -n 's/^ "na --out-file": "\(.*\)",\{0,1\}$/\1/p' "$D/squad2_hand_expected.json" | sed 's/\\"/"/g')
echo "case $cli_n: --out-file -> exit $rc: $(cat "$cli_tmp/o.json")"
[ "$rc" -eq 0 ] && [ ! -s "$cli_tmp/out" ] || cli_bad "exit $rc or output: $(cat "$cli_tmp/out")"
[ -n "$want" ] && [ "$(cat "$cli_tmp/o.json")" = "$want" ] || cli_bad "--out-file holds '$(cat "$cli_tmp/o.json")', want '$want'"
[ "$(tail -c 1 "$cli_tmp/o.json" | od -An -c | tr -d ' ')" = "}" ] || cli_bad "--out-file ends with a newline (json.dump writes none)"

# v1.1 metric on v2 data: one note
cli_n=$((cli_n + 1))
"$BERTC" eval "$D/squad2_hand_data.json" "$D/squad2_hand_pred.json" >"$cli_tmp/out" 2>"$cli_tmp/err"
echo "case $cli_n: v1.1 metric on v2 data -> $(cat "$cli_tmp/out") / $(cat "$cli_tmp/err")"
[ "$(grep -c "note: .*3 unanswerable (is_impossible) questions.*--version-2-with-negative" "$cli_tmp/err")" -eq 1 ] ||
    cli_bad "no single note about the v2 metric"

expect 2 "no prediction for question 'h1'" -- eval --version-2-with-negative "$D/squad2_hand_data.json" "$D/eval_hand_pred.json"
echo '{"h2": 1}' >"$cli_tmp/na.json"
expect 2 "no no-answer probability for question 'h1'" -- eval --version-2-with-negative "$D/squad2_hand_data.json" \
    "$D/squad2_hand_pred.json" --na-prob-file "$cli_tmp/na.json"
expect 2 "need --version-2-with-negative" -- eval "$D/squad2_hand_data.json" "$D/squad2_hand_pred.json" --out-file "$cli_tmp/x.json"
expect 2 "need --version-2-with-negative" -- eval "$D/squad2_hand_data.json" "$D/squad2_hand_pred.json" \
    --na-prob-file "$D/squad2_hand_na.json"
expect 2 "eval --python-sum: '3.10' is not 3.11 or 3.12" -- eval --version-2-with-negative "$D/squad2_hand_data.json" \
    "$D/squad2_hand_pred.json" --python-sum 3.10
expect 2 "does not go with --metric cmrc" -- eval --version-2-with-negative --metric cmrc "$D/squad2_hand_data.json" \
    "$D/squad2_hand_pred.json"
finish
