/* `ember export [RECIPE] --load FILE --onnx OUT [--opset N] [--allow-nonfinite]`: a saved model
 * written as an ONNX file with a dynamic batch axis (Conv+BatchNorm folded; a GPT: token ids
 * (batch, sequence) -> logits), then a JSON summary line. */
#include <stdio.h>
#include <sys/stat.h>

#include "cmd/cmd.h"
#include "cli/cli_internal.h"

/* *x: an example input of m, token ids (1, block_size) for a GPT, else one sample of its input
 * shape; 0, or the exit status after printing why. */
static int example_input(const char *command, const char *load, const recipe_model *m,
                         em_tensor **x)
{
    em_gpt_settings c;
    em_shape s = {.ndim = m->input.ndim + 1, .d = {1}};
    for (int i = 0; i < m->input.ndim; i++)
        s.d[i + 1] = m->input.d[i];
    if (recipe_is_gpt(m->model, &c))
        *x = em_zeros(EM_SHAPE(1, c.block_size), EM_I64);
    else if (cmd_has_input_shape(command, load, m))
        *x = em_zeros(s, EM_F32);
    else
        return 2;
    if (*x)
        return 0;
    fprintf(stderr, "%s: %s\n", command, em_error());
    return 1;
}

int cli_cmd_export(int argc, char **argv)
{
    const char *recipe = NULL, *load = NULL, *out = NULL, *input_shape = NULL;
    int opset = 17;
    bool allow_nonfinite = false;
    const cmd_opt opts[] = {
        {"load", CMD_OPT_STRING, &load, "FILE", "the model file or checkpoint", .required = true},
        {"onnx", CMD_OPT_STRING, &out, "OUT", "where the ONNX file goes", .required = true},
        {"opset", CMD_OPT_INT, &opset, "N", "ONNX opset (default 17)", .range = CMD_RANGE(17, 23)},
        {"allow-nonfinite", CMD_OPT_FLAG, &allow_nonfinite, NULL,
         .help = "write NaN or Inf weights (by default they are an error naming the tensor)"},
        CMD_INPUT_SHAPE_OPT(input_shape),
        {0}};
    const cmd_spec spec = {
        .command = "ember export", .operands = "RECIPE", .n_operands = 1, .operand = &recipe,
        .operands_optional = true,
        .about = "A saved model as an ONNX file: dynamic batch axis, Conv+BatchNorm folded (a "
                 "GPT: token ids\n(batch, sequence) -> logits, the sequence up to the block "
                 "size), then a JSON summary line.\nRECIPE: only for a file of weights alone.",
        .more_help = cmd_list_recipes, .opts = opts};
    const recipe_spec *rc;
    int parsed = cmd_parse_recipe_command(&spec, argc, argv, &recipe, false, &rc);
    if (parsed != CMD_ARGS_RUN)
        return parsed;
    recipe_model m;
    int status = cmd_load_model(spec.command, load, rc, input_shape, false, &m);
    if (status)
        return status;
    em_tensor *example = NULL;
    status = example_input(spec.command, load, &m, &example);
    if (status) {
        recipe_model_free(&m);
        return status;
    }
    bool ids = example->dtype == EM_I64;
    em_status st = em_onnx_export(m.model, example, out, (em_onnx_opts){
                                                             .opset = opset,
                                                             .allow_nonfinite = allow_nonfinite,
                                                             .dynamic_sequence = ids});
    em_release(example);
    if (st != EM_OK) {
        fprintf(stderr, "ember export: %s\n", em_error());
        recipe_model_free(&m);
        return 1;
    }
    struct stat s;
    printf("{\"recipe\":%s%s%s,\"onnx\":\"%s\",\"opset\":%d,\"file_bytes\":%lld}\n",
           m.recipe ? "\"" : "", m.recipe ? m.recipe->name : "null", m.recipe ? "\"" : "", out,
           opset, stat(out, &s) == 0 ? (long long)s.st_size : -1LL);
    recipe_model_free(&m);
    return 0;
}
