#!/usr/bin/env bash
# bench/gpu/gpu_vs_torch.sh [OUTDIR]: bertc's CUDA backend against PyTorch +
# transformers on the same GPU, in the same run. BERT-base shape at sequence
# length 384 (CONFIG, SEQ to change), random data, full training steps
# (forward with dropout, backward, AdamW):
#   bertc   bf16 (compute capability >= 8.0) and fp16, recompute none and layer
#   PyTorch BertForQuestionAnswering, SDPA attention, autocast bf16 (fp16 on 7.x)
# examples/s at each batch of BATCHES (the best is reported), peak memory,
# MFU against the GPU's dense Tensor Core peak; and the largest micro-batch
# that trains under LIMIT (16GiB: a T4's memory) for bertc (--gpu-mem-limit)
# and PyTorch (set_per_process_memory_fraction).
#
# Needs gpu_check (tests/gpu/run.sh builds it; or BERTC_GPU_CHECK=path).
# Writes OUTDIR/bench.jsonl (one JSON line per run) and OUTDIR/summary.md (a
# section ready for bench/RESULTS.md: GPU, date, command, table, targets).
# Environment: CONFIG (base) SEQ (384) BATCHES ("32 64") STEPS (10)
# WARMUP (3) LIMIT (16GiB) PRECISIONS (default: bf16 fp16, or fp16 on 7.x).
set -u -o pipefail
cd "$(dirname "$0")/../.." || exit 1

die() {
    echo "gpu_vs_torch.sh: $*" >&2
    exit 1
}

OUTDIR=${1:-bench/gpu-results-$(date +%Y%m%d-%H%M%S)}
GC=${BERTC_GPU_CHECK:-build-gpu/gpu_check}
CONFIG=${CONFIG:-base}
SEQ=${SEQ:-384}
BATCHES=${BATCHES:-32 64}
STEPS=${STEPS:-10}
WARMUP=${WARMUP:-3}
LIMIT=${LIMIT:-16GiB}
PY=${PYTHON:-python3}

[ -x "$GC" ] || die "no gpu_check at $GC: run tests/gpu/run.sh first, or build it:
  cmake -S tests/gpu -B build-gpu -DCMAKE_CUDA_ARCHITECTURES=native && cmake --build build-gpu -j --target gpu_check"
command -v nvidia-smi >/dev/null 2>&1 || die "nvidia-smi not found: no NVIDIA driver on this machine"
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n1 | tr -d ' ')
[ -n "$cc" ] || die "nvidia-smi reports no GPU"
major=${cc%%.*}
if [ "$major" -ge 8 ]; then
    PRECISIONS=${PRECISIONS:-bf16 fp16}
    torch_prec=bf16
else
    PRECISIONS=${PRECISIONS:-fp16}
    torch_prec=fp16
fi
mkdir -p "$OUTDIR" || die "cannot create $OUTDIR"
jsonl=$OUTDIR/bench.jsonl
: >"$jsonl"
errfile=$OUTDIR/last_stderr.txt

# run LABEL COMMAND...: runs it, keeps the last JSON line of its stdout
# (or an error record), tagged with LABEL, in bench.jsonl.
run() {
    local label=$1 out rc line
    shift
    echo "== $label: $*"
    out=$("$@" 2>"$errfile")
    rc=$?
    line=$(printf '%s\n' "$out" | grep '^{' | tail -n1)
    if [ -z "$line" ]; then
        echo "   (exit $rc, no JSON line; stderr follows)"
        tail -n 5 "$errfile"
        line=$("$PY" -c 'import json,sys; print(json.dumps({"error": "exit %s, no output: %s" % (sys.argv[1], sys.argv[2])}))' \
            "$rc" "$(tail -c 300 "$errfile")")
    fi
    "$PY" -c 'import json,sys; d=json.loads(sys.argv[1]); d["label"]=sys.argv[2]; print(json.dumps(d))' "$line" \
        "$label" >>"$jsonl" || echo "   (unparsable output: $line)"
    echo "   $line"
}

common=(--config "$CONFIG" --seq "$SEQ")
for p in $PRECISIONS; do
    for b in $BATCHES; do
        run "bertc $p" "$GC" bench "${common[@]}" --batch "$b" --precision "$p" --steps "$STEPS" --warmup "$WARMUP"
    done
    run "bertc $p recompute" "$GC" bench "${common[@]}" --batch "${BATCHES%% *}" --precision "$p" --recompute layer \
        --steps "$STEPS" --warmup "$WARMUP"
done
for b in $BATCHES; do
    run "pytorch $torch_prec" "$PY" bench/gpu/gpu_torch.py "${common[@]}" --batch "$b" --precision "$torch_prec" \
        --steps "$STEPS" --warmup "$WARMUP"
