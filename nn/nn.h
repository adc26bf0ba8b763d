/* Modules and losses: named parameters and buffers in a tree, train/eval mode, forward;
 * the standard layers and PyTorch's default initialisation; a torchinfo-like summary. A module
 * is made by its PyTorch class's name in snake case (em_sequential, em_module_list), with _layer
 * where the op has the plain name (em_linear_layer, em_relu_layer), and em_module_free frees
 * any module. */
#ifndef EMBER_NN_H
#define EMBER_NN_H

#include <stdio.h>

#include "ember/autograd/autograd.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct em_module em_module;

/* ---- module types, each described once ----
 * A module type names its forward and describes its settings: name, kind, where the value
 * lives in the type's options struct (the struct every module of the type keeps at
 * options_offset), range and default. Whole-model files, summaries, FLOP counts, the ONNX
 * export and pruning read that one description. */
typedef enum {
    EM_SETTING_INT,          /* int64_t in [min, max] */
    EM_SETTING_REAL,         /* double in [min, max] (finite) */
    EM_SETTING_BOOL,         /* bool */
    EM_SETTING_CHOICE,       /* an enum (int) indexing choices: files hold the index, summaries
                                the word */
    EM_SETTING_INT_OR_NONE,  /* int64_t in [min, max], or none_value for Python's None */
    EM_SETTING_REAL_OR_NONE, /* double in [min, max], or none_value for None */
    EM_SETTING_INTS,         /* int64_t[] each in [min, max], as many as the count at
                                count_offset says; files hold NAME_0, NAME_1, ... */
} em_setting_kind;

enum {
    EM_SETTING_ADDED_LATER = 1 << 0,  /* files written before the type had it leave it out:
                                         they read its default (any other setting a file
                                         leaves out is an error) */
    EM_SETTING_NONE_OMITTED = 1 << 1, /* None is written by leaving the setting out, not as
                                         null (files and summaries) */
    EM_SETTING_POSITIONAL = 1 << 2,   /* shown by its value alone: "4, 8, kernel_size=3" */
    EM_SETTING_IN_UNITS = 1 << 3,     /* a matrix-product layer's input units (weight dim 1):
                                         pruning resizes a layer through it */
    EM_SETTING_OUT_UNITS = 1 << 4,    /* its output units (weight dim 0) */
};

typedef struct {
    const char *name;           /* the key in files, the word in summaries: "in_features" */
    em_setting_kind kind;
    size_t offset;              /* offsetof the value in the options struct */
    double min, max;            /* the range of a number */
    double def;                 /* the default (a bool's: 0 or 1; None's: none_value) */
    double none_value;          /* *_OR_NONE: the value held for None */
    const char *const *choices; /* CHOICE: the words, NULL-terminated */
    size_t count_offset;        /* INTS: offsetof its count (an int64_t, an INT setting listed
                                   before it) in the options struct */
    unsigned flags;             /* EM_SETTING_* */
} em_setting;

/* What a module type is, beyond its settings. */
enum {
    EM_TRAIT_CONTAINER = 1 << 0,   /* its children are saved with it and handed to build */
    EM_TRAIT_SEQUENTIAL = 1 << 1,  /* runs its children in order, each on the last's output */
    EM_TRAIT_ELEMENTWISE = 1 << 2, /* each output element is a function of the input element
                                      at its place (activations, Dropout): 1 FLOP per element
                                      unless flops says otherwise */
    EM_TRAIT_MATMUL = 1 << 3,      /* a matrix product whose weight (params[0]) rows are its
                                      output units (Linear, Conv1d, Conv2d) */
    EM_TRAIT_INDEX_INPUT = 1 << 4, /* its input is i64 indices (Embedding) */
};

typedef struct em_module_type em_module_type;
/* What a module type provides; a custom module fills one of these (static const) with
 * designated initializers. Only forward is needed to run; a type with settings (and build) is
 * also saved in whole-model files once registered (models/model_file.h). */
struct em_module_type {
    const char *type_name;                                  /* "Linear" */
    em_tensor *(*forward)(em_module *m, const em_tensor *x); /* new tensor, or NULL + error */
    void (*destroy)(em_module *m);                          /* frees what init allocated; NULL ok */
    /* "in_features=784, out_features=512" for summaries; NULL: from the settings */
    void (*describe)(const em_module *m, char *buf, size_t n);

