#!/usr/bin/env bash
# tests/gpu/train_cli.sh BERTC RESULTS_DIR: bertc train / predict on the GPU
# through the command line (check 6 of tests/gpu/run.sh). Compares, and
# prints each comparison into RESULTS_DIR/results.txt:
#   - 40 steps of the tiny reference model on tests/data/train_small.json
#     (dropout 0, no shuffle), --device cpu vs --device cuda --precision fp32:
#     the loss of every step within 1e-3 relative;
#   - the same in bf16 and fp16: every loss finite, the mean of the last 10
#     losses within 5 % of the CPU's (a step skipped at an fp16 overflow of
#     the 16-bit activation gradients moves single-batch losses by up to
#     10 %; tests/cudaemu/train_cli.sh); fp16 records a loss scale (65536
#     at the start);
#   - the CUDA run's monitor.csv has GPU samples (gpu_util_pct filled in) and
#     info.csv names the CUDA backend;
#   - a fp32 CUDA run killed after step 25 (BERTC_DEBUG_KILL) and resumed
#     ends with the same losses as the uninterrupted one;
#   - predict --device cuda vs --device cpu on the trained model: at least
#     95 % of the predictions identical;
#   - --http during a CUDA run: /api/status has the GPU readings, and
#     bertc watch --once prints a GPU line.
set -u
BERTC=$1
RES=$2
source "$(dirname "$0")/../lib/train_cli.sh"
res() { echo "$*" | tee -a "$RES/results.txt"; case $1 in FAIL*) fails=$((fails + 1)) ;; esac; }
losses() { cut -d, -f3 "$W/$1/metrics.csv" | tail -n +2; }
train cpu cpu fp32 || { res "FAIL train cli: the CPU run failed: $(tail -2 "$W/cpu.err")"; exit 1; }
for p in fp32 bf16 fp16; do
    if ! train "cuda-$p" cuda $p; then
        res "FAIL train cli $p: exit $?: $(tail -2 "$W/cuda-$p.err")"
        continue
    fi
    grep -m1 'backend' "$W/cuda-$p.out"
    tol=0.05
    [ $p = fp32 ] && tol=0.001
    python3 - "$W/cpu/metrics.csv" "$W/cuda-$p/metrics.csv" "$tol" "$p" <<'PY' | tee -a "$RES/results.txt"
import csv, math, sys
a = list(csv.DictReader(open(sys.argv[1]))); b = list(csv.DictReader(open(sys.argv[2])))
tol, p = float(sys.argv[3]), sys.argv[4]
la = [float(r["loss"]) for r in a]; lb = [float(r["loss"]) for r in b]
finite = all(math.isfinite(x) for x in lb)
if p == "fp32":
    worst = max(abs(x - y) / max(abs(x), 1e-6) for x, y in zip(la, lb))
    ok = finite and len(la) == len(lb) and worst <= tol
    print(f"{'PASS' if ok else 'FAIL'} train cli fp32: {len(lb)} losses vs CPU, worst rel diff {worst:.2e} (bound {tol})")
else:
    ma, mb = sum(la[-10:]) / 10, sum(lb[-10:]) / 10
    rel = abs(ma - mb) / abs(ma)
    ok = finite and rel <= tol
    skips = sum(1 for r in b if not math.isfinite(float(r["grad_norm"])))
    extra = f", {skips} skipped step(s)"
    if p == "fp16":
        s0 = float(b[0]["loss_scale"]); extra += f", first loss scale {s0:g}"
        ok = ok and s0 == 65536
    print(f"{'PASS' if ok else 'FAIL'} train cli {p}: last 10 losses' mean {mb:.5f} vs CPU {ma:.5f} (rel {rel:.3f}, bound {tol}){extra}")
PY
done
if [ -f "$W/cuda-fp32/monitor.csv" ]; then
    n=$(awk -F, 'NR > 1 && $4 != "" { n++ } END { print n + 0 }' "$W/cuda-fp32/monitor.csv")
    [ "$n" -gt 0 ] && res "PASS train cli monitor: $n GPU samples in monitor.csv" || res "FAIL train cli monitor: no GPU samples"
    grep -qi cuda "$W/cuda-fp32/info.csv" && res "PASS train cli info.csv names the CUDA backend" ||
        res "FAIL train cli info.csv: $(grep -i backend "$W/cuda-fp32/info.csv")"
fi
# Killed on the GPU (SIGKILL after step 25, BERTC_DEBUG_KILL) and resumed.
BERTC_DEBUG_KILL=step:25 train cuda-stop cuda fp32
echo "killed after step 25: exit $?"
train cuda-stop cuda fp32 || res "FAIL train cli resume: $(tail -2 "$W/cuda-stop.err")"
if [ "$(losses cuda-stop)" = "$(losses cuda-fp32)" ]; then res "PASS train cli resume: the same losses after SIGKILL + resume"
else res "FAIL train cli resume: the losses differ after SIGKILL + resume"; fi
# predict on the GPU vs the CPU.
if [ -d "$W/cuda-fp32/final" ]; then
    "$BERTC" predict --model "$W/cuda-fp32/final" --data $D --out "$W/p-cpu.json" --max-seq-length 64 --doc-stride 16 --device cpu
    "$BERTC" predict --model "$W/cuda-fp32/final" --data $D --out "$W/p-cuda.json" --max-seq-length 64 --doc-stride 16 --device cuda
    python3 - "$W/p-cpu.json" "$W/p-cuda.json" <<'PY' | tee -a "$RES/results.txt"
import json, sys
a = json.load(open(sys.argv[1])); b = json.load(open(sys.argv[2]))
same = sum(a[k] == b.get(k) for k in a)
print(f"{'PASS' if same >= 0.95 * len(a) else 'FAIL'} predict cli: {same}/{len(a)} predictions identical, CUDA vs CPU (bound 95 %)")
PY
fi
# The live page on the GPU (--http): /api/status carries the NVML readings while training.
"$BERTC" train --model $M --train $D --out "$W/cuda-http" --max-seq-length 64 --doc-stride 16 --batch 6 \
    --micro-batch 2 --max-steps 3000 --lr 1e-4 --save-every-minutes 0 --monitor-interval 0.2 --device cuda \
    --http 0 >"$W/cuda-http.log" 2>&1 &
hpid=$!
python3 - "$W/cuda-http.log" <<'PY' | tee -a "$RES/results.txt"
import json, re, sys, time, urllib.request
port, st = None, {}
for _ in range(600):
    m = re.search(r"live page: http://127.0.0.1:(\d+)/", open(sys.argv[1]).read())
    if m:
        port = int(m.group(1))
        try:
            st = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status", timeout=5).read())
        except OSError:
            st = {}
        if "gpu_util_pct" in st and st.get("step", 0) > 5:
            break
    time.sleep(0.1)
ok = "gpu_util_pct" in st and "gpu_mem_used_gib" in st
print(f"{'PASS' if ok else 'FAIL'} train cli --http: /api/status GPU readings: util {st.get('gpu_util_pct')} %, "
      f"memory {st.get('gpu_mem_used_gib')} GiB, {st.get('gpu_temp_c')} C, {st.get('gpu_power_w')} W at step {st.get('step')}")
PY
"$BERTC" watch "$W/cuda-http" --once | grep -q "^GPU " && res "PASS train cli watch: a GPU line" || res "FAIL train cli watch: no GPU line"
kill -TERM $hpid 2>/dev/null
wait $hpid
[ "$fails" -eq 0 ]
