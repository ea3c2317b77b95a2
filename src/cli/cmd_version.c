/* bertc version: prints the version and the build's features. */
#include "backend/cuda_module.h"
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
    /* Loads the CUDA module only where a driver is present: on a CPU
     * machine this stays a cheap look for the file. */
    char mod[1024];
    printf("cuda: module %s\n", cuda_module_describe(mod, sizeof mod, 0));
#ifdef BERTC_HAVE_MPI
    printf("mpi: built in (data-parallel training under mpirun/srun)\n");
#else
    printf("mpi: not built\n");
#endif
    return 0;
}