    const em_setting *settings; /* (n_settings), in the order files and summaries list them */
    int n_settings;
    size_t options_offset;      /* offsetof the options struct in the module's struct */
    size_t options_size;        /* its size */
    unsigned traits;            /* EM_TRAIT_* */
    /* A new module of type from options (every setting in range and check passed) and, for a
     * container, its n children (ownership taken, freed on failure); NULL with an error. */
    em_module *(*build)(const em_module_type *type, const void *options, em_module **children,
                        int n);
    /* What the settings' ranges cannot say (Hardtanh's min_val <= max_val): false with why
     * ("setting 'min_val' is 2, above max_val 1"). NULL: nothing to check. */
    bool (*check)(const void *options, char *why, size_t n);
    /* The parameter and buffer elements build makes from options (checked against a file
     * before anything is allocated). NULL: none. */
    double (*tensor_elements)(const void *options);
    /* The FLOPs of one forward of m from x to y, its children's not counted (they count their
     * own). NULL: none for a container, 1 per element of y for an elementwise type. */
    double (*flops)(const em_module *m, const em_tensor *x, const em_tensor *y);
    /* A type made over another (a checkpointed, pruned or synchronised module's) names the
     * original, whose description it copies; NULL for an original type. */
    const em_module_type *wraps;
    /* A layer that is one ONNX operator: its name and up to two attributes, each a setting's
     * value (an int, bool or real): {"LeakyRelu", {{"alpha", "negative_slope"}}} */
    struct {
        const char *op;
        struct {
            const char *attribute, *setting;
        } attributes[2];
    } onnx;
};

/* A type's settings from an array: `EM_SETTINGS(linear_settings),` in its initializer */
#define EM_SETTINGS(array) .settings = (array), .n_settings = (int)(sizeof(array) / sizeof *(array))

/* A setting's value read through its module's type (em_module_setting). */
typedef struct {
    em_setting_kind kind;
    bool none;            /* *_OR_NONE: None */
    int64_t i;            /* INT, INT_OR_NONE, BOOL (0 or 1), CHOICE (the index) */
    double r;             /* REAL, REAL_OR_NONE */
    const char *word;     /* CHOICE: the word */
    int n;                /* INTS: the count */
    const int64_t *ints;  /* INTS: the values (valid while the module lives) */
} em_setting_value;
/* The setting name of m (its own type's, through a checkpointed module too) into v;
 * EM_ERR_ARG naming the type when it has no such setting. */
em_status em_module_setting(const em_module *m, const char *name, em_setting_value *v);
/* m's settings as a summary shows them ("in_features=4, out_features=2, bias=true") */
void em_module_describe(const em_module *m, char *buf, size_t n);

typedef struct {
    char *name;       /* local name: "weight", "running_mean" */
    em_tensor *value; /* owned */
} em_named_tensor;

typedef struct {
    char *name;       /* local name: "0", "features" */
    em_module *module; /* owned */
} em_named_module;

/* A custom module embeds em_module as its first member and is made by em_module_alloc:
 *   typedef struct { em_module base; double scale; } my_block;
 *   static const em_module_type my_block_type = {.type_name = "MyBlock",
 *                                                .forward = my_block_forward};
 *   my_block *b = (my_block *)em_module_alloc(sizeof *b, &my_block_type);
 *   em_module_add_param(&b->base, "weight", em_randn(...));
 *   em_module_add_child(&b->base, "fc", em_linear_layer(8, 8, true));
 * Its forward returns a new tensor the caller owns as it owns any op's result, and frees its own
 * temporaries: it opens a scope, em_keep()s the result (which hands it to the caller's scope, or
 * to the caller itself outside any scope) and ends the scope, so every intermediate is released
 * there, also when forward runs outside a scope (at inference). em_keep passes NULL on, so an
 * error anywhere needs no extra check:
 *   static em_tensor *my_block_forward(em_module *m, const em_tensor *x) // x (B, 8)
 *   {
 *       my_block *b = (my_block *)m;
 *       em_scope_begin();
 *       em_tensor *h = em_forward(m->children[0].module, x);               // (B, 8)
 *       em_tensor *y = em_mul_scalar(em_mul(em_relu(h), m->params[0].value), b->scale);
 *       y = em_keep(y);                                                     // (B, 8), kept
 *       em_scope_end();                                                     // h etc. released
 *       return y;
 *   }
 * Without the scope, h and the other temporaries would join the caller's scope (freed only
 * when it ends), or leak when the caller has none. The scope owns what it holds: em_release
 * only what you em_retain()ed yourself. */
struct em_module {
    const em_module_type *type;
    bool training;
    int n_params, n_buffers, n_children;
    em_named_tensor *params;   /* require grad */
    em_named_tensor *buffers;  /* saved with the model, no grad (running statistics, masks) */
    em_named_module *children;
};

/* The deepest module tree ember builds: a root and its chain of descendants hold at most this
 * many modules. Every walk of a tree (forward, parameters and state dicts, summaries, export)
 * recurses once per level, so em_module_add_child refuses a child that would make the tree
 * deeper, naming this limit. */
