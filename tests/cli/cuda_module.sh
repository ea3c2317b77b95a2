#!/usr/bin/env bash
# The CUDA backend as a module (src/backend/cuda_module.h): bertc links no
# CUDA library and runs its CPU commands with the module absent, missing,
# broken or present; `bertc version` and `bertc devices` say what was found
# and why it is not used; --device cuda without a usable module is exit 1 and
# one line naming the path tried; --device auto stays quiet on a machine
# without a driver; CPU commands never map libcublasLt. The bad modules are
# tests/fakecudamod's (built into BERTC_BUILD/fakecudamod).
source "$(dirname "$0")/lib/cli.sh"
: "${BERTC_BUILD:?set BERTC_BUILD to the build dir}"
unset BERTC_CUDA_MODULE
V=tests/ref/train3/init/vocab.txt
M=tests/ref/train3/init
D=tests/data/train_small.json
FAKE=$BERTC_BUILD/fakecudamod
BIN_DIR=$(cd "$(dirname "$BERTC")" && pwd)
MOD=$BIN_DIR/libbertc_cuda.so
driver=0
[ -e /proc/driver/nvidia ] || [ -e /dev/nvidiactl ] || [ -e /dev/dxg ] && driver=1
built=0
[ -f "$MOD" ] && built=1
echo "module: $MOD (present: $built); NVIDIA driver: $driver"

case_() { cli_n=$((cli_n + 1)); echo "case $cli_n: $*"; }

# 1. The binary links no CUDA library and holds no CUDA runtime.
case_ "bertc links no CUDA library"
needed=$(readelf -d "$BERTC" | grep NEEDED)
echo "$needed" | sed 's/^/    /'
echo "$needed" | grep -qiE 'cuda|cublas' && cli_bad "bertc needs a CUDA library"
grep -qaE '__cudaRegisterFatBinary|cudaGetDeviceCount' "$BERTC" && cli_bad "bertc has the CUDA runtime inside"
if [ "$built" -eq 1 ]; then
    case_ "the module: cuBLASLt its own dependency, one exported symbol"
    readelf -d "$MOD" | grep -q 'NEEDED.*libcublasLt' || cli_bad "the module does not need libcublasLt"
    readelf -d "$MOD" | grep -q 'NEEDED.*libcudart' && cli_bad "the module needs a shared cudart (want static)"
    exported=$(readelf -W --dyn-syms "$MOD" | awk '$5 == "GLOBAL" && $7 != "UND" { print $8 }')
    echo "    exported: $exported"
    [ "$exported" = "bertc_cuda_backend_entry" ] || cli_bad "exports '$exported', want bertc_cuda_backend_entry only"
fi

# tokenize must work and give the same ids whatever happens to the module.
"$BERTC" tokenize --vocab $V <<<"Who founded Kopa Labs?" >"$cli_tmp/tok.want" 2>"$cli_tmp/err" ||
    cli_bad "tokenize: $(cat "$cli_tmp/err")"
tokenize_ok() { # NAME, then env assignments
    local name=$1
    shift
    env "$@" "$BERTC" tokenize --vocab $V <<<"Who founded Kopa Labs?" >"$cli_tmp/tok" 2>"$cli_tmp/err"
    local rc=$?
    [ "$rc" -eq 0 ] && cmp -s "$cli_tmp/tok" "$cli_tmp/tok.want" && [ ! -s "$cli_tmp/err" ] ||
        cli_bad "$name: tokenize exit $rc: $(cat "$cli_tmp/err")"
}
version_has() { # NAME WANT, then env assignments
    local name=$1 want=$2
    shift 2
    env "$@" "$BERTC" version >"$cli_tmp/out" 2>"$cli_tmp/err"
    local rc=$?
    echo "    version: $(grep '^cuda:' "$cli_tmp/out")"
    [ "$rc" -eq 0 ] || cli_bad "$name: version exit $rc"
    grep -qF -- "$want" "$cli_tmp/out" || cli_bad "$name: version lacks '$want'"
}
devices_has() { # NAME WANT, then env assignments
    local name=$1 want=$2
    shift 2
    env BERTC_NVML_LIB=/nonexistent/libnvidia-ml.so.1 "$@" "$BERTC" devices >"$cli_tmp/out" 2>"$cli_tmp/err"
    local rc=$?
    echo "    devices: $(grep '^CUDA module:' "$cli_tmp/out")"
    [ "$rc" -eq 0 ] || cli_bad "$name: devices exit $rc"
    grep -qF -- "$want" "$cli_tmp/out" || cli_bad "$name: devices lacks '$want'"
    grep -q '^bertc will use: ' "$cli_tmp/out" || cli_bad "$name: devices lacks 'bertc will use'"
}
cuda_fails() { # NAME WANT, then env assignments: predict --device cuda is exit 1, one line
    local name=$1 want=$2
    shift 2
    env "$@" "$BERTC" predict --model $M --data $D --out "$cli_tmp/p.json" --max-seq-length 64 --doc-stride 16 \
        --threads 1 --device cuda >"$cli_tmp/out" 2>"$cli_tmp/err"
    local rc=$?
    echo "    --device cuda -> exit $rc: $(cat "$cli_tmp/err")"
    [ "$rc" -eq 1 ] || cli_bad "$name: --device cuda exit $rc, want 1"
    [ "$(wc -l <"$cli_tmp/err")" -eq 1 ] || cli_bad "$name: --device cuda: stderr is not one line"
    grep -q '^bertc: --device cuda: ' "$cli_tmp/err" || cli_bad "$name: the line does not start 'bertc: --device cuda: '"
    grep -qF -- "$want" "$cli_tmp/err" || cli_bad "$name: --device cuda: stderr lacks '$want'"
    [ -e "$cli_tmp/p.json" ] && cli_bad "$name: --device cuda wrote $cli_tmp/p.json"
    rm -f "$cli_tmp/p.json"
}

