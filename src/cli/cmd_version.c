/* bertc version: prints the version and the build's features. */
#include "core/args.h"

#include <cblas.h>
#include <stdio.h>

const char cmd_version_summary[] = "print the version and what this build supports";

int cmd_version(int argc, char **argv)
{
    const arg_spec specs[] = {{0}};
    int rc = args_parse("version", "bertc version", specs, argc, argv, NULL, NULL);
    if (rc == ARGS_HELP) return 0;
    if (rc) return rc;
    printf("bertc %s\n", BERTC_VERSION);
    printf("blas: OpenBLAS (%s, core %s)\n", openblas_get_config(), openblas_get_corename());
#ifdef BERTC_HAVE_CUDA
    printf("cuda: built in\n");
#else
    printf("cuda: not built\n");
#endif
#ifdef BERTC_HAVE_MPI
    printf("mpi: built in (data-parallel training under mpirun/srun)\n");
#else
    printf("mpi: not built\n");
#endif
    return 0;
}
