/* libFuzzer target: safetensors files of arbitrary bytes, read whole (em_safetensors_load) and
 * into existing tensors (em_safetensors_load_into); any input must load with every tensor's
 * bytes readable or fail with a message, never crash, leak or read past the file. */
#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "harness.h"
#include "io/safetensors.h"

/* Reads every byte of t so ASan sees a tensor whose storage is shorter than its shape. */
static unsigned touch(const em_tensor *t)
{
    const uint8_t *p = em_data_ptr(t);
    size_t n = (size_t)em_numel(t) * em_dtype_size(t->dtype);
    unsigned sum = 0;
    for (size_t k = 0; k < n; k++)
        sum += p[k];
    return sum;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_input_file(0, data, size);
    em_error_clear();
    em_safetensors *st = NULL;
    if (em_safetensors_load(path, &st) == EM_OK) {
        for (int k = 0; k < st->n_tensors; k++) {
            assert(st->names[k] && st->tensors[k]);
            assert(em_safetensors_get(st, st->names[k]) != NULL);
            touch(st->tensors[k]);
        }
        for (int k = 0; k < st->n_meta; k++)
            assert(em_safetensors_meta(st, st->meta_keys[k]) == st->meta_values[k]);
        em_safetensors_free(st);
    } else {
        assert(!st && em_error()[0]);
    }
    em_error_clear();
    em_tensor *w = em_zeros(EM_SHAPE(2, 3), EM_F32), *ids = em_zeros(EM_SHAPE(4), EM_I64);
    em_st_entry dst[] = {{"weight", w}, {"ids", ids}};
    if (em_safetensors_load_into(path, dst, 2) != EM_OK)
        assert(em_error()[0]);
    em_release(w);
    em_release(ids);
    em_error_clear();
    return 0;
}
