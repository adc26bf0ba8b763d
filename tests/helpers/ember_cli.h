/* Runs the `ember` command itself for the CLI suites (EMBER_BIN, set by the build). */
#ifndef EMBER_TEST_EMBER_CLI_H
#define EMBER_TEST_EMBER_CLI_H

#include <stdbool.h>
#include <stddef.h>

/* `ember ARGS` through the shell, stdout and stderr together into out (n bytes, NUL-terminated,
 * cut short when longer); its exit status, or -1 (with a line on stderr) when it could not run. */
int em_test_ember(const char *args, char *out, size_t n);

/* A Fashion-MNIST of noise in dir: 96 training and 32 test images, pixel i of image k
 * (i * 37 + k * 11) & 255, labels k % 10 (raw IDX under the .gz names: zlib reads both). */
bool em_test_write_fashion_noise(const char *dir);
/* Two "fortune files" of made-up sentences in dir, cookie and wisdom, and a .dat index the
 * gpt recipe's corpus skips: 14 characters, "the cat sat on a mat." and '%' lines. */
bool em_test_write_fortunes(const char *dir);

#endif
