/* Devices as users see them: whether one is there, what it is, waiting for it, and its math mode. */
#include <stdio.h>

#include "tensor/core_internal.h"

bool em_device_available(em_device device)
{
    return em_backend_get(device) != NULL;
}

/* What device's backend says of it in buf: its line, or (details) what that line leaves out;
 * "not available" without the device. */
static const char *about(em_device device, char *buf, size_t n, bool details)
{
    const em_backend *be = em_backend_get(device);
    void (*say)(char *, size_t) = !be ? NULL : details ? be->details : be->describe;
    if (!be)
        snprintf(buf, n, "not available");
    else if (say)
        say(buf, n);
    else
        snprintf(buf, n, "%s", details ? "" : be->name);
    return buf;
}

const char *em_device_describe(em_device device, char *buf, size_t n)
{
    return about(device, buf, n, false);
}

const char *em_device_details(em_device device, char *buf, size_t n)
{
    return about(device, buf, n, true);
}

em_status em_device_synchronize(em_device device)
{
    static const char fn[] = "em_device_synchronize";
    const em_backend *be = em_backend_get(device);
    if (!be)
        return em_set_error(EM_ERR_UNSUPPORTED, "%s: %s backend not available", fn,
                            em_device_name(device));
    int rc = be->synchronize();
    if (rc == EM_KERNEL_BAD_INDEX) /* raised by an earlier kernel on the device */
        return em_set_error(EM_ERR_ARG, "%s: a kernel on %s met an index out of range for its "
                            "dimension (index_select, gather, embedding or a loss's targets)", fn,
                            em_device_name(device));
    return em_kernel_status(rc, fn, NULL);
}

em_status em_set_tf32(bool on)
{
    for (int d = 0; d < EM_NDEVICES; d++) {
        const em_backend *be = em_backend_get((em_device)d);
        if (be && be->set_tf32 && em_kernel_status(be->set_tf32(on), "em_set_tf32", NULL) != EM_OK)
            return em_error_status();
    }
    return EM_OK;
}

em_status em_set_num_threads(int n)
{
    const em_backend *be = em_backend_get(EM_CPU);
    if (n < 1)
        return em_set_error(EM_ERR_ARG, "em_set_num_threads: %d threads; at least 1", n);
    return em_kernel_status(be->set_threads(n), "em_set_num_threads", NULL);
}

int em_get_num_threads(void)
{
    return em_backend_get(EM_CPU)->threads();
}

int em_get_active_threads(void)
{
    return em_backend_get(EM_CPU)->active_threads();
}
