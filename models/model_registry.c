/* The module types whole-model files know: the built-in tables, then the ones users register
 * (a fixed number, guarded by a mutex; lookups see every registration made before them). */
#include <pthread.h>
#include <string.h>

#include "models/model_file_internal.h"

#define MAX_USER_TYPES 64

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static const em_model_type *user_types[MAX_USER_TYPES];
static int n_user_types;

/* The first type that has module type t (when t) or whose name is name. */
static const em_model_type *find(const em_module_type *t, const char *name)
{
    const struct {
        const em_model_type *const *types;
        int n;
    } tables[] = {{em_model_layer_types, em_model_layer_type_count},
                  {em_model_norm_types, em_model_norm_type_count},
                  {em_model_sequence_types, em_model_sequence_type_count},
                  {em_model_resample_types, em_model_resample_type_count},
                  {user_types, n_user_types}};
    for (size_t k = 0; k < sizeof tables / sizeof *tables; k++)
        for (int i = 0; i < tables[k].n; i++) {
            const em_model_type *d = tables[k].types[i];
            if (t ? d->module_type == t : !strcmp(d->module_type->type_name, name))
                return d;
        }
    return NULL;
}

static const em_model_type *find_locked(const em_module_type *t, const char *name)
{
    pthread_mutex_lock(&lock);
    const em_model_type *d = find(t, name);
    pthread_mutex_unlock(&lock);
    return d;
}

const em_model_type *em_model_type_named(const char *name)
{
    return name ? find_locked(NULL, name) : NULL;
}

const em_model_type *em_model_type_of(const em_module_type *t)
{
    return t ? find_locked(t, NULL) : NULL;
}

em_status em_model_register_type(const em_model_type *t)
{
    if (!t || !t->module_type || !t->module_type->type_name || !*t->module_type->type_name ||
        !t->save || !t->build)
        return em_set_error(EM_ERR_ARG, "em_model_register_type: a type needs a module type "
                            "with a name, save and build");
    const char *name = t->module_type->type_name;
    em_status st = EM_OK;
    pthread_mutex_lock(&lock);
    if (find(t->module_type, NULL) || find(NULL, name))
        st = em_set_error(EM_ERR_ARG, "em_model_register_type: '%s' is already known", name);
    else if (n_user_types == MAX_USER_TYPES)
        st = em_set_error(EM_ERR_ARG, "em_model_register_type: '%s': at most %d types may be "
                          "registered", name, MAX_USER_TYPES);
    else
        user_types[n_user_types++] = t;
    pthread_mutex_unlock(&lock);
    return st;
}
