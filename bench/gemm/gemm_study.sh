#!/usr/bin/env bash
# The GEMM study: GFLOP/s of every CPU GEMM at hand, side by side in one run,
# at the products a bertc step runs (src/backend/cpu/ops_dense.c's layout):
#   fwd    out[N,OC]   = inp[N,C] @ w[OC,C]^T   (NT)  M=N,  N=OC, K=C
#   dgrad  dinp[N,C]  += dout[N,OC] @ w[OC,C]   (NN)  M=N,  N=C,  K=OC
#   wgrad  dw[OC,C]   += dout^T @ inp           (TN)  M=OC, N=C,  K=N
# for each linear layer's OC x C in {C x C, I x C, C x I} of minilm (C 384,
# I 1536) and base (768, 3072), at N = 8 x 384 = 3072 padded rows and at
# the packed token count of 8 SQuAD windows (8 x the mean window length of
# bench/squad_dev_lengths.txt), on 1 and 2 threads.
# Libraries, each in its own process: OpenBLAS as bertc loads it and under
# each OPENBLAS_CORETYPE this CPU runs; oneDNN's dnnl_sgemm and its matmul
# primitive; BLIS (bli_sgemm); bertc's gemm_fixed; torch.matmul (if torch
# imports). Also: the FFN up-projection with bias and erf GELU, oneDNN's
# fused post-op against GEMM + a separate pass (bertc's GELU loop); which
# ISA oneDNN's JIT uses; and whether each library's row results depend on
# M (the same row computed alone, inside 7 rows and inside 3,072, bit
# compared).
# Each number: the best of REPS calls after a warm-up call; the libraries
# take turns call by call (bench/gemm/gemm_study.py), so that load from
# elsewhere during the run falls on all of them alike.
#
#   bash bench/gemm/gemm_study.sh            from the repository root
#   REPS=5 THREADS="1 2" bash bench/gemm/gemm_study.sh
set -euo pipefail
REPS=${REPS:-3}
THREADS=${THREADS:-1 2}
export REPS
[ -f src/backend/cpu/gemm_fixed.c ] || { echo "gemm_study.sh: run from the repository root" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s)

echo "# GEMM study"
echo
echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "- CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "- command: \`REPS=$REPS THREADS=\"$THREADS\" bash bench/gemm/gemm_study.sh\`"

# ---------------------------------------------------------------- build
# OpenBLAS as bertc links it: Debian's OpenMP build when installed (CMakeLists.txt).
obdir=/usr/lib/x86_64-linux-gnu/openblas-openmp
if [ -d "$obdir/pkgconfig" ]; then
    export PKG_CONFIG_PATH="$obdir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
fi
ob_flags="$(pkg-config --cflags --libs openblas) -Wl,-rpath,$(pkg-config --variable=libdir openblas)"
cflags="-O2 -fno-fast-math -fopenmp -Wall -Isrc"
# bertc's kernel decision (BERTC_CPU_ISA), which the GELU and gemm_fixed follow
kern_src="src/backend/cpu/cpu_isa.c src/core/err.c"
gcc $cflags -DSTUDY_OPENBLAS bench/gemm/gemm_study.c $kern_src -o "$tmp/openblas" $ob_flags -lm
gcc $cflags -DSTUDY_FIXED bench/gemm/gemm_study.c src/backend/cpu/gemm_fixed.c src/backend/cpu/gemm_ws.c $kern_src -o "$tmp/fixed" -lm
have_dnnl=0
if gcc $cflags -DSTUDY_DNNL bench/gemm/gemm_study.c $kern_src -o "$tmp/dnnl" -ldnnl -lm 2>"$tmp/dnnl.err"; then have_dnnl=1; fi
have_blis=0
blis_inc=$(dirname "$(find /usr/include -name blis.h -path '*blis*' 2>/dev/null | head -1)" 2>/dev/null || true)
if gcc $cflags -I"$blis_inc" -DSTUDY_BLIS bench/gemm/gemm_study.c $kern_src -o "$tmp/blis" -lblis -lm 2>"$tmp/blis.err"; then
    have_blis=1
fi

# ---------------------------------------------------------------- shapes
mean=$(awk '{s += $1} END {printf "%.2f", s / NR}' bench/squad_dev_lengths.txt)
NP=$(awk -v m="$mean" 'BEGIN {printf "%d", 8 * m + 0.5}')
echo "- rows: padded N = 8 x 384 = 3072; packed N = 8 x $mean (mean of $(wc -l <bench/squad_dev_lengths.txt) windows in bench/squad_dev_lengths.txt) = $NP"
echo "- each number: the best of $REPS calls after one warm-up call, the libraries taking turns call by call; threads: $THREADS"
: >"$tmp/shapes"
: >"$tmp/ffn"
for model in "minilm 384 1536" "base 768 3072"; do
    set -- $model
    name=$1 C=$2 I=$3
    for n in 3072 "$NP"; do
        for oc_c in "$C $C" "$I $C" "$C $I"; do
            set -- $oc_c
            OC=$1 IN=$2
            echo "$name/$n/fwd/${OC}x$IN $n $OC $IN 0 1 0" >>"$tmp/shapes"
            echo "$name/$n/dgrad/${OC}x$IN $n $IN $OC 0 0 1" >>"$tmp/shapes"
            echo "$name/$n/wgrad/${OC}x$IN $OC $IN $n 1 0 1" >>"$tmp/shapes"
        done
        echo "$name/$n/ffn-up/${I}x$C $n $I $C" >>"$tmp/ffn"
    done
done

# ---------------------------------------------------------------- runs and report
[ $have_dnnl = 1 ] || echo "- oneDNN not built: $(tail -1 "$tmp/dnnl.err")"
[ $have_blis = 1 ] || echo "- BLIS not built: $(tail -1 "$tmp/blis.err")"
REPS=$REPS THREADS=$THREADS python3 bench/gemm/gemm_study.py "$tmp" "$tmp/shapes" "$tmp/ffn"
echo
echo "(the study took $(( $(date +%s) - start )) s)"
