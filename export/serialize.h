/* Saving and loading a model's parameters and buffers as a safetensors file, by their dotted
 * names ("features.0.weight"), readable by the Python safetensors library and PyTorch. */
#ifndef EMBER_EXPORT_SERIALIZE_H
#define EMBER_EXPORT_SERIALIZE_H

#include "ember/nn/nn.h"
#include "ember/io/safetensors.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Parameters and buffers of m, in traversal order; returns the count or -1. The names are the
 * module tree's. out may be NULL to count. */
int em_module_state(const em_module *m, em_st_entry *out, int max);
/* Writes m's state (atomically) with optional string metadata. */
em_status em_module_save(const em_module *m, const char *path, const em_st_meta *meta, int n_meta);
/* Copies the file's tensors into m by name. Every name and shape is checked first: a missing,
 * extra or mismatched tensor, or a truncated or corrupt file, is an error and m is unchanged. */
em_status em_module_load(em_module *m, const char *path);

#ifdef __cplusplus
}
#endif

#endif
