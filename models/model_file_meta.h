/* Whole-model files with more in them: the caller's own metadata beside the module tree (the
 * recipe a program trained, a tokenizer's vocabulary), and the tree as one metadata entry for a
 * writer of its own files (training checkpoints), whose other tensors em_model_load passes by. */
#ifndef EMBER_MODELS_MODEL_FILE_META_H
#define EMBER_MODELS_MODEL_FILE_META_H

#include "ember/io/safetensors.h"
#include "ember/nn/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* em_model_save with the caller's metadata entries beside the tree; their keys must not start
 * with "ember." (the library's). */
em_status em_model_save_meta(const em_module *m, const char *path, const em_st_meta *meta,
                             int n_meta);

/* Whether em_model_save can describe m: every module of its tree is of a type whole-model files
 * know (a checkpointed module counts as the module it wraps). */
bool em_model_describable(const em_module *m);

/* The metadata entry that makes a safetensors file a whole-model file: out->key is
 * "ember.model", out->value m's tree (malloc'd: free it); file names the file in errors. A file
 * holding that entry, m's parameters and buffers by dotted name (em_module_state) and any other
 * tensors under names that start with "ember." is one em_model_load reads: it passes the others
 * by. */
em_status em_model_tree_meta(const em_module *m, const char *file, em_st_meta *out);

#ifdef __cplusplus
}
#endif

#endif
