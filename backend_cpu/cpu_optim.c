/* Fused optimizer updates on the CPU: SGD, Adam/AdamW and RMSprop, one pass over a contiguous
 * f32/f64 parameter and its state, in PyTorch's order of operations (computed in double), writing
 * an f32 parameter's bf16 copy under autocast as it goes. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "backend_cpu/cpu_kernels_internal.h"
#include "backend_cpu/cpu_simd_internal.h"

/* Optimizer state is kept normal or 0. Where a gradient is exactly 0 (weights from pixels that
 * are always 0, units behind a dead ReLU) Adam's first moment and a momentum buffer shrink by 0.9
 * a step and are subnormal after about 800 steps; every operation on a subnormal then takes a
 * microcode assist of a hundred cycles or more, and `ember train mlp` (AdamW) ran at a third of
 * its speed from its second epoch on. A state below the smallest normal number becomes 0 instead
 * (PyTorch keeps it): what it would still add to a parameter, lr * 1e-38 / eps at most, is far
 * below the parameter's rounding. */
static inline float normal_f32(float x)
{
    return fabsf(x) < FLT_MIN ? 0.0f : x;
}

static inline double normal_f64(double x)
{
    return fabs(x) < DBL_MIN ? 0.0 : x;
}

/* One element's SGD step; buf (the momentum buffer) is NULL when momentum is 0. */
static inline double sgd_elem(const em_sgd_hparams *h, double p, double g, double *buf)
{
    if (h->weight_decay != 0)
        g += h->weight_decay * p;
    if (buf) {
        *buf = normal_f64(h->first_step ? g : *buf * h->momentum + (1 - h->dampening) * g);
        g = h->nesterov ? g + h->momentum * *buf : *buf;
    }
    return p - h->lr * g;
}

/* The f32 kernels run their loops in vector lanes as wide as the CPU has (AVX-512, AVX2, else
 * SSE2), without contracting a multiply and an add into one FMA, so every lane rounds as
 * PyTorch's scalar f32 code does; a parallel loop hands them blocks of this many elements. */
#define OPTIM_BLOCK 16384

/* low (n) = p rounded to bf16 as em_f32_to_bf16 (nearest even, NaN kept NaN): an f32
 * parameter's copy under autocast, written while the updated block is still in cache. */
EM_WIDEST_LANES static void bf16_block(int64_t n, const float *restrict p, uint16_t *restrict low)
{
    #pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        uint32_t f;
        memcpy(&f, &p[i], sizeof f);
        const uint32_t nearest = (f + 0x7fffu + ((f >> 16) & 1u)) >> 16;
        low[i] = (uint16_t)((f & 0x7fffffffu) > 0x7f800000u ? (f >> 16) | 0x40u : nearest);
    }
}

/* low (n) = p (n) rounded to bf16, in blocks over the threads */
static void bf16_copy(int64_t n, const float *p, uint16_t *low)
{
    #pragma omp parallel for if (n >= EM_CPU_PARALLEL_MIN) num_threads(em_cpu_threads())
    for (int64_t i = 0; i < n; i += OPTIM_BLOCK)
        bf16_block(n - i < OPTIM_BLOCK ? n - i : OPTIM_BLOCK, p + i, low + i);
}

/* f32 SGD in f32 arithmetic (as PyTorch's CPU kernels), with the step's choices turned into
 * factors outside the loop so it vectorizes: b = keep * b + fresh * d; p -= lr * (bm * b + dm * d)
 * gives b = d on the first step and d + momentum * b for nesterov, exactly. */
typedef struct {
    float lr, wd, keep, fresh, bm, dm;
} sgd_f32_factors;

/* n elements of p, g and buf (NULL without momentum) */
EM_WIDEST_LANES_UNFUSED static void sgd_f32_block(const sgd_f32_factors *k, int64_t n,
                                                  float *restrict p, const float *restrict g,
                                                  float *restrict buf)
{
    EM_UNFUSED_BODY
    if (!buf) {
        #pragma omp simd
        for (int64_t i = 0; i < n; i++)
            p[i] -= k->lr * (g[i] + k->wd * p[i]);
        return;
    }
    #pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        float d = g[i] + k->wd * p[i];
        float b = normal_f32(k->keep * buf[i] + k->fresh * d);
        buf[i] = b;
        p[i] -= k->lr * (k->bm * b + k->dm * d);
    }
}

