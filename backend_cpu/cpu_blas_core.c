/* Which of OpenBLAS's kernel sets ember's matrix products run on. A DYNAMIC_ARCH OpenBLAS picks
 * its kernels by CPU model as it loads, and a CPU newer than the library falls back to Prescott's
 * SSE3 kernels: on a 2-core Xeon (family 6 model 207) with OpenBLAS 0.3.21, sgemm ran at 38
 * GFLOP/s instead of 300. When that happened, the backend's discovery runs OpenBLAS's own
 * initialisation again with OPENBLAS_CORETYPE naming the kernel set the CPU's instructions allow,
 * the variable OpenBLAS documents for choosing it by hand. A user's OPENBLAS_CORETYPE always wins,
 * and an OpenBLAS built for one CPU (without these entry points) is left as it is. It also says
 * whether the chosen set has OpenBLAS's unpacked small-matrix sgemm kernels (cpu_gemm.c cuts
 * products into blocks they take). */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "backend_cpu/cpu_features_internal.h"
#include "backend_cpu/cpu_kernels_internal.h"

/* OpenBLAS's DYNAMIC_ARCH entry points; weak, so a single-CPU build links without them */
extern void gotoblas_dynamic_init(void) __attribute__((weak));
extern void gotoblas_dynamic_quit(void) __attribute__((weak));
extern char gotoblas_SKYLAKEX[] __attribute__((weak)); /* present when the set is compiled in */
extern char gotoblas_HASWELL[] __attribute__((weak));
extern char *openblas_get_corename(void);
extern char *openblas_get_config(void);

static char chosen_from[32]; /* the core OpenBLAS took the CPU for, when ember chose another */

/* kernel sets written for AVX2 or wider: OpenBLAS recognised the CPU's vector units */
static bool is_wide_core(const char *core)
{
    static const char *const wide[] = {"Haswell", "Zen", "SkylakeX", "Cooperlake",
                                       "SapphireRapids", "Excavator"};
    for (size_t i = 0; i < sizeof wide / sizeof *wide; i++)
        if (strcasecmp(core, wide[i]) == 0)
            return true;
    return false;
}

/* the widest of OpenBLAS's sets this CPU and this OpenBLAS both have; NULL when none */
static const char *widest_core(void)
{
    if (gotoblas_SKYLAKEX && em_cpu_has_avx512())
        return "SkylakeX";
    if (gotoblas_HASWELL && em_cpu_has_avx2())
        return "Haswell";
    return NULL;
}

void em_cpu_blas_choose_core(void)
{
    if (!gotoblas_dynamic_init || !gotoblas_dynamic_quit || getenv("OPENBLAS_CORETYPE"))
        return;
    const char *now = openblas_get_corename(), *want = widest_core();
    if (!now || !want || is_wide_core(now))
        return;
    snprintf(chosen_from, sizeof chosen_from, "%s", now);
    setenv("OPENBLAS_CORETYPE", want, 1);
    gotoblas_dynamic_quit();
    gotoblas_dynamic_init(); /* an unknown name would fall back to Prescott, never fail */
    unsetenv("OPENBLAS_CORETYPE"); /* programs ember starts see the user's environment */
}

/* Whether this OpenBLAS is 0.3.17 or newer (its config string starts "OpenBLAS 0.3.21 ..."). */
static bool has_small_matrix_path(void)
{
    static atomic_int known = -1;
    int v = atomic_load_explicit(&known, memory_order_relaxed);
    if (v < 0) {
        int major = 0, minor = 0, patch = 0;
        const char *config = openblas_get_config();
        v = config && sscanf(config, "OpenBLAS %d.%d.%d", &major, &minor, &patch) == 3 &&
            major * 10000 + minor * 100 + patch >= 317;
        const char *env = getenv("EMBER_SMALL_GEMM");
        v = v && !(env && env[0] == '0');
        atomic_store_explicit(&known, v, memory_order_relaxed);
    }
    return v;
}

bool em_cpu_blas_small_kernels(void)
{
    static const char *const with_small[] = {"SkylakeX", "Cooperlake", "SapphireRapids"};
    const char *core = openblas_get_corename();
    if (!core || !has_small_matrix_path())
        return false;
    for (size_t i = 0; i < sizeof with_small / sizeof *with_small; i++)
        if (strcasecmp(core, with_small[i]) == 0)
            return true;
    return false;
}

void em_cpu_blas_describe(char *buf, size_t n)
{
    const char *core = openblas_get_corename();
    char chosen[96] = "";
    if (chosen_from[0])
        snprintf(chosen, sizeof chosen, " (chosen by ember: OpenBLAS took this CPU for %s)",
                 chosen_from);
    snprintf(buf, n, "OpenBLAS %s kernels%s%s", core ? core : "unknown", chosen,
             em_cpu_blas_small_kernels() ? ", small products unpacked (EMBER_SMALL_GEMM=0: off)"
                                         : "");
}
