/* MultiheadAttention, TransformerEncoderLayer and GPT against PyTorch: outputs and every
 * parameter's gradient with all parameters set by one formula (reference values from
 * tests/torch_ref/transformer_values.py, PyTorch 1.13 in f64); PyTorch's parameter names; the
 * key/value cache reproducing the full forward; checkpointed blocks giving the same gradients;
 * the errors. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "ember.h"
#include "helpers/reference.h"

TestSuite(transformer, .init = em_scope_begin, .fini = em_scope_end);

/* mha_causal */
static const double mha_causal_loss = 5.08550541488;
static const double mha_causal_values[6] = { /* at [0, 1, 26, 40, 78, 79] */
    -1.52602077707, -0.278967825518, 0.407086944111, -1.63126692515, -0.0471166015219,
    -0.599313154496};
static const double mha_causal_grad_sums[4] = { /* named_parameters order */
    5.50281192298, -3.58820128055, 2.39942969596, -0.174149705442};
/* mha_cross */
static const double mha_cross_loss = 0.591595550922;
static const double mha_cross_values[6] = { /* at [0, 1, 26, 40, 78, 79] */
    -0.714427778647, -0.276614085741, 0.196151333783, -0.962026261002, 0.440974478566,
    0.0197920066299};
static const double mha_cross_grad_sums[4] = { /* named_parameters order */
    2.8525816117, -1.28223867824, 1.35277087217, -0.174149705442};
/* layer_prenorm */
static const double layer_prenorm_loss = -2.86847642507;
static const double layer_prenorm_values[6] = { /* at [0, 1, 26, 40, 78, 79] */
    -0.179393133917, 0.0455294563113, 0.306387004275, -0.441002316551, 0.274192736664,
    0.246252793144};
static const double layer_prenorm_grad_sums[12] = { /* named_parameters order */
    0.337826660351, -0.960817842103, 0.139781294836, 0.349559052769, -0.135590568176,
    -0.0569136898727, 0.10306403288, -0.174149705442, 3.03591577436, -1.1838131263,
    1.10196653976, 0.325535062297};
/* layer_postnorm */
static const double layer_postnorm_loss = 0.625738215163;
static const double layer_postnorm_values[6] = { /* at [0, 1, 26, 40, 78, 79] */
    0.428765812793, 0.264756823846, -0.347169567597, 0.444589739883, -0.0763882279758,
    0.427978781968};
static const double layer_postnorm_grad_sums[12] = { /* named_parameters order */
    0.0751559078888, 0.0709260777527, -0.216609816892, -0.143893127741, 0.0761305151256,
    0.0595615697793, -0.340945278971, -0.551528246111, 0.972393637817, 0.28932966424,
    1.34734961778, -0.174149705442};
/* gpt */
static const double gpt_loss = 0.622279098234;
static const double gpt_values[6] = { /* at [0, 1, 44, 66, 130, 131] */
    -0.353415053575, -0.180460533786, -0.358690921821, -0.355113967854, -0.369953982384,
    -0.22014014427};
static const double gpt_grad_sums[28] = { /* named_parameters order */
    -0.147116298129, 0.0744229916953, 0.000115232048254, 0.0706576540067, -0.0231538462907,
    0.0798370502548, 0.00709015275546, -0.00158028424091, 0.0177201532858, -0.0271803484591,
    0.0375497234489, 0.104855082131, 0.31202118299, -0.0884442824832, -0.00275076422373,
    -0.0575616906075, 0.026023307001, -0.0259239843426, 0.0129928434881, -0.00507279272266,
    0.0123188807175, -0.045620230099, 0.0192220465523, 0.0917138988723, 0.0706453489085,
    -0.0661515288737, 0.0128501439457, -1.49589376807};

/* A tensor of shape s with element i = cos(a i), as the reference's inputs. */
static em_tensor *wave(em_shape s, double a, em_dtype dt)
{
    return em_to_dtype(em_ref_wave(s, a, M_PI / 2, 1.0), dt);
}

/* Parameter k (traversal order), element i: 0.3 sin(0.7 i + 1.3 k + 0.1), as the reference. */
static void fill(em_module *m)
{
    cr_assert_gt(em_ref_fill_params(m), 0, "%s", em_error());
}

