/* Sequence layers. Conv1d: PyTorch's shapes, initialisation bounds and f64 gradients. LSTM and
 * GRU: outputs, final states and gradients as PyTorch 1.13 gives them (torch.nn.LSTM /
 * GRU(3, 4, num_layers=2, batch_first=True) in f64, every parameter k of the state dict set to
 * 0.5 sin(0.3 i + 0.1 k i + 0.2 k), printed to 10 digits); f64 finite-difference gradients of every
 * input and parameter; unbatched and sequence-first layouts; dynamic INT8 LSTM and GRU against
 * PyTorch's quantize_dynamic and our f32; and a small LSTM learning a sequence. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "helpers/gradcheck.h"
#include "helpers/reference.h"

TestSuite(nn_sequence, .init = em_scope_begin, .fini = em_scope_end);

static em_tensor *wave(em_shape s, double a, double b, double scale)
{
    return em_ref_wave(s, a, b, scale);
}

static em_tensor *leaf(em_tensor *t)
{
    return em_requires_grad_(t, true);
}

/* Parameter k (state-dict order) becomes the f64 leaf 0.5 sin((0.3 + 0.1 k) i + 0.2 k). */
static void set_wave_params(em_module *m)
{
    for (int k = 0; k < m->n_params; k++) {
        em_tensor *old = m->params[k].value;
        em_tensor *p = wave(em_shape_of(old), 0.3 + 0.1 * k, 0.2 * k, 0.5);
        m->params[k].value = em_retain(leaf(p)); /* the module's reference; the scope has one */
        em_release(old);
    }
}

static void expect_values(const em_tensor *t, const double *want, int64_t n, double tol)
{
    cr_assert(em_ref_close(t, want, n, tol), "%s", em_error());
}

static em_tensor *dot(const em_tensor *t, double a, double b)
{
    return em_sum_all(em_mul(t, wave(em_shape_of(t), a, b, 1)));
}

