/* Whole-model files: one safetensors file that holds a model's module tree (each module's type
 * and the settings it was made with, as JSON in the metadata entry "ember.model") beside its
 * weights, so that em_model_load rebuilds the model without the architecture being declared
 * again. Every module type of nn/, models/ and quant/'s dynamic quantization is known; a
 * user's own type joins with em_model_register_type. Python's safetensors reads the weights. */
#ifndef EMBER_MODELS_MODEL_FILE_H
#define EMBER_MODELS_MODEL_FILE_H

#include "ember/nn/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Writes m's tree and its parameters and buffers (by dotted name, as em_module_save) to path,
 * atomically. A module of a type that is not registered is an error naming it and where it
 * sits; a checkpointed module is saved as the module it wraps (checkpointing is not saved). */
em_status em_model_save(const em_module *m, const char *path);
/* A new model rebuilt from a file em_model_save wrote, its weights loaded, in the mode (train
 * or eval) it was saved in; NULL with an error on any problem, nothing left allocated. Every
 * type must be known, every setting in range, and the tensors the settings imply are checked
 * against the file before any is allocated; then every name and shape must match. Tensors
 * under names that start with "ember." (a training checkpoint's optimizer state) are not the
 * model's and are passed by. */
em_module *em_model_load(const char *path);

/* A module's construction settings: named integers, reals and booleans. */
typedef struct em_model_settings em_model_settings;
em_status em_model_settings_set_int(em_model_settings *s, const char *key, int64_t v);
em_status em_model_settings_set_real(em_model_settings *s, const char *key, double v);
em_status em_model_settings_set_bool(em_model_settings *s, const char *key, bool v);
/* The setting key into *v: a missing key, a value of another kind, or one outside
 * [min, max] is an EM_ERR_IO naming the file, the module, the key and the value. */
em_status em_model_settings_int(const em_model_settings *s, const char *key, int64_t min,
                                int64_t max, int64_t *v);
em_status em_model_settings_real(const em_model_settings *s, const char *key, double min,
                                 double max, double *v);
em_status em_model_settings_bool(const em_model_settings *s, const char *key, bool *v);
/* Whether the file gives key: a setting added later reads its default from older files, and
 * one a type saves only when it applies (Embedding's padding_idx) may be absent. */
bool em_model_settings_has(const em_model_settings *s, const char *key);

/* How a module type is saved and rebuilt:
 *   static em_status block_save(const em_module *m, em_model_settings *s)
 *   { return em_model_settings_set_int(s, "width", ((const my_block *)m)->width); }
 *   static em_module *block_build(const em_model_settings *s, em_module **kids, int n)
 *   { int64_t w; return em_model_settings_int(s, "width", 1, 4096, &w) ? NULL : my_block_new(w); }
 *   static const em_model_type block_file = {&my_block_type, block_save, block_build, NULL, false};
 *   em_model_register_type(&block_file); */
typedef struct {
    const em_module_type *module_type; /* the modules it saves: their type_name names it */
    em_status (*save)(const em_module *m, em_model_settings *s); /* m's settings into s */
    /* A new module from s and, for a container, its n children (rebuilt from the file, in
     * the order saved; ownership taken, freed on failure); NULL with an error. */
    em_module *(*build)(const em_model_settings *s, em_module **children, int n);
    /* How many parameter and buffer elements build will allocate for s, read before it runs
     * and checked against the file; -1 with an error for bad settings. NULL: not checked. */
    double (*tensor_elements)(const em_model_settings *s);
    bool container; /* its children are saved in the file and handed to build; otherwise they
                       are the ones build makes */
} em_model_type;
/* Adds t (it must outlive every save and load) to the types em_model_save and em_model_load
 * know; a name already known, or a second entry for the same module type, is EM_ERR_ARG. */
em_status em_model_register_type(const em_model_type *t);

#ifdef __cplusplus
}
#endif

#endif
