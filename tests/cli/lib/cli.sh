# Helpers for command-line cases written as data (sourced by tests/cli/*.sh).
#
#   source "$(dirname "$0")/lib/cli.sh"
#   expect 2 "missing required option --model" -- train --train x --out y
#   expect_help train "usage: bertc train" --model --train
#   finish
#
# expect CODE MESSAGE -- ARGS...: runs $BERTC ARGS (stdin: $cli_stdin,
# /dev/null unless set), requires exit CODE and MESSAGE (a fixed string) on
# stderr; for a usage or input error (CODE 2) also that stderr is one line,
# stdout is empty, and the line starts with "bertc: ". Every case prints what
# it ran and what it saw; stdout and stderr stay in $cli_tmp/out and
# $cli_tmp/err until the next case.
set -u
: "${BERTC:?set BERTC to the bertc binary}"
: "${BERTC_DATA:=../shared/data}"
# A key in the caller's environment would put every server of the tests behind it.
unset BERTC_API_KEY
cli_tmp=$(mktemp -d)
trap 'rm -rf "$cli_tmp"' EXIT
cli_fail=0
cli_n=0
cli_stdin=/dev/null

cli_bad() { echo "FAIL: $*"; cli_fail=$((cli_fail + 1)); }

expect() {
    local code=$1 msg=$2
    shift 2
    [ "${1:-}" = "--" ] && shift
    cli_n=$((cli_n + 1))
    "$BERTC" "$@" >"$cli_tmp/out" 2>"$cli_tmp/err" <"$cli_stdin"
    local rc=$?
    echo "case $cli_n: bertc $* -> exit $rc: $(head -c 400 "$cli_tmp/err")"
    [ "$rc" -eq "$code" ] || cli_bad "exit $rc, want $code"
    grep -qF -- "$msg" "$cli_tmp/err" || cli_bad "stderr lacks '$msg'"
    if [ "$code" -eq 2 ]; then
        [ "$(wc -l <"$cli_tmp/err")" -eq 1 ] || cli_bad "stderr is not one line"
        [ -s "$cli_tmp/out" ] && cli_bad "stdout not empty"
        head -c 7 "$cli_tmp/err" | grep -qF "bertc: " || cli_bad "stderr does not start with 'bertc: '"
    fi
    return 0
}

# expect_help CMD USAGE OPTION...: --help exits 0, prints USAGE and every
# OPTION on stdout and nothing on stderr.
expect_help() {
    local cmd=$1 usage=$2
    shift 2
    cli_n=$((cli_n + 1))
    "$BERTC" "$cmd" --help >"$cli_tmp/out" 2>"$cli_tmp/err" </dev/null
    local rc=$?
    echo "case $cli_n: bertc $cmd --help -> exit $rc, $(wc -l <"$cli_tmp/out") lines"
    [ "$rc" -eq 0 ] || cli_bad "exit $rc, want 0"
    [ -s "$cli_tmp/err" ] && cli_bad "stderr not empty: $(head -c 200 "$cli_tmp/err")"
    grep -qF -- "$usage" "$cli_tmp/out" || cli_bad "help lacks '$usage'"
    local o
    for o in "$@"; do grep -qF -- "$o" "$cli_tmp/out" || cli_bad "help lacks '$o'"; done
    return 0
}

# expect_listed CMD REGEX: bertc --help lists CMD on a line matching REGEX
# (an extended regular expression).
expect_listed() {
    cli_n=$((cli_n + 1))
    echo "case $cli_n: bertc --help lists $1"
    "$BERTC" --help | grep -qE -- "$2" || cli_bad "bertc --help does not list $1 ('$2')"
    return 0
}

# cli_run ARGS...: runs $BERTC ARGS with stdout and stderr in $cli_tmp/out
# and $cli_tmp/err, sets rc and prints what it saw.
cli_run() {
    "$BERTC" "$@" >"$cli_tmp/out" 2>"$cli_tmp/err" <"$cli_stdin"
    rc=$?
    echo "bertc $* -> exit $rc: $(tail -c 300 "$cli_tmp/out") | $(head -c 300 "$cli_tmp/err")"
}

# cli_check 'SHELL CONDITION': a failure unless it holds (it is evaluated,
# so it may refer to variables such as $rc, quoted to be expanded then).
cli_check() {
    cli_n=$((cli_n + 1))
    eval "$1" || cli_bad "$1"
}

# cli_absent PATH: a refused command left nothing at PATH (removed if it did,
# so that the next case starts clean).
cli_absent() {
    if [ -e "$1" ]; then
        cli_bad "$1 was created"
        rm -rf "$1"
    fi
}

finish() {
    echo "$cli_n cases, $cli_fail failures"
    [ "$cli_fail" -eq 0 ]
    exit $?
}

