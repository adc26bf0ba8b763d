/* Whole models built from nn/'s layers: GPT, a decoder-only transformer language model, and
 * text generation with it (models/gpt.c, models/gpt_generate.c). */
#ifndef EMBER_MODELS_GPT_H
#define EMBER_MODELS_GPT_H

#include "ember/nn/nn.h"

/* GPT: a decoder-only transformer language model in GPT-2's shape over token ids. Children
 * wte (Embedding vocab -> E), wpe (Embedding block_size -> E), drop, h (a ModuleList of n_layer
 * TransformerEncoderLayers: pre-LN, causal, GELU, feed-forward 4E) and ln_f; the LM head is
 * wte's weight (tied, held once). GPT-2's init: matrices and embeddings N(0, 0.02), out_proj and
 * linear2 weights N(0, 0.02 / sqrt(2 n_layer)), biases 0. em_forward(gpt, idx) = em_gpt_forward
 * without a cache. em_onnx_export writes it from i64 ids (B, T) (models/gpt_onnx.c). */
typedef struct {
    int64_t vocab_size, block_size; /* tokens; the most positions a forward sees */
    int n_layer;
    int64_t n_head, n_embd;
    double dropout;                 /* embeddings, attention weights, residuals, feed-forward */
} em_gpt_settings;
em_module *em_gpt(em_gpt_settings c);
bool em_gpt_settings_of(const em_module *gpt, em_gpt_settings *c); /* false: not a GPT */
extern const em_module_type em_gpt_type; /* the GPT module's type */
/* idx i64 (B, T) -> logits (B, T, vocab). With a cache (from em_gpt_kv_cache_new) the T positions
 * follow the cache's length, their keys and values join it and its length grows by T. */
em_tensor *em_gpt_forward(em_module *gpt, const em_tensor *idx, em_kv_cache *cache);
em_kv_cache *em_gpt_kv_cache_new(const em_module *gpt, int64_t batch); /* block_size positions */
em_status em_gpt_checkpoint_blocks(em_module *gpt); /* each block under em_checkpoint_module */
typedef struct {
    em_sample_opts sample; /* temperature (0: 1) and top_k (0: every token) */
    uint64_t seed;         /* the same seed gives the same tokens */
    bool no_cache;         /* run the whole context (its last block_size tokens) every step */
} em_generate_opts;
/* out (n_new) = tokens sampled one after another, each from the logits of the last position,
 * after prompt (n_prompt >= 1 ids), in eval mode without grad. With the key/value cache a step
 * runs only the new position; when the context outgrows block_size the cache restarts from its
 * last block_size / 2 tokens (learned positions cannot slide), so past that point the tokens
 * differ from no_cache's, which sees the last block_size. */
em_status em_gpt_generate(em_module *gpt, const int64_t *prompt, int64_t n_prompt, int64_t n_new,
                          em_generate_opts o, int64_t *out);

#endif
