/* Recurrent layers: LSTM and GRU with PyTorch's gate order (i, f, g, o and r, z, n), parameter
 * names (weight_ih_l0, ...), initialisation U(-1/sqrt(H), 1/sqrt(H)), batch_first, stacked
 * layers and dropout between them. The recurrence is built from differentiable ops, so its
 * gradients are theirs; each layer's projections go through the module's project hook, which the
 * quantized forms replace. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "nn/nn_internal.h"


static int64_t gates(const em_rnn_module *r)
{
    return r->lstm ? 4 : 3;
}

/* params per layer: weight_ih (G H, in), weight_hh (G H, H), then bias_ih, bias_hh (G H) */
static em_tensor *linear_project(const em_rnn_module *r, int layer, bool hidden,
                                 const em_tensor *x /* (*, in) */)
{
    const em_module *m = &r->base;
    int per_layer = m->n_params / (int)r->o.num_layers, at = layer * per_layer;
    const em_tensor *b = r->o.bias ? m->params[at + 2 + hidden].value : NULL;
    return em_linear(x, m->params[at + hidden].value, b);
}

/* Zeros (B, H) in x's dtype on x's device: a layer's state when none is given. */
static em_tensor *zero_state(const em_tensor *x, int64_t batch, int64_t hidden)
{
    em_tensor *z = em_zeros(EM_SHAPE(batch, hidden), x->dtype);
    return z && x->device != EM_CPU ? em_to_device(z, x->device) : z;
}

/* One LSTM step: gates (B, 4H) = xw_t + hw; c = f c + i g, h = o tanh(c). */
static void lstm_step(const em_tensor *xw_t /* (B, 4H) */, const em_tensor *hw /* (B, 4H) */,
                      int64_t hs, em_tensor **h /* (B, H) */, em_tensor **c /* (B, H) */)
{
    em_tensor *g = em_add(xw_t, hw);
    em_tensor *i = em_sigmoid(em_narrow(g, 1, 0, hs)), *f = em_sigmoid(em_narrow(g, 1, hs, hs));
    em_tensor *cand = em_tanh(em_narrow(g, 1, 2 * hs, hs));
    em_tensor *o = em_sigmoid(em_narrow(g, 1, 3 * hs, hs));
    *c = em_add(em_mul(f, *c), em_mul(i, cand));
    *h = em_mul(o, em_tanh(*c));
}

/* One GRU step: r, z from xw_t + hw; n = tanh(xw_n + r hw_n); h = n + z (h - n). */
static void gru_step(const em_tensor *xw_t /* (B, 3H) */, const em_tensor *hw /* (B, 3H) */,
                     int64_t hs, em_tensor **h /* (B, H) */)
{
    em_tensor *rz = em_sigmoid(em_add(em_narrow(xw_t, 1, 0, 2 * hs), em_narrow(hw, 1, 0, 2 * hs)));
    em_tensor *r = em_narrow(rz, 1, 0, hs), *z = em_narrow(rz, 1, hs, hs);
    em_tensor *n = em_tanh(em_add(em_narrow(xw_t, 1, 2 * hs, hs),
                                  em_mul(r, em_narrow(hw, 1, 2 * hs, hs))));
    *h = em_add(n, em_mul(z, em_sub(*h, n)));
}

/* One layer over the whole sequence; *h and *c (LSTM) hold the initial state and get the last.
 * Each step runs in a scope of its own that keeps only its h and c. */
static em_tensor *run_layer(const em_rnn_module *r, int layer,
                            const em_tensor *seq /* (T, B, in) */, em_tensor **h /* (B, H) */,
                            em_tensor **c /* (B, H) */)
{
    int64_t steps = seq->shape[0], hs = r->o.hidden_size;
    em_tensor *xw = r->project(r, layer, false, seq); // (T, B, G H)
    em_tensor **outs = malloc((size_t)(steps > 0 ? steps : 1) * sizeof *outs);
    if (!xw || !outs) {
        free(outs);
        if (xw)
            em_set_error(EM_ERR_MEMORY, "%s: out of memory", r->base.type->type_name);
        return NULL;
    }
    for (int64_t t = 0; t < steps && *h; t++) {
        em_scope_begin();
        em_tensor *xw_t = em_select(xw, 0, t), *hw = r->project(r, layer, true, *h);
        if (r->lstm)
            lstm_step(xw_t, hw, hs, h, c);
        else
            gru_step(xw_t, hw, hs, h);
        outs[t] = em_keep(*h);
        em_keep(r->lstm ? *c : NULL);
        em_scope_end();
    }
    em_tensor *y = *h && steps > 0 ? em_stack(outs, (int)steps, 0) : NULL; // (T, B, H)
    free(outs);
    return y;
}

