/* The pruning methods: which entries or channels of the remaining ones a mask drops (L1,
 * random, L-n structured, global), each applied on top of the mask already there. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "prune/prune_internal.h"

typedef struct {
    double score;
    int64_t index;
} ranked;

static int cmp_ranked(const void *pa, const void *pb)
{
    const ranked *a = pa, *b = pb;
    if (a->score != b->score)
        return a->score < b->score ? -1 : 1;
    return (a->index > b->index) - (a->index < b->index);
}

static bool check_amount(double amount, const char *fn)
{
    if (!(amount >= 0 && amount <= 1)) {
        em_set_error(EM_ERR_ARG, "%s: amount %g must be a fraction in [0, 1]", fn, amount);
        return false;
    }
    return true;
}

/* Zeroes round(amount * remaining) of the n entries whose keep[i] is set, lowest score first
 * (ties: lower index); drop[i] is set for each. Returns false when out of memory. */
static bool drop_lowest(const double *score, const bool *keep, int64_t n, double amount,
                        bool *drop)
{
    ranked *r = malloc(sizeof *r * (size_t)(n ? n : 1));
    if (!r)
        return false;
    int64_t cnt = 0;
    for (int64_t i = 0; i < n; i++) {
        drop[i] = false;
        if (keep[i])
            r[cnt++] = (ranked){.score = score[i], .index = i};
    }
    int64_t k = (int64_t)nearbyint(amount * (double)cnt);
    qsort(r, (size_t)cnt, sizeof *r, cmp_ranked);
    for (int64_t i = 0; i < k && i < cnt; i++)
        drop[r[i].index] = true;
    free(r);
    return true;
}

/* n uniform random scores from gen, or NULL with an error. */
static double *random_scores(int64_t n, em_generator *gen, const char *fn)
{
    em_tensor *t = em_rand(EM_SHAPE(n), EM_F64, gen);
    double *s = t ? malloc(sizeof *s * (size_t)(n ? n : 1)) : NULL;
    if (t && !s)
        em_set_error(EM_ERR_MEMORY, "%s: out of memory", fn);
    if (s && em_copy_to_host(t, EM_F64, s) != EM_OK) {
        free(s);
        s = NULL;
    }
    em_release(t);
    return s;
}

/* The effective values and current mask of m's parameter name (reparametrized if needed). */
typedef struct {
    em_tensor *mask; /* borrowed */
    float *w, *m;    /* host copies, numel entries */
    int64_t numel;
} prune_view;

static bool view_open(prune_view *v, em_module *m, const char *name, const char *fn)
{
    *v = (prune_view){0};
    em_tensor *w = em_prune_param(m, name);
    if (!w) {
        if (!em_has_error())
            em_set_error(EM_ERR_ARG, "%s: %s has no parameter '%s'", fn,
                         m ? m->type->type_name : "NULL module", name ? name : "");
        return false;
    }
    v->numel = em_numel(w);
    v->w = em_host_f32(w, fn);
    em_release(w);
    v->mask = v->w ? em_prune_reparametrize(m, name, fn) : NULL;
    v->m = v->mask ? em_host_f32(v->mask, fn) : NULL;
    return v->m != NULL;
}

static void view_close(prune_view *v)
{
    free(v->w);
    free(v->m);
}