done
run "bertc maxbatch" "$GC" maxbatch "${common[@]}" --precision auto --limit "$LIMIT"
run "bertc maxbatch recompute" "$GC" maxbatch "${common[@]}" --precision auto --recompute layer --limit "$LIMIT"
run "pytorch maxbatch" "$PY" bench/gpu/gpu_torch.py "${common[@]}" --precision "$torch_prec" --maxbatch --limit "$LIMIT"

gpu=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -n1)
cmd="CONFIG=$CONFIG SEQ=$SEQ BATCHES=\"$BATCHES\" STEPS=$STEPS LIMIT=$LIMIT bench/gpu/gpu_vs_torch.sh"
"$PY" - "$jsonl" "$OUTDIR/summary.md" "$gpu" "$cmd" <<'PYEOF'
import datetime
import importlib.util
import json
import sys

jsonl, out, gpu, cmd = sys.argv[1:5]
spec = importlib.util.spec_from_file_location("gpu_torch", "bench/gpu/gpu_torch.py")
gt = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gt)
rows = [json.loads(line) for line in open(jsonl) if line.strip()]
peak = gt.peak_tflops(gpu)
lines = [f"## {gpu} ({datetime.date.today().isoformat()})", "", f"Command: `{cmd}`", "",
         "| run | batch | examples/s | step ms | peak memory | TFLOPS | MFU | note |",
         "|---|---|---|---|---|---|---|---|"]
best = {}
for r in rows:
    label = r.get("label", "?")
    if "largest_micro_batch" in r:
        continue
    if "error" in r:
        lines.append(f"| {label} | {r.get('batch', '')} | | | | | | {r['error']} |")
        continue
    mfu = r.get("mfu")
    if mfu is None and peak and r.get("precision") in ("bf16", "fp16"):
        mfu = r["tflops"] / peak
    mem = r.get("peak_bytes", 0) / 2**30
    lines.append(f"| {label} | {r['batch']} | {r['examples_per_s']:.1f} | {r['step_ms']:.1f} | {mem:.2f} GiB | "
                 f"{r['tflops']:.1f} | {'' if mfu is None else f'{100 * mfu:.1f} %'} | |")
    if label not in best or r["examples_per_s"] > best[label]["examples_per_s"]:
        best[label] = r
lines.append("")
torch_best = [r for k, r in best.items() if k.startswith("pytorch")]
for k, r in sorted(best.items()):
    if k.startswith("bertc") and torch_best:
        ratio = r["examples_per_s"] / torch_best[0]["examples_per_s"]
        lines.append(f"- {k} (batch {r['batch']}) vs {torch_best[0]['label']} (batch {torch_best[0]['batch']}): "
                     f"{ratio:.2f}x examples/s (target >= 1.5x: {'met' if ratio >= 1.5 else 'not met'})")
mb = {r["label"]: r for r in rows if "largest_micro_batch" in r}
for r in rows:
    if r.get("label", "").endswith("maxbatch") and "error" in r:
        lines.append(f"- {r['label']}: {r['error']}")
if "bertc maxbatch" in mb and "pytorch maxbatch" not in mb:
    r = mb["bertc maxbatch"]
    lines.append(f"- largest micro-batch under {r['limit_bytes'] / 2**30:.0f} GiB: bertc {r['largest_micro_batch']} "
                 f"({r['precision']}, planner said {r['planned']}); no PyTorch figure to compare")
if "bertc maxbatch" in mb and "pytorch maxbatch" in mb:
    a, b = mb["bertc maxbatch"]["largest_micro_batch"], mb["pytorch maxbatch"]["largest_micro_batch"]
    ratio = a / b if b else float("inf")
    lines.append(f"- largest micro-batch under {mb['bertc maxbatch']['limit_bytes'] / 2**30:.0f} GiB: bertc {a} "
                 f"({mb['bertc maxbatch']['precision']}, planner said {mb['bertc maxbatch']['planned']}), PyTorch {b}: "
                 f"{ratio:.2f}x (target >= 2x: {'met' if ratio >= 2 else 'not met'})")
if peak is None:
    lines.append("- MFU: this GPU's peak is not in bench/gpu/gpu_torch.py's table")
text = "\n".join(lines) + "\n"
open(out, "w").write(text)
print(text)
PYEOF
echo "gpu_vs_torch.sh: results in $jsonl and $OUTDIR/summary.md"
# Loud failure: any run that gave no figure.
bad=$("$PY" -c 'import json,sys
for l in open(sys.argv[1]):
    d = json.loads(l)
    if "error" in d:
        print("  %s: %s" % (d.get("label", "?"), d["error"]))' "$jsonl")
if [ -n "$bad" ]; then
    echo "gpu_vs_torch.sh: these runs failed:"
    echo "$bad"
    exit 1
fi