Test(nn_sequence, lstm_as_pytorch)
{
    em_module *m = em_lstm_layer(3, 4, (em_rnn_opts){.num_layers = 2, .batch_first = true});
    cr_assert_not_null(m, "%s", em_error());
    em_param_ref refs[8];
    cr_assert_eq(em_module_parameters(m, refs, 8), 8);
    const char *names[8] = {"weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0",
                            "weight_ih_l1", "weight_hh_l1", "bias_ih_l1", "bias_hh_l1"};
    for (int k = 0; k < 8; k++)
        cr_assert_str_eq(refs[k].name, names[k]);
    cr_assert(refs[0].value->shape[0] == 16 && refs[0].value->shape[1] == 3);
    cr_assert(refs[5].value->shape[0] == 16 && refs[5].value->shape[1] == 4);
    set_wave_params(m);
    em_tensor *x = leaf(wave(EM_SHAPE(2, 3, 3), 0.7, 0.1, 1));
    em_tensor *h0 = leaf(wave(EM_SHAPE(2, 2, 4), 0.5, 0.4, 0.3));
    em_tensor *c0 = leaf(wave(EM_SHAPE(2, 2, 4), 0.6, 0.9, 0.3));
    em_tensor *hn, *cn, *out = em_lstm(m, x, h0, c0, &hn, &cn);
    cr_assert_not_null(out, "%s", em_error());
    cr_assert(out->ndim == 3 && out->shape[0] == 2 && out->shape[1] == 3 && out->shape[2] == 4);
    expect_values(out, (double[]){
        0.011183813, -0.0421206609, -0.1285243411, 0.0096565441, 0.1587551467, -0.1806355585,
        -0.2627660705, -0.083819196, 0.2718884748, -0.3488733761, -0.2880709585, -0.1739208781,
        0.2014357894, -0.1056131036, -0.1682015824, -0.1544877377, 0.2714340302, -0.2551881961,
        -0.2773343422, -0.1899141055, 0.3251546894, -0.3866896955, -0.2840284671,
        -0.2395232348}, 24, 1e-9);
    expect_values(hn, (double[]){
        -0.4631518676, -0.3081669787, -0.1165155548, 0.1538715911, -0.5722555444, -0.3749423153,
        -0.0717847308, 0.1739995164, 0.2718884748, -0.3488733761, -0.2880709585, -0.1739208781,
        0.3251546894, -0.3866896955, -0.2840284671, -0.2395232348}, 16, 1e-9);
    expect_values(cn, (double[]){
        -0.6174258588, -0.4078892208, -0.1990319185, 0.4862769644, -0.8313996055, -0.5205305527,
        -0.1203064407, 0.5280501757, 0.5395097389, -0.5876311482, -0.5027803998, -0.3094990475,
        0.6544747123, -0.6813903588, -0.4906171624, -0.4412090014}, 16, 1e-9);
    em_tensor *loss = em_add(em_add(dot(out, 1.1, 0.3), dot(hn, 0.9, 0.7)), dot(cn, 0.8, 0.5));
    cr_assert_eq(em_backward(loss), EM_OK, "%s", em_error());
    expect_values(x->grad, (double[]){
        0.3552903479, 0.3437876986, 0.301575518, 0.4799242623, 0.3904731129, 0.2661421632,
        0.0056002058, -0.1486257284, -0.289575369, -0.3453316747, -0.3439280534, -0.3118023634,
        -0.3681252374, -0.3377225506, -0.2771521142, -0.0308133466, 0.0877528957,
        0.1984804331}, 18, 1e-9);
    expect_values(h0->grad, (double[]){
        0.3468371447, 0.3262403673, 0.2541374092, 0.1419117422, -0.2188115362, -0.2066663735,
        -0.1618931346, -0.0915605294, -0.189089515, -0.153923002, -0.0253888615, 0.1185458218,
        -0.0428841122, -0.0223274552, 0.0117727365, 0.0387317442}, 16, 1e-9);
    expect_values(em_module_find(m, "bias_ih_l1")->grad, (double[]){
        -0.1055356468, 0.1062333752, -0.1464629707, -0.1559660524, -0.1218848384, 0.1139463101,
        0.0548957756, -0.1012897247, -0.2181634446, 0.3135719739, 0.0048313163, 0.1841524191,
        -0.1414179412, 0.151660334, -0.0359817673, -0.1275840427}, 16, 1e-9);
    const em_tensor *ghh = em_module_find(m, "weight_hh_l0")->grad;
    expect_values(em_narrow(em_flatten(ghh, 0, 1), 0, 0, 8), (double[]){
        -0.0456974728, -0.0241486548, 0.0318288192, -0.0029600307, -0.0504489926, -0.0366545838,
        0.0369697322, 0.0071775671}, 8, 1e-9);
    expect_values(em_narrow(em_flatten(ghh, 0, 1), 0, 32, 4), (double[]){
        0.0190651788, 0.0761736433, 0.1008665515, 0.1650271639}, 4, 1e-9);
    em_module_free(m);
}

