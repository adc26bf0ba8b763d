/* Pruning with torch.nn.utils.prune's semantics: pruning parameter NAME of a module renames it
 * NAME_orig and adds a buffer NAME_mask; forward uses NAME_orig * NAME_mask, so pruned entries
 * get zero gradient and stay exactly zero through training. Pruning again applies the amount to
 * the entries (or channels) that remain, as PyTorch's PruningContainer does. */
#ifndef EMBER_PRUNE_PRUNE_H
#define EMBER_PRUNE_PRUNE_H

#include <stdio.h>

#include "ember/nn/nn.h"
#include "ember/io/safetensors.h"

#ifdef __cplusplus
extern "C" {
#endif

/* amount is a fraction in [0, 1] of the remaining entries (or channels); the count pruned is
 * round(amount * remaining), halves to even. The lowest importance goes first; ties go to the
 * lower flat index. Importance is |value| of the effective (masked) parameter (L1), or uniform
 * random numbers from gen (NULL: the global generator). */
em_status em_prune_l1_unstructured(em_module *m, const char *name, double amount);
em_status em_prune_random_unstructured(em_module *m, const char *name, double amount,
                                       em_generator *gen);
/* Channels along dim (negative counts from the end) ranked by their L-n norm: n > 0 is
 * (sum |x|^n)^(1/n), INFINITY the largest |x|, -INFINITY the smallest, 0 the nonzero count. */
em_status em_prune_ln_structured(em_module *m, const char *name, double amount, double n,
                                 int dim);
em_status em_prune_random_structured(em_module *m, const char *name, double amount, int dim,
                                     em_generator *gen);

typedef enum { EM_PRUNE_L1 = 0, EM_PRUNE_RANDOM } em_prune_importance;
typedef struct {
    em_module *module;
    const char *name; /* "weight" */
} em_prune_target;
/* Every module of the tree with a parameter "weight" of 2 or more dims (Linear, Conv2d), in
 * depth-first order, as targets named "weight"; returns the count, writes up to max (-1 with an
 * error when out is NULL with max > 0, or max < 0). */
int em_prune_collect_targets(em_module *model, em_prune_target *out, int max);
/* One ranking across all targets' remaining entries (PyTorch's global_unstructured). */
em_status em_prune_global_unstructured(const em_prune_target *targets, int n,
                                       em_prune_importance importance, double amount,
                                       em_generator *gen);
/* mask has the parameter's shape; entries where it is 0 are pruned (combined with any mask). */
em_status em_prune_custom_from_mask(em_module *m, const char *name, const em_tensor *mask);
/* Bakes the mask into the parameter (in place: the tensor stays the one an optimizer holds)
 * and drops the reparametrization. */
em_status em_prune_remove(em_module *m, const char *name);
em_status em_prune_remove_all(em_module *model); /* every pruned parameter of the tree */
bool em_prune_is_pruned(const em_module *model);  /* any pruned parameter in the tree */
/* The value forward uses, as a new tensor without grad: NAME_orig * NAME_mask when pruned, else
 * the parameter itself (retained). NULL without an error when m has no such parameter. */
em_tensor *em_prune_param(const em_module *m, const char *name);
em_tensor *em_prune_mask(const em_module *m, const char *name); /* borrowed; NULL: not pruned */

/* Zeros of every weight (a parameter named weight with 2 or more dims) in the tree. */
typedef struct {
    char name[128]; /* "0.weight" */
    int64_t zeros, numel;
} em_sparsity;
/* Writes up to max rows, returns the count (or -1); *zeros and *numel get the totals. */
int em_prune_sparsity(const em_module *model, em_sparsity *rows, int max, int64_t *zeros,
                      int64_t *numel);
/* The rows as a table on f, then the overall figure; returns the overall sparsity. */
double em_prune_report(const em_module *model, FILE *f);

/* Makes a Sequential (and the Sequentials below it) smaller for real: between two Linear layers
 * separated only by elementwise layers (activations, dropout), a hidden neuron whose weight row
 * or next-layer column is all zero is removed with its column in the next layer; a removed
 * neuron's constant output act(bias) is folded into the next layer's bias, so outputs are
 * unchanged. Every mask of the tree is baked in first. Returns the neurons removed, or -1. */
int64_t em_prune_shrink(em_module *model);

/* Saving: the metadata entry that marks a pruned or shrunk file (fills out[0], returns 1). */
int em_prune_meta(em_st_meta *out);
/* Before em_module_load of a file so marked: Linear layers take the file's sizes and the
 * parameters the file holds masks for are reparametrized. No-op for other files. */
em_status em_prune_prepare_load(em_module *model, const em_safetensors *st);

#ifdef __cplusplus
}
#endif

#endif
