/* libFuzzer target: whole gpt model files loaded the way `ember sample gpt --load` loads them
 * (recipe_gpt_load: the metadata's sizes checked against limits and the file's tensors, the
 * model built, then recipe_load_model_any), then three tokens sampled with the key/value cache and
 * without it. Any input must load or fail with a message, never crash, leak, read past the file
 * or build a model out of proportion to it (the run's memory cap). */
#include <assert.h>
#include <stdint.h>

#include "ember.h"
#include "harness.h"
#include "recipes/recipes.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_input_file(0, data, size);
    em_error_clear();
    em_module *m = NULL;
    em_char_vocab vocab;
    if (recipe_gpt_load(path, &m, &vocab) != EM_OK) {
        assert(!m && em_error()[0]);
        em_error_clear();
        return 0;
    }
    const int64_t prompt[1] = {vocab.size - 1};
    for (int no_cache = 0; no_cache < 2; no_cache++) {
        int64_t out[3] = {-1, -1, -1};
        em_status st = em_gpt_generate(m, prompt, 1, 3,
                                       (em_generate_opts){.seed = 7, .no_cache = no_cache}, out);
        assert(st == EM_OK || em_error()[0]);
        for (int k = 0; st == EM_OK && k < 3; k++)
            assert(out[k] >= 0 && out[k] < vocab.size);
        em_error_clear();
    }
    em_module_free(m);
    return 0;
}
