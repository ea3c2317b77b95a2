#!/usr/bin/env bash
# --device and --precision of train, predict and ask (backend_select): a
# device/precision pair the backend refuses is one line and exit 2 before
# anything is written; without a usable GPU, --device auto falls back to
# the CPU in fp32 with one notice line (also for an explicit fp16), the
# start-up report and info.csv name the backend, the fingerprint holds the
# resolved precision (so a run asked in fp16 that fell back to fp32 resumes
# with --precision auto), and
# --device cuda is an error. bench takes --device and --precision too.
source "$(dirname "$0")/lib/cli.sh"
M=tests/ref/train3/init
D=tests/data/train_small.json
O=$cli_tmp/run
S=(--max-seq-length 64 --doc-stride 16 --threads 1 --monitor-interval 0 --batch 4)
expect_help train "usage: bertc train" --device --precision --gpu --gpu-mem-limit
expect_help predict "usage: bertc predict" --device --precision --gpu
expect_help ask "usage: bertc ask" --device --precision --gpu
expect 2 "--precision fp16 needs the CUDA backend" -- train --model $M --train $D --out $O --device cpu --precision fp16 "${S[@]}"
[ -e "$O" ] && cli_bad "--device cpu --precision fp16 left $O behind"
expect 2 "--precision tf32 needs the CUDA backend" -- train --model $M --train $D --out $O --device cpu --precision tf32 "${S[@]}"
[ -e "$O" ] && cli_bad "--device cpu --precision tf32 left $O behind"
expect 2 "train --device: 'gpu' is not one of auto, cpu, cuda" -- train --model $M --train $D --out $O --device gpu
expect 2 "train --gpu: -1 is out of range" -- train --model $M --train $D --out $O --gpu -1
# predict --precision bf16 on the CPU: tests/cli/predict_precision.sh
expect 2 "--precision tf32 needs the CUDA backend" -- predict --model $M --data $D --out $cli_tmp/p.json --device cpu --precision tf32
[ -e "$cli_tmp/p.json" ] && cli_bad "predict wrote $cli_tmp/p.json"
expect 2 "predict --device: 'gpu' is not one of" -- predict --model $M --data $D --out $cli_tmp/p.json --device gpu
expect 2 "ask --precision: 'fp8' is not one of" -- ask --model $M --context "Some text." --question "What?" --precision fp8
expect 2 "--precision fp16 needs the CUDA backend" -- ask --model $M --context "Some text." --question "What?" --device cpu --precision fp16
# bench takes the same --device/--precision (default --device cpu) and
# --max-batch only on a GPU; its JSON names the backend and the peak memory.
expect_help bench "usage: bertc bench" --device --precision --gpu-mem-limit --max-batch
expect 2 "--precision fp16 needs the CUDA backend" -- bench --config tiny --seq 16 --batch 2 --precision fp16
expect 2 "bench: --max-batch needs --device cuda" -- bench --config tiny --seq 16 --batch 2 --max-batch
expect 2 "bench --device: 'gpu' is not one of" -- bench --config tiny --seq 16 --batch 2 --device gpu
cli_n=$((cli_n + 1))
"$BERTC" bench --config tiny --seq 16 --batch 2 --steps 1 --warmup-steps 0 --threads 1 --json >"$cli_tmp/b.json" 2>"$cli_tmp/err"
echo "case $cli_n: bench --json: $(grep -o '"backend": "[^"]*", "precision": "[^"]*"\|"peak_bytes": [0-9]*' "$cli_tmp/b.json" | tr '\n' ' ')"
grep -q '"backend": "cpu", "precision": "fp32"' "$cli_tmp/b.json" || cli_bad "bench --json does not name the CPU backend in fp32"
grep -q '"peak_bytes": [1-9][0-9]*' "$cli_tmp/b.json" || cli_bad "bench --json has no peak memory"

if ! "$BERTC" devices 2>/dev/null | grep -q '^bertc will use: the CPU backend'; then
    echo "note: this machine has a usable GPU: the fall-back cases do not apply (tests/gpu/run.sh checks the GPU)"
    finish
fi

# --device cuda without a usable GPU: exit 1 (a CUDA build: no device) or 2
# (a build without CUDA), one line naming --device cuda, nothing written.
cli_n=$((cli_n + 1))
"$BERTC" train --model $M --train $D --out $O --device cuda "${S[@]}" >"$cli_tmp/out" 2>"$cli_tmp/err"
rc=$?
echo "case $cli_n: train --device cuda -> exit $rc: $(cat "$cli_tmp/err")"
[ "$rc" -eq 1 ] || [ "$rc" -eq 2 ] || cli_bad "exit $rc, want 1 or 2"
[ "$(wc -l <"$cli_tmp/err")" -eq 1 ] && grep -q '^bertc: --device cuda: ' "$cli_tmp/err" || cli_bad "not one line naming --device cuda"
[ -e "$O" ] && cli_bad "--device cuda left $O behind"

