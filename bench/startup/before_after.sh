#!/usr/bin/env bash
# bench/startup/before_after.sh BEFORE AFTER: start-up time and memory of CPU-only commands
# (version, tokenize, eval) for two bertc binaries, in the same run:
#   first run   wall time of each binary's first run of the command here (date, via sh -c exec);
#               with COLD=1 the binary, the libraries ldd lists for it and libcublasLt are
#               first dropped from the page cache (posix_fadvise DONTNEED, file by file), so
#               this is a cold start
#   mean wall   hyperfine, warm cache, RUNS runs (default 30), shell start-up subtracted
#   peak RSS    /usr/bin/time -v, maximum resident set size
#   cuBLASLt    whether the process maps libcublasLt (LD_DEBUG=libs)
# Made to compare a CUDA build that links the backend in with one that loads it
# as a module (bench/RESULTS.md). Run from the repo root.
set -eu
BEFORE=${1:?usage: bench/startup/before_after.sh BEFORE_BERTC AFTER_BERTC}
AFTER=${2:?usage: bench/startup/before_after.sh BEFORE_BERTC AFTER_BERTC}
RUNS=${RUNS:-30}
V=tests/ref/train3/init/vocab.txt
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf 'Who founded Kopa Labs?\nKopa Labs was founded by Dire Pogu in 1998.\n' >"$tmp/in.txt"
E1=tests/data/eval_hand_data.json
E2=tests/data/eval_hand_pred.json
echo "| command | binary | first run (s) | mean wall (s) ± sd | peak RSS (MiB) | maps libcublasLt |"
echo "|---|---|---|---|---|---|"
for cmd in version tokenize eval; do
    for which in before after; do
        bin=$BEFORE
        [ "$which" = after ] && bin=$AFTER
        case $cmd in
        version) line="$bin version" ;;
        tokenize) line="$bin tokenize --vocab $V < $tmp/in.txt" ;;
        eval) line="$bin eval $E1 $E2" ;;
        esac
        if [ "${COLD:-0}" = 1 ]; then
            cub_lib=$(ldconfig -p | awk '/libcublasLt\.so/ { print $NF; exit }')
            python3 - "$bin" $(ldd "$bin" | awk '/=> \// { print $3 }') ${cub_lib:+"$cub_lib"} <<'PY'
import os, sys
for f in sys.argv[1:]:
    try:
        fd = os.open(os.path.realpath(f), os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
    except OSError:
        pass
PY
        fi
        t0=$(date +%s%N)
        sh -c "exec $line" >/dev/null 2>&1
        first=$(awk -v a="$t0" -v b="$(date +%s%N)" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')
        hyperfine --warmup 3 --runs "$RUNS" --export-json "$tmp/h.json" "$line" >/dev/null 2>&1
        ms=$(python3 -c "import json;r=json.load(open('$tmp/h.json'))['results'][0];print('%.4f ± %.4f'%(r['mean'],r['stddev']))")
        /usr/bin/time -v -o "$tmp/t" sh -c "exec $line" >/dev/null 2>&1
        rss=$(awk -F: '/Maximum resident/ { printf "%.1f", $2 / 1024 }' "$tmp/t")
        cub=no
        LD_DEBUG=libs sh -c "exec $line" >/dev/null 2>"$tmp/ld" || true
        grep -q libcublasLt "$tmp/ld" && cub=yes
        echo "| \`bertc $cmd\` | $which | $first | $ms | $rss | $cub |"
    done
done
