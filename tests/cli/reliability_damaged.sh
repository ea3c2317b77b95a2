#!/usr/bin/env bash
# Damaged checkpoints. A tiny run is killed after step 10 with
# checkpoints at steps 4 and 8. Then, in a copy of that run dir each time,
# one file of the newest checkpoint (every file it has) is truncated to half
# its size, or has one byte flipped at a pseudo-random place, and the run is
# resumed: the damage must be detected by the manifest's sizes and CRCs,
# reported on stderr naming the checkpoint and the file, and the previous
# checkpoint (step 4) used; the run then ends with the same final model as
# an uninterrupted run. With every checkpoint damaged the run must stop with
# a clear error and exit 1, having changed and deleted nothing; --resume
# PATH to a damaged checkpoint is refused (exit 2).
source "$(dirname "$0")/../reliability/lib.sh"

TOTAL=12
OPTS=(--max-steps "$TOTAL" --save-every 4 --save-every-minutes 0 --keep 3)
r_make_model "$r_tmp/model"
r_train "$r_tmp/ref" "${OPTS[@]}" >"$r_tmp/ref.out" 2>"$r_tmp/ref.err"
rc=$?
[ "$rc" -eq 0 ] || { cat "$r_tmp/ref.err"; r_bad "the uninterrupted run failed (exit $rc)"; finish; }
BERTC_DEBUG_KILL=step:10 r_train "$r_tmp/base" "${OPTS[@]}" >"$r_tmp/base.out" 2>"$r_tmp/base.err"
rc=$?
echo "base run killed after step 10: exit $rc, checkpoints: $(r_ckpt_steps "$r_tmp/base" | tr '\n' ' ')"
[ "$rc" -eq 137 ] && [ "$(r_ckpt_steps "$r_tmp/base" | tr '\n' ' ')" = "4 8 " ] ||
    { cat "$r_tmp/base.err"; r_bad "could not make the base run (checkpoints 4 and 8)"; finish; }
B=checkpoints/step-00000008
A=checkpoints/step-00000004
files=$(ls "$r_tmp/base/$B")
echo "files of the newest checkpoint: $(echo $files)"

damage() { # damage KIND FILE
    local size off
    size=$(r_size "$2")
    if [ "$1" = truncate ]; then
        truncate -s $((size / 2)) "$2"
        echo "truncated ${2##*/} from $size to $((size / 2)) bytes"
    else
        r_rand
        off=$((R % size))
        r_rand
        r_flip "$2" "$off" $((1 + R % 255))
        echo "flipped byte $off of ${2##*/} ($size bytes)"
    fi
}

cases=0
for f in $files; do
    for kind in truncate flip; do
        # Under ASan: every file once, alternating the kind of damage.
        if r_sanitized; then
            cases=$((cases + 1))
            [ $((cases % 2)) -eq 0 ] && [ "$kind" = truncate ] && continue
            [ $((cases % 2)) -eq 1 ] && [ "$kind" = flip ] && continue
        fi
        run="$r_tmp/case-$f-$kind"
        cp -a "$r_tmp/base" "$run"
        damage "$kind" "$run/$B/$f" >"$r_tmp/what"
        what=$(cat "$r_tmp/what")
        r_train "$run" "${OPTS[@]}" >"$r_tmp/out" 2>"$r_tmp/err"
        rc=$?
        echo "$what -> exit $rc; $(grep -m1 '^  resume ' "$r_tmp/out")"
        sed 's/^/    stderr: /' "$r_tmp/err" | head -5
        r_check "$f $kind: exit 0" [ "$rc" -eq 0 ]
        r_check "$f $kind: reported as damaged" grep -qF "$run/$B is damaged" "$r_tmp/err"
        # A damaged manifest is reported as such; a damaged file by its name.
        r_check "$f $kind: the report names $f" grep -q "$B/$f" "$r_tmp/err"
        r_check "$f $kind: resumed from step 4" grep -qF "resume    from $run/$A (step 4 of $TOTAL" "$r_tmp/out"
        r_check "$f $kind: final model identical to the uninterrupted run's" \
            cmp -s "$r_tmp/ref/final/model.safetensors" "$run/final/model.safetensors"
        rm -rf "$run"
    done
done

# Every checkpoint damaged: a clear error, exit 1, nothing changed or deleted.
run="$r_tmp/all-damaged"
cp -a "$r_tmp/base" "$run"
damage flip "$run/$B/model.safetensors"
damage truncate "$run/$A/state.json"
r_sums "$run/checkpoints" >"$r_tmp/ck.before"
r_sums "$run" >"$r_tmp/all.before"
r_train "$run" "${OPTS[@]}" >"$r_tmp/out" 2>"$r_tmp/err"
rc=$?
echo "both checkpoints damaged -> exit $rc"
sed 's/^/    stderr: /' "$r_tmp/err"
r_check "all damaged: exit 1" [ "$rc" -eq 1 ]
r_check "all damaged: the last line of stderr is an error about the damage" \
    bash -c "tail -1 '$r_tmp/err' | grep -v '^bertc: warning' | grep -q '^bertc: .*damaged'"
r_check "all damaged: both are reported" bash -c "grep -qF '$run/$A is damaged' '$r_tmp/err' && grep -qF '$run/$B is damaged' '$r_tmp/err'"
r_sums "$run/checkpoints" >"$r_tmp/ck.after"
r_check "all damaged: the checkpoints are unchanged (nothing deleted)" cmp -s "$r_tmp/ck.before" "$r_tmp/ck.after"
r_check "all damaged: no final model" [ ! -e "$run/final" ]
r_sums "$run" >"$r_tmp/all.after"
if cmp -s "$r_tmp/all.before" "$r_tmp/all.after"; then echo "note: the whole run dir is unchanged"; else
    echo "note: files of the run dir that changed:"; diff "$r_tmp/all.before" "$r_tmp/all.after" | head -10; fi

# --resume PATH to a damaged checkpoint is bad input.
run="$r_tmp/resume-path"
cp -a "$r_tmp/base" "$run"
damage flip "$run/$B/model.safetensors"
"$BERTC" train --model "$R_MODEL" --train "$R_TRAIN" --out "$run" "${R_OPTS[@]}" "${OPTS[@]}" --resume "$run/$B" \
    >"$r_tmp/out" 2>"$r_tmp/err"
rc=$?
echo "--resume $B (damaged) -> exit $rc: $(cat "$r_tmp/err")"
r_check "--resume damaged: exit 2 naming the file" bash -c "[ $rc -eq 2 ] && grep -qF '$B/model.safetensors' '$r_tmp/err'"
finish
