#!/usr/bin/env bash
# bertc serve behind an API key (--api-key, --api-key-file, BERTC_API_KEY):
# the options in --help; one-line errors (exit 2) for a key file that is
# missing, a directory, empty, only a newline, two lines, over 512 bytes, for
# a key with a space or empty, both options at once, an empty BERTC_API_KEY;
# a key file's trailing newline (LF or CRLF) is dropped. On a server with a
# key: /health open; every other path without a key, with a wrong key of the
# same length, a prefix, one byte more, a Basic header -> 401 with
# WWW-Authenticate: Bearer and {"error": ..., "status": 401}; with the key
# (header, or ?key= on a GET) the answers; ?key= on a POST is not enough;
# /metrics counts the 401s. Binding beyond loopback without a key prints one
# warning line; with a key, or on loopback, none. Under load: serve_load's
# 300 requests (10 % malformed) at concurrency 8 with the key, every valid one
# 200 with its own answer, while 160 curl requests at concurrency 16 without
# a key or with a wrong one all get 401. Needs curl and jq (skipped without).
source "$(dirname "$0")/lib/cli.sh"
for t in curl jq; do
    if ! command -v $t >/dev/null; then echo "skipped: $t is not installed (scripts/ci_extras.sh installs it)"; exit 0; fi
done
M=tests/ref/train3/init
KEY=s3cret-Key_1
expect_help serve "--api-key-file PATH" --api-key --api-key-file BERTC_API_KEY "visible to other users"

# ---- the key's sources and their errors (before the model is loaded) ----
printf '' >"$cli_tmp/empty.key"
printf '\n' >"$cli_tmp/newline.key"
printf 'abc\ndef\n' >"$cli_tmp/two.key"
head -c 600 /dev/zero | tr '\0' k >"$cli_tmp/long.key"
expect 2 "serve --api-key-file $cli_tmp/none.key: cannot open it: No such file or directory" -- \
    serve --model $M --port 0 --api-key-file "$cli_tmp/none.key"
expect 2 "serve --api-key-file $cli_tmp: cannot read it: Is a directory" -- serve --model $M --port 0 --api-key-file "$cli_tmp"
expect 2 "serve --api-key-file $cli_tmp/empty.key: the file holds no key" -- serve --model $M --port 0 --api-key-file "$cli_tmp/empty.key"
expect 2 "serve --api-key-file $cli_tmp/newline.key: the file holds no key" -- serve --model $M --port 0 --api-key-file "$cli_tmp/newline.key"
expect 2 "serve --api-key-file $cli_tmp/two.key: not a usable API key: byte 3 is a line break" -- \
    serve --model $M --port 0 --api-key-file "$cli_tmp/two.key"
expect 2 "serve --api-key-file $cli_tmp/long.key: not a usable API key: over the limit of 512 bytes" -- \
    serve --model $M --port 0 --api-key-file "$cli_tmp/long.key"
expect 2 "serve --api-key: not a usable API key: byte 3 is a space" -- serve --model $M --port 0 --api-key "bad key"
expect 2 "serve --api-key: empty value" -- serve --model $M --port 0 --api-key ""
expect 2 "serve: --api-key and --api-key-file both give a key; give one of them" -- \
    serve --model $M --port 0 --api-key $KEY --api-key-file "$cli_tmp/two.key"
BERTC_API_KEY= expect 2 "serve: BERTC_API_KEY is set but empty (unset it to run without a key)" -- serve --model $M --port 0
BERTC_API_KEY="a b" expect 2 "serve BERTC_API_KEY: not a usable API key: byte 1 is a space" -- serve --model $M --port 0
# no key file is quoted back: the messages above name the file, never its bytes
grep -q "abc\|def" "$cli_tmp/err" && cli_bad "a key file's content in a message"