static void sgd_f32(const em_sgd_hparams *h, int64_t n, float *p, const float *g, float *buf,
                    uint16_t *low)
{
    const float mom = (float)h->momentum;
    const sgd_f32_factors k = {
        .lr = (float)h->lr, .wd = (float)h->weight_decay,
        .keep = h->first_step ? 0.0f : mom,
        .fresh = h->first_step ? 1.0f : (float)(1 - h->dampening),
        .bm = h->nesterov ? mom : 1.0f, .dm = h->nesterov ? 1.0f : 0.0f,
    };
    #pragma omp parallel for if (n >= EM_CPU_PARALLEL_MIN) num_threads(em_cpu_threads())
    for (int64_t i = 0; i < n; i += OPTIM_BLOCK) {
        const int64_t len = n - i < OPTIM_BLOCK ? n - i : OPTIM_BLOCK;
        sgd_f32_block(&k, len, p + i, g + i, buf ? buf + i : NULL);
        if (low)
            bf16_block(len, p + i, low + i);
    }
}

static int sgd_array(em_dtype dt, int64_t n, const em_sgd_hparams *h, void *param,
                      const void *grad, void *momentum_buf, uint16_t *low)
{
    if (dt == EM_F64) {
        double *p = param;                // (n)
        const double *g = grad;           // (n)
        double *buf = momentum_buf;       // (n) or NULL
#pragma omp parallel for if (n >= EM_CPU_PARALLEL_MIN) num_threads(em_cpu_threads())
        for (int64_t i = 0; i < n; i++)
            p[i] = sgd_elem(h, p[i], g[i], buf ? &buf[i] : NULL);
        return EM_KERNEL_OK;
    }
    if (dt == EM_F32) {
        sgd_f32(h, n, param, grad, momentum_buf, low);
        return EM_KERNEL_OK;
    }
    return EM_KERNEL_UNSUPPORTED;
}

/* What every element of one Adam step shares. */
typedef struct {
    const em_adam_hparams *h;
    double step_size;        /* lr / (1 - beta1^step) */
    double bias_corr2_sqrt;  /* sqrt(1 - beta2^step) */
} adam_consts;

/* One element's Adam step; vmax is NULL unless amsgrad. */
static inline double adam_elem(const adam_consts *c, double p, double g, double *m, double *v,
                               double *vmax)
{
    const em_adam_hparams *h = c->h;
    if (h->decoupled)
        p *= 1 - h->lr * h->weight_decay;
    else if (h->weight_decay != 0)
        g += h->weight_decay * p;
    *m = normal_f64(*m * h->beta1 + (1 - h->beta1) * g);
    *v = normal_f64(*v * h->beta2 + (1 - h->beta2) * g * g);
    double s = *v;
    if (vmax) {
        *vmax = fmax(*vmax, *v);
        s = *vmax;
    }
    double denom = sqrt(s) / c->bias_corr2_sqrt + h->eps;
    return p - c->step_size * (*m / denom);
}

/* f32 Adam/AdamW without amsgrad in f32 arithmetic with PyTorch's f32 operation order (the
 * first moment as a lerp), the step's choices hoisted so it vectorizes. */
typedef struct {
    float w1, b2, w2, eps, step_size, bc2, decay, l2;
} adam_f32_factors;

/* n elements of p, g, m and v */
EM_WIDEST_LANES_UNFUSED static void adam_f32_block(const adam_f32_factors *k, int64_t n,
                                                   float *restrict p, const float *restrict g,
                                                   float *restrict m, float *restrict v)
{
    EM_UNFUSED_BODY
    #pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        float gi = g[i] + k->l2 * p[i];
        float mi = normal_f32(m[i] + k->w1 * (gi - m[i]));
        float vi = normal_f32(v[i] * k->b2 + k->w2 * gi * gi);
        m[i] = mi;
        v[i] = vi;
        p[i] = p[i] * k->decay - k->step_size * (mi / (sqrtf(vi) / k->bc2 + k->eps));
    }
}

