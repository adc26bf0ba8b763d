/* The module types whole-model files know: the built-in ones (every EM_MODULE_TYPE of the
 * library, listed by the build), then the ones users register (a fixed number, guarded by a
 * mutex; lookups see every registration made before them). */
#include <pthread.h>
#include <string.h>

#include "models/model_file_internal.h"

#define MAX_USER_TYPES 64

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static const em_module_type *user_types[MAX_USER_TYPES];
static int n_user_types;

static int builtin_count(void)
{
    int n = 0;
    while (em_builtin_module_types[n])
        n++;
    return n;
}

/* The type number i of the built-in ones and then the registered ones, or NULL past them. */
static const em_module_type *type_at(int i)
{
    int builtins = builtin_count();
    if (i < builtins)
        return em_builtin_module_types[i];
    return i - builtins < n_user_types ? user_types[i - builtins] : NULL;
}

static const em_module_type *find(const char *name)
{
    const em_module_type *t;
    for (int i = 0; (t = type_at(i)); i++)
        if (!strcmp(t->type_name, name))
            return t;
    return NULL;
}

const em_module_type *em_model_type_named(const char *name)
{
    if (!name)
        return NULL;
    pthread_mutex_lock(&lock);
    const em_module_type *t = find(name);
    pthread_mutex_unlock(&lock);
    return t;
}

int em_model_types(const em_module_type **out, int max)
{
    pthread_mutex_lock(&lock);
    int n = 0;
    for (const em_module_type *t; (t = type_at(n)); n++)
        if (n < max && out)
            out[n] = t;
    pthread_mutex_unlock(&lock);
    return n;
}

em_status em_model_register_type(const em_module_type *t)
{
    if (!t || !t->type_name || !*t->type_name || !t->build ||
        (t->n_settings && (!t->settings || !t->options_size)))
        return em_set_error(EM_ERR_ARG, "em_model_register_type: a type needs a name, build, "
                            "and for its settings an options struct");
    em_status st = EM_OK;
    pthread_mutex_lock(&lock);
    if (find(t->type_name))
        st = em_set_error(EM_ERR_ARG, "em_model_register_type: '%s' is already known",
                          t->type_name);
    else if (n_user_types == MAX_USER_TYPES)
        st = em_set_error(EM_ERR_ARG, "em_model_register_type: '%s': at most %d types may be "
                          "registered", t->type_name, MAX_USER_TYPES);
    else
        user_types[n_user_types++] = t;
    pthread_mutex_unlock(&lock);
    return st;
}
