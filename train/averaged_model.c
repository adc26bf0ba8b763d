/* The averaged model: a copy of the model whose tensors follow the model's by em_lerp_ (EMA by
 * 1 - decay, SWA by 1 / (updates + 1)), as PyTorch's AveragedModel with its multi_avg_fns. */
#include <stdlib.h>
#include <string.h>

#include "models/model_file.h"
#include "train/averaged_model.h"
#include "train/train_internal.h"

struct em_averaged_model {
    em_module *copy; /* owned */
    em_average_opts o;
    int64_t count;   /* updates averaged */
};

em_averaged_model *em_averaged_model_new(const em_module *model, em_average_opts o)
{
    if (!model || !(o.decay >= 0 && o.decay < 1)) {
        em_set_error(EM_ERR_ARG, "em_averaged_model_new: needs a model and a decay in [0, 1) "
                     "(0: the equal average), not %g", o.decay);
        return NULL;
    }
    em_averaged_model *a = calloc(1, sizeof *a);
    if (!a) {
        em_set_error(EM_ERR_MEMORY, "em_averaged_model_new: out of memory");
        return NULL;
    }
    a->o = o;
    if (!(a->copy = em_module_clone(model))) {
        free(a);
        return NULL;
    }
    em_module_zero_grad(a->copy);
    return a;
}

void em_averaged_model_free(em_averaged_model *a)
{
    if (!a)
        return;
    em_module_free(a->copy);
    free(a);
}

em_module *em_averaged_model_module(const em_averaged_model *a)
{
    return a ? a->copy : NULL;
}

int64_t em_averaged_model_count(const em_averaged_model *a)
{
    return a ? a->count : 0;
}

void em_averaged_model_set_count(em_averaged_model *a, int64_t count)
{
    a->count = count;
}

/* The copy's and model's tensors of one kind (parameters or buffers), paired by position and
 * checked by name and shape: their count, or -1 with an error naming fn. *mine and *theirs are
 * malloc'd. */
static int pair_up(const em_averaged_model *a, const em_module *model, bool buffers,
                   em_param_ref **mine, em_param_ref **theirs, const char *fn)
{
    int (*list)(const em_module *, em_param_ref *, int) = buffers ? em_module_buffers
                                                                  : em_module_parameters;
    int n = list(a->copy, NULL, 0), m = list(model, NULL, 0);
    *mine = calloc((size_t)n + 1, sizeof **mine);
    *theirs = calloc((size_t)n + 1, sizeof **theirs);
    if (!*mine || !*theirs) {
        em_set_error(EM_ERR_MEMORY, "%s: out of memory", fn);
        return -1;
    }
    if (n != m) {
        em_set_error(EM_ERR_ARG, "%s: the model has %d %s, the averaged copy %d", fn, m,
                     buffers ? "buffers" : "parameters", n);
        return -1;
    }
    list(a->copy, *mine, n);
    list(model, *theirs, n);
    for (int i = 0; i < n; i++)
        if (strcmp((*mine)[i].name, (*theirs)[i].name) ||
            !em_same_shape((*mine)[i].value, (*theirs)[i].value)) {
            char b1[64], b2[64];
            em_set_error(EM_ERR_ARG, "%s: the model's '%s' %s is not the averaged copy's '%s' "
                         "%s", fn, (*theirs)[i].name,
                         em_shape_str((*theirs)[i].value, b1, sizeof b1), (*mine)[i].name,
                         em_shape_str((*mine)[i].value, b2, sizeof b2));
            return -1;
        }
    return n;
}

/* avg moves towards p by weight, or takes p (copy, or an integer tensor) */
static em_status average_in(em_tensor *avg, const em_tensor *p, double weight, bool copy)
{
    if (copy || !em_dtype_is_float(avg->dtype))
        return em_copy_(avg, p);
    em_scope_begin();
    const em_tensor *q = p->dtype == avg->dtype && p->device == avg->device
                             ? p : em_to_dtype(em_to_device(p, avg->device), avg->dtype);
    em_status st = q ? em_lerp_(avg, q, weight) : em_error_status();
    em_scope_end();
    return st;
}

em_status em_averaged_model_update(em_averaged_model *a, const em_module *model)
{
    const char *fn = "em_averaged_model_update";
    if (!a || !model)
        return em_set_error(EM_ERR_ARG, "%s: averaged model and model must be given", fn);
    double weight = a->o.decay > 0 ? 1 - a->o.decay : 1.0 / (double)(a->count + 1);
    em_status st = EM_OK;
    for (int kind = 0; kind < 2 && st == EM_OK; kind++) {
        em_param_ref *mine = NULL, *theirs = NULL;
        int n = pair_up(a, model, kind == 1, &mine, &theirs, fn);
        st = n < 0 ? em_error_status() : EM_OK;
        bool copy = a->count == 0 || (kind == 1 && !a->o.use_buffers);
        for (int i = 0; i < n && st == EM_OK; i++)
            st = average_in(mine[i].value, theirs[i].value, weight, copy);
        free(mine);
        free(theirs);
    }
    if (st == EM_OK)
        a->count++;
    return st;
}

/* Exchanges x's and y's values through a copy of x */
static em_status swap_values(em_tensor *x, em_tensor *y)
{
    em_scope_begin();
    em_tensor *t = em_to_device(x, x->device);
    em_status st = t && em_copy_(x, y) == EM_OK ? em_copy_(y, t) : em_error_status();
    em_scope_end();
    return st;
}

em_status em_averaged_model_swap(em_averaged_model *a, em_module *model)
{
    const char *fn = "em_averaged_model_swap";
    if (!a || !model)
        return em_set_error(EM_ERR_ARG, "%s: averaged model and model must be given", fn);
    em_param_ref *mine[2] = {NULL, NULL}, *theirs[2] = {NULL, NULL};
    int n[2] = {0, 0};
    em_status st = EM_OK;
    for (int kind = 0; kind < 2 && st == EM_OK; kind++) /* every pair checked, then swapped */
        if ((n[kind] = pair_up(a, model, kind == 1, &mine[kind], &theirs[kind], fn)) < 0)
            st = em_error_status();
    for (int kind = 0; kind < 2 && st == EM_OK; kind++)
        for (int i = 0; i < n[kind] && st == EM_OK; i++) {
            const em_tensor *x = mine[kind][i].value, *y = theirs[kind][i].value;
            if (x->dtype != y->dtype || x->device != y->device)
                st = em_set_error(EM_ERR_ARG, "%s: '%s' is %s on %s in the model, %s on %s in "
                                  "the averaged copy", fn, mine[kind][i].name,
                                  em_dtype_name(y->dtype), em_device_name(y->device),
                                  em_dtype_name(x->dtype), em_device_name(x->device));
        }
    for (int kind = 0; kind < 2 && st == EM_OK; kind++)
        for (int i = 0; i < n[kind] && st == EM_OK; i++)
            st = swap_values(mine[kind][i].value, theirs[kind][i].value);
    for (int kind = 0; kind < 2; kind++) {
        free(mine[kind]);
        free(theirs[kind]);
    }
    return st;
}
