/* Which of OpenBLAS's kernel sets ember's matrix products run on. A DYNAMIC_ARCH OpenBLAS picks
 * its kernels by CPU model as it loads, and a CPU newer than the library falls back to Prescott's
 * SSE3 kernels: on a 2-core Xeon (family 6 model 207) with OpenBLAS 0.3.21, sgemm ran at 38
 * GFLOP/s instead of 300. When that happened, the backend's discovery runs OpenBLAS's own
 * initialisation again with OPENBLAS_CORETYPE naming the kernel set the CPU's instructions allow,
 * the variable OpenBLAS documents for choosing it by hand. A user's OPENBLAS_CORETYPE always wins,
 * and an OpenBLAS built for one CPU (without these entry points) is left as it is. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "backend_cpu/cpu_kernels_internal.h"

/* OpenBLAS's DYNAMIC_ARCH entry points; weak, so a single-CPU build links without them */
extern void gotoblas_dynamic_init(void) __attribute__((weak));
extern void gotoblas_dynamic_quit(void) __attribute__((weak));
extern char gotoblas_SKYLAKEX[] __attribute__((weak)); /* present when the set is compiled in */
extern char gotoblas_HASWELL[] __attribute__((weak));
extern char *openblas_get_corename(void);

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

void em_cpu_blas_describe(char *buf, size_t n)
{
    const char *core = openblas_get_corename();
    if (chosen_from[0])
        snprintf(buf, n, "OpenBLAS %s kernels (chosen by ember: OpenBLAS took this CPU for %s)",
                 core, chosen_from);
    else
        snprintf(buf, n, "OpenBLAS %s kernels", core ? core : "unknown");
}
