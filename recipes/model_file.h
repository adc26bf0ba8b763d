/* The one loader of every model file the commands and the server take: a whole-model file
 * (em_model_save's, `ember train --save`'s training checkpoint, quantize's and prune's output),
 * any user's model built from ember's layers included, or a file of the older kinds ember 0.1.0
 * wrote (recipes/model_file_v0.c); and the metadata the programs keep beside the module tree:
 *   recipe       the recipe that trained it: its data and task for eval, quantize and prune
 *   input_shape  one input sample's shape, "784" or "1,28,28" (what serve, summary and export
 *                feed it)
 *   gpt.vocab    a language model's characters, in order (what sample encodes and decodes) */
#ifndef EMBER_RECIPES_MODEL_FILE_H
#define EMBER_RECIPES_MODEL_FILE_H

#include "recipes/recipes.h"

typedef struct {
    em_module *model;
    const recipe_spec *recipe; /* the recipe the file names (one of the older kinds that names
                                  none: the one the caller gave), or NULL */
    em_shape input;            /* one input sample: the file's input_shape, else its recipe's;
                                  ndim 0 when neither says */
    em_char_vocab vocab;       /* a language model's characters; size 0 for the others */
} recipe_model;

/* Loads the model in path into *out. rc: the recipe a command was given, or NULL; a file that
 * names another is an error saying which it holds, and a file of the older kinds that names none
 * is read as rc's model (an error asking for the recipe without one). */
em_status recipe_model_load(const char *path, const recipe_spec *rc, recipe_model *out);
void recipe_model_free(recipe_model *m);

/* The metadata m's model, or one made from it (quantized, pruned), is saved with: its recipe,
 * input shape and vocabulary, as m has them. */
void recipe_model_meta(const recipe_model *m, recipe_meta *out);
/* "1,28,28" into *s; false when text is no such list of 1 to 7 sizes in [1, 2^31). */
bool recipe_shape_parse(const char *text, em_shape *s);

/* m's model as a GPT to sample from: a GPT whose vocabulary is the file's and whose key/value
 * cache of one sequence (n_layer x block_size x n_embd keys, as many values) holds at most 2^27
 * keys, as a file of any size could name more; else an error naming the file. */
em_status recipe_model_gpt(const recipe_model *m, const char *path, em_gpt_settings *c);

/* ---- the older kinds (recipes/model_file_v0.c) ---- */
/* Loads a file of the older kinds (no module tree) into out->model: a training checkpoint of
 * version 1, a recipe's model file (em_module_save with "recipe"; pruned, shrunk or quantized
 * ones say so in their metadata) or parameters alone; the model is rc's (built, or for gpt
 * sized by the file's gpt.* metadata, checked against limits and its tensors first). */
em_status recipe_model_load_v0(const char *path, const recipe_spec *rc, recipe_model *out);

#endif
