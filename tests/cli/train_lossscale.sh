#!/usr/bin/env bash
# The trainer's loss scaler (fp16's dynamic loss scaling) and its skipped-step
# bookkeeping, on the CPU. fp16 does not run here, so the test hook
# BERTC_DEBUG_LOSS_SCALE=1 turns the scaler on in fp32: multiplying the loss
# gradient by a power of two and dividing it out again is exact in fp32, so a
# scaled run must end with the same bytes as an unscaled one. With
# BERTC_DEBUG_NONFINITE=FIRST:COUNT (steps made non-finite) the scale must
# halve at each skipped step, and a run resumed from a checkpoint inside the
# skipped steps must continue exactly (scale, growth tracker, skipped count).
#  A. scaled = unscaled, bit for bit; loss_scale 65536 in metrics.csv and
#     state.json; the start-up report says the loss is scaled.
#  B. steps 5-7 non-finite: the same final model as the unscaled run with the
#     same hook; loss_scale 65536 .. 32768, 16384, then 8192; state.json holds
#     scale 8192, tracker 5, 3 skipped; info.csv and report.html say 3
#     skipped steps (for the unscaled run too).
#  C. resumed from checkpoint 6: the same final model, metrics.csv and scaler
#     state as B.
#  D. killed (SIGKILL) after step 8 with steps 5-6 skipped: info.csv already
#     says 2 (it follows the count, not only at the end), and so does the
#     report; resumed, it ends with 2.
#  E. a scaled checkpoint resumed without the hook: exit 2, the error names
#     state.json and the loss scale.
source "$(dirname "$0")/../reliability/lib.sh"

r_make_model "$r_tmp/model"
O=(--max-steps 12 --save-every 1 --save-every-minutes 0 --keep 0)
ck() { r_ckpt_dir "$run" "$1"; }
# field NAME FILE: the value of a top-level number field of a state.json
field() { sed -n "s/^  \"$1\": \\([^,]*\\),\$/\\1/p" "$2"; }
col() { cut -d, -f"$1" "$2"; }

# ---- A ----
r_train "$r_tmp/ref" "${O[@]}" >"$r_tmp/ref.out" 2>"$r_tmp/ref.err"
rc1=$?
BERTC_DEBUG_LOSS_SCALE=1 r_train "$r_tmp/ls" "${O[@]}" >"$r_tmp/ls.out" 2>"$r_tmp/ls.err"
rc2=$?
run=$r_tmp/ls
echo "A: unscaled -> exit $rc1, scaled -> exit $rc2; $(grep -m1 '^  backend ' "$r_tmp/ls.out")"
echo "A: loss_scale column of the scaled run: $(col 6 "$run/metrics.csv" | tail -n +2 | sort | uniq -c | tr -s ' \n' ' ')"
r_check "A: both exit 0" [ "$rc1" -eq 0 -a "$rc2" -eq 0 ]
r_check "A: the scaled run's final model = the unscaled one's (bit for bit)" \
    cmp -s "$r_tmp/ref/final/model.safetensors" "$run/final/model.safetensors"
r_check "A: step, epoch, loss, lr, grad_norm identical in metrics.csv" \
    cmp -s <(col 1-5 "$r_tmp/ref/metrics.csv") <(col 1-5 "$run/metrics.csv")
