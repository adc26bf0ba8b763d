/* The tests' Python tools (onnx, onnxruntime, ...) live in the virtualenv that setup.sh makes
 * (build/venv); these helpers find it and run a script of tests/python/ with it. */
#ifndef EMBER_TEST_VENV_H
#define EMBER_TEST_VENV_H

#include <stdbool.h>

/* The venv's python, or NULL when setup.sh has not made it (EMBER_VENV names the venv). */
const char *em_test_venv_python(void);
/* True when a test should skip for want of the venv: it is absent and CI is unset (on CI a
 * missing venv is a failure). Prints one line saying so. */
bool em_test_venv_skip(void);
/* Runs "python tests/python/<script> <args>" and returns its exit status (-1 when it could not
 * run); its output goes to this process's stdout/stderr. */
int em_test_venv_run(const char *script, const char *args);
/* stdout and stderr of "python tests/python/<script> '<file>'" (malloc'd, NUL-terminated) when
 * it exits 0; NULL after printing why on stderr (no venv, or the script's status and output). */
char *em_test_venv_output(const char *script, const char *file);

#endif
