/* What the pruning files (prune.c, prune_methods.c, prune_shrink.c) share. Not installed. */
#ifndef EMBER_PRUNE_PRUNE_INTERNAL_H
#define EMBER_PRUNE_PRUNE_INTERNAL_H

#include "nn/nn_internal.h"
#include "prune/prune.h"

/* The mask buffer of m's parameter name, reparametrizing it first (mask of ones) when it is not
 * pruned yet; NULL with an error naming fn when m has no such parameter. */
em_tensor *em_prune_reparametrize(em_module *m, const char *name, const char *fn);
/* Writes numel(dst) host f32 values into dst (any float dtype). */
em_status em_prune_write(em_tensor *dst, const float *values, const char *fn);
/* Index of m's parameter or buffer called name, or -1. */
int em_prune_find_param(const em_module *m, const char *name);
int em_prune_find_buffer(const em_module *m, const char *name);

#endif
