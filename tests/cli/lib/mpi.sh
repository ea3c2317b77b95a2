# Helpers for the data-parallel cases (sourced after lib/cli.sh).
#   mpi_require: exits 0 with a SKIP line when mpirun or an MPI build is absent.
#   mpi_run NP CMD...: mpirun -np NP, oversubscribed, as root where needed
#     (MPI_TIMEOUT=SECONDS: ended by timeout after that long, exit 124).
#   mpi_rank_test NAME CHECK: a test program of src/comm under -np 2 and -np 3.
mpi_require() {
    if ! command -v mpirun >/dev/null 2>&1; then
        echo "SKIP: no mpirun (scripts/deps.sh installs openmpi-bin)"
        exit 0
    fi
    if ! "$BERTC" version | grep -q "^mpi: built in"; then
        echo "SKIP: this bertc was built without MPI ($("$BERTC" version | grep '^mpi'))"
        exit 0
    fi
}
mpi_run() {
    local np=$1
    shift
    local root=() to=()
    [ "$(id -u)" -eq 0 ] && root=(--allow-run-as-root)
    [ -n "${MPI_TIMEOUT:-}" ] && to=(timeout "$MPI_TIMEOUT")
    # Under ASan, LeakSanitizer reports OpenMPI's own allocations (its
    # components are dlopen'ed and unloaded, so they cannot be suppressed by
    # name): leak checks stay on for the one-process runs only.
    if [ "${BERTC_SANITIZED:-0}" = 1 ]; then
        ASAN_OPTIONS=detect_leaks=0 OMPI_MCA_btl_vader_single_copy_mechanism=none \
            "${to[@]}" mpirun --oversubscribe "${root[@]}" --bind-to none -x ASAN_OPTIONS -np "$np" "$@"
        return
    fi
    # Shared memory between ranks without ptrace-based single copy (denied in containers).
    OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1 \
        "${to[@]}" mpirun --oversubscribe "${root[@]}" --bind-to none -np "$np" "$@"
}

# mpi_rank_test NAME CHECK: $BERTC_BUILD/NAME (a test program of src/comm; SKIP when not built) as
# one case under mpirun -np 2 and one under -np 3, its output in $cli_tmp/out and shown but for the
# ranks' "passed, 0 failed" lines; bad where it exits non-zero or a rank's summary is not "0 failed".
# CHECK NP then checks what the program must have said.
mpi_rank_test() {
    local prog="$BERTC_BUILD/$1" check=$2 np rc
    [ -x "$prog" ] || { echo "SKIP: $prog not built"; exit 0; }
    for np in 2 3; do
        cli_n=$((cli_n + 1))
        mpi_run "$np" "$prog" >"$cli_tmp/out" 2>&1
        rc=$?
        echo "case $cli_n: mpirun -np $np $1 -> exit $rc"
        sed 's/^/  /' "$cli_tmp/out" | grep -v "passed, 0 failed" | head -40
        [ "$rc" -eq 0 ] || cli_bad "exit $rc${MPI_TIMEOUT:+ (124: hung)}"
        [ "$(grep -c " 0 failed" "$cli_tmp/out")" -eq "$np" ] || cli_bad "not every rank passed"
        "$check" "$np"
    done
}

# train1 RUN ARGS...: bertc train in one process with the caller's COMMON
# arguments, the output in RUN.log; prints the command and its exit code.
train1() {
    local run=$1
    shift
    "$BERTC" train "${COMMON[@]}" --out "$run" "$@" >"$run.log" 2>&1
    local rc=$?
    echo "  bertc train --out $(basename "$run") $* -> exit $rc"
    return $rc
}

# trainN NP RUN ARGS...: the same under mpirun -np NP.
trainN() {
    local np=$1 run=$2
    shift 2
    mpi_run "$np" "$BERTC" train "${COMMON[@]}" --out "$run" "$@" >"$run.log" 2>&1
    local rc=$?
    echo "  mpirun -np $np bertc train --out $(basename "$run") $* -> exit $rc"
    return $rc
}