/* Unstructured pruning of one parameter with scores (NULL: |w|). */
static em_status unstructured(em_module *m, const char *name, double amount, em_generator *gen,
                              bool random, const char *fn)
{
    if (!check_amount(amount, fn))
        return EM_ERR_ARG;
    prune_view v;
    em_status st = view_open(&v, m, name, fn) ? EM_OK : em_error_status();
    double *score = NULL;
    bool *keep = NULL, *drop = NULL;
    if (st == EM_OK) {
        score = random ? random_scores(v.numel, gen, fn)
                       : malloc(sizeof *score * (size_t)(v.numel + 1));
        keep = calloc((size_t)v.numel + 1, 1);
        drop = malloc((size_t)v.numel + 1);
        if (!score || !keep || !drop)
            st = em_has_error() ? em_error_status()
                                : em_set_error(EM_ERR_MEMORY, "%s: out of memory", fn);
    }
    if (st == EM_OK) {
        for (int64_t i = 0; i < v.numel; i++) {
            if (!random)
                score[i] = fabs((double)v.w[i]);
            keep[i] = v.m[i] != 0;
        }
        if (!drop_lowest(score, keep, v.numel, amount, drop))
            st = em_set_error(EM_ERR_MEMORY, "%s: out of memory", fn);
    }
    if (st == EM_OK) {
        for (int64_t i = 0; i < v.numel; i++)
            v.m[i] = drop[i] ? 0 : v.m[i];
        st = em_prune_write(v.mask, v.m, fn);
    }
    free(score);
    free(keep);
    free(drop);
    view_close(&v);
    return st;
}

em_status em_prune_l1_unstructured(em_module *m, const char *name, double amount)
{
    return unstructured(m, name, amount, NULL, false, "em_prune_l1_unstructured");
}

em_status em_prune_random_unstructured(em_module *m, const char *name, double amount,
                                       em_generator *gen)
{
    return unstructured(m, name, amount, gen, true, "em_prune_random_unstructured");
}

/* The L-n norm of values x[(o * ch + c) * inner + i] over o and i. */
static double channel_norm(const float *x, int64_t outer, int64_t ch, int64_t inner, int64_t c,
                           double n)
{
    double acc = isinf(n) && n < 0 ? INFINITY : 0;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            double a = fabs((double)x[(o * ch + c) * inner + i]);
            if (n == 0)
                acc += a != 0;
            else if (isinf(n))
                acc = n > 0 ? fmax(acc, a) : fmin(acc, a);
            else
                acc += pow(a, n);
        }
    return n == 0 || isinf(n) ? acc : pow(acc, 1.0 / n);
}

/* Structured pruning along dim with L-n norms (random: random scores). */
static em_status structured(em_module *m, const char *name, double amount, double n, int dim,
                            em_generator *gen, bool random, const char *fn)
{
    if (!check_amount(amount, fn))
        return EM_ERR_ARG;
    if (!random && (isnan(n) || (n < 0 && !isinf(n))))
        return em_set_error(EM_ERR_ARG, "%s: norm order %g must be >= 0 or +-inf", fn, n);
    em_tensor *w = em_prune_param(m, name);
    int nd = w ? w->ndim : 0;
    em_shape shape = w ? em_shape_of(w) : (em_shape){0};
    em_release(w);
    if (w && (dim < -nd || dim >= nd))
        return em_set_error(EM_ERR_ARG, "%s: dim %d out of range for a %d-d parameter", fn, dim,
                            nd);
    prune_view v;
    if (!view_open(&v, m, name, fn)) {
        view_close(&v);
        return em_error_status();
    }
    int d = dim < 0 ? dim + nd : dim;
    int64_t ch = shape.d[d], outer = 1, inner = 1;
    for (int i = 0; i < d; i++)
        outer *= shape.d[i];
    for (int i = d + 1; i < nd; i++)
        inner *= shape.d[i];
    double *score = random ? random_scores(ch, gen, fn)
                           : malloc(sizeof *score * (size_t)(ch + 1));
    bool *keep = calloc((size_t)ch + 1, 1), *drop = malloc((size_t)ch + 1);
    em_status st = score && keep && drop ? EM_OK
                   : em_has_error()      ? em_error_status()
                                         : em_set_error(EM_ERR_MEMORY, "%s: out of memory", fn);
    if (st == EM_OK) {
        for (int64_t c = 0; c < ch; c++) {
            for (int64_t o = 0; o < outer && !keep[c]; o++)
                for (int64_t i = 0; i < inner && !keep[c]; i++)
                    keep[c] = v.m[(o * ch + c) * inner + i] != 0;
            if (!random)
                score[c] = channel_norm(v.w, outer, ch, inner, c, n);
        }
        if (!drop_lowest(score, keep, ch, amount, drop))
            st = em_set_error(EM_ERR_MEMORY, "%s: out of memory", fn);
    }
    if (st == EM_OK) {
        for (int64_t o = 0; o < outer; o++)
            for (int64_t c = 0; c < ch; c++)
                for (int64_t i = 0; i < inner; i++)
                    if (drop[c])
                        v.m[(o * ch + c) * inner + i] = 0;
        st = em_prune_write(v.mask, v.m, fn);
    }
    free(score);
    free(keep);
    free(drop);
    view_close(&v);
    return st;
}

