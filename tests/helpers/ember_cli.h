/* Runs the `ember` command itself for the CLI suites (EMBER_BIN, set by the build). */
#ifndef EMBER_TEST_EMBER_CLI_H
#define EMBER_TEST_EMBER_CLI_H

#include <stddef.h>

/* `ember ARGS` through the shell, stdout and stderr together into out (n bytes, NUL-terminated,
 * cut short when longer); its exit status, or -1 (with a line on stderr) when it could not run. */
int em_test_ember(const char *args, char *out, size_t n);

#endif