/* out against the reference: the checksum sum(out * cos(0.3 i)), six values, and after
 * backward of the checksum every parameter grad's checksum. */
static void expect_reference(em_module *m, const em_tensor *out, double loss, const double *values,
                             const int64_t *at, const double *grad_sums, int n_params)
{
    cr_assert_not_null(out, "%s", em_error());
    em_tensor *l = em_sum_all(em_mul(out, wave(em_shape_of(out), 0.3, out->dtype)));
    cr_expect(fabs(em_item(l) - loss) < 4e-6 * fmax(1, fabs(loss)), "loss %.9g, want %.9g",
              em_item(l), loss);
    em_tensor *flat = em_reshape(out, EM_SHAPE(-1));
    for (int j = 0; j < 6; j++) {
        double v = em_get(flat, &at[j]);
        cr_expect(fabs(v - values[j]) < 4e-6, "out[%lld] %.9g, want %.9g", (long long)at[j], v,
                  values[j]);
    }
    cr_assert_eq(em_backward(l), EM_OK, "%s", em_error());
    em_param_ref refs[64];
    cr_assert_eq(em_module_parameters(m, refs, 64), n_params);
    for (int k = 0; k < n_params; k++) {
        const em_tensor *g = refs[k].value->grad;
        cr_assert_not_null(g, "%s has no grad", refs[k].name);
        double s = em_item(em_sum_all(em_mul(em_reshape(g, EM_SHAPE(-1)),
                                             wave(EM_SHAPE(em_numel(g)), 0.3, g->dtype))));
        cr_expect(fabs(s - grad_sums[k]) < 4e-6 * fmax(1, fabs(grad_sums[k])),
                  "grad of %s: checksum %.9g, want %.9g", refs[k].name, s, grad_sums[k]);
    }
    em_module_zero_grad(m);
}

static const int64_t picks80[6] = {0, 1, 26, 40, 78, 79};

Test(transformer, multihead_attention_matches_pytorch)
{
    em_module *m = em_multihead_attention_layer(8, 2, (em_mha_opts){0});
    cr_assert_not_null(m, "%s", em_error());
    fill(m);
    em_tensor *x = wave(EM_SHAPE(2, 5, 8), 0.45, EM_F32);
    expect_reference(m, em_multihead_attention(m, x, x, x, (em_mha_call){.is_causal = true}),
                     mha_causal_loss, mha_causal_values, picks80, mha_causal_grad_sums, 4);
    /* the same mask given as PyTorch's bool attn_mask (true: may not attend) */
    em_tensor *i = em_reshape(em_arange(0, 5, 1, EM_F32), EM_SHAPE(5, 1));
    em_tensor *above = em_gt(em_arange(0, 5, 1, EM_F32), i);
    expect_reference(m, em_multihead_attention(m, x, x, x, (em_mha_call){.attn_mask = above}),
                     mha_causal_loss, mha_causal_values, picks80, mha_causal_grad_sums, 4);
    em_tensor *kv = wave(EM_SHAPE(2, 4, 8), 0.21, EM_F32);
    bool pad[8] = {false, false, false, true, false, true, false, false};
    em_tensor *kpm = em_from_data(EM_SHAPE(2, 4), EM_BOOL, pad);
    expect_reference(m, em_multihead_attention(m, x, kv, kv, (em_mha_call){
                             .key_padding_mask = kpm}),
                     mha_cross_loss, mha_cross_values, picks80, mha_cross_grad_sums, 4);
    em_module_free(m);
}

Test(transformer, encoder_layer_matches_pytorch)
{
    em_module *pre = em_transformer_encoder_layer(8, 2, (em_transformer_opts){
        .dim_feedforward = 16, .activation = EM_ACTIVATION_GELU, .norm_first = true,
        .causal = true});
    em_module *post = em_transformer_encoder_layer(8, 2, (em_transformer_opts){
        .dim_feedforward = 16});
    cr_assert(pre && post, "%s", em_error());
    fill(pre);
    fill(post);
    em_tensor *x = wave(EM_SHAPE(2, 5, 8), 0.45, EM_F32);
    expect_reference(pre, em_forward(pre, x), layer_prenorm_loss, layer_prenorm_values, picks80,
                     layer_prenorm_grad_sums, 12);
    expect_reference(post, em_forward(post, x), layer_postnorm_loss, layer_postnorm_values,
                     picks80, layer_postnorm_grad_sums, 12);
    em_module_free(pre);
    em_module_free(post);
}

