#!/usr/bin/env bash
# Kill torture: a tiny run is killed with SIGKILL at 24 moments
# (10 under ASan) chosen by a seeded pseudo-random sequence, and resumed with
# the same command each time, until it finishes. The moments cycle through:
#   step:N          BERTC_DEBUG_KILL: after optimizer step N, nothing saved
#   ckpt-files:N    inside the write of checkpoint N (files synced, not renamed)
#   ckpt-renamed:N  after the rename, before old checkpoints are pruned
#   prune           while an old checkpoint is being deleted: the ckpt-prune
#                   hook if the binary has it, otherwise a kill at
#                   ckpt-renamed:N followed by deleting part of the oldest
#                   checkpoint, which is what a kill inside the prune leaves
#   kill -9 once metrics.csv shows step N, after a further 0-30 ms
#   kill -9 0-250 ms after the start (loading, features, resume)
# Every attempt must end killed (137) or done (0); each resume names the
# newest checkpoint; the finished run's final/model.safetensors must be
# byte-identical to an uninterrupted run's and its metrics.csv the same.
source "$(dirname "$0")/../reliability/lib.sh"

if r_sanitized; then TOTAL=24; MIN=10; else TOTAL=48; MIN=24; fi
SAVE=3
KEEP=2
OPTS=(--max-steps "$TOTAL" --save-every "$SAVE" --save-every-minutes 0 --keep "$KEEP")
r_make_model "$r_tmp/model"
HAVE_PRUNE_HOOK=0
grep -qa "ckpt-prune" "$BERTC" && HAVE_PRUNE_HOOK=1
echo "tiny run of $TOTAL steps, checkpoint every $SAVE, keep $KEEP; at least $MIN kills; ckpt-prune hook: $HAVE_PRUNE_HOOK"

t0=$SECONDS
ms0=$(date +%s%3N)
r_train "$r_tmp/ref" "${OPTS[@]}" >"$r_tmp/ref.out" 2>"$r_tmp/ref.err"
rc=$?
# Kills aim at the first KT steps, so that the run never ends before its
# last kill however fast the machine; real kills wait at most half of what
# the rest of the run is expected to take (from the uninterrupted run).
REF_MS=$(($(date +%s%3N) - ms0))
KT=$((TOTAL - 6))
echo "uninterrupted run: exit $rc in $REF_MS ms"
[ "$rc" -eq 0 ] || { cat "$r_tmp/ref.err"; r_bad "the uninterrupted run failed"; finish; }

run="$r_tmp/run"
out="$r_tmp/attempt.out"
err="$r_tmp/attempt.err"

