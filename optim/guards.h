/* Stability guards: gradient clipping by norm or by value (PyTorch's semantics), a guard that
 * checks the loss and every gradient each step for inf/NaN, naming the first bad parameter, and
 * rolling z-score detectors of loss and grad-norm spikes. They tell the caller to skip an update
 * and count what they saw, for progress lines and summaries. */
#ifndef EMBER_GUARDS_H
#define EMBER_GUARDS_H

#include "ember/optim/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- clipping; parameters without grad are skipped ---- */

/* The norm of order norm_type (> 0, or INFINITY) of all the grads taken as one vector. */
double em_grad_norm(em_tensor *const *params, int n, double norm_type);
/* Multiplies every grad by max_norm / (total + 1e-6) when that is below 1, and returns total,
 * the norm before clipping. A non-finite total is an EM_ERR_NUMERIC error with the grads left
 * as they are when error_if_nonfinite, else the grads take the NaN (or 0) coefficient as in
 * PyTorch. NAN + an error on bad arguments (max_norm < 0, norm_type <= 0). */
double em_clip_grad_norm(em_tensor *const *params, int n, double max_norm, double norm_type,
                         bool error_if_nonfinite);
double em_clip_grad_norm_module(em_module *m, double max_norm, double norm_type,
                                bool error_if_nonfinite);
double em_clip_grad_norm_optim(em_optim *o, double max_norm, double norm_type,
                               bool error_if_nonfinite);
/* em_clip_grad_norm_optim without waiting for the device: where every grad is on one device in
 * one dtype and that device clips by itself (CUDA), the norm is summed, the coefficient taken and
 * the grads scaled there, so the host never waits for it and a captured step can hold it
 * (train/step_graph.h); *total (NULL: not wanted) becomes the norm as a 0-d f64 tensor on that
 * device. Elsewhere (the CPU, grads on several devices or in several dtypes) it is
 * em_clip_grad_norm_optim with error_if_nonfinite false, and *total a CPU tensor. */
em_status em_clip_grad_norm_optim_device(em_optim *o, double max_norm, double norm_type,
                                         em_tensor **total);
/* Clamps every grad element to [-clip_value, clip_value] (NaN stays NaN). */
em_status em_clip_grad_value(em_tensor *const *params, int n, double clip_value);
em_status em_clip_grad_value_module(em_module *m, double clip_value);

/* ---- outlier detector: a value is an outlier when its z-score against the window of recent
 * values, (value - mean) / std (population std), is above threshold: upward spikes only. ---- */
typedef struct {
    int window;       /* recent values kept; default 100 */
    double threshold; /* default 6 */
    int warmup;       /* values seen before it judges; default 20 (at least 2, at most window) */
} em_outlier_opts;

typedef struct em_outlier em_outlier;
em_outlier *em_outlier_new(em_outlier_opts o); /* NULL + EM_ERR_ARG on bad options */
void em_outlier_free(em_outlier *d);
/* Judges value, then adds it to the window (an outlier too, so a lasting shift stops being
 * flagged once the window has seen it); a non-finite value is flagged and not added. Returns
 * true when value is an outlier. With std 0 any value above the mean is one. */
bool em_outlier_check(em_outlier *d, double value);
double em_outlier_last_z(const em_outlier *d); /* the last judged value's z; 0 while warming up */

/* ---- the step guard ---- */
typedef struct {
    bool loss_outliers;      /* judge the loss with an outlier detector */
    bool grad_norm_outliers; /* judge the total grad 2-norm likewise */
    em_outlier_opts outlier; /* both detectors' settings (zero fields: defaults) */
    bool flag_only;          /* count outliers but do not skip their update */
} em_guard_opts;

typedef struct {
    int64_t steps;          /* em_guard_check calls */
    int64_t skipped;        /* updates it said to skip */
    int64_t nonfinite;      /* steps with an inf/NaN loss or grad */
    int64_t outliers;       /* steps an outlier detector flagged */
    double last_grad_norm;  /* the last step's total grad 2-norm */
    int64_t last_flag_step; /* the step (from 1) last flagged, 0 when none */
    const char *last_reason; /* why that step was flagged, "" when none: "loss is nan",
                              * "grad of '0.weight' is not finite", "loss outlier: ..." */
    const char *bad_param;  /* the first non-finite parameter of that step, or NULL */
} em_guard_report;

typedef struct em_guard em_guard;
/* Guards m's parameters (their dotted names name the culprit); m must outlive the guard. */
em_guard *em_guard_new(em_module *m, em_guard_opts o);
void em_guard_free(em_guard *g);
/* After backward (and em_grad_scaler_unscale), before the update: checks loss (0-d, or NULL to skip
 * it) and every grad for inf/NaN, and feeds the detectors. grad_norm is the grads' total norm
 * if the caller has it (em_grad_norm), or negative to have the guard take the 2-norm in the
 * same pass as its check. *skip says whether to skip this update. Run it before clipping:
 * clipping a non-finite total spreads NaN over every grad, hiding the culprit. With a grad
 * scaler, inf grads are also the scaler's business: early in f16 training they are expected
 * while the scale settles. */
em_status em_guard_check(em_guard *g, const em_tensor *loss, double grad_norm, bool *skip);
em_guard_report em_guard_get_report(const em_guard *g); /* strings live until the next check */

#ifdef __cplusplus
}
#endif

#endif
