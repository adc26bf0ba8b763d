/* The grad scaler for mixed precision, with PyTorch GradScaler's semantics: the loss is
 * multiplied by a scale before backward so that small f16 gradients do not underflow; the
 * gradients are divided by it before the update, which is skipped when any is inf or NaN; the
 * scale halves on such a step and doubles after growth_interval clean steps in a row. */
#ifndef EMBER_GRAD_SCALER_H
#define EMBER_GRAD_SCALER_H

#include "ember/optim/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct em_grad_scaler em_grad_scaler;

typedef struct {
    double init_scale;       /* default 65536 */
    double growth_factor;    /* default 2; > 1 */
    double backoff_factor;   /* default 0.5; in (0, 1) */
    int64_t growth_interval; /* default 2000 */
    bool disabled;           /* every call passes through: scale 1, no checks, no skips */
} em_grad_scaler_opts;

em_grad_scaler *em_grad_scaler_new(em_grad_scaler_opts o); /* NULL + EM_ERR_ARG on bad options */
void em_grad_scaler_free(em_grad_scaler *s);

/* One step, optionally over several micro-batches:
 *   for each micro-batch: em_backward(em_grad_scaler_scale(s, loss))   (loss / N when accumulating)
 *   em_grad_scaler_unscale(s, o);       optional: before clipping or guards, which then see true grads
 *   em_grad_scaler_step(s, o, &stepped); skips the update when a grad was inf or NaN
 *   em_grad_scaler_update(s);           adapts the scale; then em_optim_zero_grad(o)
 * A caller that decides itself to skip the update may call em_grad_scaler_update right after
 * em_grad_scaler_unscale. */

/* loss * scale, differentiable, in loss's dtype (an f16 loss may overflow: the step is then
 * skipped and the scale backs off, as in PyTorch). */
em_tensor *em_grad_scaler_scale(em_grad_scaler *s, const em_tensor *loss);
/* Divides the grads of o's parameters by the scale in place, once per step, and records whether
 * any was inf or NaN (one fused pass per grad). EM_ERR_STATE when called twice for o before
 * em_grad_scaler_update, or after em_grad_scaler_step. */
em_status em_grad_scaler_unscale(em_grad_scaler *s, em_optim *o);
/* Unscales o's grads unless done already, then runs em_optim_step(o) unless a grad was inf or
 * NaN; *stepped (may be NULL) says which. EM_ERR_STATE when called twice before an update. */
em_status em_grad_scaler_step(em_grad_scaler *s, em_optim *o, bool *stepped);
/* The new scale from this step's checks: * backoff_factor after an inf/NaN (growth count reset),
 * else * growth_factor once growth_interval clean steps have followed each other (kept when
 * that would overflow f32). EM_ERR_STATE when no unscale or step ran since the last update. */
em_status em_grad_scaler_update(em_grad_scaler *s);

/* Records that this step's gradients of o hold an inf or NaN although its own check found none
 * (another data-parallel rank's did): em_grad_scaler_step then skips the update and em_grad_scaler_update
 * backs off. EM_ERR_STATE unless em_grad_scaler_unscale ran for o since the last update. */
em_status em_grad_scaler_mark_inf(em_grad_scaler *s, em_optim *o);

double em_grad_scaler_get_scale(const em_grad_scaler *s); /* 1 when disabled */
int64_t em_grad_scaler_growth_tracker(const em_grad_scaler *s); /* clean steps in a row so far */
bool em_grad_scaler_found_inf(const em_grad_scaler *s); /* this step's checks so far found inf/NaN */
int64_t em_grad_scaler_skipped_steps(const em_grad_scaler *s); /* updates skipped since creation */

/* State as named live tensors for checkpoints: "scale" (f32 0-d) and "growth_tracker" (i64
 * 0-d); returns the count (2) and writes up to max entries (-1 with an error when out is NULL
 * with max > 0, or max < 0). Loading copies them in, needing
 * both names and 0-d shapes, changing nothing on a mismatch. */
int em_grad_scaler_state(const em_grad_scaler *s, em_param_ref *out, int max);
em_status em_grad_scaler_load_state(em_grad_scaler *s, const em_param_ref *in, int n);

#ifdef __cplusplus
}
#endif

#endif
