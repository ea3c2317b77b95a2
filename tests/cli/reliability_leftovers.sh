#!/usr/bin/env bash
# What a kill leaves behind is cleaned up by the next start (lose nothing,
# and leave no litter that accumulates over many kills).
# file_write_atomic writes NAME.tmp.PID then renames it, so a SIGKILL in
# between leaves that file (metrics.csv and eval.csv are rewritten at every
# resume, info.csv and report.html often, the features cache once); a kill
# inside a checkpoint write leaves step-N.tmp/, inside the export final.tmp/.
# Here a run killed after step 6 gets such leftovers planted, as earlier
# kills at those moments would have left them; the resumed run must finish
# with exit 0, the same final model as an uninterrupted run, and none of them.
source "$(dirname "$0")/../reliability/lib.sh"

TOTAL=8
OPTS=(--max-steps "$TOTAL" --save-every 4 --save-every-minutes 0 --keep 2)
r_make_model "$r_tmp/model"
r_train "$r_tmp/ref" "${OPTS[@]}" >"$r_tmp/ref.out" 2>"$r_tmp/ref.err" ||
    { cat "$r_tmp/ref.err"; r_bad "the uninterrupted run failed"; finish; }
run="$r_tmp/run"
BERTC_DEBUG_KILL=step:6 r_train "$run" "${OPTS[@]}" >"$r_tmp/a.out" 2>"$r_tmp/a.err"
echo "killed after step 6: exit $?, checkpoints $(r_ckpt_steps "$run" | tr '\n' ' ')"
planted=(metrics.csv.tmp.4000001 eval.csv.tmp.4000002 info.csv.tmp.4000003 report.html.tmp.4000004
    cache/train.features.tmp.4000005 checkpoints/step-00000008.tmp/model.safetensors final.tmp/config.json)
for f in "${planted[@]}"; do
    mkdir -p "$(dirname "$run/$f")"
    head -c 1000 /dev/urandom >"$run/$f"
done
echo "planted: ${planted[*]}"
r_train "$run" "${OPTS[@]}" >"$r_tmp/b.out" 2>"$r_tmp/b.err"
rc=$?
echo "resumed: exit $rc; $(grep -m1 '^  resume ' "$r_tmp/b.out")"
sed 's/^/    stderr: /' "$r_tmp/b.err" | head -5
r_check "the resumed run finished" [ "$rc" -eq 0 ]
r_check "final model identical to the uninterrupted run's" \
    cmp -s "$r_tmp/ref/final/model.safetensors" "$run/final/model.safetensors"
for f in "${planted[@]}"; do
    r_check "$f is gone" [ ! -e "$run/$f" ]
done
left=$(cd "$run" && find . -name '*.tmp' -o -name '*.tmp.*' | tr '\n' ' ')
r_check "no temporary files at all: ${left:-none}" [ -z "$left" ]
finish
