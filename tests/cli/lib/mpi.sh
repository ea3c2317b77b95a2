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
