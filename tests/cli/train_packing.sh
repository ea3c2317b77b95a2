#!/usr/bin/env bash
# --packing varlen: each micro-batch's windows packed, real tokens only.
#  A. a packed run trains (exit 0, finite losses) and is deterministic: a
#     second run ends with the same model.safetensors; its losses differ
#     from the padded run's (the loss's softmax is over real tokens only).
#  B. the same with --recompute layer: the same bytes (recompute is exact).
#  C. --max-tokens small enough to cut micro-batches into pieces: exit 0.
#  D. a packed run resumes (from step 6 of 12) to the same bytes.
#  E. bad options: exit 2, one line naming the option, no run dir.
source "$(dirname "$0")/../reliability/lib.sh"

r_make_model "$r_tmp/model"
O=(--max-steps 12 --save-every 3 --save-every-minutes 0 --keep 0 --packing varlen)

# ---- A ----
r_train "$r_tmp/p1" "${O[@]}" >"$r_tmp/p1.out" 2>&1
rc1=$?
r_train "$r_tmp/p2" "${O[@]}" >"$r_tmp/p2.out" 2>&1
rc2=$?
r_train "$r_tmp/pad" "${O[@]:0:8}" >"$r_tmp/pad.out" 2>&1
rc3=$?
echo "A: packed -> exit $rc1, again -> exit $rc2, padded -> exit $rc3"
head -3 "$r_tmp/p1/metrics.csv"
r_check "A: all exit 0" [ "$rc1" -eq 0 -a "$rc2" -eq 0 -a "$rc3" -eq 0 ]
r_check "A: two packed runs end with the same model, bit for bit" \
    cmp -s "$r_tmp/p1/final/model.safetensors" "$r_tmp/p2/final/model.safetensors"
r_check "A: finite losses" bash -c "! cut -d, -f3 '$r_tmp/p1/metrics.csv' | grep -qiE 'nan|inf'"
r_check "A: the packed loss is not the padded one" \
    bash -c "! cmp -s <(cut -d, -f3 '$r_tmp/p1/metrics.csv') <(cut -d, -f3 '$r_tmp/pad/metrics.csv')"

# ---- B ----
r_train "$r_tmp/re" "${O[@]}" --recompute layer >"$r_tmp/re.out" 2>&1
rc=$?
r_check "B: --recompute layer: exit 0 and the same model" \
    bash -c "[ $rc -eq 0 ] && cmp -s '$r_tmp/p1/final/model.safetensors' '$r_tmp/re/final/model.safetensors'"

# ---- C ----
r_train "$r_tmp/cut" "${O[@]}" --max-tokens 70 >"$r_tmp/cut.out" 2>&1
rc=$?
echo "C: --max-tokens 70 -> exit $rc"
r_check "C: exit 0 with micro-batches cut by tokens" [ "$rc" -eq 0 ]

# ---- D ----
cp -r "$r_tmp/p1" "$r_tmp/res"
rm -rf "$r_tmp/res/final" "$(r_ckpt_dir "$r_tmp/res" 9)" "$(r_ckpt_dir "$r_tmp/res" 12)"
r_train "$r_tmp/res" "${O[@]}" >"$r_tmp/res.out" 2>&1
rc=$?
r_check "D: resumed from step 6: exit 0, the same final model" \
    bash -c "[ $rc -eq 0 ] && grep -q '^  resume    from .*step 6 of 12' '$r_tmp/res.out' &&
             cmp -s '$r_tmp/p1/final/model.safetensors' '$r_tmp/res/final/model.safetensors'"

# ---- E ----
for bad in "--packing dense:packing" "--max-tokens 100:needs --packing varlen" \
    "--packing varlen --max-tokens 8:below --max-seq-length"; do
    args=${bad%%:*} want=${bad#*:}
    # shellcheck disable=SC2086 # the options split on purpose
    r_train "$r_tmp/bad" --max-steps 2 $args >"$r_tmp/bad.out" 2>&1
    rc=$?
    echo "E: $args -> exit $rc: $(head -c 200 "$r_tmp/bad.out")"
    r_check "E: $args: exit 2, one line naming it, no run dir" \
        bash -c "[ $rc -eq 2 ] && [ \$(wc -l <'$r_tmp/bad.out') -eq 1 ] && grep -q -- '$want' '$r_tmp/bad.out' && [ ! -e '$r_tmp/bad' ]"
done
finish
