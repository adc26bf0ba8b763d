/* em_interpolate: PyTorch 2.x's F.interpolate on (N, C, L) and (N, C, H, W), modes nearest (its
 * legacy 'nearest': floor(dst * scale)), linear and bilinear. Composed of differentiable ops with
 * CPU and CUDA kernels, one spatial dim at a time: nearest is index_select of each output
 * position's source; linear is index_select of its two neighbours, each times its weight, summed
 * (bilinear does W, then H: PyTorch's h0 (w0 x00 + w1 x01) + h1 (w0 x10 + w1 x11)). Backward is
 * index_add, so each source position sums the gradients it contributed to. */
#include <math.h>
#include <stdlib.h>

#include "autograd/autograd_internal.h"

static const char *const interp_mode_names[] = {"nearest", "linear", "bilinear"};

/* How one spatial dim is resampled. */
typedef struct {
    int64_t in, out;
    double scale_factor; /* the user's, passed on to the mapping; 0: none (in / out is used) */
} interp_axis;

/* v rounded to f32 when the op computes positions in f32 (PyTorch's opmath for f32, f16, bf16;
 * one double operation on f32 values rounded once is the f32 operation's result) */
static double opmath(double v, bool f32)
{
    return f32 ? (double)(float)v : v;
}

/* PyTorch's compute_scales_value: 1 / scale_factor when given, else in / out. */
static double scales_value(const interp_axis *a, bool f32)
{
    return a->scale_factor > 0 ? opmath(1.0 / a->scale_factor, f32)
                               : opmath((double)a->in / (double)a->out, f32);
}

/* PyTorch's nearest_idx (always in f32): the source of output position j. */
static int64_t nearest_source(const interp_axis *a, int64_t j)
{
    if (a->out == a->in)
        return j;
    if (a->out == 2 * a->in)
        return j >> 1;
    double src = floor(opmath((double)(float)j * scales_value(a, true), true));
    return (int64_t)src < a->in - 1 ? (int64_t)src : a->in - 1;
}

/* PyTorch's area_pixel_compute_source_index for linear modes: output position j's real source. */
static double linear_source(const interp_axis *a, int64_t j, bool align_corners, bool f32)
{
    if (align_corners) {
        double scale = a->out > 1 ? opmath((double)(a->in - 1) / (double)(a->out - 1), f32) : 0;
        return opmath(scale * (double)j, f32);
    }
    double scale = scales_value(a, f32);
    double src = opmath(opmath(scale * opmath((double)j + 0.5, f32), f32) - 0.5, f32);
    return src < 0 ? 0 : src;
}

/* x resampled along dim d by nearest neighbour. */
static em_tensor *nearest_dim(const em_tensor *x /* (*) */, int d, const interp_axis *a)
{
    int64_t *src = malloc((size_t)a->out * sizeof *src);
    if (!src) {
        em_set_error(EM_ERR_MEMORY, "em_interpolate: out of memory");
        return NULL;
    }
    for (int64_t j = 0; j < a->out; j++)
        src[j] = nearest_source(a, j);
    em_tensor *idx = em_index_on(src, a->out, x->device);
    free(src);
    return idx ? em_index_select(x, d, idx) : NULL;
}

/* The weights w (out) as a tensor shaped to broadcast along dim d of x: (out, 1, ..., 1). */
static em_tensor *weights_along(const em_tensor *x, int d, const double *w, int64_t out)
{
    em_shape s = {.ndim = x->ndim - d};
    s.d[0] = out;
    for (int k = 1; k < s.ndim; k++)
        s.d[k] = 1;
    em_tensor *t = em_to_dtype(em_from_data(s, EM_F64, w), x->dtype);
    return t && x->device != EM_CPU ? em_to_device(t, x->device) : t;
}

/* x resampled along dim d linearly: x[i0] l0 + x[i1] l1 with PyTorch's neighbours and weights. */
static em_tensor *linear_dim(const em_tensor *x /* (*) */, int d, const interp_axis *a,
                             bool align_corners)
{
    bool f32 = x->dtype != EM_F64;
    int64_t n = a->out, *i0 = malloc((size_t)n * 2 * sizeof *i0);
    double *l0 = malloc((size_t)n * 2 * sizeof *l0);
    em_tensor *y = NULL;
    if (i0 && l0) {
        int64_t *i1 = i0 + n;
        double *l1 = l0 + n;
        for (int64_t j = 0; j < n; j++) {
            if (a->out == a->in) { /* PyTorch copies: no position arithmetic */
                i0[j] = i1[j] = j;
                l0[j] = 1;
                l1[j] = 0;
                continue;
            }
            double src = linear_source(a, j, align_corners, f32);
            i0[j] = (int64_t)src < a->in - 1 ? (int64_t)src : a->in - 1;
            i1[j] = i0[j] + (i0[j] < a->in - 1);
            l1[j] = fmin(fmax(opmath(src - (double)i0[j], f32), 0), 1);
            l0[j] = opmath(1 - l1[j], f32);
        }
        em_tensor *x0 = em_index_select(x, d, em_index_on(i0, n, x->device));
        em_tensor *x1 = em_index_select(x, d, em_index_on(i1, n, x->device));
        y = em_add(em_mul(x0, weights_along(x, d, l0, n)),
                   em_mul(x1, weights_along(x, d, l1, n)));
    } else {
        em_set_error(EM_ERR_MEMORY, "em_interpolate: out of memory");
    }
    free(i0);
    free(l0);
    return y;
}

