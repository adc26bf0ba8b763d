/* Whole-model files with the caller's metadata, and the tree as a metadata entry
 * (models/model_file_meta.h; em_model_describable is beside em_model_save). */
#include <stdlib.h>
#include <string.h>

#include "export/serialize.h"
#include "models/model_file_internal.h"
#include "models/model_file_meta.h"

em_status em_model_tree_meta(const em_module *m, const char *file, em_st_meta *out)
{
    if (!m || !out)
        return em_set_error(EM_ERR_ARG, "em_model_tree_meta: NULL %s", m ? "output" : "module");
    char *text = em_model_tree_text(m, file ? file : "(no file)");
    if (!text)
        return em_error_status();
    *out = (em_st_meta){EM_MODEL_META_KEY, text};
    return EM_OK;
}

em_status em_model_save_meta(const em_module *m, const char *path, const em_st_meta *meta,
                             int n_meta)
{
    if (!m || !path || n_meta < 0 || (n_meta > 0 && !meta))
        return em_set_error(EM_ERR_ARG, "em_model_save: NULL %s", !m      ? "module"
                                                                   : !path ? "path"
                                                                           : "metadata");
    for (int i = 0; i < n_meta; i++)
        if (!meta[i].key || !meta[i].value || !strncmp(meta[i].key, "ember.", 6))
            return em_set_error(EM_ERR_ARG, "em_model_save: metadata key '%s' is %s",
                                meta[i].key ? meta[i].key : "(null)",
                                meta[i].key && meta[i].value ? "the library's (ember.)"
                                                             : "without a value");
    em_st_meta *all = malloc(sizeof *all * (size_t)(n_meta + 1));
    if (!all)
        return em_set_error(EM_ERR_MEMORY, "em_model_save: out of memory");
    em_status st = em_model_tree_meta(m, path, &all[n_meta]);
    if (st == EM_OK) {
        if (n_meta)
            memcpy(all, meta, sizeof *all * (size_t)n_meta);
        st = em_module_save(m, path, all, n_meta + 1);
        free((char *)all[n_meta].value);
    }
    free(all);
    return st;
}
