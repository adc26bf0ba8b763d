/* The gpt recipe: a character-level GPT on the fortunes' text. Random windows of the train split
 * (a sampler with replacement, sized for the run) train it with AdamW (weight decay on matrices
 * only), warm-up and cosine decay to a tenth of the lr, gradient clipping at 1 and the usual
 * techniques, checkpointing per block; the val split's windows give the val loss. The vocabulary
 * and the model's size are saved with it ("gpt.vocab", "gpt.n_layer", ...: what
 * bench/gpt_torch.py, the same run in PyTorch, reads). */
#include <stdio.h>
#include <string.h>

#include "recipes/run.h"

#define VAL_STRIDE 4 /* the val loss reads every 4th block-long window of val */

/* 4 pre-LN blocks of 4 heads, width 128, over 128 characters: 0.8M parameters that train to
 * English-like text (val loss 1.80 nats/char) in 1000 steps of 32 windows at lr 3e-3: 4.1M
 * characters, a few minutes on 2 cores. At 2000 steps of lr 1e-3 the run took three times as
 * long; 1000 steps at 1e-3 reach only 2.02. */
em_gpt_settings recipe_gpt_settings(int64_t vocab_size)
{
    return (em_gpt_settings){.vocab_size = vocab_size, .block_size = 128, .n_layer = 4,
                           .n_head = 4, .n_embd = 128};
}

bool recipe_is_gpt(const em_module *m, em_gpt_settings *c)
{
    bool had_error = em_has_error();
    bool gpt = em_gpt_settings_of(m, c);
    if (!gpt && !had_error)
        em_error_clear();
    return gpt;
}

/* mean cross-entropy of logits (B, T, V) against y (B, T), in nats per character */
static em_tensor *sequence_loss(void *ctx, const em_tensor *logits, const em_tensor *y)
{
    (void)ctx;
    if (!logits || !y)
        return NULL;
    int64_t v = logits->shape[logits->ndim - 1];
    return em_cross_entropy(em_reshape(logits, EM_SHAPE(-1, v)), em_reshape(y, EM_SHAPE(-1)),
                            (em_cross_entropy_opts){0});
}

/* The val loss's samples: every fourth non-overlapping window of the val split (a quarter of
 * it, spread over all of it, so that evaluating costs little next to training). */
static em_dataset *val_windows(const recipe_gpt_text *t, int64_t block)
{
    return em_char_windows_dataset(t->ids + t->n_train, t->n_val, block, VAL_STRIDE * block);
}

/* The run's windows: batch of them per micro-batch, for the run's optimizer updates (--max-steps,
 * else the recipe's) of grad_accum micro-batches each. */
static em_status train_data(const recipe_train_opts *o, int64_t batch, recipe_data *d)
{
    recipe_gpt_text text;
    em_status st = recipe_gpt_text_load(o->data_dir, &text);
    if (st != EM_OK)
        return st;
    int64_t block = recipe_gpt_settings(text.vocab.size).block_size;
    int64_t steps = o->max_steps ? o->max_steps : o->recipe->steps;
    int64_t accum = o->tech.grad_accum > 1 ? o->tech.grad_accum : 1, samples;
    if (!em_size_mul(steps, accum, &samples) || !em_size_mul(samples, batch, &samples))
        st = em_set_error(EM_ERR_ARG, "gpt: %lld steps of %lld micro-batches of %lld samples is "
                          "more samples than fit 64 bits", (long long)steps, (long long)accum,
                          (long long)batch);
    d->vocab = text.vocab;
    d->tokens_per_sample = block;
    d->train = st == EM_OK ? em_char_windows_dataset(text.ids, text.n_train, block, 1) : NULL;
    d->val = d->train ? val_windows(&text, block) : NULL;
    d->sampler = d->val ? em_random_sampler(em_dataset_len(d->train),
                                            (em_random_sampler_opts){.replacement = true,
                                                                     .num_samples = samples})
                        : NULL;
    recipe_gpt_text_free(&text);
    return st != EM_OK ? st : d->sampler ? EM_OK : em_error_status();
}

/* The val windows of dir's text for model, which must have been trained on a text of the same
 * characters (its file's vocabulary). */
static em_status eval_data(const recipe_spec *rc, const char *dir, const em_module *model,
                           const em_char_vocab *vocab, recipe_data *d)
{
    (void)rc;
    em_gpt_settings c;
    if (!recipe_is_gpt(model, &c))
        return em_set_error(EM_ERR_ARG, "gpt: the model is no GPT");
    recipe_gpt_text text;
    em_status st = recipe_gpt_text_load(dir, &text);
    if (st != EM_OK)
        return st;
    if (vocab->size != text.vocab.size ||
        memcmp(vocab->chars, text.vocab.chars, (size_t)vocab->size))
        st = em_set_error(EM_ERR_ARG, "the model was trained on another text (its vocabulary "
                          "differs)");
    d->vocab = text.vocab;
    d->tokens_per_sample = c.block_size;
    d->val = st == EM_OK ? val_windows(&text, c.block_size) : NULL;
    recipe_gpt_text_free(&text);
    return st != EM_OK ? st : d->val ? EM_OK : em_error_status();
}

static em_module *build(const recipe_data *d)
{
    if (!d) {
        em_set_error(EM_ERR_ARG, "gpt: the model's size follows its text (its vocabulary)");
        return NULL;
    }
    return em_gpt(recipe_gpt_settings(d->vocab.size));
}

/* The vocabulary and the model's size. */
static void meta(const recipe_spec *rc, const em_module *model, const em_char_vocab *vocab,
                 recipe_meta *out)
{
    (void)rc;
    em_gpt_settings c = {0};
    recipe_is_gpt(model, &c);
    recipe_meta_put(out, "gpt.vocab", "%.*s", vocab->size, vocab->chars);
    recipe_meta_put(out, "gpt.n_layer", "%d", c.n_layer);
    recipe_meta_put(out, "gpt.n_head", "%lld", (long long)c.n_head);
    recipe_meta_put(out, "gpt.n_embd", "%lld", (long long)c.n_embd);
    recipe_meta_put(out, "gpt.block_size", "%lld", (long long)c.block_size);
}

const recipe_spec recipe_gpt = {
    .name = "gpt", .about = "character-level GPT on the English text of the fortunes package",
    .train_data = train_data, .eval_data = eval_data, .build = build,
    .checkpoint_activations = em_gpt_checkpoint_blocks, .loss = sequence_loss, .val_batch = 64,
    .meta = meta, .language_model = true, .one_pass = true,
    .epochs = 1, .batch = 32, .lr = 3e-3, .optim = "adamw",
    .adamw = {.beta2 = 0.99, .weight_decay = 0.1}, .decay_matrices_only = true,
    .schedule = "warmup-cosine", .warmup_updates = 100, .final_lr_divisor = 10, .clip = 1.0,
    .steps = 1000};
