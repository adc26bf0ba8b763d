/* Padded batches and learned attention biases against PyTorch 2.15 (f64; reference values from
 * tests/torch_ref/padded_transformer_values.py): TransformerEncoderLayer with a key padding mask,
 * and with a float src_mask that takes a gradient; scaled dot-product attention with a learned
 * float mask; a classifier over padded token sequences whose loss over three SGD steps, and
 * every parameter's gradient, match PyTorch's with the same mask. */
#include <criterion/criterion.h>
#include <math.h>

#include "ember.h"
#include "helpers/reference.h"

TestSuite(padded_transformer, .init = em_scope_begin, .fini = em_scope_end);

/* layer_padded */
static const double layer_padded_loss = 0.724429499628;
static const double layer_padded_grad_sums[12] = { /* named_parameters order */
    -0.0284004382711, -0.129578656856, -0.114897119704, -0.135778842476, 0.102522885537,
    0.074045537891, -0.442155362945, -0.672439483456, 0.604303990818, 0.243609242896,
    1.53607117189, -0.174149705442};
/* layer_bias */
static const double layer_bias_loss = -2.51458166815;
static const double layer_bias_grad_sums[13] = { /* named_parameters order, then the mask */
    0.0426920256099, -0.94550973859, 0.143135981475, 0.324932167617, -0.142238575393,
    -0.0619304837579, 0.105431231539, -0.174149705442, -0.082132404676, -1.26354151377,
    1.02015835565, 0.323160705208, 0.0077297151637};
/* sdpa_bias */
static const double sdpa_bias_loss = -0.540077930721;
static const double sdpa_bias_grad_sums[4] = { /* named_parameters order, then the mask */
    1.87211951644, 2.06439601045, -1.8895624439, 0.736781567342};
/* classifier: its loss before each of three SGD steps (lr 0.5) */
static const double classifier_losses[3] = {
    1.1088791835, 1.10168364324, 1.09812451602};
static const double classifier_grad_sums[15] = { /* named_parameters order, the first step */
    0.00212182819575, -0.00028455696797, 2.30092603699e-05, -0.00213375423335,
    -0.00768988580982, 0.00314150336534, -0.00633287289864, -3.98156630419e-05, 0.0064434097904,
    -0.0323476752858, 0.00783570441765, 0.0270897314262, -0.0163554119251, 0.0501172213639,
    -0.0110316991847};
/* tokens: [[4, 1, 8, 5, 0, 0], [3, 8, 3, 8, 3, 8], [0, 1, 8, 5, 2, 0]] */
static const int64_t classifier_tokens[18] = {4, 1, 8, 5, 0, 0, 3, 8, 3, 8, 3, 8,
                                              0, 1, 8, 5, 2, 0};

/* f64 tensor of shape s with element i = scale cos(a i), as the script's wave */
static em_tensor *wave(em_shape s, double a, double scale)
{
    return em_ref_wave(s, a, M_PI / 2, scale);
}

/* the script's key padding mask: true at the padding keys */
static em_tensor *padding(void)
{
    return em_from_data(EM_SHAPE(2, 5), EM_BOOL, (bool[]){false, false, false, false, true,
                                                          true, false, false, true, true});
}

static void expect_close(double got, double want, const char *what, int k)
{
    cr_expect(fabs(got - want) <= 1e-9 * fmax(1, fabs(want)), "%s %d: %.12g, PyTorch %.12g", what,
              k, got, want);
}

/* backward of out's checksum, then each tensor's gradient checksum against want */
static void expect_grads(const em_tensor *out, double loss, em_tensor *const *ts, int n,
                         const double *want)
{
    cr_assert_not_null(out, "%s", em_error());
    em_tensor *l = em_sum_all(em_mul(out, wave(em_shape_of(out), 0.3, 1)));
    expect_close(em_item(l), loss, "checksum", 0);
    cr_assert_eq(em_backward(l), EM_OK, "%s", em_error());
    for (int k = 0; k < n; k++) {
        cr_assert_not_null(ts[k]->grad, "tensor %d has no gradient", k);
        expect_close(em_ref_checksum(ts[k]->grad), want[k], "gradient checksum", k);
    }
}

/* m's parameters, then extra, into out; the count */
static int params_and(em_module *m, em_tensor *extra, em_tensor **out)
{
    em_param_ref refs[32];
    int n = em_module_parameters(m, refs, 32);
    cr_assert(n > 0 && n < 32);
    for (int k = 0; k < n; k++)
        out[k] = refs[k].value;
    out[n] = extra;
    return n + (extra != NULL);
}

static em_module *layer_f64(em_transformer_opts o)
{
    em_module *m = em_transformer_encoder_layer(8, 2, o);
    cr_assert_not_null(m, "%s", em_error());
    cr_assert_eq(em_module_to_dtype(m, EM_F64), EM_OK, "%s", em_error());
    cr_assert_gt(em_ref_fill_params(m), 0, "%s", em_error());
    return m;
}

/* A layer of opts on the script's x with its padding mask and, when bias_scale, the learned
 * (T, T) src_mask bias_scale cos(0.8 i): the checksum and the gradients of its parameters (and
 * the mask's) against PyTorch's */
static void check_layer(em_transformer_opts o, double bias_scale, double loss,
                        const double *grad_sums)
{
    em_module *m = layer_f64(o);
    em_tensor *x = wave(EM_SHAPE(2, 5, 8), 0.45, 1);
    em_tensor *bias = bias_scale ? em_requires_grad_(wave(EM_SHAPE(5, 5), 0.8, bias_scale), true)
                                 : NULL;
    em_tensor *ts[14];
    int n = params_and(m, bias, ts);
    expect_grads(em_transformer_layer_masked(m, x, bias, padding()), loss, ts, n, grad_sums);
    em_module_free(m);
}

