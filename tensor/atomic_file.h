/* Atomic file replacement: write to "<path>.tmp.<pid>", then flush, fsync, rename over path and
 * fsync the directory, so readers see the old file or the whole new one, never a torn one. */
#ifndef EMBER_ATOMIC_FILE_H
#define EMBER_ATOMIC_FILE_H

#include <stdio.h>

#include "tensor/error.h"

typedef struct {
    FILE *f;    /* write here between open and commit */
    char *path; /* the target */
    char *tmp;  /* the temporary beside it */
} em_atomic_file;

/* Create the temporary; EM_ERR_IO naming it when that fails (af is then closed). */
em_status em_atomic_open(em_atomic_file *af, const char *path);
/* Flush, fsync and rename over the target; on any failure the target is untouched, the temporary
 * removed and EM_ERR_IO names the file. af is closed either way. */
em_status em_atomic_commit(em_atomic_file *af);
/* Drop the temporary, leaving the target as it was; safe on a closed af. */
void em_atomic_abort(em_atomic_file *af);

#endif