Test(nn_sequence, gru_as_pytorch)
{
    em_module *m = em_gru_layer(3, 4, (em_rnn_opts){.num_layers = 2, .batch_first = true});
    cr_assert_not_null(m, "%s", em_error());
    cr_assert_eq(em_module_find(m, "weight_hh_l1")->shape[0], 12);
    set_wave_params(m);
    em_tensor *x = leaf(wave(EM_SHAPE(2, 3, 3), 0.7, 0.1, 1));
    em_tensor *h0 = leaf(wave(EM_SHAPE(2, 2, 4), 0.5, 0.4, 0.3));
    em_tensor *hn, *out = em_gru(m, x, h0, &hn);
    expect_values(out, (double[]){
        0.0580200834, -0.1985373394, -0.347193287, -0.2036149422, 0.3472790244, -0.2598409397,
        -0.375016017, -0.3070689055, 0.5839791068, -0.4625383801, -0.3549973016, -0.4074600337,
        0.2303669384, 0.0019071342, -0.0307008118, 0.0758505187, 0.4351794387, -0.2055816869,
        -0.1556136609, -0.1272838004, 0.6237484847, -0.4586891073, -0.1871469943,
        -0.3053909745}, 24, 1e-9);
    expect_values(hn, (double[]){
        -0.325597337, -0.2368124093, -0.2114335501, 0.498506535, -0.3784313228, -0.2837408561,
        -0.165932707, 0.4955981129, 0.5839791068, -0.4625383801, -0.3549973016, -0.4074600337,
        0.6237484847, -0.4586891073, -0.1871469943, -0.3053909745}, 16, 1e-9);
    cr_assert_eq(em_backward(em_add(dot(out, 1.1, 0.3), dot(hn, 0.9, 0.7))), EM_OK, "%s",
                 em_error());
    expect_values(x->grad, (double[]){
        0.2142964119, 0.2038502246, 0.1751947037, 0.2743642853, 0.2232647954, 0.1522217264,
        -0.0205351406, -0.0272031464, -0.0314411761, -0.2452006405, -0.2326926224,
        -0.1993988654, -0.1604385833, -0.1706335287, -0.1655862892, 0.0134161062,
        -0.0238846506, -0.0590518627}, 18, 1e-9);
    expect_values(h0->grad, (double[]){
        0.3283973592, 0.2160830021, 0.0780498941, -0.0132702569, -0.3004036789, -0.2024341523,
        -0.1128081904, -0.0616465916, 0.0135455413, 0.4506551632, 0.1969022762, -0.1748287932,
        0.0480217348, 0.3300149576, 0.3957794142, 0.2225701463}, 16, 1e-9);
    expect_values(em_module_find(m, "bias_ih_l1")->grad, (double[]){
        -0.0172306202, 0.0637086676, -0.0481829375, -0.0199013312, 0.0621746661, -0.1219417271,
        0.2404304975, 0.3463507598, -0.5133019379, -0.2663400147, 0.2771843797, 0.533718812},
        12, 1e-9);
    const em_tensor *ghh = em_module_find(m, "weight_hh_l0")->grad;
    expect_values(em_narrow(em_flatten(ghh, 0, 1), 0, 16, 6), (double[]){
        0.0192433952, 0.0044083268, -0.0314511565, 0.0231370708, 0.0221112966, 0.0168149047},
        6, 1e-9);
    em_module_free(m);
}

/* ---- finite differences ---- */

typedef struct {
    em_module *m;
    bool lstm, with_state;
} rnn_ctx;

/* inputs: x, h0, c0 (LSTM), then the parameters; output: out, h_n and c_n flattened, joined */
static em_tensor *apply_rnn(em_tensor *const *in, void *ctx)
{
    rnn_ctx *c = ctx;
    em_tensor *hn = NULL, *cn = NULL, *out;
    const em_tensor *h0 = c->with_state ? in[1] : NULL;
    const em_tensor *c0 = c->with_state && c->lstm ? in[2] : NULL;
    out = c->lstm ? em_lstm(c->m, in[0], h0, c0, &hn, &cn) : em_gru(c->m, in[0], h0, &hn);
    em_tensor *parts[3] = {em_flatten(out, 0, -1), em_flatten(hn, 0, -1),
                           c->lstm ? em_flatten(cn, 0, -1) : NULL};
    return out ? em_cat(parts, c->lstm ? 3 : 2, 0) : NULL;
}

