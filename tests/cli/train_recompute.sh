#!/usr/bin/env bash
# --recompute layer: each layer's input kept, the layer's forward run again
# inside backward. The recomputed activations are the forward's bit for bit
# (deterministic ops, dropout masks from (seed, step, stream)), so:
#  A. a run with --recompute layer ends with the same model.safetensors and
#     the same loss/lr/grad_norm columns as one without, dropout on; its
#     start-up report says so.
#  B. recompute is not part of a run's identity: a run started without it
#     resumes with it (from step 6) and ends with the same bytes.
#  C. --recompute bad: exit 2 and a message naming the option.
source "$(dirname "$0")/../reliability/lib.sh"

r_make_model "$r_tmp/model"
O=(--max-steps 12 --save-every 3 --save-every-minutes 0 --keep 0)

# ---- A ----
r_train "$r_tmp/none" "${O[@]}" >"$r_tmp/none.out" 2>&1
rc1=$?
r_train "$r_tmp/layer" "${O[@]}" --recompute layer >"$r_tmp/layer.out" 2>&1
rc2=$?
echo "A: without -> exit $rc1, with --recompute layer -> exit $rc2"
grep -m1 '^  memory ' "$r_tmp/layer.out"
r_check "A: both exit 0" [ "$rc1" -eq 0 -a "$rc2" -eq 0 ]
r_check "A: the same final model, bit for bit" \
    cmp -s "$r_tmp/none/final/model.safetensors" "$r_tmp/layer/final/model.safetensors"
r_check "A: the same step, epoch, loss, lr and grad_norm columns" \
    cmp -s <(cut -d, -f1-5 "$r_tmp/none/metrics.csv") <(cut -d, -f1-5 "$r_tmp/layer/metrics.csv")
r_check "A: the start-up report names the recompute mode" grep -q '^  memory    --recompute layer' "$r_tmp/layer.out"
r_check "A: no memory line without it" bash -c "! grep -q '^  memory ' '$r_tmp/none.out'"

# ---- B ----
cp -r "$r_tmp/none" "$r_tmp/switch"
rm -rf "$r_tmp/switch/final" "$(r_ckpt_dir "$r_tmp/switch" 9)" "$(r_ckpt_dir "$r_tmp/switch" 12)"
r_train "$r_tmp/switch" "${O[@]}" --recompute layer >"$r_tmp/switch.out" 2>&1
rc=$?
echo "B: resumed with --recompute layer -> exit $rc; $(grep -m1 '^  resume ' "$r_tmp/switch.out")"
r_check "B: exit 0, resumed from step 6" bash -c "[ $rc -eq 0 ] && grep -q '^  resume    from .*step 6 of 12' '$r_tmp/switch.out'"
r_check "B: the same final model as the run without recompute" \
    cmp -s "$r_tmp/none/final/model.safetensors" "$r_tmp/switch/final/model.safetensors"

# ---- C ----
r_train "$r_tmp/bad" "${O[@]}" --recompute all >"$r_tmp/bad.out" 2>&1
rc=$?
echo "C: --recompute all -> exit $rc: $(head -c 200 "$r_tmp/bad.out")"
r_check "C: exit 2, the message names --recompute and the choices" \
    bash -c "[ $rc -eq 2 ] && grep -q 'recompute.*all.*none, layer' '$r_tmp/bad.out'"
r_check "C: no run dir left behind" [ ! -e "$r_tmp/bad" ]
finish
