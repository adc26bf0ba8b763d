/* Opening regular files only, without blocking on anything else (see io/regular_file.h). */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/regular_file.h"

/* Why a file of this mode is refused, or NULL for a regular file. */
static const char *not_regular(mode_t mode)
{
    return S_ISREG(mode)    ? NULL
           : S_ISFIFO(mode) ? "it is a FIFO, not a regular file"
           : S_ISSOCK(mode) ? "it is a socket, not a regular file"
           : S_ISCHR(mode)  ? "it is a character device, not a regular file"
           : S_ISBLK(mode)  ? "it is a block device, not a regular file"
           : S_ISDIR(mode)  ? "it is a directory, not a regular file"
                            : "it is not a regular file";
}

int em_open_regular(const char *fn, const char *path, int64_t *size)
{
    if (!path) {
        em_set_error(EM_ERR_ARG, "%s: NULL path", fn);
        return -1;
    }
    /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat sb;
    const char *why = NULL;
    if (fd < 0 || fstat(fd, &sb) != 0)
        why = strerror(errno);
    else if (!(why = not_regular(sb.st_mode)) &&
             fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0)
        why = strerror(errno);
    if (why) {
        em_set_error(EM_ERR_IO, "%s: cannot open '%s': %s", fn, path, why);
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if (size)
        *size = (int64_t)sb.st_size;
    return fd;
}

FILE *em_fopen_regular(const char *fn, const char *path, int64_t *size)
{
    int fd = em_open_regular(fn, path, size);
    FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (fd >= 0 && !f) {
        em_set_error(EM_ERR_IO, "%s: cannot open '%s': %s", fn, path, strerror(errno));
        close(fd);
    }
    return f;
}
