#!/usr/bin/env bash
# bertc serve's page with typed input: tests/lib/cdp_drive (built with the
# project) drives headless Chromium over the DevTools pipe, clicks the
# context and question boxes, types every character as key events, presses
# Enter, then clears the question with End and Backspace, types a second one
# and clicks the Answer button. The page must show, for each question, the
# answer of POST /v1/answer (the same text, marked in the context, the same
# 5 n-best rows and scores), receive every key and click as a trusted event
# and log no errors. Then the driver's own failure paths: a browser that
# dies at once (EOF on the pipe) and one that never answers (timeout) end it
# quickly with a message, non-zero, and nothing left running. Prints
# "skipped" and passes where chromium, curl or jq is not installed
# (scripts/ci_extras.sh installs them).
source "$(dirname "$0")/lib/cli.sh"
cli_need_browser
drive="${BERTC_BUILD:?}/cdp_drive"
cli_serve_start tests/ref/train3/init
CTX="Kopa Labs was founded by Dire Pogu in 1953. The café near the river is run by Vima Tesa."
QS=("Who founded Kopa Labs?" "Who runs the café?")
for i in 0 1; do
    jq -n --arg c "$CTX" --arg q "${QS[$i]}" '{context: $c, question: $q, nbest: 5}' |
        curl -s --data-binary @- "http://127.0.0.1:$port/v1/answer" >"$cli_tmp/api$i.json"
done

cli_n=$((cli_n + 1))
start=$(date +%s%N)
timeout 60 "$drive" --browser "$browser" --url "http://127.0.0.1:$port/" --dir "$cli_tmp" --out "$cli_tmp/page.json" \
    --context "$CTX" --question "${QS[0]}" --question "${QS[1]}" --screenshot "$cli_tmp/page.png" --timeout 45
