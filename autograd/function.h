/* Custom autograd functions (PyTorch's torch.autograd.Function): an op of the user's own, with
 * its forward and its backward written in C, that takes part in the tape like a built-in op.
 *
 *     // y = x^3 with the rule dy/dx = 3 x^2
 *     static em_tensor *cube_forward(em_function_ctx *ctx, em_tensor *const *in, int n)
 *     {
 *         em_function_save(ctx, in[0]);                // for backward
 *         return em_pow_scalar(in[0], 3);              // a new reference
 *     }
 *     static em_status cube_backward(em_function_ctx *ctx, const em_tensor *g, em_tensor **gin)
 *     {
 *         em_tensor *x = em_function_saved(ctx, 0);
 *         gin[0] = em_mul(g, em_mul_scalar(em_mul(x, x), 3)); // (x's shape)
 *         return gin[0] ? EM_OK : em_error_status();
 *     }
 *     static const em_function cube = {.name = "cube", .forward = cube_forward,
 *                                      .backward = cube_backward};
 *     em_tensor *y = em_function_apply(&cube, NULL, 0, (em_tensor *[]){x}, 1);
 *
 * forward runs with grad mode off (what it computes is not recorded) and under the caller's
 * autocast region, so the ember ops inside it cast as they would outside; it returns one new
 * tensor (an input handed back as it is must be em_retain()ed: one that is not is refused,
 * naming the function, rather than released as the caller's). A function that declares
 * cast_inputs (PyTorch's custom_fwd(cast_inputs=...)) instead runs, inside an autocast region,
 * on its float inputs cast to cast_dtype with autocast off (the casts are recorded, so each
 * input's gradient comes back in its own dtype); outside a region its inputs are as given. When
 * grad mode is on and an input requires grad, one node named fn->name is recorded on the output;
 * em_backward calls backward with the output's gradient (the output's shape and dtype), grad
 * mode off and autocast as forward ran (PyTorch's custom_bwd: a bf16 activation saved beside an
 * f32 weight meets it as binary ops do there), and backward sets grad_in[i] to the gradient of
 * input i
 * (a temporary of the current scope, as ops return them; inputs[i]'s shape; another float dtype
 * is cast to the input's) or leaves it NULL (no gradient: zero). A gradient of the wrong shape
 * fails em_backward with a message naming the function and the input. Inside em_checkpoint the
 * function is recomputed like any op. Check a function's backward with em_gradcheck. */
#ifndef EMBER_AUTOGRAD_FUNCTION_H
#define EMBER_AUTOGRAD_FUNCTION_H

#include "ember/tensor/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define EM_FUNCTION_MAX_SAVED 8

typedef struct em_function_ctx em_function_ctx;

typedef struct {
    const char *name; /* names the node in errors, anomaly reports and the profiler */
    em_tensor *(*forward)(em_function_ctx *ctx, em_tensor *const *inputs, int n);
    em_status (*backward)(em_function_ctx *ctx, const em_tensor *grad_out, em_tensor **grad_in);
    bool cast_inputs;  /* under autocast: run on float inputs cast to cast_dtype, autocast off */
    em_dtype cast_dtype; /* EM_F32 (0) unless said */
} em_function;

/* Runs fn on the n inputs (none NULL); params_size bytes at params (not NULL when params_size
 * is not 0) are copied into the context first (em_function_params), for the function's settings
 * and what forward wants to leave for backward. Returns the output, or NULL with an error. fn
 * must outlive the graph. */
em_tensor *em_function_apply(const em_function *fn, const void *params, size_t params_size,
                             em_tensor *const *inputs, int n);

/* In forward: keeps t for backward (at most EM_FUNCTION_MAX_SAVED, the output included: what is
 * kept is an alias outside the graph, so saving the output makes no cycle). */
em_status em_function_save(em_function_ctx *ctx, const em_tensor *t);
/* In backward: the i-th tensor forward saved (borrowed), or NULL with an error. */
em_tensor *em_function_saved(const em_function_ctx *ctx, int i);
/* The context's copy of the params given to em_function_apply (NULL when none), writable. */
void *em_function_params(em_function_ctx *ctx);
/* Whether input i gets a gradient (it requires grad and grad mode was on): backward can skip the
 * others. */
bool em_function_needs_input_grad(const em_function_ctx *ctx, int i);

#ifdef __cplusplus
}
#endif

#endif
