#!/usr/bin/env bash
# Pipeline model parallelism on this machine: the same training (model,
# data, global batch, micro-batch, steps) as
#   A: 1 process x 2 threads      bertc train --threads 2
#   B: 2 stages x 1 thread        mpirun -np 2 bertc train --pipeline-stages 2 --threads 1
# Compared: examples/s of the training steps (the last row of
# RUN/metrics.csv: examples over the step time, without set-up), and each
# stage's bubble: its time waiting for the other stage (RUN/info.csv
# pipeline_idle_s: the waits for activations and gradients) over its time in
# the forward/backward passes (idle + pipeline_busy_s), against 1F1B's
# (S-1)/(M+S-1) for M micro-batches per step. Runs alternate A, B, REPS
# times for each micro-batch size; prints each run and the medians.
# The training windows are SQuAD dev's first articles (jq slices them), so
# that every step is a whole batch.
#
# Prints the command it was run with, the CPU, bertc's kernels and BLAS
# (bertc version), and each run's exact A and B command lines.
#
#   BERTC=build/bertc bash bench/dist/pipeline_overhead.sh [REPS] [CONFIG] [STEPS] [MICRO...]
set -euo pipefail
source "$(dirname "$0")/../lib/bench.sh"
invocation="BERTC=${BERTC:-build/bertc} bash $0${*:+ $*}"
BERTC=${BERTC:-build/bertc}
DATA=${BERTC_DATA:-../shared/data}
REPS=${1:-3}
CONFIG=${2:-minilm}
STEPS=${3:-10}
shift $(($# < 3 ? $# : 3))
MICROS=("$@")
[ ${#MICROS[@]} -gt 0 ] || MICROS=(2 4)
BATCH=16
SPLIT=
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
root=()
[ "$(id -u)" -eq 0 ] && root=(--allow-run-as-root)
squad_slice_setup "$tmp" "$DATA" "$CONFIG"
echo "command: $invocation"
echo "bertc pipeline: config $CONFIG, SQuAD dev articles 0-3, T 128, batch $BATCH, micro-batches ${MICROS[*]}, $STEPS steps, $REPS runs each"
echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg);$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
"$BERTC" version | grep -E '^(bertc|cpu|kernels|blas|mpi): ' | sed 's/^/  /'
# Open MPI's shared-memory single-copy mechanism: none (the default here: works in any container, but a
# non-blocking message then moves only inside MPI calls) or cma (the receiver copies it with
# process_vm_readv, where the kernel allows it): SINGLE_COPY=cma.
echo "MPI single copy: ${SINGLE_COPY:=none}"
MPIRUN=(env OMPI_MCA_btl_vader_single_copy_mechanism=$SINGLE_COPY mpirun --oversubscribe "${root[@]}" --bind-to none -np 2
        -x OMP_NUM_THREADS=1)
rate() { tail -1 "$1/metrics.csv" | cut -d, -f7; }
med() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
for micro in "${MICROS[@]}"; do
    M=$(((BATCH + micro - 1) / micro))
    want=$(awk -v m="$M" 'BEGIN { printf "%.1f", 100 / (m + 1) }')
    COMMON=(--model "$tmp/model" --train "$tmp/train.json" --max-seq-length 128 --doc-stride 32
            --batch "$BATCH" --micro-batch "$micro" --max-steps "$STEPS" --save-every 0 --save-every-minutes 0
            --monitor-interval 0 --log-every 1000000)
    A=(env OMP_NUM_THREADS=2 "$BERTC" train "${COMMON[@]}" --threads 2 --out "$tmp/A")
    B=("${MPIRUN[@]}" "$BERTC" train "${COMMON[@]}" --threads 1 --pipeline-stages 2 --out "$tmp/B")
    echo "micro-batch $micro: M = $M micro-batches per step, 1F1B bubble (S-1)/(M+S-1) = $want%"
    echo "  A: ${A[*]}"
    echo "  B: ${B[*]}"
    a=() b=() b0=() b1=()
    for r in $(seq "$REPS"); do
        rm -rf "$tmp/A" "$tmp/B"
        "${A[@]}" >"$tmp/A.log" 2>&1 || { echo "A failed: $(tail -3 "$tmp/A.log")" >&2; exit 1; }
        "${B[@]}" >"$tmp/B.log" 2>&1 || { echo "B failed: $(tail -3 "$tmp/B.log")" >&2; exit 1; }
        [ -n "$SPLIT" ] || SPLIT=$(grep '^pipeline_layers,' "$tmp/B/info.csv" | cut -d, -f2)
        ra=$(rate "$tmp/A") rb=$(rate "$tmp/B")
        read -r i0 i1 < <(grep '^pipeline_idle_s,' "$tmp/B/info.csv" | cut -d, -f2)
        read -r u0 u1 < <(grep '^pipeline_busy_s,' "$tmp/B/info.csv" | cut -d, -f2)
        s0=$(awk -v i="$i0" -v u="$u0" 'BEGIN { printf "%.1f", 100 * i / (i + u) }')
        s1=$(awk -v i="$i1" -v u="$u1" 'BEGIN { printf "%.1f", 100 * i / (i + u) }')
        echo "  run $r: A 1x2 threads $ra ex/s | B 2 stages x 1 thread $rb ex/s; stage 0 idle ${i0}s busy ${u0}s" \
             "(bubble $s0%), stage 1 idle ${i1}s busy ${u1}s (bubble $s1%) | load $(cut -d' ' -f1 /proc/loadavg)"
        a+=("$ra") b+=("$rb") b0+=("$s0") b1+=("$s1")
    done
    ma=$(med "${a[@]}") mb=$(med "${b[@]}") m0=$(med "${b0[@]}") m1=$(med "${b1[@]}")
    awk -v a="$ma" -v b="$mb" -v x="$m0" -v y="$m1" -v w="$want" 'BEGIN {
        printf "  median: A %.2f ex/s, B %.2f ex/s: B/A = %.3f; bubble stage 0 %.1f%%, stage 1 %.1f%% (1F1B: %.1f%%)\n",
               a, b, b / a, x, y, w }'
done
echo "stages' layers (the default split): $SPLIT"
