/* ONNX graphs of ember's attention layers, batch first, in opset-17 operators: the
 * self-attention of MultiheadAttention (fused in-projection, heads split by Reshape and
 * Transpose, softmax(q k^T / sqrt(D)) v with a causal mask built from the sequence length, so
 * that T stays dynamic) and the TransformerEncoderLayer around it (pre- or post-LN). */
#include <float.h>
#include <math.h>
#include <string.h>

#include "export/onnx_internal.h"
#include "nn/nn_internal.h"

#define VALUE_LEN 256

static em_onnx_attr perm_attr(const int64_t *perm, int n)
{
    return (em_onnx_attr){.name = "perm", .kind = EM_ONNX_ATTR_INTS, .ints = perm, .n_ints = n};
}

/* x (B, T, E) -> qkv (3, B, H, T, D) through in_proj_weight (3E, E) and in_proj_bias (3E) */
static em_status in_projection(em_onnx_builder *b, const em_module *m, int64_t heads)
{
    const em_tensor *w = m->params[0].value;
    int64_t e = w->shape[1];
    em_tensor *wt = em_transpose(w, 0, 1); // (E, 3E)
    const char *wn = wt ? em_onnx_initializer(b, "in_proj_weight_t", wt) : NULL;
    em_release(wt);
    const char *bn = m->n_params > 1 ? em_onnx_initializer(b, "in_proj_bias", m->params[1].value)
                                     : "";
    const int64_t split[] = {0, 0, 3, heads, e / heads}, perm[] = {2, 0, 3, 1, 4};
    const char *shape = em_onnx_i64(b, "qkv_shape", EM_SHAPE(5), split);
    if (!wn || !bn || !shape)
        return em_error_status();
    em_onnx_op(b, "MatMul", em_onnx_value(b), wn, NULL);
    if (*bn)
        em_onnx_op(b, "Add", em_onnx_value(b), bn, NULL);
    em_onnx_op(b, "Reshape", em_onnx_value(b), shape, NULL); // (B, T, 3, H, D)
    em_onnx_attr p = perm_attr(perm, 5);
    return em_onnx_op(b, "Transpose", em_onnx_value(b), NULL, &p);
}

/* scores (B, H, T, T) with key j > query i set to the lowest float (softmax gives them 0, as
 * ember's -inf, while every initializer stays finite); x (B, T, E) gives T. */
static em_status causal_mask(em_onnx_builder *b, const char *x)
{
    char scores[VALUE_LEN], keep[VALUE_LEN];
    strcpy(scores, em_onnx_value(b));
    const char *one = em_onnx_f32(b, "one", 1.0f), *lowest = em_onnx_f32(b, "lowest", -FLT_MAX);
    if (!one || !lowest)
        return em_error_status();
    em_onnx_attr start = {.name = "start", .kind = EM_ONNX_ATTR_INT, .i = 1};
    em_onnx_attr end = {.name = "end", .kind = EM_ONNX_ATTR_INT, .i = 2};
    em_onnx_attr axis = {.name = "axis", .kind = EM_ONNX_ATTR_INT, .i = 0};
    em_onnx_attr lower = {.name = "upper", .kind = EM_ONNX_ATTR_INT, .i = 0};
    em_onnx_attr to_bool = {.name = "to", .kind = EM_ONNX_ATTR_INT, .i = 9};
    const char *in[] = {x};
    em_onnx_attr se[] = {start, end};
    if (em_onnx_node(b, "Shape", in, 1, se, 2) != EM_OK) // [T]
        return em_error_status();
    em_onnx_op(b, "Concat", em_onnx_value(b), em_onnx_value(b), &axis); // [T, T]
    em_onnx_op(b, "Expand", one, em_onnx_value(b), NULL);              // ones (T, T)
    em_onnx_op(b, "Trilu", em_onnx_value(b), NULL, &lower);
    em_onnx_op(b, "Cast", em_onnx_value(b), NULL, &to_bool);
    strcpy(keep, em_onnx_value(b));
    const char *where[] = {keep, scores, lowest};
    return em_onnx_node(b, "Where", where, 3, NULL, 0);
}

