#!/usr/bin/env bash
# bertc demo, shortened with --steps: the pipeline runs end to end, prints the
# baselines and the model's evaluation, and its last stdout line is exactly
# what `bertc eval RUN/data/test.json RUN/predictions.json` prints. A second
# run resumes (the run is complete: it re-exports and re-evaluates). The
# full two-minute demo is not a test: see README.md (demo) and bench/RESULTS.md.
source "$(dirname "$0")/lib/cli.sh"
expect_help demo "usage: bertc demo [--out RUN]" --out --threads --steps --paragraphs --seed --generate
expect 2 "demo --steps: 0 is out of range" -- demo --steps 0
echo x >"$cli_tmp/file"
expect 2 "--out $cli_tmp/file: exists and is not a directory" -- demo --out "$cli_tmp/file"
R=$cli_tmp/demo
STEPS=30
[ "${BERTC_SANITIZED:-0}" = 1 ] && STEPS=6
"$BERTC" demo --out "$R" --steps $STEPS --paragraphs 600 --save-every 10 --threads 2 >"$cli_tmp/out" 2>"$cli_tmp/err"
rc=$?
echo "demo --steps $STEPS -> exit $rc"; tail -8 "$cli_tmp/out"
[ "$rc" -eq 0 ] || cli_bad "demo failed: $(tail -3 "$cli_tmp/err")"
last=$(tail -1 "$cli_tmp/out")
ev=$("$BERTC" eval "$R/data/test.json" "$R/predictions.json" 2>/dev/null)
echo "last line: $last"; echo "bertc eval: $ev"
[ "$last" = "$ev" ] || cli_bad "the last line is not bertc eval's output"
echo "$last" | grep -qE '^\{"exact_match": [0-9.]+, "f1": [0-9.]+\}$' || cli_bad "last line format"
for b in first first-not-in-question random; do
    grep -qE "baseline: $b +exact_match +[0-9.]+ +f1 +[0-9.]+" "$cli_tmp/out" || cli_bad "no baseline $b"
done
[ -d "$R/checkpoints/step-$(printf %08d $STEPS)" ] || cli_bad "no final checkpoint"
for f in data/vocab.txt data/train.json init/model.safetensors final/model.safetensors; do [ -s "$R/$f" ] || cli_bad "missing $f"; done
"$BERTC" demo --out "$R" --steps $STEPS --paragraphs 600 --save-every 10 --threads 2 >"$cli_tmp/out2" 2>"$cli_tmp/err2"
rc=$?
echo "again -> exit $rc: $(grep -F 'already complete' "$cli_tmp/out2")"
[ "$rc" -eq 0 ] || cli_bad "second demo run failed: $(tail -3 "$cli_tmp/err2")"
[ "$(tail -1 "$cli_tmp/out2")" = "$last" ] || cli_bad "the second run evaluates differently"
"$BERTC" demo --generate "$cli_tmp/gen" --paragraphs 600 >"$cli_tmp/out3" 2>&1 || cli_bad "--generate failed"
cmp -s "$cli_tmp/gen/train.json" "$R/data/train.json" || cli_bad "--generate writes other data than the demo"
finish
