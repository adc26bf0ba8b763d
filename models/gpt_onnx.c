/* A GPT as an ONNX graph: token ids (B, T) i64 -> logits (B, T, vocab), T dynamic up to
 * block_size. Gather of the token embedding, the first T rows of the position embedding (a Slice
 * by the ids' length), each block through its TransformerEncoderLayer mapping, ln_f, and the LM
 * head as a MatMul by the token embedding's transpose (the tied weight held once). Registered
 * with em_onnx_register when em_gpt first makes a model. */
#include <stdio.h>
#include <string.h>

#include "export/onnx.h"
#include "models/gpt_internal.h"

#define VALUE_LEN 256

/* Adds wpe.weight[:T] to the token embeddings (current value), T the length of ids (B, T). */
static em_status add_positions(em_onnx_builder *b, const em_module *wpe, const char *ids)
{
    char tok[VALUE_LEN];
    strcpy(tok, em_onnx_value(b));
    const char *table = em_onnx_initializer(b, "wpe.weight", wpe->params[0].value);
    em_tensor *zero = em_zeros(EM_SHAPE(1), EM_I64);
    const char *first = zero ? em_onnx_initializer(b, "zero", zero) : NULL;
    em_release(zero);
    if (!table || !first)
        return em_error_status();
    em_onnx_attr se[] = {{.name = "start", .kind = EM_ONNX_ATTR_INT, .i = 1},
                         {.name = "end", .kind = EM_ONNX_ATTR_INT, .i = 2}};
    const char *shape_in[] = {ids};
    if (em_onnx_node(b, "Shape", shape_in, 1, se, 2) != EM_OK) // [T]
        return em_error_status();
    const char *slice[] = {table, first, em_onnx_value(b), first}; /* rows 0..T of axis 0 */
    const char *add[2] = {tok, NULL};
    if (em_onnx_node(b, "Slice", slice, 4, NULL, 0) != EM_OK) // (T, E)
        return em_error_status();
    add[1] = em_onnx_value(b);
    return em_onnx_node(b, "Add", add, 2, NULL, 0); // (B, T, E)
}

/* logits = x wte^T: (B, T, E) -> (B, T, vocab) */
static em_status lm_head(em_onnx_builder *b, const em_module *wte)
{
    char x[VALUE_LEN];
    strcpy(x, em_onnx_value(b));
    const char *w = em_onnx_initializer(b, "wte.weight", wte->params[0].value); /* the tied one */
    const int64_t swap[] = {1, 0};
    em_onnx_attr perm = {.name = "perm", .kind = EM_ONNX_ATTR_INTS, .ints = swap, .n_ints = 2};
    const char *in[] = {w};
    if (!w || em_onnx_node(b, "Transpose", in, 1, &perm, 1) != EM_OK)
        return em_error_status();
    const char *mm[] = {x, em_onnx_value(b)};
    return em_onnx_node(b, "MatMul", mm, 2, NULL, 0);
}

static em_status gpt_export(em_onnx_builder *b, const em_module *m, const char *layer)
{
    (void)layer;
    char ids[VALUE_LEN];
    strcpy(ids, em_onnx_value(b));
    em_module *wte = em_module_child(m, "wte"), *wpe = em_module_child(m, "wpe");
    em_module *blocks = em_module_child(m, "h"), *ln_f = em_module_child(m, "ln_f");
    if (!wte || !wpe || !blocks || !ln_f || em_onnx_child(b, wte, "wte") != EM_OK ||
        add_positions(b, wpe, ids) != EM_OK) /* the embedding dropout is off in eval */
        return em_error_status();
    for (int l = 0; l < blocks->n_children; l++) {
        char name[32];
        snprintf(name, sizeof name, "h.%d", l);
        if (em_onnx_child(b, blocks->children[l].module, name) != EM_OK)
            return em_error_status();
    }
    return em_onnx_child(b, ln_f, "ln_f") == EM_OK ? lm_head(b, wte) : em_error_status();
}

void em_gpt_onnx_register(const em_module_type *type)
{
    em_onnx_register(type, gpt_export); /* the same mapping again: a no-op */
}
