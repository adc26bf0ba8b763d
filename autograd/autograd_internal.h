/* The tape's node and the helpers every op file uses to record one. Not installed. */
#ifndef EMBER_AUTOGRAD_INTERNAL_H
#define EMBER_AUTOGRAD_INTERNAL_H

#include "autograd/autograd.h"
#include "observe/profiler_internal.h"
#include "tensor/tensor_internal.h"

#define EM_NODE_MAX_SAVED 4

typedef struct em_node em_node;

/* Computes the gradient of each input from grad_out (the output's shape and dtype).
 * grad_in[i] is set to a new tensor with inputs[i]'s shape and dtype, or left NULL when
 * inputs[i] is NULL or needs no grad. Runs with grad mode off. Returns EM_OK or an error. */
typedef em_status (*em_backward_fn)(em_node *node, const em_tensor *grad_out, em_tensor **grad_in);

struct em_node {
    const char *op;          /* the public op's name, for errors and anomaly reports */
    em_backward_fn backward;
    int n_inputs;
    em_tensor **inputs;      /* retained; NULL for an input that needs no grad */
    em_tensor *saved[EM_NODE_MAX_SAVED]; /* retained tensors the rule reads; never the output
                                            itself (save a detached alias of it instead) */
    void *params;            /* a copy of the op's own parameter struct (declared in its file,
                                stored with the node), or NULL for an op without parameters */
    void (*params_release)(void *params); /* releases what params holds (checkpointing) */
    em_shape out_shape;
    em_dtype out_dtype;
    bool released;           /* backward ran and freed what it held */
    char *input_shapes;      /* "[4,3] x [4,3]", recorded in anomaly mode for its reports */
    const char *prof_module; /* the module whose forward made it, while the profiler runs */
    uint32_t prof_session;   /* the profiler run prof_module belongs to */
    /* used by em_backward while it runs */
    em_tensor *grad_accum;
    int pending;
    int refcount;            /* held by the output tensor(s) */
};

/* True when grad mode is on and any of the n inputs requires grad. */
bool em_needs_grad(em_tensor *const *inputs, int n);
/* Attach a new node to out (which then requires grad) with the given inputs (retained when they
 * require grad) and a copy of the op's parameter struct (params_size bytes at params; NULL and 0
 * for none); returns the node for the op to fill saved, or NULL with an error set when out of
 * memory. */
em_node *em_node_attach(em_tensor *out, const char *op, em_backward_fn backward,
                        em_tensor *const *inputs, int n_inputs, const void *params,
                        size_t params_size);
void em_node_release(em_node *node);
/* Release the node's inputs, saved tensors and pending gradient (after its backward ran). */
void em_node_free_held(em_node *node);

/* Sum grad over broadcast dims so it has shape (the reverse of broadcasting). */
em_tensor *em_grad_sum_to(const em_tensor *grad, const em_shape *shape);
/* Add g into *acc (creating it when NULL); *acc holds its own reference to the sum. */
em_status em_grad_accumulate(em_tensor **acc, em_tensor *g);

/* ---- helpers shared by the op files (op_util.c) ----
 * Ops run their work inside a scope of their own and em_keep() the result, so temporaries are
 * released whether or not the caller is in a scope; tensors a node keeps are em_retain()ed. */
int em_norm_dim(int dim, int ndim); /* dim in [0, ndim), or -1 */
/* false, with "fn: not supported on <device>", when a backend entry is missing */
bool em_kernel_present(const void *entry, const char *fn, const em_tensor *t);
/* false, with an error naming fn and both, when a and b differ in dtype or device */
bool em_check_pair(const char *fn, const em_tensor *a, const em_tensor *b);
em_tensor *em_raw_full(const char *fn, const em_shape *s, em_dtype dt, em_device dev, double v);
/* out = in broadcast to out's shape, converting dtype */
em_status em_raw_copy_into(const char *fn, em_tensor *out, const em_tensor *in);
em_tensor *em_raw_unary(const char *fn, em_unary_op op, em_unary_params p, const em_tensor *x);
/* broadcasting; a and b share a dtype; comparisons give bool */
em_tensor *em_raw_binary(const char *fn, em_binary_op op, const em_tensor *a, const em_tensor *b);
/* keepdim reduction over the dims set in mask (bit d = dim d) */
em_tensor *em_raw_reduce(const char *fn, em_reduce_op op, em_reduce_params p, const em_tensor *x,
                         unsigned mask);
