#!/usr/bin/env bash
# The full load test of bertc serve (tests/cli/serve_load.sh runs a few hundred
# requests): N requests (default 10,000) at each concurrency level (default
# 1 8 32 64), 10 % malformed, over loopback with bench/serve/serve_load; every valid
# request must get 200 and the answer it gets alone, every malformed one 400,
# and the server must stay up and exit 0 on SIGTERM.
#
# usage: scripts/serve_load.sh [--build DIR] [--model DIR] [--requests N] [--levels "1 8 32 64"]
#   --build build-asan runs it against the sanitizer build.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=build MODEL=tests/ref/train3/init N=10000 LEVELS="1 8 32 64"
source scripts/lib.sh
parse_opts "$0 [--build DIR] [--model DIR] [--requests N] [--levels \"1 8 32 64\"]" \
    --build BUILD --model MODEL --requests N --levels LEVELS -- "$@"
tmp=$(mktemp -d)
"$BUILD/bertc" serve --model "$MODEL" --port 0 --port-file "$tmp/port" --threads 2 --max-connections 512 2>"$tmp/serve.err" &
pid=$!
trap 'kill $pid 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 600); do [ -s "$tmp/port" ] && break; sleep 0.1; done
port=$(cat "$tmp/port")
jq -c '[.data[].paragraphs[] | .context as $c | .qas[] | {context: $c, question: .question}] | .[0:64][]' \
    "${BERTC_DATA:-../shared/data}/squad-v1.1/dev-v1.1.json" >"$tmp/bodies.jsonl"
head -1 "$tmp/serve.err"
fail=0
for c in $LEVELS; do
    "$BUILD/serve_load" --port "$port" --bodies "$tmp/bodies.jsonl" --requests "$N" --concurrency "$c" --bad-percent 10 || fail=1
done
curl -sf "http://127.0.0.1:$port/metrics" | grep -E '^bertc_serve_(requests_total|batch_windows_(sum|count))'
kill -TERM $pid
wait $pid || { echo "serve exited $? after SIGTERM"; tail -5 "$tmp/serve.err"; fail=1; }
trap 'rm -rf "$tmp"' EXIT
[ $fail -eq 0 ] && echo "serve_load: all levels passed" || echo "serve_load: FAILED"
exit $fail
