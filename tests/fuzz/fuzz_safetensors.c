/* libFuzzer target: safetensors files of arbitrary bytes, read whole (em_safetensors_load) and
 * into existing tensors (em_safetensors_load_into); any input must load with every tensor's
 * bytes readable or fail with a message, never crash, leak or read past the file. */
#include <assert.h>
#include <stdint.h>

#include "harness.h"
#include "io/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_input_file(0, data, size);
    fuzz_load_safetensors(path);
    em_tensor *w = em_zeros(EM_SHAPE(2, 3), EM_F32), *ids = em_zeros(EM_SHAPE(4), EM_I64);
    em_st_entry dst[] = {{"weight", w}, {"ids", ids}};
    if (em_safetensors_load_into(path, dst, 2) != EM_OK)
        assert(em_error()[0]);
    em_release(w);
    em_release(ids);
    em_error_clear();
    return 0;
}
