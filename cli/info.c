/* `ember info`: what this build of ember can use on this machine. */
#include <omp.h>
#include <stdio.h>

#include "ember.h"
#include "cmd/args.h"
#include "cli/cli_internal.h"

int cli_cmd_info(int argc, char **argv)
{
    const cmd_spec spec = {.command = "ember info",
                              .about = "Devices, dtypes and threads of this build."};
    int parsed = cmd_args_parse(&spec, argc, argv);
    if (parsed != CMD_ARGS_RUN)
        return parsed;
    printf("ember threads: %d (OMP_NUM_THREADS)\n", omp_get_max_threads());
    printf("OpenMP wait policy: %s\n", cli_wait_policy());
    char about[2048];
    printf("%s\n", em_device_details(EM_CPU, about, sizeof about));
    for (int d = 0; d < EM_NDEVICES; d++)
        printf("device %-5s %s\n", em_device_name((em_device)d),
               em_device_describe((em_device)d, about, sizeof about));
    printf("dtypes:");
    for (int t = 0; t < EM_NDTYPES; t++)
        printf(" %s", em_dtype_name((em_dtype)t));
    printf("\n");
    return 0;
}
