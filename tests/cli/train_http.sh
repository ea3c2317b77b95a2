#!/usr/bin/env bash
# bertc train --http: the live page while a real (tiny) run trains. The
# endpoints answer (/, /api/status, /metrics, /charts); bad requests (unknown
# paths, POST, a 100 KB header, garbage, 100 connections held open and
# silent) crash nothing; a second run asking for the same port trains on
# with one warning; and the final weights are byte-identical to a run
# without --http. HTTP by bash's /dev/tcp (no curl needed).
source "$(dirname "$0")/lib/cli.sh"

STEPS=200
[ "${BERTC_SANITIZED:-0}" = 1 ] && STEPS=80
COMMON=(--model tests/ref/train3/init --train tests/data/train_small.json --max-seq-length 64 --doc-stride 16
        --batch 4 --micro-batch 2 --max-steps "$STEPS" --lr 1e-3 --save-every 50 --keep 2 --threads 2
        --save-every-minutes 0 --monitor-interval 0.2 --log-every 1000)

# http PORT REQUEST-TEXT: prints the whole answer (10 s at most)
http() {
    local port=$1 req=$2
    (
        exec 3<>"/dev/tcp/127.0.0.1/$port" || exit 1
        printf '%b' "$req" >&3
        timeout 10 cat <&3
    ) 2>/dev/null
}
get() { http "$1" "GET $2 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"; }
code() { head -1 | awk '{ print $2 }'; }

echo "run A: $STEPS steps without --http"
"$BERTC" train "${COMMON[@]}" --out "$cli_tmp/A" >"$cli_tmp/A.log" 2>&1 || cli_bad "A failed: $(tail -3 "$cli_tmp/A.log")"

