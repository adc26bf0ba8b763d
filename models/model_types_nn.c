/* Whole-model file types of nn/'s containers, layers and activations: the settings each is
 * made with, the constructor that rebuilds it, and the tensor elements that constructor makes. */
#include <string.h>

#include "models/model_file_internal.h"
#include "nn/nn_internal.h"

#define SIZE(s, key, v) em_model_settings_int(s, key, 1, EM_MODEL_MAX_SIZE, v)

static em_module *free_children(em_module **kids, int from, int n)
{
    for (int i = from; i < n; i++)
        em_module_free(kids[i]);
    return NULL;
}

static em_status save_nothing(const em_module *m, em_model_settings *s)
{
    (void)m, (void)s;
    return EM_OK;
}

/* ---- containers ---- */
static em_module *build_numbered(em_module *(*append)(em_module *, em_module *),
                                 em_module *list, em_module **kids, int n)
{
    for (int i = 0; i < n; i++)
        if (!(list = append(list, kids[i])))
            return free_children(kids, i + 1, n);
    return list;
}

static em_module *build_sequential(const em_model_settings *s, em_module **kids, int n)
{
    (void)s;
    return build_numbered(em_sequential_append, em_sequential(0), kids, n);
}

static em_module *build_module_list(const em_model_settings *s, em_module **kids, int n)
{
    (void)s;
    return build_numbered(em_module_list_append, em_module_list(0), kids, n);
}

static em_module *build_residual(const em_model_settings *s, em_module **kids, int n)
{
    if (n == 1 || n == 2)
        return em_residual(kids[0], n == 2 ? kids[1] : NULL);
    free_children(kids, 0, n);
    em_set_error(EM_ERR_IO, "em_model_load: %s: Residual '%s' has %d children, not 1 or 2",
                 s->file, em_model_module_name(s->module), n);
    return NULL;
}

static const em_model_type sequential = {&em_sequential_type, save_nothing, build_sequential,
                                         NULL, true};
static const em_model_type module_list = {&em_module_list_type, save_nothing,
                                          build_module_list, NULL, true};
static const em_model_type residual = {&em_residual_type, save_nothing, build_residual, NULL,
                                       true};

/* ---- Linear and Embedding: their sizes are their weight's shape ---- */
em_status em_model_save_linear(const em_tensor *w, bool bias, em_model_settings *s)
{
    em_status st = em_model_settings_set_int(s, "in_features", w->shape[1]);
    st = st ? st : em_model_settings_set_int(s, "out_features", w->shape[0]);
    return st ? st : em_model_settings_set_bool(s, "bias", bias);
}

static em_status save_linear(const em_module *m, em_model_settings *s)
{
    return em_model_save_linear(m->params[0].value, m->n_params > 1, s);
}

em_status em_model_read_linear(const em_model_settings *s, int64_t *in, int64_t *out,
                               bool *bias)
{
    em_status st = SIZE(s, "in_features", in);
    st = st ? st : SIZE(s, "out_features", out);
    return st ? st : em_model_settings_bool(s, "bias", bias);
}

static em_module *build_linear(const em_model_settings *s, em_module **kids, int n)
{
    (void)kids, (void)n;
    int64_t in, out;
    bool bias;
    return em_model_read_linear(s, &in, &out, &bias) ? NULL : em_linear_layer(in, out, bias);
}

double em_model_linear_elements(const em_model_settings *s)
{
    int64_t in, out;
    bool bias;
    return em_model_read_linear(s, &in, &out, &bias) ? -1 : (double)out * (double)(in + bias);
}

static const em_model_type linear = {&em_linear_type, save_linear, build_linear,
                                     em_model_linear_elements, false};

/* padding_idx is saved (from the start) only when the layer has one */
static em_status save_embedding(const em_module *m, em_model_settings *s)
{
    const em_tensor *w = m->params[0].value; /* (num, dim) */
    em_embedding_opts o;
    em_status st = em_embedding_layer_config(m, &o);
    st = st ? st : em_model_settings_set_int(s, "num_embeddings", w->shape[0]);
    st = st ? st : em_model_settings_set_int(s, "embedding_dim", w->shape[1]);
    return st || !o.has_padding_idx ? st : em_model_settings_set_int(s, "padding_idx",
                                                                     o.padding_idx);
}

