/* Output sizes ops derive from their arguments, checked before anything is allocated: sliding
 * windows (convolution, pooling, transposed convolution; computed in 128 bits so that no option
 * can overflow them) and ops that resize one dim after another (padding, interpolation). */
#include "autograd/autograd_internal.h"

/* v when it is a size >= 1 that fits int64, else -1 */
static int64_t as_size(__int128 v)
{
    return v >= 1 && v <= INT64_MAX ? (int64_t)v : -1;
}

/* Whether a window of kernel taps dilation apart, over a dim of size `in` padded by pad on both
 * sides, has every position the kernels compute (in + 2 pad, the window's span) within int64. */
static bool positions_fit(int64_t in, int64_t kernel, int64_t pad, int64_t dilation)
{
    return (__int128)in + 2 * (__int128)pad <= INT64_MAX &&
           (__int128)dilation * (kernel - 1) + 1 <= INT64_MAX;
}

int64_t em_window_outputs(int64_t in, int64_t kernel, int64_t stride, int64_t pad,
                          int64_t dilation, bool ceil_mode)
{
    if (!positions_fit(in, kernel, pad, dilation))
        return -1;
    __int128 span = (__int128)in + 2 * (__int128)pad - (__int128)dilation * (kernel - 1) - 1;
    if (span < 0)
        return -1;
    __int128 out = (span + (ceil_mode ? stride - 1 : 0)) / stride + 1;
    if (ceil_mode && (out - 1) * stride >= (__int128)in + pad)
        out--;
    return as_size(out);
}

int64_t em_transposed_outputs(int64_t in, int64_t kernel, int64_t stride, int64_t pad,
                              int64_t dilation, int64_t output_padding)
{
    int64_t out = as_size(((__int128)in - 1) * stride - 2 * (__int128)pad +
                          (__int128)dilation * (kernel - 1) + output_padding + 1);
    return out > 0 && positions_fit(out, kernel, pad, dilation) ? out : -1;
}

bool em_check_kernel_size(const char *fn, const em_tensor *w /* (*, *, KH, KW) */)
{
    if (w->ndim != 4 || (w->shape[2] > 0 && w->shape[3] > 0))
        return true;
    char b[128];
    em_set_error(EM_ERR_ARG, "%s: kernel size %lldx%lld of w %s: must be at least 1", fn,
                 (long long)w->shape[2], (long long)w->shape[3], em_shape_str(w, b, sizeof b));
    return false;
}

bool em_check_dim_passes(const char *fn, const em_tensor *x, const int *dims,
                         const int64_t *sizes, int n, int64_t scratch_per_position)
{
    em_shape s = em_shape_of(x);
    int64_t numel;
    for (int i = 0; i < n; i++) {
        s.d[dims[i]] = sizes[i];
        if (!em_checked_elements(fn, s.d, s.ndim, x->dtype, x->device, &numel) ||
            !em_checked_elements(fn, (int64_t[]){sizes[i], scratch_per_position}, 2, EM_I64,
                                 EM_CPU, &numel))
            return false;
    }
    return true;
}
