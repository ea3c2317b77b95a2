/* bertc version: prints the version and the build's features. */
#include "backend/cpu_kernels.h"
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
    const cpu_kernels_state *k = cpu_kernels();
    char line[512];
    printf("cpu: %s family %d model %d, level %s (%s)\n", k->cpu.vendor, k->cpu.family, k->cpu.model,
           cpu_isa_name(k->cpu.level), cpu_isa_needs(k->cpu.level));
    printf("kernels: %s\n", cpu_kernels_describe(line, sizeof line));
    char families[4096];
    fputs(cpu_kernels_lines(families, sizeof families), stdout);
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
