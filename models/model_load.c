/* em_model_load: a whole-model file's tree checked (types known, structure, depth, module
 * count, the tensor elements its settings imply against the file's), then built, then its
 * weights copied in by name and shape; all or nothing. */
#include <stdlib.h>
#include <string.h>

#include "models/model_file_internal.h"
#include "nn/nn_internal.h"
#include "export/serialize.h"
#include "quant/quantize.h"

#define MAX_DEPTH 64       /* modules nested deeper than this are refused */
#define MAX_MODULES 100000 /* and trees with more modules */

typedef struct {
    const char *file;
    int modules;
    double elements; /* parameter and buffer elements the settings imply */
} tree_walk;

static em_status corrupt(const tree_walk *w, const char *path, const char *what)
{
    return em_set_error(EM_ERR_IO, "em_model_load: %s: module '%s': %s", w->file,
                        em_model_module_name(path), what);
}

/* node's type (known) and settings, or NULL with an error. */
static const em_model_type *node_type(const tree_walk *w, const json_t *node, const char *path,
                                      em_model_settings *s)
{
    const char *name = json_string_value(json_object_get(node, "type"));
    json_t *settings = json_object_get(node, "settings");
    if (!json_is_object(node) || !name || !json_is_object(settings)) {
        corrupt(w, path, "expected {\"type\": NAME, \"settings\": {...}}");
        return NULL;
    }
    const em_model_type *d = em_model_type_named(name);
    if (!d) {
        em_set_error(EM_ERR_IO, "em_model_load: %s: module '%s' is a '%.64s', a type ember does "
                     "not know (em_model_register_type adds one)", w->file,
                     em_model_module_name(path), name);
        return NULL;
    }
    json_t *kids = json_object_get(node, "children");
    if (d->container != (kids != NULL) || (kids && !json_is_object(kids))) {
        corrupt(w, path, d->container ? "a container needs an object \"children\""
                                      : "only a container has \"children\"");
        return NULL;
    }
    *s = (em_model_settings){settings, w->file, path, d->module_type->type_name};
    return d;
}

/* Checks node and every node below it; adds up their modules and elements. */
static em_status check_node(tree_walk *w, const json_t *node, const char *path, int depth)
{
    em_model_settings s;
    const em_model_type *d = node_type(w, node, path, &s);
    if (!d)
        return em_error_status();
    if (depth > MAX_DEPTH || ++w->modules > MAX_MODULES)
        return corrupt(w, path, "the tree is deeper or larger than ember loads");
    double n = d->tensor_elements ? d->tensor_elements(&s) : 0;
    if (n < 0)
        return em_error_status();
    w->elements += n;
    const char *name;
    json_t *kid;
    json_object_foreach(json_object_get(node, "children"), name, kid) {
        char sub[EM_MODEL_PATH_CHARS];
        em_model_child_path(sub, path, name);
        em_status st = check_node(w, kid, sub, depth + 1);
        if (st != EM_OK)
            return st;
    }
    return EM_OK;
}

static em_module *build_node(const tree_walk *w, const json_t *node, const char *path);

/* A container's children, built in the order saved, into a new array (*n of them). */
static em_module **build_children(const tree_walk *w, const json_t *node, const char *path,
                                  int *n)
{
    json_t *kids = json_object_get(node, "children");
    *n = (int)json_object_size(kids);
    em_module **out = calloc((size_t)(*n ? *n : 1), sizeof *out);
    if (!out) {
        em_set_error(EM_ERR_MEMORY, "em_model_load: out of memory");
        return NULL;
    }
    const char *name;
    json_t *kid;
    int i = 0;
    json_object_foreach(kids, name, kid) {
        char sub[EM_MODEL_PATH_CHARS];
        em_model_child_path(sub, path, name);
        if (!(out[i++] = build_node(w, kid, sub))) {
            for (int j = 0; j < i; j++)
                em_module_free(out[j]);
            free(out);
            return NULL;
        }
    }
    return out;
}

/* Whether m's children carry the names node saved them under (a container rebuilds them). */
static bool same_child_names(const em_module *m, const json_t *node)
{
    json_t *kids = json_object_get(node, "children");
    if (m->n_children != (int)json_object_size(kids))
        return false;
    const char *name;
    json_t *kid;
    int i = 0;
    json_object_foreach(kids, name, kid)
        if (strcmp(m->children[i++].name, name))
            return false;
    return true;
}

static em_module *build_node(const tree_walk *w, const json_t *node, const char *path)
{
    em_model_settings s;
    const em_model_type *d = node_type(w, node, path, &s);
    int n = 0;
    em_module **kids = d && d->container ? build_children(w, node, path, &n) : NULL;
    if (!d || (d->container && !kids))
        return NULL;
    em_module *m = d->build(&s, kids, n);
    free(kids);
    if (m && (m->type != d->module_type || (d->container && !same_child_names(m, node)))) {
        em_module_free(m);
        corrupt(w, path, "the module built is not the one saved");
        return NULL;
    }
    if (!m && !em_has_error())
        corrupt(w, path, "its type's build failed without saying why");
    return m;
}

