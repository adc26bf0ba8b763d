/* em_print: PyTorch-like text, e.g. "tensor([[1.0000, 2.0000],\n        [3.0000, 4.0000]],
 * dtype=f32)"; tensors of more than 1000 elements show 3 items at each end of every dim. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/core_internal.h"

#define SUMMARY_THRESHOLD 1000
#define EDGE_ITEMS 3
#define PREFIX "tensor("

typedef struct {
    const em_tensor *t;
    FILE *f;
    bool summarise, is_float, sci;
    int width;
    double *vals; /* the shown elements in row-major order; integers exactly up to 2^53 */
    int64_t n, next;
} printer;

static bool shown_dim(const printer *p, int dim, int64_t *count)
{
    int64_t n = p->t->shape[dim];
    bool cut = p->summarise && n > 2 * EDGE_ITEMS;
    *count = cut ? 2 * EDGE_ITEMS : n;
    return cut;
}

/* Read the shown elements, in the order emit() prints them. */
static bool gather(printer *p, int dim, int64_t *idx)
{
    if (dim == p->t->ndim) {
        em_dtype as = p->is_float ? EM_F64 : EM_I64;
        if (p->is_float)
            return em_copy_element("em_print", p->t, idx, as, &p->vals[p->n++]) == EM_OK;
        int64_t v;
        if (em_copy_element("em_print", p->t, idx, as, &v) != EM_OK)
            return false;
        p->vals[p->n++] = (double)v;
        return true;
    }
    int64_t n = p->t->shape[dim], count;
    bool cut = shown_dim(p, dim, &count);
    for (int64_t i = 0; i < n; i++) {
        if (cut && i == EDGE_ITEMS)
            i = n - EDGE_ITEMS;
        idx[dim] = i;
        if (!gather(p, dim + 1, idx))
            return false;
    }
    return true;
}

static void format_value(const printer *p, double v, char *buf, size_t n)
{
    if (p->t->dtype == EM_BOOL)
        snprintf(buf, n, "%s", v != 0 ? "True" : "False");
    else if (!p->is_float)
        snprintf(buf, n, "%lld", (long long)v);
    else if (isnan(v))
        snprintf(buf, n, "nan");
    else if (isinf(v))
        snprintf(buf, n, "%s", v < 0 ? "-inf" : "inf");
    else
        snprintf(buf, n, p->sci ? "%.4e" : "%.4f", v);
}

/* Scientific notation when shown values are very large or very small; width of the widest. */
static void choose_format(printer *p)
{
    double max_abs = 0, min_abs = INFINITY;
    for (int64_t i = 0; p->is_float && i < p->n; i++) {
        double a = fabs(p->vals[i]);
        if (!isfinite(a))
            continue;
        max_abs = a > max_abs ? a : max_abs;
        if (a > 0 && a < min_abs)
            min_abs = a;
    }
    p->sci = p->is_float && (max_abs >= 1e8 || min_abs < 1e-4);
    p->width = 0;
    for (int64_t i = 0; i < p->n; i++) {
        char buf[64];
        format_value(p, p->vals[i], buf, sizeof buf);
        int w = (int)strlen(buf);
        p->width = w > p->width ? w : p->width;
    }
}

static void separator(const printer *p, int dim)
{
    if (dim == p->t->ndim - 1) {
        fputs(", ", p->f);
        return;
    }
    fputc(',', p->f);
    for (int i = dim; i < p->t->ndim - 1; i++)
        fputc('\n', p->f);
    fprintf(p->f, "%*s", (int)strlen(PREFIX) + dim + 1, "");
}

static void emit(printer *p, int dim)
{
    if (dim == p->t->ndim) {
        char buf[64];
        format_value(p, p->vals[p->next++], buf, sizeof buf);
        fprintf(p->f, "%*s", p->width, buf);
        return;
    }
    fputc('[', p->f);
    int64_t n = p->t->shape[dim], count;
    bool cut = shown_dim(p, dim, &count);
    for (int64_t i = 0; i < n; i++) {
        if (i > 0)
            separator(p, dim);
        if (cut && i == EDGE_ITEMS) {
            fputs("...", p->f);
            separator(p, dim);
            i = n - EDGE_ITEMS;
        }
        emit(p, dim + 1);
    }
    fputc(']', p->f);
}

void em_print(const em_tensor *t, FILE *f)
{
    if (!t) {
        em_set_error(EM_ERR_ARG, "em_print: NULL tensor");
        return;
    }
    printer p = {.t = t, .f = f, .is_float = em_dtype_is_float(t->dtype)};
    p.summarise = em_numel(t) > SUMMARY_THRESHOLD;
    int64_t shown = 1;
    for (int d = 0; d < t->ndim; d++) {
        int64_t count;
        shown_dim(&p, d, &count);
        shown *= count;
    }
    p.vals = malloc((size_t)(shown ? shown : 1) * sizeof *p.vals);
    int64_t idx[EM_MAX_DIMS] = {0};
    if (!p.vals || !gather(&p, 0, idx)) {
        if (!p.vals)
            em_set_error(EM_ERR_MEMORY, "em_print: out of memory");
        free(p.vals);
        return;
    }
    choose_format(&p);
    fputs(PREFIX, f);
    emit(&p, 0);
    fprintf(f, ", dtype=%s", em_dtype_name(t->dtype));
    if (t->device != EM_CPU)
        fprintf(f, ", device=%s", em_device_name(t->device));
    if (t->requires_grad)
        fputs(", requires_grad=True", f);
    fputs(")\n", f);
    free(p.vals);
}