# --precision fp16 with --device auto: fp32 on the CPU, with a notice.
cli_n=$((cli_n + 1))
"$BERTC" train --model $M --train $D --out $O --precision fp16 --max-steps 2 "${S[@]}" >"$cli_tmp/out" 2>"$cli_tmp/err"
rc=$?
echo "case $cli_n: train --precision fp16 (auto device) -> exit $rc; $(grep '^  backend' "$cli_tmp/out")"
sed 's/^/    stderr: /' "$cli_tmp/err"
[ "$rc" -eq 0 ] || cli_bad "exit $rc, want 0"
[ "$(grep -c 'no usable CUDA device' "$cli_tmp/err")" -eq 1 ] || cli_bad "not exactly one fall-back notice"
grep -q '^bertc: warning: no usable CUDA device (.*): using the CPU backend in fp32, not fp16$' "$cli_tmp/err" ||
    cli_bad "the notice does not say fp32, not fp16"
grep -qx '  backend   cpu: \(oneDNN\|OpenBLAS\) + OpenMP, 1 thread, fp32' "$cli_tmp/out" || cli_bad "start-up report: no cpu backend line"
st=$O/checkpoints/step-00000002/state.json
grep -q '"--precision": "fp32"' "$st" || cli_bad "fingerprint: $(grep -e '--precision' "$st")"
grep -q '"loss_scale": 1.0,' "$st" || cli_bad "state.json loss_scale: $(grep '"loss_scale"' "$st")"
grep -qx 'backend,"cpu: \(oneDNN\|OpenBLAS\) + OpenMP, 1 thread, fp32"' "$O/info.csv" || cli_bad "info.csv: $(grep '^backend' "$O/info.csv")"
grep -q '<th>backend</th><td>cpu: \(oneDNN\|OpenBLAS\) + OpenMP, 1 thread, fp32</td>' "$O/report.html" || cli_bad "report.html lacks the backend"
awk -F, 'NR > 1 && $6 != 1 { bad = 1 } END { exit bad }' "$O/metrics.csv" || cli_bad "loss_scale is not 1 in metrics.csv"

# The same run with --precision auto --device cpu: the same resolved
# precision (fp32), so it resumes (the run is complete: it exports again).
cli_n=$((cli_n + 1))
"$BERTC" train --model $M --train $D --out $O --precision auto --device cpu --max-steps 2 "${S[@]}" >"$cli_tmp/out" 2>"$cli_tmp/err"
rc=$?
echo "case $cli_n: again with --precision auto --device cpu -> exit $rc; $(grep '^  resume' "$cli_tmp/out")"
[ "$rc" -eq 0 ] && grep -q '^  resume    from ' "$cli_tmp/out" || cli_bad "auto did not resume the fp16-asked (fp32) run"
grep -q 'no usable CUDA device' "$cli_tmp/err" && cli_bad "--device cpu printed the fall-back notice"

# predict: --device auto (notice) and --device cpu (none) give the same predictions.
cli_n=$((cli_n + 1))
"$BERTC" predict --model $M --data $D --out "$cli_tmp/auto.json" --max-seq-length 64 --doc-stride 16 --threads 1 \
    2>"$cli_tmp/err1"
rc1=$?
"$BERTC" predict --model $M --data $D --out "$cli_tmp/cpu.json" --max-seq-length 64 --doc-stride 16 --threads 1 \
    --device cpu --precision fp32 2>"$cli_tmp/err2"
rc2=$?
echo "case $cli_n: predict auto -> exit $rc1, cpu -> exit $rc2"
sed 's/^/    stderr (auto): /' "$cli_tmp/err1"
[ "$rc1" -eq 0 ] && [ "$rc2" -eq 0 ] || cli_bad "predict failed"
cmp -s "$cli_tmp/auto.json" "$cli_tmp/cpu.json" || cli_bad "auto and cpu predictions differ"
# --device auto warns about the fall-back only where NVIDIA's driver is loaded
# (a GPU it cannot use); a machine without one just runs on the CPU.
if [ -e /proc/driver/nvidia ]; then
    grep -q 'no usable CUDA device' "$cli_tmp/err1" || cli_bad "predict --device auto: no notice with a driver loaded"
else
    grep -q 'no usable CUDA device' "$cli_tmp/err1" && cli_bad "predict --device auto: a notice on a machine without a GPU driver"
fi
grep -q 'no usable CUDA device' "$cli_tmp/err2" && cli_bad "predict --device cpu: a notice"
"$BERTC" ask --model $M --context "Kopa Labs was founded by Dire Pogu." --question "Who founded Kopa Labs?" \
    --max-seq-length 64 --doc-stride 16 --device cpu >"$cli_tmp/out" 2>"$cli_tmp/err"
rc=$?
echo "ask --device cpu -> exit $rc: $(head -1 "$cli_tmp/out")"
[ "$rc" -eq 0 ] && grep -q '^answer: ' "$cli_tmp/out" && [ ! -s "$cli_tmp/err" ] || cli_bad "ask --device cpu"
finish
