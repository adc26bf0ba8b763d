/* Whole-model file types of the sequence models: LSTM and GRU, multi-head attention, the
 * transformer encoder layer, GPT, and the dynamic quantized forms of Linear, LSTM and GRU. */
#include "models/gpt.h"
#include "models/model_file_internal.h"
#include "nn/nn_internal.h"
#include "quant/quantize.h"

#define SIZE(s, key, v) em_model_settings_int(s, key, 1, EM_MODEL_MAX_SIZE, v)

/* ---- quantized layers: a scale per output row or one for the whole weight ---- */
static bool per_tensor(const em_module *m) /* buffers: weight (out, in), weight_scale */
{
    return em_numel(m->buffers[1].value) == 1 && m->buffers[0].value->shape[0] > 1;
}

static em_status read_granularity(const em_model_settings *s, em_quant_granularity *g)
{
    bool t = false;
    em_status st = em_model_settings_bool(s, "per_tensor", &t);
    *g = t ? EM_QUANT_PER_TENSOR : EM_QUANT_PER_CHANNEL;
    return st;
}

static em_status save_qlinear(const em_module *m, em_model_settings *s)
{
    /* buffers: weight (out, in), weight_scale, bias when it has one */
    em_status st = em_model_save_linear(m->buffers[0].value, m->n_buffers > 2, s);
    return st ? st : em_model_settings_set_bool(s, "per_tensor", per_tensor(m));
}

static em_module *build_qlinear(const em_model_settings *s, em_module **kids, int n)
{
    (void)kids, (void)n;
    int64_t in, out;
    bool bias;
    em_quant_granularity g;
    if (em_model_read_linear(s, &in, &out, &bias) || read_granularity(s, &g))
        return NULL;
    em_tensor *w = em_zeros(EM_SHAPE(out, in), EM_F32), *b = NULL;
    if (bias)
        b = em_zeros(EM_SHAPE(out), EM_F32);
    em_module *m = w && (b || !bias) ? em_quantized_linear(w, b, g) : NULL;
    em_release(w);
    em_release(b);
    return m;
}

static const em_model_type qlinear = {&em_quantized_linear_type, save_qlinear, build_qlinear,
                                      em_model_linear_elements, false};

/* ---- LSTM, GRU and their quantized forms ---- */
static em_status save_rnn(const em_module *m, em_model_settings *s)
{
    const em_rnn_module *r = (const em_rnn_module *)m;
    bool quantized = m->n_children > 0; /* projections ih_l{k}, hh_l{k} */
    bool bias = quantized ? m->children[0].module->n_buffers > 2
                          : m->n_params / r->num_layers == 4;
    em_status st = em_model_settings_set_int(s, "input_size", r->input_size);
    st = st ? st : em_model_settings_set_int(s, "hidden_size", r->hidden_size);
    st = st ? st : em_model_settings_set_int(s, "num_layers", r->num_layers);
    st = st ? st : em_model_settings_set_bool(s, "batch_first", r->batch_first);
    st = st ? st : em_model_settings_set_bool(s, "bias", bias);
    st = st ? st : em_model_settings_set_real(s, "dropout", r->dropout);
    if (quantized && st == EM_OK)
        st = em_model_settings_set_bool(s, "per_tensor", per_tensor(m->children[0].module));
    return st;
}

typedef struct {
    int64_t input_size, hidden_size;
    em_rnn_opts o;
} rnn_settings;

static em_status read_rnn(const em_model_settings *s, rnn_settings *r)
{
    bool bias = true;
    em_status st = SIZE(s, "input_size", &r->input_size);
    st = st ? st : SIZE(s, "hidden_size", &r->hidden_size);
    st = st ? st : em_model_settings_int(s, "num_layers", 1, 64, &r->o.num_layers);
    st = st ? st : em_model_settings_bool(s, "batch_first", &r->o.batch_first);
    st = st ? st : em_model_settings_bool(s, "bias", &bias);
    st = st ? st : em_model_settings_real(s, "dropout", 0, 1, &r->o.dropout);
    r->o.no_bias = !bias;
    return st;
}

static em_module *build_rnn(const em_model_settings *s, bool lstm, bool quantized)
{
    rnn_settings r = {0};
    em_quant_granularity g = EM_QUANT_PER_CHANNEL;
    if (read_rnn(s, &r) || (quantized && read_granularity(s, &g)))
        return NULL;
    em_module *f = lstm ? em_lstm_layer(r.input_size, r.hidden_size, r.o)
                        : em_gru_layer(r.input_size, r.hidden_size, r.o);
    if (!f || !quantized)
        return f;
    em_module *q = em_quantized_rnn(f, g);
    em_module_free(f);
    return q;
}

