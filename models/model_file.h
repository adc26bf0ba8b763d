/* Whole-model files: one safetensors file that holds a model's module tree (each module's type
 * and the settings it was made with, as JSON in the metadata entry "ember.model") beside its
 * weights, so that em_model_load rebuilds the model without the architecture being declared
 * again. A module is written and read through its type's description (em_module_type: its
 * settings and build); every built-in type is known, and a user's own type joins with
 * em_model_register_type. Python's safetensors reads the weights. Copies of a model
 * (em_module_clone) are made the same way. */
#ifndef EMBER_MODELS_MODEL_FILE_H
#define EMBER_MODELS_MODEL_FILE_H

#include "ember/nn/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Writes m's tree and its parameters and buffers (by dotted name, as em_module_save) to path,
 * atomically. A module of a type that is not known, or that cannot be rebuilt (no build: a
 * pruned layer), is an error naming it and where it sits; a checkpointed module is saved as the
 * module it wraps (checkpointing is not saved). */
em_status em_model_save(const em_module *m, const char *path);
/* A new model rebuilt from a file em_model_save wrote, its weights loaded, in the mode (train
 * or eval) it was saved in; NULL with an error on any problem, nothing left allocated. Every
 * type must be known, every setting one of its type's and in range (errors name the module and
 * the setting), and the tensors the settings imply are checked against the file before any is
 * allocated; then every name, shape and kind of dtype must match (a floating tensor is not read
 * from a bool or integer one). Tensors under names that start with "ember." (a training
 * checkpoint's optimizer state) are not the model's and are passed by. */
em_module *em_model_load(const char *path);

/* A deep copy of m's tree (PyTorch's copy.deepcopy(model)) made as em_model_load makes a model:
 * each module rebuilt from its type's settings and build with its children's copies, then
 * every parameter and buffer copied in (dtype, device, values, requires_grad; no gradient), each
 * module's train/eval mode kept. A type need not be registered, but needs a build (a user's type
 * without one, or a pruned layer, is an error naming the module); a checkpointed module is
 * copied as the module it wraps. NULL with an error, nothing left allocated. */
em_module *em_module_clone(const em_module *m);

/* Adds t (it must outlive every save and load) to the types em_model_save and em_model_load
 * know: a type with a name, its settings and build; a name already known is EM_ERR_ARG. */
em_status em_model_register_type(const em_module_type *t);
/* The types files know, built-in and registered: the count, up to max written to out. */
int em_model_types(const em_module_type **out, int max);

#ifdef __cplusplus
}
#endif

#endif