/* softmax(q k^T / sqrt(D) (+ causal mask)) v of qkv (3, B, H, T, D) -> (B, H, T, D) */
static em_status attention(em_onnx_builder *b, int64_t head_dim, bool causal, const char *x)
{
    char qkv[VALUE_LEN], q[VALUE_LEN], k[VALUE_LEN];
    strcpy(qkv, em_onnx_value(b));
    const char *idx[3] = {NULL, NULL, NULL};
    const char *local[3] = {"q_index", "k_index", "v_index"};
    for (int64_t i = 0; i < 3; i++)
        idx[i] = em_onnx_i64(b, local[i], EM_SCALAR_SHAPE, &i);
    const char *scale = em_onnx_f32(b, "scale", (float)(1.0 / sqrt((double)head_dim)));
    if (!idx[0] || !idx[1] || !idx[2] || !scale)
        return em_error_status();
    em_onnx_op(b, "Gather", qkv, idx[0], NULL);
    strcpy(q, em_onnx_value(b));
    const int64_t kt[] = {0, 1, 3, 2};
    em_onnx_attr p = perm_attr(kt, 4);
    em_onnx_op(b, "Gather", qkv, idx[1], NULL);
    em_onnx_op(b, "Transpose", em_onnx_value(b), NULL, &p); // k^T (B, H, D, T)
    strcpy(k, em_onnx_value(b));
    em_onnx_op(b, "MatMul", q, k, NULL);
    em_onnx_op(b, "Mul", em_onnx_value(b), scale, NULL); // (B, H, T, T)
    if (causal && causal_mask(b, x) != EM_OK)
        return em_error_status();
    em_onnx_attr last = {.name = "axis", .kind = EM_ONNX_ATTR_INT, .i = -1};
    em_onnx_op(b, "Softmax", em_onnx_value(b), NULL, &last);
    strcpy(k, em_onnx_value(b));
    em_onnx_op(b, "Gather", qkv, idx[2], NULL);
    return em_onnx_op(b, "MatMul", k, em_onnx_value(b), NULL);
}

/* Self-attention x (B, T, E) -> (B, T, E), causal when the layer is. */
static em_status export_mha(em_onnx_builder *b, const em_module *m, const char *layer)
{
    (void)layer;
    const em_mha_options *o = em_module_options(m);
    int64_t e = o->embed_dim, heads = o->num_heads;
    char x[VALUE_LEN];
    strcpy(x, em_onnx_value(b));
    const int64_t merge[] = {0, 0, e}, perm[] = {0, 2, 1, 3};
    const char *shape = em_onnx_i64(b, "merged_shape", EM_SHAPE(3), merge);
    if (!shape || in_projection(b, m, heads) != EM_OK ||
        attention(b, e / heads, o->causal, x) != EM_OK)
        return em_error_status();
    em_onnx_attr p = perm_attr(perm, 4);
    em_onnx_op(b, "Transpose", em_onnx_value(b), NULL, &p); // (B, T, H, D)
    em_onnx_op(b, "Reshape", em_onnx_value(b), shape, NULL); // (B, T, E)
    return em_onnx_child(b, m->children[0].module, "out_proj");
}
EM_ONNX_MAPPING(em_multihead_attention_type, export_mha);

/* Child i of m by its name in PyTorch's TransformerEncoderLayer */
static em_status child(em_onnx_builder *b, const em_module *m, const char *name)
{
    for (int i = 0; i < m->n_children; i++)
        if (!strcmp(m->children[i].name, name))
            return em_onnx_child(b, m->children[i].module, name);
    return em_set_error(EM_ERR_ARG, "em_onnx_export: %s has no child %s", m->type->type_name,
                        name);
}

/* linear2(activation(linear1(current))) */
static em_status feed_forward(em_onnx_builder *b, const em_module *m, bool gelu)
{
    if (child(b, m, "linear1") != EM_OK)
        return em_error_status();
    em_status st = gelu ? em_onnx_gelu(b, false)
                        : em_onnx_op(b, "Relu", em_onnx_value(b), NULL, NULL);
    return st == EM_OK ? child(b, m, "linear2") : st;
}

/* norm_first: x + sa(norm1(x)), then y + ff(norm2(y)); else norm1(x + sa(x)), then
 * norm2(y + ff(y)). Dropouts are off in eval. */
static em_status export_transformer(em_onnx_builder *b, const em_module *m, const char *layer)
{
    (void)layer;
    const em_transformer_options *o = em_module_options(m);
    bool norm_first = o->norm_first;
    char x[VALUE_LEN];
    for (int block = 0; block < 2; block++) {
        strcpy(x, em_onnx_value(b));
        em_status st = norm_first ? child(b, m, block ? "norm2" : "norm1") : EM_OK;
        if (st == EM_OK)
            st = block ? feed_forward(b, m, o->gelu) : child(b, m, "self_attn");
        if (st != EM_OK)
            return st;
        em_onnx_op(b, "Add", x, em_onnx_value(b), NULL);
        if (!norm_first && child(b, m, block ? "norm2" : "norm1") != EM_OK)
            return em_error_status();
    }
    return EM_OK;
}
EM_ONNX_MAPPING(em_transformer_encoder_layer_type, export_transformer);
