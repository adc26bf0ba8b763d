/* Which recipe a command is about: by name (the RECIPE operand, listed in --help), or read from
 * the model file it loads. */
#include <stdio.h>
#include <string.h>

#include "cli/cli_internal.h"

static void list(FILE *f, bool built_only)
{
    fprintf(f, "\nrecipes:\n");
    for (int i = 0; em_recipe_at(i); i++)
        if (!built_only || em_recipe_at(i)->build)
            fprintf(f, "  %-8s %s\n", em_recipe_at(i)->name, em_recipe_at(i)->about);
}

void em_list_recipes(FILE *f)
{
    list(f, false);
}

void em_list_built_recipes(FILE *f)
{
    list(f, true);
}

/* The recipe named `name` (with a model builder when built_only), or NULL after printing why
 * and the recipes the command takes. */
static const em_recipe *find_recipe(const char *command, const char *name, bool built_only)
{
    const em_recipe *rc = em_recipe_find(name);
    if (!rc) {
        fprintf(stderr, "%s: unknown recipe '%s'\n", command, name);
        list(stderr, built_only);
    } else if (built_only && !rc->build) {
        fprintf(stderr, "%s: recipe '%s' is not supported here (it trains with ember train, "
                "ember compare and ember eval)\n", command, name);
        return NULL;
    }
    return rc;
}

int em_parse_recipe_command(const em_cmd_spec *spec, int argc, char **argv, const char **name,
                            bool built_only, const em_recipe **rc)
{
    int parsed = em_args_parse(spec, argc, argv);
    if (parsed != EM_ARGS_RUN)
        return parsed;
    *rc = NULL;
    if (!*name) /* an optional operand left out */
        return EM_ARGS_RUN;
    *rc = find_recipe(spec->command, *name, built_only);
    return *rc ? EM_ARGS_RUN : 2;
}

const em_recipe *em_recipe_of_model_file(const char *command, const char *path)
{
    em_safetensors *f = NULL;
    if (em_safetensors_load(path, &f) != EM_OK) {
        fprintf(stderr, "%s: %s\n", command, em_error());
        return NULL;
    }
    const char *name = em_safetensors_meta(f, "recipe");
    const em_recipe *rc = NULL;
    if (!name)
        fprintf(stderr, "%s: '%s' does not say which recipe's model it holds (name the "
                "recipe)\n", command, path);
    else
        rc = find_recipe(command, name, true);
    em_safetensors_free(f);
    return rc;
}
