/* Running the `ember` command for the CLI suites (see ember_cli.h). */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "helpers/ember_cli.h"

int em_test_ember(const char *args, char *out, size_t n)
{
    const char *bin = getenv("EMBER_BIN");
    out[0] = '\0';
    if (!bin) {
        fprintf(stderr, "em_test_ember: EMBER_BIN is not set\n");
        return -1;
    }
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s %s 2>&1", bin, args);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    size_t got = fread(out, 1, n - 1, p);
    out[got] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}
