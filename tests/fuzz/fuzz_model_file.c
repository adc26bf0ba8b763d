/* libFuzzer target: model files of arbitrary bytes loaded the way the commands load them
 * (recipe_model_load: whole-model files, and the older kinds, plain, pruned or quantized model
 * files and version-1 training checkpoints, read as a small recipe's model), then a forward
 * pass over what was loaded; any input must load or fail with a message, never crash, leak or
 * read past the file. */
#include <assert.h>
#include <stdint.h>

#include "ember.h"
#include "harness.h"
#include "recipes/model_file.h"

/* the model of the seed files (tests/fuzz/corpus/model_file) */
static em_module *small_model(const recipe_data *d)
{
    (void)d;
    return em_sequential(4, em_linear_layer(4, 3, true),
                         em_batch_norm1d_layer(3, (em_batch_norm_opts){0}), em_relu_layer(),
                         em_linear_layer(3, 2, true));
}

static const recipe_spec small = {.name = "small", .build = small_model, .sample = {1, {4}}};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_input_file(0, data, size);
    em_error_clear();
    recipe_model m;
    if (recipe_model_load(path, &small, &m) == EM_OK) {
        assert(m.model);
        em_module_eval(m.model);
        em_scope_begin();
        em_tensor *y = em_forward(m.model, em_ones(EM_SHAPE(2, 4), EM_F32));
        assert(y || em_error()[0]);
        em_scope_end();
        recipe_model_free(&m);
    } else {
        assert(!m.model && em_error()[0]);
    }
    em_error_clear();
    return 0;
}
