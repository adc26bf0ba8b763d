/* The options each built-in layer of nn/ keeps, which its type's settings point into: what
 * exporters, quantizers and pruning read of a layer beyond its tensors (every value the one the
 * layer runs with, defaults filled in), and initializers of settings named as the fields they
 * live in. Not installed. */
#ifndef EMBER_NN_LAYER_OPTIONS_INTERNAL_H
#define EMBER_NN_LAYER_OPTIONS_INTERNAL_H

#include <stddef.h>

#include "nn/nn.h"

/* The largest size setting of the built-in types: 2^31 - 1 */
#define EM_MAX_SIZE 2147483647.0
/* Settings named as the options' fields they live in: an int in [least, EM_MAX_SIZE] (default
 * least), a real in [lo, hi], a bool; flags EM_SETTING_*. */
#define EM_SIZE_SETTING(options, field, least, flag_bits)                                    \
    {.name = #field, .kind = EM_SETTING_INT, .offset = offsetof(options, field),             \
     .min = (least), .max = EM_MAX_SIZE, .def = (least), .flags = (flag_bits)}
#define EM_REAL_SETTING(options, field, lo, hi, default_value)                               \
    {.name = #field, .kind = EM_SETTING_REAL, .offset = offsetof(options, field),            \
     .min = (lo), .max = (hi), .def = (default_value)}
#define EM_BOOL_SETTING(options, field, default_value)                                       \
    {.name = #field, .kind = EM_SETTING_BOOL, .offset = offsetof(options, field),           \
     .def = (default_value)}

typedef struct {
    int64_t in_features, out_features;
    bool bias;
} em_linear_options;
/* Linear's settings, which QuantizedLinear's begin with (its options begin with Linear's) */
#define EM_LINEAR_SETTINGS(options)                                                          \
    EM_SIZE_SETTING(options, in_features, 1, EM_SETTING_IN_UNITS),                           \
    EM_SIZE_SETTING(options, out_features, 1, EM_SETTING_OUT_UNITS),                         \
    EM_BOOL_SETTING(options, bias, 1)
/* The FLOPs of a Linear's forward (2 per multiply-accumulate, 1 per bias add) giving y (*, out) */
double em_linear_flops(int64_t in_features, bool bias, const em_tensor *y);

typedef struct {
    int64_t num_embeddings, embedding_dim;
    int64_t padding_idx; /* in [0, num_embeddings), or -1 for none */
} em_embedding_options;

/* Conv1d and Conv2d: square kernels, strides, paddings (EM_PADDING_SAME) and dilations */
typedef struct {
    int64_t in_channels, out_channels, kernel_size, stride, padding, dilation, groups;
    bool bias;
} em_conv_options;
/* A Conv2d's or Conv1d's options as em_conv2d takes them (a Conv1d's in the width's [1]) */
em_conv2d_opts em_conv_opts_2d(const em_conv_options *o, int spatial);
typedef struct {
    int64_t in_channels, out_channels, kernel_size, stride, padding, output_padding, dilation,
        groups;
    bool bias;
} em_conv_transpose_options;

/* MaxPool2d and AvgPool2d (square; an AvgPool2d's dilation is 1) */
typedef struct {
    int64_t kernel_size, stride, padding, dilation;
} em_pool_options;
em_pool2d_opts em_pool_opts_2d(const em_pool_options *o); /* as em_max_pool2d takes them */
typedef struct {
    int64_t out_h, out_w;
} em_adaptive_pool_options;

typedef struct {
    int64_t num_features;
    double eps, momentum; /* momentum EM_BN_CUMULATIVE_AVERAGE: PyTorch's None */
} em_batch_norm_options;
typedef struct {
    int64_t normalized_shape;
    double eps;
} em_layer_norm_options;
typedef struct {
    int64_t num_groups, num_channels;
    double eps;
    bool affine;
} em_group_norm_options;
typedef struct {
    int64_t num_features;
    double eps, momentum;
    bool affine, track_running_stats;
} em_instance_norm_options;

typedef struct {
    int64_t pads[6];  /* (n_pads) em_pad's order: last dim's left, right, then the dim before */
    int64_t n_pads;
    em_pad_mode mode;
    double value;     /* constant mode's fill */
} em_pad_options;

/* The settings of an activation layer: each type's settings point at its own fields. */
typedef struct {
    double negative_slope;   /* LeakyReLU */
    bool tanh_approximation; /* GELU */
    int64_t dim;             /* Softmax */
    double beta, threshold;  /* Softplus */
    double min_val, max_val; /* Hardtanh */
    double alpha;            /* ELU, CELU */
} em_activation_options;

typedef struct {
    double p;
} em_dropout_options;

typedef struct {
    int64_t dim; /* Concat's: the dim its branches' outputs are joined along */
} em_concat_options;

typedef struct {
    int64_t embed_dim, num_heads;
    double dropout;
    bool bias, causal;
} em_mha_options;
typedef struct {
    int64_t d_model, nhead, dim_feedforward;
    double dropout;
    bool gelu; /* the feed-forward activation: GELU (exact), else ReLU */
    double layer_norm_eps;
    bool norm_first, causal;
} em_transformer_options;
/* The FLOPs of a MultiheadAttention's self-attention of y (B, T, E) without its out_proj:
 * the in-projection, the scores, their softmax and the weighted values. */
double em_mha_flops(const em_mha_options *o, const em_tensor *y);
double em_mha_tensor_elements(double embed_dim, bool bias);
double em_transformer_layer_elements(double d_model, double dim_feedforward);

/* LSTM and GRU, and their quantized forms (nn/recurrent.c, quant/quantize_rnn.c) */
typedef struct {
    int64_t input_size, hidden_size, num_layers;
    bool batch_first, bias;
    double dropout;  /* on each layer's output but the last, in training */
    bool per_tensor; /* the quantized forms: one weight scale per projection, not per row */
} em_rnn_options;
/* The settings of LSTM and GRU, which the quantized forms' begin with */
#define EM_RNN_SETTINGS                                                                      \
    EM_SIZE_SETTING(em_rnn_options, input_size, 1, 0),                     \
    EM_SIZE_SETTING(em_rnn_options, hidden_size, 1, 0),                    \
    {.name = "num_layers", .kind = EM_SETTING_INT, .offset = offsetof(em_rnn_options, num_layers), \
     .min = 1, .max = EM_RNN_MAX_LAYERS, .def = 1},                                          \
    EM_BOOL_SETTING(em_rnn_options, batch_first, 0),                                         \
    EM_BOOL_SETTING(em_rnn_options, bias, 1),                                                \
    EM_REAL_SETTING(em_rnn_options, dropout, 0, 1, 0)
#define EM_RNN_MAX_LAYERS 64
#endif
