/* Dynamic INT8 LSTM and GRU (PyTorch's quantize_dynamic of nn.LSTM and nn.GRU): every layer's
 * input and hidden projections become QuantizedLinear children ih_l{k} and hh_l{k}; the
 * recurrence itself is the f32 module's, in f32. Inference only. */
#include <stdio.h>
#include <string.h>

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

const em_module_type em_quantized_lstm_type = {"QuantizedLSTM", em_rnn_forward, NULL,
                                               quantized_describe};
const em_module_type em_quantized_gru_type = {"QuantizedGRU", em_rnn_forward, NULL,
                                              quantized_describe};

bool em_is_float_rnn(const em_module *m)
{
    return m && (!strcmp(m->type->type_name, "LSTM") || !strcmp(m->type->type_name, "GRU"));
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
    q->project = quantized_project;
    bool grad = em_set_grad_enabled(false);
    bool ok = true;
    for (int l = 0; ok && l < f->num_layers; l++)
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
