/* Atomic file replacement through an unnamed temporary in the target's directory, a lock that
 * marks a live writer's temporary, fsync, link and rename(2) (see io/atomic_file.h). */
#define _GNU_SOURCE /* O_TMPFILE */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/atomic_file.h"

struct em_atomic_file {
    FILE *f;      /* the new contents go here until commit */
    char *path;   /* the target */
    char *tmp;    /* the temporary's name beside it */
    bool unnamed; /* the temporary has no name until commit links it */
};

static void release(em_atomic_file *af)
{
    free(af->path);
    free(af->tmp);
    free(af);
}

/* The directory holding path, and its last component; both new strings (free them). */
static bool split_path(const char *path, char **dir, char **base)
{
    char *d = strdup(path), *b = strdup(path);
    *dir = d ? strdup(dirname(d)) : NULL;
    *base = b ? strdup(basename(b)) : NULL;
    free(d);
    free(b);
    if (*dir && *base)
        return true;
    free(*dir);
    free(*base);
    return false;
}

/* "<base>.tmp.<digits>": a temporary some writer of base made. */
static bool is_temporary_of(const char *name, const char *base)
{
    size_t n = strlen(base);
    if (strncmp(name, base, n) != 0 || strncmp(name + n, ".tmp.", 5) != 0 || !name[n + 5])
        return false;
    return strspn(name + n + 5, "0123456789") == strlen(name + n + 5);
}

/* Removes the temporaries of base in dir whose writers are gone: a live writer holds a lock on
 * its temporary until the temporary is renamed or removed. */
static void remove_dead_temporaries(const char *dir, const char *base)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    for (struct dirent *e; (e = readdir(d));) {
        if (!is_temporary_of(e->d_name, base))
            continue;
        int fd = openat(dirfd(d), e->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        struct stat sb;
        if (fd >= 0 && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) &&
            flock(fd, LOCK_EX | LOCK_NB) == 0)
            unlinkat(dirfd(d), e->d_name, 0);
        if (fd >= 0)
            close(fd);
    }
    closedir(d);
}

/* A new locked file for af: unnamed in dir where the filesystem allows, else named af->tmp. */
static int create_temporary(em_atomic_file *af, const char *dir)
{
    int fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
    af->unnamed = fd >= 0;
    if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL))
        fd = open(af->tmp, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0666);
    if (fd >= 0 && flock(fd, LOCK_EX) != 0) {
        int saved = errno;
        close(fd);
        if (!af->unnamed)
            unlink(af->tmp);
        errno = saved;
        return -1;
    }
    return fd;
}

/* A new writer of path into *out (NULL on failure, with the error's status returned). */
static em_status open_temporary(const char *path, em_atomic_file **out)
{
    *out = NULL;
    if (!path || !*path)
        return em_set_error(EM_ERR_ARG, "em_atomic_file_new: NULL or empty path");
    em_atomic_file *af = calloc(1, sizeof *af);
    size_t n = strlen(path) + 32;
    char *dir = NULL, *base = NULL;
    if (af) {
        af->path = strdup(path);
        af->tmp = malloc(n);
    }
    if (!af || !af->path || !af->tmp || !split_path(path, &dir, &base)) {
        if (af)
            release(af);
        return em_set_error(EM_ERR_MEMORY, "em_atomic_file_new: out of memory");
    }
    snprintf(af->tmp, n, "%s.tmp.%ld", path, (long)getpid());
    remove_dead_temporaries(dir, base);
    int fd = create_temporary(af, dir);
    af->f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    em_status st = EM_OK;
    if (!af->f) {
        st = em_set_error(EM_ERR_IO, "cannot write '%s': cannot create a file in '%s': %s", path,
                          dir, strerror(errno));
        if (fd >= 0)
            close(fd);
        if (fd >= 0 && !af->unnamed)
            unlink(af->tmp);
        release(af);
    } else {
        *out = af;
    }
    free(dir);
    free(base);
    return st;
}

em_atomic_file *em_atomic_file_new(const char *path)
{
    em_atomic_file *af;
    open_temporary(path, &af);
    return af;
}

FILE *em_atomic_file_stream(em_atomic_file *af)
{
    return af ? af->f : NULL;
}

void em_atomic_file_free(em_atomic_file *af)
{
    if (!af)
        return;
    if (!af->unnamed)
        unlink(af->tmp);
    if (af->f)
        fclose(af->f);
    release(af);
}

/* fsync the directory holding path so the rename itself is durable. */
static int sync_dir(const char *path)
{
    char *copy = strdup(path);
    if (!copy)
        return -1;
    int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY);
    free(copy);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

/* Gives the unnamed temporary its name (replacing a stale one of this pid). */
static int link_temporary(em_atomic_file *af)
{
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fileno(af->f));
    int rc = linkat(AT_FDCWD, proc, AT_FDCWD, af->tmp, AT_SYMLINK_FOLLOW);
    if (rc != 0 && errno == EEXIST && unlink(af->tmp) == 0)
        rc = linkat(AT_FDCWD, proc, AT_FDCWD, af->tmp, AT_SYMLINK_FOLLOW);
    if (rc == 0)
        af->unnamed = false;
    return rc;
}

em_status em_atomic_file_commit(em_atomic_file *af)
{
    if (!af)
        return em_set_error(EM_ERR_ARG, "em_atomic_file_commit: NULL file");
    const char *step = NULL;
    errno = 0;
    if (ferror(af->f))
        step = "write";
    else if (fflush(af->f) != 0)
        step = "flush";
    else if (fsync(fileno(af->f)) != 0)
        step = "fsync";
    else if (af->unnamed && link_temporary(af) != 0)
        step = "link";
    else if (rename(af->tmp, af->path) != 0)
        step = "rename";
    if (step) {
        em_status st = em_set_error(EM_ERR_IO, "cannot write '%s': %s failed: %s", af->path, step,
                                    errno ? strerror(errno) : "error");
        em_atomic_file_free(af);
        return st;
    }
    int closed = fclose(af->f); /* the data is already synced; this drops the lock */
    af->f = NULL;
    if (closed != 0 || sync_dir(af->path) != 0) {
        em_status st = em_set_error(EM_ERR_IO, "'%s' was written but its directory could not be "
                                    "synced: %s", af->path, strerror(errno));
        release(af);
        return st;
    }
    release(af);
    return EM_OK;
}

em_status em_atomic_file_check(const char *path)
{
    struct stat sb;
    if (path && stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        return em_set_error(EM_ERR_IO, "cannot write '%s': it is a directory", path);
    em_atomic_file *af;
    em_status st = open_temporary(path, &af);
    em_atomic_file_free(af);
    return st;
}
