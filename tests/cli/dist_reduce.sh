# The fixed-order all-reduce of src/comm under `mpirun -np 2` and `-np 3`
# (tests/comm/test_dist.c, run oversubscribed on however many cores there are).
source "$(dirname "$0")/lib/cli.sh"
source "$(dirname "$0")/lib/mpi.sh"
mpi_require
# every rank, the failing one too, ends with the same line naming the rank
failing_rank_named() {
    local np=$1
    [ "$(grep -c "agreed: rank $((np - 1)) of $np: boom at rank $((np - 1))$" "$cli_tmp/out")" -eq "$np" ] ||
        cli_bad "the failing rank's message, naming it, did not reach every rank"
}
mpi_rank_test test_dist failing_rank_named
finish
