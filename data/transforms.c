/* Per-sample transforms: normalize, random crop with zero padding, random horizontal flip, and a
 * user's own. Random draws come from Philox(counter = sample index, key = (seed, epoch, stage)),
 * so they do not depend on which worker ran. */
#include <string.h>

#include "data/data.h"
#include "data/data_internal.h"

em_transform em_transform_normalize(int n_channels, const float *mean, const float *std)
{
    em_transform tf = {.kind = EM_TRANSFORM_NORMALIZE, .n_channels = n_channels};
    for (int c = 0; mean && std && c < n_channels && c < EM_TRANSFORM_MAX_CHANNELS; c++) {
        tf.mean[c] = mean[c];
        tf.std[c] = std[c];
    }
    return tf;
}

em_transform em_transform_random_crop(int height, int width, int padding)
{
    return (em_transform){.kind = EM_TRANSFORM_RANDOM_CROP, .height = height, .width = width,
                          .padding = padding};
}

em_transform em_transform_random_hflip(float p)
{
    return (em_transform){.kind = EM_TRANSFORM_RANDOM_HFLIP, .p = p};
}

em_transform em_transform_custom(em_transform_fn fn, em_transform_shape_fn shape_fn, void *ctx)
{
    return (em_transform){.kind = EM_TRANSFORM_CUSTOM, .fn = fn, .shape_fn = shape_fn,
                          .ctx = ctx};
}

bool em_transform_is_random(const em_transform *tf)
{
    return tf->kind == EM_TRANSFORM_RANDOM_CROP || tf->kind == EM_TRANSFORM_RANDOM_HFLIP
           || (tf->kind == EM_TRANSFORM_CUSTOM && tf->random);
}

static const char *kind_name(em_transform_kind k)
{
    switch (k) {
    case EM_TRANSFORM_NORMALIZE: return "normalize";
    case EM_TRANSFORM_RANDOM_CROP: return "random_crop";
    case EM_TRANSFORM_RANDOM_HFLIP: return "random_hflip";
    case EM_TRANSFORM_CUSTOM: return "custom";
    }
    return "unknown";
}

em_status em_transform_out_shape(const em_transform *tf, em_shape in, em_shape *out)
{
    if (!tf || !out)
        return em_set_error(EM_ERR_ARG, "em_transform_out_shape: NULL argument");
    char buf[96];
    const char *name = kind_name(tf->kind);
    em_shape s = in;
    switch (tf->kind) {
    case EM_TRANSFORM_NORMALIZE: {
        int64_t c = in.ndim == 3 ? in.d[0] : 1;
        if (tf->n_channels != 1 && tf->n_channels != c)
            return em_set_error(EM_ERR_ARG, "em_transform normalize: %d channels of mean/std for "
                                "a sample of shape %s", tf->n_channels,
                                em_shape_fmt(&in, buf, sizeof buf));
        for (int k = 0; k < tf->n_channels; k++)
            if (!(tf->std[k] != 0.0f))
                return em_set_error(EM_ERR_ARG, "em_transform normalize: std[%d] is %g", k,
                                    (double)tf->std[k]);
        break;
    }
    case EM_TRANSFORM_RANDOM_CROP:
        if (in.ndim != 2 && in.ndim != 3)
            break;
        if (tf->height <= 0 || tf->width <= 0 || tf->padding < 0 ||
            in.d[in.ndim - 2] + 2 * tf->padding < tf->height ||
            in.d[in.ndim - 1] + 2 * tf->padding < tf->width)
            return em_set_error(EM_ERR_ARG, "em_transform random_crop: cannot crop %dx%d with "
                                "padding %d from a sample of shape %s", tf->height, tf->width,
                                tf->padding, em_shape_fmt(&in, buf, sizeof buf));
        s.d[in.ndim - 2] = tf->height;
        s.d[in.ndim - 1] = tf->width;
        *out = s;
        return EM_OK;
    case EM_TRANSFORM_RANDOM_HFLIP:
        if (in.ndim != 2 && in.ndim != 3)
            break;
        if (!(tf->p >= 0.0f && tf->p <= 1.0f))
            return em_set_error(EM_ERR_ARG, "em_transform random_hflip: p = %g is not in [0, 1]",
                                (double)tf->p);
        *out = s;
        return EM_OK;
    case EM_TRANSFORM_CUSTOM:
        if (!tf->fn)
            return em_set_error(EM_ERR_ARG, "em_transform custom: no function");
        if (!tf->shape_fn) {
            *out = in;
            return EM_OK;
        }
        return tf->shape_fn(tf->ctx, in, out);
    default:
        return em_set_error(EM_ERR_ARG, "em_transform: unknown kind %d", (int)tf->kind);
    }
    if (tf->kind != EM_TRANSFORM_NORMALIZE)
        return em_set_error(EM_ERR_ARG, "em_transform %s: needs a (H, W) or (C, H, W) sample, "
                            "got %s", name, em_shape_fmt(&in, buf, sizeof buf));
    *out = s;
    return EM_OK;
}

