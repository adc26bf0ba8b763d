/* An optimizer's kind and settings as one line of JSON, for checkpoints to record and compare. */
#include <string.h>

#include "optim/optim_internal.h"
#include "io/json_internal.h"

/* The settings of o's own kind into j; 0, or -1 out of memory. */
static int put_kind_settings(const em_optim *o, json_t *j)
{
    const char *kind = o->rule->name;
    int rc = 0;
    if (!strcmp(kind, "sgd")) {
        const em_sgd_opts *s = &o->opts.sgd;
        rc |= em_json_set_real(j, "lr", s->lr, -1);
        rc |= em_json_set_real(j, "momentum", s->momentum, -1);
        rc |= em_json_set_real(j, "dampening", s->dampening, -1);
        rc |= em_json_set_real(j, "weight_decay", s->weight_decay, -1);
        rc |= json_object_set_new(j, "nesterov", json_boolean(s->nesterov));
    } else if (!strcmp(kind, "adam")) {
        const em_adam_opts *a = &o->opts.adam;
        rc |= em_json_set_real(j, "lr", a->lr, -1);
        rc |= em_json_set_real(j, "beta1", a->beta1, -1);
        rc |= em_json_set_real(j, "beta2", a->beta2, -1);
        rc |= em_json_set_real(j, "eps", a->eps, -1);
        rc |= em_json_set_real(j, "weight_decay", a->weight_decay, -1);
        rc |= json_object_set_new(j, "amsgrad", json_boolean(a->amsgrad));
    } else {
        const em_rmsprop_opts *r = &o->opts.rmsprop;
        rc |= em_json_set_real(j, "lr", r->lr, -1);
        rc |= em_json_set_real(j, "alpha", r->alpha, -1);
        rc |= em_json_set_real(j, "eps", r->eps, -1);
        rc |= em_json_set_real(j, "weight_decay", r->weight_decay, -1);
        rc |= em_json_set_real(j, "momentum", r->momentum, -1);
        rc |= json_object_set_new(j, "centered", json_boolean(r->centered));
    }
    return rc;
}

char *em_optim_settings(const em_optim *o)
{
    if (!em_present(o, "em_optim_settings", "o"))
        return NULL;
    const char *kind = o->decoupled ? "adamw" : o->rule->name;
    json_t *j = json_pack("{s:s}", "kind", kind), *decay = json_array();
    int rc = j && decay ? put_kind_settings(o, j) : -1;
    for (int g = 0; rc == 0 && g < o->n_groups; g++)
        rc = json_array_append_new(decay, json_real(o->groups[g].weight_decay));
    rc |= json_object_set_new(j, "group_weight_decay", decay);
    char *s = rc == 0 ? em_json_dump(j) : NULL;
    json_decref(j);
    if (!s)
        em_set_error(EM_ERR_MEMORY, "em_optim_settings: out of memory");
    return s;
}