# evals_equal ONE RUN WHAT: RUN's two evaluations (eval.csv) and
# predictions.json are ONE's byte for byte (WHAT names RUN's layout).
evals_equal() {
    cli_n=$((cli_n + 1))
    echo "case $cli_n: eval.csv 1 process: $(tail -n +2 "$1/eval.csv" | tr '\n' ' '); $3: $(tail -n +2 "$2/eval.csv" | tr '\n' ' ')"
    [ "$(wc -l <"$2/eval.csv")" -eq 3 ] || cli_bad "$3: not 2 evaluations"
    cmp -s "$1/eval.csv" "$2/eval.csv" || cli_bad "EM/F1 differ"
    cmp -s "$1/predictions.json" "$2/predictions.json" || cli_bad "predictions.json differ"
}

# killed_checks RC RUN STOPPED: the case of a 2-rank job into RUN whose rank 1 killed itself after
# step 23 (BERTC_DEBUG_KILL), exit RC: it failed, said why, rank 0 said STOPPED, no final model.
killed_checks() {
    local rc=$1 K=$2
    echo "case $cli_n: killed run -> exit $rc; checkpoints: $(ls "$K/checkpoints" | tr '\n' ' ')"
    [ "$rc" -ne 0 ] || cli_bad "the job did not fail"
    grep -aq "killing myself at step 23" "$K.log" || cli_bad "no kill message"
    grep -aq "$3" "$K.log" || cli_bad "rank 0 did not say it was stopped: $(tail -5 "$K.log")"
    [ -e "$K/final" ] && cli_bad "a final model after the kill"
    return 0
}

# mpi_bad NP MESSAGE -- CMD...: refused under mpirun -np NP with exit 2 and
# NP lines on stderr, each "bertc: ...MESSAGE...", stdout empty, $T/bad
# (the run dir the callers give) not made.
mpi_bad() {
    local np=$1 msg=$2
    shift 3
    cli_n=$((cli_n + 1))
    mpi_run "$np" "$@" >"$T/bad.out" 2>"$T/bad.err"
    local rc=$?
    echo "case $cli_n: -np $np ... -> exit $rc: $(grep "^bertc: " "$T/bad.err" | head -1)"
    [ "$rc" -eq 2 ] || cli_bad "exit $rc, want 2"
    [ "$(grep -c "^bertc: .*$msg" "$T/bad.err")" -eq "$np" ] || cli_bad "not $np lines with '$msg': $(cat "$T/bad.err")"
    [ -s "$T/bad.out" ] && cli_bad "stdout not empty: $(head -3 "$T/bad.out")"
    [ -e "$T/bad" ] && cli_bad "the run dir was made"
    return 0
}

# dist_train_setup: what the data-parallel training cases share: mpirun
# (or a skip), test_dist's weight comparison (CMP), the tolerances and the
# small run every case trains (COMMON), T for the runs' dirs.
dist_train_setup() {
    mpi_require
    CMP="$BERTC_BUILD/test_dist"
    [ -x "$CMP" ] || { echo "SKIP: $CMP not built"; exit 0; }
    # Parameters whose exact gradient is zero (a key bias shifts every score of
    # a softmax row alike; so does qa_outputs.bias and, through qa_outputs, the
    # last LayerNorm's bias): their gradients are pure rounding, which AdamW
    # scales up to full steps, so they differ with any other summation order.
    ZERO_GRAD=attention.self.key.bias,qa_outputs.bias,layer.1.output.LayerNorm.bias
    # The other weights: 2 ranks add the 4 micro-batches' gradients as (g1+g2)+(g3+g4),
    # 1 process accumulates them into one buffer in order, so each gradient
    # rounds differently (about 1e-7 relative, more where its terms cancel), and
    # AdamW's division by sqrt(v) carries that into every step's update. After 50
    # steps the worst tensor was 4e-7 of its largest value with OpenBLAS's
    # SkylakeX kernels and 1.5e-6 with its Zen kernels (a small value bias): the
    # size of the difference depends on the kernel's rounding, not on a bug, which
    # would show as 1e-3 or more.
    WEIGHT_TOL=1e-5
    COMMON=(--model tests/ref/train3/init --train tests/data/train_small.json --max-seq-length 64 --doc-stride 16
            --micro-batch 2 --max-steps 50 --lr 1e-3 --save-every 10 --save-every-minutes 0 --monitor-interval 0
            --log-every 1000 --threads 1)
    T=$cli_tmp
}
