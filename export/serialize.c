/* Model state to and from safetensors files. */
#include <stdlib.h>
#include <string.h>

#include "export/serialize.h"

int em_module_state(const em_module *m, em_st_entry *out, int max)
{
    int n_params = em_module_parameters(m, NULL, 0);
    int n_buffers = em_module_buffers(m, NULL, 0);
    if (n_params < 0 || n_buffers < 0)
        return -1;
    int n = n_params + n_buffers;
    if (!out)
        return n;
    em_param_ref *refs = malloc(sizeof *refs * (size_t)(n ? n : 1));
    if (!refs) {
        em_set_error(EM_ERR_MEMORY, "em_module_state: out of memory");
        return -1;
    }
    em_module_parameters(m, refs, n_params);
    em_module_buffers(m, refs + n_params, n_buffers);
    for (int i = 0; i < n && i < max; i++)
        out[i] = (em_st_entry){.name = refs[i].name, .tensor = refs[i].value};
    free(refs);
    return n;
}

static em_st_entry *state_entries(const em_module *m, const char *fn, int *n)
{
    if (!m) {
        em_set_error(EM_ERR_ARG, "%s: NULL module", fn);
        return NULL;
    }
    *n = em_module_state(m, NULL, 0);
    if (*n < 0)
        return NULL;
    em_st_entry *entries = malloc(sizeof *entries * (size_t)(*n ? *n : 1));
    if (!entries) {
        em_set_error(EM_ERR_MEMORY, "%s: out of memory", fn);
        return NULL;
    }
    em_module_state(m, entries, *n);
    return entries;
}

em_status em_module_save(const em_module *m, const char *path, const em_st_meta *meta, int n_meta)
{
    int n;
    em_st_entry *entries = state_entries(m, "em_module_save", &n);
    if (!entries)
        return em_error_status();
    em_status st = em_safetensors_save(path, entries, n, meta, n_meta);
    free(entries);
    return st;
}

em_status em_module_load(em_module *m, const char *path)
{
    int n;
    em_st_entry *entries = state_entries(m, "em_module_load", &n);
    if (!entries)
        return em_error_status();
    em_safetensors *st = NULL;
    em_status status = em_safetensors_load(path, &st);
    if (status == EM_OK && st->n_tensors != n) {
        for (int i = 0; i < st->n_tensors; i++) {
            bool known = false;
            for (int j = 0; j < n && !known; j++)
                known = !strcmp(st->names[i], entries[j].name);
            if (!known) {
                status = em_set_error(EM_ERR_ARG, "em_module_load: %s: '%s' is not in the model",
                                      path, st->names[i]);
                break;
            }
        }
    }
    em_safetensors_free(st);
    if (status == EM_OK)
        status = em_safetensors_load_into(path, entries, n);
    free(entries);
    return status;
}
