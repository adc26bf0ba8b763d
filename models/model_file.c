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

/* m's node, or NULL with an error naming the module that cannot be saved. */
static json_t *save_node(const em_module *m, const char *path, const char *file)
{
    const em_module_type *own = em_module_own_type(m);
    const em_model_type *d = em_model_type_of(own);
    if (!d) {
        em_set_error(EM_ERR_ARG, "em_model_save: %s: module '%s' is a %s, a type whole-model "
                     "files do not know (em_model_register_type adds one)", file,
                     em_model_module_name(path),
                     own->type_name);
        return NULL;
    }
    json_t *node = json_object(), *settings = json_object();
    em_model_settings s = {settings, file, path, own->type_name};
    bool ok = node && settings && !json_object_set_new(node, "type",
                                                       json_string(own->type_name));
    ok = ok && !json_object_set(node, "settings", settings) && d->save(m, &s) == EM_OK;
    json_t *kids = ok && d->container ? save_children(m, path, file) : NULL;
    ok = ok && (!d->container || (kids && !json_object_set_new(node, "children", kids)));
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
