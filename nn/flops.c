/* FLOP counts read off a traced forward: every module's own FLOPs as its type counts them, and
 * the matrix products of a model (the layers of matmul trait: Linear, Conv1d, Conv2d), their
 * sizes for one sample and the FLOPs of a training step over them. */
#include <math.h>
#include <string.h>

#include "nn/nn_internal.h"

typedef struct {
    em_matmul_layer *out;
    int max, n;
    bool any_params; /* a layer with parameters ran before: its output needs gradients */
} matmul_trace;

static bool is_matmul(const em_module *m)
{
    return m->type->traits & EM_TRAIT_MATMUL;
}

static void record_matmul(em_module *m, const em_tensor *out, void *ctx)
{
    matmul_trace *t = ctx;
    if (!out || !is_matmul(m)) {
        t->any_params |= m->n_params > 0 && m->n_children == 0;
        return;
    }
    const em_tensor *w = m->params[0].value; // (rows, in / groups, kernel...)
    int64_t rows = em_size(w, 0);
    em_matmul_layer l = {.layer = m, .rows = rows, .k = em_numel(w) / rows,
                         .positions = em_numel(out) / em_size(out, 0) / rows,
                         .input_grad = t->any_params};
    if (t->n < t->max)
        t->out[t->n] = l;
    t->n++;
    t->any_params = true;
}

int em_module_matmul_layers(em_module *m, em_shape sample, em_matmul_layer *out, int max)
{
    if (!m || sample.ndim < 0 || sample.ndim >= EM_MAX_DIMS || max < 0 || (max && !out)) {
        em_set_error(EM_ERR_ARG, "em_module_matmul_layers: need a module, a sample shape of at "
                     "most %d dims and room for max >= 0 layers", EM_MAX_DIMS - 1);
        return -1;
    }
    em_shape input = {.ndim = sample.ndim + 1, .d = {1}};
    memcpy(input.d + 1, sample.d, (size_t)sample.ndim * sizeof *input.d);
    matmul_trace t = {.out = out, .max = max};
    return em_module_trace(m, input, record_matmul, &t) == EM_OK ? t.n : -1;
}

double em_matmul_macs(const em_matmul_layer *l)
{
    return (double)l->rows * (double)l->k * (double)l->positions;
}

double em_matmul_train_flops(const em_matmul_layer *l, int n)
{
    if (!em_array_present(l, n, "em_matmul_train_flops", "l", "n"))
        return NAN;
    double flops = 0;
    for (int i = 0; i < n; i++)
        flops += 2 * em_matmul_macs(&l[i]) * (l[i].input_grad ? 3 : 2);
    return flops;
}

static void add_flops(em_module *m, const em_tensor *out, void *ctx)
{
    const em_tensor *x = em_forward_hook_input();
    if (out && x)
        *(double *)ctx += em_module_own_flops(m, x, out);
}

double em_module_flops(em_module *m, em_shape input)
{
    if (!m || input.ndim < 1 || input.ndim > EM_MAX_DIMS) {
        em_set_error(EM_ERR_ARG, "em_module_flops: need a module and an input shape (batch "
                     "first) of 1 to %d dims", EM_MAX_DIMS);
        return -1;
    }
    double flops = 0;
    return em_module_trace(m, input, add_flops, &flops) == EM_OK ? flops : -1;
}
