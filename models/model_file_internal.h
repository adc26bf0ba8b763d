/* What the whole-model file's sources share (models/model_*.c): the settings object, the
 * registry and the built-in types. Not installed. */
#ifndef EMBER_MODELS_MODEL_FILE_INTERNAL_H
#define EMBER_MODELS_MODEL_FILE_INTERNAL_H

#include "io/json_internal.h"
#include "models/model_file.h"

/* Settings while saving (obj filled) or loading (obj read); the rest names them in errors. */
struct em_model_settings {
    json_t *obj;        /* the JSON object "settings" of one module */
    const char *file;   /* the model file */
    const char *module; /* the module's dotted name, "" for the root */
    const char *type;   /* its type name */
};

/* The registered type of that name, or of that module type; NULL when none. */
const em_model_type *em_model_type_named(const char *name);
const em_model_type *em_model_type_of(const em_module_type *t);

/* The built-in types, in three tables (models/model_types_nn.c: containers, layers and
 * activations; models/model_types_norm.c: the normalisation layers; models/model_types_seq.c:
 * recurrent, attention, GPT and quantized; models/model_types_resample.c: Upsample and Pad). */
extern const em_model_type *const em_model_layer_types[];
extern const int em_model_layer_type_count;
extern const em_model_type *const em_model_norm_types[];
extern const int em_model_norm_type_count;
extern const em_model_type *const em_model_sequence_types[];
extern const int em_model_sequence_type_count;
extern const em_model_type *const em_model_resample_types[];
extern const int em_model_resample_type_count;

#define EM_MODEL_META_KEY "ember.model" /* the metadata entry that holds the tree */
/* m's tree as that entry's text (malloc'd), or NULL with an error naming what cannot be saved;
 * file names the file in errors. */
char *em_model_tree_text(const em_module *m, const char *file);
#define EM_MODEL_FORMAT_VERSION 1
#define EM_MODEL_PATH_CHARS 512 /* a module's dotted name in errors, cut to fit */

/* out = parent's dotted name joined with a child's name */
static inline void em_model_child_path(char out[EM_MODEL_PATH_CHARS], const char *parent,
                                       const char *name)
{
    snprintf(out, EM_MODEL_PATH_CHARS, "%s%s%s", parent, *parent ? "." : "", name);
}

/* A real setting that may be null (Python's None): set_none writes null under key; reading,
 * *none says whether it is null, else *v is read as em_model_settings_real reads it. */
em_status em_model_settings_set_none(em_model_settings *s, const char *key);
em_status em_model_settings_real_or_none(const em_model_settings *s, const char *key,
                                         double min, double max, double *v, bool *none);

/* Linear's settings (in_features, out_features, bias), which QuantizedLinear shares: from w
 * (out, in), read back, and the elements they make (models/model_types_nn.c). */
em_status em_model_save_linear(const em_tensor *w, bool bias, em_model_settings *s);
em_status em_model_read_linear(const em_model_settings *s, int64_t *in, int64_t *out,
                               bool *bias);
double em_model_linear_elements(const em_model_settings *s);

/* How errors name the module at path: its dotted name, or "(root)". */
static inline const char *em_model_module_name(const char *path)
{
    return *path ? path : "(root)";
}

/* The limit on every size setting of the built-in types: 2^31 - 1. */
#define EM_MODEL_MAX_SIZE 2147483647LL

#endif