/* The reduced dims of t (n 0: all) as a bit mask (bit d = dim d); false with an error naming fn
 * for a dim out of range or repeated. */
bool em_dims_mask(const char *fn, const em_tensor *t, const int *dims, int n, unsigned *mask);
em_shape em_keep_shape(const em_shape *s, unsigned mask); /* s with 1 on the dims in mask */
/* The keepdim result yk (contiguous) without its reduced dims, an alias outside the graph. */
em_tensor *em_drop_dims(const em_tensor *yk, unsigned mask);
/* n indices from the host as an i64 (n) tensor on dev (a temporary of the current scope) */
em_tensor *em_index_on(const int64_t *idx, int64_t n, em_device dev);
/* alias of t with the same geometry, outside the graph */
em_tensor *em_alias_of(const em_tensor *t);
/* The end of an op's own scope: keeps y (NULL passes), ends the scope, returns y. */
em_tensor *em_scope_return(em_tensor *y);
/* The start of op's work for the profiler, called inside the op's own scope (or, for a view,
 * where it records), before the work; em_record ends it. One branch when the profiler is off. */
static inline void em_op_begin(const char *op, const em_tensor *x)
{
    if (EM_PROFILING())
        em_prof_op_begin(op, x);
}
/* Record a node when grad is needed, with a copy of the op's parameter struct (as for
 * em_node_attach), and end the op's profiler event; *node is the node, or NULL when none was
 * needed. false (error set) only when recording failed or, in anomaly mode, when out holds a
 * NaN or Inf. */
bool em_record(em_tensor *out, const char *op, em_backward_fn backward,
               em_tensor *const *inputs, int n_inputs, const void *params, size_t params_size,
               em_node **node);

/* ---- output sizes derived from arguments (output_size.c) ----
 * The sliding windows' for stride, dilation and kernel >= 1 and pads >= 0 (the ops check those
 * first): -1 when the size is below 1 or beyond int64, or when a position the kernels compute
 * (the padded input, the window's span) is, whatever the options (no overflow on the way). */
/* conv and pooling: floor((in + 2 pad - dilation (kernel - 1) - 1) / stride) + 1; with
 * ceil_mode rounded up, where a last partial window starts inside the input or its left pad */
int64_t em_window_outputs(int64_t in, int64_t kernel, int64_t stride, int64_t pad,
                          int64_t dilation, bool ceil_mode);
/* transposed conv: (in - 1) stride - 2 pad + dilation (kernel - 1) + output_padding + 1 */
int64_t em_transposed_outputs(int64_t in, int64_t kernel, int64_t stride, int64_t pad,
                              int64_t dilation, int64_t output_padding);
/* A 4-d convolution weight's kernel (its last two dims) of at least 1x1; false with an error
 * naming the size (PyTorch's rule: a kernel of size 0 computes nothing). */
bool em_check_kernel_size(const char *fn, const em_tensor *w /* (*, *, KH, KW) */);
/* An op that resizes x one dim at a time (dims[0] to sizes[0], then dims[1], ...), each pass a
 * new tensor with scratch_per_position i64s of host scratch per position of its dim: every
 * pass's output and scratch checked with em_checked_elements before the first is made (a later
 * pass's failure must not come after an earlier one took the memory). */
bool em_check_dim_passes(const char *fn, const em_tensor *x, const int *dims,
                         const int64_t *sizes, int n, int64_t scratch_per_position);

/* ---- the dtype of an op's several inputs (op_dtypes.c) ----
 * The binary ops' rule, for every op that takes several tensors: 0-d tensors take the dtype of
 * the first one with dims (with none, the first's); those with dims share one, except inside an
 * autocast region, where float dtypes promote to the widest (em_autocast_promote). Each tensor
 * of another dtype is replaced by its em_to_dtype cast (a temporary of the current scope: its
 * gradient comes back in its own dtype); NULL entries are skipped. false with "fn: dtypes
 * differ: f32 [3] and bf16 [4,3]", each tensor named by names[i] ("self", or "" for none) or,
 * with names NULL, as a list's member ("tensor 1 (f32 [3])"). */
bool em_unify_dtypes(const char *fn, const char *const *names, const em_tensor **ts, int n);