echo "run B: the same with --http 0 (any free port), under requests"
B=$cli_tmp/B
"$BERTC" train "${COMMON[@]}" --out "$B" --http 0 >"$B.log" 2>&1 &
pid=$!
port=$(cli_live_port "$B.log" 127.0.0.1)
echo "  live page on port ${port:-none}"
[ -n "$port" ] || cli_bad "no 'live page:' line: $(head -5 "$B.log")"
cli_wait_lines "$B/metrics.csv" 5 # a few steps
if [ -n "$port" ]; then
    cli_n=$((cli_n + 1))
    get "$port" /api/status >"$cli_tmp/status"
    echo "case $cli_n: /api/status -> $(code <"$cli_tmp/status"): $(tail -1 "$cli_tmp/status" | head -c 300)"
    [ "$(code <"$cli_tmp/status")" = 200 ] || cli_bad "/api/status not 200"
    grep -qE "\"state\":\"training\",\"step\":[0-9]+,\"total_steps\":$STEPS," "$cli_tmp/status" || cli_bad "/api/status lacks state/step/total_steps"
    grep -qF '"eta_s":' "$cli_tmp/status" || cli_bad "/api/status lacks eta_s"
    cli_n=$((cli_n + 1))
    get "$port" /metrics >"$cli_tmp/metrics"
    echo "case $cli_n: /metrics -> $(code <"$cli_tmp/metrics"), $(grep -c '^bertc_' "$cli_tmp/metrics") series"
    grep -qE '^bertc_step [0-9]+$' "$cli_tmp/metrics" || cli_bad "/metrics lacks bertc_step"
    grep -qE "^bertc_total_steps $STEPS$" "$cli_tmp/metrics" || cli_bad "/metrics lacks bertc_total_steps"
    grep -qF '# TYPE bertc_loss gauge' "$cli_tmp/metrics" || cli_bad "/metrics lacks the loss gauge"
    cli_n=$((cli_n + 1))
    get "$port" / >"$cli_tmp/page"
    echo "case $cli_n: / -> $(code <"$cli_tmp/page"), $(wc -c <"$cli_tmp/page") bytes"
    grep -qF '<svg id="chart-loss"' "$cli_tmp/page" || cli_bad "the page has no loss chart"
    grep -qE "step [0-9]+/$STEPS" "$cli_tmp/page" || cli_bad "the page has no progress line"
    grep -qiE '<script[^>]+src=|<link|https?://[a-z0-9.-]+/[a-z]' "$cli_tmp/page" | grep -v w3.org && cli_bad "the page loads something from elsewhere"
    cli_n=$((cli_n + 1))
    r1=$(get "$port" /no/such/path | code)
    r2=$(http "$port" "POST /api/status HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc" | code)
    big=$(head -c 100000 /dev/zero | tr '\0' a)
    r3=$(http "$port" "GET / HTTP/1.1\r\nHost: x\r\nX-Big: $big\r\nConnection: close\r\n\r\n" | code)
    r4=$(http "$port" "\x01\x02\x03 garbage\r\n\r\n" | code)
    echo "case $cli_n: unknown path -> $r1, POST -> $r2, 100 KB header -> ${r3:-closed}, garbage -> ${r4:-closed}"
    [ "$r1" = 404 ] || cli_bad "unknown path: $r1, want 404"
    [ "$r2" = 405 ] || cli_bad "POST: $r2, want 405"
    case "${r3:-closed}" in 431 | 413 | 400 | closed) ;; *) cli_bad "100 KB header: $r3" ;; esac
    case "${r4:-closed}" in 400 | closed) ;; *) cli_bad "garbage: $r4" ;; esac
    # 100 connections that say nothing (more than the server's 64): the run goes on
    cli_n=$((cli_n + 1))
    before=$(wc -l <"$B/metrics.csv")
    holders=()
    for _ in $(seq 1 100); do
        (exec 3<>"/dev/tcp/127.0.0.1/$port" && sleep 3) 2>/dev/null &
        holders+=($!)
    done
    sleep 2
    after=$(wc -l <"$B/metrics.csv")
    echo "case $cli_n: 100 silent connections for 2 s: metrics.csv rows $before -> $after"
    if [ "$after" -le "$before" ] && kill -0 "$pid" 2>/dev/null; then cli_bad "training stalled under silent connections"; fi
    wait "${holders[@]}" 2>/dev/null

    echo "run C: the port is taken"
    kill -0 "$pid" 2>/dev/null || echo "  (B has ended already: the port-taken case is only meaningful while it runs)"
    "$BERTC" train "${COMMON[@]}" --max-steps 3 --out "$cli_tmp/C" --http "$port" >"$cli_tmp/C.log" 2>&1
    rc=$?
    cli_n=$((cli_n + 1))
    echo "case $cli_n: C -> exit $rc: $(grep -F 'live page' "$cli_tmp/C.log")"
    [ "$rc" -eq 0 ] || cli_bad "C failed with the port taken: $(tail -3 "$cli_tmp/C.log")"
    if grep -qF "live page: http://127.0.0.1:$port/" "$cli_tmp/C.log"; then
        echo "  C got the port: B had ended before C started (a slow machine); not counted"
    else
        [ "$(grep -c 'cannot serve the live page' "$cli_tmp/C.log")" -eq 1 ] || cli_bad "not exactly one 'cannot serve' warning"
        grep -qF "training goes on without the live page" "$cli_tmp/C.log" || cli_bad "the warning does not say training goes on"
    fi
    [ -s "$cli_tmp/C/final/model.safetensors" ] || cli_bad "C has no final model"
fi
wait "$pid"
rc=$?
echo "  B -> exit $rc"
[ "$rc" -eq 0 ] || cli_bad "B failed: $(tail -3 "$B.log")"
cli_n=$((cli_n + 1))
if cmp -s "$cli_tmp/A/final/model.safetensors" "$B/final/model.safetensors"; then
    echo "case $cli_n: final/model.safetensors of A (no --http) and B (--http, under requests): identical"
else
    cli_bad "final weights differ with --http"
fi
# after the run the port is closed again
r=$(get "$port" /api/status | code)
[ -z "$r" ] || cli_bad "the page still answers after the run ended: $r"
expect 2 "--http-bind nonsense: not an IPv4 or IPv6 address" -- train "${COMMON[@]}" --out "$cli_tmp/D" --http 0 --http-bind nonsense
finish
