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

/* What em_module_load_matching left out, by name (each list malloc'd, in the model's or the
 * file's order; em_load_report_free releases them). */
typedef struct {
    char **missing;    /* in the model, not in the file: left as they were */
    int n_missing;
    char **unexpected; /* in the file, not in the model: ignored */
    int n_unexpected;
    char **mismatched; /* in both, with different shapes: left as they were */
    int n_mismatched;
} em_load_report;
/* PyTorch's load_state_dict(strict=False): copies every tensor of the file whose name and shape
 * match one of m's (dtypes convert) and reports the rest in *report (may be NULL) instead of
 * failing, so a backbone loads into a model with a new head. A file that cannot be read is
 * still an error, and m is then unchanged. */
em_status em_module_load_matching(em_module *m, const char *path, em_load_report *report);
void em_load_report_free(em_load_report *report);

#ifdef __cplusplus
}
#endif

#endif