/* Checks x (T, B, in), (B, T, in) or (T, in) and a state s (L, B, H) or (L, H) (NULL: fine). */
static bool check_shapes(const em_rnn_module *r, const em_tensor *x, const em_tensor *s,
                         const char *what)
{
    const char *fn = r->base.type->type_name;
    char bx[128], bs[128];
    if ((x->ndim != 2 && x->ndim != 3) || x->shape[x->ndim - 1] != r->o.input_size ||
        !em_dtype_is_float(x->dtype) || x->shape[0] == 0 || (x->ndim == 3 && x->shape[1] == 0)) {
        em_set_error(EM_ERR_ARG, "%s: expected floating x (%s, %lld) with at least one step: "
                     "%s %s", fn, r->o.batch_first ? "B, T" : "T, B", (long long)r->o.input_size,
                     em_dtype_name(x->dtype), em_shape_str(x, bx, sizeof bx));
        return false;
    }
    if (!s)
        return true;
    int64_t batch = x->ndim == 2 ? 0 : x->shape[r->o.batch_first ? 0 : 1];
    bool ok = s->ndim == x->ndim && s->shape[0] == r->o.num_layers &&
              s->shape[s->ndim - 1] == r->o.hidden_size && (!batch || s->shape[1] == batch) &&
              s->dtype == x->dtype && s->device == x->device;
    if (!ok)
        em_set_error(EM_ERR_ARG, "%s: %s must be (%lld, %s%lld) like x: %s %s for x %s", fn,
                     what, (long long)r->o.num_layers, batch ? "B, " : "",
                     (long long)r->o.hidden_size, em_dtype_name(s->dtype),
                     em_shape_str(s, bs, sizeof bs), em_shape_str(x, bx, sizeof bx));
    return ok;
}

/* The stacked last states (L, B, H) of every layer, kept for the caller; (L, H) unbatched. */
static em_tensor *stack_states(em_tensor **s, int64_t layers, bool unbatched)
{
    em_tensor *st = em_stack(s, (int)layers, 0);
    return em_keep(unbatched && st ? em_squeeze(st, 1) : st);
}

static em_tensor *run(em_module *m, const em_tensor *x, const em_tensor *h0, const em_tensor *c0,
                      em_tensor **h_n, em_tensor **c_n)
{
    em_rnn_module *r = (em_rnn_module *)m;
    if (!check_shapes(r, x, h0, "h0") || !check_shapes(r, x, c0, "c0"))
        return NULL;
    bool unbatched = x->ndim == 2;
    em_scope_begin();
    const em_tensor *seq = unbatched ? em_unsqueeze(x, 1) : r->o.batch_first ? em_transpose(x, 0, 1)
                                                                           : x; // (T, B, in)
    const em_tensor *h0b = h0 && unbatched ? em_unsqueeze(h0, 1) : h0;         // (L, B, H)
    const em_tensor *c0b = c0 && unbatched ? em_unsqueeze(c0, 1) : c0;
    int64_t batch = seq ? seq->shape[1] : 0, hs = r->o.hidden_size, layers = r->o.num_layers;
    em_tensor *h_last[EM_RNN_MAX_LAYERS], *c_last[EM_RNN_MAX_LAYERS];
    for (int l = 0; l < layers && seq; l++) {
        em_tensor *h = h0b ? em_select(h0b, 0, l) : zero_state(x, batch, hs);
        em_tensor *c = !r->lstm ? NULL : c0b ? em_select(c0b, 0, l) : zero_state(x, batch, hs);
        seq = run_layer(r, l, seq, &h, &c);
        if (seq && r->o.dropout > 0 && l + 1 < layers)
            seq = em_dropout(seq, r->o.dropout, m->training, NULL);
        h_last[l] = h;
        c_last[l] = c;
    }
    em_tensor *y = !seq ? NULL : unbatched ? em_squeeze(seq, 1)
                               : r->o.batch_first ? em_transpose(seq, 0, 1) : (em_tensor *)seq;
    if (y && h_n)
        *h_n = stack_states(h_last, layers, unbatched);
    if (y && c_n)
        *c_n = r->lstm ? stack_states(c_last, layers, unbatched) : NULL;
    bool ok = y && (!h_n || *h_n) && (!c_n || !r->lstm || *c_n);
    em_keep(ok ? y : NULL);
    em_scope_end();
    if (!ok) {
        if (y && h_n)
            em_release(*h_n);
        if (y && c_n)
            em_release(*c_n);
    }
    return ok ? y : NULL;
}

