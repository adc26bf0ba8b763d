/* Moving a module to a device: every parameter and buffer moves in place, so the tensors a caller
 * already holds (em_module_find, em_module_parameters) stay valid. Build optimizers after the
 * move: their state lives on the parameters' device from the start. */
#include "nn/nn_internal.h"

static em_status move_tree(em_module *m, em_device device)
{
    for (int i = 0; i < m->n_params; i++)
        if (em_to_device_(m->params[i].value, device) != EM_OK)
            return em_error_status();
    for (int i = 0; i < m->n_buffers; i++)
        if (em_to_device_(m->buffers[i].value, device) != EM_OK)
            return em_error_status();
    for (int i = 0; i < m->n_children; i++)
        if (move_tree(m->children[i].module, device) != EM_OK)
            return em_error_status();
    return EM_OK;
}

em_status em_module_to(em_module *m, em_device device)
{
    if (!m)
        return em_set_error(EM_ERR_ARG, "em_module_to: NULL module");
    if ((unsigned)device >= EM_NDEVICES)
        return em_set_error(EM_ERR_ARG, "em_module_to: device invalid");
    if (!em_device_available(device))
        return em_set_error(EM_ERR_UNSUPPORTED, "em_module_to: no %s device is available (ember "
                            "was built without its backend, or no device and driver were found)",
                            em_device_name(device));
    /* a probe allocation finds a device that cannot allocate before anything moves */
    em_tensor *probe = em_empty_on(EM_SHAPE(1), EM_F32, device);
    if (!probe)
        return em_error_status();
    em_release(probe);
    return move_tree(m, device);
}

em_device em_module_device(const em_module *m)
{
    em_param_ref first;
    if (m && em_module_parameters(m, &first, 1) > 0)
        return first.value->device;
    if (m && em_module_buffers(m, &first, 1) > 0)
        return first.value->device;
    return EM_CPU;
}
