/* Custom autograd functions: the user's forward runs without a graph and one node on its output
 * calls the user's backward, then checks and casts what it handed back. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd_internal.h"
#include "autograd/function.h"

struct em_function_ctx {
    const em_function *fn;
    int n_inputs;
    bool *needs_grad;                        /* (n_inputs) */
    int *refcounts;                          /* (n_inputs) each input's before forward ran */
    em_tensor *saved[EM_FUNCTION_MAX_SAVED]; /* retained aliases */
    int n_saved;
    void *params;                            /* a copy of the caller's, or NULL */
    em_dtype autocast;                       /* the autocast dtype forward ran under (EM_F32:
                                                off); backward runs under it too */
};

static void ctx_free(em_function_ctx *c)
{
    if (!c)
        return;
    for (int i = 0; i < c->n_saved; i++)
        em_release(c->saved[i]);
    free(c->needs_grad);
    free(c->refcounts);
    free(c->params);
    free(c);
}

/* The node's parameter struct: the context it owns. */
typedef struct {
    em_function_ctx *ctx;
} function_params;

static void function_params_release(void *p)
{
    function_params *fp = p;
    ctx_free(fp->ctx);
    fp->ctx = NULL;
}

static em_function_ctx *ctx_new(const em_function *fn, const void *params, size_t params_size,
                                em_tensor *const *inputs, int n)
{
    em_function_ctx *c = calloc(1, sizeof *c);
    size_t slots = n > 0 ? (size_t)n : 1;
    bool ok = c && (c->needs_grad = calloc(slots, sizeof *c->needs_grad)) &&
              (c->refcounts = calloc(slots, sizeof *c->refcounts));
    if (ok && params_size > 0 && (ok = (c->params = malloc(params_size)) != NULL))
        memcpy(c->params, params, params_size);
    if (!ok) {
        ctx_free(c);
        em_set_error(EM_ERR_MEMORY, "em_function_apply: %s: out of memory", fn->name);
        return NULL;
    }
    c->fn = fn;
    c->n_inputs = n;
    c->autocast = em_autocast_dtype();
    bool grad = em_grad_enabled();
    for (int i = 0; i < n; i++) {
        c->needs_grad[i] = grad && inputs[i]->requires_grad;
        c->refcounts[i] = em_tensor_refcount(inputs[i]);
    }
    return c;
}

/* forward hands back a new reference: an input itself is one only when forward retained it
 * (else the caller's reference would be released as the output's); false with an error naming
 * the function. */
static bool output_is_owned(const em_function_ctx *c, const em_tensor *y,
                            em_tensor *const *inputs, int n)
{
    for (int i = 0; i < n; i++)
        if (inputs[i] == y && em_tensor_refcount(y) <= c->refcounts[i]) {
            em_set_error(EM_ERR_STATE, "em_function %s: forward returned input %d itself without "
                         "em_retain; it must return a new reference (em_retain(input) or a new "
                         "tensor)", c->fn->name, i);
            return false;
        }
    return true;
}

/* grad_in[i] as input i takes it: its shape (else an error naming fn and i), its dtype. */
static em_status check_grad(const em_function_ctx *c, const em_tensor *input, int i,
                            em_tensor **g)
{
    if (!em_same_shape(*g, input)) {
        char s1[64], s2[64];
        return em_set_error(EM_ERR_ARG, "em_function %s: backward gave input %d a gradient of "
                            "shape %s; the input is %s", c->fn->name, i,
                            em_shape_str(*g, s1, sizeof s1), em_shape_str(input, s2, sizeof s2));
    }
    if ((*g)->dtype != input->dtype && !(*g = em_to_dtype(*g, input->dtype)))
        return em_error_status();
    return EM_OK;
}

static em_status function_backward(em_node *node, const em_tensor *grad_out, em_tensor **grad_in)
{
    em_function_ctx *c = ((function_params *)node->params)->ctx;
    em_dtype outside = em_autocast_swap(c->autocast);
    em_status st = c->fn->backward(c, grad_out, grad_in);
    em_autocast_swap(outside);
    if (st != EM_OK && !em_has_error())
        st = em_set_error(st, "em_function %s: backward failed", c->fn->name);
    for (int i = 0; i < node->n_inputs && st == EM_OK; i++) {
        if (grad_in[i] && !node->inputs[i])
            grad_in[i] = NULL; /* an input that takes no gradient; the scope frees it */
        else if (grad_in[i])
            st = check_grad(c, node->inputs[i], i, &grad_in[i]);
    }
    return st;
}

static bool valid_call(const em_function *fn, const void *params, size_t params_size,
                       em_tensor *const *inputs, int n)
{
    if (!fn || !fn->name || !fn->forward || !fn->backward) {
        em_set_error(EM_ERR_ARG, "em_function_apply: the function needs a name, a forward and a "
                                 "backward");
        return false;
    }
    if (params_size > 0 && !params) {
        em_set_error(EM_ERR_ARG, "em_function_apply: %s: params is NULL but params_size is %zu",
                     fn->name, params_size);
        return false;
    }
    char who[160];
    snprintf(who, sizeof who, "em_function_apply: %s", fn->name);
    if (!em_array_present(inputs, n, who, "inputs", "n"))
        return false;
    for (int i = 0; i < n; i++)
        if (!inputs[i]) {
            if (!em_has_error())
                em_set_error(EM_ERR_ARG, "em_function_apply: %s: input %d is NULL", fn->name, i);
            return false;
        }
    return true;
}

