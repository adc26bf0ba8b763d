/* The presets of `ember train --preset`: named bundles of techniques (see recipes.h). */
#include <string.h>

#include "recipes/run.h"

em_status recipe_preset(const char *name, recipe_train_opts *o)
{
    int level = !strcmp(name, "basic") ? 1 : !strcmp(name, "advanced") ? 2
                                           : !strcmp(name, "ultra") ? 3 : 0;
    if (!level)
        return em_set_error(EM_ERR_ARG, "recipe_preset: unknown preset '%s' (%s)", name,
                            RECIPE_PRESETS);
    o->preset = name;
    o->tech.guard = true;
    o->tech.clip = 1.0;
    if (level >= 2) {
        o->tech.amp = EM_BF16;
        o->schedule = "warmup-cosine";
    }
    if (level >= 3) {
        o->tech.grad_accum = 2;
        o->tech.checkpoint_activations = true;
    }
    return EM_OK;
}
