/* The cuDNN entries of a build without cuDNN (CMake did not find it, or -DEMBER_CUDNN=OFF): every
 * convolution runs ember's own kernels (cuda_conv.cu). */
#include <stdio.h>

#include "backend_cuda/cuda_internal.h"

void em_cudnn_describe(char *buf, size_t n)
{
    snprintf(buf, n, "built without cuDNN");
}

int em_cudnn_conv2d(const em_conv2d_shape *s, em_dtype dt, const void *x, const void *w,
                    const void *bias, void *y)
{
    (void)s, (void)dt, (void)x, (void)w, (void)bias, (void)y;
    return EM_KERNEL_UNSUPPORTED;
}

int em_cudnn_conv2d_grad_input(const em_conv2d_shape *s, em_dtype dt, const void *gy,
                               const void *w, void *gx)
{
    (void)s, (void)dt, (void)gy, (void)w, (void)gx;
    return EM_KERNEL_UNSUPPORTED;
}

int em_cudnn_conv2d_grad_weight(const em_conv2d_shape *s, em_dtype dt, const void *gy,
                                const void *x, void *gw, void *gbias)
{
    (void)s, (void)dt, (void)gy, (void)x, (void)gw, (void)gbias;
    return EM_KERNEL_UNSUPPORTED;
}
