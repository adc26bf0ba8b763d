/* `ember info`: what this build of ember can use on this machine. */
#include <omp.h>
#include <stdio.h>

#include "backend_cpu/cpu_features_internal.h"
#include "backend_cpu/cpu_kernels_internal.h"
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
    printf("thread governor: %s\n",
           em_cpu_threads_adaptive()
               ? "on (fewer threads while other processes hold the cores; "
                 "EMBER_ADAPTIVE_THREADS=0 turns it off)"
               : "off (EMBER_ADAPTIVE_THREADS=0)");
    printf("OpenMP wait policy: %s\n", cli_wait_policy());
    const struct {
        const char *name;
        bool (*has)(void);
    } features[] = {{"AVX2+FMA", em_cpu_has_avx2},
                    {"AVX-512", em_cpu_has_avx512},
                    {"AVX-512 VNNI", em_cpu_has_avx512_vnni},
                    {"F16C", em_cpu_has_f16c},
                    {"AVX512_BF16", em_cpu_has_avx512_bf16},
                    {"AMX-BF16", em_cpu_has_amx_bf16},
                    {"AMX-INT8", em_cpu_has_amx_int8}};
    printf("CPU features:");
    for (size_t i = 0; i < sizeof features / sizeof features[0]; i++)
        printf("%s %s %s", i ? "," : "", features[i].name, features[i].has() ? "yes" : "no");
    printf("\n");
    char products[640];
    em_cpu_products_describe(products, sizeof products);
    printf("products on the cpu (engine, ISA):\n%s\n", products);
    for (int d = 0; d < EM_NDEVICES; d++) {
        char about[256];
        printf("device %-5s %s\n", em_device_name((em_device)d),
               em_device_describe((em_device)d, about, sizeof about));
    }
    printf("dtypes:");
    for (int t = 0; t < EM_NDTYPES; t++)
        printf(" %s", em_dtype_name((em_dtype)t));
    printf("\n");
    return 0;
}
