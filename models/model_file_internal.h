/* What the whole-model file's sources share (models/model_*.c): the registry, a module's
 * settings as JSON, the file's constants. Not installed. */
#ifndef EMBER_MODELS_MODEL_FILE_INTERNAL_H
#define EMBER_MODELS_MODEL_FILE_INTERNAL_H

#include "io/json_internal.h"
#include "models/model_file.h"

/* The registered type of that name; NULL when none. */
const em_module_type *em_model_type_named(const char *name);
/* Every module type a library source declares (EM_MODULE_TYPE), NULL-terminated; written by
 * the build (module_types.c). */
extern const em_module_type *const em_builtin_module_types[];

#define EM_MODEL_META_KEY "ember.model" /* the metadata entry that holds the tree */
/* m's tree as that entry's text (malloc'd), or NULL with an error naming what cannot be saved;
 * file names the file in errors. */
char *em_model_tree_text(const em_module *m, const char *file);
#define EM_MODEL_FORMAT_VERSION 1
#define EM_MODEL_PATH_CHARS 512 /* a module's dotted name in errors, cut to fit */

/* Where a module sits, for errors: the file and its dotted name ("" for the root). */
typedef struct {
    const char *file, *path;
} em_model_place;

/* out = parent's dotted name joined with a child's name */
static inline void em_model_child_path(char out[EM_MODEL_PATH_CHARS], const char *parent,
                                       const char *name)
{
    snprintf(out, EM_MODEL_PATH_CHARS, "%s%s%s", parent, *parent ? "." : "", name);
}

/* How errors name the module at path: its dotted name, or "(root)". */
static inline const char *em_model_module_name(const char *path)
{
    return *path ? path : "(root)";
}

/* A module's settings as a JSON object (models/model_settings.c): type's settings read from
 * options into obj, or the other way with every value checked (kind, range, the type's check)
 * and every key of obj one of the type's; errors name the file, the module and the setting. */
em_status em_model_settings_write(const em_module_type *type, const void *options, json_t *obj,
                                  em_model_place at);
em_status em_model_settings_read(const em_module_type *type, const json_t *obj, void *options,
                                 em_model_place at);

#endif
