/* libFuzzer target: gpt model files loaded the way `ember sample` loads them (recipe_model_load
 * with the gpt recipe: a whole-model file through em_model_load, one of the older kinds sized by
 * its gpt.* metadata, checked against limits and the file's tensors before it is built; then
 * recipe_model_gpt: a GPT with the file's vocabulary and a bounded key/value cache), then three
 * tokens sampled with the cache and without it. Any input must load or fail with a message,
 * never crash, leak, read past the file or build a model out of proportion to it (the run's
 * memory cap). */
#include <assert.h>
#include <stdint.h>

#include "ember.h"
#include "harness.h"
#include "recipes/model_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_input_file(0, data, size);
    em_error_clear();
    recipe_model m;
    em_gpt_settings c;
    em_status st = recipe_model_load(path, recipe_find("gpt"), &m);
    if (st == EM_OK)
        st = recipe_model_gpt(&m, path, &c);
    if (st != EM_OK) {
        assert(em_error()[0]);
        recipe_model_free(&m);
        em_error_clear();
        return 0;
    }
    const int64_t prompt[1] = {m.vocab.size - 1};
    for (int no_cache = 0; no_cache < 2; no_cache++) {
        int64_t out[3] = {-1, -1, -1};
        st = em_gpt_generate(m.model, prompt, 1, 3,
                             (em_generate_opts){.seed = 7, .no_cache = no_cache}, out);
        assert(st == EM_OK || em_error()[0]);
        for (int k = 0; st == EM_OK && k < 3; k++)
            assert(out[k] >= 0 && out[k] < m.vocab.size);
        em_error_clear();
    }
    recipe_model_free(&m);
    return 0;
}