# start NAME ARGS...: a server of $M on a free port (stderr in $cli_tmp/NAME.err); sets port and pid
start() {
    local name=$1
    shift
    cli_serve "$name" --model $M --batch-wait-ms 2 "$@"
}
stop() { kill -TERM "$pid"; wait "$pid" || cli_bad "exit $? after SIGTERM"; }
# req NAME METHOD PATH [curl args]: status in $cli_tmp/NAME.code, head in NAME.head, body in NAME.body
req() {
    local name=$1 method=$2 path=$3
    shift 3
    curl -s -X "$method" -D "$cli_tmp/$name.head" -o "$cli_tmp/$name.body" -w '%{http_code}' "$@" \
        "http://127.0.0.1:$port$path" >"$cli_tmp/$name.code"
}
# want NAME CODE [TEXT]: the status is CODE (and the head or body holds TEXT)
want() {
    cli_n=$((cli_n + 1))
    local got
    got=$(cat "$cli_tmp/$1.code")
    echo "case $cli_n: $1 -> $got: $(head -c 160 "$cli_tmp/$1.body" | tr '\n' ' ')"
    [ "$got" = "$2" ] || cli_bad "$1: status $got, want $2"
    [ -z "${3:-}" ] || cat "$cli_tmp/$1.head" "$cli_tmp/$1.body" | grep -qF -- "$3" || cli_bad "$1 lacks '$3'"
}
# is401 NAME CHALLENGE MESSAGE: 401, WWW-Authenticate CHALLENGE, the JSON error MESSAGE
is401() {
    want "$1" 401 "$3"
    grep -qiF "WWW-Authenticate: $2" "$cli_tmp/$1.head" || cli_bad "$1: no 'WWW-Authenticate: $2'"
    grep -qi '^Content-Type: application/json' "$cli_tmp/$1.head" || cli_bad "$1: not JSON"
    [ "$(jq -c '[(.error | type), .status]' "$cli_tmp/$1.body" 2>/dev/null)" = '["string",401]' ] ||
        cli_bad "$1: the body is not {\"error\": \"...\", \"status\": 401}"
}

# ---- a server with the key from a file (CRLF line end) ----
printf '%s\r\n' "$KEY" >"$cli_tmp/key"
start keyed --api-key-file "$cli_tmp/key"
grep -qF "serve: every request but GET /health needs the API key (from --api-key-file)" "$cli_tmp/keyed.err" ||
    cli_bad "no line saying that the key is needed"
