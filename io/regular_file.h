/* Opening a file to read, for every reader in ember (model files, checkpoints, safetensors,
 * datasets, images, text): only a regular file is opened, and the open never waits, so a FIFO,
 * a socket, a device or a directory given as (or swapped in for) a file is an error at once. */
#ifndef EMBER_IO_REGULAR_FILE_H
#define EMBER_IO_REGULAR_FILE_H

#include <stdint.h>
#include <stdio.h>

#include "ember/tensor/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A read-only descriptor of path when it is a regular file, with its size in *size (NULL: not
 * wanted); otherwise -1 and EM_ERR_IO "fn: cannot open 'PATH': WHY", WHY naming what it is ("it
 * is a FIFO, not a regular file"). The open itself is non-blocking; the descriptor is blocking
 * again when it is returned. */
int em_open_regular(const char *fn, const char *path, int64_t *size);
/* The same as a stdio stream ("rb"); NULL on failure. */
FILE *em_fopen_regular(const char *fn, const char *path, int64_t *size);

#ifdef __cplusplus
}
#endif

#endif
