/* bertc version: prints the version and the build's features. */
#include "backend/cpu_kernels.h"
#include "backend/cuda_module.h"
#include "core/args.h"
#include "core/err.h"

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
    printf("answers on the cpu: fp32 (batch-invariant GEMM)");
    const struct {
        precision_kind p;
        cpu_kernel_family f;
        const char *name;
    } low[] = {{PREC_BF16, CPU_K_GEMM_BF16, "bf16"}, {PREC_INT8, CPU_K_GEMM_INT8, "int8"}};
    for (int i = 0; i < 2; i++) {
        char kern[64], why[256];
        if (backend_answer_check(low[i].p, kern, sizeof kern) == 0) {
            printf("; %s (%s kernel)", low[i].name, kern);
            continue;
        }
        err_clear(); /* its message, in the words of a refusal; here only the reason */
        cpu_kernel_fast(low[i].f, why, sizeof why);
        printf("; no %s (%s)", low[i].name, why);
    }
    printf("\n");
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
