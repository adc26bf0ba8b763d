/* What bench/ and cli/ share beside the argument parser (cmd/args.h) and the report
 * (cmd/report.h): the RECIPE operand, the model a command loads, --data, --device. */
#ifndef EMBER_CMD_CMD_H
#define EMBER_CMD_CMD_H

#include <stdbool.h>
#include <stdio.h>

#include "cmd/args.h"
#include "recipes/run.h"

/* cmd/recipe_choice.c: */
void cmd_list_recipes(FILE *f);       /* the recipes, for a command's --help */
void cmd_list_image_recipes(FILE *f); /* those whose models classify images (all but gpt) */
/* Parses the arguments of a command about one recipe (*name, once parsed) and finds it:
 * CMD_ARGS_RUN with *rc set (NULL when the spec's optional operand was left out), or the
 * command's exit status after printing --help, what was wrong with an argument or that the
 * recipe is unknown (or, images_only, a language model: gpt). */
int cmd_parse_recipe_command(const cmd_spec *spec, int argc, char **argv, const char **name,
                             bool images_only, const recipe_spec **rc);

/* The --data option's help: where the recipes' data lives unless it names a folder. */
#define CMD_DATA_HELP                                                                        \
    "the data folder; by default Fashion-MNIST's IDX files\n"                                \
    "in " RECIPE_FASHION_MNIST_DIR " (Debian's fashion-mnist)\n"                             \
    "and gpt's text, the fortunes in " RECIPE_FORTUNES_DIR " (Debian's fortunes)"
/* The --input-shape option (its text into *text): one sample's shape where the model file does
 * not say it. */
#define CMD_INPUT_SHAPE_OPT(text)                                                            \
    {"input-shape", CMD_OPT_STRING, &(text), "D,D,...",                                      \
     .help = "one input sample's shape, where the file does not say it: 784, 1,28,28"}

/* cmd/model.c: the model of path, loaded by the one loader (recipes/model_file.h) with rc, the
 * RECIPE operand, or NULL; input_shape (--input-shape, or NULL) sets its input's shape, and a
 * command that takes images_only refuses a language model. 0, or the exit status after printing
 * "COMMAND: ..." on stderr: 1 when the file cannot be loaded, 2 for a bad --input-shape. */
int cmd_load_model(const char *command, const char *path, const recipe_spec *rc,
                   const char *input_shape, bool images_only, recipe_model *m);
/* Whether m's input shape is known; else prints "COMMAND: FILE does not say ..." (the file
 * named path). */
bool cmd_has_input_shape(const char *command, const char *path, const recipe_model *m);
/* m's recipe's name, "model" for a model without one: how JSON lines and tables name it. */
const char *cmd_model_name(const recipe_model *m);
/* Writes m->model (quantized, pruned) to path as a whole-model file with m's metadata. */
em_status cmd_save_model(const recipe_model *m, const char *path);

/* A command's --device ("cpu" or "cuda") and --tf32 (cmd/device.c): 0 with the device in *out
 * (TF32 switched on when asked), or the command's exit status (2) after printing
 * "COMMAND: --device cuda: ..." when the device is not available. */
int cmd_device(const char *command, const char *name, bool tf32, em_device *out);
/* A command's --amp choice ("f16", "bf16" or "off", as its option's choices admit) as the
 * autocast dtype; EM_F32 for off. */
em_dtype cmd_amp_dtype(const char *name);

#endif
