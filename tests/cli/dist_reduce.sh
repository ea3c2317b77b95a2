# The fixed-order all-reduce of src/dist under `mpirun -np 2` and `-np 3`
# (tests/dist/test_dist.c, run oversubscribed on however many cores there are).
source "$(dirname "$0")/lib/cli.sh"
source "$(dirname "$0")/lib/mpi.sh"
mpi_require
prog="$BERTC_BUILD/test_dist"
[ -x "$prog" ] || { echo "SKIP: $prog not built"; exit 0; }
for np in 2 3; do
    cli_n=$((cli_n + 1))
    mpi_run "$np" "$prog" >"$cli_tmp/out" 2>&1
    rc=$?
    echo "case $cli_n: mpirun -np $np test_dist -> exit $rc"
    sed 's/^/  /' "$cli_tmp/out" | grep -v "passed, 0 failed" | head -40
    [ "$rc" -eq 0 ] || cli_bad "exit $rc"
    [ "$(grep -c "0 failed" "$cli_tmp/out")" -eq "$np" ] || cli_bad "not every rank passed"
    # every rank, the failing one too, ends with the same line naming the rank
    [ "$(grep -c "agreed: rank $((np - 1)) of $np: boom at rank $((np - 1))$" "$cli_tmp/out")" -eq "$np" ] ||
        cli_bad "the failing rank's message, naming it, did not reach every rank"
done
finish
