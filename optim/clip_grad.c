/* Gradient clipping by total norm (any order) and by value, PyTorch's clip_grad_norm_ and
 * clip_grad_value_, over the backend's norm kernel and in-place elementwise scaling; and by norm
 * on the device alone, where its backend has a clipping kernel. */
#include <math.h>
#include <stdlib.h>

#include "optim/guards_internal.h"
#include "optim/optim_internal.h"
#include "observe/profiler_internal.h"
#include "tensor/tensor_internal.h"

/* The sums of the grads on device dev in dtype dt, in one launch that writes them to a scratch
 * f64 tensor there and one copy to the host; out[i] for each such grad i of params. */
static em_status pow_sums_launch(const char *fn, em_tensor *const *params, int n, double p,
                                 em_device dev, em_dtype dt, double *out)
{
    em_grad_list l;
    em_status st = em_grad_list_make(fn, params, n, dev, dt, &l);
    double *host = st == EM_OK ? malloc((size_t)(l.n > 0 ? l.n : 1) * sizeof *host) : NULL;
    if (st == EM_OK && !host)
        st = em_set_error(EM_ERR_MEMORY, "%s: out of memory", fn);
    em_tensor *sums = st == EM_OK ? em_empty_on(EM_SHAPE(l.n), EM_F64, dev) : NULL;
    if (st == EM_OK && !sums)
        st = em_error_status();
    if (st == EM_OK) {
        const em_backend *be = em_tensor_backend(sums, fn);
        em_array_list arrays = em_grad_list_arrays(&l);
        st = be->norm_pow_sum
                 ? em_kernel_status(be->norm_pow_sum(dt, p, &arrays, em_data_ptr(sums)), fn, sums)
                 : em_set_error(EM_ERR_UNSUPPORTED, "%s: not supported on %s", fn,
                                em_device_name(dev));
    }
    if (st == EM_OK)
        st = em_copy_to_host(sums, EM_F64, host);
    for (int k = 0; st == EM_OK && k < l.n; k++)
        out[l.which[k]] = host[k];
    em_release(sums);
    em_grad_list_free(&l);
    free(host);
    return st;
}

/* out[i] = the sum of |g|^p (or max |g|) of params[i]'s grad, 0 without one: one kernel launch
 * and one copy to the host per device and dtype. */
em_status em_grad_pow_sums(const char *fn, em_tensor *const *params, int n, double p,
                           double *out)
{
    bool launched[EM_NDEVICES][EM_NDTYPES] = {{false}};
    em_status st = EM_OK;
    for (int i = 0; i < n; i++)
        out[i] = 0;
    for (int i = 0; i < n && st == EM_OK; i++) {
        em_tensor *g = params[i] ? params[i]->grad : NULL;
        if (!g || launched[g->device][g->dtype])
            continue;
        launched[g->device][g->dtype] = true;
        st = pow_sums_launch(fn, params, n, p, g->device, g->dtype, out);
    }
    return st;
}

double em_grad_norm_from_sums(const double *sums, int n, double p)
{
    double total = 0;
    for (int i = 0; i < n; i++) {
        if (isinf(p))
            total = sums[i] > total || isnan(sums[i]) ? sums[i] : total;
        else
            total += sums[i];
    }
    return isinf(p) ? total : pow(total, 1.0 / p);
}

static bool check_params(const char *fn, em_tensor *const *params, int n)
{
    if (n < 0 || (n > 0 && !params)) {
        em_set_error(EM_ERR_ARG, "%s: NULL parameters or n < 0 (%d)", fn, n);
        return false;
    }
    return true;
}

static bool check_order(const char *fn, double norm_type)
{
    if (!(norm_type > 0) || (isinf(norm_type) && norm_type < 0)) {
        em_set_error(EM_ERR_ARG, "%s: norm_type must be > 0 or inf, got %g", fn, norm_type);
        return false;
    }
    return true;
}

static em_status total_norm(const char *fn, em_tensor *const *params, int n, double norm_type,
                            double *total)
{
    *total = NAN;
    double *sums = malloc((size_t)(n > 0 ? n : 1) * sizeof *sums);
    if (!sums)
        return em_set_error(EM_ERR_MEMORY, "%s: out of memory", fn);
    em_status st = em_grad_pow_sums(fn, params, n, norm_type, sums);
    if (st == EM_OK)
        *total = em_grad_norm_from_sums(sums, n, norm_type);
    free(sums);
    return st;
}

