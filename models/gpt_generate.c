/* Text generation with a GPT: each new token is sampled (temperature, top-k, a seeded generator)
 * from the logits of the last position. With the key/value cache a step runs the new position
 * only; without it, the whole context again. */
#include <stdlib.h>

#include "models/gpt.h"
#include "nn/nn_internal.h"

/* logits (B, T, V) -> the last position's token, sampled */
static int64_t sample_last(const em_tensor *logits, const em_generate_opts *o, em_generator *gen)
{
    if (!logits)
        return -1;
    em_tensor *last = em_select(em_select(logits, 0, 0), 0, logits->shape[1] - 1); // (V)
    em_tensor *tok = em_sample_logits(last, o->sample, gen);                        // ()
    return tok ? (int64_t)em_item(tok) : -1;
}

/* The next token from the whole context (its last block_size tokens), without a cache. */
static int64_t step_uncached(em_module *m, const int64_t *ctx, int64_t n, int64_t block,
                             const em_generate_opts *o, em_generator *gen)
{
    int64_t from = n > block ? n - block : 0;
    em_tensor *idx = em_from_data(EM_SHAPE(1, n - from), EM_I64, ctx + from);
    return sample_last(em_gpt_forward(m, idx, NULL), o, gen);
}

/* The next token with the cache: the positions not yet in it run; a full cache restarts from
 * the context's last block_size / 2 tokens (learned positions cannot shift). */
static int64_t step_cached(em_module *m, em_kv_cache *cache, const int64_t *ctx, int64_t n,
                           int64_t *in_cache, int64_t block, const em_generate_opts *o,
                           em_generator *gen)
{
    int64_t held = em_kv_cache_len(cache);
    if (n - *in_cache > block) { /* the new positions do not fit behind the cached ones */
        em_kv_cache_reset(cache);
        int64_t keep = n <= block ? n : block / 2 > 0 ? block / 2 : 1;
        *in_cache = n - keep;
        held = 0;
    }
    int64_t from = *in_cache + held;
    em_tensor *idx = em_from_data(EM_SHAPE(1, n - from), EM_I64, ctx + from);
    return sample_last(em_gpt_forward(m, idx, cache), o, gen);
}

em_status em_gpt_generate(em_module *m, const int64_t *prompt, int64_t n_prompt, int64_t n_new,
                          em_generate_opts o, int64_t *out)
{
    em_gpt_settings c;
    if (!em_gpt_settings_of(m, &c))
        return em_error_status();
    if (!prompt || n_prompt < 1 || n_new < 0 || (n_new > 0 && !out))
        return em_set_error(EM_ERR_ARG, "em_gpt_generate: needs a prompt of at least one token "
                            "and n_new >= 0: %lld, %lld", (long long)n_prompt, (long long)n_new);
    for (int64_t i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || prompt[i] >= c.vocab_size)
            return em_set_error(EM_ERR_ARG, "em_gpt_generate: prompt token %lld (at %lld) is "
                                "outside the vocabulary of %lld", (long long)prompt[i],
                                (long long)i, (long long)c.vocab_size);
    int64_t *ctx = malloc((size_t)(n_prompt + n_new) * sizeof *ctx);
    em_kv_cache *cache = o.no_cache ? NULL : em_gpt_kv_cache_new(m, 1);
    if (!ctx || (!o.no_cache && !cache)) {
        free(ctx);
        em_kv_cache_free(cache);
        return em_error_status() != EM_OK ? em_error_status()
                                          : em_set_error(EM_ERR_MEMORY, "em_gpt_generate: out "
                                                         "of memory");
    }
    for (int64_t i = 0; i < n_prompt; i++)
        ctx[i] = prompt[i];
    bool training = m->training, grad = em_set_grad_enabled(false);
    em_module_eval(m);
    em_generator gen = em_generator_new(o.seed);
    int64_t n = n_prompt, in_cache = 0;
    em_status st = EM_OK;
    while (st == EM_OK && n < n_prompt + n_new) {
        em_scope_begin();
        int64_t tok = cache ? step_cached(m, cache, ctx, n, &in_cache, c.block_size, &o, &gen)
                            : step_uncached(m, ctx, n, c.block_size, &o, &gen);
        em_scope_end();
        if (tok < 0) {
            st = em_error_status();
        } else {
            out[n - n_prompt] = tok;
            ctx[n++] = tok;
        }
    }
    em_module_train(m, training);
    em_set_grad_enabled(grad);
    em_kv_cache_free(cache);
    free(ctx);
    return st;
}
