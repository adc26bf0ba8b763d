/* Choosing elements by value: topk (its values are a gather, so they carry the gradient), and
 * sampling: multinomial draws from probability rows and top-k sampling of logits. The choices are
 * made on the host; sampling draws its uniforms from a generator, so it repeats for a seed. */
#include <math.h>
#include <stdlib.h>

#include "autograd/autograd_internal.h"

/* ---- topk ---- */

typedef struct {
    double value;
    int64_t index;
} ranked;

/* NaN ranks above everything, as in PyTorch; ties go to the lower index. */
static int rank_order(const ranked *a, const ranked *b, bool largest)
{
    bool na = isnan(a->value), nb = isnan(b->value);
    if (na != nb)
        return na ? -1 : 1;
    if (!na && a->value != b->value)
        return (a->value > b->value) == largest ? -1 : 1;
    return (a->index > b->index) - (a->index < b->index);
}

static int by_largest(const void *a, const void *b)
{
    return rank_order(a, b, true);
}

static int by_smallest(const void *a, const void *b)
{
    return rank_order(a, b, false);
}

/* The indices (i64, t's shape with k along d) of the k largest or smallest along d, sorted. */
static em_tensor *topk_indices(const char *fn, const em_tensor *t /* (*) */, int64_t k, int d,
                               bool largest)
{
    int64_t n = t->shape[d], outer = 1, inner = 1, numel = em_numel(t);
    for (int i = 0; i < d; i++)
        outer *= t->shape[i];
    for (int i = d + 1; i < t->ndim; i++)
        inner *= t->shape[i];
    double *v = malloc((size_t)(numel > 0 ? numel : 1) * sizeof *v);
    ranked *row = malloc((size_t)(n > 0 ? n : 1) * sizeof *row);
    int64_t *idx = malloc((size_t)(outer * k * inner > 0 ? outer * k * inner : 1) * sizeof *idx);
    em_tensor *out = NULL;
    if (v && row && idx && em_copy_to_host(t, EM_F64, v) == EM_OK) {
        for (int64_t o = 0; o < outer; o++)
            for (int64_t i = 0; i < inner; i++) {
                for (int64_t j = 0; j < n; j++)
                    row[j] = (ranked){v[(o * n + j) * inner + i], j};
                qsort(row, (size_t)n, sizeof *row, largest ? by_largest : by_smallest);
                for (int64_t p = 0; p < k; p++)
                    idx[(o * k + p) * inner + i] = row[p].index;
            }
        em_shape s = em_shape_of(t);
        s.d[d] = k;
        out = em_from_data(s, EM_I64, idx);
        if (out && t->device != EM_CPU)
            out = em_to_device(out, t->device);
    } else if (!em_has_error()) {
        em_set_error(EM_ERR_MEMORY, "%s: out of memory", fn);
    }
    free(v);
    free(row);
    free(idx);
    return out;
}

em_status em_topk(const em_tensor *t /* (*) */, int64_t k, int dim, bool largest,
                  em_tensor **values /* t's shape with k along dim */,
                  em_tensor **indices /* i64, values' shape; may be NULL */)
{
    const char *fn = "em_topk";
    if (!values)
        return em_set_error(EM_ERR_ARG, "%s: values must be given", fn);
    *values = NULL;
    if (indices)
        *indices = NULL;
    if (!em_present(t, fn, "t"))
        return em_error_status();
    int d = em_norm_dim(dim, t->ndim);
    if (d < 0 || k < 0 || k > t->shape[d] || t->dtype == EM_BOOL) {
        char b[128];
        return em_set_error(EM_ERR_ARG, "%s: k %lld along dim %d does not fit %s %s", fn,
                            (long long)k, dim, em_dtype_name(t->dtype),
                            em_shape_str(t, b, sizeof b));
    }
    em_scope_begin();
    em_tensor *idx = topk_indices(fn, t, k, d, largest);
    em_tensor *val = idx ? em_gather(t, d, idx) : NULL;
    if (!val) {
        em_scope_end();
        return em_error_status();
    }
    *values = em_keep(val);
    if (indices)
        *indices = em_keep(idx);
    em_scope_end();
    return EM_OK;
}

/* ---- multinomial ---- */

