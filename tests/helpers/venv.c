/* Finding and running the tests' Python virtualenv (see venv.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers/venv.h"

const char *em_test_venv_python(void)
{
    static char path[4096];
    const char *venv = getenv("EMBER_VENV");
    if (!venv)
        return NULL;
    snprintf(path, sizeof path, "%s/bin/python", venv);
    return access(path, X_OK) == 0 ? path : NULL;
}

bool em_test_venv_skip(void)
{
    if (em_test_venv_python() || getenv("CI"))
        return false;
    fprintf(stderr, "venv test skipped: no Python virtualenv at %s (run bash setup.sh)\n",
            getenv("EMBER_VENV") ? getenv("EMBER_VENV") : "$EMBER_VENV");
    return true;
}

int em_test_venv_run(const char *script, const char *args)
{
    const char *py = em_test_venv_python(), *src = getenv("EMBER_SOURCE_DIR");
    if (!py || !src) {
        fprintf(stderr, "em_test_venv_run: no venv python (EMBER_VENV) or EMBER_SOURCE_DIR\n");
        return -1;
    }
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' '%s/tests/python/%s' %s", py, src, script, args);
    fflush(stdout);
    int rc = system(cmd);
    return rc == -1 || !WIFEXITED(rc) ? -1 : WEXITSTATUS(rc);
}

char *em_test_venv_output(const char *script, const char *file)
{
    const char *py = em_test_venv_python(), *src = getenv("EMBER_SOURCE_DIR");
    if (!py || !src) {
        fprintf(stderr, "em_test_venv_output: no venv python (EMBER_VENV) or EMBER_SOURCE_DIR\n");
        return NULL;
    }
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' '%s/tests/python/%s' '%s' 2>&1", py, src, script, file);
    FILE *p = popen(cmd, "r");
    if (!p)
        return NULL;
    size_t len = 0, cap = 4096;
    char *out = malloc(cap);
    for (size_t got; out && (got = fread(out + len, 1, cap - len - 1, p)) > 0;) {
        len += got;
        if (len + 1 == cap) {
            char *grown = realloc(out, cap *= 2);
            if (!grown)
                free(out);
            out = grown;
        }
    }
    int rc = pclose(p);
    if (out)
        out[len] = '\0';
    if (out && WIFEXITED(rc) && WEXITSTATUS(rc) == 0)
        return out;
    fprintf(stderr, "%s %s failed (status %d):\n%s\n", script, file, rc, out ? out : "");
    free(out);
    return NULL;
}