#define EM_MODULE_MAX_DEPTH 1000

/* A new module of type, size bytes: sizeof(em_module) for a bare one, or the size of a struct of
 * your own that embeds em_module first; zeroed but for its type, in training mode. Every module
 * is made here and freed by em_module_free (nn/ keeps the tree's bookkeeping, its parent and the
 * names traversals hand out, beside it). NULL with EM_ERR_MEMORY naming the type, or EM_ERR_ARG
 * when type is NULL or size smaller than em_module. */
em_module *em_module_alloc(size_t size, const em_module_type *type);
/* take ownership of value (made a grad-requiring leaf); returns value, or NULL on error */
em_tensor *em_module_add_param(em_module *m, const char *name, em_tensor *value);
em_tensor *em_module_add_buffer(em_module *m, const char *name, em_tensor *value);
/* takes ownership of child (freed on error): a module not yet in any tree, not m itself nor
 * one of m's ancestors, and not making the tree deeper than EM_MODULE_MAX_DEPTH */
em_module *em_module_add_child(em_module *m, const char *name, em_module *child);
void em_module_free(em_module *m); /* the module, its children and tensors; NULL fine */

em_tensor *em_forward(em_module *m, const em_tensor *x);
/* Called by em_forward after every module's forward, children included (out may be NULL on
 * error): summaries, FLOP counts, and the inference engine's yield between layers use it. */
typedef void (*em_forward_hook)(em_module *m, const em_tensor *out, void *ctx);
/* Installs hook for the calling thread only (NULL removes it); returns the previous one and,
 * when prev_ctx is given, its ctx. */
em_forward_hook em_set_forward_hook(em_forward_hook hook, void *ctx, void **prev_ctx);
void em_module_train(em_module *m, bool training); /* recursive */
/* every parameter and buffer moved to device in place (build the optimizer afterwards) */
em_status em_module_to(em_module *m, em_device device);
/* PyTorch's module.to(dtype): every floating parameter and buffer converted to dtype (a
 * floating one) in place, with its grad; integer buffers (num_batches_tracked) stay */
em_status em_module_to_dtype(em_module *m, em_dtype dtype);
/* the device of the module's first parameter (else first buffer); the CPU when it has neither */
em_device em_module_device(const em_module *m);
void em_module_eval(em_module *m);

/* Depth-first named traversal: "features.0.weight". Returns the count; writes up to max
 * entries (names are owned by the module tree and live as long as it). */
typedef struct {
    const char *name; /* full dotted name */
    em_tensor *value;
} em_param_ref;
int em_module_parameters(const em_module *m, em_param_ref *out, int max);
int em_module_buffers(const em_module *m, em_param_ref *out, int max);
em_tensor *em_module_find(const em_module *m, const char *dotted_name); /* param or buffer */
int64_t em_module_num_params(const em_module *m);
/* A 64-bit fingerprint of the tree: its layer types and names, every parameter's and buffer's
 * name, dtype, shape and values (em_tensor_hash); equal models hash equal. 0 for NULL. */
uint64_t em_module_hash(const em_module *m);
void em_module_zero_grad(em_module *m);
/* torchinfo-like table for an input shape: layer, output shape, parameter count; totals. A
 * quantized layer's int8 weights, scales and bias (buffers) count as non-trainable parameters. */
em_status em_module_summary(em_module *m, em_shape input, FILE *f);

/* A layer whose forward is a matrix product (its type's EM_TRAIT_MATMUL: Linear, Conv1d,
 * Conv2d): for one sample it makes rows x positions outputs, each a sum of k products. */
typedef struct {
    const em_module *layer;
    int64_t rows;      /* output features or channels: the weight's first dim */
    int64_t k;         /* products per output: in_features, or in_ch / groups x kernel size */
    int64_t positions; /* outputs per row and sample: 1 (Linear), or the conv's output L or H*W */
    bool input_grad;   /* backward computes its input's gradient: false for a layer that no
                          layer with parameters runs before (its input is the data) */
} em_matmul_layer;
/* The matrix-product layers of one forward of a sample of shape `sample` (no batch dim), in the
 * order they run: the count (up to max written to out), or -1 with an error. */
int em_module_matmul_layers(em_module *m, em_shape sample, em_matmul_layer *out, int max);
double em_matmul_macs(const em_matmul_layer *l); /* multiply-accumulates per sample */
/* FLOPs per sample of a training step over n such layers, counted exactly as the products run:
 * 2 per multiply-accumulate for the forward, as many for the weight gradient and, where
 * input_grad, for the input gradient. Bias, activations, pooling, loss and optimizer are not
 * counted. NAN with an error when l is NULL with n > 0 or n < 0. */
double em_matmul_train_flops(const em_matmul_layer *l, int n);

