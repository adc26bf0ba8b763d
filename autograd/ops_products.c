/* PyTorch's outer, addmm and baddbmm, composed of matmul/bmm, scalar products and add (each
 * with CPU and CUDA kernels), so their gradients are those ops'. */
#include "autograd/autograd_internal.h"

em_tensor *em_outer(const em_tensor *a /* (n) */, const em_tensor *b /* (m) */)
{
    const char *fn = "em_outer";
    if (!em_present(a, fn, "a") || !em_present(b, fn, "b"))
        return NULL;
    if (a->ndim != 1 || b->ndim != 1) {
        char sa[128], sb[128];
        em_set_error(EM_ERR_ARG, "%s: expected 1-D a and b, got %s and %s", fn,
                     em_shape_str(a, sa, sizeof sa), em_shape_str(b, sb, sizeof sb));
        return NULL;
    }
    em_scope_begin();
    const em_tensor *t[2] = {a, b};
    if (!em_unify_dtypes(fn, (const char *[]){"a", "b"}, t, 2) || !em_check_pair(fn, t[0], t[1]))
        return em_scope_return(NULL);
    return em_scope_return(em_mul(em_unsqueeze(t[0], 1), em_unsqueeze(t[1], 0))); /* (n, m) */
}

/* beta input + alpha product, input broadcast to the product's shape (never beyond it); with
 * beta 0 input is left out, so its NaN and Inf do not reach the result, as PyTorch's. */
static em_tensor *add_scaled(const char *fn, const em_tensor *input /* broadcasts to prod */,
                             em_tensor *prod /* (*) */, double beta, double alpha)
{
    int lead = prod->ndim - input->ndim;
    bool fits = lead >= 0;
    for (int d = 0; fits && d < input->ndim; d++)
        fits = input->shape[d] == 1 || input->shape[d] == prod->shape[lead + d];
    if (!fits) {
        char bi[128], bp[128];
        em_set_error(EM_ERR_ARG, "%s: input %s does not broadcast to the product's shape %s", fn,
                     em_shape_str(input, bi, sizeof bi), em_shape_str(prod, bp, sizeof bp));
        return NULL;
    }
    em_tensor *y = alpha == 1 ? prod : em_mul_scalar(prod, alpha);
    if (beta == 0)
        return y;
    return em_add(y, beta == 1 ? input : em_mul_scalar(input, beta));
}

/* Autocast's casts (the products run in its low dtype, as PyTorch's list has them), the three
 * operands' checks and the sum; product is em_matmul or em_bmm. */
static em_tensor *add_product(const char *fn, const em_tensor *input, const em_tensor *m1,
                              const em_tensor *m2, double beta, double alpha,
                              em_tensor *(*product)(const em_tensor *, const em_tensor *))
{
    if (!em_present(input, fn, "input") || !em_present(m1, fn, "mat1") ||
        !em_present(m2, fn, "mat2"))
        return NULL;
    em_scope_begin();
    const em_tensor *t[3] = {input, m1, m2};
    if ((em_autocast_needed(EM_AUTOCAST_LOW, t, 3) && !em_autocast_inputs(EM_AUTOCAST_LOW, t, 3))
        || !em_check_pair(fn, t[0], t[1]) || !em_check_pair(fn, t[1], t[2]))
        return em_scope_return(NULL);
    em_tensor *prod = product(t[1], t[2]);
    return em_scope_return(prod ? add_scaled(fn, t[0], prod, beta, alpha) : NULL);
}

em_tensor *em_addmm(const em_tensor *input /* broadcasts to (n, p) */,
                    const em_tensor *mat1 /* (n, m) */, const em_tensor *mat2 /* (m, p) */,
                    double beta, double alpha)
{
    const char *fn = "em_addmm";
    if (mat1 && mat2 && (mat1->ndim != 2 || mat2->ndim != 2 || mat1->shape[1] != mat2->shape[0])) {
        char s1[128], s2[128];
        em_set_error(EM_ERR_ARG, "%s: expected mat1 (n, m) and mat2 (m, p), got %s and %s", fn,
                     em_shape_str(mat1, s1, sizeof s1), em_shape_str(mat2, s2, sizeof s2));
        return NULL;
    }
    return add_product(fn, input, mat1, mat2, beta, alpha, em_matmul);
}

em_tensor *em_baddbmm(const em_tensor *input /* broadcasts to (B, n, p) */,
                      const em_tensor *batch1 /* (B, n, m) */,
                      const em_tensor *batch2 /* (B, m, p) */, double beta, double alpha)
{
    const char *fn = "em_baddbmm";
    if (batch1 && batch2 &&
        (batch1->ndim != 3 || batch2->ndim != 3 || batch1->shape[0] != batch2->shape[0] ||
         batch1->shape[2] != batch2->shape[1])) {
        char s1[128], s2[128];
        em_set_error(EM_ERR_ARG, "%s: expected batch1 (B, n, m) and batch2 (B, m, p), got %s "
                     "and %s", fn, em_shape_str(batch1, s1, sizeof s1),
                     em_shape_str(batch2, s2, sizeof s2));
        return NULL;
    }
    return add_product(fn, input, batch1, batch2, beta, alpha, em_bmm);
}
