#!/usr/bin/env bash
# tests/gpu/run.sh [RESULTS_DIR]: the device checks of the CUDA backend, on a
# machine with an NVIDIA GPU, in about 5 minutes. Run from anywhere; results go
# to RESULTS_DIR, else $OUT, else ./gpu-results:
#   summary.txt   one line per check (PASS/FAIL, seconds) and the verdict
#   results.txt   every comparison: measured figure, bound, PASS/FAIL
#   run.log       everything printed; build.log the build
#   train_loss.csv, memory.csv, bench/summary.md, bench/bench.jsonl
# Checks (each prints what it compared and its bound):
#   build    cmake -S tests/gpu (gpu_check, bertc, its CUDA module, test_cuda_fallback) for this GPU's architecture
#            (PREBUILT=1: BUILD_DIR already holds them; tests/gpu/device.sh packs them on another machine)
#   1a ops   every op of the CUDA backend against the CPU backend, per precision
#   1b model logits, loss, gradients: against the PyTorch reference (tests/ref/tiny)
#            and against the CPU backend on a minilm-shaped model
#   2 train  200 steps of a small model in fp32, bf16 and fp16: the loss curves' band
#   3 memory the planner's prediction against the measured peak, within 10 %
#   4 oom    out-of-memory back-off under a memory limit
#   7 varlen packed micro-batches (--packing varlen): CUDA vs CPU, packed vs padded masked
#   9 nccl   the bucketed NCCL calls on a one-rank communicator: all-reduce, and --shard-optimizer's
#            reduce-scatter and parameter all-gather (skipped without libnccl.so.2)
#   fallback test_cuda_fallback and `bertc plan` / `bertc devices` with a GPU present
#   6 cli    bertc train / predict --device cuda (tests/gpu/train_cli.sh): losses vs the
#            CPU in fp32/bf16/fp16, GPU samples in monitor.csv, kill + resume
#   7 serve  bertc serve --device cuda: concurrent requests vs predict --device cuda (tests/gpu/serve_cli.sh)
#   8 dist   data parallel: mpirun -np 1 = 1 process; 2 ranks sharing the GPU (host sum) vs 1
#            process, and with --shard-optimizer (NCCL refuses two ranks on one GPU: the NCCL path
#            needs 2 GPUs, not checked); 2 pipeline stages sharing the GPU (host copies over MPI)
#            vs 1 process
#   5 bench  bench/gpu/gpu_vs_torch.sh (BENCH_BATCHES, default 32; BENCH_STEPS, default 10)
# Exit status: 0 when every check passed, 1 otherwise (the summary says which).
set -u -o pipefail
cd "$(dirname "$0")/../.." || exit 1

RES=${1:-${OUT:-gpu-results}}
mkdir -p "$RES" || {
    echo "run.sh: cannot create the results dir $RES" >&2
    exit 1
}
RES=$(cd "$RES" && pwd)
BUILD=${BUILD_DIR:-build-gpu}
T0=$(date +%s)
failures=0

note() {
    echo "run.sh: $*"
    echo "$*" >>"$RES/summary.txt"
}

fatal() {
    note "FATAL: $*"
    note "result: FAILED (stopped before the checks finished)"
    exit 1
}

# check NAME COMMAND...: runs one check with a time limit, records PASS/FAIL.
check() {
    local name=$1 t rc
    shift
    t=$(date +%s)
    echo
    echo "======== $name"
    echo "\$ $*"
    timeout "${CHECK_TIMEOUT:-300}" "$@"
    rc=$?
    if [ "$rc" -eq 0 ]; then
        note "PASS $name ($(($(date +%s) - t)) s)"
    else
        failures=$((failures + 1))
        [ "$rc" -eq 124 ] && note "     $name: killed after ${CHECK_TIMEOUT:-300} s"
        note "FAIL $name (exit $rc, $(($(date +%s) - t)) s)"
    fi
}