static em_module *build_lstm(const em_model_settings *s, em_module **kids, int n)
{
    (void)kids, (void)n;
    return build_rnn(s, true, false);
}

static em_module *build_gru(const em_model_settings *s, em_module **kids, int n)
{
    (void)kids, (void)n;
    return build_rnn(s, false, false);
}

static em_module *build_quantized_lstm(const em_model_settings *s, em_module **kids, int n)
{
    (void)kids, (void)n;
    return build_rnn(s, true, true);
}

static em_module *build_quantized_gru(const em_model_settings *s, em_module **kids, int n)
{
    (void)kids, (void)n;
    return build_rnn(s, false, true);
}

/* Weights and biases of the layers: gates * hidden rows over each layer's input and hidden. */
static double rnn_elements(const em_model_settings *s, int gates)
{
    rnn_settings r = {0};
    if (read_rnn(s, &r))
        return -1;
    double rows = (double)gates * (double)r.hidden_size, n = 0;
    for (int64_t l = 0; l < r.o.num_layers; l++)
        n += rows * ((double)(l ? r.hidden_size : r.input_size) + (double)r.hidden_size +
                     (r.o.no_bias ? 0 : 2));
    return n;
}

static double lstm_elements(const em_model_settings *s) { return rnn_elements(s, 4); }
static double gru_elements(const em_model_settings *s) { return rnn_elements(s, 3); }

static const em_model_type lstm = {&em_lstm_type, save_rnn, build_lstm, lstm_elements, false};
static const em_model_type gru = {&em_gru_type, save_rnn, build_gru, gru_elements, false};
static const em_model_type quantized_lstm = {&em_quantized_lstm_type, save_rnn,
                                             build_quantized_lstm, lstm_elements, false};
static const em_model_type quantized_gru = {&em_quantized_gru_type, save_rnn,
                                            build_quantized_gru, gru_elements, false};

/* ---- multi-head attention, the transformer encoder layer, GPT ---- */
static em_status save_mha(const em_module *m, em_model_settings *s)
{
    int64_t e, h;
    em_mha_opts o;
    em_mha_layer_config(m, &e, &h, &o);
    em_status st = em_model_settings_set_int(s, "embed_dim", e);
    st = st ? st : em_model_settings_set_int(s, "num_heads", h);
    st = st ? st : em_model_settings_set_real(s, "dropout", o.dropout);
    st = st ? st : em_model_settings_set_bool(s, "bias", !o.no_bias);
    return st ? st : em_model_settings_set_bool(s, "causal", o.causal);
}

static em_status read_mha(const em_model_settings *s, int64_t *e, int64_t *h, em_mha_opts *o)
{
    bool bias = true;
    em_status st = SIZE(s, "embed_dim", e);
    st = st ? st : SIZE(s, "num_heads", h);
    st = st ? st : em_model_settings_real(s, "dropout", 0, 1, &o->dropout);
    st = st ? st : em_model_settings_bool(s, "bias", &bias);
    st = st ? st : em_model_settings_bool(s, "causal", &o->causal);
    o->no_bias = !bias;
    return st;
}

static em_module *build_mha(const em_model_settings *s, em_module **kids, int n)
{
    (void)kids, (void)n;
    int64_t e, h;
    em_mha_opts o = {0};
    return read_mha(s, &e, &h, &o) ? NULL : em_multihead_attention_layer(e, h, o);
}

/* in_proj (3E, E) and out_proj (E, E), with their biases */
static double attention_elements(double e, bool bias)
{
    return 4 * e * e + (bias ? 4 * e : 0);
}

static double mha_elements(const em_model_settings *s)
{
    int64_t e, h;
    em_mha_opts o = {0};
    return read_mha(s, &e, &h, &o) ? -1 : attention_elements((double)e, !o.no_bias);
}

static const em_model_type mha = {&em_multihead_attention_type, save_mha, build_mha,
                                  mha_elements, false};

static em_status save_transformer(const em_module *m, em_model_settings *s)
{
    int64_t d, h;
    em_transformer_opts o;
    em_transformer_layer_settings(m, &d, &h, &o);
    em_status st = em_model_settings_set_int(s, "d_model", d);
    st = st ? st : em_model_settings_set_int(s, "nhead", h);
    st = st ? st : em_model_settings_set_int(s, "dim_feedforward", o.dim_feedforward);
    st = st ? st : em_model_settings_set_real(s, "dropout", o.dropout);
    st = st ? st : em_model_settings_set_bool(s, "gelu", o.activation == EM_ACTIVATION_GELU);
    st = st ? st : em_model_settings_set_real(s, "layer_norm_eps", o.layer_norm_eps);
    st = st ? st : em_model_settings_set_bool(s, "norm_first", o.norm_first);
    return st ? st : em_model_settings_set_bool(s, "causal", o.causal);
}

