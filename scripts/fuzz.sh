#!/usr/bin/env bash
# libFuzzer harnesses for bertc's parsers (tests/fuzz/README.md).
#
#   scripts/fuzz.sh [--seconds N] [--target NAME] [--build DIR] [--jobs N] [--replay-only]
#
# Builds the modules that read outside input (src/core, text, data, model, eval,
# train/state.c, train/ckpt.c) once with clang (-fsanitize=fuzzer-no-link,
# address,undefined) into DIR/libbertc_fuzz.a (default DIR build-fuzz; make
# tracks the headers), links every tests/fuzz/fuzz_NAME.c against it,
# replays every regression input under tests/fuzz/regress/NAME/ and the seed
# corpus, then fuzzes each target for N seconds (default 60; 0 = replay
# only). New inputs go to DIR/corpus/NAME (the seeds in the repo are never
# written); a crash is saved to DIR/crashes/NAME/ and makes the script exit 1
# after all targets ran. clang-14, libclang-rt-14-dev and libomp-14-dev are
# installed with apt-get when missing (scripts/deps.sh).
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
seconds=60
only=""
build="$here/build-fuzz"
replay_only=0
jobs=$(nproc 2>/dev/null || echo 2)
while [ $# -gt 0 ]; do
    case "$1" in
    --seconds) seconds=${2:?--seconds needs a value}; shift 2 ;;
    --seconds=*) seconds=${1#*=}; shift ;;
    --target) only=${2:?--target needs a value}; shift 2 ;;
    --target=*) only=${1#*=}; shift ;;
    --build) build=${2:?--build needs a value}; shift 2 ;;
    --build=*) build=${1#*=}; shift ;;
    --jobs) jobs=${2:?--jobs needs a value}; shift 2 ;;
    --jobs=*) jobs=${1#*=}; shift ;;
    --replay-only) replay_only=1; shift ;;
    -h | --help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "fuzz.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
case "$seconds" in '' | *[!0-9]*) echo "fuzz.sh: --seconds '$seconds' is not a whole number" >&2; exit 2 ;; esac
[ "$replay_only" -eq 1 ] && seconds=0
case "$build" in /*) ;; *) build="$PWD/$build" ;; esac

# Tools: clang-14 and its runtime (libFuzzer, ASan, UBSan), and libomp for
# the project's OpenMP code under clang.
CC=""
for c in clang-14 clang; do command -v "$c" >/dev/null 2>&1 && { CC=$c; break; }; done
rt_ok() { [ -n "$CC" ] && [ -n "$(find "$("$CC" -print-resource-dir 2>/dev/null)/lib" -name 'libclang_rt.fuzzer*' 2>/dev/null | head -1)" ]; }
if ! rt_ok || ! dpkg-query -W -f='${Status}' libomp-14-dev 2>/dev/null | grep -q "install ok installed"; then
    bash "$here/scripts/deps.sh" clang-14 libclang-rt-14-dev libomp-14-dev || { echo "fuzz.sh: cannot install clang" >&2; exit 1; }
    command -v clang-14 >/dev/null 2>&1 && CC=clang-14
fi
rt_ok || { echo "fuzz.sh: $CC has no libFuzzer runtime (libclang-rt-14-dev)" >&2; exit 1; }
bash "$here/scripts/deps.sh" || exit 1

san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
version=$(sed -n 's/^project(bertc VERSION \([0-9.]*\).*/\1/p' "$here/CMakeLists.txt")
mkdir -p "$build"
t0=$(date +%s)
# Only the modules the harnesses call, compiled once into one archive with
# the options CMakeLists.txt gives the library; make tracks the headers.
tab=$'\t'
cat >"$build/Makefile.fuzz" <<MAKE
SRC := $here/src
B := $build
CC := $CC
CFLAGS := -std=gnu11 -g -O1 $san -fsanitize=fuzzer-no-link -fopenmp -Wall -Wextra -Wno-unused-parameter \\
  -fno-fast-math -I\$(SRC) -DBERTC_VERSION='"$version"'
