#!/usr/bin/env bash
# bertc serve's page in headless Chromium: /?context=...&question=...&submit=1
# fills the form and presses its button (the page's own hook; not real
# keystrokes); the rendered DOM shows the answer of POST /v1/answer for the
# same question, marked in the context. Prints "skipped" and passes where
# chromium, curl or jq is not installed (scripts/ci_extras.sh installs them).
source "$(dirname "$0")/lib/cli.sh"
cli_need_browser
cli_serve_start tests/ref/train3/init
CTX="Kopa Labs was founded by Dire Pogu in 1953. The café near the river is run by Vima Tesa."
Q="Who founded Kopa Labs?"
jq -n --arg c "$CTX" --arg q "$Q" '{context: $c, question: $q}' |
    curl -s --data-binary @- "http://127.0.0.1:$port/v1/answer" >"$cli_tmp/api.json"
want=$(jq -r '.answers[0].text' "$cli_tmp/api.json")
url="http://127.0.0.1:$port/?context=$(jq -rn --arg x "$CTX" '$x|@uri')&question=$(jq -rn --arg x "$Q" '$x|@uri')&submit=1"
cli_dump_dom "$url" 120 --virtual-time-budget=10000
answer=$(grep -o '<span id="answer">[^<]*</span>' "$cli_tmp/dom.html" | sed 's/<[^>]*>//g')
mark=$(grep -o '<mark id="mark">[^<]*</mark>' "$cli_tmp/dom.html" | sed 's/<[^>]*>//g')
echo "page shows answer \"$answer\", marked \"$mark\"; the API says \"$want\""
grep -q 'data-state="answered"' "$cli_tmp/dom.html" || cli_bad "the page did not show an answer"
[ -n "$want" ] && [ "$answer" = "$want" ] && [ "$mark" = "$want" ] || cli_bad "the page's answer differs from the API's"
rows=$(grep -o '<tr><td>' "$cli_tmp/dom.html" | wc -l)
echo "n-best table: $rows rows"
[ "$rows" -eq 5 ] || cli_bad "want 5 rows in the n-best table"
kill -TERM $pid
wait $pid || cli_bad "serve exit $? after SIGTERM"
finish
