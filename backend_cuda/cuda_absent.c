/* Built instead of the CUDA backend when ember is configured without the CUDA toolkit. */
#include "backend/backend.h"

const em_backend *em_backend_cuda(void)
{
    return NULL;
}