/* Whether the file's tensor of that name is no model's: a name under "ember." (a training
 * checkpoint's optimizer state). */
static bool beside_model(const char *name)
{
    return !strncmp(name, "ember.", 6);
}

/* The file's tensors that are the model's. */
static int model_tensors(const em_safetensors *st)
{
    int n = 0;
    for (int i = 0; i < st->n_tensors; i++)
        n += !beside_model(st->names[i]);
    return n;
}

/* Copies st's tensors into m by name once every one of m's is found with its shape and the
 * file holds no others (beside those under "ember."). */
static em_status load_weights(em_module *m, const em_safetensors *st, const char *file)
{
    int n = em_module_state(m, NULL, 0);
    em_st_entry *e = n >= 0 ? malloc(sizeof *e * (size_t)(n ? n : 1)) : NULL;
    if (!e)
        return n < 0 ? em_error_status()
                     : em_set_error(EM_ERR_MEMORY, "em_model_load: out of memory");
    em_module_state(m, e, n);
    em_status status = EM_OK;
    for (int i = 0; i < n && status == EM_OK; i++) {
        const em_tensor *t = em_safetensors_get(st, e[i].name);
        char want[64], got[64];
        if (!t)
            status = em_set_error(EM_ERR_IO, "em_model_load: %s: the model's '%s' is not in "
                                  "the file", file, e[i].name);
        else if (!em_same_shape(t, e[i].tensor))
            status = em_set_error(EM_ERR_IO, "em_model_load: %s: the model's '%s' is %s, the "
                                  "file's %s", file, e[i].name,
                                  em_shape_str(e[i].tensor, want, sizeof want),
                                  em_shape_str(t, got, sizeof got));
    }
    if (status == EM_OK && model_tensors(st) != n)
        status = em_set_error(EM_ERR_IO, "em_model_load: %s: the file holds %d tensors, the "
                              "model %d", file, model_tensors(st), n);
    for (int i = 0; i < n && status == EM_OK; i++)
        status = em_copy_(e[i].tensor, em_safetensors_get(st, e[i].name));
    free(e);
    return status;
}

static double file_elements(const em_safetensors *st)
{
    double n = 0;
    for (int i = 0; i < st->n_tensors; i++)
        n += beside_model(st->names[i]) ? 0 : (double)em_numel(st->tensors[i]);
    return n;
}

/* The model st's tree describes, checked and built (weights not loaded yet). */
static em_module *build_tree(const em_safetensors *st, const char *file, bool *training)
{
    const char *text = em_safetensors_meta(st, EM_MODEL_META_KEY);
    if (!text) {
        em_set_error(EM_ERR_IO, "em_model_load: %s: no '%s' metadata: not a whole-model file "
                     "(em_module_load reads a file of weights)", file, EM_MODEL_META_KEY);
        return NULL;
    }
    json_t *root = em_json_parse("em_model_load", file, text, strlen(text));
    json_t *version = json_object_get(root, "version"), *model = json_object_get(root, "model");
    json_t *train = json_object_get(root, "training");
    tree_walk w = {.file = file};
    em_module *m = NULL;
    if (root && (!json_is_integer(version) || json_integer_value(version) !=
                 EM_MODEL_FORMAT_VERSION || !json_is_boolean(train) || !model))
        em_set_error(EM_ERR_IO, "em_model_load: %s: expected '%s' {\"version\": %d, "
                     "\"training\": BOOL, \"model\": {...}}", file, EM_MODEL_META_KEY,
                     EM_MODEL_FORMAT_VERSION);
    else if (root && check_node(&w, model, "", 0) == EM_OK) {
        if (w.elements > file_elements(st))
            em_set_error(EM_ERR_IO, "em_model_load: %s: the settings make %.0f tensor elements, "
                         "the file holds %.0f", file, w.elements, file_elements(st));
        else
            m = build_node(&w, model, "");
    }
    *training = json_is_true(train);
    json_decref(root);
    return m;
}

em_module *em_model_load(const char *path)
{
    if (!path) {
        em_set_error(EM_ERR_ARG, "em_model_load: NULL path");
        return NULL;
    }
    em_safetensors *st = NULL;
    if (em_safetensors_load(path, &st) != EM_OK)
        return NULL;
    bool training = false;
    em_module *m = build_tree(st, path, &training);
    em_status status = m ? load_weights(m, st, path) : em_error_status();
    em_safetensors_free(st);
    if (status == EM_OK && em_is_quantized(m))
        status = em_quantize_repack(m);
    if (status != EM_OK) {
        em_module_free(m);
        return NULL;
    }
    em_module_train(m, training);
    return m;
}
