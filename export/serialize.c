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

static bool in_model(const em_st_entry *entries, int n, const char *name)
{
    for (int j = 0; j < n; j++)
        if (!strcmp(name, entries[j].name))
            return true;
    return false;
}

em_status em_module_load(em_module *m, const char *path)
{
    int n;
    em_st_entry *entries = state_entries(m, "em_module_load", &n);
    if (!entries)
        return em_error_status();
    em_safetensors *st = NULL;
    em_status status = em_safetensors_load(path, &st);
    for (int i = 0; status == EM_OK && st->n_tensors != n && i < st->n_tensors; i++)
        if (!in_model(entries, n, st->names[i]))
            status = em_set_error(EM_ERR_ARG, "em_module_load: %s: '%s' is not in the model",
                                  path, st->names[i]);
    em_safetensors_free(st);
    if (status == EM_OK)
        status = em_safetensors_load_into(path, entries, n);
    free(entries);
    return status;
}

/* Appends a copy of name to the list (*n entries); false when out of memory. */
static bool add_name(char ***list, int *n, const char *name)
{
    char **grown = realloc(*list, sizeof *grown * (size_t)(*n + 1));
    if (!grown)
        return false;
    *list = grown;
    return (grown[*n] = strdup(name)) != NULL && ++*n;
}

/* The model's tensors the file lacks or holds in another shape, and the file's the model lacks,
 * into r. */
static em_status report_entries(const em_st_entry *entries, int n, const em_safetensors *st,
                                em_load_report *r)
{
    bool ok = true;
    for (int j = 0; j < n && ok; j++) {
        const em_tensor *t = em_safetensors_get(st, entries[j].name);
        if (!t)
            ok = add_name(&r->missing, &r->n_missing, entries[j].name);
        else if (!em_same_shape(t, entries[j].tensor))
            ok = add_name(&r->mismatched, &r->n_mismatched, entries[j].name);
    }
    for (int i = 0; i < st->n_tensors && ok; i++)
        if (!in_model(entries, n, st->names[i]))
            ok = add_name(&r->unexpected, &r->n_unexpected, st->names[i]);
    return ok ? EM_OK : em_set_error(EM_ERR_MEMORY, "em_module_load_matching: out of memory");
}

em_status em_module_load_matching(em_module *m, const char *path, em_load_report *report)
{
    em_load_report r = {0};
    int n;
    em_st_entry *entries = state_entries(m, "em_module_load_matching", &n);
    if (!entries)
        return em_error_status();
    em_safetensors *st = NULL;
    em_status status = em_safetensors_load(path, &st);
    if (status == EM_OK) /* the report first, so that running out of memory changes nothing */
        status = report_entries(entries, n, st, &r);
    for (int j = 0; j < n && status == EM_OK; j++) {
        const em_tensor *t = em_safetensors_get(st, entries[j].name);
        if (t && em_same_shape(t, entries[j].tensor))
            status = em_copy_(entries[j].tensor, t);
    }
    em_safetensors_free(st);
    free(entries);
    if (status == EM_OK && report)
        *report = r;
    else
        em_load_report_free(&r);
    return status;
}

static void free_names(char **names, int n)
{
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

void em_load_report_free(em_load_report *report)
{
    if (!report)
        return;
    free_names(report->missing, report->n_missing);
    free_names(report->unexpected, report->n_unexpected);
    free_names(report->mismatched, report->n_mismatched);
    *report = (em_load_report){0};
}