# 2. The module where bertc looks by default (next to the binary).
case_ "default place: $MOD"
if [ "$built" -eq 1 ] && [ "$driver" -eq 0 ]; then
    version_has default "cuda: module $MOD: found; not loaded (no NVIDIA driver"
elif [ "$built" -eq 1 ]; then
    version_has default "cuda: module $MOD: "
else
    version_has default "cuda: module not available: this build has no CUDA backend (nvcc was not found when it was built; no module at $MOD)"
    cuda_fails default "--device cuda: this build has no CUDA backend (nvcc was not found when it was built; no module at $MOD)"
fi
[ "$built" -eq 1 ] && devices_has default "CUDA module: $MOD: loaded (ABI "
tokenize_ok default

# 3. BERTC_CUDA_MODULE naming a missing file.
miss=/nonexistent/dir/libbertc_cuda.so
case_ "BERTC_CUDA_MODULE=$miss"
version_has missing "cuda: module not available: $miss not found (named by BERTC_CUDA_MODULE)" BERTC_CUDA_MODULE=$miss
devices_has missing "CUDA module: not available: $miss not found" BERTC_CUDA_MODULE=$miss
grep -q '^bertc will use: the CPU backend' "$cli_tmp/out" || cli_bad "missing: devices does not pick the CPU"
tokenize_ok missing BERTC_CUDA_MODULE=$miss
cuda_fails missing "--device cuda: no CUDA backend: $miss not found" BERTC_CUDA_MODULE=$miss
# --device auto: the CPU, and a warning only where a driver is present
env BERTC_CUDA_MODULE=$miss "$BERTC" predict --model $M --data $D --out "$cli_tmp/auto.json" --max-seq-length 64 \
    --doc-stride 16 --threads 1 >"$cli_tmp/out" 2>"$cli_tmp/err"
rc=$?
echo "    --device auto -> exit $rc: $(cat "$cli_tmp/err")"
[ "$rc" -eq 0 ] && [ -s "$cli_tmp/auto.json" ] || cli_bad "missing: predict --device auto exit $rc"
if [ "$driver" -eq 0 ]; then
    grep -q 'warning' "$cli_tmp/err" && cli_bad "missing: --device auto warned on a machine without a driver"
else
    grep -q "no usable CUDA device ($miss not found" "$cli_tmp/err" || cli_bad "missing: no warning with a driver present"
fi

# 4. A copy of the binary in a directory of its own: it looks there.
mkdir -p "$cli_tmp/bin"
cp "$BERTC" "$cli_tmp/bin/bertc"
case_ "a copy of bertc in $cli_tmp/bin, no module there"
BERTC_SAVED=$BERTC
BERTC=$cli_tmp/bin/bertc
if [ "$built" -eq 1 ]; then
    version_has copy "cuda: module not available: $cli_tmp/bin/libbertc_cuda.so not found (it is built next to the bertc binary and must stay there"
    cuda_fails copy "--device cuda: no CUDA backend: $cli_tmp/bin/libbertc_cuda.so not found"
else
    version_has copy "no module at $cli_tmp/bin/libbertc_cuda.so"
    cuda_fails copy "no module at $cli_tmp/bin/libbertc_cuda.so"
