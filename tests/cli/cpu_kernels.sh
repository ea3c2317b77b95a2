# The CPU kernels follow the CPU's features (CPUID and the OS's XCR0), not a
# table of models: `bertc version` names the level and OpenBLAS's core, and
# the core's level equals the CPU's (as /proc/cpuinfo's flags say); a generic
# core OpenBLAS picked by itself is overridden and the override is reported
# (simulated: the variables bertc sets when it runs again); a core the user
# set is honoured; BERTC_CPU_ISA caps the level; a level or core the CPU lacks
# and an unknown name are one-line errors with exit 2, never SIGILL. The
# start-up report, info.csv, `bertc bench --json` and the test programs name
# the kernels. The training GEMM is oneDNN's sgemm where libdnnl loads (capped
# at bertc's level), else OpenBLAS's, and says why; BERTC_GEMM picks one.
# `bertc version` names each kernel family's variant (`kernel FAMILY:
# VARIANT (why)`): under BERTC_CPU_ISA=sse none is an AVX one, under avx2
# none is an AVX-512 one, and training at sse gives the default's losses
# within rounding (other kernels round differently).
source "$(dirname "$0")/lib/cli.sh"
unset OPENBLAS_CORETYPE BERTC_BLAS_CORE BERTC_BLAS_FALLBACK BERTC_CPU_ISA BERTC_ONEDNN_LIB
# The sanitizer build's tests set BERTC_GEMM=openblas (LeakSanitizer cannot
# scan oneDNN's thread-local storage, CMakeLists.txt): kept for every case
# that would load oneDNN.
preset_gemm=${BERTC_GEMM:-}

flags=$(grep -m1 '^flags' /proc/cpuinfo)
has() { [[ " $flags " == *" $1 "* ]]; }
native=sse
if has avx; then native=avx; fi
if has avx2 && has fma; then native=avx2; fi
if [ $native = avx2 ] && has avx512f && has avx512dq && has avx512cd && has avx512bw && has avx512vl; then native=avx512; fi
core_level() {
    case $1 in
    SkylakeX | Cooperlake | SapphireRapids) echo avx512 ;;
    Haswell | Zen) echo avx2 ;;
    Sandybridge | Bulldozer | Piledriver | Steamroller | Excavator) echo avx ;;
    *) echo sse ;;
    esac
}
version() { # version VAR=VALUE...: bertc version under those variables, into $cli_tmp/v
    env "$@" "$BERTC" version >"$cli_tmp/v" 2>"$cli_tmp/verr"
}
core_of() { sed -n 's/^blas: .*core \([A-Za-z0-9()]*\))$/\1/p' "$cli_tmp/v"; }

cli_n=$((cli_n + 1))
version
rc=$?
core=$(core_of)
echo "case $cli_n: /proc/cpuinfo says $native; bertc version -> exit $rc: $(grep '^kernels' "$cli_tmp/v")"
[ $rc -eq 0 ] || cli_bad "exit $rc"
grep -q "^kernels: isa $native (auto" "$cli_tmp/v" || cli_bad "kernels line does not name level $native"
[ "$(core_level "$core")" = $native ] || cli_bad "OpenBLAS core $core is not a $native core"

cli_n=$((cli_n + 1))
version OPENBLAS_CORETYPE=Prescott BERTC_BLAS_CORE=Prescott
core=$(core_of)
echo "case $cli_n: OpenBLAS's own pick a generic Prescott (simulated) -> core $core: $(grep '^kernels' "$cli_tmp/v")"
[ "$(core_level "$core")" = $native ] || cli_bad "the generic core was not overridden (core $core)"
[ $native = sse ] || grep -q "OpenBLAS's own choice for this CPU was the generic Prescott" "$cli_tmp/v" ||
    cli_bad "the override is not reported"

cli_n=$((cli_n + 1))
version OPENBLAS_CORETYPE=Prescott
echo "case $cli_n: OPENBLAS_CORETYPE=Prescott set by the user -> $(grep '^kernels' "$cli_tmp/v")"
[ "$(core_of)" = Prescott ] || cli_bad "the user's core was not honoured"
grep -q "set by the user" "$cli_tmp/v" || cli_bad "not reported as the user's"

if [ $native = avx2 ] || [ $native = avx512 ]; then
    cli_n=$((cli_n + 1))
    version BERTC_CPU_ISA=avx
    echo "case $cli_n: BERTC_CPU_ISA=avx -> core $(core_of): $(grep '^kernels' "$cli_tmp/v")"
    [ "$(core_of)" = Sandybridge ] || cli_bad "the cap avx did not give Sandybridge"
    grep -q "^kernels: isa avx (BERTC_CPU_ISA=avx" "$cli_tmp/v" || cli_bad "the cap is not reported"
    # below AVX2 oneDNN was never measured the faster: auto keeps OpenBLAS there and says so
    [ -n "${BERTC_GEMM:-}" ] || grep -q "gemm OpenBLAS .*(oneDNN not used: level below avx2" "$cli_tmp/v" ||
        cli_bad "auto took oneDNN below AVX2"
    cli_n=$((cli_n + 1))
    out=$(BERTC_CPU_ISA=avx BERTC_TEST_PRINT_KERNELS=1 "$BERTC_BUILD/test_config" 2>&1 | grep '^kernels')
    echo "case $cli_n: a test program under BERTC_CPU_ISA=avx: $out"
    [[ "$out" == *"core Sandybridge"* ]] || cli_bad "the test program did not take the cap"