static void adam_f32(const adam_consts *c, int64_t n, float *p, const float *g, float *m,
                     float *v, uint16_t *low)
{
    const em_adam_hparams *h = c->h;
    const adam_f32_factors k = {
        .w1 = (float)(1 - h->beta1), .b2 = (float)h->beta2, .w2 = (float)(1 - h->beta2),
        .eps = (float)h->eps, .step_size = (float)c->step_size,
        .bc2 = (float)c->bias_corr2_sqrt,
        .decay = h->decoupled ? (float)(1 - h->lr * h->weight_decay) : 1.0f,
        .l2 = h->decoupled ? 0.0f : (float)h->weight_decay,
    };
    #pragma omp parallel for if (n >= EM_CPU_PARALLEL_MIN) num_threads(em_cpu_threads())
    for (int64_t i = 0; i < n; i += OPTIM_BLOCK) {
        const int64_t len = n - i < OPTIM_BLOCK ? n - i : OPTIM_BLOCK;
        adam_f32_block(&k, len, p + i, g + i, m + i, v + i);
        if (low)
            bf16_block(len, p + i, low + i);
    }
}

static int adam_array(em_dtype dt, int64_t n, const em_adam_hparams *h, void *param,
                       const void *grad, void *exp_avg, void *exp_avg_sq, void *max_exp_avg_sq,
                       uint16_t *low)
{
    adam_consts c = {
        .h = h,
        .step_size = h->lr / (1 - pow(h->beta1, (double)h->step)),
        .bias_corr2_sqrt = sqrt(1 - pow(h->beta2, (double)h->step)),
    };
    if (dt == EM_F64) {
        double *p = param;                // (n)
        const double *g = grad;           // (n)
        double *m = exp_avg;              // (n)
        double *v = exp_avg_sq;           // (n)
        double *vmax = max_exp_avg_sq;    // (n) or NULL
#pragma omp parallel for if (n >= EM_CPU_PARALLEL_MIN) num_threads(em_cpu_threads())
        for (int64_t i = 0; i < n; i++)
            p[i] = adam_elem(&c, p[i], g[i], &m[i], &v[i], vmax ? &vmax[i] : NULL);
        return EM_KERNEL_OK;
    }
    if (dt == EM_F32 && !max_exp_avg_sq) {
        adam_f32(&c, n, param, grad, exp_avg, exp_avg_sq, low);
        return EM_KERNEL_OK;
    }
    if (dt == EM_F32) {
        float *p = param;                 // (n)
        const float *g = grad;            // (n)
        float *m = exp_avg;               // (n)
        float *v = exp_avg_sq;            // (n)
        float *vmax = max_exp_avg_sq;     // (n)
#pragma omp parallel for if (n >= EM_CPU_PARALLEL_MIN) num_threads(em_cpu_threads())
        for (int64_t i = 0; i < n; i++) {
            double mi = m[i], vi = v[i], vmaxi = vmax ? vmax[i] : 0;
            p[i] = (float)adam_elem(&c, p[i], g[i], &mi, &vi, vmax ? &vmaxi : NULL);
            m[i] = normal_f32((float)mi);
            v[i] = normal_f32((float)vi);
            if (vmax)
                vmax[i] = normal_f32((float)vmaxi);
        }
        if (low)
            bf16_copy(n, p, low);
        return EM_KERNEL_OK;
    }
    return EM_KERNEL_UNSUPPORTED;
}

/* One element's RMSprop step; buf is NULL when momentum is 0, gavg NULL unless centered. */
static inline double rmsprop_elem(const em_rmsprop_hparams *h, double p, double g, double *sq,
                                  double *buf, double *gavg)
{
    if (h->weight_decay != 0)
        g += h->weight_decay * p;
    *sq = normal_f64(*sq * h->alpha + (1 - h->alpha) * g * g);
    double avg;
    if (gavg) {
        /* gavg^2 <= sq: a square average kept 0 takes the average of the gradient with it, or
         * sq - gavg^2 would go negative */
        *gavg = *sq == 0 ? 0 : normal_f64(*gavg * h->alpha + (1 - h->alpha) * g);
        avg = sqrt(*sq - *gavg * *gavg);
    } else {
        avg = sqrt(*sq);
    }
    avg += h->eps;
    if (buf) {
        *buf = normal_f64(*buf * h->momentum + g / avg);
        return p - h->lr * *buf;
    }
    return p - h->lr * (g / avg);
}

