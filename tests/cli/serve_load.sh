#!/usr/bin/env bash
# bertc serve under a bounded load (bench/serve/serve_load, built with the project):
# 300 requests (100 in the sanitizer build) at concurrency 1, 8 and 32,
# 10 % malformed; every valid request gets 200 and the answer it gets alone,
# every malformed one 400, no connection fails, and the server is still
# healthy and exits 0 on SIGTERM. scripts/serve_load.sh runs 10,000 per level.
source "$(dirname "$0")/lib/cli.sh"
load="${BERTC_BUILD:?}/serve_load"
[ -x "$load" ] || { echo "FAIL: $load not built"; exit 1; }
n=300
[ -n "${BERTC_SANITIZED:-}" ] && n=100
M=tests/ref/train3/init
"$BERTC" serve --model $M --port 0 --port-file "$cli_tmp/port" --threads 1 --batch-wait-ms 2 2>"$cli_tmp/serve.err" &
pid=$!
trap 'kill $pid 2>/dev/null; rm -rf "$cli_tmp"' EXIT
for _ in $(seq 400); do [ -s "$cli_tmp/port" ] && break; sleep 0.05; done
port=$(cat "$cli_tmp/port") || { cli_bad "serve did not start: $(cat "$cli_tmp/serve.err")"; finish; }
names=("Kopa Labs" "Vima Tesa" "the Orun river" "Dire Pogu" "Lake Semba" "Tarn Hall")
for i in $(seq 0 15); do
    ctx="${names[i % 6]} was founded by ${names[(i + 1) % 6]} in $((1900 + 7 * i))."
    for k in $(seq 0 $((i % 4 * 3))); do ctx="$ctx The museum near ${names[(i + k) % 6]} holds $((10 * k + i)) paintings and a café."; done
    printf '{"context": "%s", "question": "Who founded %s?"}\n' "$ctx" "${names[i % 6]}"
done >"$cli_tmp/bodies.jsonl"
for c in 1 8 32; do
    cli_n=$((cli_n + 1))
    "$load" --port "$port" --bodies "$cli_tmp/bodies.jsonl" --requests $n --concurrency $c --bad-percent 10 \
        >"$cli_tmp/out" 2>"$cli_tmp/err"
    rc=$?
    echo "case $cli_n: $(cat "$cli_tmp/out") -> exit $rc"
    [ "$rc" -eq 0 ] || cli_bad "load at concurrency $c: $(head -5 "$cli_tmp/err")"
done
curl_ok=$(command -v curl >/dev/null && curl -s "http://127.0.0.1:$port/health")
[ -z "$curl_ok" ] || echo "$curl_ok" | grep -q ok || cli_bad "unhealthy after the load"
kill -TERM $pid
wait $pid || cli_bad "serve exit $? after SIGTERM: $(tail -3 "$cli_tmp/serve.err")"
finish