rc=$?
echo "case $cli_n: cdp_drive typed 2 questions -> exit $rc in $(( ($(date +%s%N) - start) / 1000000 )) ms"
[ "$rc" -eq 0 ] || cli_bad "cdp_drive exit $rc"
if [ -s "$cli_tmp/page.json" ]; then
    for i in 0 1; do
        r=".rounds[$i]"
        want=$(jq -r '.answers[0].text' "$cli_tmp/api$i.json")
        wstart=$(jq -r '.answers[0].start' "$cli_tmp/api$i.json")
        answer=$(jq -r "$r.answer" "$cli_tmp/page.json")
        mark=$(jq -r "$r.mark" "$cli_tmp/page.json")
        echo "question \"${QS[$i]}\": page shows answer \"$answer\", marked \"$mark\"; the API says \"$want\" (start $wstart)"
        [ -n "$want" ] && [ "$answer" = "$want" ] || cli_bad "the page's answer differs from the API's"
        if [ "$wstart" -ge 0 ]; then
            [ "$mark" = "$want" ] || cli_bad "the mark in the context differs from the API's answer"
        fi
        [ "$(jq -r "$r.view" "$cli_tmp/page.json")" = "$CTX" ] || cli_bad "the context view is not the typed context"
        jq -r "$r.rows[] | [.[0], .[1]] | @tsv" "$cli_tmp/page.json" >"$cli_tmp/rows_page$i"
        jq -r '.answers | to_entries[] | [(.key + 1 | tostring), .value.text] | @tsv' "$cli_tmp/api$i.json" >"$cli_tmp/rows_api$i"
        echo "n-best: page $(wc -l <"$cli_tmp/rows_page$i") rows, API $(wc -l <"$cli_tmp/rows_api$i") answers"
        [ "$(wc -l <"$cli_tmp/rows_api$i")" -eq 5 ] || cli_bad "want 5 answers from the API"
        diff "$cli_tmp/rows_api$i" "$cli_tmp/rows_page$i" || cli_bad "the n-best rows (#, text) differ from the API's"
        close=$(jq -n --slurpfile p "$cli_tmp/page.json" --slurpfile a "$cli_tmp/api$i.json" --argjson i $i '
            [range(0; $a[0].answers | length) as $k | $a[0].answers[$k] as $w | $p[0].rounds[$i].rows[$k] as $row |
             (($row[2] | tonumber) - $w.score | fabs) <= 0.0006 and (($row[3] | tonumber) - $w.probability | fabs) <= 0.0006]
            | all')
        echo "n-best scores and probabilities within 0.0006 of the API's: $close"
        [ "$close" = true ] || cli_bad "the n-best scores differ from the API's"
    done
    echo "errors the page logged: $(jq -c '.errors' "$cli_tmp/page.json"); events it counted: $(jq -c '.events' "$cli_tmp/page.json")"
    [ "$(jq '.errors | length' "$cli_tmp/page.json")" -eq 0 ] || cli_bad "the page logged errors"
else
    cli_bad "cdp_drive wrote no result"
fi
magic=$(head -c 8 "$cli_tmp/page.png" 2>/dev/null | od -An -tx1 | tr -d ' \n')
echo "screenshot: $(stat -c %s "$cli_tmp/page.png" 2>/dev/null || echo 0) bytes, starts with $magic"
[ "$magic" = 89504e470d0a1a0a ] || cli_bad "the screenshot is not a PNG"

# The driver's error check can fail: a page with the same ids that logs
# console.error when the form is sent.
cli_n=$((cli_n + 1))
bad_page='<form id=f><textarea id=context></textarea><input id=question><button id=ask>Answer</button></form>
<p id=error></p><div id=result hidden><span id=answer></span><div id=context-view></div><table><tbody id=nbest></tbody></table></div>
<script>document.getElementById("f").addEventListener("submit",e=>{e.preventDefault();console.error("boom from the page");
document.getElementById("result").hidden=false;document.body.dataset.state="answered"})</script>'
timeout 60 "$drive" --browser "$browser" --url "data:text/html,$(jq -rn --arg x "$bad_page" '$x|@uri')" --dir "$cli_tmp" \
    --out "$cli_tmp/bad.json" --context "c" --question "q" --timeout 45 >"$cli_tmp/drive.out" 2>"$cli_tmp/drive.err"
rc=$?
echo "case $cli_n: cdp_drive on a page that logs an error -> exit $rc: $(grep -h "^event: console.error\|FAIL" "$cli_tmp/drive.out" "$cli_tmp/drive.err" | tr '\n' ' ')"
[ "$rc" -eq 1 ] || cli_bad "exit $rc, want 1"
grep -q "event: console.error: boom from the page" "$cli_tmp/drive.out" || cli_bad "the console error was not seen"
grep -q "FAIL: the page logged 1 errors" "$cli_tmp/drive.err" || cli_bad "the console error did not fail the run"

# drive_fake BROWSER TIMEOUT: cdp_drive against a fake browser; rc gets its exit status.
drive_fake() {
    timeout 30 "$drive" --browser "$1" --url "http://127.0.0.1:$port/" --dir "$cli_tmp" --out "$cli_tmp/x.json" \
        --context c --question q --timeout "$2" >"$cli_tmp/drive.out" 2>"$cli_tmp/drive.err"
    rc=$?
}

# A browser that exits at once: the driver sees its pipe closed (EOF on fd 4,
# or EPIPE on fd 3 when it goes before the first command) and says so.
cli_n=$((cli_n + 1))
start=$(date +%s%N)
drive_fake /bin/false 20
took=$(( ($(date +%s%N) - start) / 1000000 ))
echo "case $cli_n: cdp_drive with a browser that exits at once -> exit $rc in $took ms: $(grep FAIL "$cli_tmp/drive.err")"
[ "$rc" -eq 1 ] || cli_bad "exit $rc, want 1"
grep -q "chromium closed the DevTools pipe.*exited with status 1" "$cli_tmp/drive.err" || cli_bad "no clear message on EOF"
[ "$took" -lt 10000 ] || cli_bad "took $took ms"

# A browser that answers the first command and dies: the driver names the
# command it was on and the browser's exit status.
cli_n=$((cli_n + 1))
printf '#!/bin/sh\nhead -c 1 <&3 >/dev/null\nprintf %s >&4\nexit 3\n' "'{\"id\":1,\"result\":{\"targetId\":\"T1\"}}\\000'" >"$cli_tmp/dies.sh"
chmod +x "$cli_tmp/dies.sh"
drive_fake "$cli_tmp/dies.sh" 20
echo "case $cli_n: cdp_drive with a browser that dies after one reply -> exit $rc: $(grep FAIL "$cli_tmp/drive.err")"
[ "$rc" -eq 1 ] || cli_bad "exit $rc, want 1"
grep -q "chromium closed the DevTools pipe.*Target.attachToTarget; it exited with status 3" "$cli_tmp/drive.err" ||
    cli_bad "no clear message when the browser dies midway"

# A browser that never answers: the driver times out, kills it, and says
# what it was waiting for.
cli_n=$((cli_n + 1))
printf '#!/bin/sh\necho $$ >"%s/mute.pid"\nexec sleep 120\n' "$cli_tmp" >"$cli_tmp/mute.sh"
chmod +x "$cli_tmp/mute.sh"
start=$(date +%s%N)
drive_fake "$cli_tmp/mute.sh" 2
took=$(( ($(date +%s%N) - start) / 1000000 ))
echo "case $cli_n: cdp_drive with a browser that never answers, --timeout 2 -> exit $rc in $took ms: $(grep FAIL "$cli_tmp/drive.err")"
[ "$rc" -eq 1 ] || cli_bad "exit $rc, want 1"
grep -q "timed out while waiting for the reply to Target.createTarget" "$cli_tmp/drive.err" || cli_bad "no clear message on timeout"
[ "$took" -lt 10000 ] || cli_bad "took $took ms"
if kill -0 "$(cat "$cli_tmp/mute.pid")" 2>/dev/null; then cli_bad "the mute browser is still running"; fi
[ -e "$cli_tmp/x.json" ] && cli_bad "a failed run wrote its result file"

kill -TERM $pid
wait $pid || cli_bad "serve exit $? after SIGTERM"
finish
