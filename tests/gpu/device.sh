#!/usr/bin/env bash
# tests/gpu/device.sh pack | run: the device checks on a machine that has a GPU
# but none of bertc's build dependencies (no OpenBLAS, utf8proc, Jansson,
# libmicrohttpd or OpenMPI headers, no package registry), such as the
# workplace's lent H200.
#
#   pack   (here, on the CPU machine, with nvcc): builds tests/gpu for ARCH
#          (default 90) in build-gpu/ and puts the programs, the module and
#          every shared library they need but the C library and cuBLASLt
#          (plus jq and curl for serve_cli.sh) into build-dev/pack.tar.xz.
#   run    (there, from the repository root, with build-dev/ carried):
#          unpacks it, finds cuBLASLt and NCCL on that machine, runs
#          tests/gpu/run.sh on the prebuilt programs (PREBUILT=1) with a
#          deadline (DEADLINE seconds in all, default 480), then the
#          examples/s and memory grid of `bertc bench --device cuda` (GRID=0
#          skips it), and leaves results.tar.gz, summary.txt and run.log in
#          $OUT (or ./gpu-results).
# A lent machine's 15 minutes: pack here first (30 s with ARCH=90; the
# tarball is ~13 MB of the 64 MB a call may carry), then one call such as
#   run(command="DEADLINE=430 CHECK_TIMEOUT=45 bash tests/gpu/device.sh run",
#       carry=["build-dev"], timeout_s=450)
# which leaves time for a second call after fixing what failed (GRID=0 and
# a smaller DEADLINE for a rerun of the checks alone).
set -u -o pipefail
cd "$(dirname "$0")/../.." || exit 1

pack() {
    local arch=${ARCH:-90} d=build-dev/stage
    cmake -S tests/gpu -B build-gpu -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$arch" >/dev/null &&
        cmake --build build-gpu -j "$(nproc)" --target gpu_check bertc bertc_cuda test_cuda_fallback >/dev/null ||
        { echo "device.sh pack: the build failed" >&2; return 1; }
    rm -rf build-dev && mkdir -p $d/bertc $d/lib $d/bin || return 1
    cp build-gpu/gpu_check $d/ && cp build-gpu/bertc/bertc build-gpu/bertc/libbertc_cuda.so \
        build-gpu/bertc/test_cuda_fallback $d/bertc/ || return 1
    cp "$(command -v jq)" "$(command -v curl)" "$(command -v patchelf)" $d/bin/ || return 1
    # every library they load but the C library's own and cuBLASLt (that machine's CUDA has it)
    ldd $d/gpu_check $d/bertc/* $d/bin/* 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
        grep -Ev '/(libc|libm|libdl|librt|libpthread|ld-linux[^/]*|libstdc\+\+|libgcc_s|libcublasLt|libcublas|libcudart)\.so' |
        while read -r f; do cp -L "$f" $d/lib/; done
    tar -C $d -cJf build-dev/pack.tar.xz . && rm -rf $d || return 1
    ls -la build-dev/pack.tar.xz
}

# the first file named $1 under the directories that follow
find_lib() {
    local name=$1
    shift
    find "$@" -name "$name" 2>/dev/null | head -n1
}

run() {
    local res=/tmp/gpu-res out=${OUT:-$PWD/gpu-results} t0
    t0=$(date +%s)
    mkdir -p "$out" build-dev/stage && rm -rf "$res" && mkdir -p "$res" || return 1
    tar -C build-dev/stage -xJf build-dev/pack.tar.xz || { echo "device.sh: no build-dev/pack.tar.xz" >&2; return 1; }
    local lt nccl
    lt=$(find_lib 'libcublasLt.so.*' /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda /opt /usr/lib)
    nccl=$(find_lib 'libnccl.so.2' /usr/local/cuda /opt /usr/lib)
    # The programs find the carried libraries, that machine's cuBLASLt and
    # NCCL through their own search paths (DT_RPATH, which also serves
    # their libraries' needs), so nothing else run here (python3, torch)
    # sees a carried library.
    local st=$PWD/build-dev/stage cuda=${lt:+:$(dirname "$lt")}${nccl:+:$(dirname "$nccl")}
    for f in $st/gpu_check $st/bertc/bertc $st/bertc/test_cuda_fallback $st/bertc/libbertc_cuda.so $st/bin/jq \
        $st/bin/curl; do
        "$st/bin/patchelf" --force-rpath --set-rpath "$st/lib$cuda" "$f" || echo "device.sh: patchelf $f failed"
    done
    export PATH="$PATH:$st/bin:/usr/local/cuda/bin"
    {
        echo "cublasLt: ${lt:-not found}; nccl: ${nccl:-not found}"
        echo "python3: $(command -v python3) $(python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)' 2>&1)"
        for f in build-dev/stage/gpu_check build-dev/stage/bertc/*; do
            ldd "$f" | grep 'not found' | sed "s|^|$f: |"
        done
        build-dev/stage/bertc/bertc version
    } 2>&1 | tee "$res/env.txt"
    local budget=$((${DEADLINE:-480} - 30))
    PREBUILT=1 BUILD_DIR=build-dev/stage CHECK_TIMEOUT=${CHECK_TIMEOUT:-60} timeout $((budget * 3 / 4)) \
        bash tests/gpu/run.sh "$res" >/dev/null 2>&1
    echo "run.sh exit $? after $(($(date +%s) - t0)) s"
    if [ "${GRID:-1}" != 0 ]; then
        local left=$((budget - ($(date +%s) - t0)))
        [ $left -gt 20 ] && timeout $left bash bench/gpu/gpu_grid.sh build-dev/stage/bertc/bertc "$res/grid" \
            >"$res/grid.log" 2>&1
        echo "grid exit $? after $(($(date +%s) - t0)) s"
    fi
    cp "$res/summary.txt" "$res/run.log" "$out/" 2>/dev/null
    [ -f "$res/grid/grid.md" ] && cp "$res/grid/grid.md" "$out/"
    tar -C /tmp -czf "$out/results.tar.gz" gpu-res
    cat "$res/summary.txt"
    [ -f "$res/grid/grid.md" ] && cat "$res/grid/grid.md"
}

case ${1:-} in
pack) pack ;;
run) run ;;
*)
    echo "usage: tests/gpu/device.sh pack|run" >&2
    exit 2
    ;;
esac
