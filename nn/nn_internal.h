/* What the nn/ files share beyond nn.h: reading a module type's description, the traced forward
 * the summary and the FLOP count use, the allocation every layer constructor starts with, and
 * (nn/layer_options_internal.h) the options each built-in layer keeps. Not installed. */
#ifndef EMBER_NN_INTERNAL_H
#define EMBER_NN_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>

#include "nn/layer_options_internal.h"
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

/* A convolution layer's parameters, PyTorch's _ConvNd.reset_parameters: weight ws
 * kaiming_uniform_(a = sqrt 5), and with bias a bias (n_bias) U(+-1/sqrt fan_in), fan_in =
 * numel(weight) / ws[0]. m, or NULL with m freed. */
em_module *em_conv_layer_init(em_module *m, em_shape ws, int64_t n_bias, bool bias);

/* Puts child (a module in no tree) in m's slot i and returns the module that was there, now in
 * no tree, for the caller to free: quantizing and pruning swap a layer for a new one this way. */
em_module *em_module_set_child(em_module *m, int i, em_module *child);

/* To be called after code outside nn/module.c renamed or removed one of m's parameters,
 * buffers or children (pruning does): m's index of its names is rebuilt from them when next
 * needed. */
void em_module_names_changed(em_module *m);

/* Adds child under the next number ("0", "1", ...: its count of children), as Sequential and
 * ModuleList do; when m is NULL or not of type, or child is NULL, frees both with an error naming
 * fn and returns NULL; else returns m. */
em_module *em_module_append_numbered(em_module *m, const em_module_type *type, em_module *child,
                                     const char *fn);
/* A new module of type (a bare em_module) holding the n modules of ap as children "0".."n-1";
 * NULL with an error naming fn (every module freed) on failure. */
em_module *em_module_numbered(const em_module_type *type, int n, va_list ap, const char *fn);
/* The build of such a container: a new module of type holding children "0".."n-1" */
em_module *em_module_build_numbered(const em_module_type *type, const void *options,
                                    em_module **children, int n);

/* ---- recurrent modules (nn/recurrent.c): LSTM, GRU and their quantized forms share one
 * recurrence and differ in how a layer projects its input and its hidden state ---- */
typedef struct em_rnn_module em_rnn_module;
struct em_rnn_module {
    em_module base;
    em_rnn_options o;
    bool lstm; /* LSTM: gates i, f, g, o and a cell state; else GRU: gates r, z, n */
    /* layer's input (hidden false) or hidden state (true) projected with its bias:
     * x (*, in) -> (*, gates * hidden_size) */
    em_tensor *(*project)(const em_rnn_module *r, int layer, bool hidden, const em_tensor *x);
};
/* The forward of every recurrent module type (em_forward: the output, states from zeros). */
em_tensor *em_rnn_forward(em_module *m, const em_tensor *x);
/* "LSTM(input_size=..., ...)" settings of a recurrent module, for describe */
void em_rnn_describe(const em_module *m, char *buf, size_t n);
/* The FLOPs of a recurrent module's forward giving y, and the elements of an LSTM's or GRU's
 * parameters, shared with the quantized forms */
double em_rnn_flops(const em_module *m, const em_tensor *x, const em_tensor *y);
double em_lstm_tensor_elements(const void *options);
double em_gru_tensor_elements(const void *options);

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
/* The FLOPs of a norm's forward giving y: per element 4 for statistics from the batch (a sum,
 * and a subtract, square and sum), 2 to normalise, 2 for the affine (nn/batch_norm.c) */
double em_norm_flops(const em_tensor *y, bool batch_statistics, bool affine);
/* running = (1 - momentum) running + momentum stat (stat holding running's elements); the
 * caller turns gradients off */
em_status em_norm_update_running(em_tensor *running, const em_tensor *stat, double momentum);

/* A host f32 copy of t's elements in row-major order (nn/host_copy.c), or NULL with an error
 * naming fn; the caller frees it. */
float *em_host_f32(const em_tensor *t, const char *fn);

/* A built-in module type: `EM_MODULE_TYPE(em_linear_type) = {.type_name = "Linear", ...};`
 * defines it, and the build collects every such line of the library's sources into the list of
 * types whole-model files know (CMakeLists.txt: module_types.c), so a layer joins that list
 * from its own file and a static link keeps every type. */
#define EM_MODULE_TYPE(name) const em_module_type name

/* ---- a type's description, read (nn/module_type.c) ---- */
/* m's options struct (NULL for a type without settings) */
const void *em_module_options(const em_module *m);
/* t's setting of that name, or NULL */
const em_setting *em_type_setting(const em_module_type *t, const char *name);
/* A setting's value in an options struct read into v or written from it (an INTS value's
 * count is the count setting's, already in options), its default, and its count (INTS). */
void em_setting_read(const em_setting *s, const void *options, em_setting_value *v);
void em_setting_write(const em_setting *s, void *options, const em_setting_value *v);
void em_setting_default(const em_setting *s, em_setting_value *v);
int64_t em_setting_count(const em_setting *s, const void *options);
/* Whether v is in s's range; else false with why: "setting 'x' is 0, outside [1, 8]" */
bool em_setting_in_range(const em_setting *s, const em_setting_value *v, char *why, size_t n);
/* A check hook's part: whether setting name's value d divides the setting of's value total;
 * else false with why ("setting 'groups' is 4, which does not divide out_channels 6"). */
bool em_check_divides(const char *name, int64_t d, const char *of, int64_t total, char *why,
                      size_t n);
/* Whether every setting of options is in range and t's check passes; else false with why. */
bool em_options_check(const em_module_type *t, const void *options, char *why, size_t n);
/* m's settings as em_module_describe shows them without a describe hook: "name=value" each (the
 * value alone for a positional one), None left out where files leave it out */
void em_describe_settings(const em_module *m, char *buf, size_t n);
/* The FLOPs m's type counts for its own part of one forward from x to y. */
double em_module_own_flops(const em_module *m, const em_tensor *x, const em_tensor *y);
/* The flops of a type that does no arithmetic (Flatten, Pad, Embedding's lookup): 0 */
double em_no_flops(const em_module *m, const em_tensor *x, const em_tensor *y);
/* The input of the forward whose hook runs now (em_forward sets it around the hook call). */
const em_tensor *em_forward_hook_input(void);

/* The built-in types that code elsewhere compares modules with. */
extern const em_module_type em_linear_type, em_conv2d_type, em_max_pool2d_type,
    em_batch_norm1d_type, em_batch_norm2d_type, em_layer_norm_type, em_instance_norm2d_type,
    em_relu_type, em_multihead_attention_type, em_transformer_encoder_layer_type, em_lstm_type,
    em_gru_type, em_concat_type;
/* m's type; for a module whose type wraps another (checkpointed, pruned, synchronised), the
 * original type (nn/checkpointed_module.c). */
const em_module_type *em_module_own_type(const em_module *m);

/* Quantized layers (quant/quantize.c, quant/quantize_static.c): w i8 (n, k) packed for the int8
 * kernel of its device (a new u8 tensor outside any scope), or NULL with an error naming fn;
 * checking that every value of m's buffer number `buffer` is a scale (finite, > 0), with an
 * error naming the layer, the buffer and the value; checking and repacking a static layer after
 * its buffers were loaded (EM_OK for other modules); whether a tree holds a static one. */
em_tensor *em_int8_packed(const em_tensor *w, const char *fn);
em_status em_quant_check_scale(const em_module *m, int buffer, const char *layer);
em_status em_quantize_static_repack(em_module *m, const char *layer);
bool em_is_static_quantized(const em_module *m);

#endif
