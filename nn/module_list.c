/* ModuleList: children "0", "1", ... held and saved like any others, with no forward of its own;
 * the module that owns it runs them (em_module_child(m, "blocks.3")). */
#include <stdarg.h>

#include "nn/nn_internal.h"

EM_MODULE_TYPE(em_module_list_type) = {
    .type_name = "ModuleList",
    .traits = EM_TRAIT_CONTAINER,
    .build = em_module_build_numbered,
};

em_module *em_module_list_append(em_module *list, em_module *m)
{
    return em_module_append_numbered(list, &em_module_list_type, m,
                                     "em_module_list_append");
}

em_module *em_module_list(int n, ...)
{
    va_list ap;
    va_start(ap, n);
    em_module *list = em_module_numbered(&em_module_list_type, n, ap, "em_module_list");
    va_end(ap);
    return list;
}
