/* em_einsum: each form's values against PyTorch 2.15's torch.einsum (computed in f64 on the
 * inputs below and printed to 10 digits), the implicit output's order, "..." broadcasting, and
 * the errors for equations that are malformed or do not fit the operands. Gradients are checked
 * by the op cases (helpers/op_cases.c). */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "helpers/reference.h"

TestSuite(einsum, .init = em_scope_begin, .fini = em_scope_end);

/* sin(i a + b) for i = 0.., in f64: the inputs the PyTorch references were computed on */
static em_tensor *wave(em_shape s, double a, double b)
{
    return em_ref_wave(s, a, b, 1);
}

static void expect(const char *equation, em_tensor *const *ops, int n, em_shape want_shape,
                   const double *want)
{
    em_tensor *y = em_einsum(equation, ops, n);
    cr_assert_not_null(y, "%s: %s", equation, em_error());
    cr_assert_eq(y->ndim, want_shape.ndim, "%s: %d dims", equation, y->ndim);
    for (int d = 0; d < y->ndim; d++)
        cr_assert_eq(y->shape[d], want_shape.d[d], "%s: dim %d", equation, d);
    cr_assert(em_ref_close(y, want, em_shape_numel(&want_shape), 1e-9), "%s", equation);
}

Test(einsum, matrix_products_as_pytorch)
{
    em_tensor *a = wave(EM_SHAPE(2, 3), 0.3, 0.1), *b = wave(EM_SHAPE(3, 4), 0.7, 0.2);
    static const double mm[8] = {-0.2245163838, 0.0104583913, 0.2405144215, 0.3574527612,
                                 -0.1612522581, 0.3636471771, 0.7175176629, 0.7339283802};
    expect("ij,jk->ik", (em_tensor *[]){a, b}, 2, EM_SHAPE(2, 4), mm);
    expect(" i j , j k -> i k ", (em_tensor *[]){a, b}, 2, EM_SHAPE(2, 4), mm);
    /* implicit output: the letters used once in order, a before b: the product transposed */
    static const double mm_t[8] = {-0.2245163838, -0.1612522581, 0.0104583913, 0.3636471771,
                                   0.2405144215, 0.7175176629, 0.3574527612, 0.7339283802};
    expect("bj,ja", (em_tensor *[]){a, b}, 2, EM_SHAPE(4, 2), mm_t);

    em_tensor *q = wave(EM_SHAPE(1, 2, 3, 2), 0.4, 0.0), *k = wave(EM_SHAPE(1, 2, 2, 2), 1.1, 0.5);
    static const double scores[12] = {
        0.3892522955, -0.2382686856, 1.2755604976, -0.2636919092, 1.3881308182, -0.1291631591,
        -0.7572114473, 0.8075253353, 0.1809968998, -0.4588454463, 1.0094149563, -1.4468867373};
    expect("bhqd,bhkd->bhqk", (em_tensor *[]){q, k}, 2, EM_SHAPE(1, 2, 3, 2), scores);

    em_tensor *c = wave(EM_SHAPE(4, 2), 0.25, 0.9);
    static const double chain[4] = {0.3034814909, 0.1755099942, 1.4067714048, 1.1622481821};
    expect("ij,jk,kl->il", (em_tensor *[]){a, b, c}, 3, EM_SHAPE(2, 2), chain);

    /* "..." broadcast: (2, 1) against (3) -> (2, 3) batch dims */
    em_tensor *e1 = wave(EM_SHAPE(2, 1, 2, 3), 0.45, -0.2);
    em_tensor *e2 = wave(EM_SHAPE(3, 3, 2), 0.35, 0.6);
    static const double ell[24] = {
        0.7119964530, 0.5433713588, 2.2854089345, 2.3702309890, -0.6752777432, -0.7817458400,
        -0.5914435121, -1.3448226501, -0.0301737767, 0.2459513255, -1.6882330281, -1.0123740364,
        0.2890432257, 0.4948215143, -2.1588041359, -2.1534925479, 0.4162175748, 0.1926955333,
        0.7737523764, 1.4292258709, -0.7092948684, -0.6893846931, 1.3775523895, 0.7104143209};
    expect("...ij,...jk->...ik", (em_tensor *[]){e1, e2}, 2, EM_SHAPE(2, 3, 2, 2), ell);
    expect("...ij,...jk", (em_tensor *[]){e1, e2}, 2, EM_SHAPE(2, 3, 2, 2), ell);
}

