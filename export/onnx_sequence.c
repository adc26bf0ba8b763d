/* ONNX LSTM and GRU from ember's recurrent layers: one ONNX node per stacked layer, PyTorch's
 * gate blocks reordered into ONNX's (LSTM i, f, g, o -> i, o, f, c; GRU r, z, n -> z, r, h),
 * input and hidden biases side by side, and GRU's linear_before_reset = 1 (PyTorch's n gate
 * applies r after the hidden projection). batch_first and unbatched inputs are transposed or
 * unsqueezed into ONNX's (T, B, in). */
#include <stdio.h>
#include <string.h>

#include "export/onnx_internal.h"
#include "nn/nn_internal.h"

#define VALUE_LEN 256

static const int lstm_order[] = {0, 3, 1, 2}; /* ONNX i, o, f, c of PyTorch's i, f, g, o */
static const int gru_order[] = {1, 0, 2};     /* ONNX z, r, h of PyTorch's r, z, n */

/* t (G H, ...) with its G gate blocks in ONNX's order and a direction axis: (1, G H, ...) */
static em_tensor *onnx_gates(const em_tensor *t, const int *order, int g)
{
    int64_t h = t->shape[0] / g;
    em_tensor *blocks[4];
    for (int i = 0; i < g; i++)
        blocks[i] = em_narrow(t, 0, order[i] * h, h);
    return em_unsqueeze(em_cat(blocks, g, 0), 0);
}

/* Writes layer l's W (1, G H, in), R (1, G H, H) and B (1, 2 G H) (none without biases); names
 * into names[0..2], NULL where absent. */
static em_status layer_weights(em_onnx_builder *b, const em_rnn_module *r, int l,
                               const char *names[3])
{
    const em_module *m = &r->base;
    int g = r->lstm ? 4 : 3, per = m->n_params / (int)r->o.num_layers, at = l * per;
    const int *order = r->lstm ? lstm_order : gru_order;
    char local[3][32];
    snprintf(local[0], sizeof local[0], "W_l%d", l);
    snprintf(local[1], sizeof local[1], "R_l%d", l);
    snprintf(local[2], sizeof local[2], "B_l%d", l);
    em_scope_begin();
    em_tensor *w = onnx_gates(m->params[at].value, order, g);
    em_tensor *rec = onnx_gates(m->params[at + 1].value, order, g);
    em_tensor *bias = NULL;
    if (per == 4) {
        em_tensor *halves[2] = {onnx_gates(m->params[at + 2].value, order, g),
                                onnx_gates(m->params[at + 3].value, order, g)};
        bias = em_cat(halves, 2, 1);
    }
    names[0] = w ? em_onnx_initializer(b, local[0], w) : NULL;
    names[1] = rec ? em_onnx_initializer(b, local[1], rec) : NULL;
    names[2] = bias ? em_onnx_initializer(b, local[2], bias) : NULL;
    em_scope_end();
    bool ok = names[0] && names[1] && (per == 2 || names[2]);
    return ok ? EM_OK : em_error_status();
}

/* One stacked layer: the current value (T, B, in) -> (T, B, H). */
static em_status rnn_layer(em_onnx_builder *b, const em_rnn_module *r, int l, const char *axis1)
{
    const char *w[3];
    if (layer_weights(b, r, l, w) != EM_OK)
        return em_error_status();
    const char *in[] = {em_onnx_value(b), w[0], w[1], w[2]};
    em_onnx_attr attrs[] = {
        {.name = "hidden_size", .kind = EM_ONNX_ATTR_INT, .i = r->o.hidden_size},
        {.name = "linear_before_reset", .kind = EM_ONNX_ATTR_INT, .i = 1}};
    if (em_onnx_node(b, r->lstm ? "LSTM" : "GRU", in, w[2] ? 4 : 3, attrs,
                     r->lstm ? 1 : 2) != EM_OK) // Y (T, 1, B, H)
        return em_error_status();
    return em_onnx_op(b, "Squeeze", em_onnx_value(b), axis1, NULL);
}

static em_status export_rnn(em_onnx_builder *b, const em_module *m, const char *layer)
{
    (void)layer;
    const em_rnn_module *r = (const em_rnn_module *)m;
    bool unbatched = em_onnx_example(b)->ndim == 2;
    const int64_t one = 1, swap[] = {1, 0, 2};
    const char *axis1 = em_onnx_i64(b, "axis_1", EM_SHAPE(1), &one);
    if (!axis1)
        return em_error_status();
    em_onnx_attr perm = {.name = "perm", .kind = EM_ONNX_ATTR_INTS, .ints = swap, .n_ints = 3};
    if (unbatched) /* (T, in) -> (T, 1, in) */
        em_onnx_op(b, "Unsqueeze", em_onnx_value(b), axis1, NULL);
    else if (r->o.batch_first) /* (B, T, in) -> (T, B, in) */
        em_onnx_op(b, "Transpose", em_onnx_value(b), NULL, &perm);
    for (int l = 0; l < r->o.num_layers; l++) /* dropout between layers is off in eval */
        if (rnn_layer(b, r, l, axis1) != EM_OK)
            return em_error_status();
    if (unbatched)
        return em_onnx_op(b, "Squeeze", em_onnx_value(b), axis1, NULL);
    return r->o.batch_first ? em_onnx_op(b, "Transpose", em_onnx_value(b), NULL, &perm) : EM_OK;
}
EM_ONNX_MAPPING(em_lstm_type, export_rnn);
EM_ONNX_MAPPING(em_gru_type, export_rnn);