main() {
    : >"$RES/summary.txt"
    : >"$RES/results.txt"
    command -v nvidia-smi >/dev/null 2>&1 || fatal "nvidia-smi not found: this machine has no NVIDIA driver"
    nvidia-smi || fatal "nvidia-smi failed: no usable GPU or driver"
    local gpu cc arch
    gpu=$(nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv,noheader 2>/dev/null | head -n1)
    cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n1 | tr -d ' .')
    arch=${cc:-native}
    export PATH="$PATH:/usr/local/cuda/bin"
    command -v nvcc >/dev/null 2>&1 || fatal "nvcc not found (looked in PATH and /usr/local/cuda/bin)"
    note "GPU: ${gpu:-unknown}; nvcc: $(nvcc --version | tail -n1); date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"

    if [ -n "${PREBUILT:-}" ]; then
        echo "======== build: PREBUILT is set, the programs in $BUILD are used as they are"
    else
        echo "======== build ($BUILD, CUDA architecture $arch)"
    fi
    if [ -z "${PREBUILT:-}" ] && ! { cmake -S tests/gpu -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$arch" &&
        cmake --build "$BUILD" -j "$(nproc)" --target gpu_check bertc bertc_cuda test_cuda_fallback; } >"$RES/build.log" 2>&1; then
        tail -n 40 "$RES/build.log"
        fatal "the build failed (the end of $RES/build.log is above)"
    fi
    local gc=$BUILD/gpu_check bertc=$BUILD/bertc/bertc fb=$BUILD/bertc/test_cuda_fallback
    for f in "$gc" "$bertc" "$fb"; do [ -x "$f" ] || fatal "the build did not produce $f"; done
    [ -f "$BUILD/bertc/libbertc_cuda.so" ] || fatal "the build did not produce $BUILD/bertc/libbertc_cuda.so"
    note "PASS build ($(($(date +%s) - T0)) s)"

    check "1a ops: CUDA backend vs CPU backend, op by op" "$gc" ops --out "$RES"
    check "1b model: PyTorch reference (tiny), CPU vs CUDA (minilm)" "$gc" model --out "$RES"
    check "2 train: 200 steps, fp32 vs bf16 vs fp16" "$gc" train --out "$RES"
    check "3 memory: planner vs measured peak (10 %)" "$gc" memory --out "$RES"
    check "4 oom: back-off under a memory limit" "$gc" oom --out "$RES"
    check "7 varlen: packed micro-batches, CUDA vs CPU and vs padded" "$gc" varlen --out "$RES"
    check "9 nccl: bucketed NCCL all-reduces, one rank" "$gc" nccl --out "$RES"
    check "fallback: test_cuda_fallback with a GPU" "$fb"
    # shellcheck disable=SC2016 # $1 is expanded by the inner bash
    check "module: bertc version/devices load the CUDA module" \
        bash -c '"$1" version | grep "^cuda: module .*: loaded (ABI" && "$1" devices | grep "^CUDA module: .*: loaded"' _ "$bertc"
    # shellcheck disable=SC2016 # $1 is expanded by the inner bash
    check "cli: bertc plan and bertc devices with a GPU" \
        bash -c '"$1" plan --config base --seq 384 && "$1" devices' _ "$bertc"
    check "6 cli: bertc train/predict --device cuda" bash tests/gpu/train_cli.sh "$bertc" "$RES"
    check "7 serve: bertc serve --device cuda vs predict --device cuda" bash tests/gpu/serve_cli.sh "$bertc" "$RES"
    check "8 dist: mpirun -np 1 and 2 ranks on one GPU (tests/gpu/dist_cli.sh)" bash tests/gpu/dist_cli.sh "$bertc" "$RES"
    check "5 bench: bench/gpu/gpu_vs_torch.sh" env BERTC_GPU_CHECK="$gc" BATCHES="${BENCH_BATCHES:-32}" \
        STEPS="${BENCH_STEPS:-10}" bash bench/gpu/gpu_vs_torch.sh "$RES/bench"

    echo
    if grep -q '^FAIL' "$RES/results.txt"; then
        note "failed comparisons (from results.txt):"
        grep '^FAIL' "$RES/results.txt" | while IFS= read -r line; do note "  $line"; done
    fi
    note "total: $(($(date +%s) - T0)) s"
    if [ "$failures" -eq 0 ]; then
        note "result: PASSED"
        return 0
    fi
    note "result: FAILED ($failures check(s))"
    return 1
}

main "$@" 2>&1 | tee "$RES/run.log"
exit "${PIPESTATUS[0]}"
