/* The argument rules of the kernel table that every backend applies alike (see
 * kernel_args_internal.h). */
#include "backend/kernel_args_internal.h"

#include "backend/strided_internal.h"

/* The operand an op's derivative reads (em_unary_grad_source). */
typedef enum {
    READS_X = 0,  /* the input */
    READS_Y,      /* the output when given, else the input */
    READS_NOTHING /* neither: NEG, ADD/MUL_SCALAR and the zero gradients */
} grad_operand;

/* The properties of each unary op; an op without a row takes float dtypes only and its
 * derivative reads x. */
static const struct {
    bool int_ok; /* integer dtypes too (computed in i64, wrapping) */
    grad_operand grad_reads;
} unary_props[EM_UNARY_COUNT] = {
    [EM_UNARY_NEG] = {.int_ok = true, .grad_reads = READS_NOTHING},
    [EM_UNARY_ABS] = {.int_ok = true},
    [EM_UNARY_SIGN] = {.int_ok = true, .grad_reads = READS_NOTHING},
    [EM_UNARY_EXP] = {.grad_reads = READS_Y},
    [EM_UNARY_SQRT] = {.grad_reads = READS_Y},
    [EM_UNARY_RSQRT] = {.grad_reads = READS_Y},
    [EM_UNARY_SQUARE] = {.int_ok = true},
    [EM_UNARY_RECIPROCAL] = {.grad_reads = READS_Y},
    [EM_UNARY_TANH] = {.grad_reads = READS_Y},
    [EM_UNARY_SIGMOID] = {.grad_reads = READS_Y},
    [EM_UNARY_RELU] = {.int_ok = true},
    [EM_UNARY_FLOOR] = {.grad_reads = READS_NOTHING},
    [EM_UNARY_CEIL] = {.grad_reads = READS_NOTHING},
    [EM_UNARY_ROUND] = {.grad_reads = READS_NOTHING},
    [EM_UNARY_CLAMP] = {.int_ok = true},
    [EM_UNARY_ADD_SCALAR] = {.int_ok = true, .grad_reads = READS_NOTHING},
    [EM_UNARY_MUL_SCALAR] = {.int_ok = true, .grad_reads = READS_NOTHING},
};

bool em_unary_int_supported(em_unary_op op)
{
    return (unsigned)op < EM_UNARY_COUNT && unary_props[op].int_ok;
}

const em_arr *em_unary_grad_source(em_unary_op op, const em_arr *gy, const em_arr *x,
                                   const em_arr *y, bool *from_y)
{
    const grad_operand reads = unary_props[op].grad_reads;
    *from_y = reads == READS_Y && y != NULL;
    return reads == READS_NOTHING ? gy : *from_y ? y : x;
}

bool em_binary_int_supported(em_binary_op op)
{
    switch (op) {
    case EM_BINARY_ADD: case EM_BINARY_SUB: case EM_BINARY_MUL: case EM_BINARY_MAXIMUM:
    case EM_BINARY_MINIMUM: return true;
    case EM_BINARY_DIV: case EM_BINARY_POW: return false; /* true division, real powers */
    EM_BINARY_COMPARE_OPS(EM_OP_CASE) return true;
    }
    return false; /* not an op */
}

bool em_binary_args_ok(em_binary_op op, const em_arr *out, const em_arr *a, const em_arr *b)
{
    if ((unsigned)op >= EM_BINARY_COUNT || a->dtype != b->dtype || !em_dtype_valid(a->dtype) ||
        !em_arr_same_shape(out, a) || !em_arr_same_shape(out, b))
        return false;
    if (em_binary_is_compare(op))
        return out->dtype == EM_BOOL;
    const bool int_ok = em_dtype_is_int(a->dtype) && em_binary_int_supported(op);
    return out->dtype == a->dtype && (em_dtype_is_float(a->dtype) || int_ok);
}

bool em_binary_grad_args_ok(em_binary_op op, const em_arr *gx, const em_arr *g, const em_arr *a,
                            const em_arr *b, const em_arr *y)
{
    const em_arr *in[4] = {g, a, b, y};
    if ((unsigned)op >= EM_BINARY_COUNT || em_binary_is_compare(op) ||
        !em_dtype_is_float(gx->dtype))
        return false;
    for (int k = 0; k < 4; k++)
        if (in[k]->dtype != gx->dtype || !em_arr_same_shape(gx, in[k]))
            return false;
    return true;
}

static bool reduce_dtypes_ok(em_reduce_op op, em_dtype in, em_dtype out)
{
    const bool fl = em_dtype_is_float(in), it = em_dtype_is_int(in) || in == EM_BOOL;
    switch (op) {
    case EM_REDUCE_SUM: case EM_REDUCE_PROD:
        return fl ? em_dtype_is_float(out) : it && em_dtype_is_int(out);
    case EM_REDUCE_MEAN: case EM_REDUCE_VAR:
        return fl && em_dtype_is_float(out);
    case EM_REDUCE_MAX: case EM_REDUCE_MIN:
        return (fl || it) && out == in;
    case EM_REDUCE_ARGMAX: case EM_REDUCE_ARGMIN:
        return (fl || it) && out == EM_I64;
    }
    return false; /* not an op */
}

bool em_reduce_args_ok(em_reduce_op op, const em_arr *out, const em_arr *in, int64_t *R)
{
    if ((unsigned)op >= EM_REDUCE_COUNT || in->ndim != out->ndim ||
        !reduce_dtypes_ok(op, in->dtype, out->dtype))
        return false;
    *R = 1;
    for (int d = 0; d < in->ndim; d++) {
        if (out->shape[d] != in->shape[d] && out->shape[d] != 1)
            return false;
        if (out->shape[d] != in->shape[d])
            *R *= in->shape[d];
    }
    const em_fold k = em_reduce_fold(op); /* max, min and the arg folds pick an element */
    const bool needs_element = k == EM_FOLD_MAX || k == EM_FOLD_MIN || em_fold_is_arg(k);
    return !(*R == 0 && needs_element && em_arr_numel(out) > 0);
}

bool em_cumulative_args_ok(const em_arr *out, const em_arr *in, int dim)
{
    return out->dtype == in->dtype && em_dtype_is_float(out->dtype) && dim >= 0 &&
           dim < out->ndim && em_arr_same_shape(out, in);
}

bool em_index_views_match(const em_arr *a, const em_arr *b, int dim)
{
    if (a->ndim != b->ndim || dim < 0 || dim >= a->ndim || a->dtype != b->dtype)
        return false;
    for (int d = 0; d < a->ndim; d++)
        if (d != dim && a->shape[d] != b->shape[d])
            return false;
    return true;
}

bool em_gather_views_ok(const em_arr *ref, const em_arr *big, const em_arr *idx, int dim)
{
    if (ref->ndim != big->ndim || ref->ndim != idx->ndim || dim < 0 || dim >= ref->ndim ||
        ref->dtype != big->dtype || idx->dtype != EM_I64)
        return false;
    for (int d = 0; d < ref->ndim; d++)
        if (idx->shape[d] != ref->shape[d] || (d != dim && ref->shape[d] > big->shape[d]))
            return false;
    return true;
}
