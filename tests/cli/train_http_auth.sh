#!/usr/bin/env bash
# bertc train --http behind an API key (--api-key, --api-key-file,
# BERTC_API_KEY, as bertc serve): the options in --help; a key option
# without --http and a bad key file are one-line errors (exit 2) before
# anything is trained; during a real (tiny) run on --http-bind 0.0.0.0 with
# a key file: no warning, the "live page:" line says a key is needed, every
# endpoint without a key or with a wrong one (same length, a prefix) gets 401
# with WWW-Authenticate: Bearer and a JSON error, with the header or ?key=
# the page and its data, /favicon.ico open; the page's script sends the key.
# A short run on 0.0.0.0 without a key prints exactly one warning line, on
# loopback none; so does a 2-rank job under mpirun (rank 0 alone serves the
# page), where there is one. Needs curl and jq (skipped without).
source "$(dirname "$0")/lib/cli.sh"
source "$(dirname "$0")/lib/mpi.sh"
for t in curl jq; do
    if ! command -v $t >/dev/null; then echo "skipped: $t is not installed (scripts/ci_extras.sh installs it)"; exit 0; fi
done
KEY=Live-page_key.42
COMMON=(--model tests/ref/train3/init --train tests/data/train_small.json --max-seq-length 64 --doc-stride 16
        --batch 4 --micro-batch 2 --lr 1e-3 --save-every 0 --threads 1 --save-every-minutes 0
        --monitor-interval 0.2 --log-every 1000)
expect_help train "usage: bertc train" --api-key --api-key-file BERTC_API_KEY "visible to other users"
expect 2 "train --api-key: there is no live page to protect (add --http PORT)" -- \
    train "${COMMON[@]}" --max-steps 2 --out "$cli_tmp/x" --api-key $KEY
printf '\n' >"$cli_tmp/empty.key"
expect 2 "train --api-key-file $cli_tmp/empty.key: the file holds no key" -- \
    train "${COMMON[@]}" --max-steps 2 --out "$cli_tmp/x" --http 0 --api-key-file "$cli_tmp/empty.key"
expect 2 "train --api-key-file $cli_tmp/none: cannot open it" -- \
    train "${COMMON[@]}" --max-steps 2 --out "$cli_tmp/x" --http 0 --api-key-file "$cli_tmp/none"
cli_absent "$cli_tmp/x"

printf '%s\n' "$KEY" >"$cli_tmp/key"
R=$cli_tmp/run
"$BERTC" train "${COMMON[@]}" --max-steps 100000 --out "$R" --http 0 --http-bind 0.0.0.0 \
    --api-key-file "$cli_tmp/key" >"$R.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; rm -rf "$cli_tmp"' EXIT
