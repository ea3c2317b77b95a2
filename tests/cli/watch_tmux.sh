#!/usr/bin/env bash
# bertc watch RUN in a terminal (tmux send-keys / capture-pane): it follows
# a run dir that grows (rows appended to metrics.csv between two captures),
# stops by itself when the run is done, quits on Ctrl-C; --once on a real
# finished training run; bad arguments exit 2. Skipped without tmux.
source "$(dirname "$0")/lib/cli.sh"

echo "a real tiny run, then watch --once on it"
A=$cli_tmp/A
"$BERTC" train --model tests/ref/train3/init --train tests/data/train_small.json --dev tests/data/train_small.json \
    --out "$A" --max-seq-length 64 --doc-stride 16 --batch 4 --micro-batch 2 --max-steps 20 --lr 1e-3 --save-every 10 \
    --eval-every 10 --threads 2 --save-every-minutes 0 --monitor-interval 0.2 >"$cli_tmp/train.log" 2>&1 ||
    cli_bad "train failed: $(tail -3 "$cli_tmp/train.log")"
cli_n=$((cli_n + 1))
"$BERTC" watch "$A" --once >"$cli_tmp/once" 2>"$cli_tmp/err"
rc=$?
echo "case $cli_n: watch --once -> exit $rc"; cat "$cli_tmp/once"
[ "$rc" -eq 0 ] || cli_bad "watch --once exit $rc: $(cat "$cli_tmp/err")"
for want in "state done" "step 20" "eval at step 20: EM" "checkpoint step 20: $A/checkpoints/step-00000020" "CPU " "loss  "; do
    grep -qF -- "$want" "$cli_tmp/once" || cli_bad "watch --once lacks '$want'"
done
expect 2 "is not a run directory" -- watch "$cli_tmp/nope" --once
expect 2 "expected one run directory" -- watch
expect_help watch "usage: bertc watch RUN" --interval --once --count

if ! command -v tmux >/dev/null; then
    echo "skipped the terminal part: tmux is not installed"
    finish
fi
sock="bertc-watch-$$"
tm() { tmux -L "$sock" "$@"; }
trap 'tmux -L "$sock" kill-server 2>/dev/null; rm -rf "$cli_tmp"' EXIT
B=$cli_tmp/B
mkdir -p "$B"
printf 'key,value\ntotal_steps,100\n' >"$B/info.csv"
echo "step,epoch,loss,lr,grad_norm,loss_scale,examples_per_s,elapsed_s" >"$B/metrics.csv"
row() { echo "$1,$(awk -v s="$1" 'BEGIN { printf "%.2f,%.4f,1e-05,1.0,1,10.0,%.1f", s / 50, 5 - s / 40, s / 10 }')" >>"$B/metrics.csv"; }
for s in 1 2 3 4 5; do row $s; done
# a wide pane; the shell keeps the pane after watch exits, to read its last frame
tm new-session -d -s w -x 200 -y 30 "$BERTC watch '$B' --interval 0.3; echo watch-exit-\$?; sleep 30"
capture() { tm capture-pane -p -t w >"$cli_tmp/pane" 2>/dev/null; }
wait_for() { # wait_for TEXT: up to 10 s
    for _ in $(seq 1 100); do
        capture
        grep -qF -- "$1" "$cli_tmp/pane" && return 0
        sleep 0.1
    done
    return 1
}
cli_n=$((cli_n + 1))
wait_for "step 5/100 (5.0%)" || cli_bad "no 'step 5/100' in the pane"
echo "case $cli_n: first frame:"; sed 's/^/  | /' "$cli_tmp/pane" | grep -v '^  | $'
grep -qF "ETA " "$cli_tmp/pane" || cli_bad "no ETA in the pane"
for s in $(seq 6 30); do row $s; done
cli_n=$((cli_n + 1))
wait_for "step 30/100 (30.0%)" || cli_bad "the pane did not refresh to step 30"
echo "case $cli_n: after 25 more rows: $(grep -F 'step 30/' "$cli_tmp/pane")"
grep -qF "ETA 7.0 s" "$cli_tmp/pane" || cli_bad "ETA at step 30 of 100 at 10 steps/s should be 7.0 s"
mkdir -p "$B/final" && echo x >"$B/final/model.safetensors"
cli_n=$((cli_n + 1))
wait_for "watch-exit-0" || cli_bad "watch did not exit by itself when the run was done"
grep -qF "state done" "$cli_tmp/pane" || cli_bad "last frame lacks 'state done'"
echo "case $cli_n: run done -> $(grep -F watch-exit "$cli_tmp/pane")"
tm kill-session -t w
# Ctrl-C quits at once with exit 0
rm -rf "$B/final"
tm new-session -d -s c -x 200 -y 30 "$BERTC watch '$B' --interval 5; echo watch-exit-\$?; sleep 30"
cli_n=$((cli_n + 1))
for _ in $(seq 1 100); do tm capture-pane -p -t c | grep -qF "step 30/100" && break; sleep 0.1; done
tm send-keys -t c C-c
for _ in $(seq 1 30); do tm capture-pane -p -t c | grep -qF "watch-exit-" && break; sleep 0.1; done
got=$(tm capture-pane -p -t c | grep -oE 'watch-exit-[0-9]+')
echo "case $cli_n: Ctrl-C -> $got"
[ "$got" = "watch-exit-0" ] || cli_bad "Ctrl-C: '$got', want watch-exit-0 within 3 s"
finish
