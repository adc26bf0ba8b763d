/* `ember summary RECIPE`: a recipe's module table for one sample on stdout. */
#include <stdio.h>

#include "cli/args.h"
#include "cli/cli_internal.h"

int em_cmd_summary(int argc, char **argv)
{
    const char *recipe = NULL;
    const em_cmd_spec spec = {
        .command = "ember summary", .operands = "RECIPE", .n_operands = 1, .operand = &recipe,
        .about = "A recipe's modules: each layer's output shape for one sample and its parameter "
                 "count,\nthen the totals.",
        .more_help = em_list_recipes};
    const em_recipe *rc;
    int parsed = em_parse_recipe_command(&spec, argc, argv, &recipe, true, &rc);
    if (parsed != EM_ARGS_RUN)
        return parsed;
    em_shape sample = em_recipe_sample_shape(rc), input = {.ndim = sample.ndim + 1, .d = {1}};
    for (int i = 0; i < sample.ndim; i++)
        input.d[i + 1] = sample.d[i];
    em_module *model = rc->build();
    em_status st = model ? em_module_summary(model, input, stdout) : em_error_status();
    em_module_free(model);
    if (st != EM_OK) {
        fprintf(stderr, "ember summary: %s\n", em_error());
        return 1;
    }
    return 0;
}