r_check "A: loss_scale 65536 on every row of the scaled run, 1 on the unscaled" \
    bash -c "[ \"\$(cut -d, -f6 '$run/metrics.csv' | tail -n +2 | sort -u)\" = 65536 ] &&
             [ \"\$(cut -d, -f6 '$r_tmp/ref/metrics.csv' | tail -n +2 | sort -u)\" = 1 ]"
r_check "A: the start-up report says the loss is scaled" grep -q '^  backend .*dynamic loss scaling, scale 65536' "$r_tmp/ls.out"
st=$(ck 12)/state.json
echo "A: state.json of step 12: loss_scale $(field loss_scale "$st"), tracker $(field loss_scale_growth_tracker "$st")"
r_check "A: state.json: loss_scale 65536, growth tracker 12" \
    bash -c "[ '$(field loss_scale "$st")' = 65536.0 ] && [ '$(field loss_scale_growth_tracker "$st")' = 12 ]"
st=$(r_ckpt_dir "$r_tmp/ref" 12)/state.json
r_check "A: unscaled state.json: loss_scale 1, tracker 0" \
    bash -c "[ '$(field loss_scale "$st")' = 1.0 ] && [ '$(field loss_scale_growth_tracker "$st")' = 0 ]"

# ---- B ----
BERTC_DEBUG_NONFINITE=5:3 r_train "$r_tmp/refn" "${O[@]}" >"$r_tmp/refn.out" 2>"$r_tmp/refn.err"
rc1=$?
BERTC_DEBUG_NONFINITE=5:3 BERTC_DEBUG_LOSS_SCALE=1 r_train "$r_tmp/lsn" "${O[@]}" >"$r_tmp/lsn.out" 2>"$r_tmp/lsn.err"
rc2=$?
run=$r_tmp/lsn
scales=$(col 6 "$run/metrics.csv" | tail -n +2 | tr '\n' ' ')
echo "B: unscaled -> exit $rc1, scaled -> exit $rc2; loss_scale by step: $scales"
grep 'non-finite' "$r_tmp/lsn.err" | sed 's/^/    stderr: /'
r_check "B: both exit 0" [ "$rc1" -eq 0 -a "$rc2" -eq 0 ]
r_check "B: the same final model as the unscaled run with the same skipped steps" \
    cmp -s "$r_tmp/refn/final/model.safetensors" "$run/final/model.safetensors"
r_check "B: the scale halves at each skipped step" \
    [ "$scales" = "65536 65536 65536 65536 65536 32768 16384 8192 8192 8192 8192 8192 " ]
r_check "B: each skipped step reported with its scale" \
    bash -c "grep -q 'step 5: .*loss scale 65536.*now 32768' '$r_tmp/lsn.err' &&
             grep -q 'step 7: .*loss scale 16384.*now 8192' '$r_tmp/lsn.err'"
st=$(ck 12)/state.json
echo "B: state.json of step 12: loss_scale $(field loss_scale "$st"), tracker $(field loss_scale_growth_tracker "$st"), skipped $(field skipped_steps "$st")"
r_check "B: state.json: scale 8192, tracker 5 (clean steps 8-12), 3 skipped" \
    bash -c "[ '$(field loss_scale "$st")' = 8192.0 ] && [ '$(field loss_scale_growth_tracker "$st")' = 5 ] &&
             [ '$(field skipped_steps "$st")' = 3 ]"
for r in refn lsn; do
    echo "B: $r: info.csv: $(grep '^skipped_steps,' "$r_tmp/$r/info.csv"); report: $(grep -o 'Skipped steps</th><td>[^<]*' "$r_tmp/$r/report.html")"
    r_check "B: $r: info.csv has skipped_steps,3" grep -qx 'skipped_steps,3' "$r_tmp/$r/info.csv"
    r_check "B: $r: report.html's summary shows 3 skipped steps" grep -q 'Skipped steps</th><td>3</td>' "$r_tmp/$r/report.html"
done
r_check "A: a run without skipped steps has skipped_steps,0" grep -qx 'skipped_steps,0' "$r_tmp/ls/info.csv"

# ---- C ----
cp -a "$r_tmp/lsn" "$r_tmp/lsn6"
for s in $(r_ckpt_steps "$r_tmp/lsn6"); do [ "$s" -gt 6 ] && rm -rf "$(r_ckpt_dir "$r_tmp/lsn6" "$s")"; done
rm -rf "$r_tmp/lsn6/final"
BERTC_DEBUG_NONFINITE=5:3 BERTC_DEBUG_LOSS_SCALE=1 r_train "$r_tmp/lsn6" "${O[@]}" >"$r_tmp/lsn6.out" 2>"$r_tmp/lsn6.err"
rc=$?
run=$r_tmp/lsn6
echo "C: resumed from checkpoint 6 -> exit $rc; $(grep -m1 '^  resume ' "$r_tmp/lsn6.out"); $(grep -m1 '^  backend ' "$r_tmp/lsn6.out")"
r_check "C: exit 0, resumed from step 6" bash -c "[ $rc -eq 0 ] && grep -q '^  resume    from .*step-00000006' '$r_tmp/lsn6.out'"
r_check "C: the same final model as B" cmp -s "$r_tmp/lsn/final/model.safetensors" "$run/final/model.safetensors"
r_check "C: metrics.csv (step .. loss_scale) as B" \
    cmp -s <(col 1-6 "$r_tmp/lsn/metrics.csv") <(col 1-6 "$run/metrics.csv")
r_check "C: the start-up report shows the restored scale 16384" grep -q 'dynamic loss scaling, scale 16384' "$r_tmp/lsn6.out"
a=$(ck 12)/state.json b=$(r_ckpt_dir "$r_tmp/lsn" 12)/state.json
r_check "C: the last state.json has B's scale, tracker and skipped count" \
    bash -c "for f in loss_scale loss_scale_growth_tracker skipped_steps adam_t; do
                 [ \"\$(sed -n \"s/^  \\\"\$f\\\": //p\" '$a')\" = \"\$(sed -n \"s/^  \\\"\$f\\\": //p\" '$b')\" ] || exit 1
             done"

# ---- D ----
run=$r_tmp/kill
BERTC_DEBUG_NONFINITE=5:2 BERTC_DEBUG_KILL=step:8 r_train "$run" "${O[@]}" >"$r_tmp/kill.out" 2>"$r_tmp/kill.err"
rc=$?
echo "D: killed at step 8 -> exit $rc; info.csv: $(grep '^skipped_steps,' "$run/info.csv"); report: $(grep -o 'Skipped steps</th><td>[^<]*' "$run/report.html")"
r_check "D: killed by SIGKILL (exit 137), nothing exported" [ "$rc" -eq 137 -a ! -e "$run/final" ]
r_check "D: info.csv says 2 skipped steps at the kill" grep -qx 'skipped_steps,2' "$run/info.csv"
r_check "D: report.html (refreshed at checkpoint 7) says 2" grep -q 'Skipped steps</th><td>2</td>' "$run/report.html"
BERTC_DEBUG_NONFINITE=5:2 r_train "$run" "${O[@]}" >"$r_tmp/kill2.out" 2>"$r_tmp/kill2.err"
rc=$?
echo "D: resumed -> exit $rc; info.csv: $(grep '^skipped_steps,' "$run/info.csv")"
r_check "D: resumed run finishes with skipped_steps,2 in info.csv and the report" \
    bash -c "[ $rc -eq 0 ] && grep -qx 'skipped_steps,2' '$run/info.csv' && grep -q 'Skipped steps</th><td>2</td>' '$run/report.html'"

# ---- E ----
cp -a "$r_tmp/lsn" "$r_tmp/nohook"
for s in $(r_ckpt_steps "$r_tmp/nohook"); do [ "$s" -gt 6 ] && rm -rf "$(r_ckpt_dir "$r_tmp/nohook" "$s")"; done
rm -rf "$r_tmp/nohook/final"
r_train "$r_tmp/nohook" "${O[@]}" >"$r_tmp/nohook.out" 2>"$r_tmp/nohook.err"
rc=$?
echo "E: a scaled checkpoint resumed without the hook -> exit $rc: $(tail -1 "$r_tmp/nohook.err")"
r_check "E: exit 2, the error names state.json and the loss scale" \
    bash -c "[ $rc -eq 2 ] && tail -1 '$r_tmp/nohook.err' | grep -q '^bertc: .*step-00000006/state.json: loss scale: scale 16384'"
finish
