/* File helpers for tests (see helpers/files.h). */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ember.h"
#include "helpers/files.h"

bool em_test_make_dir(char *buf, size_t n, const char *prefix)
{
    snprintf(buf, n, "/tmp/%sXXXXXX", prefix);
    return mkdtemp(buf) != NULL;
}

bool em_test_only_file(const char *dir, const char *prefix, char *path, size_t n)
{
    DIR *d = opendir(dir);
    if (!d)
        return false;
    int found = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (!strncmp(e->d_name, prefix, strlen(prefix)) && found++ == 0)
            snprintf(path, n, "%s/%s", dir, e->d_name);
    closedir(d);
    return found == 1;
}

void em_test_remove_tree(const char *dir)
{
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char p[512];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat sb;
        if (lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode))
            em_test_remove_tree(p);
        else
            unlink(p);
    }
    if (d)
        closedir(d);
    rmdir(dir);
}

char em_test_dir[64];

void em_test_dir_init(void)
{
    cr_assert(em_test_make_dir(em_test_dir, sizeof em_test_dir, "ember_test_"));
    em_error_clear();
}

void em_test_dir_fini(void)
{
    em_test_remove_tree(em_test_dir);
}

const char *em_test_path(const char *name)
{
    static char buf[8][256];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", em_test_dir, name);
    return buf[k];
}