/* The FLOPs of one eval forward of m on an input of shape `input` (batch first), each module
 * counting its own as its type describes (em_module_type.flops): 2 per multiply-accumulate of a
 * product, 1 per add of a bias or residual, 1 per element of an elementwise activation, and
 * each type's own rule beyond (norms, pools, softmax, attention, recurrences); -1 with an error
 * when the forward fails. */
double em_module_flops(em_module *m, em_shape input);

/* The child at a dotted path of child names ("blocks.3", "features.0"), or NULL with an error
 * naming the missing part; the child stays m's. */
em_module *em_module_child(const em_module *m, const char *dotted_name);

/* ---- containers ---- */
em_module *em_sequential(int n, ...);                 /* takes ownership of n modules */
/* returns seq; when either is NULL (or seq is no Sequential) frees both, returns NULL */
em_module *em_sequential_append(em_module *seq, em_module *m);
/* ModuleList: children "0".."n-1" (ownership taken) held, traversed, saved and loaded like any
 * others, but with no forward: the module owning it runs them (em_module_child, m->children). */
em_module *em_module_list(int n, ...);
/* returns list; when either is NULL (or list is no ModuleList) frees both, returns NULL */
em_module *em_module_list_append(em_module *list, em_module *m);
/* y = body(x) + shortcut(x) (same shapes); shortcut NULL is the identity. Children "body" and
 * "shortcut"; takes ownership of both (freed when NULL is returned). A ResNet basic block:
 * em_sequential(2, em_residual(conv-bn-relu-conv-bn, downsample or NULL), em_relu_layer()). */
em_module *em_residual(em_module *body, em_module *shortcut);
/* y = cat([branch_0(x), ..., branch_n-1(x)], dim): the n >= 1 branches (ownership taken, all
 * freed when NULL is returned) each run on x, their outputs, equal outside dim, joined along it
 * (their dtypes meet as em_cat's do). Children "0".."n-1"; dim is its setting, so model files
 * and ONNX export (Concat) know it. An Inception block, or with em_identity_layer() as a branch
 * the skip connection of a U-Net or a DenseNet. */
em_module *em_concat(int dim, int n, ...);
/* A U-Net's skip: y = cat([x, inner(x)], dim), em_concat(dim, 2, em_identity_layer(), inner),
 * as PyTorch's U-Net generator block returns torch.cat([x, self.model(x)], 1). */
em_module *em_concat_skip(em_module *inner, int dim);

/* ---- layers ---- */
em_module *em_linear_layer(int64_t in_features, int64_t out_features, bool bias);
/* padding may be EM_PADDING_SAME (stride 1 only) or EM_PADDING_VALID, as em_conv2d's */
typedef struct {
    int64_t stride, padding, dilation, groups; /* zero takes the default (1, 0, 1, 1) */
    bool no_bias;
} em_conv2d_layer_opts;
em_module *em_conv2d_layer(int64_t in_ch, int64_t out_ch, int64_t kernel, em_conv2d_layer_opts o);
typedef struct {
    int64_t stride, padding, dilation, groups; /* zero takes the default (1, 0, 1, 1) */
    bool no_bias;
} em_conv1d_layer_opts;
/* x (N, in_ch, L) -> (N, out_ch, L_out); weight (out_ch, in_ch / groups, kernel) */
em_module *em_conv1d_layer(int64_t in_ch, int64_t out_ch, int64_t kernel, em_conv1d_layer_opts o);
typedef struct {
    int64_t stride, padding, output_padding, dilation, groups; /* zero: (1, 0, 0, 1, 1) */
    bool no_bias;
} em_conv_transpose2d_layer_opts;
/* x (N, in_ch, H, W) -> (N, out_ch, H_out, W_out) as em_conv_transpose2d; weight (in_ch,
 * out_ch / groups, kernel, kernel) */
em_module *em_conv_transpose2d_layer(int64_t in_ch, int64_t out_ch, int64_t kernel,
                                     em_conv_transpose2d_layer_opts o);
typedef struct {
    int64_t stride;   /* 0: the kernel size */
    int64_t padding;  /* at most half the kernel */
    int64_t dilation; /* 0: 1; MaxPool2d's taps this far apart */
} em_pool2d_layer_opts;
/* MaxPool2d(kernel_size, stride, padding, dilation) and AvgPool2d(kernel_size, stride, padding)
 * over kernel x kernel windows; an AvgPool2d takes no dilation */