static void gradcheck_rnn(bool lstm, em_rnn_opts o, em_shape x_shape, em_shape state_shape,
                          bool with_state)
{
    em_module *m = lstm ? em_lstm_layer(3, 3, o) : em_gru_layer(3, 3, o);
    em_tensor *in[24] = {em_gradcheck_leaf(x_shape, -1, 1, 1)};
    int n = 1;
    if (with_state) {
        in[n++] = em_gradcheck_leaf(state_shape, -1, 1, 2);
        if (lstm)
            in[n++] = em_gradcheck_leaf(state_shape, -1, 1, 3);
    }
    int np = em_gradcheck_module_params(m, in + n, 24 - n, 10);
    cr_assert_gt(np, 0);
    rnn_ctx c = {m, lstm, with_state};
    cr_assert(em_test_gradcheck_default(apply_rnn, &c, in, n + np), "%s %s", lstm ? "LSTM" : "GRU",
              em_error());
    for (int i = 0; i < n + np; i++)
        em_release(in[i]);
    em_module_free(m);
}

Test(nn_sequence, gradients_match_finite_differences)
{
    em_rnn_opts two = {.num_layers = 2};
    for (int lstm = 0; lstm < 2; lstm++) {
        gradcheck_rnn(lstm, two, EM_SHAPE(3, 2, 3), EM_SHAPE(2, 2, 3), true); /* (T, B, in) */
        gradcheck_rnn(lstm, (em_rnn_opts){.batch_first = true, .no_bias = true},
                      EM_SHAPE(2, 3, 3), EM_SHAPE(1, 2, 3), false);
        gradcheck_rnn(lstm, (em_rnn_opts){0}, EM_SHAPE(4, 3), EM_SHAPE(1, 3), true); /* (T, in) */
    }
}

Test(nn_sequence, layouts_agree)
{
    em_manual_seed(3);
    em_module *m = em_lstm_layer(3, 5, (em_rnn_opts){.num_layers = 2});
    em_tensor *x = em_randn(EM_SHAPE(4, 1, 3), EM_F32, NULL); /* (T, B = 1, in) */
    em_tensor *hn_b, *hn_u, *cn_b, *cn_u;
    em_tensor *batched = em_lstm(m, x, NULL, NULL, &hn_b, &cn_b);
    em_tensor *unbatched = em_lstm(m, em_squeeze(x, 1), NULL, NULL, &hn_u, &cn_u);
    cr_assert_not_null(unbatched, "%s", em_error());
    cr_assert(unbatched->ndim == 2 && hn_u->ndim == 2 && hn_u->shape[0] == 2);
    cr_assert_arr_eq(em_data_ptr(em_contiguous(batched)), em_data_ptr(em_contiguous(unbatched)),
                     4 * 5 * 4);
    cr_assert_arr_eq(em_data_ptr(em_contiguous(cn_b)), em_data_ptr(em_contiguous(cn_u)), 2 * 5 * 4);
    em_tensor *y = em_forward(m, x);
    cr_assert_arr_eq(em_data_ptr(em_contiguous(y)), em_data_ptr(em_contiguous(batched)), 4 * 5 * 4);
    em_module_free(m);
}

Test(nn_sequence, dropout_between_layers_only_in_training)
{
    em_manual_seed(4);
    em_module *m = em_gru_layer(2, 6, (em_rnn_opts){.num_layers = 2, .dropout = 0.5});
    em_tensor *x = em_randn(EM_SHAPE(5, 3, 2), EM_F32, NULL);
    em_tensor *a = em_contiguous(em_forward(m, x)), *b = em_contiguous(em_forward(m, x));
    cr_assert(memcmp(em_data_ptr(a), em_data_ptr(b), 5 * 3 * 6 * 4) != 0, "fresh masks");
    em_module_eval(m);
    a = em_contiguous(em_forward(m, x));
    b = em_contiguous(em_forward(m, x));
    cr_assert_arr_eq(em_data_ptr(a), em_data_ptr(b), 5 * 3 * 6 * 4);
    char desc[128];
    em_module_describe(m, desc, sizeof desc);
    cr_assert_str_eq(desc, "2, 6, num_layers=2, batch_first=false, dropout=0.5");
    em_module_free(m);
}

