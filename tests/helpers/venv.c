/* Finding and running the tests' Python virtualenv (see venv.h). */
#include <stdio.h>
#include <stdlib.h>
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
