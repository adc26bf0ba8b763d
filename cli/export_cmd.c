/* `ember export RECIPE --load FILE --onnx OUT [--opset N] [--allow-nonfinite]`: a saved recipe
 * model written as an ONNX file with a dynamic batch axis (Conv+BatchNorm folded; gpt: token ids
 * (batch, sequence) -> logits), then a JSON summary line. */
#include <stdio.h>
#include <sys/stat.h>

#include "cmd/cmd.h"
#include "cli/cli_internal.h"

/* The model saved at load and an example input: token ids (1, block_size) for gpt, else one
 * image or flat sample. */
static em_status load_model(const recipe_spec *rc, const char *load, em_module **m,
                            em_tensor **example)
{
    if (rc->build) {
        *m = rc->build();
        *example = rc->flat_input ? em_zeros(EM_SHAPE(1, 784), EM_F32)
                                  : em_zeros(EM_SHAPE(1, 1, 28, 28), EM_F32);
        return *m && *example ? recipe_load_model_any(*m, rc, load) : em_error_status();
    }
    em_char_vocab vocab;
    em_gpt_config c;
    em_status st = recipe_gpt_load(load, m, &vocab);
    if (st == EM_OK && em_gpt_config_of(*m, &c))
        *example = em_zeros(EM_SHAPE(1, c.block_size), EM_I64);
    return st == EM_OK && !*example ? em_error_status() : st;
}

int cli_cmd_export(int argc, char **argv)
{
    const char *recipe = NULL, *load = NULL, *out = NULL;
    int opset = 17;
    bool allow_nonfinite = false;
    const cmd_opt opts[] = {
        {"load", CMD_OPT_STRING, &load, "FILE", "the model file or checkpoint", .required = true},
        {"onnx", CMD_OPT_STRING, &out, "OUT", "where the ONNX file goes", .required = true},
        {"opset", CMD_OPT_INT, &opset, "N", "ONNX opset (default 17)", .range = CMD_RANGE(17, 23)},
        {"allow-nonfinite", CMD_OPT_FLAG, &allow_nonfinite, NULL,
         .help = "write NaN or Inf weights (by default they are an error naming the tensor)"},
        {0}};
    const cmd_spec spec = {
        .command = "ember export", .operands = "RECIPE", .n_operands = 1, .operand = &recipe,
        .about = "A saved recipe model as an ONNX file: dynamic batch axis, Conv+BatchNorm "
                 "folded (gpt: token ids\n(batch, sequence) -> logits, the sequence up to the "
                 "block size), then a JSON summary line.",
        .more_help = cmd_list_recipes, .opts = opts};
    const recipe_spec *rc;
    int parsed = cmd_parse_recipe_command(&spec, argc, argv, &recipe, false, &rc);
    if (parsed != CMD_ARGS_RUN)
        return parsed;
    em_module *m = NULL;
    em_tensor *example = NULL;
    em_status st = load_model(rc, load, &m, &example);
    if (st == EM_OK)
        st = em_onnx_export(m, example, out, (em_onnx_opts){.opset = opset,
                                                         .allow_nonfinite = allow_nonfinite,
                                                         .dynamic_sequence = !rc->build});
    em_release(example);
    em_module_free(m);
    if (st != EM_OK) {
        fprintf(stderr, "ember export: %s\n", em_error());
        return 1;
    }
    struct stat s;
    printf("{\"recipe\":\"%s\",\"onnx\":\"%s\",\"opset\":%d,\"file_bytes\":%lld}\n", rc->name, out,
           opset, stat(out, &s) == 0 ? (long long)s.st_size : -1LL);
    return 0;
}
