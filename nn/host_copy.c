/* Host copies of tensors for the layers that compute on the CPU side (pruning, quantization). */
#include <stdlib.h>

#include "nn/nn_internal.h"

float *em_host_f32(const em_tensor *t, const char *fn)
{
    int64_t n = em_numel(t);
    float *v = malloc(sizeof *v * (size_t)(n ? n : 1));
    if (!v) {
        em_set_error(EM_ERR_MEMORY, "%s: out of memory", fn);
        return NULL;
    }
    if (em_copy_to_host(t, EM_F32, v) != EM_OK) {
        free(v);
        return NULL;
    }
    return v;
}