static em_status read_embedding(const em_model_settings *s, int64_t *num, int64_t *dim)
{
    em_status st = SIZE(s, "num_embeddings", num);
    return st ? st : SIZE(s, "embedding_dim", dim);
}

static em_module *build_embedding(const em_model_settings *s, em_module **kids, int n)
{
    (void)kids, (void)n;
    int64_t num, dim;
    em_embedding_opts o = {.has_padding_idx = em_model_settings_has(s, "padding_idx")};
    if (read_embedding(s, &num, &dim) ||
        (o.has_padding_idx && em_model_settings_int(s, "padding_idx", 0, num - 1, &o.padding_idx)))
        return NULL;
    return em_embedding_layer_opts(num, dim, o);
}

static double embedding_elements(const em_model_settings *s)
{
    int64_t num, dim;
    return read_embedding(s, &num, &dim) ? -1 : (double)num * (double)dim;
}

static const em_model_type embedding = {&em_embedding_type, save_embedding, build_embedding,
                                        embedding_elements, false};

/* ---- Conv1d and Conv2d: weight (out, in / groups, kernel[, kernel]) ---- */
static em_status save_conv(const em_module *m, em_model_settings *s)
{
    em_conv2d_opts o;
    em_conv_layer_config(m, &o); /* a Conv1d's settings are its width's, index 1 */
    const em_tensor *w = m->params[0].value;
    const char *keys[] = {"in_channels", "out_channels", "kernel_size", "stride", "padding",
                          "dilation", "groups"};
    int64_t values[] = {w->shape[1] * o.groups, w->shape[0], w->shape[w->ndim - 1],
                        o.stride[1], o.padding[1], o.dilation[1], o.groups};
    em_status st = EM_OK;
    for (int i = 0; i < 7 && st == EM_OK; i++)
        st = em_model_settings_set_int(s, keys[i], values[i]);
    return st ? st : em_model_settings_set_bool(s, "bias", m->n_params > 1);
}

typedef struct {
    int64_t in, out, kernel;
    em_conv2d_layer_opts o;
} conv_settings;

static em_status read_conv(const em_model_settings *s, conv_settings *c)
{
    bool bias = false;
    em_status st = SIZE(s, "in_channels", &c->in);
    st = st ? st : SIZE(s, "out_channels", &c->out);
    st = st ? st : SIZE(s, "kernel_size", &c->kernel);
    st = st ? st : SIZE(s, "stride", &c->o.stride);
    /* padding -1 is EM_PADDING_SAME */
    st = st ? st : em_model_settings_int(s, "padding", EM_PADDING_SAME, EM_MODEL_MAX_SIZE,
                                         &c->o.padding);
    st = st ? st : SIZE(s, "dilation", &c->o.dilation);
    st = st ? st : SIZE(s, "groups", &c->o.groups);
    st = st ? st : em_model_settings_bool(s, "bias", &bias);
    c->o.no_bias = !bias;
    return st;
}

static em_module *build_conv2d(const em_model_settings *s, em_module **kids, int n)
{
    (void)kids, (void)n;
    conv_settings c = {0};
    return read_conv(s, &c) ? NULL : em_conv2d_layer(c.in, c.out, c.kernel, c.o);
}

static em_module *build_conv1d(const em_model_settings *s, em_module **kids, int n)
{
    (void)kids, (void)n;
    conv_settings c = {0};
    if (read_conv(s, &c))
        return NULL;
    return em_conv1d_layer(c.in, c.out, c.kernel, (em_conv1d_layer_opts){
        .stride = c.o.stride, .padding = c.o.padding, .dilation = c.o.dilation,
        .groups = c.o.groups, .no_bias = c.o.no_bias});
}

static double conv_elements(const em_model_settings *s, int spatial)
{
    conv_settings c = {0};
    if (read_conv(s, &c))
        return -1;
    double kernel = spatial == 2 ? (double)c.kernel * (double)c.kernel : (double)c.kernel;
    return (double)c.out * ((double)(c.in / c.o.groups) * kernel + !c.o.no_bias);
}

