# bertc tokenize --help: usage on stdout, exit 0, every option listed, nothing on stderr.
set -u
: "${BERTC:?set BERTC to the bertc binary}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
"$BERTC" tokenize --help >"$tmp/out" 2>"$tmp/err"
rc=$?
echo "bertc tokenize --help -> exit $rc, $(wc -l <"$tmp/out") lines on stdout, $(wc -c <"$tmp/err") bytes on stderr"
[ "$rc" -eq 0 ] || { echo "FAIL: exit $rc, want 0"; fail=1; }
[ -s "$tmp/err" ] && { echo "FAIL: stderr not empty"; fail=1; }
for want in "usage: bertc tokenize" --vocab --cased --offsets --help; do
    grep -qF -- "$want" "$tmp/out" || { echo "FAIL: --help lacks '$want'"; fail=1; }
done
"$BERTC" --help | grep -q "^  tokenize " || { echo "FAIL: bertc --help does not list tokenize"; fail=1; }
[ "$fail" -eq 0 ] && echo "ok"
exit "$fail"
