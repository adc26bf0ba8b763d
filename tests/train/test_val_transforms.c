/* Validation sees the training loader's deterministic transforms: a model that separates
 * normalised inputs scores 1.0 on validation data that is normalised as training's is, where
 * raw inputs would score 0.5; random augmentation never reaches validation; transforms given
 * for validation replace the loader's. */
#include <criterion/criterion.h>

#include "ember.h"

TestSuite(val_transforms, .init = em_scope_begin, .fini = em_scope_end);

typedef struct {
    em_dataset *ds;
    em_module *model;
    em_optim *optim;
    em_loader *loader;
} run;

/* A custom transform that negates every value: as augmentation, it must stay out of validation. */
static em_status negate(void *ctx, const em_transform_call *call, em_shape in, const void *x,
                        void *out)
{
    (void)ctx;
    (void)call;
    for (int64_t i = 0; i < em_shape_numel(&in); i++)
        ((float *)out)[i] = -((const float *)x)[i];
    return EM_OK;
}

/* Samples x in {3, 1} (mean 2, std 1), class 0 for 3 and 1 for 1; logits [x, -x] of the
 * normalised x pick the class: 1.0 on normalised input, 0.5 on raw input (always class 0). */
static run start(const em_transform *tfs, int n_tfs)
{
    run r;
    em_tensor *x = em_from_data(EM_SHAPE(4, 1), EM_F32, (float[]){3, 1, 3, 1}); // (4, 1)
    em_tensor *y = em_from_data(EM_SHAPE(4), EM_I64, (int64_t[]){0, 1, 0, 1});  // (4)
    r.ds = em_tensor_dataset(x, y);
    r.model = em_linear_layer(1, 2, true);
    em_param_ref ps[2];
    cr_assert_eq(em_module_parameters(r.model, ps, 2), 2);
    em_copy_(ps[0].value, em_from_data(EM_SHAPE(2, 1), EM_F32, (float[]){1, -1}));
    em_copy_(ps[1].value, em_zeros(EM_SHAPE(2), EM_F32));
    r.optim = em_sgd(r.model, (em_sgd_opts){.lr = 1e-9}); /* training leaves the signs alone */
    r.loader = em_loader_new(r.ds, (em_loader_opts){.batch_size = 2, .transforms = tfs,
                                                    .n_transforms = n_tfs});
    cr_assert(r.ds && r.optim && r.loader, "%s", em_error());
    return r;
}

static double val_accuracy(run *r, em_trainer_opts o)
{
    o.val = r->ds;
    em_trainer *t = em_trainer_new(r->model, r->optim, r->loader, o);
    cr_assert_not_null(t, "%s", em_error());
    cr_assert_eq(em_trainer_fit(t, 1), EM_OK, "%s", em_error());
    double acc = em_trainer_get_stats(t).last_epoch.val_acc;
    em_trainer_free(t);
    return acc;
}

static void finish(run *r)
{
    em_loader_free(r->loader);
    em_optim_free(r->optim);
    em_module_free(r->model);
    em_dataset_free(r->ds);
}

Test(val_transforms, validation_is_normalised_as_training_is)
{
    em_transform tfs[2] = {em_transform_normalize(1, (float[]){2}, (float[]){1}),
                           em_transform_custom(negate, NULL, NULL)};
    tfs[1].random = true;
    run r = start(tfs, 2);
    cr_expect_eq(val_accuracy(&r, (em_trainer_opts){0}), 1.0,
                 "the loader's normalisation applies, its augmentation does not");
    finish(&r);
}

Test(val_transforms, given_transforms_replace_the_loaders)
{
    em_transform norm = em_transform_normalize(1, (float[]){2}, (float[]){1});
    run r = start(&norm, 1);
    em_transform none[1] = {{0}};
    cr_expect_eq(val_accuracy(&r, (em_trainer_opts){.val_transforms = none}), 0.5,
                 "no transforms: raw inputs");
    em_transform flip_sign = em_transform_custom(negate, NULL, NULL);
    em_transform both[2] = {norm, flip_sign};
    cr_expect_eq(val_accuracy(&r, (em_trainer_opts){.val_transforms = both,
                                                    .n_val_transforms = 2}), 0.0,
                 "exactly the given ones, in order");
    cr_expect_null(em_trainer_new(r.model, r.optim, r.loader,
                                  (em_trainer_opts){.n_val_transforms = 1}));
    cr_expect_eq(em_error_status(), EM_ERR_ARG);
    em_error_clear();
    finish(&r);
}

Test(val_transforms, random_crop_and_flip_count_as_augmentation)
{
    em_transform crop = em_transform_random_crop(2, 2, 1), flip = em_transform_random_hflip(0);
    em_transform norm = em_transform_normalize(1, (float[]){0}, (float[]){1});
    em_transform custom = em_transform_custom(negate, NULL, NULL);
    cr_expect(em_transform_is_random(&crop) && em_transform_is_random(&flip));
    cr_expect(!em_transform_is_random(&norm) && !em_transform_is_random(&custom));
    custom.random = true;
    cr_expect(em_transform_is_random(&custom));
}
