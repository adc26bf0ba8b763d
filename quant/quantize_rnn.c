/* Dynamic INT8 LSTM and GRU (PyTorch's quantize_dynamic of nn.LSTM and nn.GRU): every layer's
 * input and hidden projections become QuantizedLinear children ih_l{k} and hh_l{k}; the
 * recurrence itself is the f32 module's, in f32. Inference only. */
#include <stddef.h>
#include <stdio.h>

#include "nn/nn_internal.h"
#include "prune/prune.h"
#include "quant/quantize.h"

/* children: ih_l0, hh_l0, ih_l1, hh_l1, ... */
static em_tensor *quantized_project(const em_rnn_module *r, int layer, bool hidden,
                                    const em_tensor *x /* (*, in) */)
{
    return em_forward(r->base.children[2 * layer + hidden].module, x);
}

static void quantized_describe(const em_module *m, char *buf, size_t n)
{
    char settings[192];
    em_rnn_describe(m, settings, sizeof settings);
    snprintf(buf, n, "%s, dtype=int8", settings);
}

static em_module *quantized_build(const em_module_type *type, const void *options,
                                  em_module **children, int n);

/* The float forms' settings, and whether each projection has one weight scale */
static const em_setting quantized_settings[] = {
    EM_RNN_SETTINGS, EM_BOOL_SETTING(em_rnn_options, per_tensor, 0)};

#define QUANTIZED_RNN                                                                         \
    .forward = em_rnn_forward, .describe = quantized_describe,                                \
    EM_SETTINGS(quantized_settings), .options_offset = offsetof(em_rnn_module, o),           \
    .options_size = sizeof(em_rnn_options), .build = quantized_build, .flops = em_rnn_flops
EM_MODULE_TYPE(em_quantized_lstm_type) = {.type_name = "QuantizedLSTM", QUANTIZED_RNN,
                                          .tensor_elements = em_lstm_tensor_elements};
EM_MODULE_TYPE(em_quantized_gru_type) = {.type_name = "QuantizedGRU", QUANTIZED_RNN,
                                         .tensor_elements = em_gru_tensor_elements};

bool em_is_float_rnn(const em_module *m)
{
    const em_module_type *t = m ? em_module_own_type(m) : NULL;
    return t == &em_lstm_type || t == &em_gru_type;
}

/* The QuantizedLinear of one projection of rnn's layer (its weight as forward uses it). */
static em_module *quantize_projection(const em_module *rnn, const char *kind, int layer,
                                      em_quant_granularity g)
{
    char wname[32], bname[32];
    snprintf(wname, sizeof wname, "weight_%s_l%d", kind, layer);
    snprintf(bname, sizeof bname, "bias_%s_l%d", kind, layer);
    em_tensor *w = em_prune_param(rnn, wname), *b = em_prune_param(rnn, bname);
    em_module *q = w ? em_quantized_linear(w, b, g) : NULL;
    if (!w && !em_has_error())
        em_set_error(EM_ERR_ARG, "em_quantized_rnn: no parameter %s", wname);
    em_release(w);
    em_release(b);
    return q;
}

em_module *em_quantized_rnn(const em_module *rnn, em_quant_granularity g)
{
    if (!em_present(rnn, "em_quantized_rnn", "rnn"))
        return NULL;
    if (!em_is_float_rnn(rnn)) {
        em_set_error(EM_ERR_ARG, "em_quantized_rnn: module is a %s, not an LSTM or GRU",
                     rnn->type->type_name);
        return NULL;
    }
    const em_rnn_module *f = (const em_rnn_module *)rnn;
    const em_module_type *type = f->lstm ? &em_quantized_lstm_type : &em_quantized_gru_type;
    em_rnn_module *q = (em_rnn_module *)em_module_alloc(sizeof *q, type);
    if (!q)
        return NULL;
    *q = *f; /* the settings; the module part starts empty */
    q->base = (em_module){.type = type, .training = rnn->training};
    q->o.per_tensor = g == EM_QUANT_PER_TENSOR;
    q->project = quantized_project;
    bool grad = em_set_grad_enabled(false);
    bool ok = true;
    for (int l = 0; ok && l < f->o.num_layers; l++)
        for (int hidden = 0; ok && hidden < 2; hidden++) {
            char name[32];
            snprintf(name, sizeof name, "%s_l%d", hidden ? "hh" : "ih", l);
            ok = em_module_add_child(&q->base, name,
                                     quantize_projection(rnn, hidden ? "hh" : "ih", l, g)) != NULL;
        }
    em_set_grad_enabled(grad);
    if (!ok) {
        em_module_free(&q->base);
        return NULL;
    }
    return &q->base;
}

/* The float layer of options quantized; its weights are the file's to load. */
static em_module *quantized_build(const em_module_type *type, const void *options,
                                  em_module **children, int n)
{
    (void)children, (void)n;
    const em_rnn_options *o = options;
    em_rnn_opts f = {.num_layers = o->num_layers, .batch_first = o->batch_first,
                     .no_bias = !o->bias, .dropout = o->dropout};
    em_module *rnn = type == &em_quantized_lstm_type
                         ? em_lstm_layer(o->input_size, o->hidden_size, f)
                         : em_gru_layer(o->input_size, o->hidden_size, f);
    em_module *q = rnn ? em_quantized_rnn(rnn, o->per_tensor ? EM_QUANT_PER_TENSOR
                                                             : EM_QUANT_PER_CHANNEL)
                       : NULL;
    em_module_free(rnn);
    return q;
}