SRCS := \$(wildcard \$(SRC)/core/*.c \$(SRC)/text/*.c \$(SRC)/data/*.c \$(SRC)/model/*.c \$(SRC)/eval/*.c) \$(SRC)/train/state.c \$(SRC)/train/ckpt.c \\
  \$(SRC)/infer/adhoc.c \$(SRC)/serve/serve_req.c
OBJS := \$(patsubst \$(SRC)/%.c,\$(B)/obj/%.o,\$(SRCS))
\$(B)/libbertc_fuzz.a: \$(OBJS)
${tab}rm -f \$@ && ar rcs \$@ \$^
\$(B)/obj/%.o: \$(SRC)/%.c
${tab}@mkdir -p \$(dir \$@)
${tab}\$(CC) \$(CFLAGS) -MMD -MP -c \$< -o \$@
-include \$(OBJS:.o=.d)
MAKE
make -s -f "$build/Makefile.fuzz" -j "$jobs" "$build/libbertc_fuzz.a" >"$build/build.log" 2>&1 ||
    { tail -40 "$build/build.log"; echo "fuzz.sh: building the library with $CC failed (log: $build/build.log)" >&2; exit 1; }
lib="$build/libbertc_fuzz.a"
libs=$(PKG_CONFIG_PATH="/usr/lib/x86_64-linux-gnu/openblas-openmp/pkgconfig:${PKG_CONFIG_PATH:-}" \
    pkg-config --libs libutf8proc jansson)

targets=()
for f in "$here"/tests/fuzz/fuzz_*.c; do
    n=$(basename "$f" .c); n=${n#fuzz_}
    [ -z "$only" ] || [ "$only" = "$n" ] && targets+=("$n")
done
[ ${#targets[@]} -gt 0 ] || { echo "fuzz.sh: no target '$only' (tests/fuzz/fuzz_*.c)" >&2; exit 2; }

# Harnesses link in parallel; each one only when its source or the library changed.
pids=()
for n in "${targets[@]}"; do
    src="$here/tests/fuzz/fuzz_$n.c"
    exe="$build/fuzz_$n"
    if [ ! -x "$exe" ] || [ "$src" -nt "$exe" ] || [ "$here/tests/fuzz/fuzz.h" -nt "$exe" ] || [ "$lib" -nt "$exe" ]; then
        "$CC" -std=c11 -g -O1 $san -fsanitize=fuzzer -I"$here/src" -I"$here/tests/fuzz" \
            "$src" "$lib" $libs -fopenmp -lpthread -ldl -lm -o "$exe" 2>"$build/fuzz_$n.log" &
        pids+=($!)
    fi
done
for p in "${pids[@]}"; do wait "$p" || { cat "$build"/fuzz_*.log; echo "fuzz.sh: linking a harness failed" >&2; exit 1; }; done
echo "fuzz.sh: built ${#targets[@]} harnesses with $CC in $(($(date +%s) - t0)) s ($build)"

export BERTC_DATA="${BERTC_DATA:-$here/../shared/data}"
# The harnesses write their inputs to files under here (memory when /dev/shm is there).
BERTC_FUZZ_TMP=$(mktemp -d /dev/shm/bertc-fuzz.XXXXXX 2>/dev/null || mktemp -d)
export BERTC_FUZZ_TMP
trap 'rm -rf "$BERTC_FUZZ_TMP"' EXIT
export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:allocator_may_return_null=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
# -rss_limit_mb: a parser must not be talked into allocating without bound.
common=(-rss_limit_mb=2048 -timeout=10 -close_fd_mask=1 -print_final_stats=1)
failed=()
for n in "${targets[@]}"; do
    exe="$build/fuzz_$n"
    reg="$here/tests/fuzz/regress/$n"
    seeds="$here/tests/fuzz/corpus/$n"
    mkdir -p "$build/corpus/$n" "$build/crashes/$n"
    # Regressions and seeds first, each run once: a crash here is a known bug back.
    inputs=()
    for d in "$reg" "$seeds"; do
        [ -d "$d" ] && while IFS= read -r -d '' f; do inputs+=("$f"); done < <(find "$d" -type f ! -name '*.md' -print0 | sort -z)
    done
    if [ ${#inputs[@]} -gt 0 ]; then
        if ! "$exe" "${common[@]}" -artifact_prefix="$build/crashes/$n/" "${inputs[@]}" >"$build/replay_$n.log" 2>&1; then
            grep -E "Running:|ERROR|SUMMARY|#[0-9]+ 0x" "$build/replay_$n.log" | tail -30
            echo "fuzz.sh: $n: replaying the regression and seed inputs FAILED (log: $build/replay_$n.log)"
            failed+=("$n")
            continue
        fi
    fi
    echo "fuzz.sh: $n: ${#inputs[@]} regression and seed inputs replayed, no crash"
    [ "$seconds" -gt 0 ] || continue
    dirs=("$build/corpus/$n")
    [ -d "$seeds" ] && dirs+=("$seeds")
    [ -d "$reg" ] && dirs+=("$reg")
    dict=()
    [ -f "$here/tests/fuzz/$n.dict" ] && dict=(-dict="$here/tests/fuzz/$n.dict")
    "$exe" "${common[@]}" "${dict[@]}" -max_total_time="$seconds" -artifact_prefix="$build/crashes/$n/" \
        "${dirs[@]}" >"$build/fuzz_$n.run.log" 2>&1
    rc=$?
    stats=$(grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb" "$build/fuzz_$n.run.log" | tr '\n' ' ')
    cov=$(grep -E "^#[0-9]+.*(DONE|pulse|NEW|REDUCE)" "$build/fuzz_$n.run.log" | tail -1 | grep -oE "cov: [0-9]+ ft: [0-9]+")
    if [ "$rc" -ne 0 ]; then
        grep -E "ERROR|SUMMARY|#[0-9]+ 0x|Test unit written|runtime error" "$build/fuzz_$n.run.log" | head -30
        echo "fuzz.sh: $n: CRASH after $seconds s at most (log: $build/fuzz_$n.run.log; input in $build/crashes/$n/)"
        failed+=("$n")
    else
        echo "fuzz.sh: $n: ${seconds} s, $stats$cov, no crash"
    fi
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzz.sh: FAILED: ${failed[*]}"
    exit 1
fi
echo "fuzz.sh: all ${#targets[@]} targets clean"
