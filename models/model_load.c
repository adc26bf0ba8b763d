/* em_model_load: a whole-model file's tree checked (types known, structure, depth, module
 * count, the tensor elements its settings imply against the file's), then built, then its
 * weights copied in by name and shape; all or nothing. */
#include <stdlib.h>
#include <string.h>

#include "io/json_reader.h"
#include "models/model_file_internal.h"
#include "nn/nn_internal.h"
#include "export/serialize.h"
#include "quant/quantize.h"

#define MAX_DEPTH 64       /* modules nested deeper than this are refused */
#define MAX_MODULES 100000 /* and trees with more modules */

/* What a tree's text may hold, read with the bounded reader before a tree of it is built (one
 * takes ~77 times the text's size): each module's node, type, settings and children in
 * VALUES_PER_MODULE values, for at most MAX_MODULES modules and no more than FREE_MODULES
 * (activations, pooling, containers: modules without tensors) and MODULES_PER_TENSOR for each
 * tensor of the file; two levels of JSON a module and two for settings; names and strings of
 * at most MAX_STRING bytes. */
#define VALUES_PER_MODULE 32
#define FREE_MODULES 1024
#define MODULES_PER_TENSOR 4
#define MAX_STRING 4096
#define MAX_JSON_DEPTH (2 * MAX_DEPTH + 4)
_Static_assert(MAX_JSON_DEPTH <= EM_JSON_MAX_DEPTH, "the reader nests as deep as a tree may");

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

/* node's type (known), with its settings read into a new options struct *options (the
 * caller frees it), or NULL with an error. */
static const em_module_type *node_type(const tree_walk *w, const json_t *node, const char *path,
                                       void **options)
{
    const char *name = json_string_value(json_object_get(node, "type"));
    json_t *settings = json_object_get(node, "settings");
    if (!json_is_object(node) || !name || !json_is_object(settings)) {
        corrupt(w, path, "expected {\"type\": NAME, \"settings\": {...}}");
        return NULL;
    }
    const em_module_type *t = em_model_type_named(name);
    if (!t) {
        em_set_error(EM_ERR_IO, "em_model_load: %s: module '%s' is a '%.64s', a type ember does "
                     "not know (em_model_register_type adds one)", w->file,
                     em_model_module_name(path), name);
        return NULL;
    }
    bool container = t->traits & EM_TRAIT_CONTAINER;
    json_t *kids = json_object_get(node, "children");
    if (container != (kids != NULL) || (kids && !json_is_object(kids))) {
        corrupt(w, path, container ? "a container needs an object \"children\""
                                   : "only a container has \"children\"");
        return NULL;
    }
    *options = calloc(1, t->options_size ? t->options_size : 1);
    if (!*options) {
        em_set_error(EM_ERR_MEMORY, "em_model_load: out of memory");
        return NULL;
    }
    if (em_model_settings_read(t, settings, *options, (em_model_place){w->file, path}) != EM_OK) {
        free(*options);
        return NULL;
    }
    return t;
}

/* Checks node and every node below it; adds up their modules and elements. */
static em_status check_node(tree_walk *w, const json_t *node, const char *path, int depth)
{
    void *options;
    const em_module_type *t = node_type(w, node, path, &options);
    if (!t)
        return em_error_status();
    double n = t->tensor_elements ? t->tensor_elements(options) : 0;
    free(options);
    if (depth > MAX_DEPTH || ++w->modules > MAX_MODULES)
        return corrupt(w, path, "the tree is deeper or larger than ember loads");
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
    void *options = NULL;
    const em_module_type *t = node_type(w, node, path, &options);
    bool container = t && (t->traits & EM_TRAIT_CONTAINER);
    int n = 0;
    em_module **kids = container ? build_children(w, node, path, &n) : NULL;
    bool built = t && (!container || kids); /* else the error is the type's or a child's */
    em_module *m = built ? t->build(t, options, kids, n) : NULL;
    free(kids);
    free(options);
    if (m && (m->type != t || (container && !same_child_names(m, node)))) {
        em_module_free(m);
        corrupt(w, path, "the module built is not the one saved");
        return NULL;
    }
    if (!m && built) { /* the build's own error, named by the module's place */
        char why[512];
        snprintf(why, sizeof why, "%s", em_has_error() ? em_error() : "its build failed");
        corrupt(w, path, why);
    }
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

/* Whether a tensor of dtype want is read from one of dtype got: floating from floating (of any
 * width), any other dtype from itself. */
static bool same_kind(em_dtype want, em_dtype got)
{
    return em_dtype_is_float(want) ? em_dtype_is_float(got) : want == got;
}

/* Copies st's tensors into m by name once every one of m's is found with its shape and kind of
 * dtype and the file holds no others (beside those under "ember."). */
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
        else if (!same_kind(e[i].tensor->dtype, t->dtype))
            status = em_set_error(EM_ERR_IO, "em_model_load: %s: the model's '%s' is %s, the "
                                  "file's %s (a floating tensor is read from a floating one, "
                                  "any other from its own dtype)", file, e[i].name,
                                  em_dtype_name(e[i].tensor->dtype), em_dtype_name(t->dtype));
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

/* Reads the tree's text (n bytes) within the limits above for a file of st's tensors: EM_OK, or
 * an error naming the limit and the byte where it was passed, or what is malformed. */
static em_status check_tree_text(const em_safetensors *st, const char *file, const char *text,
                                 size_t n)
{
    double modules = FREE_MODULES + MODULES_PER_TENSOR * (double)st->n_tensors;
    int64_t values = (int64_t)(modules < MAX_MODULES ? modules : MAX_MODULES) * VALUES_PER_MODULE;
    em_json_reader r;
    em_json_reader_init(&r, "em_model_load", file, text, n,
                        (em_json_limits){.max_depth = MAX_JSON_DEPTH, .max_values = values,
                                         .max_string = MAX_STRING});
    em_json_token t;
    do
        t = em_json_next(&r);
    while (t != EM_JSON_END && t != EM_JSON_ERROR);
    em_json_reader_free(&r);
    if (t == EM_JSON_END || !r.over_limit)
        return em_error_status();
    char why[256];
    const char *at = strstr(em_error(), "at byte ");
    snprintf(why, sizeof why, "%s", at ? at : em_error());
    em_error_clear();
    return em_set_error(EM_ERR_IO, "em_model_load: %s: the tree is deeper or larger than ember "
                        "loads for a file of %d tensors (%s)", file, st->n_tensors, why);
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
    size_t n = strlen(text);
    if (check_tree_text(st, file, text, n) != EM_OK)
        return NULL;
    json_t *root = em_json_parse("em_model_load", file, text, n);
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