double em_grad_norm(em_tensor *const *params, int n, double norm_type)
{
    static const char *fn = "em_grad_norm";
    double total = NAN;
    if (check_params(fn, params, n) && check_order(fn, norm_type))
        total_norm(fn, params, n, norm_type, &total);
    return total;
}

/* Every grad through one in-place elementwise op (MUL_SCALAR or CLAMP). */
static em_status map_grads(const char *fn, em_tensor *const *params, int n, em_unary_op op,
                           em_unary_params p)
{
    for (int i = 0; i < n; i++) {
        em_tensor *g = params[i] ? params[i]->grad : NULL;
        if (!g)
            continue;
        const em_backend *be = em_tensor_backend(g, fn);
        if (!be)
            return em_error_status();
        em_arr a = em_tensor_arr(g);
        em_status st = em_kernel_status(be->unary(op, &p, &a, &a), fn, g);
        if (st != EM_OK)
            return st;
    }
    return EM_OK;
}

static double clip(const char *fn, em_tensor *const *params, int n, double max_norm,
                   double norm_type, bool error_if_nonfinite)
{
    double total;
    if (total_norm(fn, params, n, norm_type, &total) != EM_OK)
        return NAN;
    if (!isfinite(total) && error_if_nonfinite) {
        em_set_error(EM_ERR_NUMERIC, "%s: the total norm of order %g of the gradients is %g, so "
                     "they cannot be clipped", fn, norm_type, total);
        return total;
    }
    double coef = max_norm / (total + 1e-6);
    if ((coef < 1 || isnan(coef)) &&
        map_grads(fn, params, n, EM_UNARY_MUL_SCALAR, (em_unary_params){.scalar = coef}) != EM_OK)
        return NAN;
    return total;
}

double em_clip_grad_norm(em_tensor *const *params, int n, double max_norm, double norm_type,
                         bool error_if_nonfinite)
{
    static const char *fn = "em_clip_grad_norm";
    if (!check_params(fn, params, n) || !check_order(fn, norm_type))
        return NAN;
    if (!(max_norm >= 0)) {
        em_set_error(EM_ERR_ARG, "%s: max_norm must be >= 0, got %g", fn, max_norm);
        return NAN;
    }
    bool profiled = EM_PROFILING() && em_prof_begin(EM_PROF_REGION, "clip_grad_norm", NULL, false,
                                                    EM_PHASE_OPTIMIZER, NULL, 0);
    double total = clip(fn, params, n, max_norm, norm_type, error_if_nonfinite);
    if (profiled)
        em_prof_end();
    return total;
}

/* m's parameters as a malloc'd array (*n of them), or NULL + error. */
static em_tensor **module_params(const char *fn, em_module *m, int *n)
{
    if (!m) {
        em_set_error(EM_ERR_ARG, "%s: NULL module", fn);
        return NULL;
    }
    *n = em_module_parameters(m, NULL, 0);
    em_param_ref *refs = calloc((size_t)*n + 1, sizeof *refs);
    em_tensor **ps = calloc((size_t)*n + 1, sizeof *ps);
    if (!refs || !ps) {
        free(refs);
        free(ps);
        em_set_error(EM_ERR_MEMORY, "%s: out of memory", fn);
        return NULL;
    }
    em_module_parameters(m, refs, *n);
    for (int i = 0; i < *n; i++)
        ps[i] = refs[i].value;
    free(refs);
    return ps;
}

double em_clip_grad_norm_module(em_module *m, double max_norm, double norm_type,
                                bool error_if_nonfinite)
{
    int n = 0;
    em_tensor **ps = module_params("em_clip_grad_norm_module", m, &n);
    double total = ps ? em_clip_grad_norm(ps, n, max_norm, norm_type, error_if_nonfinite) : NAN;
    free(ps);
    return total;
}

double em_clip_grad_norm_optim(em_optim *o, double max_norm, double norm_type,
                               bool error_if_nonfinite)
{
    if (!o) {
        em_set_error(EM_ERR_ARG, "em_clip_grad_norm_optim: NULL optimizer");
        return NAN;
    }
    em_tensor **ps = calloc((size_t)o->n_params + 1, sizeof *ps);
    if (!ps) {
        em_set_error(EM_ERR_MEMORY, "em_clip_grad_norm_optim: out of memory");
        return NAN;
    }
    for (int i = 0; i < o->n_params; i++)
        ps[i] = o->params[i].param;
    double total = em_clip_grad_norm(ps, o->n_params, max_norm, norm_type, error_if_nonfinite);
    free(ps);
    return total;
}

