/* File helpers for tests: a fresh temporary folder (and one per test of a suite), the one file
 * of a name in a folder, and a folder's removal with everything in it. */
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

/* A fresh folder for each test of a suite: .init = em_test_dir_init makes em_test_dir
 * ("/tmp/ember_test_XXXXXX") and clears the error, .fini = em_test_dir_fini removes it. */
extern char em_test_dir[64];
void em_test_dir_init(void);
void em_test_dir_fini(void);
/* "em_test_dir/name", in one of 8 buffers the following calls take in turn. */
const char *em_test_path(const char *name);

#endif