static double conv1d_elements(const em_model_settings *s) { return conv_elements(s, 1); }
static double conv2d_elements(const em_model_settings *s) { return conv_elements(s, 2); }

static const em_model_type conv1d = {&em_conv1d_type, save_conv, build_conv1d, conv1d_elements,
                                     false};
static const em_model_type conv2d = {&em_conv2d_type, save_conv, build_conv2d, conv2d_elements,
                                     false};

/* ---- ConvTranspose2d: weight (in, out / groups, kernel, kernel) ---- */
static em_status save_conv_transpose(const em_module *m, em_model_settings *s)
{
    em_conv_transpose2d_opts o;
    em_conv_transpose2d_layer_config(m, &o);
    const em_tensor *w = m->params[0].value;
    const char *keys[] = {"in_channels", "out_channels", "kernel_size", "stride", "padding",
                          "output_padding", "dilation", "groups"};
    int64_t values[] = {w->shape[0], w->shape[1] * o.groups, w->shape[2], o.stride[0],
                        o.padding[0], o.output_padding[0], o.dilation[0], o.groups};
    em_status st = EM_OK;
    for (int i = 0; i < 8 && st == EM_OK; i++)
        st = em_model_settings_set_int(s, keys[i], values[i]);
    return st ? st : em_model_settings_set_bool(s, "bias", m->n_params > 1);
}

/* The sizes of a ConvTranspose2d's file entry: read_conv's, and output_padding into *out_pad. */
static em_status read_conv_transpose(const em_model_settings *s, conv_settings *c,
                                     int64_t *out_pad)
{
    em_status st = read_conv(s, c);
    return st ? st : em_model_settings_int(s, "output_padding", 0, EM_MODEL_MAX_SIZE, out_pad);
}

static em_module *build_conv_transpose(const em_model_settings *s, em_module **kids, int n)
{
    (void)kids, (void)n;
    conv_settings c = {0};
    int64_t out_pad;
    if (read_conv_transpose(s, &c, &out_pad))
        return NULL;
    return em_conv_transpose2d_layer(c.in, c.out, c.kernel, (em_conv_transpose2d_layer_opts){
        .stride = c.o.stride, .padding = c.o.padding, .output_padding = out_pad,
        .dilation = c.o.dilation, .groups = c.o.groups, .no_bias = c.o.no_bias});
}

static double conv_transpose_elements(const em_model_settings *s)
{
    conv_settings c = {0};
    int64_t out_pad;
    if (read_conv_transpose(s, &c, &out_pad))
        return -1;
    return (double)c.in * (double)(c.out / c.o.groups) * (double)c.kernel * (double)c.kernel +
           (double)(c.o.no_bias ? 0 : c.out);
}

static const em_model_type conv_transpose2d = {&em_conv_transpose2d_type, save_conv_transpose,
                                               build_conv_transpose, conv_transpose_elements,
                                               false};

/* ---- pooling ---- */
static em_status save_pool(const em_module *m, em_model_settings *s)
{
    em_pool2d_opts o;
    em_pool2d_layer_config(m, &o);
    em_status st = em_model_settings_set_int(s, "kernel_size", o.kernel[0]);
    st = st ? st : em_model_settings_set_int(s, "stride", o.stride[0]);
    st = st ? st : em_model_settings_set_int(s, "padding", o.padding[0]);
    if (st == EM_OK && em_module_own_type(m) == &em_max_pool2d_type)
        st = em_model_settings_set_int(s, "dilation", o.dilation[0]);
    return st;
}

static em_module *build_pool(const em_model_settings *s, bool max)
{
    int64_t k, stride, padding, dilation = 1;
    if (SIZE(s, "kernel_size", &k) || SIZE(s, "stride", &stride) ||
        em_model_settings_int(s, "padding", 0, EM_MODEL_MAX_SIZE, &padding) ||
        (max && em_model_settings_has(s, "dilation") && SIZE(s, "dilation", &dilation)))
        return NULL;
    return max ? em_max_pool2d_layer_dilated(k, stride, padding, dilation)
               : em_avg_pool2d_layer(k, stride, padding);
}

