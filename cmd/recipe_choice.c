/* Which recipe a command is about: by name (the RECIPE operand, listed in --help), or read from
 * the model file it loads. */
#include <stdio.h>
#include <string.h>

#include "cmd/cmd.h"

static void list(FILE *f, bool built_only)
{
    fprintf(f, "\nrecipes:\n");
    for (int i = 0; recipe_at(i); i++)
        if (!built_only || recipe_at(i)->build)
            fprintf(f, "  %-8s %s\n", recipe_at(i)->name, recipe_at(i)->about);
}

void cmd_list_recipes(FILE *f)
{
    list(f, false);
}

void cmd_list_built_recipes(FILE *f)
{
    list(f, true);
}

/* The recipe named `name` (with a model builder when built_only), or NULL after printing why
 * and the recipes the command takes. */
static const recipe_spec *find_recipe(const char *command, const char *name, bool built_only)
{
    const recipe_spec *rc = recipe_find(name);
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

int cmd_parse_recipe_command(const cmd_spec *spec, int argc, char **argv, const char **name,
                            bool built_only, const recipe_spec **rc)
{
    int parsed = cmd_args_parse(spec, argc, argv);
    if (parsed != CMD_ARGS_RUN)
        return parsed;
    *rc = NULL;
    if (!*name) /* an optional operand left out */
        return CMD_ARGS_RUN;
    *rc = find_recipe(spec->command, *name, built_only);
    return *rc ? CMD_ARGS_RUN : 2;
}

const recipe_spec *cmd_recipe_of_model_file(const char *command, const char *path)
{
    em_safetensors *f = NULL;
    if (em_safetensors_load(path, &f) != EM_OK) {
        fprintf(stderr, "%s: %s\n", command, em_error());
        return NULL;
    }
    const char *name = em_safetensors_meta(f, "recipe");
    const recipe_spec *rc = NULL;
    if (!name)
        fprintf(stderr, "%s: '%s' does not say which recipe's model it holds (name the "
                "recipe)\n", command, path);
    else
        rc = find_recipe(command, name, true);
    em_safetensors_free(f);
    return rc;
}
