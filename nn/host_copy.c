/* Host copies of tensors for the layers that compute on the CPU side (pruning, quantization). */
#include "nn/nn_internal.h"

float *em_host_f32(const em_tensor *t, const char *fn)
{
    float *v = em_copy_to_host_new(t, EM_F32);
    if (!v)
        em_error_prefix(fn);
    return v;
}