Test(nn_sequence, bad_input_is_named)
{
    em_module *m = em_lstm_layer(3, 4, (em_rnn_opts){.batch_first = true});
    cr_assert_null(em_forward(m, em_zeros(EM_SHAPE(2, 5, 4), EM_F32)));
    cr_assert_str_eq(em_error(), "LSTM: expected floating x (B, T, 3) with at least one step: "
                                 "f32 [2,5,4]");
    em_error_clear();
    cr_assert_null(em_lstm(m, em_zeros(EM_SHAPE(2, 5, 3), EM_F32), em_zeros(EM_SHAPE(1, 3, 4),
                                                                            EM_F32),
                           NULL, NULL, NULL));
    cr_assert_str_eq(em_error(), "LSTM: h0 must be (1, B, 4) like x: f32 [1,3,4] for x [2,5,3]");
    em_error_clear();
    cr_assert_null(em_gru(m, em_zeros(EM_SHAPE(2, 5, 3), EM_F32), NULL, NULL));
    cr_assert_str_eq(em_error(), "em_gru: module is a LSTM, not a GRU");
    em_error_clear();
    cr_assert_null(em_lstm_layer(3, 0, (em_rnn_opts){0}));
    em_error_clear();
    em_module_free(m);
}

/* ---- dynamic INT8 ---- */

static em_tensor *f32_wave(em_shape s, double a, double b, double scale)
{
    return em_to_dtype(wave(s, a, b, scale), EM_F32);
}

Test(nn_sequence, quantized_lstm_near_pytorch_and_f32)
{
    em_module *net = em_sequential(1, em_lstm_layer(3, 4, (em_rnn_opts){.num_layers = 2,
                                                                        .batch_first = true}));
    em_module *lstm = em_module_child(net, "0");
    for (int k = 0; k < lstm->n_params; k++) {
        em_tensor *v = wave(em_shape_of(lstm->params[k].value), 0.3 + 0.1 * k, 0.2 * k, 0.5);
        cr_assert_eq(em_copy_(lstm->params[k].value, v), EM_OK);
    }
    em_tensor *x = f32_wave(EM_SHAPE(2, 3, 3), 0.7, 0.1, 1);
    em_tensor *f32 = em_contiguous(em_forward(net, x));
    cr_assert_eq(em_quantize_dynamic_(net, (em_quantize_opts){.granularity =
                                                                  EM_QUANT_PER_TENSOR}),
                 EM_OK, "%s", em_error());
    lstm = em_module_child(net, "0");
    cr_assert_str_eq(lstm->type->type_name, "QuantizedLSTM");
    cr_assert_str_eq(em_module_child(lstm, "hh_l1")->type->type_name, "QuantizedLinear");
    em_tensor *hn, *q = em_lstm(lstm, x, NULL, NULL, &hn, NULL);
    cr_assert_not_null(q, "%s", em_error());
    cr_assert(!q->requires_grad);
    /* torch.ao.quantization.quantize_dynamic(Sequential(lstm), {nn.LSTM}, qint8) on the same
     * weights and x, its onednn engine, printed to 7 digits */
    static const double torch_q[24] = {
        0.1626629, -0.1666814, -0.1793429, -0.1054691, 0.2373606, -0.2728215, -0.2803325,
        -0.1669539, 0.3062535, -0.390902, -0.2899523, -0.226466, 0.1618607, -0.1656672,
        -0.1797369, -0.105366, 0.2380545, -0.2734415, -0.2801089, -0.1670729, 0.3065937,
        -0.3916656, -0.2895474, -0.2264888};
    /* both quantize weights and activations to 8 bits (PyTorch's weight scale is max/127.5,
     * ours max/127): they agree to a few quantization steps of the outputs */
    expect_values(em_contiguous(q), torch_q, 24, 3e-3);
    double a[24], b[24], max_diff = 0;
    em_copy_to_host(q, EM_F64, a);
    em_copy_to_host(f32, EM_F64, b);
    for (int i = 0; i < 24; i++)
        max_diff = fmax(max_diff, fabs(a[i] - b[i]));
    cr_assert(max_diff > 1e-5 && max_diff < 3e-3, "int8 vs f32: %g", max_diff);
    expect_values(em_select(hn, 0, 1), (double[]){0.3062535, -0.390902, -0.2899523, -0.226466,
                                                  0.3065937, -0.3916656, -0.2895474, -0.2264888},
                  8, 3e-3);

    /* a quantized model round-trips through a file, structure rebuilt from its metadata */
    char path[] = "/tmp/ember_qlstm_XXXXXX";
    close(mkstemp(path));
    em_st_meta meta[2];
    int nm = em_quantize_meta(net, meta);
    cr_assert_eq(em_module_save(net, path, meta, nm), EM_OK, "%s", em_error());
    em_module *back = em_sequential(1, em_lstm_layer(3, 4, (em_rnn_opts){.num_layers = 2,
                                                                         .batch_first = true}));
    em_safetensors *st = NULL;
    cr_assert_eq(em_safetensors_load(path, &st), EM_OK, "%s", em_error());
    cr_assert_eq(em_quantize_prepare_load(back, st), EM_OK, "%s", em_error());
    em_safetensors_free(st);
    cr_assert_eq(em_module_load(back, path), EM_OK, "%s", em_error());
    cr_assert_eq(em_quantize_repack(back), EM_OK);
    unlink(path);
    em_tensor *again = em_contiguous(em_forward(back, x));
    cr_assert_arr_eq(em_data_ptr(again), em_data_ptr(em_contiguous(q)), 24 * 4);
    em_module_free(back);
    em_module_free(net);
}