static em_module *build_max_pool(const em_model_settings *s, em_module **kids, int n)
{
    (void)kids, (void)n;
    return build_pool(s, true);
}

static em_module *build_avg_pool(const em_model_settings *s, em_module **kids, int n)
{
    (void)kids, (void)n;
    return build_pool(s, false);
}

static em_status save_adaptive(const em_module *m, em_model_settings *s)
{
    int64_t h, w;
    em_adaptive_pool_layer_size(m, &h, &w);
    em_status st = em_model_settings_set_int(s, "out_h", h);
    return st ? st : em_model_settings_set_int(s, "out_w", w);
}

static em_module *build_adaptive(const em_model_settings *s, em_module **kids, int n)
{
    (void)kids, (void)n;
    int64_t h, w;
    return SIZE(s, "out_h", &h) || SIZE(s, "out_w", &w) ? NULL
                                                        : em_adaptive_avg_pool2d_layer(h, w);
}

static const em_model_type max_pool = {&em_max_pool2d_type, save_pool, build_max_pool, NULL,
                                       false};
static const em_model_type avg_pool = {&em_avg_pool2d_type, save_pool, build_avg_pool, NULL,
                                       false};
static const em_model_type adaptive_pool = {&em_adaptive_avg_pool2d_type, save_adaptive,
                                            build_adaptive, NULL, false};

/* ---- dropout ---- */
static em_status save_dropout(const em_module *m, em_model_settings *s)
{
    double p = 0;
    em_dropout_layer_p(m, &p);
    return em_model_settings_set_real(s, "p", p);
}

static em_module *build_dropout(const em_model_settings *s, em_module **kids, int n)
{
    (void)kids, (void)n;
    double p;
    return em_model_settings_real(s, "p", 0, 1, &p) ? NULL : em_dropout_layer(p);
}

static const em_model_type dropout = {&em_dropout_type, save_dropout, build_dropout, NULL, false};

/* ---- activations ---- */
static em_status save_activation(const em_module *m, em_model_settings *s)
{
    em_activation_config c;
    em_activation_layer_config(m, &c);
    if (m->type == &em_leaky_relu_type)
        return em_model_settings_set_real(s, "negative_slope", c.negative_slope);
    if (m->type == &em_gelu_type)
        return em_model_settings_set_bool(s, "tanh_approximation", c.tanh_approximation);
    if (m->type == &em_softmax_type)
        return em_model_settings_set_int(s, "dim", c.dim);
    if (m->type == &em_elu_type)
        return em_model_settings_set_real(s, "alpha", c.alpha);
    const char *key[2] = {"beta", "threshold"};
    double v[2] = {c.beta, c.threshold};
    if (m->type == &em_hardtanh_type) {
        key[0] = "min_val", key[1] = "max_val";
        v[0] = c.min_val, v[1] = c.max_val;
    } else if (m->type != &em_softplus_type) {
        return EM_OK;
    }
    em_status st = em_model_settings_set_real(s, key[0], v[0]);
    return st ? st : em_model_settings_set_real(s, key[1], v[1]);
}

static em_module *build_leaky_relu(const em_model_settings *s, em_module **kids, int n)
{
    (void)kids, (void)n;
    double slope;
    return em_model_settings_real(s, "negative_slope", -1e300, 1e300, &slope)
               ? NULL : em_leaky_relu_layer(slope);
}

static em_module *build_gelu(const em_model_settings *s, em_module **kids, int n)
{
    (void)kids, (void)n;
    bool approx;
    return em_model_settings_bool(s, "tanh_approximation", &approx) ? NULL : em_gelu_layer(approx);
}

static em_module *build_softmax(const em_model_settings *s, em_module **kids, int n)
{
    (void)kids, (void)n;
    int64_t dim;
    return em_model_settings_int(s, "dim", -EM_MAX_DIMS, EM_MAX_DIMS - 1, &dim)
               ? NULL : em_softmax_layer((int)dim);
}

