/* A U-Net denoiser trained under bf16 autocast with no module type of its own: GroupNorm,
 * ConvTranspose2d and skip connections (em_concat_skip) from the library's layers, so the whole
 * model is saved in one file that unet_export.c loads with no registration.
 *
 *   unet_denoiser DIR
 *
 * Makes noisy 16x16 images of smooth patterns, trains the U-Net to give back the clean image
 * (MSE) with em_trainer under bf16 autocast, printing each epoch's training and validation loss
 * and the noisy input's own loss, then writes DIR/unet.safetensors (the model), DIR/sample.bin
 * (one noisy image, f32 (1, 1, 16, 16)) and prints the checksum of the model's output on that
 * image. Exits 1 with ember's message on any error. */
#include <ember/ember.h>
#include <math.h>
#include <stdio.h>

#define SIDE 16
#define TRAIN 384
#define VAL 64
#define EPOCHS 8

/* n clean images (n, 1, 16, 16): sin(a u + b) cos(c v + d) with each image's own a..d, and
 * their noisy copies (Gaussian, sigma 0.3) into *noisy */
static em_tensor *patterns(int64_t n, em_generator *gen, em_tensor **noisy)
{
    em_scope_begin();
    em_tensor *f = em_uniform(EM_SHAPE(n, 4, 1, 1), EM_F32, 0.2, 0.8, gen);      // (n, 4, 1, 1)
    em_tensor *u = em_reshape(em_arange(0, SIDE, 1, EM_F32), EM_SHAPE(1, 1, SIDE, 1));
    em_tensor *v = em_reshape(em_arange(0, SIDE, 1, EM_F32), EM_SHAPE(1, 1, 1, SIDE));
    em_tensor *p[4];
    for (int k = 0; k < 4; k++)
        p[k] = em_narrow(f, 1, k, 1);                                            // (n, 1, 1, 1)
    em_tensor *rows = em_sin(em_add(em_mul(p[0], u), em_mul_scalar(p[1], 6)));   // (n, 1, 16, 1)
    em_tensor *cols = em_cos(em_add(em_mul(p[2], v), em_mul_scalar(p[3], 6)));   // (n, 1, 1, 16)
    em_tensor *clean = em_mul(rows, cols);                                       // (n, 1, 16, 16)
    em_tensor *noise = em_randn(EM_SHAPE(n, 1, SIDE, SIDE), EM_F32, gen);
    *noisy = em_keep(em_add(clean, em_mul_scalar(noise, 0.3)));
    clean = em_keep(clean);
    em_scope_end();
    return clean;
}

/* conv 3x3 (same size), GroupNorm of 4 groups, SiLU */
static em_module *conv_block(int64_t in, int64_t out)
{
    return em_sequential(3, em_conv2d_layer(in, out, 3, (em_conv2d_layer_opts){.padding = 1}),
                         em_group_norm_layer(4, out, (em_group_norm_opts){0}), em_silu_layer());
}

/* One U-Net level over `in` channels: down by 2, a conv block to `width`, what lies below (or
 * nothing), up by 2 back to `in` channels; the skip joins the level's input to it. */
static em_module *level(int64_t in, int64_t width, em_module *below, int64_t below_out)
{
    em_module *down = em_sequential(2, em_max_pool2d_layer(2, (em_pool2d_layer_opts){0}),
                                    conv_block(in, width));
    if (below)
        down = em_sequential(3, down, below, conv_block(below_out, width));
    em_module *up = em_conv_transpose2d_layer(width, in, 2,
                                              (em_conv_transpose2d_layer_opts){.stride = 2});
    return em_concat_skip(em_sequential(2, down, up), 1); /* -> 2 in channels */
}

static em_module *unet(void)
{
    em_module *bottom = level(16, 32, NULL, 0);        /* 8x8 -> 4x4 and back: 32 channels */
    em_module *middle = level(8, 16, bottom, 2 * 16);  /* 16x16 -> 8x8 and back: 16 */
    return em_sequential(4, conv_block(1, 8), middle, conv_block(2 * 8, 8),
                         em_conv2d_layer(8, 1, 1, (em_conv2d_layer_opts){0}));
}

