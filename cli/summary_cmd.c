/* `ember summary [RECIPE] [--load FILE]`: a model's module table for one sample on stdout: of a
 * recipe's fresh model, or of a saved one (any whole-model file, quantized and pruned too). */
#include <stdio.h>

#include "cmd/cmd.h"
#include "cli/cli_internal.h"

/* The model the command is about: rc's fresh one, or the one in load. */
static int get_model(const char *command, const recipe_spec *rc, const char *load,
                     const char *input_shape, recipe_model *m)
{
    if (load)
        return cmd_load_model(command, load, rc, input_shape, true, m);
    if (!rc) {
        fprintf(stderr, "%s: give RECIPE or --load FILE (see '%s --help')\n", command, command);
        return 2;
    }
    *m = (recipe_model){.model = rc->build(NULL), .recipe = rc, .input = rc->sample};
    if (m->model)
        return 0;
    fprintf(stderr, "%s: %s\n", command, em_error());
    return 1;
}

int cli_cmd_summary(int argc, char **argv)
{
    const char *recipe = NULL, *load = NULL, *input_shape = NULL;
    const cmd_opt opts[] = {
        {"load", CMD_OPT_STRING, &load, "FILE",
         .help = "a saved model (quantized, pruned) or checkpoint instead of fresh weights"},
        CMD_INPUT_SHAPE_OPT(input_shape),
        {0}};
    const cmd_spec spec = {
        .command = "ember summary", .operands = "RECIPE", .n_operands = 1, .operand = &recipe,
        .operands_optional = true,
        .about = "A model's modules: each layer's output shape for one sample and its parameter "
                 "count,\nthen the totals; of RECIPE's fresh model, or of the model --load's file "
                 "holds.",
        .more_help = cmd_list_image_recipes, .opts = opts};
    const recipe_spec *rc;
    int parsed = cmd_parse_recipe_command(&spec, argc, argv, &recipe, true, &rc);
    if (parsed != CMD_ARGS_RUN)
        return parsed;
    recipe_model m;
    int status = get_model(spec.command, rc, load, input_shape, &m);
    if (status)
        return status;
    if (!cmd_has_input_shape(spec.command, load, &m)) {
        recipe_model_free(&m);
        return 2;
    }
    em_shape input = {.ndim = m.input.ndim + 1, .d = {1}};
    for (int i = 0; i < m.input.ndim; i++)
        input.d[i + 1] = m.input.d[i];
    em_status st = em_module_summary(m.model, input, stdout);
    recipe_model_free(&m);
    if (st != EM_OK) {
        fprintf(stderr, "ember summary: %s\n", em_error());
        return 1;
    }
    return 0;
}