Test(nn_sequence, quantized_gru_near_f32)
{
    em_manual_seed(9);
    em_module *gru = em_gru_layer(5, 8, (em_rnn_opts){.num_layers = 2});
    em_tensor *x = em_randn(EM_SHAPE(6, 4, 5), EM_F32, NULL);
    em_tensor *f32 = em_forward(gru, x);
    em_module *q = em_quantized_rnn(gru, EM_QUANT_PER_CHANNEL);
    cr_assert_not_null(q, "%s", em_error());
    char desc[160];
    em_module_describe(q, desc, sizeof desc);
    cr_assert_str_eq(desc, "5, 8, num_layers=2, batch_first=false, dropout=0, dtype=int8");
    em_tensor *y = em_forward(q, x);
    cr_assert_not_null(y, "%s", em_error());
    double a[192], b[192], max_diff = 0;
    em_copy_to_host(y, EM_F64, a);
    em_copy_to_host(f32, EM_F64, b);
    for (int i = 0; i < 192; i++)
        max_diff = fmax(max_diff, fabs(a[i] - b[i]));
    cr_assert(max_diff > 1e-5 && max_diff < 2e-2, "int8 vs f32: %g", max_diff);
    cr_assert_null(em_quantized_rnn(q, EM_QUANT_PER_CHANNEL));
    cr_assert_str_eq(em_error(), "em_quantized_rnn: module is a QuantizedGRU, not an LSTM or GRU");
    em_error_clear();
    em_module_free(q);
    em_module_free(gru);
}

/* ---- learning ---- */

