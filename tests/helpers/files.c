/* File helpers for tests (see helpers/files.h). */
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
