#!/usr/bin/env bash
# bertc features --help: exit 0, usage and every option on stdout, nothing on stderr.
set -u
out=$("$BERTC" features --help 2>/tmp/features_help.$$); rc=$?
err=$(cat /tmp/features_help.$$); rm -f /tmp/features_help.$$
echo "bertc features --help -> rc=$rc, $(echo "$out" | wc -l) lines"
fail=0
[ $rc -eq 0 ] || { echo "FAIL: exit $rc"; fail=1; }
[ -z "$err" ] || { echo "FAIL: stderr: $err"; fail=1; }
for w in "bertc features --model DIR --data FILE" --model --data --max-seq-length --doc-stride --max-query-length \
    --threads --dump --cache; do
    echo "$out" | grep -qF -- "$w" || { echo "FAIL: help lacks '$w'"; fail=1; }
done
"$BERTC" --help | grep -q "features" || { echo "FAIL: bertc --help does not list features"; fail=1; }
exit $fail
