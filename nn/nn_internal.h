/* What the nn/ files share beyond nn.h: the traced forward the summary and the FLOP count use,
 * and the allocation every layer constructor starts with. Not installed. */
#ifndef EMBER_NN_INTERNAL_H
#define EMBER_NN_INTERNAL_H

#include <stdarg.h>

#include "nn/nn.h"

/* Whether a forward hook is installed on this thread (Sequential then runs every module). */
bool em_forward_hooked(void);
/* Runs m once on zeros of input's shape (batch dim first) in eval mode without grad, hook
 * called after every module's forward; each module's mode is restored (nn/module_trace.c). */
em_status em_module_trace(em_module *m, em_shape input, em_forward_hook hook, void *ctx);
int em_module_count(const em_module *m); /* m and every module below it */

/* ---- a Linear followed by a ReLU runs as one op (em_linear_relu) in a Sequential ---- */
bool em_module_is_linear(const em_module *m); /* nn/linear.c */
bool em_module_is_relu(const em_module *m);   /* nn/activations.c */
/* relu(linear m(x)) through em_linear_relu, m a Linear (nn/linear.c) */
em_tensor *em_linear_relu_forward(em_module *m, const em_tensor *x);

/* Allocates a module of size bytes (a struct that embeds em_module first) and inits it;
 * NULL with an error when memory runs out. */
em_module *em_module_alloc(size_t size, const em_module_type *type);

/* Puts child (a module in no tree) in m's slot i and returns the module that was there, now in
 * no tree, for the caller to free: quantizing and pruning swap a layer for a new one this way. */
em_module *em_module_set_child(em_module *m, int i, em_module *child);

/* Adds child under the next number ("0", "1", ...: its count of children), as Sequential and
 * ModuleList do; when m is NULL or not of type, or child is NULL, frees both with an error naming
 * fn and returns NULL; else returns m. */
em_module *em_module_append_numbered(em_module *m, const em_module_type *type, em_module *child,
                                     const char *fn);
/* A new module of type (a bare em_module) holding the n modules of ap as children "0".."n-1";
 * NULL with an error naming fn (every module freed) on failure. */
em_module *em_module_numbered(const em_module_type *type, int n, va_list ap, const char *fn);

/* ---- recurrent modules (nn/recurrent.c): LSTM, GRU and their quantized forms share one
 * recurrence and differ in how a layer projects its input and its hidden state ---- */
typedef struct em_rnn_module em_rnn_module;
struct em_rnn_module {
    em_module base;
    bool lstm; /* LSTM: gates i, f, g, o and a cell state; else GRU: gates r, z, n */
    int64_t input_size, hidden_size, num_layers;
    bool batch_first;
    double dropout; /* on each layer's output but the last, in training */
    /* layer's input (hidden false) or hidden state (true) projected with its bias:
     * x (*, in) -> (*, gates * hidden_size) */
    em_tensor *(*project)(const em_rnn_module *r, int layer, bool hidden, const em_tensor *x);
};
/* The forward of every recurrent module type (em_forward: the output, states from zeros). */
em_tensor *em_rnn_forward(em_module *m, const em_tensor *x);
/* "LSTM(input_size=..., ...)" settings of a recurrent module, for describe */
void em_rnn_describe(const em_module *m, char *buf, size_t n);

/* Adds kids[i] as child names[i] of m, in order; false with an error when one is NULL or
 * cannot be added, every kid then freed (those added with m later). */
bool em_module_add_children(em_module *m, int n, const char *const *names, em_module **kids);

/* The end of a function's own scope (em_scope_begin): keeps y (NULL passes) for the caller. */
static inline em_tensor *em_nn_scope_return(em_tensor *y)
{
    y = em_keep(y);
    em_scope_end();
    return y;
}

/* The losses' reductions (nn/losses.c): per-sample losses reduced as asked, the mean divided by
 * total (a 0-d tensor on the losses' device) or, when total is NULL, by count; and the check
 * that r is one of them (an error naming fn otherwise). */
em_tensor *em_loss_reduce(em_tensor *per_sample, em_reduction r, const em_tensor *total,
                          double count);
bool em_loss_reduction_ok(em_reduction r, const char *fn);
/* The options' checks (nn/losses.c): a reduction, weight (c) floating on in's device or NULL,
 * label_smoothing in [0, 1]; false with an error naming fn. */
bool em_cross_entropy_opts_ok(const em_tensor *in, int64_t c, em_cross_entropy_opts o,
                              const char *fn);
/* em_cross_entropy against class probabilities: a floating target (nn/losses_prob_target.c) */
em_tensor *em_cross_entropy_probs(const em_tensor *logits, const em_tensor *target,
                                  em_cross_entropy_opts o);

/* ---- the batch, instance and group norms (nn/norm_channels.c) ---- */
/* Whether x is a floating-point (N, C, *); else false with an error naming fn. */
bool em_norm_check_input(const char *fn, const em_tensor *x);
/* Whether v is NULL or (C) for x (N, C, *); else false with an error naming fn and what. */
bool em_norm_check_channels(const char *fn, const em_tensor *v, const char *what,
                            const em_tensor *x);
/* The positions of each channel of x (N, C, *): the product of the dims after C */
int64_t em_norm_positions(const em_tensor *x);
/* v (C) viewed as (1, C, 1, ...) to broadcast against x (N, C, *), in x's dtype */
em_tensor *em_norm_per_channel(const em_tensor *v, const em_tensor *x);
/* running = (1 - momentum) running + momentum stat (stat holding running's elements); the
 * caller turns gradients off */
em_status em_norm_update_running(em_tensor *running, const em_tensor *stat, double momentum);