/* The one device and dtype of every grad of params: false when they differ or none has one. */
static bool one_device_dtype(em_tensor *const *params, int n, em_device *dev, em_dtype *dt)
{
    bool found = false;
    for (int i = 0; i < n; i++) {
        const em_tensor *g = params[i]->grad;
        if (!g)
            continue;
        if (found && (g->device != *dev || g->dtype != *dt))
            return false;
        *dev = g->device;
        *dt = g->dtype;
        found = true;
    }
    return found;
}

/* Clipping by the backend's kernels on dev, every grad there in dtype dt: the norm into *total. */
static em_status clip_on_device(const char *fn, em_tensor *const *params, int n, double max_norm,
                                double p, em_device dev, em_dtype dt, em_tensor **total)
{
    const em_backend *be = em_backend_get(dev);
    em_grad_list l;
    em_status st = em_grad_list_make(fn, params, n, dev, dt, &l);
    em_tensor *sums = st == EM_OK ? em_empty_on(EM_SHAPE(l.n), EM_F64, dev) : NULL;
    em_tensor *norm = sums ? em_empty_on(EM_SCALAR_SHAPE, EM_F64, dev) : NULL;
    if (st == EM_OK && !norm)
        st = em_error_status();
    if (st == EM_OK) {
        em_array_list arrays = em_grad_list_arrays(&l);
        st = em_kernel_status(be->norm_pow_sum(dt, p, &arrays, em_data_ptr(sums)), fn, sums);
        if (st == EM_OK)
            st = em_kernel_status(be->clip_grad_norm(dt, p, max_norm, em_data_ptr(sums), l.n,
                                                     &arrays, em_data_ptr(norm)), fn, norm);
    }
    if (st == EM_OK)
        st = em_grad_list_write_back(&l, params);
    em_grad_list_free(&l);
    em_release(sums);
    if (st == EM_OK && total)
        *total = norm;
    else
        em_release(norm);
    return st;
}

em_status em_clip_grad_norm_optim_device(em_optim *o, double max_norm, double norm_type,
                                         em_tensor **total)
{
    static const char *fn = "em_clip_grad_norm_optim_device";
    if (total)
        *total = NULL;
    if (!o)
        return em_set_error(EM_ERR_ARG, "%s: NULL optimizer", fn);
    if (!check_order(fn, norm_type))
        return em_error_status();
    if (!(max_norm >= 0))
        return em_set_error(EM_ERR_ARG, "%s: max_norm must be >= 0, got %g", fn, max_norm);
    em_tensor **ps = calloc((size_t)o->n_params + 1, sizeof *ps);
    if (!ps)
        return em_set_error(EM_ERR_MEMORY, "%s: out of memory", fn);
    for (int i = 0; i < o->n_params; i++)
        ps[i] = o->params[i].param;
    bool profiled = EM_PROFILING() && em_prof_begin(EM_PROF_REGION, "clip_grad_norm", NULL, false,
                                                    EM_PHASE_OPTIMIZER, NULL, 0);
    em_device dev = EM_CPU;
    em_dtype dt = EM_F32;
    const em_backend *be = one_device_dtype(ps, o->n_params, &dev, &dt) ? em_backend_get(dev)
                                                                        : NULL;
    em_status st;
    if (be && be->clip_grad_norm && be->norm_pow_sum) {
        st = clip_on_device(fn, ps, o->n_params, max_norm, norm_type, dev, dt, total);
    } else {
        double norm = clip(fn, ps, o->n_params, max_norm, norm_type, false);
        st = isnan(norm) && em_has_error() ? em_error_status() : EM_OK;
        if (st == EM_OK && total && !(*total = em_scalar(norm, EM_F64)))
            st = em_error_status();
    }
    if (profiled)
        em_prof_end();
    free(ps);
    return st;
}

em_status em_clip_grad_value(em_tensor *const *params, int n, double clip_value)
{
    static const char *fn = "em_clip_grad_value";
    if (!check_params(fn, params, n))
        return em_error_status();
    if (!(clip_value >= 0))
        return em_set_error(EM_ERR_ARG, "%s: clip_value must be >= 0, got %g", fn, clip_value);
    return map_grads(fn, params, n, EM_UNARY_CLAMP,
                     (em_unary_params){.min = -clip_value, .max = clip_value});
}

em_status em_clip_grad_value_module(em_module *m, double clip_value)
{
    int n = 0;
    em_tensor **ps = module_params("em_clip_grad_value_module", m, &n);
    em_status st = ps ? em_clip_grad_value(ps, n, clip_value) : em_error_status();
    free(ps);
    return st;
}
