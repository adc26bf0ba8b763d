/* `ember summary [RECIPE] [--load FILE]`: a recipe's module table for one sample on stdout, of
 * a fresh model or of a saved one (quantized, pruned), whose file names its recipe. */
#include <stdio.h>

#include "cmd/cmd.h"
#include "cli/cli_internal.h"

/* The recipe from the operand or the model file; NULL after printing why. */
static const recipe_spec *settle_recipe(const char *command, const recipe_spec *rc, const char *load)
{
    if (rc || load)
        return rc ? rc : cmd_recipe_of_model_file(command, load);
    fprintf(stderr, "%s: give RECIPE or --load FILE (see '%s --help')\n", command, command);
    return NULL;
}

int cli_cmd_summary(int argc, char **argv)
{
    const char *recipe = NULL, *load = NULL;
    const cmd_opt opts[] = {
        {"load", CMD_OPT_STRING, &load, "FILE",
         .help = "a saved model (quantized, pruned) or checkpoint instead of fresh weights"},
        {0}};
    const cmd_spec spec = {
        .command = "ember summary", .operands = "RECIPE", .n_operands = 1, .operand = &recipe,
        .operands_optional = true,
        .about = "A recipe's modules: each layer's output shape for one sample and its parameter "
                 "count,\nthen the totals. RECIPE: by default the one --load's file names.",
        .more_help = cmd_list_built_recipes, .opts = opts};
    const recipe_spec *rc;
    int parsed = cmd_parse_recipe_command(&spec, argc, argv, &recipe, true, &rc);
    if (parsed != CMD_ARGS_RUN)
        return parsed;
    if (!(rc = settle_recipe(spec.command, rc, load)))
        return 2;
    em_shape sample = recipe_sample_shape(rc), input = {.ndim = sample.ndim + 1, .d = {1}};
    for (int i = 0; i < sample.ndim; i++)
        input.d[i + 1] = sample.d[i];
    em_module *model = rc->build();
    em_status st = model ? EM_OK : em_error_status();
    if (st == EM_OK && load)
        st = recipe_load_model_any(model, rc, load);
    if (st == EM_OK)
        st = em_module_summary(model, input, stdout);
    em_module_free(model);
    if (st != EM_OK) {
        fprintf(stderr, "ember summary: %s\n", em_error());
        return 1;
    }
    return 0;
}
