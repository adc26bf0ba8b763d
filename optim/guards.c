/* The step guard: the loss and every gradient checked for inf/NaN in one pass of the backend's
 * norm kernel (naming the first bad parameter), the loss and grad norm fed to outlier
 * detectors, and counts of what it saw. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "optim/guards_internal.h"

struct em_guard {
    em_guard_opts opts;
    int n;
    em_tensor **params;  /* (n), borrowed from the module */
    const char **names;  /* (n), the module's dotted names */
    double *sums;        /* (n) scratch: each grad's sum of squares */
    em_outlier *loss_detector, *norm_detector; /* or NULL */
    em_guard_report report;
    char reason[192];
};

void em_guard_free(em_guard *g)
{
    if (!g)
        return;
    free(g->params);
    free(g->names);
    free(g->sums);
    em_outlier_free(g->loss_detector);
    em_outlier_free(g->norm_detector);
    free(g);
}

em_guard *em_guard_new(em_module *m, em_guard_opts o)
{
    static const char *fn = "em_guard_new";
    if (!m) {
        em_set_error(EM_ERR_ARG, "%s: NULL module", fn);
        return NULL;
    }
    int n = em_module_parameters(m, NULL, 0);
    em_guard *g = calloc(1, sizeof *g);
    em_param_ref *refs = calloc((size_t)n + 1, sizeof *refs);
    if (g) {
        g->params = calloc((size_t)n + 1, sizeof *g->params);
        g->names = calloc((size_t)n + 1, sizeof *g->names);
        g->sums = calloc((size_t)n + 1, sizeof *g->sums);
    }
    if (!g || !refs || !g->params || !g->names || !g->sums) {
        free(refs);
        em_guard_free(g);
        em_set_error(EM_ERR_MEMORY, "%s: out of memory", fn);
        return NULL;
    }
    em_module_parameters(m, refs, n);
    for (int i = 0; i < n; i++) {
        g->params[i] = refs[i].value;
        g->names[i] = refs[i].name;
    }
    free(refs);
    g->n = n;
    g->opts = o;
    g->report.last_reason = g->reason;
    if ((o.loss_outliers && !(g->loss_detector = em_outlier_new(o.outlier))) ||
        (o.grad_norm_outliers && !(g->norm_detector = em_outlier_new(o.outlier)))) {
        em_guard_free(g);
        return NULL;
    }
    return g;
}

/* The index of the first parameter whose grad holds an inf or NaN, or -1. */
static int first_nonfinite(const em_guard *g)
{
    for (int i = 0; i < g->n; i++)
        if (!isfinite(g->sums[i]))
            return i;
    return -1;
}

/* Records why step was flagged. */
static void flag(em_guard *g, const char *bad_param, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void flag(em_guard *g, const char *bad_param, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->reason, sizeof g->reason, fmt, ap);
    va_end(ap);
    g->report.bad_param = bad_param;
    g->report.last_flag_step = g->report.steps;
}

em_status em_guard_check(em_guard *g, const em_tensor *loss, double grad_norm, bool *skip)
{
    static const char *fn = "em_guard_check";
    if (skip)
        *skip = false;
    if (!g || !skip)
        return em_set_error(EM_ERR_ARG, "%s: NULL guard or skip flag", fn);
    double loss_value = 0;
    if (loss) {
        if (em_numel(loss) != 1) {
            char b[64];
            return em_set_error(EM_ERR_ARG, "%s: the loss must hold one element, not %s", fn,
                                em_shape_str(loss, b, sizeof b));
        }
        loss_value = em_item(loss);
    }
    /* a finite norm from the caller vouches for every grad; otherwise look at each one */
    int bad = -1;
    if (!(grad_norm >= 0) || !isfinite(grad_norm)) {
        em_status st = em_grad_pow_sums(fn, g->params, g->n, 2.0, g->sums);
        if (st != EM_OK)
            return st;
        bad = first_nonfinite(g);
        if (!(grad_norm >= 0))
            grad_norm = em_grad_norm_from_sums(g->sums, g->n, 2.0);
    }
    em_guard_report *r = &g->report;
    r->steps++;
    r->last_grad_norm = grad_norm;
    const char *bad_name = bad >= 0 ? g->names[bad] : NULL;
    bool nonfinite = !isfinite(loss_value) || bad >= 0;
    bool outlier = false;
    if (!isfinite(loss_value))
        flag(g, bad_name, "loss is %s", isnan(loss_value) ? "nan" : "inf");
    else if (bad >= 0)
        flag(g, bad_name, "grad of '%s' is not finite", bad_name);
    else if (loss && em_outlier_check(g->loss_detector, loss_value)) {
        outlier = true;
        flag(g, NULL, "loss outlier: %g at z = %.1f", loss_value,
             em_outlier_last_z(g->loss_detector));
    }
    if (!nonfinite && em_outlier_check(g->norm_detector, grad_norm) && !outlier) {
        outlier = true;
        flag(g, NULL, "grad norm outlier: %g at z = %.1f", grad_norm,
             em_outlier_last_z(g->norm_detector));
    }
    r->nonfinite += nonfinite;
    r->outliers += outlier;
    *skip = nonfinite || (outlier && !g->opts.flag_only);
    r->skipped += *skip;
    return EM_OK;
}

em_guard_report em_guard_get_report(const em_guard *g)
{
    return g ? g->report : (em_guard_report){.last_reason = ""};
}
