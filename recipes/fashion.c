/* Fashion-MNIST, the data of the mlp, cnn and deepmlp recipes: the IDX files of Debian's
 * fashion-mnist package (or a folder of the same names), their training and test splits. */
#include <stdio.h>

#include "recipes/run.h"

em_dataset *recipe_fashion_mnist(const char *dir, bool train, em_shape sample)
{
    char images[1024], labels[1024];
    const char *split = train ? "train" : "t10k";
    dir = dir ? dir : RECIPE_FASHION_MNIST_DIR;
    snprintf(images, sizeof images, "%s/%s-images-idx3-ubyte.gz", dir, split);
    snprintf(labels, sizeof labels, "%s/%s-labels-idx1-ubyte.gz", dir, split);
    return em_idx_dataset(images, labels, (em_idx_opts){.flat = sample.ndim == 1});
}

em_status recipe_fashion_train_data(const recipe_train_opts *o, int64_t batch, recipe_data *d)
{
    (void)batch; /* an epoch is the whole training split */
    d->train = recipe_fashion_mnist(o->data_dir, true, o->recipe->sample);
    d->val = d->train ? recipe_fashion_mnist(o->data_dir, false, o->recipe->sample) : NULL;
    return d->val ? EM_OK : em_error_status();
}

em_status recipe_fashion_eval_data(const recipe_spec *rc, const char *dir,
                                   const em_module *model, const em_char_vocab *vocab,
                                   recipe_data *d)
{
    (void)model; /* the recipe's own, whose input is its sample */
    (void)vocab;
    d->val = recipe_fashion_mnist(dir, false, rc->sample);
    return d->val ? EM_OK : em_error_status();
}

void recipe_fashion_meta(const recipe_spec *rc, const em_module *model,
                         const em_char_vocab *vocab, recipe_meta *out)
{
    (void)model;
    (void)vocab;
    char shape[96];
    recipe_shape_text(rc->sample, shape, sizeof shape);
    recipe_meta_put(out, "input_shape", "%s", shape);
}