em_module *em_max_pool2d_layer(int64_t kernel, em_pool2d_layer_opts o);
em_module *em_avg_pool2d_layer(int64_t kernel, em_pool2d_layer_opts o);
em_module *em_adaptive_avg_pool2d_layer(int64_t out_h, int64_t out_w);
/* nn.Upsample: em_interpolate(x, o) (mode nearest, linear or bilinear; size or scale_factor) */
em_module *em_upsample_layer(em_interpolate_opts o);
/* em_pad(x, pads, n_pads (2, 4 or 6), mode, value): PyTorch's ZeroPad, ConstantPad,
 * ReflectionPad and ReplicationPad 1d/2d/3d in one layer */
em_module *em_pad_layer(const int64_t *pads, int n_pads, em_pad_mode mode, double value);
/* BatchNorm's momentum for PyTorch's momentum=None: the running statistics are the cumulative
 * average of every training batch's, running += (batch - running) / num_batches_tracked */
#define EM_BN_CUMULATIVE_AVERAGE (-1.0)
typedef struct {
    double eps;      /* 0: 1e-5 */
    double momentum; /* 0: 0.1; EM_BN_CUMULATIVE_AVERAGE for PyTorch's None */
} em_batch_norm_opts;
/* x (N, C) or (N, C, L) for 1d, (N, C, H, W) for 2d; buffers running_mean, running_var (C) and
 * num_batches_tracked (i64 0-d), counted in each training step */
em_module *em_batch_norm1d_layer(int64_t num_features, em_batch_norm_opts o);
em_module *em_batch_norm2d_layer(int64_t num_features, em_batch_norm_opts o);
typedef struct {
    double eps; /* 0: 1e-5 */
} em_layer_norm_opts;
/* over the trailing dims holding normalized_size elements; weight and bias (normalized_size) */
em_module *em_layer_norm_layer(int64_t normalized_size, em_layer_norm_opts o);
typedef struct {
    double eps;     /* 0: 1e-5 */
    bool no_affine; /* leave out weight and bias (PyTorch's affine=False) */
} em_group_norm_opts;
/* nn.GroupNorm: x (N, channels, *), channels divisible by num_groups; weight and bias
 * (channels) unless no_affine */
em_module *em_group_norm_layer(int64_t num_groups, int64_t channels, em_group_norm_opts o);
typedef struct {
    double eps;               /* 0: 1e-5 */
    double momentum;          /* 0: 0.1 */
    bool affine;              /* weight and bias (num_features); PyTorch's default false */
    bool track_running_stats; /* running_mean, running_var (num_features) and
                                 num_batches_tracked buffers, updated in training and used in
                                 eval; PyTorch's default false */
} em_instance_norm_opts;
/* nn.InstanceNorm1d: x (N, C, L) or unbatched (C, L); nn.InstanceNorm2d: x (N, C, H, W) or
 * (C, H, W). C must be num_features when affine or tracking. */
em_module *em_instance_norm1d_layer(int64_t num_features, em_instance_norm_opts o);
em_module *em_instance_norm2d_layer(int64_t num_features, em_instance_norm_opts o);
em_module *em_dropout_layer(double p);
typedef struct {
    int64_t padding_idx;  /* used when has_padding_idx: in [-num, num), negative from the end */
    bool has_padding_idx; /* false: no padding row (PyTorch's padding_idx=None) */
} em_embedding_opts;
/* nn.Embedding(num, dim): weight (num, dim) N(0, 1); a padding row starts at zero and gets no
 * gradient (em_embedding_padded) */
em_module *em_embedding_layer(int64_t num, int64_t dim, em_embedding_opts o);
em_module *em_flatten_layer(void); /* flattens all dims after the first */
em_module *em_identity_layer(void); /* nn.Identity: y = x (a view of it) */
em_module *em_relu_layer(void);
em_module *em_leaky_relu_layer(double negative_slope);
em_module *em_gelu_layer(bool tanh_approximation);
em_module *em_silu_layer(void);
em_module *em_softsign_layer(void);
em_module *em_mish_layer(void);
em_module *em_softplus_layer(double beta, double threshold); /* PyTorch's defaults: 1, 20 */
em_module *em_hardtanh_layer(double min_val, double max_val); /* PyTorch's defaults: -1, 1 */
em_module *em_elu_layer(double alpha);                         /* PyTorch's default: 1 */
em_module *em_celu_layer(double alpha); /* alpha ELU(x / alpha); PyTorch's default 1, not 0 */
em_module *em_selu_layer(void);
em_module *em_hardswish_layer(void);
em_module *em_logsigmoid_layer(void);
em_module *em_tanh_layer(void);
em_module *em_sigmoid_layer(void);
em_module *em_softmax_layer(int dim);

/* ---- recurrent layers: PyTorch's LSTM and GRU (gate order i, f, g, o and r, z, n; parameters
 * weight_ih_l{k} (G H, in), weight_hh_l{k} (G H, H), bias_ih_l{k}, bias_hh_l{k} (G H), so a
 * PyTorch state dict loads by name) ---- */