Test(nn_sequence, lstm_learns_a_repeating_sequence)
{
    /* next token of 0 1 2 3 0 1 2 3 ... from a window: embedding, LSTM, linear */
    em_manual_seed(1);
    em_module *emb = em_embedding_layer(4, 8, (em_embedding_opts){0});
    em_module *lstm = em_lstm_layer(8, 16, (em_rnn_opts){.batch_first = true});
    em_module *head = em_linear_layer(16, 4, true);
    em_module *net = em_module_list(3, emb, lstm, head);
    int64_t tokens[4][7], next[4][7];
    for (int b = 0; b < 4; b++)
        for (int t = 0; t < 7; t++) {
            tokens[b][t] = (b + t) % 4;
            next[b][t] = (b + t + 1) % 4;
        }
    em_tensor *x = em_from_data(EM_SHAPE(4, 7), EM_I64, tokens);
    em_tensor *y = em_from_data(EM_SHAPE(4, 7), EM_I64, next);
    em_optim *opt = em_adam(net, (em_adam_opts){.lr = 0.03});
    double first = 0, last = 0;
    for (int step = 0; step < 60; step++) {
        em_scope_begin();
        em_tensor *logits = em_forward(head, em_forward(lstm, em_forward(emb, x))); // (4, 7, 4)
        em_tensor *loss = em_cross_entropy(em_permute(logits, (int[]){0, 2, 1}), y,
                                           (em_cross_entropy_opts){0});
        cr_assert_not_null(loss, "%s", em_error());
        last = em_item(loss);
        if (step == 0)
            first = last;
        cr_assert_eq(em_backward(loss), EM_OK, "%s", em_error());
        em_optim_step(opt);
        em_optim_zero_grad(opt);
        em_scope_end();
    }
    cr_assert(first > 1.2 && last < 0.05, "loss %g -> %g", first, last);
    em_optim_free(opt);
    em_module_free(net);
}

/* ---- Conv1d ---- */

typedef struct {
    em_module *m;
} layer_ctx;

static em_tensor *apply_layer(em_tensor *const *in, void *ctx)
{
    return em_forward(((layer_ctx *)ctx)->m, in[0]);
}

Test(nn_sequence, conv1d_layer)
{
    em_module *m = em_conv1d_layer(4, 6, 3, (em_conv1d_layer_opts){.stride = 2, .padding = 1,
                                                                   .groups = 2});
    cr_assert_not_null(m, "%s", em_error());
    em_tensor *w = em_module_find(m, "weight"), *b = em_module_find(m, "bias");
    cr_assert(w->ndim == 3 && w->shape[0] == 6 && w->shape[1] == 2 && w->shape[2] == 3);
    double bound = 1.0 / sqrt(6.0), v[36]; /* fan_in = 2 * 3; kaiming_uniform(a = sqrt 5) too */
    em_copy_to_host(w, EM_F64, v);
    for (int i = 0; i < 36; i++)
        cr_assert(fabs(v[i]) <= bound, "weight %d = %g", i, v[i]);
    em_copy_to_host(b, EM_F64, v);
    for (int i = 0; i < 6; i++)
        cr_assert(fabs(v[i]) <= bound, "bias %d = %g", i, v[i]);
    char desc[160];
    em_module_describe(m, desc, sizeof desc);
    cr_assert_str_eq(desc, "4, 6, kernel_size=3, stride=2, padding=1, dilation=1, groups=2, "
                           "bias=true");
    em_tensor *x = em_randn(EM_SHAPE(2, 4, 9), EM_F32, NULL);
    em_tensor *y = em_forward(m, x);
    em_tensor *want = em_conv1d(x, w, b, (em_conv1d_opts){.stride = 2, .padding = 1,
                                                          .groups = 2});
    cr_assert(y->ndim == 3 && y->shape[2] == 5);
    cr_assert_arr_eq(em_data_ptr(y), em_data_ptr(want), (size_t)em_numel(y) * 4);

    em_tensor *in[3] = {em_gradcheck_leaf(EM_SHAPE(2, 4, 9), -1, 1, 7)};
    cr_assert_eq(em_gradcheck_module_params(m, in + 1, 2, 20), 2);
    layer_ctx c = {m};
    cr_assert(em_test_gradcheck_default(apply_layer, &c, in, 3), "%s", em_error());
    for (int i = 0; i < 3; i++)
        em_release(in[i]);
    em_module_free(m);
    cr_assert_null(em_conv1d_layer(3, 6, 3, (em_conv1d_layer_opts){.groups = 2}));
    cr_assert_not_null(strstr(em_error(), "em_conv1d_layer: bad sizes: in 3, out 6"), "%s",
                       em_error());
    em_error_clear();
}
