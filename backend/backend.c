/* Which backend serves a device. */
#include "backend/backend.h"

const em_backend *em_backend_get(em_device dev)
{
    switch (dev) {
    case EM_CPU:
        return em_backend_cpu();
    case EM_CUDA:
        return em_backend_cuda();
    default:
        return NULL;
    }
}
