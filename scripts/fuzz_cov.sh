#!/usr/bin/env bash
# Source-based coverage of one libFuzzer harness (tests/fuzz/README.md):
#
#   scripts/fuzz_cov.sh TARGET [--runs N] [--seed S] [--build DIR] [--harness FILE] [--files 'a.c b.c']
#
# Builds tests/fuzz/fuzz_TARGET.c (or --harness FILE) with the project's
# core, text, data, eval and model sources under clang -fprofile-instr-generate
# -fcoverage-mapping -fsanitize=fuzzer (no ASan: this measures, it does not
# hunt), runs it for a fixed number of inputs (default 200000) from a fixed
# seed (default 1) on a scratch copy of the seed corpus (the repo's is never
# written), and prints libFuzzer's last cov:/ft: line and llvm-cov's line and
# branch coverage of the files named by --files (default: all of src/).
# Needs clang-14, llvm-14 (llvm-profdata, llvm-cov) and libclang-rt-14-dev.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
target=${1:?usage: fuzz_cov.sh TARGET [--runs N] [--seed S] [--build DIR] [--harness FILE] [--files LIST]}
shift
runs=200000
seed=1
build="$here/build-fuzzcov"
harness="$here/tests/fuzz/fuzz_$target.c"
files=""
source "$here/scripts/lib.sh"
parse_opts "fuzz_cov.sh TARGET [--runs N] [--seed S] [--build DIR] [--harness FILE] [--files LIST]" \
    --runs runs --seed seed --build build --harness harness --files files -- "$@"
CC=clang-14
command -v $CC >/dev/null || CC=clang
PROFDATA=$(command -v llvm-profdata-14 || command -v llvm-profdata) || { echo "fuzz_cov.sh: no llvm-profdata (llvm-14)" >&2; exit 1; }
COV=$(command -v llvm-cov-14 || command -v llvm-cov) || { echo "fuzz_cov.sh: no llvm-cov (llvm-14)" >&2; exit 1; }
version=$(sed -n 's/^project(bertc VERSION \([0-9.]*\).*/\1/p' "$here/CMakeLists.txt")
mkdir -p "$build"
exe="$build/cov_$target"
libs=$(pkg-config --libs libutf8proc jansson)
"$CC" -std=gnu11 -g -O1 -fprofile-instr-generate -fcoverage-mapping -fsanitize=fuzzer -fopenmp \
    -I"$here/src" -I"$here/tests/fuzz" -DBERTC_VERSION="\"$version\"" "$harness" \
    "$here"/src/core/*.c "$here"/src/text/*.c "$here"/src/data/*.c "$here"/src/eval/*.c "$here"/src/model/*.c \
    $libs -lpthread -ldl -lm -o "$exe"
scratch="$build/corpus_$target"
rm -rf "$scratch" "$build/$target.profraw"
mkdir -p "$scratch"
seeds=()
[ -d "$here/tests/fuzz/corpus/$target" ] && seeds+=("$here/tests/fuzz/corpus/$target")
[ -d "$here/tests/fuzz/regress/$target" ] && seeds+=("$here/tests/fuzz/regress/$target")
dict=()
[ -f "$here/tests/fuzz/$target.dict" ] && dict=(-dict="$here/tests/fuzz/$target.dict")
export BERTC_DATA="${BERTC_DATA:-$here/../shared/data}"
BERTC_FUZZ_TMP=$(mktemp -d /dev/shm/bertc-fuzzcov.XXXXXX 2>/dev/null || mktemp -d)
export BERTC_FUZZ_TMP
trap 'rm -rf "$BERTC_FUZZ_TMP"' EXIT
LLVM_PROFILE_FILE="$build/$target.profraw" "$exe" -seed="$seed" -runs="$runs" -rss_limit_mb=2048 -close_fd_mask=1 \
    "${dict[@]}" "$scratch" "${seeds[@]}" >"$build/$target.log" 2>&1 || { tail -30 "$build/$target.log"; exit 1; }
echo "fuzz_cov.sh: $target, seed $seed, $runs runs: $(grep -E '^#[0-9]+.*DONE' "$build/$target.log" | grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+')"
"$PROFDATA" merge -sparse "$build/$target.profraw" -o "$build/$target.profdata"
paths=()
for f in $files; do paths+=("$here/src/$f"); done
[ ${#paths[@]} -gt 0 ] || paths=("$here/src")
"$COV" report "$exe" -instr-profile="$build/$target.profdata" "${paths[@]}" | sed "s#$here/src/##"