static int rmsprop_array(em_dtype dt, int64_t n, const em_rmsprop_hparams *h, void *param,
                          const void *grad, void *square_avg, void *momentum_buf,
                          void *grad_avg, uint16_t *low)
{
    if (dt == EM_F64) {
        double *p = param;                // (n)
        const double *g = grad;           // (n)
        double *sq = square_avg;          // (n)
        double *buf = momentum_buf;       // (n) or NULL
        double *gavg = grad_avg;          // (n) or NULL
#pragma omp parallel for if (n >= EM_CPU_PARALLEL_MIN) num_threads(em_cpu_threads())
        for (int64_t i = 0; i < n; i++)
            p[i] = rmsprop_elem(h, p[i], g[i], &sq[i], buf ? &buf[i] : NULL,
                                gavg ? &gavg[i] : NULL);
        return EM_KERNEL_OK;
    }
    if (dt == EM_F32) {
        float *p = param;                 // (n)
        const float *g = grad;            // (n)
        float *sq = square_avg;           // (n)
        float *buf = momentum_buf;        // (n) or NULL
        float *gavg = grad_avg;           // (n) or NULL
#pragma omp parallel for if (n >= EM_CPU_PARALLEL_MIN) num_threads(em_cpu_threads())
        for (int64_t i = 0; i < n; i++) {
            double sqi = sq[i], bi = buf ? buf[i] : 0, gi = gavg ? gavg[i] : 0;
            p[i] = (float)rmsprop_elem(h, p[i], g[i], &sqi, buf ? &bi : NULL, gavg ? &gi : NULL);
            sq[i] = normal_f32((float)sqi);
            if (buf)
                buf[i] = normal_f32((float)bi);
            if (gavg)
                gavg[i] = sq[i] == 0 ? 0 : normal_f32((float)gi); /* as rmsprop_elem */
        }
        if (low)
            bf16_copy(n, p, low);
        return EM_KERNEL_OK;
    }
    return EM_KERNEL_UNSUPPORTED;
}

/* The state buffer k of array i in l, or NULL where the rule keeps none. */
static void *state(const em_array_list *l, int k, int i)
{
    return l->state[k] ? l->state[k][i] : NULL;
}

/* Array i's bf16 copy to write, or NULL. */
static uint16_t *low_of(const em_array_list *l, int i)
{
    return l->low ? l->low[i] : NULL;
}

/* Copies are written for f32 parameters in bf16 only. */
static bool lows_supported(em_dtype dt, const em_array_list *l)
{
    return !l->low || (dt == EM_F32 && l->low_dtype == EM_BF16);
}

int em_cpu_sgd_update(em_dtype dt, const em_sgd_hparams *h, const em_array_list *l)
{
    int rc = lows_supported(dt, l) ? EM_KERNEL_OK : EM_KERNEL_UNSUPPORTED;
    for (int i = 0; i < l->n && rc == EM_KERNEL_OK; i++)
        rc = sgd_array(dt, l->numel[i], h, l->data[i], l->grad[i], state(l, 0, i), low_of(l, i));
    return rc;
}

int em_cpu_adam_update(em_dtype dt, const em_adam_hparams *h, const em_array_list *l)
{
    int rc = lows_supported(dt, l) ? EM_KERNEL_OK : EM_KERNEL_UNSUPPORTED;
    for (int i = 0; i < l->n && rc == EM_KERNEL_OK; i++)
        rc = adam_array(dt, l->numel[i], h, l->data[i], l->grad[i], state(l, 0, i),
                        state(l, 1, i), state(l, 2, i), low_of(l, i));
    return rc;
}

int em_cpu_rmsprop_update(em_dtype dt, const em_rmsprop_hparams *h, const em_array_list *l)
{
    int rc = lows_supported(dt, l) ? EM_KERNEL_OK : EM_KERNEL_UNSUPPORTED;
    for (int i = 0; i < l->n && rc == EM_KERNEL_OK; i++)
        rc = rmsprop_array(dt, l->numel[i], h, l->data[i], l->grad[i], state(l, 0, i),
                           state(l, 1, i), state(l, 2, i), low_of(l, i));
    return rc;
}