static em_tensor *gpt_tokens(void)
{
    int64_t ids[12];
    for (int i = 0; i < 6; i++) {
        ids[i] = (7 * i + 3) % 11;
        ids[6 + i] = (5 * i + 1) % 11;
    }
    return em_from_data(EM_SHAPE(2, 6), EM_I64, ids);
}

static em_module *tiny_gpt(void)
{
    em_module *m = em_gpt((em_gpt_settings){.vocab_size = 11, .block_size = 8, .n_layer = 2,
                                          .n_head = 2, .n_embd = 8});
    cr_assert_not_null(m, "%s", em_error());
    return m;
}

Test(transformer, gpt_matches_pytorch_with_pytorch_names)
{
    em_module *m = tiny_gpt();
    fill(m);
    expect_reference(m, em_forward(m, gpt_tokens()), gpt_loss, gpt_values,
                     (int64_t[]){0, 1, 44, 66, 130, 131}, gpt_grad_sums, 28);
    em_param_ref refs[64];
    cr_assert_eq(em_module_parameters(m, refs, 64), 28);
    const char *names[] = {"wte.weight", "wpe.weight", "h.0.self_attn.in_proj_weight",
                           "h.0.self_attn.in_proj_bias", "h.0.self_attn.out_proj.weight",
                           "h.0.self_attn.out_proj.bias", "h.0.linear1.weight",
                           "h.0.linear1.bias", "h.0.linear2.weight", "h.0.linear2.bias",
                           "h.0.norm1.weight", "h.0.norm1.bias", "h.0.norm2.weight",
                           "h.0.norm2.bias"};
    for (int k = 0; k < 14; k++)
        cr_expect_str_eq(refs[k].name, names[k]);
    cr_expect_str_eq(refs[27].name, "ln_f.bias");
    em_module_free(m);
}

Test(transformer, gpt2_init_scales)
{
    em_manual_seed(3);
    em_module *m = em_gpt((em_gpt_settings){.vocab_size = 50, .block_size = 64, .n_layer = 8,
                                          .n_head = 4, .n_embd = 64});
    cr_assert_not_null(m, "%s", em_error());
    struct { const char *name; double std; } want[] = {
        {"wte.weight", 0.02}, {"h.3.self_attn.in_proj_weight", 0.02},
        {"h.3.linear1.weight", 0.02}, {"h.3.linear2.weight", 0.005},
        {"h.3.self_attn.out_proj.weight", 0.005}, {"h.3.linear1.bias", 0},
        {"h.3.self_attn.in_proj_bias", 0}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        em_tensor *p = em_module_find(m, want[i].name);
        cr_assert_not_null(p, "%s", want[i].name);
        double std = sqrt(em_item(em_mean_all(em_square(p))));
        cr_expect(fabs(std - want[i].std) <= 0.1 * want[i].std, "%s: std %g, want %g",
                  want[i].name, std, want[i].std);
    }
    cr_expect_eq(em_item(em_mean_all(em_module_find(m, "h.3.norm2.weight"))), 1.0);
    em_module_free(m);
}