/* The k spatial axes of x (the dims after N and C) from o, with PyTorch's argument checks. */
static bool interp_axes(const em_tensor *x, const em_interpolate_opts *o, int k,
                        interp_axis *axes /* k */)
{
    const char *fn = "em_interpolate";
    bool by_size = o->size[0] != 0 || o->size[1] != 0;
    bool by_scale = o->scale_factor[0] != 0 || o->scale_factor[1] != 0;
    if (by_size == by_scale) {
        em_set_error(EM_ERR_ARG, "%s: %s", fn, by_size ? "give size or scale_factor, not both"
                                                       : "needs size or scale_factor");
        return false;
    }
    if (by_size && o->recompute_scale_factor) {
        em_set_error(EM_ERR_ARG, "%s: recompute_scale_factor is meaningless with a size", fn);
        return false;
    }
    if ((by_size && k == 1 && o->size[1] != 0) || (by_scale && k == 1 && o->scale_factor[1] != 0)) {
        em_set_error(EM_ERR_ARG, "%s: a 3-d input has one spatial dim: one size or scale_factor",
                     fn);
        return false;
    }
    for (int i = 0; i < k; i++) {
        /* a second entry of 0 repeats the first, as PyTorch's single number */
        int64_t size = o->size[i] != 0 || i == 0 ? o->size[i] : o->size[0];
        double scale = o->scale_factor[i] != 0 || i == 0 ? o->scale_factor[i] : o->scale_factor[0];
        double scaled = floor((double)x->shape[2 + i] * scale);
        if (by_scale && !(scale > 0 && scaled < 0x1p62)) {
            em_set_error(EM_ERR_ARG, "%s: scale_factor %g must be positive and leave a size "
                         "below 2^62", fn, scale);
            return false;
        }
        axes[i].in = x->shape[2 + i];
        axes[i].out = by_size ? size : (int64_t)scaled;
        axes[i].scale_factor = by_scale && !o->recompute_scale_factor ? scale : 0;
        if (axes[i].in <= 0 || axes[i].out <= 0) {
            char b[128];
            em_set_error(EM_ERR_ARG, "%s: input and output sizes must be > 0: input %s, output "
                         "size %lld along dim %d", fn, em_shape_str(x, b, sizeof b),
                         (long long)axes[i].out, 2 + i);
            return false;
        }
    }
    return true;
}

/* The spatial dims x has for o's mode (1 or 2); 0 with an error when they do not match. */
static int interp_spatial_dims(const em_tensor *x, const em_interpolate_opts *o)
{
    const char *fn = "em_interpolate";
    if ((unsigned)o->mode > EM_INTERP_BILINEAR) {
        em_set_error(EM_ERR_ARG, "%s: unknown mode %d", fn, (int)o->mode);
        return 0;
    }
    const char *mode = interp_mode_names[o->mode];
    int k = x->ndim - 2;
    bool fits = o->mode == EM_INTERP_NEAREST ? k == 1 || k == 2
                                             : k == (o->mode == EM_INTERP_LINEAR ? 1 : 2);
    if (!fits) {
        char b[128];
        em_set_error(EM_ERR_ARG, "%s: mode %s needs (N, C, %s), not %s", fn, mode,
                     o->mode == EM_INTERP_NEAREST  ? "L) or (N, C, H, W"
                     : o->mode == EM_INTERP_LINEAR ? "L"
                                                   : "H, W",
                     em_shape_str(x, b, sizeof b));
        return 0;
    }
    if (o->align_corners && o->mode == EM_INTERP_NEAREST) {
        em_set_error(EM_ERR_ARG, "%s: align_corners is for the linear modes, not nearest", fn);
        return 0;
    }
    if (!em_dtype_is_float(x->dtype)) {
        em_set_error(EM_ERR_ARG, "%s: x must be a float tensor, not %s", fn,
                     em_dtype_name(x->dtype));
        return 0;
    }
    return k;
}

em_tensor *em_interpolate(const em_tensor *x /* (N, C, L) or (N, C, H, W) */,
                          em_interpolate_opts o)
{
    if (!em_present(x, "em_interpolate", "x"))
        return NULL;
    int k = interp_spatial_dims(x, &o);
    interp_axis axes[2];
    if (k == 0 || !interp_axes(x, &o, k, axes))
        return NULL;
    /* the passes' order (the last spatial dim first), with nearest's source list or linear's two
     * neighbours and two weights per output position as scratch */
    int dims[2] = {1 + k, 2};
    int64_t sizes[2] = {axes[k - 1].out, axes[0].out};
    if (!em_check_dim_passes("em_interpolate", x, dims, sizes, k,
                             o.mode == EM_INTERP_NEAREST ? 1 : 4))
        return NULL;
    em_scope_begin();
    const em_tensor *y = x;
    for (int i = k - 1; i >= 0 && y; i--)
        y = o.mode == EM_INTERP_NEAREST ? nearest_dim(y, 2 + i, &axes[i])
                                        : linear_dim(y, 2 + i, &axes[i], o.align_corners);
    return em_scope_return((em_tensor *)y);
}
