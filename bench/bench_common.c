/* What the benchmarks share: a monotonic clock, sorting timings, and running a PyTorch script
 * beside ember (skipped with a clear line where torch is absent). */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ember.h"
#include "bench/bench.h"

double bench_now_s(void)
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

void bench_sort_doubles(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
}

/* The Python that runs the PyTorch half: $EMBER_PYTHON, else Debian's (python3-torch). */
static const char *torch_python(void)
{
    const char *py = getenv("EMBER_PYTHON");
    return py && *py ? py : "/usr/bin/python3";
}

/* The Python that runs the onnxruntime half: $EMBER_ORT_PYTHON, else the test venv setup.sh
 * makes. */
static const char *ort_python(void)
{
    const char *py = getenv("EMBER_ORT_PYTHON");
    return py && *py ? py : EMBER_SOURCE_DIR "/build/venv/bin/python";
}

/* Runs python bench/<script> <args>, each line of its output to on_line; false (after printing
 * why) when python cannot import module or the script failed. */
static bool run_script(const char *half, const char *python, const char *module,
                       const char *install, const char *script, const char *args,
                       bench_line_fn on_line, void *ctx)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s -c 'import %s' >/dev/null 2>&1", python, module);
    if (system(cmd) != 0) {
        printf("%s half skipped: %s cannot import %s (%s)\n", half, python, module, install);
        return false;
    }
    /* PyTorch's matrix products go through the same OpenBLAS when it is Debian's: run them on the
     * kernel set ember's CPU backend runs on (which it may have chosen over OpenBLAS's own pick
     * at discovery) */
    em_device_available(EM_CPU);
    snprintf(cmd, sizeof cmd, "OPENBLAS_CORETYPE=%s %s %s/bench/%s %s", openblas_get_corename(),
             python, EMBER_SOURCE_DIR, script, args);
    FILE *p = popen(cmd, "r");
    if (!p)
        return false;
    char line[512];
    while (fgets(line, sizeof line, p))
        on_line(ctx, line);
    return pclose(p) == 0;
}

bool bench_run_torch_script(const char *script, const char *args, bench_line_fn on_line,
                         void *ctx)
{
    return run_script("PyTorch", torch_python(), "torch",
                      "make the benchmark venv with scripts/bench_venv.sh and set EMBER_PYTHON, "
                      "or apt-get install python3-torch", script, args, on_line, ctx);
}

bool bench_run_ort_script(const char *script, const char *args, bench_line_fn on_line,
                       void *ctx)
{
    return run_script("onnxruntime", ort_python(), "onnxruntime",
                      "run setup.sh, which makes the test venv, or set EMBER_ORT_PYTHON", script,
                      args, on_line, ctx);
}

static void about_line(void *ctx, const char *line)
{
    snprintf(ctx, 256, "%.*s", (int)strcspn(line, "\n"), line);
}

const char *bench_torch_about(void)
{
    static char about[256];
    static bool asked;
    if (!asked && !bench_run_torch_script("torch_about.py", "", about_line, about))
        about[0] = '\0';
    asked = true;
    return about;
}
