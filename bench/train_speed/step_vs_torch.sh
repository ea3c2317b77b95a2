#!/usr/bin/env bash
# bertc vs PyTorch on CPU: the same training step (forward with dropout,
# backward, clipping, AdamW) of the same model size on the same shape of
# random data, one after the other. Prints both figures and the ratio of
# examples/s. Results go in bench/RESULTS.md by hand.
#
#   bash bench/train_speed/step_vs_torch.sh                  # minilm, seq 384, batch 8, 2 threads
#   ISA=avx2 bash bench/train_speed/step_vs_torch.sh         # both sides at the AVX2-only level
#   BERTC_GEMM=openblas bash bench/train_speed/step_vs_torch.sh   # bertc on OpenBLAS's sgemm instead of oneDNN's
#   PRECISION=bf16 bash bench/train_speed/step_vs_torch.sh   # bertc --precision bf16 (AVX512-BF16 CPUs); torch in fp32
#                                                            # and with its forward under bf16 autocast
#   BERTC=build/bertc STEPS=5 bash bench/train_speed/step_vs_torch.sh --config tiny --seq 128 --batch 8 --threads 2
#
# OPENBLAS_CORETYPE is unset for bertc's run (bertc picks OpenBLAS's kernels
# from the CPU's features); the ISA level and the GEMM library used are printed.
set -euo pipefail
cd "$(dirname "$0")/../.."

BERTC=${BERTC:-build/bertc}
STEPS=${STEPS:-5}
WARMUP=${WARMUP:-1}
PRECISION=${PRECISION:-fp32}
ARGS=("$@")
[ ${#ARGS[@]} -eq 0 ] && ARGS=(--config minilm --seq 384 --batch 8 --threads 2)

if [ ! -x "$BERTC" ]; then
    echo "step_vs_torch.sh: $BERTC not found; build first (make build) or set BERTC" >&2
    exit 2
fi

source bench/lib/bench.sh && bench_isa # ISA=avx2|native
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

echo "machine: $(lscpu | grep 'Model name' | sed 's/.*: *//'), $(nproc) cores visible"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "bertc: ${ARGS[*]} --steps $STEPS --warmup-steps $WARMUP --precision $PRECISION"
env -u OPENBLAS_CORETYPE "$BERTC" bench "${ARGS[@]}" --steps "$STEPS" --warmup-steps "$WARMUP" --precision "$PRECISION" \
    --json >"$out/bertc.json"
cat "$out/bertc.json"
echo "torch: python3 bench/train_speed/torch_step.py ${ARGS[*]} --steps $STEPS --warmup-steps $WARMUP --attn both"
python3 bench/train_speed/torch_step.py "${ARGS[@]}" --steps "$STEPS" --warmup-steps "$WARMUP" --attn both >"$out/torch.json"
if [ "$PRECISION" = bf16 ]; then
    echo "torch: python3 bench/train_speed/torch_step.py ${ARGS[*]} --steps $STEPS --warmup-steps $WARMUP --attn sdpa --autocast bf16"
    python3 bench/train_speed/torch_step.py "${ARGS[@]}" --steps "$STEPS" --warmup-steps "$WARMUP" --attn sdpa --autocast bf16 \
        >>"$out/torch.json"
fi
cat "$out/torch.json"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$out/bertc.json" "$out/torch.json" <<'EOF'
import json, sys
b = json.loads(open(sys.argv[1]).read())
ts = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
print(f"\n{'impl':<18}{'ms/step':>10}{'examples/s':>12}{'GFLOP/s':>10}")
for r in [b] + ts:
    print(f"{r['impl'] + ('-bf16' if r is b and r.get('precision') == 'bf16' else ''):<18}{r['ms_per_step']:>10.1f}{r['examples_per_s']:>12.3f}{r['gflops']:>10.1f}")
print(f"bertc kernels: {b.get('kernels', 'OpenBLAS core ' + b['openblas_core'])}")
print(f"ISA {b.get('isa', '?')}, GEMM {b.get('gemm', 'OpenBLAS')}, precision {b.get('precision', '?')}; torch: {ts[0].get('cpu_capability', '?')}, {ts[0].get('blas', '?')}")
print(f"threads: bertc {b['threads']}, torch {ts[0]['threads']}")
for t in ts:
    print(f"ratio bertc / {t['impl']}: {b['examples_per_s'] / t['examples_per_s']:.2f}x examples/s")
EOF