grep -q "warning" "$cli_tmp/keyed.err" && cli_bad "a warning on loopback with a key"
printf '{"context": "Kopa Labs was founded by Dire Pogu in 1953.", "question": "Who founded Kopa Labs?"}' >"$cli_tmp/q.json"
B="Bearer realm=\"bertc\""
W="Bearer realm=\"bertc\", error=\"invalid_token\""
ans() { req "$1" POST /v1/answer -H 'Content-Type: application/json' --data-binary @"$cli_tmp/q.json" "${@:2}"; }
req health GET /health; want health 200 '"status": "ok"'
ans nokey; is401 nokey "$B" "this server needs an API key: send the header 'Authorization: Bearer KEY'"
ans good -H "Authorization: Bearer $KEY"; want good 200 '"answers": [{"text": '
ans lower -H "Authorization: bearer $KEY"; want lower 200 '"answers"'
ans wrong -H "Authorization: Bearer s3cret-Key_2"; is401 wrong "$W" '"error": "wrong API key"'
ans prefix -H "Authorization: Bearer s3cret-Key_"; is401 prefix "$W" "wrong API key"
ans longer -H "Authorization: Bearer ${KEY}x"; is401 longer "$W" "wrong API key"
ans longkey -H "Authorization: Bearer $(cat "$cli_tmp/long.key")"; is401 longkey "$W" "wrong API key"
ans basic -H "Authorization: Basic $(printf 'u:%s' $KEY | base64)"; is401 basic "$B" "is not 'Bearer KEY'"
req postquery POST "/v1/answer?key=$KEY" -H 'Content-Type: application/json' --data-binary @"$cli_tmp/q.json"
is401 postquery "$B" "needs an API key"
req page GET /; is401 page "$B" "needs an API key"
req pagekey GET "/?key=$KEY"; want pagekey 200 "headers.Authorization='Bearer '+key"
grep -qi '^Referrer-Policy: no-referrer' "$cli_tmp/pagekey.head" || cli_bad "no Referrer-Policy on the page"
req pagehdr GET / -H "Authorization: Bearer $KEY"; want pagehdr 200 '<textarea id="context"'
req pagewrong GET "/?key=s3cret-Key_2"; is401 pagewrong "$W" "wrong API key"
req nf GET /nope; is401 nf "$B" "needs an API key"
req nfkey GET /nope -H "Authorization: Bearer $KEY"; want nfkey 404 "no such path"
req metrics GET /metrics; is401 metrics "$B" "needs an API key"
req metricskey GET /metrics -H "Authorization: Bearer $KEY"; want metricskey 200 'bertc_serve_requests_total{code="401"}'
n401=$(grep -oE '^bertc_serve_requests_total\{code="401"\} [0-9]+' "$cli_tmp/metricskey.body" | awk '{ print $2 }')
cli_n=$((cli_n + 1))
echo "case $cli_n: /metrics counts ${n401:-no} 401s (want 11: 7 on /v1/answer, /, /?key=wrong, /nope, /metrics)"
[ "${n401:-0}" = 11 ] || cli_bad "401s counted: ${n401:-none}"
# the key is never quoted back
cat "$cli_tmp"/*.body | grep -qF "$KEY" && cli_bad "a response holds the key"

# ---- under load: with the key (serve_load checks every answer), and without or wrong at once ----
load="${BERTC_BUILD:?}/serve_load"
n=300 m=160
[ -n "${BERTC_SANITIZED:-}" ] && n=100 m=60
if [ -x "$load" ]; then
    names=("Kopa Labs" "Vima Tesa" "the Orun river" "Dire Pogu")
    for i in $(seq 0 7); do
        printf '{"context": "%s was founded by %s in %d. It has %d rooms.", "question": "Who founded %s?"}\n' \
            "${names[i % 4]}" "${names[(i + 1) % 4]}" $((1900 + 7 * i)) $((3 * i)) "${names[i % 4]}"
    done >"$cli_tmp/bodies.jsonl"
    "$load" --port "$port" --bodies "$cli_tmp/bodies.jsonl" --requests $n --concurrency 8 --bad-percent 10 \
        --api-key $KEY >"$cli_tmp/load.out" 2>"$cli_tmp/load.err" &
    lp=$!
    seq $m | xargs -P 16 -I{} sh -c 'k=$(({} % 2)); if [ $k = 0 ]; then h="X-No-Key: 1"; else h="Authorization: Bearer s3cret-Key_2"; fi
        c=$(curl -s -o /dev/null -w "%{http_code}" -H "$h" -H "Content-Type: application/json" --data-binary @"$1" "http://127.0.0.1:$2/v1/answer")
        echo "$k $c"' _ "$cli_tmp/q.json" "$port" >"$cli_tmp/flood"
    wait $lp
    rc=$?
    cli_n=$((cli_n + 1))
    echo "case $cli_n: with the key: $(cat "$cli_tmp/load.out") -> exit $rc"
    [ "$rc" -eq 0 ] || cli_bad "the load with the key: $(head -5 "$cli_tmp/load.err")"
    cli_n=$((cli_n + 1))
    echo "case $cli_n: meanwhile without a key / with a wrong one: $(sort "$cli_tmp/flood" | uniq -c | tr '\n' ' ')"
    [ "$(wc -l <"$cli_tmp/flood")" -eq $m ] || cli_bad "$(wc -l <"$cli_tmp/flood") of $m answers"
    grep -qv ' 401$' "$cli_tmp/flood" && cli_bad "a request without the right key did not get 401"
else
    cli_bad "$load not built"
fi
req healthafter GET /health; want healthafter 200 '"status": "ok"'
stop

# ---- BERTC_API_KEY; the warning line beyond loopback ----
BERTC_API_KEY=$KEY start env
grep -qF "(from BERTC_API_KEY)" "$cli_tmp/env.err" || cli_bad "the key from BERTC_API_KEY is not said"
ans envgood -H "Authorization: Bearer $KEY"; want envgood 200 '"answers"'
ans envnokey; is401 envnokey "$B" "needs an API key"
stop
start open0 --bind 0.0.0.0
cli_n=$((cli_n + 1))
nw=$(grep -c "warning" "$cli_tmp/open0.err")
echo "case $cli_n: --bind 0.0.0.0 without a key: $nw warning line(s): $(grep warning "$cli_tmp/open0.err")"
[ "$nw" = 1 ] || cli_bad "want exactly one warning line"
grep -qxF "bertc: warning: serve --bind 0.0.0.0 listens beyond this machine with no API key: anyone who can reach the port can use it (--api-key-file PATH or BERTC_API_KEY sets one)" \
    "$cli_tmp/open0.err" || cli_bad "the warning's words"
ans open200; want open200 200 '"answers"'
stop
start closed0 --bind 0.0.0.0 --api-key $KEY
cli_n=$((cli_n + 1))
echo "case $cli_n: --bind 0.0.0.0 with a key: $(grep -c warning "$cli_tmp/closed0.err") warning lines"
grep -q warning "$cli_tmp/closed0.err" && cli_bad "a warning with a key"
stop
start loop
cli_n=$((cli_n + 1))
echo "case $cli_n: 127.0.0.1 without a key: $(grep -c warning "$cli_tmp/loop.err") warning lines"
grep -q warning "$cli_tmp/loop.err" && cli_bad "a warning on loopback"
stop
cli_pids=()
finish