/* Records the node on y (an alias when forward handed back a tensor already in a graph or a
 * leaf that requires grad); the output, or NULL with an error. */
static em_tensor *record(em_function_ctx *c, em_tensor *y, em_tensor *const *inputs, int n)
{
    em_tensor *out = y;
    if (y->requires_grad || y->node) {
        out = em_alias_of(y);
        em_release(y);
        if (!out) {
            ctx_free(c);
            return NULL;
        }
    }
    function_params p = {c};
    em_node *node = em_node_attach(out, c->fn->name, function_backward, inputs, n, &p, sizeof p);
    if (!node) {
        ctx_free(c);
        em_release(out);
        return NULL;
    }
    node->params_release = function_params_release;
    if (em_anomaly_mode())
        node->input_shapes = em_anomaly_shapes(inputs, n);
    return out;
}

/* ---- declared input dtypes (PyTorch's custom_fwd(cast_inputs=...)) ----
 * Inside an autocast region, a function that declares cast_inputs runs on its float inputs cast
 * to cast_dtype (em_to_dtype, so their gradients come back in their own dtypes) with autocast
 * off, in forward and backward. */
static em_tensor *apply_cast_inputs(const em_function *fn, const void *params,
                                    size_t params_size, em_tensor *const *inputs, int n)
{
    if ((unsigned)fn->cast_dtype >= EM_NDTYPES || !em_dtype_is_float(fn->cast_dtype)) {
        em_set_error(EM_ERR_ARG, "em_function_apply: %s: cast_dtype must be a floating dtype",
                     fn->name);
        return NULL;
    }
    em_tensor **cast = malloc((n > 0 ? (size_t)n : 1) * sizeof *cast);
    if (!cast) {
        em_set_error(EM_ERR_MEMORY, "em_function_apply: %s: out of memory", fn->name);
        return NULL;
    }
    em_scope_begin();
    bool ok = true;
    for (int i = 0; i < n && ok; i++) {
        bool convert = em_dtype_is_float(inputs[i]->dtype) && inputs[i]->dtype != fn->cast_dtype;
        ok = (cast[i] = convert ? em_to_dtype(inputs[i], fn->cast_dtype) : inputs[i]) != NULL;
    }
    em_dtype region = em_autocast_swap(EM_F32);
    em_tensor *y = ok ? em_function_apply(fn, params, params_size, cast, n) : NULL;
    em_autocast_swap(region);
    free(cast);
    return em_scope_return(y);
}

em_tensor *em_function_apply(const em_function *fn, const void *params, size_t params_size,
                             em_tensor *const *inputs, int n)
{
    if (!valid_call(fn, params, params_size, inputs, n))
        return NULL;
    if (fn->cast_inputs && em_autocast_dtype() != EM_F32)
        return apply_cast_inputs(fn, params, params_size, inputs, n);
    em_function_ctx *c = ctx_new(fn, params, params_size, inputs, n);
    if (!c)
        return NULL;
    bool grad = em_set_grad_enabled(false);
    em_tensor *y = fn->forward(c, inputs, n);
    em_set_grad_enabled(grad);
    if (!y && !em_has_error())
        em_set_error(EM_ERR_ARG, "em_function %s: forward returned no tensor", fn->name);
    if (y && !output_is_owned(c, y, inputs, n)) {
        ctx_free(c);
        return NULL;
    }
    if (!y || !em_needs_grad(inputs, n) || !em_dtype_is_float(y->dtype)) {
        ctx_free(c);
        return y;
    }
    if (em_anomaly_mode() && !em_anomaly_check_forward(fn->name, y, inputs, n)) {
        ctx_free(c);
        em_release(y);
        return NULL;
    }
    return record(c, y, inputs, n);
}

em_status em_function_save(em_function_ctx *ctx, const em_tensor *t)
{
    if (!ctx || !t)
        return em_set_error(EM_ERR_ARG, "em_function_save: NULL context or tensor");
    if (ctx->n_saved == EM_FUNCTION_MAX_SAVED)
        return em_set_error(EM_ERR_ARG, "em_function_save: %s: more than %d tensors saved",
                            ctx->fn->name, EM_FUNCTION_MAX_SAVED);
    em_scope_begin(); /* the context holds the only reference, whatever scope is open */
    em_tensor *a = em_retain(em_alias_of(t));
    em_scope_end();
    if (!a)
        return em_error_status();
    ctx->saved[ctx->n_saved++] = a;
    return EM_OK;
}

em_tensor *em_function_saved(const em_function_ctx *ctx, int i)
{
    if (!ctx || i < 0 || i >= ctx->n_saved) {
        em_set_error(EM_ERR_ARG, "em_function_saved: %s: no saved tensor %d (%d saved)",
                     ctx ? ctx->fn->name : "NULL context", i, ctx ? ctx->n_saved : 0);
        return NULL;
    }
    return ctx->saved[i];
}

void *em_function_params(em_function_ctx *ctx)
{
    return ctx ? ctx->params : NULL;
}

bool em_function_needs_input_grad(const em_function_ctx *ctx, int i)
{
    return ctx && i >= 0 && i < ctx->n_inputs && ctx->needs_grad[i];
}