fi
tokenize_ok copy
if [ "$built" -eq 1 ]; then
    case_ "the module copied next to the copy"
    cp "$MOD" "$cli_tmp/bin/"
    devices_has copy+module "CUDA module: $cli_tmp/bin/libbertc_cuda.so: loaded (ABI "
fi
BERTC=$BERTC_SAVED

# 5. Bad module files: each refused with its reason, the CPU commands unharmed.
printf 'this is not a shared library, only some text long enough to be read as a header\n' >"$cli_tmp/text.so"
: >"$cli_tmp/empty.so"
mkdir -p "$cli_tmp/dir.so"
bad() { # NAME FILE WANT
    case_ "bad module: $1 ($2)"
    devices_has "$1" "CUDA module: not available: $3" BERTC_CUDA_MODULE="$2"
    grep -q '^bertc will use: the CPU backend' "$cli_tmp/out" || cli_bad "$1: devices does not pick the CPU"
    cuda_fails "$1" "--device cuda: no CUDA backend: $3" BERTC_CUDA_MODULE="$2"
    tokenize_ok "$1" BERTC_CUDA_MODULE="$2"
}
bad "not an ELF file" "$cli_tmp/text.so" "cannot load $cli_tmp/text.so: invalid ELF header"
bad "an empty file" "$cli_tmp/empty.so" "cannot load $cli_tmp/empty.so: "
bad "a directory" "$cli_tmp/dir.so" "$cli_tmp/dir.so is not a file"
bad "no entry point" "$FAKE/libnoentry.so" "$FAKE/libnoentry.so has no bertc_cuda_backend_entry (not a bertc CUDA module)"
bad "another ABI" "$FAKE/libbadabi.so" "$FAKE/libbadabi.so: ABI mismatch: the module has ABI 999, this bertc"
bad "other table sizes" "$FAKE/libbadsize.so" "$FAKE/libbadsize.so: ABI mismatch: the module's tables are"

# 6. A well-formed module that finds no GPU: loaded, and its reason is the error.
nogpu=$FAKE/libnogpu.so
case_ "a module without a GPU: $nogpu"
devices_has nogpu "CUDA module: $nogpu: loaded (ABI 8, bertc fake, CUDA runtime 12.4)" BERTC_CUDA_MODULE=$nogpu
cuda_fails nogpu "--device cuda: no usable CUDA device: the fake CUDA module has no GPU 0" BERTC_CUDA_MODULE=$nogpu
[ "$driver" -eq 0 ] && version_has nogpu "cuda: module $nogpu: found; not loaded (no NVIDIA driver" BERTC_CUDA_MODULE=$nogpu

# 7. CPU commands map neither the module nor libcublasLt (LD_DEBUG=libs lists
# every library loaded, dlopen included); `bertc devices` does (the control).
case_ "what CPU commands load (LD_DEBUG=libs)"
LD_DEBUG=libs "$BERTC" tokenize --vocab $V <<<"Who founded Kopa Labs?" >/dev/null 2>"$cli_tmp/ld1"
LD_DEBUG=libs "$BERTC" predict --model $M --data $D --out "$cli_tmp/auto2.json" --max-seq-length 64 --doc-stride 16 \
    --threads 1 >/dev/null 2>"$cli_tmp/ld2"
LD_DEBUG=libs "$BERTC" version >/dev/null 2>"$cli_tmp/ld3"
files=(ld1)
# with a driver present, --device auto and version load the module (as they should)
[ "$driver" -eq 0 ] && files+=(ld2 ld3)
for f in "${files[@]}"; do
    lib=$(grep -oE '[^ ]*(libcublas|libbertc_cuda)[^ ]*' "$cli_tmp/$f" | head -1)
    [ -n "$lib" ] && cli_bad "$f: a CPU command loaded $lib"
done
if [ "$built" -eq 1 ]; then
    LD_DEBUG=libs "$BERTC" devices >/dev/null 2>"$cli_tmp/ld4"
    grep -q 'libcublasLt' "$cli_tmp/ld4" || cli_bad "control: bertc devices did not load libcublasLt (LD_DEBUG shows nothing?)"
else
    BERTC_CUDA_MODULE=$nogpu LD_DEBUG=libs "$BERTC" devices >/dev/null 2>"$cli_tmp/ld4"
    grep -q 'libnogpu.so' "$cli_tmp/ld4" || cli_bad "control: bertc devices did not load the fake module (LD_DEBUG shows nothing?)"
fi
finish