em_tensor *em_rnn_forward(em_module *m, const em_tensor *x)
{
    return run(m, x, NULL, NULL, NULL, NULL);
}

void em_rnn_describe(const em_module *m, char *buf, size_t n)
{
    const em_rnn_options *o = &((const em_rnn_module *)m)->o;
    snprintf(buf, n, "%lld, %lld, num_layers=%lld, batch_first=%s, dropout=%g",
             (long long)o->input_size, (long long)o->hidden_size, (long long)o->num_layers,
             o->batch_first ? "true" : "false", o->dropout);
}

/* Per step and layer: the input's and the hidden state's projections (2 FLOPs a
 * multiply-accumulate, 1 per bias add), unless child modules make them (the quantized forms':
 * they count their own), and the gates' elementwise work (LSTM 13 H: the sum of the projections
 * 4 H, three sigmoids and two tanh 5 H, c = f c + i g 3 H, h = o tanh(c) 1 H; GRU 10 H: the r
 * and z sums 2 H and sigmoids 2 H, n's sum, product and tanh 3 H, h = n + z (h - n) 3 H). */
double em_rnn_flops(const em_module *m, const em_tensor *x, const em_tensor *y)
{
    (void)x;
    const em_rnn_module *r = (const em_rnn_module *)m;
    const em_rnn_options *o = &r->o;
    double h = (double)o->hidden_size, rows = (double)gates(r) * h;
    double steps = (double)(em_numel(y) / o->hidden_size); /* time steps x batch */
    double flops = 0;
    for (int64_t l = 0; l < o->num_layers; l++) {
        double in = (double)(l ? o->hidden_size : o->input_size);
        if (m->n_children == 0)
            flops += 2 * rows * (in + h) + (o->bias ? 2 * rows : 0);
        flops += (r->lstm ? 13 : 10) * h;
    }
    return steps * flops;
}

/* Weights and biases of the layers: gates * hidden rows over each layer's input and hidden. */
static double rnn_elements(const em_rnn_options *o, int gates)
{
    double rows = (double)gates * (double)o->hidden_size, n = 0;
    for (int64_t l = 0; l < o->num_layers; l++)
        n += rows * ((double)(l ? o->hidden_size : o->input_size) + (double)o->hidden_size +
                     (o->bias ? 2 : 0));
    return n;
}

double em_lstm_tensor_elements(const void *options) { return rnn_elements(options, 4); }
double em_gru_tensor_elements(const void *options) { return rnn_elements(options, 3); }

static em_module *rnn_new(const em_module_type *type, bool lstm, em_rnn_options o);

static em_module *rnn_build(const em_module_type *type, const void *options,
                            em_module **children, int n)
{
    (void)children, (void)n;
    return rnn_new(type, type == &em_lstm_type, *(const em_rnn_options *)options);
}

static const em_setting rnn_settings[] = {EM_RNN_SETTINGS};

#define RNN                                                                                   \
    .forward = em_rnn_forward, .describe = em_rnn_describe, EM_SETTINGS(rnn_settings),       \
    .options_offset = offsetof(em_rnn_module, o), .options_size = sizeof(em_rnn_options),    \
    .build = rnn_build, .flops = em_rnn_flops
EM_MODULE_TYPE(em_lstm_type) = {.type_name = "LSTM", RNN,
                                .tensor_elements = em_lstm_tensor_elements};
EM_MODULE_TYPE(em_gru_type) = {.type_name = "GRU", RNN,
                               .tensor_elements = em_gru_tensor_elements};

