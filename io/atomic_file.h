/* Atomic file replacement: readers see the old file or the whole new one, never a torn one, and a
 * writer killed at any moment leaves no temporary behind for long. The data goes to an unnamed
 * file in the target's directory (O_TMPFILE), which vanishes with a killed writer; at commit it
 * is fsynced, linked as "<path>.tmp.<pid>", renamed over path and the directory fsynced. A writer
 * holds a lock on its temporary, so the next open of the same path removes the temporaries of
 * dead writers (a kill between link and rename, or a filesystem without unnamed files, where the
 * temporary is named from the start). */
#ifndef EMBER_IO_ATOMIC_FILE_H
#define EMBER_IO_ATOMIC_FILE_H

#include <stdbool.h>
#include <stdio.h>

#include "ember/tensor/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    FILE *f;      /* write here between open and commit */
    char *path;   /* the target */
    char *tmp;    /* the temporary's name beside it */
    bool unnamed; /* the temporary has no name until commit links it */
} em_atomic_file;

/* Removes dead writers' temporaries of path, then creates this writer's; EM_ERR_IO naming the
 * file when that fails (af is then closed). */
em_status em_atomic_open(em_atomic_file *af, const char *path);
/* Flush, fsync and rename over the target; on any failure the target is untouched, the temporary
 * removed and EM_ERR_IO names the file. af is closed either way. */
em_status em_atomic_commit(em_atomic_file *af);
/* Drop the temporary, leaving the target as it was; safe on a closed af. */
void em_atomic_abort(em_atomic_file *af);
/* Whether path could be written now: its directory takes new files and path is not a directory.
 * EM_OK, or EM_ERR_IO "cannot write 'PATH': WHY"; nothing is left behind. */
em_status em_atomic_file_check(const char *path);

#ifdef __cplusplus
}
#endif

#endif