fi

# The kernel families: one line each, every variant within the level.
families="gemm gemm_fixed gelu softmax layernorm dropout adam gemm_int8 gemm_bf16"
variant() { sed -n "s/^kernel $1: \([^(]*\) (.*/\1/p" "$cli_tmp/v" | sed 's/ *$//'; }
check_families() { # check_families LEVEL: each family's variant is one a CPU of LEVEL runs
    local f v
    for f in $families; do
        v=$(variant $f)
        [ -n "$v" ] || { cli_bad "$1: no 'kernel $f:' line"; continue; }
        case $1 in
        sse) [[ "${v,,}" == *avx* ]] && cli_bad "sse: kernel $f runs $v" ;;
        avx2) [[ "${v,,}" == *avx512* || "${v,,}" == *avx-512* ]] && cli_bad "avx2: kernel $f runs $v" ;;
        esac
        if [[ "$v" == openblas* ]]; then
            local lvl
            lvl=$(core_level "${v#openblas }")
            case $1:$lvl in sse:sse | avx2:sse | avx2:avx | avx2:avx2 | avx512:*) ;; *) cli_bad "$1: gemm runs $v ($lvl)" ;; esac
        fi
    done
}
cli_n=$((cli_n + 1))
version
echo "case $cli_n: kernel families at the default level $native:"
grep '^kernel ' "$cli_tmp/v" | sed 's/^/    /'
check_families $native
[ "$(variant gelu)" = "$([ $native = avx2 ] || [ $native = avx512 ] && echo $native || echo sse)" ] ||
    cli_bad "gelu runs $(variant gelu) at $native"
cli_n=$((cli_n + 1))
version BERTC_CPU_ISA=sse
echo "case $cli_n: kernel families under BERTC_CPU_ISA=sse:"
grep '^kernel ' "$cli_tmp/v" | sed 's/^/    /'
check_families sse
if [ $native = avx2 ] || [ $native = avx512 ]; then
    cli_n=$((cli_n + 1))
    version BERTC_CPU_ISA=avx2
    echo "case $cli_n: kernel families under BERTC_CPU_ISA=avx2: $(grep '^kernel ' "$cli_tmp/v" | sed 's/ (.*//' | tr '\n' ';')"
    check_families avx2
fi

# What the sse level computes is what the default computes, to rounding: 3
# training steps, the losses and gradient norms within a relative 1e-4.
cli_n=$((cli_n + 1))
train3() { # train3 DIR VAR=VALUE...
    local out=$1
    shift
    env "$@" "$BERTC" train --model tests/ref/train3/init --train tests/data/train_small.json --max-seq-length 64 \
        --doc-stride 16 --max-steps 3 --batch 2 --threads 2 --monitor-interval 0 --out "$out" >"$out.log" 2>&1
}
train3 "$cli_tmp/t_def"
rc_def=$?
train3 "$cli_tmp/t_sse" BERTC_CPU_ISA=sse
rc_sse=$?
echo "case $cli_n: 3 steps at $native -> exit $rc_def, at sse -> exit $rc_sse:" \
    "$(cut -d, -f1,3,5 "$cli_tmp/t_def/metrics.csv" 2>/dev/null | tail -n +2 | tr '\n' ' ')|" \
    "$(cut -d, -f1,3,5 "$cli_tmp/t_sse/metrics.csv" 2>/dev/null | tail -n +2 | tr '\n' ' ')"
[ $rc_def -eq 0 ] && [ $rc_sse -eq 0 ] || cli_bad "train exit $rc_def / $rc_sse"
paste -d, "$cli_tmp/t_def/metrics.csv" "$cli_tmp/t_sse/metrics.csv" 2>/dev/null | awk -F, '
    function off(a, b) { d = a - b; if (d < 0) d = -d; m = a < 0 ? -a : a; return d > 1e-4 * m + 1e-7 }
    NR == 1 { n = NF / 2; for (i = 1; i <= n; i++) col[$i] = i; next }
    { rows++; if ($1 != $(1 + n)) bad = 1
      for (c in want) if (off($(col[c]), $(col[c] + n))) { bad = 1; print "    step " $1 ": " c " " $(col[c]) " vs " $(col[c] + n) } }
    BEGIN { want["loss"]; want["grad_norm"] }
    END { exit !(rows == 3 && !bad) }' || cli_bad "the sse level's losses are not the default's within 1e-4"
grep -q "^  kernels   isa sse" "$cli_tmp/t_sse.log" || cli_bad "the sse run did not run at sse"

