/* Creation of deterministic tensors: empty, filled, scalar, arange, from host data, *_like. */
#include <math.h>
#include <stdlib.h>

#include "tensor/core_internal.h"

/* A new tensor on device with every element value. */
static em_tensor *full_on(const char *fn, em_shape shape, em_dtype dtype, em_device device,
                          double value)
{
    em_tensor *t = em_tensor_new(fn, &shape, dtype, device);
    if (!t)
        return NULL;
    const em_backend *be = t->storage->be;
    em_arr a = em_tensor_arr(t);
    int rc = be->fill ? be->fill(&a, value) : EM_KERNEL_UNSUPPORTED;
    if (em_kernel_status(rc, fn, t) != EM_OK) {
        em_release(t);
        return NULL;
    }
    return t;
}

em_tensor *em_empty(em_shape shape, em_dtype dtype)
{
    return em_tensor_new("em_empty", &shape, dtype, EM_CPU);
}

em_tensor *em_empty_on(em_shape shape, em_dtype dtype, em_device device)
{
    return em_tensor_new("em_empty_on", &shape, dtype, device);
}

em_tensor *em_zeros(em_shape shape, em_dtype dtype)
{
    return full_on("em_zeros", shape, dtype, EM_CPU, 0.0);
}

em_tensor *em_ones(em_shape shape, em_dtype dtype)
{
    return full_on("em_ones", shape, dtype, EM_CPU, 1.0);
}

em_tensor *em_full(em_shape shape, em_dtype dtype, double value)
{
    return full_on("em_full", shape, dtype, EM_CPU, value);
}

em_tensor *em_scalar(double value, em_dtype dtype)
{
    return full_on("em_scalar", EM_SCALAR_SHAPE, dtype, EM_CPU, value);
}

em_tensor *em_arange(double start, double end, double step, em_dtype dtype)
{
    static const char fn[] = "em_arange";
    if (step == 0 || !isfinite(start) || !isfinite(end) || !isfinite(step)) {
        em_set_error(EM_ERR_ARG, "%s: need finite start, end and a nonzero step: %g, %g, %g", fn,
                     start, end, step);
        return NULL;
    }
    double count = ceil((end - start) / step);
    if (!(count < 0x1p62)) {
        em_set_error(EM_ERR_ARG, "%s: too many elements: %g", fn, count);
        return NULL;
    }
    int64_t n = count > 0 ? (int64_t)count : 0, numel;
    /* the values are made in f64 on the host first */
    if (!em_checked_elements(fn, &n, 1, EM_F64, EM_CPU, &numel))
        return NULL;
    em_tensor *t = em_tensor_new(fn, &EM_SHAPE(n), dtype, EM_CPU);
    if (!t)
        return NULL;
    double *values = malloc((size_t)(n ? n : 1) * sizeof *values);
    if (!values) {
        em_release(t);
        em_set_error(EM_ERR_MEMORY, "%s: out of memory", fn);
        return NULL;
    }
    for (int64_t i = 0; i < n; i++)
        values[i] = start + (double)i * step;
    em_arr src = {.data = values, .dtype = EM_F64, .ndim = 1, .shape = {n}, .strides = {1}};
    em_arr dst = em_tensor_arr(t);
    t->storage->be->copy(&dst, &src);
    free(values);
    return t;
}

em_tensor *em_from_data(em_shape shape, em_dtype dtype, const void *data)
{
    static const char fn[] = "em_from_data";
    if (!data) {
        em_set_error(EM_ERR_ARG, "%s: NULL data", fn);
        return NULL;
    }
    em_tensor *t = em_tensor_new(fn, &shape, dtype, EM_CPU);
    if (t)
        t->storage->be->copy_from_host(t->storage->data, data, t->storage->nbytes);
    return t;
}

em_tensor *em_empty_like(const em_tensor *t)
{
    if (!t) {
        em_set_error(EM_ERR_ARG, "em_empty_like: NULL tensor");
        return NULL;
    }
    em_shape s = em_shape_of(t);
    return em_tensor_new("em_empty_like", &s, t->dtype, t->device);
}

/* The *_like fills: t's shape, dtype and device. */
static em_tensor *full_like(const char *fn, const em_tensor *t, double value)
{
    if (!t) {
        em_set_error(EM_ERR_ARG, "%s: NULL tensor", fn);
        return NULL;
    }
    return full_on(fn, em_shape_of(t), t->dtype, t->device, value);
}

em_tensor *em_zeros_like(const em_tensor *t)
{
    return full_like("em_zeros_like", t, 0.0);
}

em_tensor *em_ones_like(const em_tensor *t)
{
    return full_like("em_ones_like", t, 1.0);
}

em_tensor *em_full_like(const em_tensor *t, double value)
{
    return full_like("em_full_like", t, value);
}
