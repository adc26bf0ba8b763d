/* libFuzzer target: whole-model files (tree and weights, em_model_load) from arbitrary bytes: the
 * input is the header's JSON, a 0xFF byte, then the data section (no valid header holds 0xFF), and
 * the target puts the header's length in front, so that a mutation of a setting still makes a
 * file (the seeds, tests/fuzz/corpus/model_forward, are small saved models of many layer types,
 * those whose settings size their output among them). Each model that loads runs forward on
 * small inputs: (2, 4), (2, 3, 8), (1, 3, 8, 8) and indices (2, 5). Tensor memory is held to a
 * budget of 256 MB, so an output a setting makes too large is refused by the allocator's
 * accounting, and the campaign's memory limit (fuzz_model_forward.options) catches what
 * bypasses it: a loaded model must run or fail with a message, never crash, leak, hang or take
 * gigabytes. */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ember.h"
#include "harness.h"

/* m's forward on an input of shape s (ones in f32, zeros as i64 indices); an error is fine. */
static void forward(em_module *m, em_shape s, em_dtype dtype)
{
    em_scope_begin();
    em_tensor *x = dtype == EM_I64 ? em_zeros(s, EM_I64) : em_ones(s, dtype);
    em_tensor *y = x ? em_forward(m, x) : NULL;
    assert(y || em_error()[0]);
    em_scope_end();
    em_error_clear();
}

/* The file of an input: its bytes up to the first 0xFF as the header, after its 8-byte length,
 * and the rest as the data section; new memory. */
static uint8_t *model_file(const uint8_t *data, size_t size, size_t *len)
{
    const uint8_t *sep = memchr(data, 0xFF, size);
    uint64_t header = sep ? (uint64_t)(sep - data) : size;
    uint8_t *file = malloc(size + 8);
    if (!file)
        abort(); /* a broken harness, not a finding */
    memcpy(file, &header, 8); /* little-endian, as every machine ember fuzzes on */
    memcpy(file + 8, data, header);
    size_t rest = sep ? size - header - 1 : 0;
    memcpy(file + 8 + header, data + header + (sep ? 1 : 0), rest);
    *len = 8 + header + rest;
    return file;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    em_memory_set_budget(EM_CPU, (size_t)256 << 20);
    size_t len = 0;
    uint8_t *file = model_file(data, size, &len);
    const char *path = fuzz_input_file(0, file, len);
    free(file);
    em_error_clear();
    em_module *m = em_model_load(path);
    if (!m) {
        assert(em_error()[0]);
        em_error_clear();
        return 0;
    }
    forward(m, EM_SHAPE(2, 4), EM_F32);
    forward(m, EM_SHAPE(2, 3, 8), EM_F32);
    forward(m, EM_SHAPE(1, 3, 8, 8), EM_F32);
    forward(m, EM_SHAPE(2, 5), EM_I64);
    em_module_free(m);
    em_error_clear();
    return 0;
}