typedef struct {
    int64_t num_layers; /* stacked layers; 0: 1 */
    bool batch_first;   /* x (B, T, in) and output (B, T, H) instead of (T, B, ...) */
    bool no_bias;
    double dropout;     /* on each layer's output but the last, in training */
} em_rnn_opts;
em_module *em_lstm_layer(int64_t input_size, int64_t hidden_size, em_rnn_opts o);
em_module *em_gru_layer(int64_t input_size, int64_t hidden_size, em_rnn_opts o);
/* x (T, B, in), (B, T, in) when batch_first, or unbatched (T, in); h0, c0 (L, B, H) or (L, H)
 * unbatched, NULL for zeros -> output (T, B, H) / (B, T, H) / (T, H), the last layer's h at
 * every step; *h_n, *c_n (when not NULL) get the last h and c of every layer, shaped as h0.
 * em_forward(m, x) gives the output from zero states. Also for the quantized forms. */
em_tensor *em_lstm(em_module *m, const em_tensor *x, const em_tensor *h0, const em_tensor *c0,
                   em_tensor **h_n, em_tensor **c_n);
em_tensor *em_gru(em_module *m, const em_tensor *x, const em_tensor *h0, em_tensor **h_n);

/* ---- attention and transformer layers, batch first: sequences are (B, T, E) ---- */
/* Keys and values of earlier positions, per layer (B, H, max_len, D), so that a decoder
 * attends to them without recomputing them: each cached forward appends its positions at
 * em_kv_cache_len, and the caller advances the length once every layer has them. */
typedef struct em_kv_cache em_kv_cache;
em_kv_cache *em_kv_cache_new(int n_layers, int64_t batch, int64_t heads, int64_t max_len,
                             int64_t head_dim, em_dtype dtype);
void em_kv_cache_free(em_kv_cache *c); /* NULL is fine */
int64_t em_kv_cache_len(const em_kv_cache *c);
int64_t em_kv_cache_capacity(const em_kv_cache *c);
em_status em_kv_cache_advance(em_kv_cache *c, int64_t n);
void em_kv_cache_reset(em_kv_cache *c); /* length 0 */

typedef struct {
    double dropout; /* on the attention weights, in training */
    bool no_bias;   /* leave out in_proj_bias and out_proj.bias */
    bool causal;    /* em_forward's self-attention is causal (position t sees keys <= t) */
} em_mha_opts;
/* PyTorch's nn.MultiheadAttention(embed_dim, num_heads, batch_first=True): in_proj_weight
 * (3E, E) (xavier uniform), in_proj_bias (3E) (zeros), out_proj (Linear E -> E, zero bias).
 * em_forward(m, x) is the self-attention of x (B, T, E) -> (B, T, E). */
em_module *em_multihead_attention_layer(int64_t embed_dim, int64_t num_heads, em_mha_opts o);

typedef struct {
    const em_tensor *attn_mask;        /* NULL, or (Lq, Lk) or (B * num_heads, Lq, Lk): bool
                                          (true: may NOT attend, as PyTorch's MHA) or float
                                          (added to the scores) */
    const em_tensor *key_padding_mask; /* NULL, or bool (B, Lk): true for keys to ignore */
    bool is_causal;                    /* query i sees keys j <= i (with a cache: j <= len + i) */
    em_kv_cache *cache;                /* self-attention only, without masks: the keys and
                                          values of this call join the cache's layer `layer`
                                          and the queries attend to everything held */
    int layer;
} em_mha_call;
/* PyTorch's forward(query, key, value, ..., need_weights=False): query (B, Lq, E), key and
 * value (B, Lk, E) -> (B, Lq, E); one product for q, k and v when all three are one tensor. */
em_tensor *em_multihead_attention(em_module *mha, const em_tensor *query, const em_tensor *key,
                                  const em_tensor *value, em_mha_call c);

typedef enum { EM_ACTIVATION_RELU = 0, EM_ACTIVATION_GELU } em_activation;
typedef struct {
    int64_t dim_feedforward;  /* 0: 2048, PyTorch's default */
    double dropout;           /* attention weights, feed-forward and residual dropout; 0: none
                                 (PyTorch's default is 0.1) */
    em_activation activation; /* relu (default) or gelu (exact) */
    double layer_norm_eps;    /* 0: 1e-5 */
    bool norm_first;          /* LayerNorm before attention and feed-forward (pre-LN, as GPT) */
    bool causal;              /* the self-attention is causal */
} em_transformer_opts;
/* PyTorch's nn.TransformerEncoderLayer(d_model, nhead, batch_first=True): children self_attn,
 * linear1, dropout, linear2, norm1, norm2, dropout1, dropout2. norm_first:
 *   x = x + dropout1(self_attn(norm1(x)))
 *   x = x + dropout2(linear2(dropout(act(linear1(norm2(x))))))
 * else the norms follow the residual sums. x (B, T, d_model) -> (B, T, d_model). */