/* true when m is a recurrent module of the kind wanted (lstm or GRU), else an error naming fn */
static bool is_rnn(const em_module *m, bool lstm, const char *fn)
{
    if (!em_present(m, fn, "m"))
        return false;
    if (m->type->forward == em_rnn_forward && ((const em_rnn_module *)m)->lstm == lstm)
        return true;
    em_set_error(EM_ERR_ARG, "%s: module is a %s, not a%s", fn, m->type->type_name,
                 lstm ? "n LSTM" : " GRU");
    return false;
}

em_tensor *em_lstm(em_module *m, const em_tensor *x, const em_tensor *h0, const em_tensor *c0,
                   em_tensor **h_n, em_tensor **c_n)
{
    if (h_n)
        *h_n = NULL;
    if (c_n)
        *c_n = NULL;
    if (!em_present(x, "em_lstm", "x") || !is_rnn(m, true, "em_lstm"))
        return NULL;
    return run(m, x, h0, c0, h_n, c_n);
}

em_tensor *em_gru(em_module *m, const em_tensor *x, const em_tensor *h0, em_tensor **h_n)
{
    if (h_n)
        *h_n = NULL;
    if (!em_present(x, "em_gru", "x") || !is_rnn(m, false, "em_gru"))
        return NULL;
    return run(m, x, h0, NULL, h_n, NULL);
}

/* Adds one layer's parameters, U(-1/sqrt(H), 1/sqrt(H)) as PyTorch; false on error. */
static bool add_layer_params(em_module *m, int layer, int64_t in, int64_t hs, int64_t g,
                             bool bias)
{
    double bound = 1.0 / sqrt((double)hs);
    const char *names[4] = {"weight_ih_l%d", "weight_hh_l%d", "bias_ih_l%d", "bias_hh_l%d"};
    em_shape shapes[4] = {EM_SHAPE(g * hs, in), EM_SHAPE(g * hs, hs), EM_SHAPE(g * hs),
                          EM_SHAPE(g * hs)};
    for (int k = 0; k < (bias ? 4 : 2); k++) {
        char name[32];
        snprintf(name, sizeof name, names[k], layer);
        if (!em_module_add_param(m, name, em_uniform(shapes[k], EM_F32, -bound, bound, NULL)))
            return false;
    }
    return true;
}

static em_module *rnn_new(const em_module_type *type, bool lstm, em_rnn_options o)
{
    em_rnn_module *r = (em_rnn_module *)em_module_alloc(sizeof *r, type);
    if (!r)
        return NULL;
    *r = (em_rnn_module){.base = r->base, .o = o, .lstm = lstm, .project = linear_project};
    for (int l = 0; l < o.num_layers; l++)
        if (!add_layer_params(&r->base, l, l ? o.hidden_size : o.input_size, o.hidden_size,
                              gates(r), o.bias)) {
            em_module_free(&r->base);
            return NULL;
        }
    return &r->base;
}

/* An LSTM or GRU from a constructor's arguments (0: the default), checked. */
static em_module *rnn_layer(const em_module_type *type, bool lstm, int64_t input_size,
                            int64_t hidden_size, em_rnn_opts o)
{
    int64_t layers = o.num_layers ? o.num_layers : 1;
    if (input_size <= 0 || hidden_size <= 0 || layers < 1 || layers > EM_RNN_MAX_LAYERS ||
        !(o.dropout >= 0 && o.dropout < 1)) {
        em_set_error(EM_ERR_ARG, "em_%s_layer: bad sizes: input %lld, hidden %lld, layers %lld, "
                     "dropout %g", lstm ? "lstm" : "gru", (long long)input_size,
                     (long long)hidden_size, (long long)layers, o.dropout);
        return NULL;
    }
    return rnn_new(type, lstm, (em_rnn_options){
        .input_size = input_size, .hidden_size = hidden_size, .num_layers = layers,
        .batch_first = o.batch_first, .bias = !o.no_bias, .dropout = o.dropout});
}

em_module *em_lstm_layer(int64_t input_size, int64_t hidden_size, em_rnn_opts o)
{
    return rnn_layer(&em_lstm_type, true, input_size, hidden_size, o);
}

em_module *em_gru_layer(int64_t input_size, int64_t hidden_size, em_rnn_opts o)
{
    return rnn_layer(&em_gru_type, false, input_size, hidden_size, o);
}
