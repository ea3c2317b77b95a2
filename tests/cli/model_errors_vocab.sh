#!/usr/bin/env bash
# bertc init with a missing, empty or directory --vocab: exit 2, one line naming it.
set -u
t=$(mktemp -d); trap 'rm -rf "$t"' EXIT
fail=0
: >"$t/empty.txt"
for v in "$t/missing.txt" "$t/empty.txt" "$t"; do
    "$BERTC" init --config tiny --vocab "$v" --out "$t/m" >/dev/null 2>"$t/err"; rc=$?
    echo "--vocab $v: rc=$rc $(cat "$t/err")"
    [ "$rc" -eq 2 ] || { echo "FAIL: exit $rc, want 2"; fail=1; }
    grep -qF -- "$v" "$t/err" || { echo "FAIL: message does not name $v"; fail=1; }
    [ -e "$t/m" ] && { echo "FAIL: output written"; fail=1; rm -rf "$t/m"; }
done
# A vocab without a final newline still counts its last line
printf '[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello' >"$t/v5.txt"
"$BERTC" init --config tiny --vocab "$t/v5.txt" --out "$t/m" >"$t/out" 2>&1; rc=$?
echo "5-line vocab: rc=$rc $(cat "$t/out")"
[ "$rc" -eq 0 ] && grep -qF '"vocab_size": 5' "$t/m/config.json" || { echo "FAIL: vocab_size 5"; fail=1; }
exit $fail