export BERTC_CPU_ISA=bogus
expect 2 "BERTC_CPU_ISA=bogus: not a level" -- version
unset BERTC_CPU_ISA
export OPENBLAS_CORETYPE=Pentium9
expect 2 "OPENBLAS_CORETYPE=Pentium9: not an OpenBLAS x86-64 core" -- version
unset OPENBLAS_CORETYPE
if [ $native != avx512 ]; then
    export BERTC_CPU_ISA=avx512
    expect 2 "the highest level here is $native" -- bench --config tiny --seq 32 --batch 2 --steps 1
    unset BERTC_CPU_ISA
    export OPENBLAS_CORETYPE=SkylakeX
    expect 2 "OPENBLAS_CORETYPE=SkylakeX: this CPU" -- bench --config tiny --seq 32 --batch 2 --steps 1
    unset OPENBLAS_CORETYPE
else
    echo "(this CPU has AVX-512: no level above it to refuse)"
fi

# The GEMM library: oneDNN where Debian's libdnnl is installed, at bertc's level.
gemm_lib=OpenBLAS
if [ -z "$preset_gemm" ] && ldconfig -p 2>/dev/null | grep -q 'libdnnl\.so\.[23] '; then gemm_lib=oneDNN; fi
cli_n=$((cli_n + 1))
version
echo "case $cli_n: libdnnl installed: $([ $gemm_lib = oneDNN ] && echo yes || echo no)${preset_gemm:+ (BERTC_GEMM=$preset_gemm set)} -> $(grep -o 'gemm [^;]*' "$cli_tmp/v" | head -1)"
grep -q "^kernels: .*, gemm $gemm_lib " "$cli_tmp/v" || cli_bad "the GEMM is not $gemm_lib"
[ $gemm_lib = oneDNN ] || [ -n "$preset_gemm" ] || grep -q "oneDNN not used: " "$cli_tmp/v" ||
    cli_bad "no reason given for not using oneDNN"
if [ $gemm_lib = oneDNN ] && [ $native = avx512 ]; then
    cli_n=$((cli_n + 1))
    version BERTC_CPU_ISA=avx2
    echo "case $cli_n: BERTC_CPU_ISA=avx2 -> $(grep -o 'gemm [^;]*' "$cli_tmp/v" | head -1)"
    grep -q "gemm oneDNN [0-9.]* (avx2) sgemm" "$cli_tmp/v" || cli_bad "oneDNN was not capped at avx2"
fi
cli_n=$((cli_n + 1))
version BERTC_GEMM=openblas
echo "case $cli_n: BERTC_GEMM=openblas -> $(grep -o 'gemm [^;]*' "$cli_tmp/v" | head -1)"
grep -q "gemm OpenBLAS .*(BERTC_GEMM=openblas)" "$cli_tmp/v" || cli_bad "BERTC_GEMM=openblas not taken"
cli_n=$((cli_n + 1))
version -u BERTC_GEMM BERTC_ONEDNN_LIB=/nonexistent/libdnnl.so.2
echo "case $cli_n: auto, oneDNN not loadable -> $(grep -o 'gemm [^;]*' "$cli_tmp/v" | head -1)"
grep -q "gemm OpenBLAS .*(oneDNN not used: cannot load /nonexistent/libdnnl.so.2" "$cli_tmp/v" ||
    cli_bad "no fallback to OpenBLAS with the reason"
export BERTC_GEMM=bogus
expect 2 "BERTC_GEMM=bogus: not a GEMM library (auto, onednn or openblas)" -- version
export BERTC_GEMM=onednn BERTC_ONEDNN_LIB=/nonexistent/libdnnl.so.2
expect 2 "BERTC_GEMM=onednn: cannot load /nonexistent/libdnnl.so.2" -- bench --config tiny --seq 32 --batch 2 --steps 1
unset BERTC_GEMM BERTC_ONEDNN_LIB
[ -n "$preset_gemm" ] && export BERTC_GEMM=$preset_gemm

cli_n=$((cli_n + 1))
"$BERTC" bench --config tiny --seq 32 --batch 2 --steps 1 --warmup-steps 0 --threads 1 --json >"$cli_tmp/b.json" 2>/dev/null
echo "case $cli_n: bench --json: $(grep -o '"isa": "[^"]*", "gemm": "[^"]*"' "$cli_tmp/b.json")"
grep -q "\"isa\": \"$native\", \"gemm\": \"$gemm_lib" "$cli_tmp/b.json" || cli_bad "bench --json lacks isa/gemm"

cli_n=$((cli_n + 1))
"$BERTC" train --model tests/ref/train3/init --train tests/data/train_small.json --max-seq-length 64 --doc-stride 16 \
    --max-steps 1 --batch 2 --threads 1 --monitor-interval 0 --out "$cli_tmp/run" >"$cli_tmp/train.out" 2>&1
rc=$?
echo "case $cli_n: train -> exit $rc: $(grep 'kernels' "$cli_tmp/train.out"); info.csv: $(grep '^cpu_kernels' "$cli_tmp/run/info.csv")"
[ $rc -eq 0 ] || cli_bad "train exit $rc"
grep -q "^  kernels   isa $native" "$cli_tmp/train.out" || cli_bad "the start-up report lacks the kernels"
grep -q "^cpu_kernels,\"\?isa $native" "$cli_tmp/run/info.csv" || cli_bad "info.csv lacks cpu_kernels"
finish