Test(padded_transformer, encoder_layer_with_a_key_padding_mask_matches_pytorch)
{
    check_layer((em_transformer_opts){.dim_feedforward = 16}, 0, layer_padded_loss,
                layer_padded_grad_sums);
}

/* a learned (T, T) bias as src_mask beside the padding mask: it gets its gradient */
Test(padded_transformer, a_float_src_mask_takes_its_gradient)
{
    check_layer((em_transformer_opts){.dim_feedforward = 16, .norm_first = true,
                                      .activation = EM_ACTIVATION_GELU},
                0.2, layer_bias_loss, layer_bias_grad_sums);
}

/* scaled_dot_product_attention with a (1, H, Lq, Lk) bias: its gradient sums over the batch */
Test(padded_transformer, sdpa_float_mask_takes_its_gradient)
{
    em_tensor *q = em_requires_grad_(wave(EM_SHAPE(2, 2, 4, 3), 0.37, 1), true);
    em_tensor *k = em_requires_grad_(wave(EM_SHAPE(2, 2, 5, 3), 0.53, 1), true);
    em_tensor *v = em_requires_grad_(wave(EM_SHAPE(2, 2, 5, 3), 0.29, 1), true);
    em_tensor *bias = em_requires_grad_(wave(EM_SHAPE(1, 2, 4, 5), 0.61, 0.5), true);
    em_tensor *out = em_scaled_dot_product_attention(q, k, v, (em_sdpa_opts){.attn_mask = bias});
    expect_grads(out, sdpa_bias_loss, (em_tensor *[]){q, k, v, bias}, 4, sdpa_bias_grad_sums);
    /* without grad mode the fused kernel runs: the same values */
    bool grad = em_set_grad_enabled(false);
    em_tensor *fused = em_scaled_dot_product_attention(q, k, v, (em_sdpa_opts){
        .attn_mask = bias});
    em_set_grad_enabled(grad);
    cr_assert_not_null(fused, "%s", em_error());
    double a[48], b[48];
    em_copy_to_host(out, EM_F64, a);
    em_copy_to_host(fused, EM_F64, b);
    for (int i = 0; i < 2 * 2 * 4 * 3; i++)
        cr_expect(fabs(a[i] - b[i]) < 1e-12, "element %d: composed %.15g, fused %.15g", i, a[i],
                  b[i]);
}

/* Embedding (padding_idx 0), one post-norm encoder layer given the padding mask, the mean over
 * the real tokens, Linear(8, 3), cross entropy; SGD at lr 0.5 */
Test(padded_transformer, padded_batch_classifier_loss_matches_pytorch)
{
    em_module *net = em_module_list(3, em_embedding_layer(11, 8, (em_embedding_opts){
                                           .padding_idx = 0, .has_padding_idx = true}),
                                    em_transformer_encoder_layer(8, 2, (em_transformer_opts){
                                        .dim_feedforward = 16}),
                                    em_linear_layer(8, 3, true));
    cr_assert_not_null(net, "%s", em_error());
    cr_assert_eq(em_module_to_dtype(net, EM_F64), EM_OK, "%s", em_error());
    cr_assert_eq(em_ref_fill_params(net), 15, "%s", em_error());
    em_tensor *idx = em_from_data(EM_SHAPE(3, 6), EM_I64, classifier_tokens);
    em_tensor *labels = em_from_data(EM_SHAPE(3), EM_I64, (int64_t[]){2, 0, 1});
    em_tensor *pad = em_eq(idx, em_scalar(0, EM_I64));                        // (B, T) bool
    em_tensor *keep = em_unsqueeze(em_to_dtype(em_ne(idx, em_scalar(0, EM_I64)), EM_F64), 2);
    em_optim *opt = em_sgd(net, (em_sgd_opts){.lr = 0.5});
    cr_assert_not_null(opt, "%s", em_error());
    for (int step = 0; step < 3; step++) {
        em_scope_begin();
        em_tensor *x = em_forward(net->children[0].module, idx);             // (B, T, 8)
        x = em_transformer_layer_masked(net->children[1].module, x, NULL, pad);
        em_tensor *pooled = em_div(em_sum(em_mul(x, keep), (int[]){1}, 1, false),
                                   em_sum(keep, (int[]){1}, 1, false));      // (B, 8)
        em_tensor *logits = em_forward(net->children[2].module, pooled);      // (B, 3)
        em_tensor *loss = em_cross_entropy(logits, labels, (em_cross_entropy_opts){0});
        cr_assert_not_null(loss, "%s", em_error());
        expect_close(em_item(loss), classifier_losses[step], "loss at step", step);
        cr_assert_eq(em_backward(loss), EM_OK, "%s", em_error());
        if (step == 0) {
            em_param_ref refs[15];
            em_module_parameters(net, refs, 15);
            for (int k = 0; k < 15; k++)
                expect_close(em_ref_checksum(refs[k].value->grad), classifier_grad_sums[k],
                             "first step's gradient checksum", k);
        }
        cr_assert_eq(em_optim_step(opt), EM_OK, "%s", em_error());
        em_optim_zero_grad(opt);
        em_scope_end();
    }
    em_optim_free(opt);
    em_module_free(net);
}
