/* An in-memory dataset over a pair of tensors: sample i is row i of x and of y, copied to host
 * buffers at creation so workers read them without touching the tensors. */
#include <stdlib.h>
#include <string.h>

#include "data/data.h"

typedef struct {
    em_dataset base;
    int64_t n, x_numel, y_numel; /* per-sample element counts */
    void *x; /* (n, x_numel) f32 or i64 */
    void *y; /* (n, y_numel) i64 or f32 */
} tensor_dataset;

static int64_t tensors_len(const em_dataset *ds)
{
    return ((const tensor_dataset *)ds)->n;
}

/* Row i of rows (each numel elements of size bytes) into dst. */
static void copy_row(void *dst, const void *rows, int64_t i, int64_t numel, size_t size)
{
    memcpy(dst, (const char *)rows + (size_t)(i * numel) * size, (size_t)numel * size);
}

static em_status tensors_get(const em_dataset *ds, int64_t i, int64_t epoch, void *x, void *y)
{
    (void)epoch;
    const tensor_dataset *d = (const tensor_dataset *)ds;
    copy_row(x, d->x, i, d->x_numel, em_dtype_size(d->base.x_dtype));
    copy_row(y, d->y, i, d->y_numel, em_dtype_size(d->base.y_dtype));
    return EM_OK;
}

static void tensors_free(em_dataset *ds)
{
    tensor_dataset *d = (tensor_dataset *)ds;
    free(d->x);
    free(d->y);
    free(d);
}

static const em_dataset_vtable tensors_vtable = {tensors_len, tensors_get, tensors_free};

/* The shape of one row of t: t's shape without dim 0. */
static em_shape row_shape(const em_tensor *t)
{
    em_shape s = {.ndim = t->ndim - 1};
    for (int k = 1; k < t->ndim; k++)
        s.d[k - 1] = t->shape[k];
    return s;
}

em_dataset *em_tensor_dataset(const em_tensor *x, const em_tensor *y)
{
    if (!x || !y) {
        if (!em_has_error())
            em_set_error(EM_ERR_ARG, "em_tensor_dataset: x or y is NULL");
        return NULL;
    }
    if (x->ndim < 1 || y->ndim < 1 || x->shape[0] != y->shape[0]) {
        char xs[64], ys[64];
        em_set_error(EM_ERR_ARG, "em_tensor_dataset: x and y need the same first dim: %s vs %s",
                     em_shape_str(x, xs, sizeof xs), em_shape_str(y, ys, sizeof ys));
        return NULL;
    }
    tensor_dataset *d = calloc(1, sizeof *d);
    if (!d) {
        em_set_error(EM_ERR_MEMORY, "em_tensor_dataset: out of memory");
        return NULL;
    }
    d->base.vt = &tensors_vtable;
    d->base.x_shape = row_shape(x);
    d->base.x_dtype = em_dtype_is_float(x->dtype) ? EM_F32 : EM_I64;
    d->base.y_shape = row_shape(y);
    d->base.y_dtype = em_dtype_is_float(y->dtype) ? EM_F32 : EM_I64;
    d->n = x->shape[0];
    d->x_numel = d->n ? em_numel(x) / d->n : 0;
    d->y_numel = d->n ? em_numel(y) / d->n : 0;
    d->x = malloc((size_t)em_numel(x) * 8 + 1);
    d->y = malloc((size_t)em_numel(y) * 8 + 1);
    if (!d->x || !d->y) {
        tensors_free(&d->base);
        em_set_error(EM_ERR_MEMORY, "em_tensor_dataset: out of memory");
        return NULL;
    }
    if (em_copy_to_host(x, d->base.x_dtype, d->x) != EM_OK ||
        em_copy_to_host(y, d->base.y_dtype, d->y) != EM_OK) {
        tensors_free(&d->base);
        return NULL;
    }
    if (d->base.y_dtype == EM_I64)
        for (int64_t i = 0; i < d->n * d->y_numel; i++)
            if (((int64_t *)d->y)[i] + 1 > d->base.n_classes)
                d->base.n_classes = ((int64_t *)d->y)[i] + 1;
    return &d->base;
}
