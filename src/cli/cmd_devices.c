/* bertc devices: the GPUs (through NVML, when a driver is there), the CPU,
 * and what bertc will train on. Exit 0 with or without a GPU. */
#include "core/args.h"
#include "obs/devices.h"

#include <stdio.h>

const char cmd_devices_summary[] = "list GPUs and the CPU, and what bertc will use";

int cmd_devices(int argc, char **argv)
{
    const arg_spec specs[] = {{0}};
    int rc = args_parse("devices", "bertc devices\n\n"
                        "NVML is loaded from libnvidia-ml.so.1 at run time, or from the file named by the\n"
                        "environment variable BERTC_NVML_LIB.", specs, argc, argv, NULL, NULL);
    if (rc == ARGS_HELP) return 0;
    if (rc) return rc;
    devices_print(stdout);
    return 0;
}
