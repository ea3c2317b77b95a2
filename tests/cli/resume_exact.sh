#!/usr/bin/env bash
# Exact resume. Run A trains straight through. Run B is killed with SIGKILL
# at fixed moments (BERTC_DEBUG_KILL: after a step, inside a checkpoint write
# before the rename, after the rename), has its newest checkpoint damaged
# once, and is resumed each time. Run C is stopped with SIGTERM (exit 75) and
# resumed. A, B and C must end with byte-identical RUN/final/model.safetensors
# and the same loss column in metrics.csv. Then: two SIGINTs stop at once and
# leave a resumable run; a resume with another --lr is refused (exit 2).
source "$(dirname "$0")/lib/cli.sh"

STEPS=120 K1=17 K2=30 K3=50 K4=73
if [ "${BERTC_SANITIZED:-0}" = 1 ]; then STEPS=40 K1=7 K2=10 K3=20 K4=33; fi
COMMON=(--model tests/ref/train3/init --train tests/data/train_small.json --max-seq-length 64 --doc-stride 16
        --batch 4 --micro-batch 2 --max-steps "$STEPS" --lr 1e-3 --save-every 10 --keep 2 --threads 2
        --save-every-minutes 0 --monitor-interval 0 --log-every 1000)

train() { # train RUN [extra args]: runs bertc train, prints and returns its exit code
    local run=$1
    shift
    "$BERTC" train "${COMMON[@]}" --out "$run" "$@" >>"$run.log" 2>&1
    local rc=$?
    echo "  train --out $(basename "$run") $* -> exit $rc"
    return $rc
}

killed_at() { # killed_at RUN POINT:N: the run must die by SIGKILL there
    BERTC_DEBUG_KILL=$2 train "$1"
    local rc=$?
    [ "$rc" -eq 137 ] || cli_bad "BERTC_DEBUG_KILL=$2: exit $rc, want 137 (SIGKILL)"
    grep -qF "killing myself at ${2%%:*} ${2##*:}" "$1.log" || cli_bad "no kill message for $2"
}

same_as_a() { # same_as_a RUN: final weights and loss column equal run A's
    if cmp -s "$cli_tmp/A/final/model.safetensors" "$1/final/model.safetensors"; then
        echo "  $(basename "$1")/final/model.safetensors: identical to A's"
    else
        cli_bad "$(basename "$1")/final/model.safetensors differs from A's"
    fi
    cut -d, -f3 "$cli_tmp/A/metrics.csv" >"$cli_tmp/a.loss"
    cut -d, -f3 "$1/metrics.csv" >"$cli_tmp/x.loss"
    if diff -q "$cli_tmp/a.loss" "$cli_tmp/x.loss" >/dev/null; then
        echo "  $(basename "$1")/metrics.csv: same $(($(wc -l <"$cli_tmp/x.loss") - 1)) losses as A"
    else
        cli_bad "$(basename "$1")/metrics.csv loss column differs from A's"
        diff "$cli_tmp/a.loss" "$cli_tmp/x.loss" | head -5
    fi
}

echo "run A: $STEPS steps straight"
train "$cli_tmp/A" || cli_bad "run A failed: $(tail -3 "$cli_tmp/A.log")"
[ "$(($(wc -l <"$cli_tmp/A/metrics.csv") - 1))" -eq "$STEPS" ] || cli_bad "A: metrics.csv has not $STEPS rows"

