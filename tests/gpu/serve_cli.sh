#!/usr/bin/env bash
# tests/gpu/serve_cli.sh BERTC RESULTS_DIR: bertc serve --device cuda on the
# tiny test model: 64 concurrent requests (batched on the GPU) get the same
# top answers as `bertc predict --device cuda` on the same questions, with
# logits within 1e-3; SIGTERM exits 0. Needs curl and jq. Never run on the
# development machines (no GPU there): results come from a GPU machine.
set -u
bertc=$1 res=$2
M=tests/ref/train3/init
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for t in curl jq; do command -v $t >/dev/null || { echo "serve_cli: $t is not installed"; exit 1; }; done
names=("Kopa Labs" "Vima Tesa" "the Orun river" "Dire Pogu")
jq -n '{version: "1.1", data: [{title: "t", paragraphs: []}]}' >"$tmp/data.json"
for i in $(seq 0 15); do
    ctx="${names[i % 4]} was founded by ${names[(i + 1) % 4]} in $((1900 + 7 * i))."
    for k in $(seq 0 $((i % 4 * 3))); do ctx="$ctx The museum near ${names[(i + k) % 4]} holds $((10 * k + i)) paintings."; done
    jq --arg c "$ctx" --arg q "Who founded ${names[i % 4]}?" --arg id "q$i" \
        '.data[0].paragraphs += [{context: $c, qas: [{id: $id, question: $q, answers: []}]}]' "$tmp/data.json" >"$tmp/d2"
    mv "$tmp/d2" "$tmp/data.json"
    jq -nc --arg c "$ctx" --arg q "Who founded ${names[i % 4]}?" '{context: $c, question: $q}' >"$tmp/req$i.json"
done
"$bertc" predict --model $M --data "$tmp/data.json" --out "$tmp/pred.json" --nbest "$tmp/nbest.json" --device cuda \
    --max-seq-length 64 --doc-stride 16 || { echo "serve_cli: predict --device cuda failed"; exit 1; }
"$bertc" serve --model $M --device cuda --port 0 --port-file "$tmp/port" 2>"$tmp/serve.err" &
pid=$!
for _ in $(seq 600); do [ -s "$tmp/port" ] && break; sleep 0.1; done
port=$(cat "$tmp/port")
head -2 "$tmp/serve.err"
for r in 0 1 2 3; do
    for i in $(seq 0 15); do
        curl -s --data-binary @"$tmp/req$i.json" "http://127.0.0.1:$port/v1/answer" >"$tmp/ans$r.$i.json" &
    done
done
wait $(jobs -p | grep -v "^$pid$") 2>/dev/null
kill -TERM $pid
wait $pid
src=$?
fail=0
for r in 0 1 2 3; do
    for i in $(seq 0 15); do
        got=$(jq -r '.answers[0].text' "$tmp/ans$r.$i.json")
        want=$(jq -r ".q$i[0].text" "$tmp/nbest.json")
        d=$(jq -n --argjson a "$(jq '.answers[0].start_logit' "$tmp/ans$r.$i.json")" \
            --argjson b "$(jq ".q$i[0].start_logit" "$tmp/nbest.json")" '($a - $b) | fabs')
        ok=$(jq -n --argjson d "$d" '$d <= 1e-3')
        [ "$got" = "$want" ] && [ "$ok" = true ] || { fail=1; echo "FAIL serve request $r.$i: \"$got\" vs predict \"$want\", start logit diff $d"; }
    done
done
echo "serve --device cuda: 64 concurrent requests vs predict --device cuda: $([ $fail = 0 ] && echo same top answers, start logits within 1e-3 || echo DIFFERENT); SIGTERM -> exit $src" | tee -a "$res/results.txt"
[ $fail = 0 ] && [ $src = 0 ]