static void normalize(const em_transform *tf, em_shape in, const float *x, float *out)
{
    int64_t numel = em_shape_numel(&in);
    int64_t c = tf->n_channels == 1 ? 1 : in.d[0];
    int64_t plane = numel / c;
    for (int64_t ch = 0; ch < c; ch++) {
        float m = tf->mean[ch], inv = 1.0f / tf->std[ch];
        for (int64_t k = ch * plane; k < (ch + 1) * plane; k++)
            out[k] = (x[k] - m) * inv;
    }
}

static void hflip(em_shape in, const float *x, float *out)
{
    int64_t w = in.d[in.ndim - 1], rows = em_shape_numel(&in) / w;
    for (int64_t r = 0; r < rows; r++) {
        const float *src = x + r * w;
        float *dst = out + r * w;
        for (int64_t j = 0; j < w / 2; j++) {
            float a = src[j], b = src[w - 1 - j];
            dst[j] = b;
            dst[w - 1 - j] = a;
        }
        if (w % 2)
            dst[w / 2] = src[w / 2];
    }
}

static void crop(const em_transform *tf, em_shape in, const float *x, float *out, int64_t top,
                 int64_t left)
{
    int64_t h = in.d[in.ndim - 2], w = in.d[in.ndim - 1];
    int64_t c = in.ndim == 3 ? in.d[0] : 1, p = tf->padding;
    for (int64_t ch = 0; ch < c; ch++)
        for (int64_t i = 0; i < tf->height; i++) {
            int64_t si = top + i - p;
            float *dst = out + (ch * tf->height + i) * tf->width;
            for (int64_t j = 0; j < tf->width; j++) {
                int64_t sj = left + j - p;
                bool inside = si >= 0 && si < h && sj >= 0 && sj < w;
                dst[j] = inside ? x[(ch * h + si) * w + sj] : 0.0f;
            }
        }
}

/* The Philox block of a call: counter the sample index, key (seed, epoch, stage). */
static em_philox_block call_block(const em_transform_call *call, uint64_t salt)
{
    uint64_t key = em_data_key(call->seed, (uint64_t)call->epoch, (uint64_t)call->stage + 1);
    return em_philox4x32_10((uint64_t)call->index, salt ? em_data_mix64(key + salt) : key);
}

double em_transform_uniform(const em_transform_call *call, uint64_t k)
{
    if (!call)
        return 0;
    em_philox_block r = call_block(call, k + 1);
    return (double)((((uint64_t)r.v[1] << 32) | r.v[0]) >> 11) * 0x1.0p-53;
}

em_status em_transform_apply(const em_transform *tf, const em_transform_call *call, em_shape in,
                             const void *xv, void *outv)
{
    em_shape os;
    em_status st = em_transform_out_shape(tf, in, &os);
    if (st != EM_OK)
        return st;
    if (!call || !xv || !outv)
        return em_set_error(EM_ERR_ARG, "em_transform_apply: NULL call or buffer");
    if (tf->kind == EM_TRANSFORM_CUSTOM)
        return xv == outv ? em_set_error(EM_ERR_ARG, "em_transform_apply: a custom transform "
                                         "needs distinct input and output buffers")
                          : tf->fn(tf->ctx, call, in, xv, outv);
    if (call->dtype != EM_F32)
        return em_set_error(EM_ERR_ARG, "em_transform %s: needs f32 samples, not %s",
                            kind_name(tf->kind), em_dtype_name(call->dtype));
    const float *x = xv;
    float *out = outv;
    em_philox_block r = call_block(call, 0);
    switch (tf->kind) {
    case EM_TRANSFORM_NORMALIZE:
        normalize(tf, in, x, out);
        break;
    case EM_TRANSFORM_RANDOM_HFLIP: {
        float p = tf->p == 0.0f ? 0.5f : tf->p;
        if (em_philox_uniform(r.v[0]) < p)
            hflip(in, x, out);
        else if (out != x)
            memcpy(out, x, (size_t)em_shape_numel(&in) * sizeof(float));
        break;
    }
    case EM_TRANSFORM_RANDOM_CROP: {
        if (out == x)
            return em_set_error(EM_ERR_ARG, "em_transform_apply: random_crop needs distinct "
                                "input and output buffers");
        int64_t h = in.d[in.ndim - 2], w = in.d[in.ndim - 1];
        uint32_t top = em_data_below(r.v[0], (uint32_t)(h + 2 * tf->padding - tf->height + 1));
        uint32_t left = em_data_below(r.v[1], (uint32_t)(w + 2 * tf->padding - tf->width + 1));
        crop(tf, in, x, out, top, left);
        break;
    }
    case EM_TRANSFORM_CUSTOM:
        break;
    }
    return EM_OK;
}
