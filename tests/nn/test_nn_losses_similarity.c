/* Cosine similarity, pairwise distance, the cosine embedding and margin ranking losses
 * (nn/losses_similarity.c). Expected values: numpy (f64) on PyTorch 2.x's compositions:
 * sum((a / max(|a|, eps)) (b / max(|b|, eps))); |a - b + eps|_p; cos = a.b / sqrt((|a|^2 + 1e-12)
 * (|b|^2 + 1e-12)) then 1 - cos or max(cos - margin, 0); max(-y (x1 - x2) + margin, 0). */
#include <criterion/criterion.h>
#include <math.h>

#include "helpers/reference.h"
#include "nn/nn.h"

TestSuite(nn_losses_similarity, .init = em_scope_begin, .fini = em_scope_end);

static em_tensor *f64(em_shape s, const double *v)
{
    return em_from_data(s, EM_F64, v);
}

static const double a_v[] = {1, 2, 2, 0, 0, 0, 3, -4, 0}, b_v[] = {2, 0, 1, 1, 1, 1, 3, 4, 0};

Test(nn_losses_similarity, cosine_similarity_and_pairwise_distance)
{
    em_tensor *a = em_requires_grad_(f64(EM_SHAPE(3, 3), a_v), true);
    em_tensor *b = f64(EM_SHAPE(3, 3), b_v);
    em_tensor *cos = em_cosine_similarity(a, b, 1, 1e-8);
    cr_expect(em_ref_close(cos, (double[]){0.596284794, 0, -0.28}, 3, 1e-9));
    /* the zero row's gradient is b / eps-clamped norms: finite, as PyTorch's */
    cr_assert_eq(em_backward(em_sum_all(cos)), EM_OK, "%s", em_error());
    double g[9];
    em_copy_to_host(a->grad, EM_F64, g);
    for (int i = 0; i < 9; i++)
        cr_expect(isfinite(g[i]), "grad[%d] %g", i, g[i]);
    /* broadcast: a row against every row, along the last dim */
    cr_expect(em_ref_close(em_cosine_similarity(f64(EM_SHAPE(3), a_v), b, -1, 0),
                           (double[]){0.596284794, 0.9622504486, 0.7333333333}, 3, 1e-9));
    cr_expect(em_ref_close(em_pairwise_distance(a, b, 2, 1e-6, false),
                           (double[]){2.449490559, 1.732049076, 7.999999}, 3, 1e-8));
    em_tensor *d1 = em_pairwise_distance(a, b, 1, 1e-6, true);
    cr_expect(d1 && d1->ndim == 2 && d1->shape[1] == 1);
    cr_expect(em_ref_close(d1, (double[]){4.000001, 2.999997, 8.000001}, 3, 1e-8));
    cr_assert_null(em_cosine_similarity(a, f64(EM_SHAPE(2), a_v), 0, 0));
    cr_expect_str_eq(em_error(), "em_cosine_similarity: shapes do not broadcast: [3,3] and [2]");
    em_error_clear();
}

Test(nn_losses_similarity, cosine_embedding_and_margin_ranking)
{
    em_tensor *a = f64(EM_SHAPE(3, 3), a_v), *b = f64(EM_SHAPE(3, 3), b_v);
    em_tensor *y = f64(EM_SHAPE(3), (double[]){1, -1, -1});
    cr_expect(em_ref_close(em_cosine_embedding_loss(a, b, y, 0.1, EM_REDUCTION_NONE),
                           (double[]){0.403715206, 0, 0}, 3, 1e-9));
    cr_expect(em_ref_close(em_cosine_embedding_loss(a, b, y, 0.1, EM_REDUCTION_MEAN),
                           (double[]){0.1345717353}, 1, 1e-9));
    /* target -1 with margin -0.5: max(cos + 0.5, 0) for the third row: 0.22 */
    cr_expect(em_ref_close(em_cosine_embedding_loss(a, b, y, -0.5, EM_REDUCTION_SUM),
                           (double[]){0.403715206 + 0.5 + 0.22}, 1, 1e-9));
    cr_assert_null(em_cosine_embedding_loss(a, b, f64(EM_SHAPE(2), a_v), 0, EM_REDUCTION_MEAN));
    cr_expect_eq(em_error_status(), EM_ERR_ARG);
    em_error_clear();

    em_tensor *x1 = em_requires_grad_(f64(EM_SHAPE(4), (double[]){1, 2, -1, 0.5}), true);
    em_tensor *x2 = f64(EM_SHAPE(4), (double[]){0.5, 3, -1, 0.7});
    em_tensor *t = f64(EM_SHAPE(4), (double[]){1, 1, -1, -1});
    cr_expect(em_ref_close(em_margin_ranking_loss(x1, x2, t, 0.3, EM_REDUCTION_NONE),
                           (double[]){0, 1.3, 0.3, 0.1}, 4, 1e-12));
    em_tensor *mean = em_margin_ranking_loss(x1, x2, t, 0.3, EM_REDUCTION_MEAN);
    cr_expect(em_ref_close(mean, (double[]){0.425}, 1, 1e-12));
    cr_assert_eq(em_backward(mean), EM_OK, "%s", em_error());
    /* -y / 4 where the hinge is active (clamp's gradient: also at 0 exactly, as PyTorch's) */
    cr_expect(em_ref_close(x1->grad, (double[]){0, -0.25, 0.25, 0.25}, 4, 1e-12));
}