Test(transformer, kv_cache_gives_the_full_forward)
{
    em_module *m = tiny_gpt();
    em_module_eval(m);
    em_set_grad_enabled(false);
    em_tensor *idx = gpt_tokens();
    em_tensor *full = em_forward(m, idx); /* (2, 6, 11) */
    em_kv_cache *cache = em_gpt_kv_cache_new(m, 2);
    cr_assert_not_null(cache, "%s", em_error());
    /* a prompt of 3 positions, then one at a time, then two at once */
    int64_t cuts[4] = {0, 3, 4, 6};
    for (int c = 0; c < 3; c++) {
        em_tensor *part = em_gpt_forward(m, em_narrow(idx, 1, cuts[c], cuts[c + 1] - cuts[c]),
                                         cache);
        cr_assert_not_null(part, "%s", em_error());
        em_tensor *want = em_narrow(full, 1, cuts[c], cuts[c + 1] - cuts[c]);
        double worst = em_item(em_amax(em_abs(em_sub(part, want)), NULL, 0, false));
        cr_expect(worst < 1e-5, "positions %lld..: %g", (long long)cuts[c], worst);
    }
    cr_expect_eq(em_kv_cache_len(cache), 6);
    cr_expect_null(em_gpt_forward(m, em_narrow(idx, 1, 0, 3), cache));
    cr_expect(strstr(em_error(), "6 cached + T <= block_size 8"), "%s", em_error());
    em_error_clear();
    em_kv_cache_free(cache);
    em_set_grad_enabled(true);
    em_module_free(m);
}

Test(transformer, checkpointed_blocks_give_the_same_gradients)
{
    em_module *plain = tiny_gpt(), *ckpt = tiny_gpt();
    fill(plain);
    fill(ckpt);
    cr_assert_eq(em_gpt_checkpoint_blocks(ckpt), EM_OK, "%s", em_error());
    em_tensor *idx = gpt_tokens();
    em_module *ms[2] = {plain, ckpt};
    for (int i = 0; i < 2; i++) {
        em_tensor *out = em_forward(ms[i], idx);
        cr_assert_eq(em_backward(em_sum_all(em_mul(out, wave(em_shape_of(out), 0.3, EM_F32)))),
                     EM_OK, "%s", em_error());
    }
    em_param_ref a[64], b[64];
    int n = em_module_parameters(plain, a, 64);
    cr_assert_eq(em_module_parameters(ckpt, b, 64), n);
    for (int k = 0; k < n; k++) {
        cr_expect_str_eq(a[k].name, b[k].name);
        double d = em_item(em_amax(em_abs(em_sub(a[k].value->grad, b[k].value->grad)), NULL, 0,
                                   false));
        cr_expect(d == 0, "%s differs by %g", a[k].name, d);
    }
    em_module_free(plain);
    em_module_free(ckpt);
}

static void expect_error(const void *result, const char *needle)
{
    cr_expect_null(result);
    cr_expect(strstr(em_error(), needle), "error \"%s\" lacks \"%s\"", em_error(), needle);
    em_error_clear();
}

Test(transformer, bad_input_names_what_is_wrong)
{
    expect_error(em_multihead_attention_layer(10, 3, (em_mha_opts){0}),
                 "embed_dim 10 must be a positive multiple of num_heads 3");
    expect_error(em_gpt((em_gpt_settings){.vocab_size = 5, .block_size = 4, .n_layer = 1,
                                        .n_head = 3, .n_embd = 8}), "n_embd 8 (a multiple");
    em_module *m = em_multihead_attention_layer(8, 2, (em_mha_opts){0});
    em_tensor *x = em_zeros(EM_SHAPE(2, 5, 8), EM_F32), *y = em_zeros(EM_SHAPE(2, 5, 6), EM_F32);
    expect_error(em_forward(m, y), "must be (B, Lq, 8), (B, Lk, 8) and (B, Lk, 8): [2,5,6]");
    expect_error(em_multihead_attention(m, x, x, x, (em_mha_call){
                     .attn_mask = em_zeros(EM_SHAPE(5, 4), EM_BOOL)}),
                 "attn_mask [5,4] must be (Lq, Lk) = (5, 5)");
    expect_error(em_multihead_attention(m, x, x, x, (em_mha_call){
                     .key_padding_mask = em_zeros(EM_SHAPE(2, 5), EM_F32)}),
                 "key_padding_mask f32 [2,5] must be bool (B, Lk) = (2, 5)");
    em_module *g = tiny_gpt();
    expect_error(em_forward(g, em_zeros(EM_SHAPE(2, 9), EM_I64)), "block_size 8, got i64 [2,9]");
    expect_error(em_forward(g, x), "needs i64 token ids (B, T)");
    expect_error(em_gpt_kv_cache_new(m, 1), "the module is MultiheadAttention, not a GPT");
    em_module_free(g);
    em_module_free(m);
}
