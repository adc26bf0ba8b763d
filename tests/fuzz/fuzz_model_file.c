/* libFuzzer target: model files of arbitrary bytes loaded into a small model the way `ember eval`
 * loads them (recipe_load_model_any: plain, pruned or quantized model files and the model part of
 * training checkpoints), then a forward pass over what was loaded; any input must load or fail
 * with a message, never crash, leak or read past the file. */
#include <assert.h>
#include <stdint.h>

#include "ember.h"
#include "harness.h"
#include "recipes/recipes.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_input_file(0, data, size);
    em_error_clear();
    /* the model of the seed files (tests/fuzz/corpus/model_file) */
    em_module *m = em_sequential(4, em_linear_layer(4, 3, true), em_batch_norm1d_layer(3, 0, 0),
                                 em_relu_layer(), em_linear_layer(3, 2, true));
    assert(m);
    if (recipe_load_model_any(m, NULL, path) == EM_OK) {
        em_module_eval(m);
        em_scope_begin();
        em_tensor *y = em_forward(m, em_ones(EM_SHAPE(2, 4), EM_F32));
        assert(y || em_error()[0]);
        em_scope_end();
    } else {
        assert(em_error()[0]);
    }
    em_module_free(m);
    em_error_clear();
    return 0;
}