em_module *em_transformer_encoder_layer(int64_t d_model, int64_t nhead, em_transformer_opts o);
/* The layer's forward with its self-attention reading and extending cache's layer `layer`
 * (cache NULL: em_forward). */
em_tensor *em_transformer_layer_forward(em_module *m, const em_tensor *x, em_kv_cache *cache,
                                        int layer);
/* PyTorch's forward(src, src_mask, src_key_padding_mask): the layer's forward on x (B, T,
 * d_model) with src_mask as em_mha_call's attn_mask ((T, T) or (B * nhead, T, T): bool, true
 * where a query may not attend, or float, added to the scores, which may require grad: a
 * learned bias) and src_key_padding_mask bool (B, T), true at the padding positions no query
 * attends to; either may be NULL, and the layer's causal setting joins them. */
em_tensor *em_transformer_layer_masked(em_module *m, const em_tensor *x,
                                       const em_tensor *src_mask,
                                       const em_tensor *src_key_padding_mask);

/* ---- gradient checkpointing (em_checkpoint in autograd.h), in place: the module keeps its
 * name, parameters and children, and only its forward changes; returns the module, or NULL
 * with an error (the module unchanged) ---- */
/* m's forward runs under em_checkpoint: its activations are recomputed in backward */
em_module *em_checkpoint_module(em_module *m);
/* seq's children split into n_segments runs of near-equal length; each run but the last is
 * checkpointed (PyTorch's checkpoint_sequential), so only the segment boundaries stay alive
 * through the forward. 1 <= n_segments <= children; a checkpointed Sequential takes no appends. */
em_module *em_checkpoint_sequential(em_module *seq, int n_segments);

/* ---- functional forms the layers use (differentiable) ---- */
em_tensor *em_dropout(const em_tensor *x, double p, bool training, em_generator *gen);
em_tensor *em_batch_norm(const em_tensor *x, em_tensor *running_mean, em_tensor *running_var,
                         const em_tensor *weight, const em_tensor *bias, bool training,
                         double momentum, double eps);
em_tensor *em_layer_norm(const em_tensor *x, int64_t normalized_size, const em_tensor *weight,
                         const em_tensor *bias, double eps);
/* F.group_norm: x (N, C, *) normalised over each of num_groups groups of C / num_groups
 * channels and all their positions, then weight and bias (C) or NULL per channel */
em_tensor *em_group_norm(const em_tensor *x, int64_t num_groups, const em_tensor *weight,
                         const em_tensor *bias, double eps);
/* F.instance_norm: x (N, C, *) normalised per sample and channel over its positions
 * (use_input_stats; running_mean, running_var (C) or NULL then move towards the batch's: the
 * mean over samples of each instance's mean and unbiased variance), or by running_mean and
 * running_var (use_input_stats false); weight and bias (C) or NULL */
em_tensor *em_instance_norm(const em_tensor *x, em_tensor *running_mean, em_tensor *running_var,
                            const em_tensor *weight, const em_tensor *bias, bool use_input_stats,
                            double momentum, double eps);
em_tensor *em_adaptive_avg_pool2d(const em_tensor *x, int64_t out_h, int64_t out_w);

/* ---- losses ---- */
/* batchmean (the sum over the batch size, the first dim) is em_kl_div's only, as in PyTorch */
typedef enum { EM_REDUCTION_MEAN = 0, EM_REDUCTION_SUM, EM_REDUCTION_NONE,
               EM_REDUCTION_BATCHMEAN } em_reduction;
typedef struct {
    em_reduction reduction;
    int64_t ignore_index;   /* used when has_ignore_index */
    bool has_ignore_index;
    double label_smoothing;
    const em_tensor *weight; /* (C) class weights, or NULL; the mean divides by the kept
                                samples' total weight, as PyTorch's does */
} em_cross_entropy_opts;
/* logits (N, C) with target i64 (N), (N, C, d1, ...) with target (N, d1, ...) (per pixel, per
 * token), or (C) with a 0-d target, as PyTorch's; reduction none gives target's shape, mean
 * averages over the targets not ignored.
 * A floating target of the logits' shape (and dtype) holds class probabilities, as PyTorch 2.x:
 * -sum_c weight[c] t[c] log_softmax(logits)[c] per sample, t mixed with the uniform distribution
 * by label_smoothing (t (1 - s) + s / C); reduction none gives the logits' shape without C, mean
 * divides the sum by the samples (N d1 ...), not by the weights. ignore_index is refused there
 * (a negative one, which ignores nothing, is allowed), as PyTorch's; the target gets a
 * gradient too. */