static em_status read_transformer(const em_model_settings *s, int64_t *d, int64_t *h,
                                  em_transformer_opts *o)
{
    bool gelu = false;
    em_status st = SIZE(s, "d_model", d);
    st = st ? st : SIZE(s, "nhead", h);
    st = st ? st : SIZE(s, "dim_feedforward", &o->dim_feedforward);
    st = st ? st : em_model_settings_real(s, "dropout", 0, 1, &o->dropout);
    st = st ? st : em_model_settings_bool(s, "gelu", &gelu);
    st = st ? st : em_model_settings_real(s, "layer_norm_eps", 0, 1, &o->layer_norm_eps);
    st = st ? st : em_model_settings_bool(s, "norm_first", &o->norm_first);
    st = st ? st : em_model_settings_bool(s, "causal", &o->causal);
    o->activation = gelu ? EM_ACTIVATION_GELU : EM_ACTIVATION_RELU;
    return st;
}

static em_module *build_transformer(const em_model_settings *s, em_module **kids, int n)
{
    (void)kids, (void)n;
    int64_t d, h;
    em_transformer_opts o = {0};
    return read_transformer(s, &d, &h, &o) ? NULL : em_transformer_encoder_layer(d, h, o);
}

/* attention, linear1 (ff, d) and linear2 (d, ff) with biases, two LayerNorms */
static double transformer_layer_elements(double d, double ff)
{
    return attention_elements(d, true) + 2 * d * ff + ff + d + 4 * d;
}

static double transformer_elements(const em_model_settings *s)
{
    int64_t d, h;
    em_transformer_opts o = {0};
    return read_transformer(s, &d, &h, &o)
               ? -1 : transformer_layer_elements((double)d, (double)o.dim_feedforward);
}

static const em_model_type transformer = {&em_transformer_encoder_layer_type, save_transformer,
                                          build_transformer, transformer_elements, false};

static em_status save_gpt(const em_module *m, em_model_settings *s)
{
    em_gpt_config c;
    em_gpt_config_of(m, &c);
    em_status st = em_model_settings_set_int(s, "vocab_size", c.vocab_size);
    st = st ? st : em_model_settings_set_int(s, "block_size", c.block_size);
    st = st ? st : em_model_settings_set_int(s, "n_layer", c.n_layer);
    st = st ? st : em_model_settings_set_int(s, "n_head", c.n_head);
    st = st ? st : em_model_settings_set_int(s, "n_embd", c.n_embd);
    return st ? st : em_model_settings_set_real(s, "dropout", c.dropout);
}

static em_status read_gpt(const em_model_settings *s, em_gpt_config *c)
{
    int64_t layers = 0;
    em_status st = SIZE(s, "vocab_size", &c->vocab_size);
    st = st ? st : SIZE(s, "block_size", &c->block_size);
    st = st ? st : em_model_settings_int(s, "n_layer", 1, 100000, &layers);
    st = st ? st : SIZE(s, "n_head", &c->n_head);
    st = st ? st : SIZE(s, "n_embd", &c->n_embd);
    st = st ? st : em_model_settings_real(s, "dropout", 0, 1, &c->dropout);
    c->n_layer = (int)layers;
    return st;
}

static em_module *build_gpt(const em_model_settings *s, em_module **kids, int n)
{
    (void)kids, (void)n;
    em_gpt_config c = {0};
    return read_gpt(s, &c) ? NULL : em_gpt(c);
}

/* token and position embeddings, the blocks (feed-forward 4E), ln_f */
static double gpt_elements(const em_model_settings *s)
{
    em_gpt_config c = {0};
    if (read_gpt(s, &c))
        return -1;
    double e = (double)c.n_embd;
    return ((double)c.vocab_size + (double)c.block_size) * e +
           c.n_layer * transformer_layer_elements(e, 4 * e) + 2 * e;
}

static const em_model_type gpt = {&em_gpt_type, save_gpt, build_gpt, gpt_elements, false};

const em_model_type *const em_model_sequence_types[] = {
    &lstm, &gru, &mha, &transformer, &gpt, &qlinear, &quantized_lstm, &quantized_gru};
const int em_model_sequence_type_count =
    (int)(sizeof em_model_sequence_types / sizeof *em_model_sequence_types);