/* A host f32 copy of t's elements in row-major order (nn/host_copy.c), or NULL with an error
 * naming fn; the caller frees it. */
float *em_host_f32(const em_tensor *t, const char *fn);

/* The built-in layer types, for code that picks what to do by a module's type (the ONNX
 * export's table of mappings). */
extern const em_module_type em_sequential_type, em_linear_type, em_conv2d_type, em_conv1d_type,
    em_max_pool2d_type, em_avg_pool2d_type, em_adaptive_avg_pool2d_type, em_batch_norm1d_type,
    em_batch_norm2d_type, em_layer_norm_type, em_dropout_type, em_relu_type, em_leaky_relu_type,
    em_gelu_type, em_silu_type, em_softsign_type, em_mish_type, em_softplus_type,
    em_hardtanh_type, em_elu_type, em_selu_type, em_hardswish_type, em_logsigmoid_type,
    em_tanh_type, em_sigmoid_type, em_softmax_type, em_flatten_type, em_embedding_type,
    em_residual_type, em_lstm_type, em_gru_type, em_multihead_attention_type,
    em_transformer_encoder_layer_type, em_module_list_type, em_conv_transpose2d_type,
    em_upsample_type, em_pad_type, em_group_norm_type, em_instance_norm1d_type,
    em_instance_norm2d_type;
/* m's type; for a module em_checkpoint_module or em_checkpoint_sequential changed, the type it
 * had before (nn/checkpointed_module.c). */
const em_module_type *em_module_own_type(const em_module *m);

/* What exporters and quantizers read of a layer beyond its tensors; each returns false (no
 * error set) when m is not of that type. */
bool em_conv2d_layer_config(const em_module *m, em_conv2d_opts *o);         /* Conv2d */
/* Conv2d, or Conv1d: its settings in the width's entries [1], height 1 */
bool em_conv_layer_config(const em_module *m, em_conv2d_opts *o);
bool em_pool2d_layer_config(const em_module *m, em_pool2d_opts *o);         /* Max/AvgPool2d */
bool em_conv_transpose2d_layer_config(const em_module *m, em_conv_transpose2d_opts *o);
/* A convolution layer's parameters, PyTorch's _ConvNd.reset_parameters: weight ws
 * kaiming_uniform_(a = sqrt 5), and with bias a bias (n_bias) U(+-1/sqrt fan_in), fan_in =
 * numel(weight) / ws[0]. m, or NULL with m freed. */
em_module *em_conv_layer_init(em_module *m, em_shape ws, int64_t n_bias, bool bias);
bool em_adaptive_pool_layer_size(const em_module *m, int64_t *h, int64_t *w);
bool em_upsample_layer_config(const em_module *m, em_interpolate_opts *o); /* Upsample */
typedef struct {
    int64_t pads[6]; /* (n_pads) em_pad's order: last dim's left, right, then the dim before */
    int n_pads;
    em_pad_mode mode;
    double value;    /* constant mode's fill */
} em_pad_config;
bool em_pad_layer_config(const em_module *m, em_pad_config *c); /* Pad */
/* The settings of an activation layer: each kind sets its own fields, the others are zero. */
typedef struct {
    double negative_slope;   /* LeakyReLU */
    bool tanh_approximation; /* GELU */
    int dim;                 /* Softmax */
    double beta, threshold;  /* Softplus */
    double min_val, max_val; /* Hardtanh */
    double alpha;            /* ELU */
} em_activation_config;
bool em_activation_layer_config(const em_module *m, em_activation_config *c); /* activations */
bool em_batch_norm_layer_eps(const em_module *m, double *eps);
bool em_group_norm_layer_config(const em_module *m, int64_t *num_groups, int64_t *channels,
                                double *eps, bool *affine);
bool em_instance_norm_layer_config(const em_module *m, int64_t *features,
                                   em_instance_norm_opts *o); /* InstanceNorm1d/2d */
bool em_layer_norm_layer_eps(const em_module *m, double *eps);
int64_t em_multihead_attention_heads(const em_module *m); /* 0 for any other module */
/* norm_first and the feed-forward activation of a TransformerEncoderLayer */
bool em_transformer_layer_config(const em_module *m, bool *norm_first, em_activation *act);
/* Every setting a TransformerEncoderLayer was made with (layer_norm_eps read from norm1) */
bool em_transformer_layer_settings(const em_module *m, int64_t *d_model, int64_t *nhead,
                                   em_transformer_opts *o);
bool em_dropout_layer_p(const em_module *m, double *p);                     /* Dropout */
bool em_mha_layer_config(const em_module *m, int64_t *embed_dim, int64_t *num_heads,
                         em_mha_opts *o);                                   /* MHA */

/* Quantized layers (quant/quantize.c, quant/quantize_static.c): w i8 (n, k) packed for the int8
 * kernel of its device (a new u8 tensor outside any scope), or NULL with an error naming fn;
 * checking that every value of m's buffer number `buffer` is a scale (finite, > 0), with an
 * error naming the layer, the buffer and the value; checking and repacking a static layer after
 * its buffers were loaded (EM_OK for other modules); whether a tree holds a static one. */
em_tensor *em_int8_packed(const em_tensor *w, const char *fn);
em_status em_quant_check_scale(const em_module *m, int buffer, const char *layer);
em_status em_quantize_static_repack(em_module *m, const char *layer);
bool em_is_static_quantized(const em_module *m);
/* The dynamic quantized layer types (quant/quantize.c, quant/quantize_rnn.c). */
extern const em_module_type em_quantized_linear_type, em_quantized_lstm_type,
    em_quantized_gru_type;

#endif