echo "run B: SIGKILL after step $K1, inside checkpoint $K2, after the rename of checkpoint $K3, after step $K4"
B=$cli_tmp/B
killed_at "$B" "step:$K1"
killed_at "$B" "ckpt-files:$K2"
[ -d "$B/checkpoints/step-$(printf %08d "$K2").tmp" ] || cli_bad "no temp dir left by the kill inside checkpoint $K2"
[ -d "$B/checkpoints/step-$(printf %08d "$K2")" ] && cli_bad "checkpoint $K2 was renamed although killed before"
killed_at "$B" "ckpt-renamed:$K3"
killed_at "$B" "step:$K4"
newest=$(ls -d "$B"/checkpoints/step-* | grep -v '\.tmp$' | sort | tail -1)
echo "  damaging $(basename "$newest")/model.safetensors"
printf '\x55' | dd of="$newest/model.safetensors" bs=1 seek=200 count=1 conv=notrunc status=none
train "$B" || cli_bad "B: final resume failed: $(tail -3 "$B.log")"
grep -qF "is damaged and is skipped" "$B.log" || cli_bad "B: the damaged checkpoint was not reported"
ls "$B"/checkpoints | grep -q '\.tmp$' && cli_bad "B: a temp dir survived"
[ "$(ls "$B/checkpoints" | wc -l)" -le 2 ] || cli_bad "B: more than --keep 2 checkpoints: $(ls "$B/checkpoints")"
same_as_a "$B"

echo "run C: SIGTERM during training, then resumed"
C=$cli_tmp/C
"$BERTC" train "${COMMON[@]}" --out "$C" >"$C.log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do
    [ -f "$C/metrics.csv" ] && [ "$(wc -l <"$C/metrics.csv")" -gt $((STEPS / 3)) ] && break
    sleep 0.05
done
kill -TERM "$pid"
wait "$pid"
rc=$?
echo "  SIGTERM -> exit $rc: $(grep -F 'stopped by signal' "$C.log")"
[ "$rc" -eq 75 ] || cli_bad "C: exit $rc after SIGTERM, want 75"
grep -qF "stopped by signal 15" "$C.log" || cli_bad "C: no 'stopped by signal 15' line"
stopped=$(grep -oE 'at step [0-9]+' "$C.log" | head -1 | grep -oE '[0-9]+')
[ -d "$C/checkpoints/step-$(printf %08d "${stopped:-0}")" ] || cli_bad "C: no checkpoint at the step it stopped ($stopped)"
train "$C" || cli_bad "C: resume failed: $(tail -3 "$C.log")"
same_as_a "$C"

echo "a resume with another --lr is refused"
expect 2 "holds a run with --lr 0.001, this command has --lr 0.002" -- train "${COMMON[@]}" --out "$B" --lr 2e-3

echo "two SIGINTs: the second stops at once; the run stays resumable"
D=$cli_tmp/D
"$BERTC" init --config tiny --vocab tests/ref/train3/init/vocab.txt --out "$cli_tmp/tiny" >/dev/null 2>&1
DARGS=(--model "$cli_tmp/tiny" --train tests/data/train_small.json --max-seq-length 256 --doc-stride 64 --batch 16
       --max-steps 8 --save-every 1 --threads 2 --save-every-minutes 0 --monitor-interval 0)
"$BERTC" train "${DARGS[@]}" --out "$D" >"$D.log" 2>&1 &
pid=$!
for _ in $(seq 1 1200); do
    [ -d "$D/checkpoints/step-00000002" ] && break
    sleep 0.05
done
kill -INT "$pid"
sleep 0.02
kill -INT "$pid" 2>/dev/null
wait "$pid"
rc=$?
echo "  SIGINT, SIGINT -> exit $rc"
# 130 = killed by the second SIGINT; 75 only if the first one had already
# finished its step and the save before the second arrived.
[ "$rc" -eq 130 ] || [ "$rc" -eq 75 ] || cli_bad "D: exit $rc after two SIGINTs, want 130"
"$BERTC" train "${DARGS[@]}" --out "$D" >>"$D.log" 2>&1
rc=$?
echo "  resume -> exit $rc"
[ "$rc" -eq 0 ] || cli_bad "D: resume after two SIGINTs failed: $(tail -3 "$D.log")"
grep -qF "is damaged" "$D.log" && cli_bad "D: a checkpoint was left damaged"
finish
