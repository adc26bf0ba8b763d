/* em_model_save and em_model_load: the module tree as JSON in a safetensors file's metadata
 * ("ember.model": {"version": 1, "training": bool, "model": NODE}, each NODE {"type": NAME,
 * "settings": {...}} plus, for a container, "children": {"name": NODE, ...}) beside the weights
 * by dotted name. Loading checks the whole tree, then what its settings imply against the
 * file's tensors, before it builds anything. */
#include <stdlib.h>
#include <string.h>

#include "export/serialize.h"
#include "models/model_file_internal.h"
#include "models/model_file_meta.h"
#include "nn/nn_internal.h"

static json_t *save_node(const em_module *m, const char *path, const char *file);

static json_t *save_children(const em_module *m, const char *path, const char *file)
{
    json_t *kids = json_object();
    for (int i = 0; kids && i < m->n_children; i++) {
        char sub[EM_MODEL_PATH_CHARS];
        em_model_child_path(sub, path, m->children[i].name);
        json_t *node = save_node(m->children[i].module, sub, file);
        if (!node || json_object_set_new(kids, m->children[i].name, node)) {
            json_decref(kids);
            return NULL;
        }
    }
    return kids;
}

/* Whether m's own type is one files know and can rebuild. */
static bool savable(const em_module *m)
{
    const em_module_type *own = em_module_own_type(m);
    return em_model_type_named(own->type_name) == own && m->type->build;
}

bool em_model_describable(const em_module *m)
{
    bool container = em_module_own_type(m)->traits & EM_TRAIT_CONTAINER;
    for (int i = 0; savable(m) && container && i < m->n_children; i++)
        if (!em_model_describable(m->children[i].module))
            return false;
    return savable(m);
}

/* m's node, or NULL with an error naming the module that cannot be saved. */
static json_t *save_node(const em_module *m, const char *path, const char *file)
{
    const em_module_type *own = em_module_own_type(m);
    if (!savable(m)) {
        em_set_error(EM_ERR_ARG, "em_model_save: %s: module '%s' is a %s, a type whole-model "
                     "files %s", file, em_model_module_name(path), own->type_name,
                     m->type->build ? "do not know (em_model_register_type adds one)"
                                    : "cannot rebuild (a pruned layer: em_prune_remove it)");
        return NULL;
    }
    bool container = own->traits & EM_TRAIT_CONTAINER;
    json_t *node = json_object(), *settings = json_object();
    bool ok = node && settings && !json_object_set_new(node, "type",
                                                       json_string(own->type_name));
    ok = ok && !json_object_set(node, "settings", settings) &&
         em_model_settings_write(own, em_module_options(m), settings,
                                 (em_model_place){file, path}) == EM_OK;
    json_t *kids = ok && container ? save_children(m, path, file) : NULL;
    ok = ok && (!container || (kids && !json_object_set_new(node, "children", kids)));
    json_decref(settings);
    if (!ok) {
        if (!em_has_error())
            em_set_error(EM_ERR_MEMORY, "em_model_save: out of memory");
        json_decref(node);
        return NULL;
    }
    return node;
}

char *em_model_tree_text(const em_module *m, const char *file)
{
    json_t *model = save_node(m, "", file);
    json_t *root = model ? json_pack("{s:i, s:b, s:o}", "version", EM_MODEL_FORMAT_VERSION,
                                     "training", m->training, "model", model) : NULL;
    /* 17 significant digits: every real setting reads back as the same double */
    char *text = root ? json_dumps(root, JSON_COMPACT | JSON_REAL_PRECISION(17)) : NULL;
    json_decref(root);
    if (!text && !em_has_error())
        em_set_error(EM_ERR_MEMORY, "em_model_save: out of memory");
    return text;
}

em_status em_model_save(const em_module *m, const char *path)
{
    return em_model_save_meta(m, path, NULL, 0);
}
