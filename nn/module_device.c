/* Moving a module to a device, or its floating tensors to another dtype: every parameter and
 * buffer changes in place, so the tensors a caller already holds (em_module_find,
 * em_module_parameters) stay valid. Build optimizers after the change: their state lives on the
 * parameters' device and in their dtype from the start. */
#include "nn/nn_internal.h"

/* f(t, to) on every parameter and buffer of m's tree, in place; the first error stops it */
static em_status each_tensor(em_module *m, em_status (*f)(em_tensor *t, int to), int to)
{
    for (int i = 0; i < m->n_params; i++)
        if (f(m->params[i].value, to) != EM_OK)
            return em_error_status();
    for (int i = 0; i < m->n_buffers; i++)
        if (f(m->buffers[i].value, to) != EM_OK)
            return em_error_status();
    for (int i = 0; i < m->n_children; i++)
        if (each_tensor(m->children[i].module, f, to) != EM_OK)
            return em_error_status();
    return EM_OK;
}

static em_status move(em_tensor *t, int device)
{
    return em_to_device_(t, (em_device)device);
}

/* a floating tensor to dtype; the others (integer buffers, masks) stay */
static em_status convert_float(em_tensor *t, int dtype)
{
    return em_dtype_is_float(t->dtype) ? em_to_dtype_(t, (em_dtype)dtype) : EM_OK;
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
    return each_tensor(m, move, device);
}

em_status em_module_to_dtype(em_module *m, em_dtype dtype)
{
    if (!m)
        return em_set_error(EM_ERR_ARG, "em_module_to_dtype: NULL module");
    if ((unsigned)dtype >= EM_NDTYPES || !em_dtype_is_float(dtype))
        return em_set_error(EM_ERR_ARG, "em_module_to_dtype: a module's floating tensors take a "
                            "floating dtype, not %s", (unsigned)dtype < EM_NDTYPES
                                                         ? em_dtype_name(dtype) : "an invalid one");
    return each_tensor(m, convert_float, dtype);
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
