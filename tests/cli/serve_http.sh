#!/usr/bin/env bash
# bertc serve over loopback with curl: the answers of POST /v1/answer equal
# `bertc predict --nbest` for the same question (texts, logits, probabilities;
# a long context over several windows too; with --packing varlen those of
# `bertc predict --packing varlen`); a question's answers are the same to the
# last bit whatever other questions share its batch; 400 for malformed JSON, missing
# fields, invalid UTF-8; 413 over --max-body-bytes; 404; 405; 503 with
# Retry-After when --queue-limit is reached; the page, /health, /metrics;
# SIGTERM finishes the request in flight and exits 0. Needs curl and jq
# (scripts/ci_extras.sh installs them); prints "skipped" without them.
source "$(dirname "$0")/lib/cli.sh"
for t in curl jq; do
    if ! command -v $t >/dev/null; then echo "skipped: $t is not installed (scripts/ci_extras.sh installs it)"; exit 0; fi
done
M=tests/ref/train3/init
expect_help serve "usage: bertc serve --model DIR" --port --bind --batch-wait-ms --max-batch-tokens --queue-limit --timeout-ms
expect 2 "missing required option --model" -- serve
expect 2 "serve --bind nowhere: not an IPv4 or IPv6 address" -- serve --model $M --bind nowhere --port 0
expect 2 "no such model dir" -- serve --model $cli_tmp/none

# start NAME ARGS...: a server of $M on a free port; sets port and pid
start() {
    local name=$1
    shift
    cli_serve "$name" --model $M "$@"
}
# post NAME BODYFILE [curl args]: status to $cli_tmp/NAME.code, body to $cli_tmp/NAME.json
post() {
    local name=$1 file=$2
    shift 2
    curl -s -o "$cli_tmp/$name.json" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary @"$file" "$@" \
        "http://127.0.0.1:$port/v1/answer" >"$cli_tmp/$name.code"
}
code_is() { # NAME WANT
    cli_n=$((cli_n + 1))
    local got
    got=$(cat "$cli_tmp/$1.code")
    echo "case $cli_n: $1 -> $got: $(head -c 200 "$cli_tmp/$1.json")"
    [ "$got" = "$2" ] || cli_bad "$1: status $got, want $2"
}

start main --packing none --max-body-bytes 8192 --nbest 20
SHORT="Kopa Labs was founded by Dire Pogu in 1953. The chief executive of Kopa Labs is Vima Tesa."
LONG="$SHORT"
for i in 1 2 3 4 5 6; do LONG="$LONG The museum near Lake Semba holds $((i * 40)) paintings, the oldest from $((1700 + i))."; done
k=0
for ctx in "$SHORT" "$LONG"; do
    k=$((k + 1))
    jq -n --arg c "$ctx" --arg q "Who founded Kopa Labs?" \
        '{version: "1.1", data: [{title: "t", paragraphs: [{context: $c, qas: [{id: "q", question: $q, answers: []}]}]}]}' \
        >"$cli_tmp/data$k.json"
    jq -n --arg c "$ctx" --arg q "Who founded Kopa Labs?" '{context: $c, question: $q}' >"$cli_tmp/req$k.json"
    post answer$k "$cli_tmp/req$k.json"
    code_is answer$k 200
    "$BERTC" predict --model $M --data "$cli_tmp/data$k.json" --out "$cli_tmp/pred$k.json" --nbest "$cli_tmp/nbest$k.json" \
        --max-seq-length 64 --doc-stride 16 --threads 1 2>/dev/null || cli_bad "predict failed"
    jq -c '[.answers[] | [.text, .start_logit, .end_logit, .probability]]' "$cli_tmp/answer$k.json" >"$cli_tmp/s$k"
    jq -c '[.q[] | [.text, .start_logit, .end_logit, .probability]]' "$cli_tmp/nbest$k.json" >"$cli_tmp/p$k"
    w=$(jq .windows "$cli_tmp/answer$k.json")
    echo "context $k ($w windows): serve $(jq length "$cli_tmp/s$k") answers, predict $(jq length "$cli_tmp/p$k"); top: $(jq -c '.[0]' "$cli_tmp/s$k")"
    cmp -s "$cli_tmp/s$k" "$cli_tmp/p$k" || cli_bad "serve and predict differ: $(diff "$cli_tmp/s$k" "$cli_tmp/p$k" | head -5)"
    # offsets: the text is the context's code points [start, end)
    s=$(jq .answers[0].start "$cli_tmp/answer$k.json"); e=$(jq .answers[0].end "$cli_tmp/answer$k.json")
    [ "$(jq -r --argjson s "$s" --argjson e "$e" '.context | explode | .[$s:$e] | implode' "$cli_tmp/req$k.json")" = \
      "$(jq -r .answers[0].text "$cli_tmp/answer$k.json")" ] || cli_bad "offsets $s..$e do not give the answer text"