em_tensor *em_cross_entropy(const em_tensor *logits, const em_tensor *target, em_cross_entropy_opts o);
em_tensor *em_nll_loss(const em_tensor *log_probs, const em_tensor *target, em_cross_entropy_opts o);
em_tensor *em_mse_loss(const em_tensor *input, const em_tensor *target, em_reduction r);
em_tensor *em_l1_loss(const em_tensor *input, const em_tensor *target, em_reduction r);
em_tensor *em_bce_with_logits(const em_tensor *logits, const em_tensor *target, em_reduction r);
/* PyTorch's losses of the same names; input and target have one shape unless said otherwise,
 * reduction none keeps it. All are composed of ops with CUDA kernels. */
typedef struct {
    em_reduction reduction;
    const em_tensor *weight;     /* NULL, or broadcast with input: each element's weight */
    const em_tensor *pos_weight; /* with logits only: NULL, or broadcast with target (often (C)):
                                    the positive term's weight */
} em_bce_opts;
/* on probabilities in [0, 1] (outside gives NaN): each log clamped at -100, the gradient
 * PyTorch's (em_binary_cross_entropy_elementwise) */
em_tensor *em_binary_cross_entropy(const em_tensor *input, const em_tensor *target,
                                   em_bce_opts o);
/* (1 - t) x + (1 + (pos_weight - 1) t) softplus(-x), stable for any x; em_bce_with_logits is
 * this without weights */
em_tensor *em_binary_cross_entropy_with_logits(const em_tensor *logits, const em_tensor *target,
                                               em_bce_opts o);
/* 0.5 d^2 / beta where d = |input - target| < beta, else d - 0.5 beta (beta >= 0; 0: l1) */
em_tensor *em_smooth_l1_loss(const em_tensor *input, const em_tensor *target, em_reduction r,
                             double beta);
/* 0.5 d^2 where d < delta, else delta (d - 0.5 delta) (delta > 0) */
em_tensor *em_huber_loss(const em_tensor *input, const em_tensor *target, em_reduction r,
                         double delta);
/* input log-probabilities; target probabilities, or log-probabilities when log_target:
 * t (log t - input) (0 where t = 0) or exp(t) (t - input); batchmean divides the sum by the first
 * dim, PyTorch's recommended reduction (mean divides by every element). The gradient with
 * respect to a target of 0 is ember's choice: -input (t log t's gradient taken as 0 there, its
 * value's limit), where PyTorch gives NaN (xlogy's t / t); elsewhere log t + 1 - input, as
 * PyTorch's. */
em_tensor *em_kl_div(const em_tensor *input, const em_tensor *target, em_reduction r,
                     bool log_target);
/* x1 and x2 broadcast; x . y / (max(|x|, eps) max(|y|, eps)) along dim (PyTorch 2.x's order;
 * eps 0: 1e-8) -> the broadcast shape without dim */
em_tensor *em_cosine_similarity(const em_tensor *x1, const em_tensor *x2, int dim, double eps);
/* the p-norm of x1 - x2 + eps along the last dim (p 0 counts non-zeros, as vector_norm; PyTorch's
 * defaults p 2, eps 1e-6) */
em_tensor *em_pairwise_distance(const em_tensor *x1, const em_tensor *x2, double p, double eps,
                                bool keepdim);
/* x1, x2 (N, D) or (D), target of 1 or -1 (N) or () in their dtype: 1 - cos where target is 1,
 * max(0, cos - margin) where it is -1 (cos with 1e-12 added to each squared norm) */
em_tensor *em_cosine_embedding_loss(const em_tensor *x1, const em_tensor *x2,
                                    const em_tensor *target, double margin, em_reduction r);
/* max(0, -target (x1 - x2) + margin), all three of one shape */
em_tensor *em_margin_ranking_loss(const em_tensor *x1, const em_tensor *x2,
                                  const em_tensor *target, double margin, em_reduction r);

/* ---- initialisation (in place, no grad), PyTorch's formulas ---- */
typedef enum { EM_FAN_IN = 0, EM_FAN_OUT } em_fan_mode;
em_status em_init_kaiming_uniform_(em_tensor *t, double a, em_fan_mode mode, em_generator *gen);
em_status em_init_kaiming_normal_(em_tensor *t, double a, em_fan_mode mode, em_generator *gen);
/* xavier: gain 0 takes the default 1 */
em_status em_init_xavier_uniform_(em_tensor *t, double gain, em_generator *gen);
em_status em_init_xavier_normal_(em_tensor *t, double gain, em_generator *gen);
em_status em_init_uniform_(em_tensor *t, double low, double high, em_generator *gen);

#ifdef __cplusplus
}
#endif

#endif
