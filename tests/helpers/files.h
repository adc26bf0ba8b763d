/* File helpers for tests: a fresh temporary folder and its removal with everything in it. */
#ifndef EMBER_TEST_FILES_H
#define EMBER_TEST_FILES_H

#include <stdbool.h>
#include <stddef.h>

/* Makes a new folder "/tmp/<prefix>XXXXXX" into buf (n bytes); false when it cannot. */
bool em_test_make_dir(char *buf, size_t n, const char *prefix);
/* Removes dir and everything below it (symbolic links are removed, not followed). */
void em_test_remove_tree(const char *dir);

#endif
