/* What bench/ and cli/ share beside the argument parser (cmd/args.h) and the report
 * (cmd/report.h): the RECIPE operand and the --device option. */
#ifndef EMBER_CMD_CMD_H
#define EMBER_CMD_CMD_H

#include <stdbool.h>
#include <stdio.h>

#include "cmd/args.h"
#include "recipes/recipes.h"

/* cmd/recipe_choice.c: */
void cmd_list_recipes(FILE *f);       /* the recipes, for a command's --help */
void cmd_list_built_recipes(FILE *f); /* those with a model builder (all but gpt) */
/* Parses the arguments of a command about one recipe (*name, once parsed) and finds it:
 * CMD_ARGS_RUN with *rc set (NULL when the spec's optional operand was left out), or the
 * command's exit status after printing --help, what was wrong with an argument or that the
 * recipe is unknown (or, built_only, has no model builder: gpt brings its own training loop). */
int cmd_parse_recipe_command(const cmd_spec *spec, int argc, char **argv, const char **name,
                             bool built_only, const recipe_spec **rc);
/* The recipe (with a model builder) whose model a model file or checkpoint holds, by its
 * "recipe" metadata; NULL after printing why on stderr. */
const recipe_spec *cmd_recipe_of_model_file(const char *command, const char *path);

/* A command's --device ("cpu" or "cuda") and --tf32 (cmd/device.c): 0 with the device in *out
 * (TF32 switched on when asked), or the command's exit status (2) after printing
 * "COMMAND: --device cuda: ..." when the device is not available. */
int cmd_device(const char *command, const char *name, bool tf32, em_device *out);

#endif
