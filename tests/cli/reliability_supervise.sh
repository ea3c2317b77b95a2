#!/usr/bin/env bash
# bertc train --supervise N (src/train/supervise.c, which
# test_supervise checks with a fake child; this is the real trainer).
#  1. The trainer is killed with kill -9 twice mid-run: the supervisor
#     restarts it (--resume auto), logs both restarts on stderr and in
#     RUN/restarts.csv, and the run ends with exit 0 and a final model
#     byte-identical to an uninterrupted run's.
#  2. BERTC_DEBUG_KILL=step:6 kills every attempt at step 6: with
#     --supervise 2 there are 3 attempts, then exit 137 and an error saying
#     the supervisor gave up.
#  3. Bad input (exit 2) is not restarted: one line on stderr, no run dir.
#  4. SIGTERM to the supervisor reaches the trainer once: it saves and both
#     exit 75, no restart; the same command then finishes the run.
#  5. Bad values of --supervise are usage errors (exit 2).
source "$(dirname "$0")/../reliability/lib.sh"
export BERTC_SUPERVISE_BACKOFF_S=0.1

TOTAL=40
OPTS=(--max-steps "$TOTAL" --save-every 4 --save-every-minutes 0 --keep 2)
r_make_model "$r_tmp/model"
r_train "$r_tmp/ref" "${OPTS[@]}" >"$r_tmp/ref.out" 2>"$r_tmp/ref.err" ||
    { cat "$r_tmp/ref.err"; r_bad "the uninterrupted run failed"; finish; }

child_of() { pgrep -P "$1" | head -1; }
# a trainer child of supervisor $1 other than pid $2
new_child() {
    local c
    c=$(child_of "$1")
    [ -n "$c" ] && [ "$c" != "$2" ]
}

# ---- 1 ----
run="$r_tmp/run1"
r_cmd "$run" "${OPTS[@]}" --supervise 3
"${R_CMD[@]}" >"$r_tmp/out1" 2>"$r_tmp/err1" &
sup=$!
killed=""
for at in 10 26; do
    if r_wait_for r_ended_or_rows_gt "$sup" "$run" "$at" && r_alive "$sup"; then
        c=$(child_of "$sup")
        if [ -n "$c" ] && [ "$c" != "$sup" ]; then
            kill -9 "$c"
            killed="$killed $c"
            echo "1: killed trainer pid $c at step $(r_rows "$run")"
            r_wait_for new_child "$sup" "$c" ||
                echo "1: no new trainer after the kill"
        fi
    fi
done
wait "$sup"
rc=$?
echo "1: supervisor exit $rc"
grep 'supervise' "$r_tmp/err1" | sed 's/^/    stderr: /'
cat "$run/restarts.csv" 2>/dev/null | sed 's/^/    restarts.csv: /'
r_check "1: two trainers killed" [ "$(echo $killed | wc -w)" -eq 2 ]
r_check "1: exit 0" [ "$rc" -eq 0 ]
r_check "1: two restarts on stderr" [ "$(grep -c 'supervise: attempt [12] was killed by signal 9 (SIGKILL)' "$r_tmp/err1")" -eq 2 ]
r_check "1: restarts.csv: header, 2 restarts, done" \
    bash -c "[ \"\$(cut -d, -f2,4,5,8 '$run/restarts.csv' | tr '\n' ' ')\" = 'attempt,exit_code,signal,action 1,137,SIGKILL,restart 2,137,SIGKILL,restart 3,0,,done ' ]"
r_check "1: final model identical to the uninterrupted run's" \
    cmp -s "$r_tmp/ref/final/model.safetensors" "$run/final/model.safetensors"

# ---- 2 ----
r_killed_every_attempt 2 "${OPTS[@]}"
r_check "2: the last line says it gave up" \
    bash -c "tail -1 '$r_tmp/err2' | grep -q '^bertc: supervise: attempt 3 was killed by signal 9 (SIGKILL).*giving up after 2 restarts'"
r_check "2: restarts.csv ends with gave-up" bash -c "tail -1 '$run/restarts.csv' | grep -q ',3,.*,gave-up,'"

# ---- 3 ----
run="$r_tmp/run3"
"$BERTC" train --model "$R_MODEL" --train "$r_tmp/no-such.json" --out "$run" "${R_OPTS[@]}" --supervise 3 \
    >"$r_tmp/out3" 2>"$r_tmp/err3"
rc=$?
echo "3: exit $rc: $(cat "$r_tmp/err3")"
r_check "3: exit 2, one line, no restart, no run dir" \
    bash -c "[ $rc -eq 2 ] && [ \$(wc -l <'$r_tmp/err3') -eq 1 ] && grep -q '^bertc: .*no-such.json' '$r_tmp/err3' && [ ! -e '$run' ]"

# ---- 4 ----
run="$r_tmp/run4"
r_cmd "$run" "${OPTS[@]}" --supervise 3
"${R_CMD[@]}" >"$r_tmp/out4" 2>"$r_tmp/err4" &
sup=$!
r_wait_for r_ended_or_rows_gt "$sup" "$run" 10
kill -TERM "$sup"
wait "$sup"
rc=$?
echo "4: SIGTERM to the supervisor at step ~10 -> exit $rc; $(grep -m1 stopped "$r_tmp/out4")"
r_check "4: exit 75" [ "$rc" -eq 75 ]
r_check "4: the trainer saved and said so" grep -q "stopped by signal 15 at step .*checkpoint saved" "$r_tmp/out4"
r_check "4: no restart" bash -c "[ ! -e '$run/restarts.csv' ] && ! grep -q 'supervise: attempt' '$r_tmp/err4'"
"${R_CMD[@]}" >"$r_tmp/out5" 2>"$r_tmp/err5"
rc=$?
echo "4: the same command again -> exit $rc; $(grep -m1 '^  resume ' "$r_tmp/out5")"
r_check "4: the rerun finishes with the same final model" \
    bash -c "[ $rc -eq 0 ] && cmp -s '$r_tmp/ref/final/model.safetensors' '$run/final/model.safetensors'"

# ---- 5 ----
"$BERTC" train --help >"$r_tmp/help" 2>&1
r_check "5: bertc train --help lists --supervise" grep -q -- '--supervise' "$r_tmp/help"
for v in -1 x 1001; do
    "$BERTC" train --model "$R_MODEL" --train "$R_TRAIN" --out "$r_tmp/run6" --supervise "$v" >"$r_tmp/out6" 2>"$r_tmp/err6"
    rc=$?
    echo "5: --supervise $v -> exit $rc: $(cat "$r_tmp/err6")"
    r_check "5: --supervise $v is a usage error" \
        bash -c "[ $rc -eq 2 ] && [ \$(wc -l <'$r_tmp/err6') -eq 1 ] && grep -q 'supervise' '$r_tmp/err6' && ! grep -q 'unknown option' '$r_tmp/err6'"
done
finish