/* k in [0, n) with cdf[k] > u, the first one: an inverse-CDF draw. */
static int64_t search_cdf(const double *cdf, int64_t n, double u)
{
    int64_t lo = 0, hi = n - 1;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (cdf[mid] > u)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* Draws num_samples classes from one row of weights p (c entries, finite, >= 0, used as
 * scratch) with uniforms u; false (error set) when the row cannot be sampled. */
static bool draw_row(const char *fn, double *p, int64_t c, int64_t row, int64_t num_samples,
                     bool replacement, const double *u, double *cdf, int64_t *out)
{
    int64_t positive = 0;
    for (int64_t j = 0; j < c; j++) {
        if (!isfinite(p[j]) || p[j] < 0) {
            em_set_error(EM_ERR_ARG, "%s: probability %g at row %lld, class %lld; they must be "
                         "finite and >= 0", fn, p[j], (long long)row, (long long)j);
            return false;
        }
        positive += p[j] > 0;
    }
    if (positive == 0 || (!replacement && num_samples > positive)) {
        em_set_error(EM_ERR_ARG, "%s: row %lld has %lld classes of positive probability for %lld "
                     "samples%s", fn, (long long)row, (long long)positive,
                     (long long)num_samples, replacement ? "" : " without replacement");
        return false;
    }
    for (int64_t s = 0; s < num_samples; s++) {
        if (s == 0 || !replacement) {
            double sum = 0;
            for (int64_t j = 0; j < c; j++)
                cdf[j] = sum += p[j];
        }
        int64_t k = search_cdf(cdf, c, u[s] * cdf[c - 1]);
        out[s] = k;
        if (!replacement)
            p[k] = 0;
    }
    return true;
}

em_tensor *em_multinomial(const em_tensor *probs /* (C) or (N, C) */, int64_t num_samples,
                          bool replacement, em_generator *gen)
{
    const char *fn = "em_multinomial";
    if (!em_present(probs, fn, "probs"))
        return NULL;
    if ((probs->ndim != 1 && probs->ndim != 2) || !em_dtype_is_float(probs->dtype) ||
        num_samples < 0 || probs->shape[probs->ndim - 1] == 0) {
        char b[128];
        em_set_error(EM_ERR_ARG, "%s: needs floating (C) or (N, C) probabilities with C > 0 and "
                     "num_samples >= 0: %s %s, %lld", fn, em_dtype_name(probs->dtype),
                     em_shape_str(probs, b, sizeof b), (long long)num_samples);
        return NULL;
    }
    int64_t c = probs->shape[probs->ndim - 1], rows = probs->ndim == 2 ? probs->shape[0] : 1;
    int64_t numel; /* the draws: f64 uniforms and i64 classes on the host, then the output */
    if (!em_checked_elements(fn, (int64_t[]){rows, num_samples}, 2, EM_F64, EM_CPU, &numel))
        return NULL;
    em_scope_begin();
    em_tensor *u = em_rand(EM_SHAPE(rows, num_samples), EM_F64, gen); // (rows, num_samples)
    double *p = malloc((size_t)(rows * c) * sizeof *p), *cdf = malloc((size_t)c * sizeof *cdf);
    int64_t *out = malloc((size_t)(rows * num_samples > 0 ? rows * num_samples : 1) *
                          sizeof *out);
    bool ok = u && p && cdf && out && em_copy_to_host(probs, EM_F64, p) == EM_OK;
    if (!ok && !em_has_error())
        em_set_error(EM_ERR_MEMORY, "%s: out of memory", fn);
    const double *uv = u ? em_data_ptr(u) : NULL;
    for (int64_t r = 0; ok && r < rows; r++)
        ok = draw_row(fn, p + r * c, c, r, num_samples, replacement, uv + r * num_samples, cdf,
                      out + r * num_samples);
    em_shape s = probs->ndim == 2 ? EM_SHAPE(rows, num_samples) : EM_SHAPE(num_samples);
    em_tensor *y = ok ? em_from_data(s, EM_I64, out) : NULL;
    if (y && probs->device != EM_CPU)
        y = em_to_device(y, probs->device);
    free(p);
    free(cdf);
    free(out);
    return em_scope_return(y);
}

/* ---- sampling from logits ---- */

em_tensor *em_sample_logits(const em_tensor *logits /* (V) or (N, V) */, em_sample_opts o,
                            em_generator *gen)
{
    const char *fn = "em_sample_logits";
    if (!em_present(logits, fn, "logits"))
        return NULL;
    double temperature = o.temperature ? o.temperature : 1.0;
    int64_t vocab = logits->ndim >= 1 ? logits->shape[logits->ndim - 1] : 0;
    if ((logits->ndim != 1 && logits->ndim != 2) || !(temperature > 0) || o.top_k < 0 ||
        o.top_k > vocab) {
        char b[128];
        em_set_error(EM_ERR_ARG, "%s: needs (V) or (N, V) logits, temperature > 0 and top_k in "
                     "[0, V]: %s, temperature %g, top_k %lld", fn,
                     em_shape_str(logits, b, sizeof b), temperature, (long long)o.top_k);
        return NULL;
    }
    em_scope_begin();
    bool grad = em_set_grad_enabled(false);
    em_tensor *values = NULL, *indices = NULL;
    int64_t k = o.top_k ? o.top_k : vocab;
    em_status st = em_topk(logits, k, -1, true, &values, &indices);
    em_tensor *choice = NULL;
    if (st == EM_OK) {
        em_tensor *p = em_softmax(em_mul_scalar(em_to_dtype(values, EM_F64), 1.0 / temperature),
                                  -1);
        em_tensor *pick = em_multinomial(p, 1, false, gen); // (N, 1) or (1)
        em_tensor *token = pick ? em_gather(indices, -1, pick) : NULL;
        choice = token ? em_squeeze(token, -1) : NULL; // (N) or ()
    }
    em_set_grad_enabled(grad);
    return em_scope_return(choice);
}