/* an activation of two real settings, key0 and key1 */
static em_module *build_two_reals(const em_model_settings *s, const char *key0, const char *key1,
                                  em_module *(*make)(double, double))
{
    double a, b;
    return em_model_settings_real(s, key0, -1e300, 1e300, &a) ||
                   em_model_settings_real(s, key1, -1e300, 1e300, &b)
               ? NULL : make(a, b);
}

static em_module *build_softplus(const em_model_settings *s, em_module **kids, int n)
{
    (void)kids, (void)n;
    return build_two_reals(s, "beta", "threshold", em_softplus_layer);
}

static em_module *build_hardtanh(const em_model_settings *s, em_module **kids, int n)
{
    (void)kids, (void)n;
    return build_two_reals(s, "min_val", "max_val", em_hardtanh_layer);
}

static em_module *build_elu(const em_model_settings *s, em_module **kids, int n)
{
    (void)kids, (void)n;
    double alpha;
    return em_model_settings_real(s, "alpha", -1e300, 1e300, &alpha) ? NULL : em_elu_layer(alpha);
}

/* The activations without settings, by the type name the file gives. */
static em_module *build_plain(const em_model_settings *s, em_module **kids, int n)
{
    (void)kids, (void)n;
    static const struct {
        const em_module_type *type;
        em_module *(*make)(void);
    } plain[] = {{&em_relu_type, em_relu_layer},       {&em_silu_type, em_silu_layer},
                 {&em_softsign_type, em_softsign_layer}, {&em_tanh_type, em_tanh_layer},
                 {&em_sigmoid_type, em_sigmoid_layer},   {&em_flatten_type, em_flatten_layer},
                 {&em_mish_type, em_mish_layer},         {&em_selu_type, em_selu_layer},
                 {&em_hardswish_type, em_hardswish_layer},
                 {&em_logsigmoid_type, em_logsigmoid_layer}};
    for (size_t i = 0; i < sizeof plain / sizeof *plain; i++)
        if (!strcmp(plain[i].type->type_name, s->type))
            return plain[i].make();
    em_set_error(EM_ERR_ARG, "em_model_load: %s is no activation without settings", s->type);
    return NULL;
}

static const em_model_type activations[] = {
    {&em_relu_type, save_activation, build_plain, NULL, false},
    {&em_leaky_relu_type, save_activation, build_leaky_relu, NULL, false},
    {&em_gelu_type, save_activation, build_gelu, NULL, false},
    {&em_silu_type, save_activation, build_plain, NULL, false},
    {&em_softsign_type, save_activation, build_plain, NULL, false},
    {&em_tanh_type, save_activation, build_plain, NULL, false},
    {&em_sigmoid_type, save_activation, build_plain, NULL, false},
    {&em_softmax_type, save_activation, build_softmax, NULL, false},
    {&em_flatten_type, save_activation, build_plain, NULL, false},
    {&em_mish_type, save_activation, build_plain, NULL, false},
    {&em_softplus_type, save_activation, build_softplus, NULL, false},
    {&em_hardtanh_type, save_activation, build_hardtanh, NULL, false},
    {&em_elu_type, save_activation, build_elu, NULL, false},
    {&em_selu_type, save_activation, build_plain, NULL, false},
    {&em_hardswish_type, save_activation, build_plain, NULL, false},
    {&em_logsigmoid_type, save_activation, build_plain, NULL, false},
};

const em_model_type *const em_model_layer_types[] = {
    &sequential, &module_list, &residual, &linear, &embedding, &conv1d, &conv2d,
    &conv_transpose2d, &max_pool, &avg_pool, &adaptive_pool, &dropout,
    &activations[0], &activations[1], &activations[2], &activations[3], &activations[4],
    &activations[5], &activations[6], &activations[7], &activations[8], &activations[9],
    &activations[10], &activations[11], &activations[12], &activations[13], &activations[14],
    &activations[15]};
const int em_model_layer_type_count =
    (int)(sizeof em_model_layer_types / sizeof *em_model_layer_types);
