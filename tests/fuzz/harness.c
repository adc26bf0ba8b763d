/* The fuzz targets' in-memory files and dataset reader (see harness.h). */
#define _GNU_SOURCE
#include "harness.h"

#include <assert.h>

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

const char *fuzz_input_file(int slot, const uint8_t *data, size_t size)
{
    static int fds[4] = {-1, -1, -1, -1};
    static char paths[4][32];
    if (slot < 0 || slot >= 4)
        abort();
    if (fds[slot] < 0) {
        fds[slot] = memfd_create("ember-fuzz", 0);
        if (fds[slot] < 0)
            abort();
        snprintf(paths[slot], sizeof paths[slot], "/proc/self/fd/%d", fds[slot]);
    }
    int fd = fds[slot];
    if (ftruncate(fd, 0) != 0)
        abort();
    for (size_t done = 0; done < size;) {
        ssize_t k = pwrite(fd, data + done, size - done, (off_t)done);
        if (k <= 0)
            abort();
        done += (size_t)k;
    }
    return paths[slot];
}

void fuzz_read_samples(em_dataset *ds, int64_t most)
{
    int64_t n = em_dataset_len(ds);
    assert(n >= 0);
    size_t x_bytes = (size_t)em_shape_numel(&ds->x_shape) * em_dtype_size(ds->x_dtype);
    size_t y_bytes = (size_t)em_shape_numel(&ds->y_shape) * em_dtype_size(ds->y_dtype);
    void *x = malloc(x_bytes ? x_bytes : 1), *y = malloc(y_bytes ? y_bytes : 1);
    assert(x && y);
    for (int64_t i = 0; i < n && i < most; i++) {
        em_status st = em_dataset_get(ds, i, x, y);
        assert(st == EM_OK || em_error()[0]);
        em_error_clear();
    }
    free(x);
    free(y);
    em_dataset_free(ds);
}

void fuzz_check_safetensors(const em_safetensors *st)
{
    for (int k = 0; k < st->n_tensors; k++) {
        const em_tensor *t = st->tensors[k];
        assert(st->names[k] && t && em_safetensors_get(st, st->names[k]) == t);
        const uint8_t *p = em_data_ptr(t);
        size_t n = (size_t)em_numel(t) * em_dtype_size(t->dtype);
        unsigned sum = 0;
        for (size_t b = 0; b < n; b++)
            sum += p[b];
        (void)sum;
    }
    for (int k = 0; k < st->n_meta; k++)
        assert(em_safetensors_meta(st, st->meta_keys[k]) == st->meta_values[k]);
}

void fuzz_load_safetensors(const char *path)
{
    em_error_clear();
    em_safetensors *st = NULL;
    if (em_safetensors_load(path, &st) == EM_OK) {
        fuzz_check_safetensors(st);
        em_safetensors_free(st);
    } else {
        assert(!st && em_error()[0]);
    }
    em_error_clear();
}
