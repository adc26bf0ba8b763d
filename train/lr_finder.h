/* The learning-rate range test (Leslie Smith's; PyTorch Lightning's Tuner.lr_find): train a few
 * hundred steps with the learning rate rising exponentially, record the smoothed loss, stop when
 * it diverges, suggest the rate where it falls fastest, and put the run back as it was.
 *
 *   em_lr_find_result r;
 *   if (em_lr_find(trainer, (em_lr_find_opts){.num_iter = 100}, &r) == EM_OK)
 *       em_optim_set_lr(opt, 0, r.suggestion);
 *   em_lr_find_result_free(&r);
 */
#ifndef EMBER_TRAIN_LR_FINDER_H
#define EMBER_TRAIN_LR_FINDER_H

#include "ember/train/train.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    double start_lr;  /* 0: 1e-8 (Lightning's min_lr) */
    double end_lr;    /* 0: 1 (max_lr) */
    int num_iter;     /* optimizer updates at most; 0: 100 (num_training) */
    double beta;      /* the loss's exponential smoothing; 0: 0.98 */
    double diverge;   /* stop once the smoothed loss exceeds this times the best; 0: 4
                         (early_stop_threshold); < 0: never */
} em_lr_find_opts;

typedef struct {
    int n;              /* updates taken (num_iter, or fewer when the loss diverged) */
    double *lr;         /* (n) the learning rate of update i: start (end / start)^(i / num_iter) */
    double *loss;       /* (n) its loss (the mean over its micro-batches) */
    double *smoothed;   /* (n) the smoothed loss, bias-corrected: avg_i / (1 - beta^(i + 1)) */
    double suggestion;  /* em_lr_suggestion of the above; NAN when too few updates */
} em_lr_find_result;

/* Runs the range test on t's model, optimizer and loader (a trainer made with a loader, between
 * optimizer updates), each update through em_trainer_step with every group's lr set first, so
 * t's techniques (autocast, accumulation, clipping, the guard) apply; its scheduler does not
 * move the lr meanwhile, nor does the sweep feed its guard. Afterwards the run is put back as it
 * was: weights, optimizer, scheduler, scaler, averaged model, loader position, generator and
 * counters are restored from a training checkpoint written first to a temporary file (in
 * $TMPDIR, else /tmp; removed), and t's statistics as they were. A loss that is
 * not finite ends the test (it is recorded). *out gets the curve (free it with
 * em_lr_find_result_free), also on an error after the first update. */
em_status em_lr_find(em_trainer *t, em_lr_find_opts o, em_lr_find_result *out);
void em_lr_find_result_free(em_lr_find_result *r);
/* Lightning's suggestion: the finite smoothed losses of updates 10 .. n - 2, their gradient
 * (torch.gradient: central differences, one-sided at the ends), and the lr at its most negative
 * (the first on ties); NAN when fewer than two such losses remain, or with an error when lr or
 * smoothed is NULL with n > 0. */
double em_lr_suggestion(const double *lr, const double *smoothed, int n);

#ifdef __cplusplus
}
#endif

#endif
