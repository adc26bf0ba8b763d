/* Metrics: the accuracy of a batch of logits, and a model's mean loss and accuracy over a
 * dataset, in eval mode and without grad. */
#include <math.h>

#include "train/train.h"

em_tensor *em_accuracy(const em_tensor *logits, const em_tensor *target)
{
    if (!logits || !target)
        return NULL;
    char a[64], b[64];
    if (logits->ndim != 2 || target->ndim != 1 || target->shape[0] != logits->shape[0]
        || em_dtype_is_float(target->dtype) || logits->shape[0] == 0) {
        em_set_error(EM_ERR_ARG, "em_accuracy: need logits (N, C) and integer class indices (N) "
                     "with N > 0, not %s and %s %s", em_shape_str(logits, a, sizeof a),
                     em_shape_str(target, b, sizeof b), em_dtype_name(target->dtype));
        return NULL;
    }
    em_tensor *hits = em_eq(em_argmax(logits, 1, false), target);     // (N) bool
    return em_mean_all(em_to_dtype(hits, EM_F32));                     // ()
}

static em_tensor *batch_loss(em_eval_opts o, const em_tensor *output, const em_tensor *y)
{
    if (o.loss)
        return o.loss(o.loss_ctx, output, y);
    return em_cross_entropy(output, y, (em_cross_entropy_opts){0});
}

/* One batch's loss into loss_sum (weighted by its size) and its correct rows into hit_sum (NAN
 * when y holds no class indices). */
static em_status add_batch(em_module *model, em_eval_opts o, const em_batch *b, double *loss_sum,
                           double *hit_sum)
{
    em_tensor *output = em_forward(model, b->x);  // (B, ...)
    em_tensor *loss = batch_loss(o, output, b->y); // ()
    if (!loss)
        return em_error_status();
    double n = (double)em_size(b->x, 0);
    *loss_sum += em_item(loss) * n;
    bool classes = !em_dtype_is_float(b->y->dtype) && output->ndim == 2 && b->y->ndim == 1;
    em_tensor *acc = classes ? em_accuracy(output, b->y) : NULL;
    if (classes && !acc)
        return em_error_status();
    *hit_sum += classes ? (double)llround(em_item(acc) * n) : NAN; /* a count, exactly */
    return EM_OK;
}

em_status em_evaluate(em_module *model, const em_dataset *ds, em_eval_opts opts,
                      em_eval_result *out)
{
    if (!model || !ds || !out || opts.batch < 0)
        return em_set_error(EM_ERR_ARG, "em_evaluate: need a model, a dataset, an output and a "
                            "batch >= 0");
    em_device device = em_module_device(model); /* batches are assembled there */
    em_loader *dl = em_loader_new(ds, (em_loader_opts){.batch_size = opts.batch ? opts.batch
                                                                                : 1000,
                                                       .transforms = opts.transforms,
                                                       .n_transforms = opts.n_transforms,
                                                       .device = device,
                                                       .pin_memory = device != EM_CPU});
    if (!dl)
        return em_error_status();
    bool was_training = model->training;
    bool grad = em_set_grad_enabled(false);
    em_module_eval(model);
    double loss_sum = 0, hit_sum = 0;
    int64_t seen = 0;
    em_status st;
    for (;;) {
        em_batch b;
        em_scope_begin();
        st = em_loader_next(dl, &b);
        if (st == EM_OK)
            st = add_batch(model, opts, &b, &loss_sum, &hit_sum);
        if (st == EM_OK)
            seen += em_size(b.x, 0);
        em_scope_end();
        if (st != EM_OK)
            break;
    }
    em_module_train(model, was_training);
    em_set_grad_enabled(grad);
    em_loader_free(dl);
    if (st != EM_END)
        return st;
    *out = (em_eval_result){.loss = seen ? loss_sum / (double)seen : NAN,
                            .accuracy = seen ? hit_sum / (double)seen : NAN, .samples = seen};
    return EM_OK;
}
