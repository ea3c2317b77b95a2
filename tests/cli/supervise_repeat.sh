#!/usr/bin/env bash
# bertc train --supervise N stops a failure that repeats
# (src/train/supervise.c): an attempt that exits with the same code and the
# same error line as the one before, with no new checkpoint in between,
# would fail again, so the supervisor stops after 2 attempts, not N + 1.
#  1. BERTC_DEBUG_NONFINITE=3:1000 makes every step from 3 on non-finite and
#     no checkpoint is written: each attempt stops at step 22 with the same
#     error. --supervise 5: 2 attempts, exit 1, the last line names the
#     repeat and quotes the error, restarts.csv ends with "repeated".
#  3. The same with --save-every 4: checkpoints come at steps 4 .. 20 inside
#     the skipped steps, and state.json carries the count in a row, so the
#     resumed attempt stops at step 22 again with the same error and no new
#     checkpoint: 2 attempts, exit 1 (before, each resume counted from 0
#     and the run ended with exit 0 after skipping every step from 3 on).
#  2. A death by a signal is restarted as before, even when it repeats:
#     BERTC_DEBUG_KILL=step:6 (SIGKILL at step 6, no checkpoint) with
#     --supervise 3 makes 4 attempts and exit 137.
source "$(dirname "$0")/../reliability/lib.sh"
export BERTC_SUPERVISE_BACKOFF_S=0.1
OPTS=(--max-steps 40 --save-every-minutes 0)
r_make_model "$r_tmp/model"

# ---- 1 ----
run="$r_tmp/run1"
BERTC_DEBUG_NONFINITE=3:1000 r_train "$run" "${OPTS[@]}" --supervise 5 >"$r_tmp/out1" 2>"$r_tmp/err1"
rc=$?
echo "1: exit $rc"
grep -v 'update skipped' "$r_tmp/err1" | sed 's/^/    stderr: /'
sed 's/^/    restarts.csv: /' "$run/restarts.csv" 2>/dev/null
r_check "1: exit 1" [ "$rc" -eq 1 ]
r_check "1: 2 attempts, not 6" [ "$(grep -c '^bertc: 20 steps in a row (3 to 22)' "$r_tmp/err1")" -eq 2 ]
r_check "1: one restart" [ "$(grep -c 'supervise: attempt 1 exited with code 1' "$r_tmp/err1")" -eq 1 ]
r_check "1: the last line says it repeated and quotes the error" \
    bash -c "tail -1 '$r_tmp/err1' | grep -q '^bertc: supervise: attempt 2 failed as attempt 1 did (exit 1, no checkpoint, the same error).*not restarting (4 restarts left): 20 steps in a row (3 to 22)'"
r_check "1: restarts.csv: header, restart, repeated" \
    bash -c "[ \"\$(cut -d, -f2,4,8 '$run/restarts.csv' | tr '\n' ' ')\" = 'attempt,exit_code,action 1,1,restart 2,1,repeated ' ]"

# ---- 3 ----
run="$r_tmp/run3"
BERTC_DEBUG_NONFINITE=3:1000 r_train "$run" "${OPTS[@]}" --save-every 4 --supervise 5 >"$r_tmp/out3" 2>"$r_tmp/err3"
rc=$?
echo "3: exit $rc; checkpoints: $(ls "$run/checkpoints" 2>/dev/null | tr '\n' ' ')"
grep -v 'update skipped' "$r_tmp/err3" | sed 's/^/    stderr: /'
r_check "3: exit 1" [ "$rc" -eq 1 ]
r_check "3: 2 attempts, both stopping at step 22" [ "$(grep -c '^bertc: 20 steps in a row (3 to 22)' "$r_tmp/err3")" -eq 2 ]
r_check "3: the newest checkpoint's state.json holds 18 in a row" \
    grep -q '"skipped_in_row": 18' "$run/checkpoints/step-00000020/state.json"

# ---- 2 ----
r_killed_every_attempt 3 "${OPTS[@]}"
r_check "2: gave up after 3 restarts" \
    bash -c "tail -1 '$r_tmp/err2' | grep -q 'giving up after 3 restarts' && tail -1 '$run/restarts.csv' | grep -q ',4,.*,gave-up,'"
finish
