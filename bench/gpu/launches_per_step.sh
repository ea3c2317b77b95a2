#!/usr/bin/env bash
# bench/gpu/launches_per_step.sh [BUILD_DIR]: kernel launches per training
# step of the CUDA backend on the CPU stand-in (issue 47's count): the tiny
# config, T 128, batch 4, fp16 on an emulated T4, a 2-step run's launches
# minus a 1-step run's (CUDAEMU_PROFILE=1; cuBLASLt calls are not kernels
# and not counted), padded and packed, with the kernels that make the step.
set -u -o pipefail
cd "$(dirname "$0")/../.." || exit 1
B=$(cd "${1:-build}" && pwd) || exit 1
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
"$B/bertc" init --config tiny --vocab tests/ref/train3/init/vocab.txt --out "$W/m" >/dev/null 2>&1 || {
    echo "launches_per_step: bertc init failed" >&2
    exit 1
}
run() { # steps packing
    CUDAEMU_PROFILE=1 BERTC_CUDA_MODULE=$B/libbertc_cuda_emu.so "$B/bertc" train --model "$W/m" \
        --train tests/data/train_small.json --out "$W/r$1$2" --max-seq-length 128 --doc-stride 32 --batch 4 \
        --micro-batch 4 --max-steps "$1" --dropout 0.1 --seed 42 --save-every 0 --save-every-minutes 0 \
        --device cuda --precision fp16 --packing "$2" >"$W/o$1$2" 2>"$W/e$1$2" || {
        tail -3 "$W/e$1$2" >&2
        exit 1
    }
    # a row is: name (which may hold spaces, "(flash_fwd_kernel<T, ND>)"), launches, threads, seconds
    awk '/cudaemu profile/ {p=1; next} p && NF>=4 {n=$(NF-2); $NF=""; $(NF-1)=""; $(NF-2)=""; gsub(/[ ()]/, "");
         s+=n; k[$0]=n} END {print s; for (x in k) print "K", x, k[x]}' \
        "$W/e$1$2" >"$W/c$1$2"
}
for pk in none varlen; do
    run 1 $pk
    run 2 $pk
    a=$(head -1 "$W/c1$pk")
    b=$(head -1 "$W/c2$pk")
    echo "packing $pk: 1 step $a launches, 2 steps $b: per step $((b - a))"
    join <(grep ^K "$W/c1$pk" | awk '{print $2, $3}' | sort) <(grep ^K "$W/c2$pk" | awk '{print $2, $3}' | sort) \
        -a2 -e0 -o 0,1.2,2.2 | awk '{d=$3-$2; if (d) printf "    %-40s %d\n", $1, d}' | sort -k2 -n -r
done