port=$(cli_live_port "$R.log" 0.0.0.0)
echo "live page on port ${port:-none}: $(grep -F 'live page' "$R.log")"
[ -n "$port" ] || cli_bad "no 'live page:' line: $(head -5 "$R.log")"
grep -qF "it needs the API key: open /?key=KEY" "$R.log" || cli_bad "the live page line does not say a key is needed"
grep -q "warning" "$R.log" && cli_bad "a warning with a key: $(grep warning "$R.log")"
cli_wait_lines "$R/metrics.csv" 2
# get NAME PATH [curl args]: status in NAME.code, head in NAME.head, body in NAME.body
get() {
    local name=$1 path=$2
    shift 2
    curl -s -D "$cli_tmp/$name.head" -o "$cli_tmp/$name.body" -w '%{http_code}' "$@" "http://127.0.0.1:$port$path" \
        >"$cli_tmp/$name.code"
}
want() { # NAME CODE TEXT
    cli_n=$((cli_n + 1))
    local got
    got=$(cat "$cli_tmp/$1.code")
    echo "case $cli_n: $1 -> $got: $(head -c 140 "$cli_tmp/$1.body" | tr '\n' ' ')"
    [ "$got" = "$2" ] || cli_bad "$1: status $got, want $2"
    cat "$cli_tmp/$1.head" "$cli_tmp/$1.body" | grep -qF -- "$3" || cli_bad "$1 lacks '$3'"
    if [ "$2" = 401 ]; then
        grep -qiF 'WWW-Authenticate: Bearer realm="bertc"' "$cli_tmp/$1.head" || cli_bad "$1: no WWW-Authenticate"
        [ "$(jq -c '[(.error | type), .status]' "$cli_tmp/$1.body" 2>/dev/null)" = '["string",401]' ] ||
            cli_bad "$1: the body is not {\"error\": \"...\", \"status\": 401}"
    fi
}
if [ -n "$port" ]; then
    for p in / /api/status /metrics /charts /nope; do
        n=none${p//\//_}
        get "$n" "$p"; want "$n" 401 "needs an API key"
    done
    get wrong /api/status -H "Authorization: Bearer Live-page_key.43"; want wrong 401 'error="invalid_token"'
    get prefix /api/status -H "Authorization: Bearer Live-page_key.4"; want prefix 401 "wrong API key"
    get qwrong "/?key=Live-page_key.43"; want qwrong 401 "wrong API key"
    get status /api/status -H "Authorization: Bearer $KEY"; want status 200 '"state":"training"'
    get metrics /metrics -H "Authorization: Bearer $KEY"; want metrics 200 "bertc_step"
    get page "/?key=$KEY"; want page 200 '<svg id="chart-loss"'
    grep -qF "opt.headers.Authorization='Bearer '+key" "$cli_tmp/page.body" || cli_bad "the page's script does not send the key"
    grep -qiF "Referrer-Policy: no-referrer" "$cli_tmp/page.head" || cli_bad "no Referrer-Policy on the page"
    get charts "/charts?key=$KEY"; want charts 200 "chart-"
    get fav /favicon.ico; want fav 204 ""
    grep -rqF "$KEY" "$R" && cli_bad "the key is written in the run dir"
fi
kill -TERM $pid
wait $pid
rc=$?
echo "keyed run: SIGTERM -> exit $rc"
[ "$rc" -eq 75 ] || [ "$rc" -eq 0 ] || cli_bad "the keyed run ended with $rc: $(tail -3 "$R.log")"

# the warning: beyond loopback without a key, exactly one line; on loopback none
for bind in 0.0.0.0 127.0.0.1; do
    cli_n=$((cli_n + 1))
    "$BERTC" train "${COMMON[@]}" --max-steps 2 --out "$cli_tmp/w$bind" --http 0 --http-bind $bind >"$cli_tmp/w.log" 2>&1
    rc=$?
    nw=$(grep -c warning "$cli_tmp/w.log")
    echo "case $cli_n: --http-bind $bind without a key -> exit $rc, $nw warning line(s): $(grep warning "$cli_tmp/w.log")"
    [ "$rc" -eq 0 ] || cli_bad "the run failed: $(tail -3 "$cli_tmp/w.log")"
    if [ $bind = 0.0.0.0 ]; then
        [ "$nw" = 1 ] || cli_bad "want one warning line"
        grep -qF "bertc: warning: train --http-bind 0.0.0.0 listens beyond this machine with no API key" "$cli_tmp/w.log" ||
            cli_bad "the warning's words"
    else
        [ "$nw" = 0 ] || cli_bad "a warning on loopback"
    fi
done
if command -v mpirun >/dev/null && "$BERTC" version | grep -q "^mpi: built in"; then
    cli_n=$((cli_n + 1))
    mpi_run 2 "$BERTC" train "${COMMON[@]}" --max-steps 2 --out "$cli_tmp/mpi" --http 0 --http-bind 0.0.0.0 \
        >"$cli_tmp/mpi.log" 2>&1
    rc=$?
    nw=$(grep -c "bertc: warning: train --http-bind" "$cli_tmp/mpi.log")
    echo "case $cli_n: mpirun -np 2, --http-bind 0.0.0.0 without a key -> exit $rc, $nw warning line(s)"
    [ "$rc" -eq 0 ] || cli_bad "the 2-rank run failed: $(tail -3 "$cli_tmp/mpi.log")"
    [ "$nw" = 1 ] || cli_bad "want one warning line from 2 ranks"
else
    echo "(no mpirun or no MPI build: the 2-rank case is not run)"
fi
finish
