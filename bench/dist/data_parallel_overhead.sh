#!/usr/bin/env bash
# The overhead of the data-parallel path (issue 15): the same training
# (same model, data, global batch, micro-batch, steps) as
#   A: 1 process x 2 threads      bertc train --threads 2
#   B: 2 ranks x 1 thread         mpirun -np 2 bertc train --threads 1
#   C: B with --shard-optimizer   (AdamW on half the parameters per rank;
#                                  reduce-scatter + all-gather of the buckets)
# on a 2-core machine. Compared: examples/s of the training steps (the last
# row of RUN/metrics.csv: examples over the step time, without set-up), and
# B's and C's share of the step time spent in collectives (RUN/info.csv
# comm_s; it includes waiting for the other rank; comm_wait_s is the
# waiting alone), and (with /usr/bin/time) each rank's peak resident memory
# and the CPU seconds of each variant (user + system, all its processes:
# less disturbed than examples/s when other jobs load the machine).
# Runs alternate A, B, C, REPS times; prints each run and the medians.
# Target: B at most 10 % slower than A.
# The training windows are SQuAD dev's first articles (jq slices them), so
# every step is a whole batch: with a file of a few dozen windows (as
# tests/data/train_small.json), an epoch's last, short step has fewer
# micro-batches than ranks, one rank idles, and that imbalance, not the
# data-parallel path, dominates a short run.
#
#   BERTC=build/bertc bash bench/dist/data_parallel_overhead.sh [REPS] [CONFIG] [STEPS]
set -euo pipefail
source "$(dirname "$0")/../lib/bench.sh"
BERTC=${BERTC:-build/bertc}
DATA=${BERTC_DATA:-../shared/data}
REPS=${1:-3}
CONFIG=${2:-minilm}
STEPS=${3:-20}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
root=()
[ "$(id -u)" -eq 0 ] && root=(--allow-run-as-root)
squad_slice_setup "$tmp" "$DATA" "$CONFIG"
COMMON=(--model "$tmp/model" --train "$tmp/train.json" --max-seq-length 128 --doc-stride 32
        --batch 16 --micro-batch 8 --max-steps "$STEPS" --save-every 0 --save-every-minutes 0
        --monitor-interval 0 --log-every 1000000)
echo "bertc dist overhead: config $CONFIG, SQuAD dev articles 0-3, T 128, batch 16 = 2 micro-batches of 8, $STEPS steps, $REPS runs each"
echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
echo "MPI single copy: ${SINGLE_COPY:=none} (SINGLE_COPY=cma where the kernel allows it: bench/dist/pipeline_overhead.sh says why)"
rate() { tail -1 "$1/metrics.csv" | cut -d, -f7; }
# ranks RUN ARGS...: 2 ranks x 1 thread; with /usr/bin/time each rank's
# peak RSS goes to RUN.rss.RANK (KiB)
ranks() {
    local run=$1
    shift
    local wrap=()
    [ -x /usr/bin/time ] && wrap=(sh -c '/usr/bin/time -f "%M %U %S" -o "$0.rss.$OMPI_COMM_WORLD_RANK" "$@"' "$run")
    OMPI_MCA_btl_vader_single_copy_mechanism=$SINGLE_COPY mpirun --oversubscribe "${root[@]}" --bind-to none -np 2 \
        -x OMP_NUM_THREADS=1 "${wrap[@]}" "$BERTC" train "${COMMON[@]}" --threads 1 --out "$run" "$@" >/dev/null 2>&1
}
share() { # share RUN RATE: comm_s as a share of the steps' time
    local comm trb
    comm=$(grep '^comm_s,' "$1/info.csv" | cut -d, -f2)
    trb=$(awk -v n="$STEPS" -v r="$2" 'BEGIN { print n * 16 / r }')
    awk -v c="$comm" -v t="$trb" 'BEGIN { printf "%.1f", 100 * c / t }'
}
rss() { [ -f "$1.rss.$2" ] && awk '{ printf "%.0f", $1 / 1024 }' "$1.rss.$2" || echo "?"; }
cpu() { cat "$1".rss.* 2>/dev/null | awk '{ s += $2 + $3 } END { printf "%.1f", s }'; }
a=() b=() c=() sb=() sc=()
for r in $(seq "$REPS"); do
    rm -rf "$tmp/A" "$tmp/B" "$tmp/C" "$tmp"/*.rss.*
    a_wrap=()
    [ -x /usr/bin/time ] && a_wrap=(/usr/bin/time -f "%M %U %S" -o "$tmp/A.rss.0")
    OMP_NUM_THREADS=2 "${a_wrap[@]}" "$BERTC" train "${COMMON[@]}" --threads 2 --out "$tmp/A" >/dev/null 2>&1
    l_a=$(cut -d' ' -f1 /proc/loadavg)
    ranks "$tmp/B"
    l_b=$(cut -d' ' -f1 /proc/loadavg)
    ranks "$tmp/C" --shard-optimizer
    l_c=$(cut -d' ' -f1 /proc/loadavg)
    ra=$(rate "$tmp/A") rb=$(rate "$tmp/B") rc=$(rate "$tmp/C")
    shb=$(share "$tmp/B" "$rb") shc=$(share "$tmp/C" "$rc")
    echo "run $r: A 1x2 threads $ra ex/s, $(cpu "$tmp/A") CPU s (load $l_a) | B 2 ranks $rb ex/s, comm ${shb}%," \
         "$(cpu "$tmp/B") CPU s (load $l_b), peak RSS $(rss "$tmp/B" 0)/$(rss "$tmp/B" 1) MiB | C sharded $rc ex/s," \
         "comm ${shc}%, $(cpu "$tmp/C") CPU s (load $l_c), peak RSS $(rss "$tmp/C" 0)/$(rss "$tmp/C" 1) MiB"
    a+=("$ra") b+=("$rb") c+=("$rc") sb+=("$shb") sc+=("$shc")
done
med() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ma=$(med "${a[@]}") mb=$(med "${b[@]}") mc=$(med "${c[@]}") msb=$(med "${sb[@]}") msc=$(med "${sc[@]}")
awk -v a="$ma" -v b="$mb" -v c="$mc" -v sb="$msb" -v sc="$msc" 'BEGIN {
    printf "median: A %.2f ex/s, B %.2f ex/s (B/A = %.3f, overhead %.1f%%; comm share %.1f%%), ", a, b, b / a, 100 * (a - b) / a, sb
    printf "C %.2f ex/s (C/A = %.3f, overhead %.1f%%; C/B = %.3f; comm share %.1f%%)\n", c, c / a, 100 * (a - c) / a, c / b, sc }'
