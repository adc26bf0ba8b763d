/* Atomic file replacement through a temporary in the same directory, fsync and rename(2). */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tensor/atomic_file.h"

static void release(em_atomic_file *af)
{
    free(af->path);
    free(af->tmp);
    af->path = af->tmp = NULL;
    af->f = NULL;
}

em_status em_atomic_open(em_atomic_file *af, const char *path)
{
    if (!af || !path || !*path)
        return em_set_error(EM_ERR_ARG, "em_atomic_open: NULL or empty path");
    *af = (em_atomic_file){0};
    size_t n = strlen(path) + 32;
    af->path = strdup(path);
    af->tmp = malloc(n);
    if (!af->path || !af->tmp) {
        release(af);
        return em_set_error(EM_ERR_MEMORY, "em_atomic_open: out of memory");
    }
    snprintf(af->tmp, n, "%s.tmp.%ld", path, (long)getpid());
    af->f = fopen(af->tmp, "wb");
    if (!af->f) {
        em_status st = em_set_error(EM_ERR_IO, "cannot write '%s': cannot create '%s': %s", path,
                                    af->tmp, strerror(errno));
        release(af);
        return st;
    }
    return EM_OK;
}

void em_atomic_abort(em_atomic_file *af)
{
    if (!af || !af->tmp)
        return;
    if (af->f)
        fclose(af->f);
    unlink(af->tmp);
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

em_status em_atomic_commit(em_atomic_file *af)
{
    if (!af || !af->f)
        return em_set_error(EM_ERR_ARG, "em_atomic_commit: file is not open");
    const char *step = NULL;
    if (ferror(af->f))
        step = "write";
    else if (fflush(af->f) != 0)
        step = "flush";
    else if (fsync(fileno(af->f)) != 0)
        step = "fsync";
    int saved = step ? errno : 0;
    if (fclose(af->f) != 0 && !step) {
        step = "close";
        saved = errno;
    }
    af->f = NULL;
    if (!step && rename(af->tmp, af->path) != 0) {
        step = "rename";
        saved = errno;
    }
    if (step) {
        em_status st = em_set_error(EM_ERR_IO, "cannot write '%s': %s failed: %s", af->path, step,
                                    saved ? strerror(saved) : "error");
        em_atomic_abort(af);
        return st;
    }
    if (sync_dir(af->path) != 0) {
        em_status st = em_set_error(EM_ERR_IO, "'%s' was written but its directory could not be "
                                    "synced: %s", af->path, strerror(errno));
        release(af);
        return st;
    }
    release(af);
    return EM_OK;
}