# The pages in headless Chromium (Debian's chromium; scripts/ci_extras.sh
# installs it). cli_need_chromium: browser gets its path, or the test is
# skipped (exit 0) where it is not installed.
cli_need_chromium() {
    browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
    if [ -z "$browser" ]; then
        echo "skipped: chromium is not installed (scripts/ci_extras.sh installs it)"
        exit 0
    fi
}
# cli_dump_dom URL SECONDS [CHROMIUM OPTIONS...]: one case: the DOM of URL as
# rendered into $cli_tmp/dom.html (the browser's log in
# $cli_tmp/browser.log); a failure when the browser fails or logs errors
# for the page.
cli_dump_dom() {
    local url=$1 seconds=$2
    shift 2
    cli_n=$((cli_n + 1))
    timeout "$seconds" "$browser" --headless --disable-gpu --no-sandbox --no-first-run \
        --user-data-dir="$cli_tmp/profile" --enable-logging=stderr --v=0 "$@" --dump-dom "$url" \
        >"$cli_tmp/dom.html" 2>"$cli_tmp/browser.log"
    local rc=$?
    echo "case $cli_n: chromium --dump-dom $url -> exit $rc, $(wc -c <"$cli_tmp/dom.html") bytes of DOM"
    [ "$rc" -eq 0 ] || { cli_bad "chromium exit $rc"; tail -20 "$cli_tmp/browser.log"; }
    if grep -E "Uncaught|Failed to load resource|net::ERR_|CONSOLE.*[Ee]rror" "$cli_tmp/browser.log"; then
        cli_bad "the browser logged errors for the page"
    fi
    return 0
}
# cli_charts_drawn POINTS ID...: in $cli_tmp/dom.html, each chart ID (an
# <svg id="chart-...">) has a polyline of at least POINTS (1 or 2) points;
# the charts found are listed in $cli_tmp/charts.
cli_charts_drawn() {
    local pts='[0-9.-]+,[0-9.-]+' id
    [ "$1" -ge 2 ] && pts="$pts $pts"
    shift
    awk -v pts="$pts" 'BEGIN { RS = "</svg>"; re = "<polyline[^>]* points=\"" pts "[^\"]*\"" }
         match($0, /<svg id="chart-[a-z-]+"/) {
             id = substr($0, RSTART + 9, RLENGTH - 10)
             print id, match($0, re) ? "polyline-with-points" : "EMPTY"
         }' "$cli_tmp/dom.html" >"$cli_tmp/charts"
    cat "$cli_tmp/charts"
    for id in "$@"; do
        grep -qx "$id polyline-with-points" "$cli_tmp/charts" || cli_bad "$id missing or empty in the rendered DOM"
    done
}
# cli_screenshot URL SECONDS FILE [CHROMIUM OPTIONS...]: one case: a
# screenshot of URL into FILE, of more than 20000 bytes.
cli_screenshot() {
    local url=$1 seconds=$2 png=$3
    shift 3
    cli_n=$((cli_n + 1))
    timeout "$seconds" "$browser" --headless --disable-gpu --no-sandbox --no-first-run \
        --user-data-dir="$cli_tmp/profile" --hide-scrollbars "$@" --screenshot="$png" "$url" \
        >/dev/null 2>>"$cli_tmp/browser.log"
    local rc=$? size
    size=$(wc -c <"$png" 2>/dev/null || echo 0)
    echo "case $cli_n: chromium --screenshot -> exit $rc, $size bytes"
    [ "$rc" -eq 0 ] && [ "$size" -gt 20000 ] || cli_bad "no screenshot"
}

# The serve page tests: browser gets headless Chromium's path, or the test is
# skipped (exit 0) where chromium, curl or jq is missing (scripts/ci_extras.sh
# installs them).
cli_need_browser() {
    browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
    for t in "$browser" curl jq; do
        if [ -z "$t" ] || ! command -v "$t" >/dev/null; then echo "skipped: chromium, curl or jq is not installed"; exit 0; fi
    done
}
# cli_serve NAME ARGS...: bertc serve ARGS (--model among them) on a free
# port in the background, stderr in $cli_tmp/NAME.err; waits for its
# "listening" line, prints what it said, sets pid and port. Every server
# started so (cli_pids) is killed on exit.
cli_pids=()
cli_serve() {
    local name=$1
    shift
    rm -f "$cli_tmp/$name.port"
    "$BERTC" serve --port 0 --port-file "$cli_tmp/$name.port" --threads 1 "$@" 2>"$cli_tmp/$name.err" &
    pid=$!
    cli_pids+=("$pid")
    trap 'for p in "${cli_pids[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$cli_tmp"' EXIT
    for _ in $(seq 400); do
        [ -s "$cli_tmp/$name.port" ] && grep -q "^serve: listening" "$cli_tmp/$name.err" && break
        sleep 0.05
    done
    sleep 0.1 # the lines printed after "listening"
    port=$(cat "$cli_tmp/$name.port" 2>/dev/null)
    echo "$name: $(grep -v '^bertc: loaded' "$cli_tmp/$name.err" | tr '\n' '|')"
    [ -n "$port" ] || cli_bad "$name did not start: $(cat "$cli_tmp/$name.err")"
}
# cli_serve_start MODEL: cli_serve of MODEL as "serve".
cli_serve_start() { cli_serve serve --model "$1"; }

# cli_live_port LOG ADDR: the port of the "live page: http://ADDR:PORT/"
# line a training run in the background writes to LOG (waited for up to
# 20 s; empty when none came).
cli_live_port() {
    local addr=${2//./\\.} p=
    for _ in $(seq 1 400); do
        p=$(grep -oE "live page: http://$addr:[0-9]+/" "$1" | grep -oE '[0-9]+/$' | tr -d /)
        [ -n "$p" ] && break
        sleep 0.05
    done
    echo "$p"
}
# cli_wait_lines FILE N: waits up to 20 s for FILE to hold more than N lines
# (a run's metrics.csv after a few steps).
cli_wait_lines() {
    for _ in $(seq 1 400); do
        [ -f "$1" ] && [ "$(wc -l <"$1")" -gt "$2" ] && break
        sleep 0.05
    done
}
