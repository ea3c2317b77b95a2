#!/usr/bin/env bash
# bertc eval prints exactly what evaluate-v1.1.py prints (values worked out by
# hand for tests/data/eval_hand_*.json, see tests/eval/test_eval.c), counts the
# unanswered questions on stderr and warns about a data version other than 1.1.
source "$(dirname "$0")/lib/cli.sh"
D=tests/data
check() { # WANT_STDOUT WANT_STDERR_SUBSTRING ARGS...
    local want=$1 err=$2
    shift 2
    cli_n=$((cli_n + 1))
    "$BERTC" eval "$@" >"$cli_tmp/out" 2>"$cli_tmp/err" </dev/null
    local rc=$?
    echo "case $cli_n: bertc eval $* -> exit $rc: $(cat "$cli_tmp/out") / $(cat "$cli_tmp/err")"
    [ "$rc" -eq 0 ] || cli_bad "exit $rc"
    [ "$(cat "$cli_tmp/out")" = "$want" ] || cli_bad "stdout is not '$want'"
    [ "$(wc -l <"$cli_tmp/out")" -eq 1 ] || cli_bad "stdout is not one line"
    grep -qF -- "$err" "$cli_tmp/err" || cli_bad "stderr lacks '$err'"
}
check '{"exact_match": 60.0, "f1": 64.66666666666666}' "1 unanswered questions" "$D/eval_hand_data.json" "$D/eval_hand_pred.json"
check '{"exact_match": 50.0, "f1": 67.77777777777777}' "1 unanswered questions" --metric=cmrc "$D/eval_hand_cmrc_data.json" "$D/eval_hand_cmrc_pred.json"
check '{"exact_match": 16.666666666666668, "f1": 16.666666666666668}' "Evaluation expects v-1.1, but got dataset with v-v1.0" \
    "$D/eval_hand_cmrc_data.json" "$D/eval_hand_cmrc_pred.json"
check '{"exact_match": 49.593188268684955, "f1": 69.91146592170931}' "200 unanswered questions" \
    "$BERTC_DATA/squad-v1.1/dev-v1.1.json" "$D/eval_squad_pred.json"
finish
