# Point-to-point messages of src/comm (the pipeline's transport) under
# `mpirun -np 2` and `-np 3` (tests/comm/test_p2p.c).
source "$(dirname "$0")/lib/cli.sh"
source "$(dirname "$0")/lib/mpi.sh"
mpi_require
wrong_size_named() {
    grep -q "rank 1, a message of the wrong size: .*from rank 0 (tag 99) longer than the 16 bytes expected" "$cli_tmp/out" ||
        cli_bad "the wrong size is not named"
}
MPI_TIMEOUT=120 mpi_rank_test test_p2p wrong_size_named
finish
