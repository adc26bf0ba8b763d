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

/* The new contents of a file, written beside it and then put in its place:
 *   em_atomic_file *af = em_atomic_file_new(path);
 *   if (!af)
 *       return em_error_status();
 *   if (fwrite(data, 1, n, em_atomic_file_stream(af)) != n) {
 *       em_atomic_file_free(af); // the target stays as it was
 *       return em_set_error(EM_ERR_IO, "cannot write '%s'", path);
 *   }
 *   return em_atomic_file_commit(af); */
typedef struct em_atomic_file em_atomic_file;

/* Removes dead writers' temporaries of path, then creates this writer's; NULL with EM_ERR_IO
 * naming the file when that fails (EM_ERR_ARG for a NULL or empty path). */
em_atomic_file *em_atomic_file_new(const char *path);
/* Where to write the new contents, between new and commit. */
FILE *em_atomic_file_stream(em_atomic_file *af);
/* Flush, fsync and rename over the target, then free af; on any failure the target is
 * untouched, the temporary removed and EM_ERR_IO names the file. */
em_status em_atomic_file_commit(em_atomic_file *af);
/* Drops the temporary, leaving the target as it was, and frees af (NULL is fine): how a writer
 * gives up. */
void em_atomic_file_free(em_atomic_file *af);
/* Whether path could be written now: its directory takes new files and path is not a directory.
 * EM_OK, or EM_ERR_IO "cannot write 'PATH': WHY"; nothing is left behind. */
em_status em_atomic_file_check(const char *path);

#ifdef __cplusplus
}
#endif

#endif
