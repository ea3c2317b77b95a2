#!/usr/bin/env bash
# Bad config.json files given to bertc: exit 2 and one line naming the file
# and the field (or line:column for malformed JSON). Nothing is written.
set -u
t=$(mktemp -d); trap 'rm -rf "$t"' EXIT
V="$BERTC_DATA/vocab/bert-base-uncased-vocab.txt"
fail=0
case_() { # NAME 'JSON' 'EXPECTED STDERR SUBSTRING'
    printf '%s' "$2" >"$t/$1.json"
    "$BERTC" init --config "$t/$1.json" --vocab "$V" --out "$t/m" >/dev/null 2>"$t/err"; local rc=$?
    echo "$1: rc=$rc $(cat "$t/err")"
    [ "$rc" -eq 2 ] || { echo "FAIL: $1: exit $rc, want 2"; fail=1; }
    grep -qF -- "$t/$1.json" "$t/err" || { echo "FAIL: $1: message does not name the file"; fail=1; }
    grep -qF -- "$3" "$t/err" || { echo "FAIL: $1: stderr lacks '$3'"; fail=1; }
    [ -e "$t/m" ] && { echo "FAIL: $1: output written"; fail=1; rm -rf "$t/m"; }
}
case_ relu '{"hidden_act": "relu"}' 'field hidden_act: "relu" is not supported'
case_ heads '{"hidden_size": 100, "num_attention_heads": 12}' 'field num_attention_heads: 12 does not divide hidden_size 100'
case_ negative '{"num_hidden_layers": -2}' 'field num_hidden_layers: -2 is out of range'
case_ type '{"hidden_size": "768"}' 'field hidden_size: expected an integer, got a string'
case_ relpos '{"position_embedding_type": "relative_key_query"}' 'field position_embedding_type'
case_ broken $'{\n  "hidden_size": 128,\n  "num_hidden_layers" 2\n}' ':3:'
# A model dir as --config takes its config.json
mkdir "$t/dir"; printf '{"hidden_act": "tanh"}' >"$t/dir/config.json"
"$BERTC" init --config "$t/dir" --vocab "$V" --out "$t/m" >/dev/null 2>"$t/err"; rc=$?
echo "dir: rc=$rc $(cat "$t/err")"
[ "$rc" -eq 2 ] && grep -qF "$t/dir/config.json: field hidden_act: \"tanh\"" "$t/err" || { echo "FAIL: dir config"; fail=1; }
exit $fail