done
[ "$(jq .windows "$cli_tmp/answer2.json")" -gt 1 ] || cli_bad "the long context did not need several windows"


printf '{"context": "abc", "question"' >"$cli_tmp/bad1"; post bad_json "$cli_tmp/bad1"; code_is bad_json 400
grep -q '"error": "body: not JSON' "$cli_tmp/bad_json.json" || cli_bad "no JSON error message"
printf '{"context": "abc"}' >"$cli_tmp/bad2"; post missing "$cli_tmp/bad2"; code_is missing 400
grep -qF 'missing \"question\"' "$cli_tmp/missing.json" || cli_bad "no missing-field message"
printf '{"context": "ab\xc3(", "question": "q"}' >"$cli_tmp/bad3"; post utf8 "$cli_tmp/bad3"; code_is utf8 400
grep -q 'invalid UTF-8 (or a NUL byte) at byte 15' "$cli_tmp/utf8.json" || cli_bad "no UTF-8 message"
head -c 9000 /dev/zero | tr '\0' a | jq -Rs '{context: ., question: "q"}' >"$cli_tmp/big"; post big "$cli_tmp/big"; code_is big 413
post get "$cli_tmp/req1.json" -X GET; code_is get 405
curl -s -o "$cli_tmp/nf.json" -w '%{http_code}' "http://127.0.0.1:$port/nope" >"$cli_tmp/nf.code"; code_is nf 404
curl -s -o "$cli_tmp/page.json" -w '%{http_code}' "http://127.0.0.1:$port/" >"$cli_tmp/page.code"; code_is page 200
grep -q '<textarea id="context"' "$cli_tmp/page.json" || cli_bad "the page lacks its form"
health=$(curl -s "http://127.0.0.1:$port/health")
echo "/health: $health"
echo "$health" | grep -q '"status": "ok", "device": "cpu", "precision": "fp32", "backend": "cpu: ' || cli_bad "/health"
curl -s "http://127.0.0.1:$port/metrics" >"$cli_tmp/metrics"
grep -E '^bertc_serve_requests_total\{code="400"\} 3$' "$cli_tmp/metrics" >/dev/null || cli_bad "metrics: $(grep code= "$cli_tmp/metrics")"
for m in bertc_serve_request_seconds_bucket bertc_serve_batch_windows_bucket bertc_serve_queue_windows; do
    grep -q "^$m" "$cli_tmp/metrics" || cli_bad "metrics lack $m"
done
kill -TERM $pid; wait $pid; echo "main: SIGTERM -> exit $?"

# The default, --packing varlen: only the real tokens are computed; the answers are those of
# `bertc predict --packing varlen` (same logits at real positions, -inf at padding).
start packed --nbest 20
for _ in $(seq 100); do grep -q "listening" "$cli_tmp/packed.err" && break; sleep 0.05; done
grep -q "packed: real tokens only" "$cli_tmp/packed.err" || cli_bad "serve without --packing is not packed: $(head -2 "$cli_tmp/packed.err")"
for k in 1 2; do
    post pk$k "$cli_tmp/req$k.json"
    code_is pk$k 200
    "$BERTC" predict --model $M --data "$cli_tmp/data$k.json" --out "$cli_tmp/ppred$k.json" --nbest "$cli_tmp/pnbest$k.json" \
        --max-seq-length 64 --doc-stride 16 --threads 1 --packing varlen 2>/dev/null || cli_bad "predict --packing varlen failed"
    jq -c '[.answers[] | [.text, .start_logit, .end_logit, .probability]]' "$cli_tmp/pk$k.json" >"$cli_tmp/sp$k"
    jq -c '[.q[] | [.text, .start_logit, .end_logit, .probability]]' "$cli_tmp/pnbest$k.json" >"$cli_tmp/pp$k"
    echo "packed context $k: serve $(jq length "$cli_tmp/sp$k") answers, predict $(jq length "$cli_tmp/pp$k"); top: $(jq -c '.[0]' "$cli_tmp/sp$k")"
    cmp -s "$cli_tmp/sp$k" "$cli_tmp/pp$k" || cli_bad "packed serve and predict differ: $(diff "$cli_tmp/sp$k" "$cli_tmp/pp$k" | head -5)"
