/* What the recipes' hooks fill: the data of a run, and the metadata saved with its models. */
#include <stdarg.h>
#include <stdio.h>

#include "recipes/recipes.h"

void recipe_data_free(recipe_data *d)
{
    em_sampler_free(d->sampler);
    em_dataset_free(d->train);
    em_dataset_free(d->val);
    *d = (recipe_data){0};
}

void recipe_meta_put(recipe_meta *m, const char *key, const char *fmt, ...)
{
    if (m->n == RECIPE_MAX_META)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->text[m->n], sizeof m->text[m->n], fmt, ap);
    va_end(ap);
    m->entries[m->n] = (em_st_meta){key, m->text[m->n]};
    m->n++;
}

void recipe_shape_text(em_shape s, char *buf, size_t n)
{
    size_t at = 0;
    buf[0] = '\0';
    for (int i = 0; i < s.ndim && at < n; i++)
        at += (size_t)snprintf(buf + at, n - at, "%s%lld", i ? "," : "", (long long)s.d[i]);
}
