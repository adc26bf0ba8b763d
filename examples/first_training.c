/* A first training program, the one docs/guide.md walks through: a small MLP learns which of
 * three rings around the origin a point of the plane lies in.
 *
 *   first_training MODEL.safetensors [f32|bf16]
 *
 * Makes the data, trains for EPOCHS epochs (under bf16 autocast when asked), printing each
 * epoch's mean training loss and the validation loss and accuracy, then saves the whole model,
 * loads it back into a new one and evaluates that. Exits 1 with ember's message on any error. */
#include <ember/ember.h>
#include <stdio.h>
#include <string.h>

#define SAMPLES 2000
#define EPOCHS 10

/* n points uniform in the square [-1.5, 1.5)^2, each labelled with its ring: 0 within radius
 * 0.5 of the origin, 1 within radius 1, 2 beyond. */
static em_dataset *rings(int64_t n)
{
    em_scope_begin();
    em_tensor *x = em_uniform(EM_SHAPE(n, 2), EM_F32, -1.5, 1.5, NULL);      // (n, 2)
    em_tensor *r2 = em_sum(em_mul(x, x), (int[]){1}, 1, false);             // (n) radius^2
    em_tensor *y = em_add(em_to_dtype(em_ge(r2, em_scalar(0.25, EM_F32)), EM_I64),
                          em_to_dtype(em_ge(r2, em_scalar(1.0, EM_F32)), EM_I64)); // (n)
    em_tensor *counts = em_scatter_add(em_zeros(EM_SHAPE(3), EM_F32), 0, y,
                                       em_ones(EM_SHAPE(n), EM_F32));           // (3)
    em_dataset *ds = counts ? em_tensor_dataset(x, y) : NULL;
    if (ds)
        printf("data: %lld points, %.0f %.0f %.0f in rings 0 1 2\n", (long long)n,
               em_get(counts, (int64_t[]){0}), em_get(counts, (int64_t[]){1}),
               em_get(counts, (int64_t[]){2}));
    em_scope_end();
    return ds;
}

static em_module *mlp(void)
{
    return em_sequential(5, em_linear_layer(2, 64, true), em_relu_layer(),
                         em_linear_layer(64, 64, true), em_relu_layer(),
                         em_linear_layer(64, 3, true));
}

/* One optimizer step on one batch; its loss goes to *loss_value. */
static em_status train_step(em_module *net, em_optim *opt, const em_batch *b, em_dtype amp,
                            double *loss_value)
{
    em_autocast_begin(amp); /* EM_F32: autocast off */
    em_tensor *logits = em_forward(net, b->x);                                   // (B, 3)
    em_tensor *loss = em_cross_entropy(logits, b->y, (em_cross_entropy_opts){0}); // ()
    em_autocast_end();
    if (!loss || em_backward(loss) != EM_OK)
        return em_error_status();
    *loss_value = em_item(loss);
    em_status st = em_optim_step(opt);
    em_optim_zero_grad(opt);
    return st;
}

/* One pass over the loader; the mean of its batches' losses goes to *mean_loss. */
static em_status train_epoch(em_module *net, em_optim *opt, em_loader *dl, em_dtype amp,
                             double *mean_loss)
{
    double sum = 0;
    int64_t batches = 0;
    for (;;) {
        em_scope_begin(); /* the batch, the activations and the loss die at em_scope_end */
        em_batch b;
        em_status st = em_loader_next(dl, &b); /* EM_END once the epoch is over */
        double loss = 0;
        if (st == EM_OK)
            st = train_step(net, opt, &b, amp, &loss);
        em_scope_end();
        if (st == EM_END)
            break;
        if (st != EM_OK)
            return st;
        sum += loss;
        batches++;
    }
    *mean_loss = sum / (double)batches;
    return EM_OK;
}

static em_status run(const char *model_path, em_dtype amp)
{
    em_manual_seed(1); /* the data, the initial weights and dropout, if any, follow from it */
    em_dataset *all = rings(SAMPLES), *split[2] = {NULL, NULL};
    int64_t lengths[2];
    em_status st = all ? em_split_lengths(SAMPLES, (double[]){0.8, 0.2}, 2, lengths)
                       : em_error_status();
    if (st == EM_OK)
        st = em_random_split(all, lengths, 2, /* seed */ 1, split);
    em_dataset *train = split[0], *val = split[1];

    em_module *net = st == EM_OK ? mlp() : NULL;
    em_optim *opt = net ? em_adamw(net, (em_adam_opts){.lr = 1e-2}) : NULL;
    em_loader *dl = opt ? em_loader_new(train, (em_loader_opts){.batch_size = 32,
                                                                .shuffle = true, .seed = 1})
                        : NULL;
    if (st == EM_OK && !dl)
        st = em_error_status();
    if (st == EM_OK)
        printf("model: %lld parameters\n", (long long)em_module_num_params(net));

    em_eval_result r = {0};
    for (int epoch = 1; epoch <= EPOCHS && st == EM_OK; epoch++) {
        double train_loss = 0;
        st = train_epoch(net, opt, dl, amp, &train_loss);
        if (st == EM_OK)
            st = em_evaluate(net, val, (em_eval_opts){0}, &r);
        if (st == EM_OK)
            printf("epoch %d train_loss %.4f val_loss %.4f val_acc %.4f\n", epoch, train_loss,
                   r.loss, r.accuracy);
    }

    if (st == EM_OK)
        st = em_model_save(net, model_path);
    em_module *loaded = st == EM_OK ? em_model_load(model_path) : NULL;
    if (st == EM_OK && !loaded)
        st = em_error_status();
    if (st == EM_OK)
        st = em_evaluate(loaded, val, (em_eval_opts){0}, &r);
    if (st == EM_OK)
        printf("loaded %s: val_loss %.4f val_acc %.4f\n", model_path, r.loss, r.accuracy);

    em_module_free(loaded);
    em_loader_free(dl);
    em_optim_free(opt);
    em_module_free(net);
    em_dataset_free(val);
    em_dataset_free(train);
    em_dataset_free(all);
    return st;
}

int main(int argc, char **argv)
{
    bool bf16 = argc == 3 && !strcmp(argv[2], "bf16");
    if (argc < 2 || argc > 3 || (argc == 3 && !bf16 && strcmp(argv[2], "f32"))) {
        fprintf(stderr, "usage: %s MODEL.safetensors [f32|bf16]\n", argv[0]);
        return 2;
    }
    if (run(argv[1], bf16 ? EM_BF16 : EM_F32) != EM_OK) {
        fprintf(stderr, "first_training: %s\n", em_error());
        return 1;
    }
    return 0;
}
