/* What the benchmarks share: a monotonic clock, sorting timings, and running a PyTorch script
 * beside ember (skipped with a clear line where torch is absent). */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "ember.h"
#include "cli/cli_internal.h"

double em_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void em_sort_doubles(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
}

/* The Python that runs the PyTorch half: $EMBER_PYTHON, else Debian's (python3-torch). */
static const char *torch_python(void)
{
    const char *py = getenv("EMBER_PYTHON");
    return py && *py ? py : "/usr/bin/python3";
}

bool em_run_torch_script(const char *script, const char *args, em_torch_line_fn on_line,
                         void *ctx)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s -c 'import torch' >/dev/null 2>&1", torch_python());
    if (system(cmd) != 0) {
        printf("PyTorch half skipped: %s cannot import torch (apt-get install python3-torch, or "
               "set EMBER_PYTHON)\n", torch_python());
        return false;
    }
    /* PyTorch's matrix products go through the same OpenBLAS: run them on the kernel set ember's
     * CPU backend runs on (which it may have chosen over OpenBLAS's own pick at discovery) */
    em_device_available(EM_CPU);
    snprintf(cmd, sizeof cmd, "OPENBLAS_CORETYPE=%s %s %s/bench/%s %s", openblas_get_corename(),
             torch_python(), EMBER_SOURCE_DIR, script, args);
    FILE *p = popen(cmd, "r");
    if (!p)
        return false;
    char line[512];
    while (fgets(line, sizeof line, p))
        on_line(ctx, line);
    return pclose(p) == 0;
}
