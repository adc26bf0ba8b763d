/* The model a command loads (cmd/cmd.h): the one loader's, its input shape settled, errors
 * printed as the command's. */
#include <stdio.h>

#include "cmd/cmd.h"

int cmd_load_model(const char *command, const char *path, const recipe_spec *rc,
                   const char *input_shape, bool images_only, recipe_model *m)
{
    em_shape shape;
    *m = (recipe_model){0};
    if (input_shape && !recipe_shape_parse(input_shape, &shape)) {
        fprintf(stderr, "%s: --input-shape: '%s' is not a list of sizes such as 784 or 1,28,28\n",
                command, input_shape);
        return 2;
    }
    if (recipe_model_load(path, rc, m) != EM_OK) {
        fprintf(stderr, "%s: %s\n", command, em_error());
        return 1;
    }
    if (images_only && m->recipe && m->recipe->language_model) {
        fprintf(stderr, "%s: '%s' holds a model of the %s recipe, a language model: this command "
                "takes image classifiers\n", command, path, m->recipe->name);
        recipe_model_free(m);
        return 1;
    }
    if (input_shape)
        m->input = shape;
    return 0;
}

bool cmd_has_input_shape(const char *command, const char *path, const recipe_model *m)
{
    if (m->input.ndim)
        return true;
    fprintf(stderr, "%s: '%s' does not say its input's shape and names no recipe: give "
            "--input-shape (784, 1,28,28)\n", command, path);
    return false;
}

const char *cmd_model_name(const recipe_model *m)
{
    return m->recipe ? m->recipe->name : "model";
}

em_status cmd_save_model(const recipe_model *m, const char *path)
{
    recipe_meta meta;
    recipe_model_meta(m, &meta);
    return em_model_save_meta(m->model, path, meta.entries, meta.n);
}