done
# Batch invariance: an answer does not depend on the other windows in its batch. A list
# request puts other questions (other contexts, other lengths) in the same forward; the
# answers to questions 1 and 2 must be those they got alone, to the last bit.
batch_invariant() { # NAME SOLO_PREFIX: compares list answers with $cli_tmp/SOLO_PREFIX{1,2}.json
    local name=$1 solo=$2
    jq -n --arg a "$SHORT" --arg b "$LONG" '[{context: ("Tomo Ikal wrote " + $a), question: "What did Tomo write?"},
        {context: $a, question: "Who founded Kopa Labs?"}, {context: $b, question: "How many paintings are there?"},
        {context: $b, question: "Who founded Kopa Labs?"}, {context: "A short one.", question: "Which one?"}]' >"$cli_tmp/list.json"
    post "$name" "$cli_tmp/list.json"
    code_is "$name" 200
    for k in 1 2; do
        jq -S ".results[$((2 * k - 1))]" "$cli_tmp/$name.json" >"$cli_tmp/$name.in$k"
        jq -S . "$cli_tmp/$solo$k.json" >"$cli_tmp/$name.solo$k"
        cli_n=$((cli_n + 1))
        echo "case $cli_n: question $k batched with 4 others: top $(jq -c '.answers[0] | [.text, .start_logit, .end_logit]' "$cli_tmp/$name.in$k"); alone: $(jq -c '.answers[0] | [.text, .start_logit, .end_logit]' "$cli_tmp/$name.solo$k")"
        cmp -s "$cli_tmp/$name.in$k" "$cli_tmp/$name.solo$k" || cli_bad "$name: question $k's answers depend on its batch: $(diff "$cli_tmp/$name.in$k" "$cli_tmp/$name.solo$k" | head -4)"
    done
}
batch_invariant packed_list pk
kill -TERM $pid; wait $pid; echo "packed: SIGTERM -> exit $?"
start padded --packing none --nbest 20
for k in 1 2; do post pd$k "$cli_tmp/req$k.json"; code_is pd$k 200; done
batch_invariant padded_list pd
kill -TERM $pid; wait $pid; echo "padded: SIGTERM -> exit $?"
expect 2 "--packing dense: expected none or varlen" -- serve --model $M --packing dense --port 0

# A full queue: one request waits for its batch (1.5 s), the next is refused.
start queue --queue-limit 1 --batch-wait-ms 1500
post q1 "$cli_tmp/req1.json" & qp=$!
sleep 0.4
curl -s -D "$cli_tmp/q2.head" -o "$cli_tmp/q2.json" -w '%{http_code}' --data-binary @"$cli_tmp/req1.json" \
    "http://127.0.0.1:$port/v1/answer" >"$cli_tmp/q2.code"
code_is q2 503
grep -qi '^Retry-After: 1' "$cli_tmp/q2.head" || cli_bad "503 without Retry-After"
wait $qp; code_is q1 200
# SIGTERM while that kind of request is in flight: it is answered, then the server exits 0.
post q3 "$cli_tmp/req1.json" & qp=$!
sleep 0.4
kill -TERM $pid
wait $qp; code_is q3 200
wait $pid; rc=$?
echo "queue: SIGTERM with a request in flight -> exit $rc; $(tail -2 "$cli_tmp/queue.err" | tr '\n' ' ')"
[ "$rc" -eq 0 ] || cli_bad "exit $rc after SIGTERM"
grep -q "serve: stopped" "$cli_tmp/queue.err" || cli_bad "no stop line"
cli_pids=()
finish
