/* N-d strided iteration setup shared by the backends (dim dropping, ordering by the first
 * operand's memory order, merging) and shape predicates of em_arr. */
#include "backend/strided_internal.h"

#include <assert.h>

/* Whether dim a should be walked outside dim b: the first operand whose strides on the two dims
 * are both nonzero and differ decides; ties keep the given order. */
static bool dim_outer(const em_iter *it, int a, int b)
{
    for (int k = 0; k < it->nops; k++) {
        int64_t sa = it->strides[k][a], sb = it->strides[k][b];
        if (sa == 0 || sb == 0 || sa == sb)
            continue;
        return sa > sb;
    }
    return false;
}

static void swap_dims(em_iter *it, int a, int b)
{
    int64_t t = it->shape[a];
    it->shape[a] = it->shape[b];
    it->shape[b] = t;
    for (int k = 0; k < it->nops; k++) {
        t = it->strides[k][a];
        it->strides[k][a] = it->strides[k][b];
        it->strides[k][b] = t;
    }
}

void em_iter_init(em_iter *it, int ndim, const int64_t *shape, int nops, const em_arr *const *ops,
                  int flags)
{
    assert(nops >= 1 && nops <= EM_ITER_MAX_OPS && ndim >= 0 && ndim <= EM_MAX_DIMS);
    it->nops = nops;
    it->numel = 1;
    for (int k = 0; k < nops; k++) {
        it->data[k] = ops[k]->data;
        it->elsize[k] = em_dtype_size(ops[k]->dtype);
    }
    int nd = 0;
    for (int d = 0; d < ndim; d++) {
        it->numel *= shape[d];
        if (shape[d] == 1)
            continue;
        it->shape[nd] = shape[d];
        for (int k = 0; k < nops; k++)
            it->strides[k][nd] = ops[k]->strides[d];
        nd++;
    }
    if (!(flags & EM_ITER_KEEP_ORDER)) {
        /* insertion sort, outermost first; stable so ties keep row-major order */
        for (int i = 1; i < nd; i++)
            for (int j = i; j > 0 && dim_outer(it, j, j - 1); j--)
                swap_dims(it, j, j - 1);
    }
    int m = 0; /* merge dim d into the current outer one when every operand steps as one */
    for (int d = 1; d < nd; d++) {
        bool merge = true;
        for (int k = 0; k < nops; k++)
            merge = merge && it->strides[k][m] == it->strides[k][d] * it->shape[d];
        if (merge) {
            it->shape[m] *= it->shape[d];
            for (int k = 0; k < nops; k++)
                it->strides[k][m] = it->strides[k][d];
        } else {
            m++;
            it->shape[m] = it->shape[d];
            for (int k = 0; k < nops; k++)
                it->strides[k][m] = it->strides[k][d];
        }
    }
    it->ndim = nd == 0 ? 1 : m + 1;
    if (nd == 0) {
        it->shape[0] = 1;
        for (int k = 0; k < nops; k++)
            it->strides[k][0] = 0;
    }
}

int64_t em_arr_numel(const em_arr *a)
{
    int64_t n = 1;
    for (int d = 0; d < a->ndim; d++)
        n *= a->shape[d];
    return n;
}

bool em_arr_same_shape(const em_arr *a, const em_arr *b)
{
    if (a->ndim != b->ndim)
        return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d])
            return false;
    return true;
}

bool em_arr_contiguous(const em_arr *a)
{
    int64_t expect = 1;
    for (int d = a->ndim - 1; d >= 0; d--) {
        if (a->shape[d] != 1 && a->strides[d] != expect)
            return false;
        expect *= a->shape[d];
    }
    return true;
}
