/* An optimizer's state as named live tensors, for checkpoints: "step", "group.<g>.lr",
 * "param.<i>.step" and "param.<i>.<buffer>"; loading copies values in by name, all or nothing. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "optim/optim_internal.h"

static void put(em_param_ref *out, int max, int *n, const char *name, em_tensor *value)
{
    if (*n < max)
        out[*n] = (em_param_ref){.name = name, .value = value};
    (*n)++;
}

int em_optim_state(const em_optim *o, em_param_ref *out, int max)
{
    if (!o)
        return 0;
    if (!em_array_present(out, max, "em_optim_state", "out", "max"))
        return -1;
    int n = 0;
    put(out, max, &n, "step", o->step);
    for (int g = 0; g < o->n_groups; g++)
        put(out, max, &n, o->groups[g].lr_name, o->groups[g].lr);
    for (int i = 0; i < o->n_params; i++) {
        const em_optim_param *p = &o->params[i];
        put(out, max, &n, p->names[0], p->step);
        for (int k = 0; k < p->n_state; k++)
            put(out, max, &n, p->names[1 + k], p->state[k]);
    }
    return n;
}

static int find(const em_param_ref *refs, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(refs[i].name, name) == 0)
            return i;
    return -1;
}

em_status em_optim_check_count(const char *fn, const char *name, double v)
{
    if (v >= 0 && v <= (double)EM_MAX_STEP_COUNT && v == floor(v))
        return EM_OK;
    return em_set_error(EM_ERR_ARG, "%s: '%s' is %g; a step count is a whole number in "
                        "[0, 2^53]", fn, name, v);
}

/* Counters and learning rates read from a file must be values training can go on from: a step
 * count passes em_optim_check_count, a learning rate is finite. Moment buffers are left as they
 * are. */
static em_status check_scalar(const em_optim *o, const em_param_ref *mine, const em_tensor *src)
{
    static const char *fn = "em_optim_load_state";
    bool is_step = mine->value == o->step, is_lr = false;
    for (int i = 0; i < o->n_params && !is_step; i++)
        is_step = mine->value == o->params[i].step;
    for (int g = 0; g < o->n_groups && !is_lr; g++)
        is_lr = mine->value == o->groups[g].lr;
    if (!is_step && !is_lr)
        return EM_OK;
    double v = em_item(src);
    if (is_step)
        return em_optim_check_count(fn, mine->name, v);
    if (is_lr && !isfinite(v))
        return em_set_error(EM_ERR_ARG, "%s: '%s' is %g; a learning rate must be finite", fn,
                            mine->name, v);
    return EM_OK;
}

/* Pairs every entry of in with one of mine (src[j] for mine[j]), checking names and shapes. */
static em_status match(const em_param_ref *mine, int total, const em_param_ref *in, int n,
                       const em_tensor **src)
{
    static const char *fn = "em_optim_load_state";
    for (int i = 0; i < n; i++) {
        if (!in[i].name || !in[i].value)
            return em_set_error(EM_ERR_ARG, "%s: entry %d has no name or no tensor", fn, i);
        int j = find(mine, total, in[i].name);
        if (j < 0)
            return em_set_error(EM_ERR_ARG, "%s: unknown state '%s'", fn, in[i].name);
        if (!em_same_shape(mine[j].value, in[i].value)) {
            char s1[64], s2[64];
            return em_set_error(EM_ERR_ARG, "%s: '%s' is %s in the state given, %s here", fn,
                                in[i].name, em_shape_str(in[i].value, s1, sizeof s1),
                                em_shape_str(mine[j].value, s2, sizeof s2));
        }
        src[j] = in[i].value;
    }
    for (int j = 0; j < total; j++)
        if (!src[j])
            return em_set_error(EM_ERR_ARG, "%s: '%s' is missing from the state given", fn,
                                mine[j].name);
    return EM_OK;
}

em_status em_optim_load_state(em_optim *o, const em_param_ref *in, int n)
{
    static const char *fn = "em_optim_load_state";
    if (!o || n < 0 || (n > 0 && !in))
        return em_set_error(EM_ERR_ARG, "%s: NULL optimizer or state, or n < 0 (%d)", fn, n);
    int total = em_optim_state(o, NULL, 0);
    em_param_ref *mine = calloc(total, sizeof *mine);
    const em_tensor **src = calloc(total, sizeof *src);
    em_status st;
    if (!mine || !src) {
        st = em_set_error(EM_ERR_MEMORY, "%s: out of memory", fn);
    } else {
        em_optim_state(o, mine, total);
        st = match(mine, total, in, n, src);
        for (int j = 0; j < total && st == EM_OK; j++)
            st = check_scalar(o, &mine[j], src[j]);
        for (int j = 0; j < total && st == EM_OK; j++)
            st = em_copy_(mine[j].value, src[j]);
    }
    free(mine);
    free(src);
    return st;
}