static em_tensor *mse(void *ctx, const em_tensor *out, const em_tensor *y)
{
    (void)ctx;
    return em_mse_loss(out, y, EM_REDUCTION_MEAN);
}

static void print_epoch(void *ctx, const em_epoch_stats *e)
{
    (void)ctx;
    printf("epoch %d train_loss %.5f val_loss %.5f\n", e->epoch + 1, e->train_loss, e->val_loss);
}

/* The model's eval output on x, summed; NAN with the error set on failure. */
static double output_sum(em_module *net, const em_tensor *x)
{
    em_scope_begin();
    em_module_eval(net);
    bool grad = em_set_grad_enabled(false);
    em_tensor *y = em_sum_all(em_forward(net, x));
    em_set_grad_enabled(grad);
    double s = y ? em_item(y) : NAN;
    em_scope_end();
    return s;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: unet_denoiser DIR\n");
        return 2;
    }
    char model_path[4096], sample_path[4096];
    snprintf(model_path, sizeof model_path, "%s/unet.safetensors", argv[1]);
    snprintf(sample_path, sizeof sample_path, "%s/sample.bin", argv[1]);
    em_manual_seed(1);
    em_generator gen = em_generator_new(2);
    em_tensor *noisy, *val_noisy;
    em_tensor *clean = patterns(TRAIN, &gen, &noisy), *val_clean = patterns(VAL, &gen, &val_noisy);
    em_dataset *train = em_tensor_dataset(noisy, clean), *val = em_tensor_dataset(val_noisy,
                                                                                   val_clean);
    em_module *net = unet();
    em_optim *opt = net ? em_adam(net, (em_adam_opts){.lr = 3e-3}) : NULL;
    em_loader *dl = train ? em_loader_new(train, (em_loader_opts){.batch_size = 32,
                                                                  .shuffle = true}) : NULL;
    em_trainer *t = opt && dl ? em_trainer_new(net, opt, dl, (em_trainer_opts){
        .tech = {.amp = EM_BF16}, .loss = mse, .val = val, .val_batch = VAL}) : NULL;
    em_status st = t ? em_trainer_add_callbacks(t, (em_trainer_callbacks){
        .on_epoch = print_epoch}) : em_error_status();
    if (st == EM_OK) {
        em_tensor *noise_mse = em_mse_loss(val_noisy, val_clean, EM_REDUCTION_MEAN);
        printf("model: %lld parameters; the noisy input's val_loss %.5f\n",
               (long long)em_module_num_params(net), noise_mse ? em_item(noise_mse) : NAN);
        em_release(noise_mse);
        st = em_trainer_fit(t, EPOCHS);
    }
    em_tensor *sample = st == EM_OK ? em_narrow(val_noisy, 0, 0, 1) : NULL; // (1, 1, 16, 16)
    if (sample && (st = em_model_save(net, model_path)) == EM_OK) {
        float v[SIDE * SIDE];
        FILE *f = fopen(sample_path, "wb");
        bool written = f && em_copy_to_host(sample, EM_F32, v) == EM_OK &&
                       fwrite(v, sizeof v, 1, f) == 1;
        if (f)
            written = fclose(f) == 0 && written;
        double s = output_sum(net, sample);
        st = written && !isnan(s) ? EM_OK : em_set_error(EM_ERR_IO, "cannot write %s",
                                                          sample_path);
        if (st == EM_OK)
            printf("saved %s; output sum on the sample %.6f\n", model_path, s);
    }
    if (st != EM_OK)
        fprintf(stderr, "unet_denoiser: %s\n", em_error());
    em_release(sample);
    em_trainer_free(t);
    em_loader_free(dl);
    em_optim_free(opt);
    em_module_free(net);
    em_dataset_free(train);
    em_dataset_free(val);
    em_release(noisy);
    em_release(clean);
    em_release(val_noisy);
    em_release(val_clean);
    return st == EM_OK ? 0 : 1;
}