# Smallest checkpoint step >= N: a multiple of SAVE below TOTAL, or TOTAL.
save_at() {
    local s=$(((($1 + SAVE - 1) / SAVE) * SAVE))
    [ "$s" -ge "$TOTAL" ] && s=$TOTAL
    echo "$s"
}
# What a kill inside the prune leaves: part of the oldest checkpoint deleted
# (when there is one beyond KEEP to prune), the directory itself still there.
half_prune() {
    local steps oldest files n k i
    steps=($(r_ckpt_steps "$run"))
    [ "${#steps[@]}" -gt "$KEEP" ] || { echo "    (no checkpoint to prune yet)"; return; }
    oldest=$(r_ckpt_dir "$run" "${steps[0]}")
    files=($(ls "$oldest"))
    n=${#files[@]}
    # An earlier half prune may have deleted every file of it already.
    [ "$n" -gt 0 ] || { echo "    (${oldest##*/} is already empty)"; return; }
    r_rand
    k=$((1 + R % n))
    r_rand
    for ((i = 0; i < k; i++)); do rm -f "$oldest/${files[$(((R + i) % n))]}"; done
    echo "    deleted $k of $n files of ${oldest##*/}"
}

kills=0
attempt=0
finished=0
declare -A seen
while [ "$attempt" -lt $((MIN * 3)) ]; do
    attempt=$((attempt + 1))
    newest=$(r_newest "$run")
    left=$((MIN - kills))
    if [ "$left" -le 0 ]; then
        what="no kill"
        env -u BERTC_DEBUG_KILL "$BERTC" train --model "$R_MODEL" --train "$R_TRAIN" --out "$run" "${R_OPTS[@]}" \
            "${OPTS[@]}" >"$out" 2>"$err"
        rc=$?
    else
        # Spread the kill points over what is left of the run.
        span=$(((KT - newest) * 2 / (left + 1)))
        [ "$span" -lt 1 ] && span=1
        r_rand
        n=$((newest + 1 + R % span))
        [ "$n" -gt "$KT" ] && n=$KT
        [ "$n" -le "$newest" ] && n=$((newest + 1))
        rest_ms=$((REF_MS * (TOTAL - newest) / TOTAL / 2))
        [ "$rest_ms" -lt 2 ] && rest_ms=2
        kind=$((attempt % 6))
        # Once the last checkpoint is written only the export is left to hit.
        [ "$newest" -ge "$TOTAL" ] && kind=5
        hook=""
        case $kind in
        0) hook="step:$n" ;;
        1) hook="ckpt-files:$(save_at "$n")" ;;
        2 | 3) hook="ckpt-renamed:$(save_at "$n")" ;;
        esac
        [ "$kind" -eq 3 ] && [ "$HAVE_PRUNE_HOOK" -eq 1 ] && hook="ckpt-prune:$(save_at "$n")"
        if [ -n "$hook" ]; then
            what="BERTC_DEBUG_KILL=$hook"
            [ "$kind" -eq 3 ] && [ "$HAVE_PRUNE_HOOK" -eq 0 ] && what="$what, then half a prune"
            BERTC_DEBUG_KILL=$hook r_train "$run" "${OPTS[@]}" >"$out" 2>"$err"
            rc=$?
        else
            r_cmd "$run" "${OPTS[@]}"
            "${R_CMD[@]}" >"$out" 2>"$err" &
            pid=$!
            r_rand
            if [ "$kind" -eq 4 ]; then
                delay=$(printf '0.%03d' $((R % (rest_ms < 30 ? rest_ms : 30))))
                what="kill -9 at step >= $n + ${delay}s"
                r_wait_for r_ended_or_rows_gt "$pid" "$run" $((n - 1))
            else
                delay=$(printf '0.%03d' $((R % (rest_ms < 250 ? rest_ms : 250))))
                what="kill -9 ${delay}s after the start"
            fi
            sleep "$delay"
            kill -9 "$pid" 2>/dev/null
            wait "$pid" 2>/dev/null
            rc=$?
        fi
    fi
    resume_line=$(grep -m1 '^  resume ' "$out")
    echo "attempt $attempt (newest checkpoint $newest): $what -> exit $rc; ${resume_line:-(killed before the start-up report)}"
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 137 ]; then
        r_bad "attempt $attempt: exit $rc, want 0 or 137 (killed)"
        sed 's/^/    /' "$err"
        break
    fi
    if [ -n "$resume_line" ]; then
        if [ "$newest" -eq 0 ]; then
            echo "$resume_line" | grep -q "none" || r_bad "attempt $attempt resumed although there was no checkpoint"
        else
            echo "$resume_line" | grep -qF "$(r_ckpt_dir "$run" "$newest") (step $newest of $TOTAL" ||
                r_bad "attempt $attempt did not resume from step $newest"
        fi
    fi
    if [ "$rc" -eq 137 ]; then
        kills=$((kills + 1))
        seen[$kind]=$((${seen[$kind]:-0} + 1))
        [ "$kind" -eq 3 ] && [ "$HAVE_PRUNE_HOOK" -eq 0 ] && half_prune
    else
        finished=1
        break
    fi
done
echo "$kills kills in $attempt attempts (by kind: step ${seen[0]:-0}, ckpt-files ${seen[1]:-0}, ckpt-renamed ${seen[2]:-0}, prune ${seen[3]:-0}, kill-at-step ${seen[4]:-0}, kill-after-start ${seen[5]:-0}); $((SECONDS - t0)) s in all"
r_check "the run finished" [ "$finished" -eq 1 ]
r_check "$kills kills >= $MIN" [ "$kills" -ge "$MIN" ]
r_check "every kind of moment was used" [ "${#seen[@]}" -eq 6 ]
r_check "every resume succeeded (last attempt exit 0)" [ "$rc" -eq 0 ]
r_check "final/model.safetensors is byte-identical to the uninterrupted run's" \
    cmp "$r_tmp/ref/final/model.safetensors" "$run/final/model.safetensors"
r_check "final/config.json identical" cmp "$r_tmp/ref/final/config.json" "$run/final/config.json"
r_metrics "$r_tmp/ref" >"$r_tmp/ref.metrics"
r_metrics "$run" >"$r_tmp/run.metrics"
r_check "metrics.csv (step, epoch, loss, lr, grad_norm, loss_scale) identical, $(wc -l <"$r_tmp/ref.metrics") lines" \
    cmp "$r_tmp/ref.metrics" "$r_tmp/run.metrics"
left_over=$(find "$run" -name '*.tmp' | head -5)
r_check "no temporary checkpoint or export dirs left: ${left_over:-none}" [ -z "$left_over" ]
# A kill inside an atomic file write leaves NAME.tmp.PID; whether this run
# has one depends on where the real kills landed, so it is only reported
# here (reliability_leftovers.sh checks the clean-up deterministically).
stale=$(find "$run" -name '*.tmp.*' | head -5 | tr '\n' ' ')
[ -n "$stale" ] && echo "note: temporary files of interrupted atomic writes left in the run dir: $stale"
r_check "$KEEP checkpoints kept: $(r_ckpt_steps "$run" | tr '\n' ' ')" [ "$(r_ckpt_steps "$run" | wc -l)" -eq "$KEEP" ]
finish
