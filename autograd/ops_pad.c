/* em_pad: PyTorch 2.x's F.pad. Composed of differentiable ops with CPU and CUDA kernels: constant
 * padding is narrow (negative pads crop) and cat beside filled blocks; reflect and replicate pick
 * each output position's source with index_select, whose backward (index_add) sums the gradient
 * of every copy into its source position. */
#include <stdlib.h>

#include "autograd/autograd_internal.h"

#define PAD_LIMIT ((int64_t)1 << 61) /* larger pads could overflow the padded size */

static const char *const pad_mode_names[] = {"constant", "reflect", "replicate"};

/* The source position of output position j along a dim of size n padded by l before it. */
static int64_t pad_source(em_pad_mode mode, int64_t j, int64_t l, int64_t n)
{
    int64_t p = j - l;
    if (mode == EM_PAD_REPLICATE)
        return p < 0 ? 0 : p >= n ? n - 1 : p;
    return p < 0 ? -p : p >= n ? 2 * (n - 1) - p : p;
}

/* x padded by l before and r after along dim d by reflection or replication. */
static em_tensor *pad_dim_indexed(const em_tensor *x /* (*) */, int d, int64_t l, int64_t r,
                                  em_pad_mode mode)
{
    int64_t n = x->shape[d], out = n + l + r;
    int64_t *src = malloc((size_t)out * sizeof *src);
    if (!src) {
        em_set_error(EM_ERR_MEMORY, "em_pad: out of memory");
        return NULL;
    }
    for (int64_t j = 0; j < out; j++)
        src[j] = pad_source(mode, j, l, n);
    em_tensor *idx = em_index_on(src, out, x->device);
    free(src);
    return idx ? em_index_select(x, d, idx) : NULL;
}

/* x padded by l before and r after along dim d with value (a negative pad crops). */
static em_tensor *pad_dim_constant(const em_tensor *x /* (*) */, int d, int64_t l, int64_t r,
                                   double value)
{
    int64_t start = l < 0 ? -l : 0, keep = x->shape[d] - start - (r < 0 ? -r : 0);
    em_tensor *pieces[3];
    int n = 0;
    int64_t sizes[3] = {l, keep, r};
    for (int i = 0; i < 3; i++) {
        em_shape s = em_shape_of(x);
        s.d[d] = sizes[i];
        if (i == 1)
            pieces[n++] = em_narrow(x, d, start, keep);
        else if (sizes[i] > 0)
            pieces[n++] = em_raw_full("em_pad", &s, x->dtype, x->device, value);
        else
            continue;
        if (!pieces[n - 1])
            return NULL;
    }
    return em_cat(pieces, n, d);
}

/* Which dims reflect and replicate pad: PyTorch's 1-, 2- and 3-d padding, each on inputs with or
 * without a batch dim in front of the channels. */
static bool check_pad_dims(const em_tensor *x, int n_pads, em_pad_mode mode)
{
    int k = n_pads / 2;
    if (k >= 1 && k <= 3 && (x->ndim == k + 1 || x->ndim == k + 2))
        return true;
    char b[128];
    em_set_error(EM_ERR_ARG, "em_pad: %s padding of the last %d dims needs a %d-d or %d-d input "
                 "(channels, or batch and channels, in front), not %s", pad_mode_names[mode], k,
                 k + 1, k + 2, em_shape_str(x, b, sizeof b));
    return false;
}

/* The padded size of dim d into *size; false with an error naming the dim when mode cannot pad
 * it so. */
static bool check_pad_dim(const em_tensor *x, int d, int64_t l, int64_t r, em_pad_mode mode,
                          int64_t *size)
{
    int64_t n = x->shape[d];
    const char *why = NULL;
    if (l < -PAD_LIMIT || l > PAD_LIMIT || r < -PAD_LIMIT || r > PAD_LIMIT)
        why = "is beyond 2^61";
    else if (__builtin_add_overflow(n, l + r, size))
        why = "overflows the size";
    else if (mode == EM_PAD_CONSTANT && *size < 0)
        why = "leaves a negative size";
    else if (mode != EM_PAD_CONSTANT && n == 0)
        why = "pads an empty dim";
    else if (mode == EM_PAD_REFLECT && (l >= n || r >= n))
        why = "needs each pad < the dim's size";
    else if (mode != EM_PAD_CONSTANT && *size < 1)
        why = "leaves no element";
    if (!why)
        return true;
    char b[128];
    em_set_error(EM_ERR_ARG, "em_pad: %s padding (%lld, %lld) of dim %d of %s %s",
                 pad_mode_names[mode], (long long)l, (long long)r, d,
                 em_shape_str(x, b, sizeof b), why);
    return false;
}

/* The arguments, and the padded sizes of the dims in the order they are padded (the last dim
 * first) into dims and sizes (n_pads / 2 each). */
static bool check_pad_args(const em_tensor *x, const int64_t *pads, int n_pads, em_pad_mode mode,
                           double value, int *dims, int64_t *sizes)
{
    if (!em_present(x, "em_pad", "x"))
        return false;
    if ((unsigned)mode > EM_PAD_REPLICATE) {
        em_set_error(EM_ERR_ARG, "em_pad: unknown mode %d", (int)mode);
        return false;
    }
    if (n_pads < 0 || n_pads % 2 || n_pads > 2 * x->ndim || (n_pads > 0 && !pads)) {
        char b[128];
        em_set_error(EM_ERR_ARG, "em_pad: %d pads for %s: needs pairs (left, right), at most "
                     "two per dim", n_pads, em_shape_str(x, b, sizeof b));
        return false;
    }
    if (mode != EM_PAD_CONSTANT && value != 0) {
        em_set_error(EM_ERR_ARG, "em_pad: %s padding takes no value (got %g)",
                     pad_mode_names[mode], value);
        return false;
    }
    if (mode != EM_PAD_CONSTANT && !check_pad_dims(x, n_pads, mode))
        return false;
    for (int i = 0; i < n_pads; i += 2) {
        dims[i / 2] = x->ndim - 1 - i / 2;
        if (!check_pad_dim(x, dims[i / 2], pads[i], pads[i + 1], mode, &sizes[i / 2]))
            return false;
    }
    /* reflect and replicate keep each output position's source as scratch */
    return em_check_dim_passes("em_pad", x, dims, sizes, n_pads / 2,
                               mode == EM_PAD_CONSTANT ? 0 : 1);
}

em_tensor *em_pad(const em_tensor *x /* (*) */, const int64_t *pads /* n_pads */, int n_pads,
                  em_pad_mode mode, double value)
{
    int dims[EM_MAX_DIMS];
    int64_t sizes[EM_MAX_DIMS];
    if (!check_pad_args(x, pads, n_pads, mode, value, dims, sizes))
        return NULL;
    if (n_pads == 0)
        return em_clone(x);
    em_scope_begin();
    const em_tensor *y = x;
    for (int i = 0; i < n_pads && y; i += 2) {
        int d = x->ndim - 1 - i / 2;
        y = mode == EM_PAD_CONSTANT ? pad_dim_constant(y, d, pads[i], pads[i + 1], value)
                                    : pad_dim_indexed(y, d, pads[i], pads[i + 1], mode);
    }
    return em_scope_return((em_tensor *)y);
}
