#!/usr/bin/env bash
# bertc init --out FILE, where FILE exists and is not a directory: exit 2, the
# file untouched. And --out inside a file (a/b with a a file): exit 2 too.
set -u
t=$(mktemp -d); trap 'rm -rf "$t"' EXIT
V="$BERTC_DATA/vocab/bert-base-uncased-vocab.txt"
fail=0
echo "precious" >"$t/file"
"$BERTC" init --config tiny --vocab "$V" --out "$t/file" >"$t/out" 2>"$t/err"; rc=$?
echo "rc=$rc: $(cat "$t/err")"
[ "$rc" -eq 2 ] || { echo "FAIL: exit $rc, want 2"; fail=1; }
grep -qF "bertc: --out $t/file: exists and is not a directory" "$t/err" || { echo "FAIL: message"; fail=1; }
[ "$(cat "$t/file")" = precious ] || { echo "FAIL: the file was changed"; fail=1; }
"$BERTC" init --config tiny --vocab "$V" --out "$t/file/sub" >"$t/out" 2>"$t/err"; rc=$?
echo "rc=$rc: $(cat "$t/err")"
[ "$rc" -eq 2 ] || { echo "FAIL: exit $rc under a file, want 2"; fail=1; }
grep -qF "$t/file" "$t/err" || { echo "FAIL: message does not name the path"; fail=1; }
exit $fail
