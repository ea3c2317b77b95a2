#!/usr/bin/env bash
# tests/gpu/dist_cli.sh BERTC RESULTS_DIR: data-parallel training on a GPU
# machine. A one-GPU machine can check only this much, since
# NCCL refuses two ranks on one GPU:
#   a) mpirun -np 1 bertc train --device cuda equals plain bertc train byte for byte
#   b) 2 ranks sharing the GPU, gradients summed through the host over MPI
#      (BERTC_DEBUG_DIST_ONE_GPU=1), fp32: every step's loss within 1e-6
#      relative of 1 process with the same batch and micro-batch
#   c) NCCL loads (libnccl.so.2) when the machine has it: said, not required
#   d) b) with --shard-optimizer (the host path's reduce-scatter, AdamW on
#      each rank's pieces on the GPU, the parameters' all-gather through the
#      host): every step's loss within 1e-6 relative of b)
#   e) 2 pipeline stages sharing the GPU (--pipeline-stages 2, activations
#      and gradients through host copies over MPI), fp32: every step's loss
#      within 1e-6 relative of 1 process (byte-identical final weights
#      expected and reported, not required: cuBLASLt may choose other
#      algorithms in two processes)
# The NCCL all-reduce and NCCL's send/recv need 2 GPUs: not checked here.
set -u
BERTC=$1 RES=$2
command -v mpirun >/dev/null 2>&1 || { echo "SKIP: no mpirun"; exit 0; }
"$BERTC" version | grep -q "^mpi: built in" || { echo "SKIP: bertc built without MPI"; exit 0; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
root=()
[ "$(id -u)" -eq 0 ] && root=(--allow-run-as-root)
mpi() { OMPI_MCA_btl_vader_single_copy_mechanism=none mpirun --oversubscribe "${root[@]}" --bind-to none "$@"; }
# worst A.csv B.csv: the largest relative difference of the step losses (metrics.csv's third column)
worst() {
    awk -F, 'NR==FNR { a[FNR] = $3; next } FNR > 1 { d = $3 - a[FNR]; if (d < 0) d = -d; m = a[FNR] < 0 ? -a[FNR] : a[FNR];
        r = m > 0 ? d / m : d; if (r > w) w = r } END { printf "%.3g", w + 0 }' "$1" "$2"
}
C=(--model tests/ref/train3/init --train tests/data/train_small.json --max-seq-length 64 --doc-stride 16
   --batch 8 --micro-batch 2 --max-steps 30 --lr 1e-3 --save-every 0 --save-every-minutes 0 --monitor-interval 0
   --device cuda --precision fp32)
"$BERTC" train "${C[@]}" --out "$tmp/one" >"$tmp/one.log" 2>&1 || { echo "FAIL: 1 process: $(tail -3 "$tmp/one.log")"; exit 1; }
mpi -np 1 "$BERTC" train "${C[@]}" --out "$tmp/np1" >"$tmp/np1.log" 2>&1 || { echo "FAIL: -np 1: $(tail -3 "$tmp/np1.log")"; fail=1; }
if cmp -s "$tmp/one/final/model.safetensors" "$tmp/np1/final/model.safetensors"; then
    echo "PASS dist a: mpirun -np 1 on the GPU = 1 process, byte for byte" | tee -a "$RES/results.txt"
else
    echo "FAIL dist a: mpirun -np 1 on the GPU differs from 1 process" | tee -a "$RES/results.txt"; fail=1
fi
BERTC_DEBUG_DIST_ONE_GPU=1 mpi -np 2 -x BERTC_DEBUG_DIST_ONE_GPU "$BERTC" train "${C[@]}" --out "$tmp/np2" \
    >"$tmp/np2.log" 2>&1 || { echo "FAIL: -np 2: $(tail -5 "$tmp/np2.log")"; fail=1; }
w=$(worst "$tmp/one/metrics.csv" "$tmp/np2/metrics.csv")
if [ "$(wc -l <"$tmp/np2/metrics.csv" 2>/dev/null)" = 31 ] && awk -v w="$w" 'BEGIN { exit !(w <= 1e-6) }'; then
    echo "PASS dist b: 2 ranks on one GPU (host sum) vs 1 process, worst relative loss difference $w (bound 1e-6)" | tee -a "$RES/results.txt"
else
    echo "FAIL dist b: 2 ranks on one GPU (host sum) vs 1 process, worst relative loss difference $w (bound 1e-6)" | tee -a "$RES/results.txt"; fail=1
fi
BERTC_DEBUG_DIST_ONE_GPU=1 mpi -np 2 -x BERTC_DEBUG_DIST_ONE_GPU "$BERTC" train "${C[@]}" --out "$tmp/sh2" \
    --shard-optimizer >"$tmp/sh2.log" 2>&1 || { echo "FAIL: -np 2 --shard-optimizer: $(tail -5 "$tmp/sh2.log")"; fail=1; }
w=$(worst "$tmp/np2/metrics.csv" "$tmp/sh2/metrics.csv")
same=$(cmp -s "$tmp/np2/final/model.safetensors" "$tmp/sh2/final/model.safetensors" && echo "byte-identical" || echo "not byte-identical")
if [ "$(wc -l <"$tmp/sh2/metrics.csv" 2>/dev/null)" = 31 ] && awk -v w="$w" 'BEGIN { exit !(w <= 1e-6) }'; then
    echo "PASS dist d: 2 ranks on one GPU with --shard-optimizer vs without, worst relative loss difference $w (bound 1e-6); final model $same" | tee -a "$RES/results.txt"
else
    echo "FAIL dist d: 2 ranks on one GPU with --shard-optimizer vs without, worst relative loss difference $w (bound 1e-6)" | tee -a "$RES/results.txt"; fail=1
fi
BERTC_DEBUG_DIST_ONE_GPU=1 mpi -np 2 -x BERTC_DEBUG_DIST_ONE_GPU "$BERTC" train "${C[@]}" --pipeline-stages 2 \
    --out "$tmp/pipe" >"$tmp/pipe.log" 2>&1 || { echo "FAIL: pipeline: $(tail -5 "$tmp/pipe.log")"; fail=1; }
w=$(worst "$tmp/one/metrics.csv" "$tmp/pipe/metrics.csv")
same=differ
cmp -s "$tmp/one/final/model.safetensors" "$tmp/pipe/final/model.safetensors" 2>/dev/null && same=byte-identical
if [ "$(wc -l <"$tmp/pipe/metrics.csv" 2>/dev/null)" = 31 ] && awk -v w="$w" 'BEGIN { exit !(w <= 1e-6) }'; then
    echo "PASS dist e: 2 pipeline stages on one GPU (host copies) vs 1 process, worst relative loss difference $w (bound 1e-6); final weights $same" | tee -a "$RES/results.txt"
else
    echo "FAIL dist e: 2 pipeline stages on one GPU (host copies) vs 1 process, worst relative loss difference $w (bound 1e-6); final weights $same" | tee -a "$RES/results.txt"; fail=1
fi
if ldconfig -p 2>/dev/null | grep -q libnccl.so.2 || [ -n "$(find /usr /opt /root -name 'libnccl.so.2' -print -quit 2>/dev/null)" ]; then
    echo "note dist c: libnccl.so.2 present: $(find /usr /opt /root -name 'libnccl.so.2' -print -quit 2>/dev/null) (bertc opens it by name: on LD_LIBRARY_PATH?)"
else
    echo "note dist c: no libnccl.so.2 on this machine: multi-GPU runs would sum through the host"
fi
exit $fail
