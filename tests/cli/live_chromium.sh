#!/usr/bin/env bash
# The live page (bertc train --http) in headless Chromium while a real run
# trains: the page loads without console errors, its script refreshes the
# status from /api/status, every training chart in the rendered DOM has a
# polyline with points, and a screenshot is taken (BERTC_UPDATE_DOCS=1
# copies it to docs/live.png). Prints "skipped" where chromium is not
# installed (scripts/ci_extras.sh installs it).
source "$(dirname "$0")/lib/cli.sh"
cli_need_chromium
R=$cli_tmp/run
"$BERTC" train --model tests/ref/train3/init --train tests/data/train_small.json --dev tests/data/train_small.json \
    --out "$R" --max-seq-length 64 --doc-stride 16 --batch 4 --micro-batch 2 --max-steps 100000 --lr 1e-4 \
    --save-every 40 --eval-every 40 --keep 2 --threads 1 --save-every-minutes 0 --monitor-interval 0.25 \
    --log-every 100000 --http 0 >"$R.log" 2>&1 &
pid=$!
trap 'kill -9 $pid 2>/dev/null; rm -rf "$cli_tmp"' EXIT
port=
for _ in $(seq 1 600); do
    port=$(grep -oE 'live page: http://127\.0\.0\.1:[0-9]+/' "$R.log" 2>/dev/null | grep -oE '[0-9]+/$' | tr -d /)
    [ -n "$port" ] && [ -f "$R/eval.csv" ] && [ "$(wc -l <"$R/eval.csv")" -ge 3 ] && break
    sleep 0.1
done
echo "trainer on port ${port:-none}; $(($(wc -l <"$R/metrics.csv" 2>/dev/null || echo 1) - 1)) steps logged"
[ -n "$port" ] || { cli_bad "no live page: $(tail -3 "$R.log")"; finish; }
url="http://127.0.0.1:$port/"
# virtual time lets the page's 3 s refresh run at least once
cli_dump_dom "$url" 120 --virtual-time-budget=7000
cli_charts_drawn 2 chart-loss chart-lr chart-throughput chart-gradnorm chart-eval chart-cpu chart-mem
grep -oE 'step [0-9]+/100000 \([0-9.]+%\)[^<]*' "$cli_tmp/dom.html" | head -1
grep -qE 'step [0-9]+/100000 \(' "$cli_tmp/dom.html" || cli_bad "no progress line in the DOM"
grep -qE 'id="conn">updated ' "$cli_tmp/dom.html" || cli_bad "the page's script did not refresh the status"
grep -qF "checkpoint step " "$cli_tmp/dom.html" || cli_bad "no checkpoint in the status"
cli_screenshot "$url" 120 "$cli_tmp/live.png" --window-size=1240,1500 --virtual-time-budget=4000
if [ "${BERTC_UPDATE_DOCS:-0}" = 1 ]; then
    mkdir -p docs && cp "$cli_tmp/live.png" docs/live.png && echo "updated docs/live.png"
fi
kill -0 "$pid" 2>/dev/null || cli_bad "the trainer is no longer running: $(tail -3 "$R.log")"
kill -TERM "$pid"
wait "$pid"
rc=$?
echo "trainer stopped by SIGTERM -> exit $rc"
[ "$rc" -eq 75 ] || cli_bad "trainer exit $rc after SIGTERM, want 75"
finish
