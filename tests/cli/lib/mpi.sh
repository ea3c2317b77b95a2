# Helpers for the data-parallel cases (sourced after lib/cli.sh).
#   mpi_require: exits 0 with a SKIP line when mpirun or an MPI build is absent.
#   mpi_run NP CMD...: mpirun -np NP, oversubscribed, as root where needed.
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
    local root=()
    [ "$(id -u)" -eq 0 ] && root=(--allow-run-as-root)
    # Under ASan, LeakSanitizer reports OpenMPI's own allocations (its
    # components are dlopen'ed and unloaded, so they cannot be suppressed by
    # name): leak checks stay on for the one-process runs only.
    if [ "${BERTC_SANITIZED:-0}" = 1 ]; then
        ASAN_OPTIONS=detect_leaks=0 OMPI_MCA_btl_vader_single_copy_mechanism=none \
            mpirun --oversubscribe "${root[@]}" --bind-to none -x ASAN_OPTIONS -np "$np" "$@"
        return
    fi
    # Shared memory between ranks without ptrace-based single copy (denied in containers).
    OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1 \
        mpirun --oversubscribe "${root[@]}" --bind-to none -np "$np" "$@"
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
