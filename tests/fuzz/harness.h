/* For the fuzz targets of ember's file readers: an input as a file those readers open by path,
 * held in memory (memfd) so a campaign writes nothing to disk, and a reader of every sample of a
 * dataset. */
#ifndef EMBER_FUZZ_HARNESS_H
#define EMBER_FUZZ_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#include "data/data.h"
#include "io/safetensors.h"

/* Replaces the contents of in-memory file `slot` (0..3) with size bytes of data and returns a
 * path that opens it ("/proc/self/fd/N"); aborts when the file cannot be made (a broken
 * harness, not a finding). */
const char *fuzz_input_file(int slot, const uint8_t *data, size_t size);

/* Reads the first `most` samples of ds through em_dataset_get into buffers of exactly the
 * sample's size (so ASan sees a write past them) and frees ds; asserts each read succeeds or
 * leaves a message. */
void fuzz_read_samples(em_dataset *ds, int64_t most);

/* Checks a loaded safetensors file: every tensor found by its name, every byte of its storage
 * read (so ASan sees one shorter than its shape), every metadata key found with its value. */
void fuzz_check_safetensors(const em_safetensors *st);
/* em_safetensors_load of path: a file that loads is checked as above and freed, one that does not
 * leaves no handle and a message; the error is cleared after. */
void fuzz_load_safetensors(const char *path);

#endif
