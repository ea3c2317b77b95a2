#!/usr/bin/env bash
# bertc features on CMRC 2018 trial (bert-base-chinese vocab, cased as its
# tokenizer_config.json says): the counts, the .npy dump (files, headers,
# sizes), and the cache (rebuilt, then used, same tensors).
source "$(dirname "$0")/lib/cli.sh"
t=$cli_tmp
mkdir "$t/m"
cp "$BERTC_DATA/vocab/bert-base-chinese-vocab.txt" "$t/m/vocab.txt"
echo '{"do_lower_case": false, "model_max_length": 512}' >"$t/m/tokenizer_config.json"
D="$BERTC_DATA/cmrc2018/cmrc2018_trial.json"

"$BERTC" features --model "$t/m" --data "$D" --threads 2 --dump "$t/d1" --cache "$t/c.bin" >"$t/out1" 2>"$t/err1"
rc=$?; cat "$t/out1"; echo "stderr: $(cat "$t/err1")"
[ $rc -eq 0 ] || cli_bad "exit $rc"
# run_qa.py gives 1961 windows at 384/128 (tests/ref/features/cmrc_T384_S128.bin).
grep -q "^data: .*(1002 examples, 256 contexts)" "$t/out1" || cli_bad "example count"
grep -q "^answers: 5 relocated, 0 unfound" "$t/out1" || cli_bad "relocated/unfound counts"
grep -q "^features: 1961 (max_seq_length 384, doc_stride 128, max_query_length off), cache rebuilt" "$t/out1" || cli_bad "feature count"
grep -q "^seconds: " "$t/out1" || cli_bad "no seconds line"
F=1961; T=384
for f in input_ids token_type_ids attention_mask start_positions end_positions feature_example; do
    p="$t/d1/$f.npy"
    [ -f "$p" ] || { cli_bad "$f.npy missing"; continue; }
    head -c 6 "$p" | od -An -c | grep -q "N   U   M   P   Y" || cli_bad "$f.npy: no NUMPY magic"
    hdr=$(head -c 128 "$p" | tail -c +11)
    case $f in
        input_ids|token_type_ids|attention_mask) shape="($F, $T)"; size=$((128 + F * T * 4)) ;;
        *) shape="($F,)"; size=$((128 + F * 4)) ;;
    esac
    echo "$hdr" | grep -qF "'descr': '<i4', 'fortran_order': False, 'shape': $shape" || cli_bad "$f.npy header: $hdr"
    [ "$(stat -c %s "$p")" -eq "$size" ] || cli_bad "$f.npy is $(stat -c %s "$p") bytes, want $size"
done
ls "$t/d1"/*.tmp.* >/dev/null 2>&1 && cli_bad "temporary files left in the dump dir"

"$BERTC" features --model "$t/m" --data "$D" --threads 1 --dump "$t/d2" --cache "$t/c.bin" >"$t/out2" 2>"$t/err2"
rc=$?; grep '^features:' "$t/out2"
[ $rc -eq 0 ] || cli_bad "second run exit $rc"
grep -q "^features: 1961 .*, from the cache" "$t/out2" || cli_bad "second run did not use the cache"
for f in "$t"/d1/*.npy; do cmp -s "$f" "$t/d2/$(basename "$f")" || cli_bad "$(basename "$f") differs after the cache"; done

# A damaged cache is reported on stderr and rebuilt.
printf 'garbage' | dd of="$t/c.bin" bs=1 seek=1000 conv=notrunc 2>/dev/null
"$BERTC" features --model "$t/m" --data "$D" --dump "$t/d3" --cache "$t/c.bin" >"$t/out3" 2>"$t/err3"
rc=$?; echo "damaged cache -> rc=$rc: $(cat "$t/err3")"
[ $rc -eq 0 ] || cli_bad "damaged cache: exit $rc"
grep -q "CRC mismatch" "$t/err3" || cli_bad "damaged cache not reported"
grep -q "cache rebuilt" "$t/out3" || cli_bad "damaged cache not rebuilt"
cmp -s "$t/d1/input_ids.npy" "$t/d3/input_ids.npy" || cli_bad "input_ids differ after the rebuild"
finish
