# Point-to-point messages of src/dist (the pipeline's transport) under
# `mpirun -np 2` and `-np 3` (tests/dist/test_p2p.c).
source "$(dirname "$0")/lib/cli.sh"
source "$(dirname "$0")/lib/mpi.sh"
mpi_require
prog="$BERTC_BUILD/test_p2p"
[ -x "$prog" ] || { echo "SKIP: $prog not built"; exit 0; }
for np in 2 3; do
    cli_n=$((cli_n + 1))
    MPI_TIMEOUT=120 mpi_run "$np" "$prog" >"$cli_tmp/out" 2>&1
    rc=$?
    echo "case $cli_n: mpirun -np $np test_p2p -> exit $rc"
    sed 's/^/  /' "$cli_tmp/out" | grep -v "passed, 0 failed" | head -40
    [ "$rc" -eq 0 ] || cli_bad "exit $rc (124: hung)"
    [ "$(grep -c " 0 failed" "$cli_tmp/out")" -eq "$np" ] || cli_bad "not every rank passed"
    grep -q "rank 1, a message of the wrong size: .*from rank 0 (tag 99) longer than the 16 bytes expected" "$cli_tmp/out" ||
        cli_bad "the wrong size is not named"
done
finish
