/* Random tensors: each takes the next ceil(numel / 4) Philox counters of its generator and is
 * filled by the backend's rng_fill, so a seed gives the same tensor on any thread count. */
#include <math.h>

#include "tensor/core_internal.h"

/* Draws into t on its own device: a contiguous t directly, another through a contiguous copy. */
static em_status fill_random(const char *fn, em_tensor *t, em_rng_dist dist, em_rng_params p,
                             em_generator *gen)
{
    if (!em_is_contiguous(t)) {
        em_shape s = em_shape_of(t);
        em_tensor *c = em_tensor_new(fn, &s, t->dtype, t->device);
        em_status st = c ? fill_random(fn, c, dist, p, gen) : em_error_status();
        if (st == EM_OK)
            st = em_copy_(t, c);
        em_release(c);
        return st;
    }
    em_generator *g = gen ? gen : em_default_generator();
    uint64_t seed = __atomic_load_n(&g->seed, __ATOMIC_RELAXED);
    uint64_t offset = em_generator_advance(g, ((uint64_t)em_numel(t) + 3) / 4);
    const em_backend *be = t->storage->be;
    em_arr a = em_tensor_arr(t);
    int rc = be->rng_fill ? be->rng_fill(dist, &p, seed, offset, &a) : EM_KERNEL_UNSUPPORTED;
    em_storage_touch(t->storage);
    return em_kernel_status(rc, fn, t);
}

static em_tensor *random_tensor(const char *fn, em_shape shape, em_dtype dtype, em_rng_dist dist,
                                em_rng_params p, em_generator *gen)
{
    em_tensor *t = em_tensor_new(fn, &shape, dtype, EM_CPU);
    if (t && fill_random(fn, t, dist, p, gen) != EM_OK) {
        em_release(t);
        return NULL;
    }
    return t;
}

/* false with "fn: dtype must be floating: i32" for a valid non-float dtype */
static bool check_float(const char *fn, em_dtype dtype)
{
    if (em_dtype_valid(dtype) && !em_dtype_is_float(dtype)) {
        em_set_error(EM_ERR_ARG, "%s: dtype must be floating: %s", fn, em_dtype_name(dtype));
        return false;
    }
    return true;
}

em_tensor *em_rand(em_shape shape, em_dtype dtype, em_generator *gen)
{
    if (!check_float("em_rand", dtype))
        return NULL;
    return random_tensor("em_rand", shape, dtype, EM_RNG_UNIFORM, (em_rng_params){.high = 1.0},
                         gen);
}

em_tensor *em_randn(em_shape shape, em_dtype dtype, em_generator *gen)
{
    if (!check_float("em_randn", dtype))
        return NULL;
    return random_tensor("em_randn", shape, dtype, EM_RNG_NORMAL, (em_rng_params){.std = 1.0},
                         gen);
}

static bool uniform_ok(const char *fn, em_dtype dtype, double low, double high)
{
    if (!check_float(fn, dtype))
        return false;
    if (!(isfinite(low) && isfinite(high) && low <= high)) {
        em_set_error(EM_ERR_ARG, "%s: need finite low <= high: %g, %g", fn, low, high);
        return false;
    }
    return true;
}

static bool normal_ok(const char *fn, em_dtype dtype, double mean, double std)
{
    if (!check_float(fn, dtype))
        return false;
    if (!(isfinite(mean) && isfinite(std) && std >= 0)) {
        em_set_error(EM_ERR_ARG, "%s: need a finite mean and std >= 0: %g, %g", fn, mean, std);
        return false;
    }
    return true;
}

static bool randint_ok(const char *fn, int64_t low, int64_t high)
{
    if (low < high)
        return true;
    em_set_error(EM_ERR_ARG, "%s: low must be below high: %lld, %lld", fn, (long long)low,
                 (long long)high);
    return false;
}

static bool bernoulli_ok(const char *fn, double p)
{
    if (p >= 0 && p <= 1)
        return true;
    em_set_error(EM_ERR_ARG, "%s: p must be in [0, 1]: %g", fn, p);
    return false;
}

em_tensor *em_uniform(em_shape shape, em_dtype dtype, double low, double high, em_generator *gen)
{
    static const char fn[] = "em_uniform";
    return uniform_ok(fn, dtype, low, high)
               ? random_tensor(fn, shape, dtype, EM_RNG_UNIFORM,
                               (em_rng_params){.low = low, .high = high}, gen)
               : NULL;
}

em_tensor *em_normal(em_shape shape, em_dtype dtype, double mean, double std, em_generator *gen)
{
    static const char fn[] = "em_normal";
    return normal_ok(fn, dtype, mean, std)
               ? random_tensor(fn, shape, dtype, EM_RNG_NORMAL,
                               (em_rng_params){.mean = mean, .std = std}, gen)
               : NULL;
}

em_tensor *em_randint(em_shape shape, em_dtype dtype, int64_t low, int64_t high, em_generator *gen)
{
    static const char fn[] = "em_randint";
    return randint_ok(fn, low, high)
               ? random_tensor(fn, shape, dtype, EM_RNG_RANDINT,
                               (em_rng_params){.low = (double)low, .high = (double)high}, gen)
               : NULL;
}

em_tensor *em_bernoulli(em_shape shape, em_dtype dtype, double p, em_generator *gen)
{
    static const char fn[] = "em_bernoulli";
    return bernoulli_ok(fn, p)
               ? random_tensor(fn, shape, dtype, EM_RNG_BERNOULLI, (em_rng_params){.p = p}, gen)
               : NULL;
}

em_status em_uniform_(em_tensor *t, double low, double high, em_generator *gen)
{
    static const char fn[] = "em_uniform_";
    if (!t)
        return em_set_error(EM_ERR_ARG, "%s: t is NULL", fn);
    return uniform_ok(fn, t->dtype, low, high)
               ? fill_random(fn, t, EM_RNG_UNIFORM, (em_rng_params){.low = low, .high = high}, gen)
               : em_error_status();
}

em_status em_normal_(em_tensor *t, double mean, double std, em_generator *gen)
{
    static const char fn[] = "em_normal_";
    if (!t)
        return em_set_error(EM_ERR_ARG, "%s: t is NULL", fn);
    return normal_ok(fn, t->dtype, mean, std)
               ? fill_random(fn, t, EM_RNG_NORMAL, (em_rng_params){.mean = mean, .std = std}, gen)
               : em_error_status();
}

em_status em_randint_(em_tensor *t, int64_t low, int64_t high, em_generator *gen)
{
    static const char fn[] = "em_randint_";
    if (!t)
        return em_set_error(EM_ERR_ARG, "%s: t is NULL", fn);
    return randint_ok(fn, low, high)
               ? fill_random(fn, t, EM_RNG_RANDINT,
                             (em_rng_params){.low = (double)low, .high = (double)high}, gen)
               : em_error_status();
}

em_status em_bernoulli_(em_tensor *t, double p, em_generator *gen)
{
    static const char fn[] = "em_bernoulli_";
    if (!t)
        return em_set_error(EM_ERR_ARG, "%s: t is NULL", fn);
    return bernoulli_ok(fn, p) ? fill_random(fn, t, EM_RNG_BERNOULLI, (em_rng_params){.p = p}, gen)
                               : em_error_status();
}
