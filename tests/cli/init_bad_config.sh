#!/usr/bin/env bash
# bertc init with a bad --config (an unknown name, a missing file) or bad
# options: exit 2, one line on stderr naming the problem, no dir written.
set -u
t=$(mktemp -d); trap 'rm -rf "$t"' EXIT
V="$BERTC_DATA/vocab/bert-base-uncased-vocab.txt"
fail=0
# expect CODE 'STDERR SUBSTRING' ARGS...
expect() {
    local code=$1 want=$2; shift 2
    "$BERTC" init "$@" >"$t/out" 2>"$t/err"; local rc=$?
    echo "bertc init $* -> rc=$rc: $(cat "$t/err")"
    [ "$rc" -eq "$code" ] || { echo "FAIL: exit $rc, want $code"; fail=1; }
    grep -qF -- "$want" "$t/err" || { echo "FAIL: stderr lacks '$want'"; fail=1; }
    [ "$(wc -l <"$t/err")" -eq 1 ] || { echo "FAIL: stderr is not one line"; fail=1; }
    [ -e "$t/m" ] && { echo "FAIL: $t/m was created"; fail=1; rm -rf "$t/m"; }
}
expect 2 "--config huge: not a named config (tiny, mini, small, minilm, base, large)" --config huge --vocab "$V" --out "$t/m"
expect 2 "--config $t/none.json: not a named config" --config "$t/none.json" --vocab "$V" --out "$t/m"
expect 2 "missing required option --config" --vocab "$V" --out "$t/m"
expect 2 "missing required option --vocab" --config tiny --out "$t/m"
expect 2 "missing required option --out" --config tiny --vocab "$V"
expect 2 "--seed" --config tiny --vocab "$V" --out "$t/m" --seed -1
expect 2 "--seed" --config tiny --vocab "$V" --out "$t/m" --seed 12abc
expect 2 "unknown option '--layers'" --config tiny --vocab "$V" --out "$t/m" --layers 3
expect 2 "unexpected argument 'extra'" --config tiny --vocab "$V" --out "$t/m" extra
exit $fail
