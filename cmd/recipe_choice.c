/* Which recipe a command is about: the RECIPE operand, checked against the recipes --help
 * lists. */
#include <stdio.h>
#include <string.h>

#include "cmd/cmd.h"

static void list(FILE *f, bool images_only)
{
    fprintf(f, "\nrecipes:\n");
    for (int i = 0; recipe_at(i); i++)
        if (!images_only || !recipe_at(i)->language_model)
            fprintf(f, "  %-8s %s\n", recipe_at(i)->name, recipe_at(i)->about);
}

void cmd_list_recipes(FILE *f)
{
    list(f, false);
}

void cmd_list_image_recipes(FILE *f)
{
    list(f, true);
}

/* The recipe named `name` (one of images when images_only), or NULL after printing why and the
 * recipes the command takes. */
static const recipe_spec *find_recipe(const char *command, const char *name, bool images_only)
{
    const recipe_spec *rc = recipe_find(name);
    if (!rc) {
        fprintf(stderr, "%s: unknown recipe '%s'\n", command, name);
        list(stderr, images_only);
    } else if (images_only && rc->language_model) {
        fprintf(stderr, "%s: recipe '%s' is not supported here (a language model: ember train, "
                "compare, eval, sample and export take it)\n", command, name);
        return NULL;
    }
    return rc;
}

int cmd_parse_recipe_command(const cmd_spec *spec, int argc, char **argv, const char **name,
                             bool images_only, const recipe_spec **rc)
{
    int parsed = cmd_args_parse(spec, argc, argv);
    if (parsed != CMD_ARGS_RUN)
        return parsed;
    *rc = NULL;
    if (!*name) /* an optional operand left out */
        return CMD_ARGS_RUN;
    *rc = find_recipe(spec->command, *name, images_only);
    return *rc ? CMD_ARGS_RUN : 2;
}
