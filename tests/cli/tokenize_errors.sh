# bertc tokenize bad usage and bad vocab files: exit 2, one line on stderr naming the problem
# (and the file), nothing on stdout.
set -u
: "${BERTC:?set BERTC to the bertc binary}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
n=0

expect2() { # MESSAGE ARGS...: exit 2, MESSAGE in the one stderr line, stdout empty
    local msg=$1
    shift
    n=$((n + 1))
    printf 'some text\n' | "$BERTC" "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    echo "case $n: bertc $* -> exit $rc: $(head -c 300 "$tmp/err")"
    [ "$rc" -eq 2 ] || { echo "FAIL: exit $rc, want 2"; fail=1; }
    grep -qF -- "$msg" "$tmp/err" || { echo "FAIL: stderr lacks '$msg'"; fail=1; }
    [ "$(wc -l <"$tmp/err")" -eq 1 ] || { echo "FAIL: stderr is not one line"; fail=1; }
    [ -s "$tmp/out" ] && { echo "FAIL: stdout not empty"; fail=1; }
    return 0
}

expect2 "$tmp/missing/vocab.txt: No such file" tokenize --vocab "$tmp/missing/vocab.txt"
expect2 "missing required option --vocab" tokenize
expect2 "unknown option '--lower'" tokenize --vocab "$tmp/v.txt" --lower
expect2 "unexpected argument 'extra'" tokenize --vocab "$tmp/v.txt" extra
: >"$tmp/empty.txt"
expect2 "$tmp/empty.txt: empty vocabulary file" tokenize --vocab "$tmp/empty.txt"
printf '[PAD]\n[UNK]\n[CLS]\n' >"$tmp/nosep.txt"
expect2 "$tmp/nosep.txt: no [SEP] token" tokenize --vocab "$tmp/nosep.txt"
printf '[PAD]\n[UNK]\n[CLS]\n[SEP]\n[UNK]\n' >"$tmp/dup.txt"
expect2 "$tmp/dup.txt:5: duplicate token '[UNK]' (also on line 2)" tokenize --vocab "$tmp/dup.txt"
printf '[PAD]\n[UNK]\n\xff\n' >"$tmp/bad.txt"
expect2 "$tmp/bad.txt:3: invalid UTF-8" tokenize --vocab "$tmp/bad.txt"
expect2 "is a directory" tokenize --vocab "$tmp"
[ "$fail" -eq 0 ] && echo "ok: $n cases"
exit "$fail"
