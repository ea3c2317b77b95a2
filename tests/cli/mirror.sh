#!/usr/bin/env bash
# bertc train --mirror DIR: every checkpoint copied to DIR/checkpoints
# (same bytes, MANIFEST, --mirror-keep); a run killed on its machine resumes
# on a "fresh VM" (an empty run dir) from the mirror, says so, and ends with
# the same weights as a run never killed; a missing or unwritable mirror, a
# slow one and a failing one never stop training.
source "$(dirname "$0")/lib/cli.sh"
COMMON=(--model tests/ref/train3/init --train tests/data/train_small.json --max-seq-length 64 --doc-stride 16
        --batch 4 --micro-batch 2 --max-steps 40 --lr 1e-3 --save-every 10 --keep 2 --threads 2
        --save-every-minutes 0 --monitor-interval 0 --log-every 1000)
train() { # train NAME [args]: prints and returns the exit code; log in NAME.log
    local run=$cli_tmp/$1
    shift
    "$BERTC" train "${COMMON[@]}" --out "$run" "$@" >"$run.log" 2>&1
    local rc=$?
    echo "  train --out $(basename "$run") $* -> exit $rc"
    return $rc
}

echo "a run with a mirror, --mirror-keep 3"
D=$cli_tmp/drive
mkdir -p "$D"
train A --mirror "$D" --mirror-keep 3 || cli_bad "A failed: $(tail -3 "$cli_tmp/A.log")"
cli_n=$((cli_n + 1))
got=$(ls "$D/checkpoints" | tr '\n' ' ')
echo "case $cli_n: mirror holds: $got"
[ "$got" = "step-00000020 step-00000030 step-00000040 " ] || cli_bad "mirror should hold steps 20 30 40"
for f in MANIFEST model.safetensors optimizer.safetensors state.json; do
    cmp -s "$cli_tmp/A/checkpoints/step-00000040/$f" "$D/checkpoints/step-00000040/$f" || cli_bad "mirror's $f differs"
done
[ "$(grep -c ' copied to ' "$cli_tmp/A/mirror.log")" -eq 4 ] || cli_bad "mirror.log should list 4 copies: $(cat "$cli_tmp/A/mirror.log")"
"$BERTC" watch "$cli_tmp/A" --once | grep -F "mirror: step-00000040 copied to $D" || cli_bad "watch does not show the mirror"

echo "killed after step 25; a fresh run dir resumes from the mirror"
D2=$cli_tmp/drive2
mkdir -p "$D2"
BERTC_DEBUG_KILL=step:25 train B --mirror "$D2"
[ $? -eq 137 ] || cli_bad "B was not killed"
ls "$D2/checkpoints"
train B2 --mirror "$D2" || cli_bad "B2 failed: $(tail -3 "$cli_tmp/B2.log")"
cli_n=$((cli_n + 1))
line=$(grep -F "resuming from the mirror" "$cli_tmp/B2.log")
echo "case $cli_n: $line"
echo "$line" | grep -qE "resuming from the mirror: $D2/checkpoints/step-000000[12]0" || cli_bad "B2 did not say it resumed from the mirror"
grep -qF "resume    from $D2/checkpoints/step-" "$cli_tmp/B2.log" || cli_bad "the start-up report does not name the mirror checkpoint"
if cmp -s "$cli_tmp/A/final/model.safetensors" "$cli_tmp/B2/final/model.safetensors"; then
    echo "  B2 (killed, resumed from the mirror on a fresh run dir) ends with A's weights"
else
    cli_bad "B2's final weights differ from A's"
fi

echo "a missing and an unwritable mirror: one warning, training goes on"
for bad in "$cli_tmp/not-mounted" /proc; do
    train C --mirror "$bad" --max-steps 12 --resume never || cli_bad "training stopped for --mirror $bad"
    cli_n=$((cli_n + 1))
    w=$(grep -c "training goes on without the mirror" "$cli_tmp/C.log")
    echo "case $cli_n: --mirror $bad: $(grep -F -- '--mirror' "$cli_tmp/C.log" | head -1)"
    [ "$w" -eq 1 ] || cli_bad "--mirror $bad: $w warnings, want 1"
    [ -s "$cli_tmp/C/final/model.safetensors" ] || cli_bad "--mirror $bad: no final model"
done

echo "a slow mirror (400 ms per file) and a failing one (first try fails)"
D3=$cli_tmp/drive3
mkdir -p "$D3"
BERTC_DEBUG_MIRROR_DELAY_MS=400 train E --mirror "$D3" || cli_bad "E failed"
cli_n=$((cli_n + 1))
echo "case $cli_n: slow mirror: $(grep -c ' copied to ' "$cli_tmp/E/mirror.log") copied, $(grep -c 'skipped: a newer' "$cli_tmp/E/mirror.log") skipped for a newer one"
[ -d "$D3/checkpoints/step-00000040" ] || cli_bad "the last checkpoint was not mirrored at the end"
cmp -s "$cli_tmp/A/final/model.safetensors" "$cli_tmp/E/final/model.safetensors" || cli_bad "E's weights differ"
D4=$cli_tmp/drive4
mkdir -p "$D4"
BERTC_DEBUG_MIRROR_FAIL=1 BERTC_DEBUG_MIRROR_BACKOFF_MS=50 train F --mirror "$D4" || cli_bad "F failed"
cli_n=$((cli_n + 1))
echo "case $cli_n: failing mirror: $(grep -F 'mirror:' "$cli_tmp/F.log" | head -2 | tr '\n' ' ')"
[ "$(grep -c 'warning: mirror: copying' "$cli_tmp/F.log")" -eq 1 ] || cli_bad "want one warning for the failed copy"
grep -qF "failed: try 1 of 5" "$cli_tmp/F/mirror.log" || cli_bad "mirror.log lacks the failure"
[ -d "$D4/checkpoints/step-00000040" ] || cli_bad "F: step 40 not mirrored"
finish