em_status em_prune_ln_structured(em_module *m, const char *name, double amount, double n,
                                 int dim)
{
    return structured(m, name, amount, n, dim, NULL, false, "em_prune_ln_structured");
}

em_status em_prune_random_structured(em_module *m, const char *name, double amount, int dim,
                                     em_generator *gen)
{
    return structured(m, name, amount, 0, dim, gen, true, "em_prune_random_structured");
}

static void collect(em_module *m, em_prune_target *out, int max, int *n)
{
    em_tensor *w = em_prune_param(m, "weight");
    if (w && w->ndim >= 2) {
        if (*n < max)
            out[*n] = (em_prune_target){m, "weight"};
        (*n)++;
    }
    em_release(w);
    for (int i = 0; i < m->n_children; i++)
        collect(m->children[i].module, out, max, n);
}

int em_prune_collect_targets(em_module *model, em_prune_target *out, int max)
{
    if (!em_array_present(out, max, "em_prune_collect_targets", "out", "max"))
        return -1;
    int n = 0;
    if (model)
        collect(model, out, max, &n);
    return n;
}

em_status em_prune_global_unstructured(const em_prune_target *targets, int n,
                                       em_prune_importance importance, double amount,
                                       em_generator *gen)
{
    const char *fn = "em_prune_global_unstructured";
    if (!targets || n <= 0)
        return em_set_error(EM_ERR_ARG, "%s: no targets", fn);
    if (!check_amount(amount, fn))
        return EM_ERR_ARG;
    prune_view *v = calloc((size_t)n, sizeof *v);
    int64_t total = 0;
    em_status st = v ? EM_OK : em_set_error(EM_ERR_MEMORY, "%s: out of memory", fn);
    for (int t = 0; t < n && st == EM_OK; t++) {
        if (!view_open(&v[t], targets[t].module, targets[t].name, fn))
            st = em_error_status();
        total += v[t].numel;
    }
    double *score = NULL;
    bool *keep = NULL, *drop = NULL;
    if (st == EM_OK) {
        score = importance == EM_PRUNE_RANDOM ? random_scores(total, gen, fn)
                                              : malloc(sizeof *score * (size_t)(total + 1));
        keep = calloc((size_t)total + 1, 1);
        drop = malloc((size_t)total + 1);
        if (!score || !keep || !drop)
            st = em_has_error() ? em_error_status()
                                : em_set_error(EM_ERR_MEMORY, "%s: out of memory", fn);
    }
    if (st == EM_OK) {
        int64_t at = 0;
        for (int t = 0; t < n; at += v[t].numel, t++)
            for (int64_t i = 0; i < v[t].numel; i++) {
                if (importance != EM_PRUNE_RANDOM)
                    score[at + i] = fabs((double)v[t].w[i]);
                keep[at + i] = v[t].m[i] != 0;
            }
        if (!drop_lowest(score, keep, total, amount, drop))
            st = em_set_error(EM_ERR_MEMORY, "%s: out of memory", fn);
    }
    int64_t at = 0;
    for (int t = 0; t < n && st == EM_OK; at += v[t].numel, t++) {
        for (int64_t i = 0; i < v[t].numel; i++)
            v[t].m[i] = drop[at + i] ? 0 : v[t].m[i];
        st = em_prune_write(v[t].mask, v[t].m, fn);
    }
    for (int t = 0; v && t < n; t++)
        view_close(&v[t]);
    free(v);
    free(score);
    free(keep);
    free(drop);
    return st;
}
