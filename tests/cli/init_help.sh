#!/usr/bin/env bash
# bertc init --help: usage and every option on stdout, nothing on stderr, exit 0.
set -u
t=$(mktemp -d); trap 'rm -rf "$t"' EXIT
fail=0
"$BERTC" init --help >"$t/out" 2>"$t/err"; rc=$?
echo "rc=$rc"; cat "$t/out"
[ "$rc" -eq 0 ] || { echo "FAIL: exit $rc, want 0"; fail=1; }
[ -s "$t/err" ] && { echo "FAIL: stderr not empty:"; cat "$t/err"; fail=1; }
for want in "usage: bertc init --config NAME|FILE --vocab FILE --out DIR" --config --vocab --out --seed --cased --force; do
    grep -qF -- "$want" "$t/out" || { echo "FAIL: help lacks '$want'"; fail=1; }
done
# bertc --help lists the command with its summary
"$BERTC" --help | grep -qE '^  init +write a randomly initialised model dir' || { echo "FAIL: bertc --help lacks init"; fail=1; }
exit $fail