Test(einsum, outer_sums_diagonals_and_views_as_pytorch)
{
    em_tensor *u = wave(EM_SHAPE(3), 0.6, 0.1), *v = wave(EM_SHAPE(2), 1.3, 0.2);
    static const double outer[6] = {0.0198338381, 0.0995833326, 0.1279862968,
                                    0.6426039133, 0.1914294599, 0.9611444593};
    expect("i,j->ij", (em_tensor *[]){u, v}, 2, EM_SHAPE(3, 2), outer);
    expect("i,i->", (em_tensor *[]){u, wave(EM_SHAPE(3), 0.2, 0.4)}, 2, EM_SCALAR_SHAPE,
           (double[]){1.0938439652});

    em_tensor *d = wave(EM_SHAPE(3, 3), 0.8, 0.2);
    expect("ii->i", &d, 1, EM_SHAPE(3), (double[]){0.1986693308, -0.2555411020, 0.3115413635});
    expect("ii", &d, 1, EM_SCALAR_SHAPE, (double[]){0.2546695923}); /* the trace */

    em_tensor *s = wave(EM_SHAPE(2, 3, 2), 0.5, 0.3);
    expect("bij->bj", &s, 1, EM_SHAPE(2, 2),
           (double[]){2.0047836043, 2.0261918719, -1.9061790731, -2.0726246792});

    /* a subscript of size 1 broadcasts against its other sizes, as PyTorch's: (2, 1) x (3) */
    em_tensor *col = wave(EM_SHAPE(2, 1), 0.6, 0.1), *row = wave(EM_SHAPE(3), 1.3, 0.2);
    em_tensor *bc = em_einsum("ij,j->ij", (em_tensor *[]){col, row}, 2);
    cr_assert(bc && bc->ndim == 2 && bc->shape[0] == 2 && bc->shape[1] == 3, "%s", em_error());
    for (int64_t i = 0; i < 2; i++)
        for (int64_t j = 0; j < 3; j++) {
            double want = sin(0.6 * (double)i + 0.1) * sin(1.3 * (double)j + 0.2);
            cr_assert_float_eq(em_get(bc, (int64_t[]){i, j}), want, 1e-15);
        }

    /* a permutation alone is a view of the operand */
    em_tensor *a = wave(EM_SHAPE(2, 3), 0.3, 0.1), *t = em_einsum("ij->ji", &a, 1);
    cr_assert_not_null(t, "%s", em_error());
    cr_assert(t->shape[0] == 3 && t->shape[1] == 2 && t->storage == a->storage);
    cr_assert_eq(em_get(t, (int64_t[]){2, 1}), em_get(a, (int64_t[]){1, 2}));
}

static void expect_error(const char *equation, em_tensor *const *ops, int n, const char *want)
{
    cr_assert_null(em_einsum(equation, ops, n), "%s", equation);
    cr_assert_str_eq(em_error(), want);
    em_error_clear();
}

Test(einsum, bad_equations_are_named)
{
    em_tensor *a = em_zeros(EM_SHAPE(2, 3), EM_F32), *b = em_zeros(EM_SHAPE(4, 5), EM_F32);
    em_tensor *ab[2] = {a, b};
    expect_error("ij,jk->ik", ab, 2, "em_einsum: subscript j has size 4 for operand 1, which "
                 "does not broadcast with size 3 in 'ij,jk->ik'");
    expect_error("ij,jk->il", (em_tensor *[]){a, em_zeros(EM_SHAPE(3, 2), EM_F32)}, 2,
                 "em_einsum: output subscript l does not appear in any operand in 'ij,jk->il'");
    expect_error("ij->ii", &a, 1,
                 "em_einsum: output subscript i appears more than once in 'ij->ii'");
    expect_error("ijk->i", &a, 1,
                 "em_einsum: operand 0 has 2 dims [2,3] but its subscripts name 3 in 'ijk->i'");
    expect_error("ij", ab, 2, "em_einsum: 2 operands given for 1 term in 'ij'");
    expect_error("ij,jk", &a, 1, "em_einsum: 1 operand given for 2 terms in 'ij,jk'");
    expect_error("i2->i", &a, 1, "em_einsum: '2' is not a subscript (letters a-z, A-Z and "
                 "'...') in 'i2->i'");
    expect_error("i.j->i", &a, 1, "em_einsum: a '.' outside '...' in 'i.j->i'");
    expect_error("...i...->i", &a, 1, "em_einsum: a second '...' in one term in '...i...->i'");
    expect_error("ii->i", &a, 1, "em_einsum: subscript i is repeated for operand 0 with sizes 2 "
                 "and 3 in 'ii->i'");
    expect_error("ij", (em_tensor *[]){NULL}, 1, "em_einsum: operand is NULL");
    expect_error("ij", ab, 0, "em_einsum: 'ij' needs at least one operand");
    expect_error("ij,jk", (em_tensor *[]){a, em_zeros(EM_SHAPE(3, 2), EM_F64)}, 2,
                 "em_einsum: dtypes differ: f32 [2,3] and f64 [3,2]");
    expect_error("...ij,...jk", (em_tensor *[]){em_zeros(EM_SHAPE(2, 2, 3), EM_F32),
                                                em_zeros(EM_SHAPE(3, 3, 2), EM_F32)}, 2,
                 "em_einsum: the dims of '...' do not broadcast (size 3 for operand 1 against "
                 "2) in '...ij,...jk'");
    em_tensor *big = em_zeros(EM_SHAPE(1, 1, 1, 1, 1), EM_F32);
    expect_error("abcde,fghij->abcdefghij", (em_tensor *[]){big, big}, 2,
                 "em_einsum: the output has more dims than a tensor holds in "
                 "'abcde,fghij->abcdefghij'");
}