/* ---- index arguments (ops_index.c) ---- */
/* False with "fn: index must be i64, not f32" unless idx holds indices. */
bool em_check_index_dtype(const char *fn, const em_tensor *idx);
/* An index kernel's status; on EM_KERNEL_BAD_INDEX the message names the first index outside
 * [0, bound) (the indices are read on the host only on this error path). */
em_status em_index_kernel_status(int rc, const char *fn, const em_tensor *x,
                                 const em_tensor *idx /* i64 (*) */, int64_t bound);

/* ---- writing along a dim (ops_scatter.c) ---- */
/* self with src (index's shape or larger; NULL: value) written, or added when add, at index
 * along dim; recorded as op, errors naming fn. em_scatter, index_fill and index_put use it. */
em_tensor *em_scatter_op(const char *fn, const char *op, const em_tensor *self, int dim,
                         const em_tensor *index /* i64, self's ndim */, const em_tensor *src,
                         double value, bool add);

/* ---- autocast (autocast.c) ---- */
typedef enum {
    EM_AUTOCAST_LOW, /* run in the region's low dtype: f32 (and other half) inputs are cast */
    EM_AUTOCAST_F32, /* run in f32: f16/bf16 inputs are cast up */
} em_autocast_policy;
/* True when a region is on and one of the n inputs (NULLs skipped) needs a cast under p; a
 * thread-local test when autocast is off. */
bool em_autocast_needed(em_autocast_policy p, const em_tensor *const *ts, int n);
/* Replace each input that needs it by its em_to_dtype cast (a temporary of the current scope);
 * false with an error set when a cast failed. */
bool em_autocast_inputs(em_autocast_policy p, const em_tensor **ts, int n);
/* The policy for a layer's operands (linear, conv2d): f32 leaves (weights, biases, an input
 * batch) stay f32 in the graph and the op casts them itself (em_autocast_weight: an optimizer's
 * parameter takes its kept copy), saving the low copies its backward multiplies with and
 * handing back an f32 grad. Other operands are cast by em_to_dtype. false with an error when a
 * cast failed. */
bool em_autocast_layer_inputs(const em_tensor **ts, int n);
/* t, or a contiguous copy of it in dtype (a temporary of the current scope) when they differ. */
const em_tensor *em_as_dtype_raw(const em_tensor *t, em_dtype dtype);
/* The dtype a binary op between float dtypes a != b runs in under autocast: the wider one. */
em_dtype em_autocast_promote(em_dtype a, em_dtype b);
/* Set this thread's autocast dtype (EM_F32: off) outside the region stack; returns the previous
 * one. Backward turns autocast off while it runs; a checkpoint replays its forward's dtype. */
em_dtype em_autocast_swap(em_dtype dtype);

/* ---- gradient-ready hooks (grad_hooks.c), driven by the engine ----
 * A pass covers one em_backward_grad call: begin (NULL when no hooks are registered or on
 * allocation failure, which sets *st), count every input slot of every collected node, report
 * each slot once its gradient is added in, end with the pass's status (the outermost end runs
 * the backward_done hooks and returns the first error among the status and theirs). */
typedef struct em_hook_pass em_hook_pass;
em_hook_pass *em_hook_pass_begin(em_status *st);
void em_hook_pass_count(em_hook_pass *p, em_tensor *input);
void em_hook_pass_consumed(em_hook_pass *p, em_tensor *input);
em_status em_hook_pass_end(em_hook_pass *p, em_status st);

/* ---- anomaly mode (anomaly.c) ---- */
/* In anomaly mode, outside backward: EM_ERR_NUMERIC (false) when out holds a NaN or Inf. */
bool em_anomaly_check_forward(const char *op, const em_tensor *out, em_tensor *const *inputs,
                              int n_inputs);
/* In anomaly mode: EM_ERR_NUMERIC when one of the grads node's backward produced holds a NaN or
 * Inf; EM_OK otherwise. */
em_status em_anomaly_check_backward(const em_node *node, em_tensor *const *grad_in);
/* "[4,3] x [4,3]" of the non-NULL inputs, malloc'd (NULL when out of memory). */
char *em_anomaly_shapes(em_tensor *const *inputs, int n_inputs);
/* Backward brackets its run (nests): forward checks are skipped inside, gradients are checked. */
void em_anomaly_backward_enter(void);
void em_anomaly_backward_leave(void);

#endif
