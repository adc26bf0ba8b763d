/* File helpers for tests: a fresh temporary folder, the one file of a name in a folder, and a
 * folder's removal with everything in it. */
#ifndef EMBER_TEST_FILES_H
#define EMBER_TEST_FILES_H

#include <stdbool.h>
#include <stddef.h>

/* Makes a new folder "/tmp/<prefix>XXXXXX" into buf (n bytes); false when it cannot. */
bool em_test_make_dir(char *buf, size_t n, const char *prefix);
/* The one file of dir whose name starts with prefix ("events.out.tfevents.") into path (n
 * bytes); false when there is none or more than one. */
bool em_test_only_file(const char *dir, const char *prefix, char *path, size_t n);
/* Removes dir and everything below it (symbolic links are removed, not followed). */
void em_test_remove_tree(const char *dir);

#endif
