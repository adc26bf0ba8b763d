/* Training checkpoints over safetensors: a whole-model file (the module tree, the model's
 * tensors by their own names) whose optimizer, grad scaler and scheduler tensors go under
 * "ember." names, integers as metadata strings. Files of version 1 (before the tree) prefixed
 * every part, the model's "model.", and still load. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "export/serialize.h"
#include "models/model_file_meta.h"
#include "train/train_checkpoint.h"
#include "train/train_internal.h"

/* kind, version, scheduler step, generator (2), loader (3), counters (3), averaged updates,
 * optimizer, tree */
#define N_OWN_META 14
#define VERSION 2

/* The parts of a checkpoint, in file order, and their tensor name prefixes by file version. */
enum { PART_MODEL, PART_OPTIM, PART_SCALER, PART_SCHED, PART_AVERAGE, N_PARTS };
typedef const char *const prefixes[N_PARTS];
static prefixes version_prefixes[VERSION] = {
    {"model.", "optim.", "scaler.", "sched.", "average."},
    {"", "ember.optim.", "ember.scaler.", "ember.sched.", "ember.average."}};

/* Where each part's entries are in the list collect makes. */
typedef struct {
    int first[N_PARTS], n[N_PARTS];
    int total;
} layout;

static char *prefixed(const char *prefix, const char *name)
{
    size_t n = strlen(prefix) + strlen(name) + 1;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, "%s%s", prefix, name);
    return s;
}

/* The entries of every part, names prefixed as part_prefix says (freed by free_entries). */
static em_st_entry *collect(const em_train_state *s, prefixes part_prefix, layout *l)
{
    const em_module *average = em_averaged_model_module(s->average);
    *l = (layout){.n = {em_module_state(s->model, NULL, 0),
                        s->optim ? em_optim_state(s->optim, NULL, 0) : 0,
                        s->scaler ? em_grad_scaler_state(s->scaler, NULL, 0) : 0,
                        s->scheduler ? em_scheduler_state(s->scheduler, NULL, 0) : 0,
                        average ? em_module_state(average, NULL, 0) : 0}};
    if (l->n[PART_MODEL] < 0 || l->n[PART_AVERAGE] < 0)
        return NULL;
    for (int p = 0; p < N_PARTS; p++) {
        l->first[p] = l->total;
        l->total += l->n[p];
    }
    em_st_entry *e = calloc((size_t)l->total + 1, sizeof *e);
    em_param_ref *refs = calloc((size_t)l->total + 1, sizeof *refs);
    if (!e || !refs) {
        free(e);
        free(refs);
        em_set_error(EM_ERR_MEMORY, "em_train_checkpoint: out of memory");
        return NULL;
    }
    em_module_state(s->model, e, l->n[PART_MODEL]);
    for (int i = 0; i < l->n[PART_MODEL]; i++)
        refs[i] = (em_param_ref){e[i].name, e[i].tensor};
    if (average) {
        em_st_entry *own = e + l->first[PART_AVERAGE];
        em_module_state(average, own, l->n[PART_AVERAGE]);
        for (int i = 0; i < l->n[PART_AVERAGE]; i++)
            refs[l->first[PART_AVERAGE] + i] = (em_param_ref){own[i].name, own[i].tensor};
    }
    if (s->optim)
        em_optim_state(s->optim, refs + l->first[PART_OPTIM], l->n[PART_OPTIM]);
    if (s->scaler)
        em_grad_scaler_state(s->scaler, refs + l->first[PART_SCALER], l->n[PART_SCALER]);
    if (s->scheduler)
        em_scheduler_state(s->scheduler, refs + l->first[PART_SCHED], l->n[PART_SCHED]);
    for (int p = 0; p < N_PARTS; p++)
        for (int i = l->first[p]; i < l->first[p] + l->n[p]; i++)
            e[i] = (em_st_entry){.name = prefixed(part_prefix[p], refs[i].name),
                                 .tensor = refs[i].value};
    free(refs);
    return e;
}

/* A part's entries as the file holds them, names without the prefix, into refs (n of them). */
static void file_refs(const em_safetensors *f, const em_st_entry *e, const layout *l, int part,
                      const char *prefix, em_param_ref *refs)
{
    for (int i = 0; i < l->n[part]; i++) {
        const em_st_entry *entry = &e[l->first[part] + i];
        refs[i].name = entry->name + strlen(prefix);
        refs[i].value = em_safetensors_get(f, entry->name);
    }
}

static void free_entries(em_st_entry *e, int n)
{
    for (int i = 0; e && i < n; i++)
        free((char *)e[i].name);
    free(e);
}

/* ember's own metadata of a checkpoint, values formatted into buf. */
typedef struct {
    em_st_meta m[N_OWN_META];
    char buf[N_OWN_META][40];
    int n;
} own_meta;

static void __attribute__((format(printf, 3, 4)))
put_meta(own_meta *o, const char *key, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(o->buf[o->n], sizeof o->buf[o->n], fmt, ap);
    va_end(ap);
    o->m[o->n] = (em_st_meta){.key = key, .value = o->buf[o->n]};
    o->n++;
}

/* Everything of s that is stored as metadata; the optimizer's settings and the tree are the
 * caller's. */
static void own_metadata(const em_train_state *s, own_meta *o)
{
    em_generator *rng = s->rng ? s->rng : em_default_generator();
    put_meta(o, "ember.kind", "train_checkpoint");
    put_meta(o, "ember.checkpoint_version", "%d", VERSION);
    put_meta(o, "ember.scheduler_step", "%" PRId64,
             s->scheduler ? em_scheduler_last_step(s->scheduler) : -1);
    put_meta(o, "ember.rng_seed", "%" PRIu64, rng->seed);
    put_meta(o, "ember.rng_offset", "%" PRIu64, rng->offset);
    if (s->loader) {
        em_loader_pos pos = em_loader_position(s->loader);
        put_meta(o, "ember.loader_epoch", "%" PRId64, pos.epoch);
        put_meta(o, "ember.loader_batch", "%" PRId64, pos.batch);
        put_meta(o, "ember.loader_batches", "%" PRId64, em_loader_num_batches(s->loader));
    }
    if (s->average)
        put_meta(o, "ember.average_count", "%" PRId64, em_averaged_model_count(s->average));
    if (s->counters) {
        put_meta(o, "ember.step", "%" PRId64, s->counters->step);
        put_meta(o, "ember.epoch_steps", "%" PRId64, s->counters->epoch_steps);
        put_meta(o, "ember.epoch_loss_sum", "%a", s->counters->epoch_loss_sum); /* exact */
    }
}

em_status em_train_checkpoint_save(const char *path, const em_train_state *s,
                                   const em_st_meta *meta, int n_meta)
{
    if (!path || !s || !s->model || (n_meta > 0 && !meta))
        return em_set_error(EM_ERR_ARG, "em_train_checkpoint_save: NULL path, state or model");
    own_meta own = {.n = 0};
    own_metadata(s, &own);
    char *optim = s->optim ? em_optim_settings(s->optim) : NULL;
    if (optim)
        own.m[own.n++] = (em_st_meta){.key = "ember.optim", .value = optim};
    /* the tree, where every module's type is one whole-model files know */
    em_st_meta tree = {0};
    em_status st = em_model_describable(s->model) ? em_model_tree_meta(s->model, path, &tree)
                                                   : EM_OK;
    if (tree.value)
        own.m[own.n++] = tree;
    em_st_meta *all = calloc((size_t)n_meta + N_OWN_META, sizeof *all);
    layout l;
    em_st_entry *e = collect(s, version_prefixes[VERSION - 1], &l);
    if (st != EM_OK || (s->optim && !optim)) {
        st = em_error_status();
    } else if (!all || !e) {
        st = all ? em_error_status() : em_set_error(EM_ERR_MEMORY, "em_train_checkpoint_save: "
                                                                   "out of memory");
    } else {
        for (int i = 0; i < n_meta && st == EM_OK; i++) {
            if (!meta[i].key || !strncmp(meta[i].key, "ember.", 6))
                st = em_set_error(EM_ERR_ARG, "em_train_checkpoint_save: metadata key '%s' is "
                                  "reserved", meta[i].key ? meta[i].key : "(null)");
            all[i] = meta[i];
        }
        memcpy(all + n_meta, own.m, (size_t)own.n * sizeof *all);
        if (st == EM_OK)
            st = em_safetensors_save(path, e, l.total, all, n_meta + own.n);
    }
    free_entries(e, e ? l.total : 0);
    free(all);
    free(optim);
    free((char *)tree.value);
    return st;
}

/* An integer written by save: unsigned 64-bit, or signed (strtoull wraps "-1" to all ones). */
static em_status meta_int(const em_safetensors *f, const char *path, const char *key, uint64_t *v)
{
    const char *s = em_safetensors_meta(f, key);
    char *end = NULL;
    if (s)
        *v = strtoull(s, &end, 10);
    if (!s || end == s || *end)
        return em_set_error(EM_ERR_IO, "em_train_checkpoint_load: %s: metadata '%s' missing or "
                            "not an integer", path, key);
    return EM_OK;
}

/* Every tensor of a part (the model's, the scheduler's) must be in the file with its shape. */
static em_status check_part(const em_safetensors *f, const char *path, const em_st_entry *e,
                            const layout *l, int part)
{
    for (int i = l->first[part]; i < l->first[part] + l->n[part]; i++) {
        em_tensor *src = em_safetensors_get(f, e[i].name);
        if (!src)
            return em_set_error(EM_ERR_ARG, "em_train_checkpoint_load: %s: '%s' is missing", path,
                                e[i].name);
        if (!em_same_shape(src, e[i].tensor)) {
            char a[64], b[64];
            return em_set_error(EM_ERR_ARG, "em_train_checkpoint_load: %s: '%s' is %s in the file, "
                                "%s here", path, e[i].name, em_shape_str(src, a, 64),
                                em_shape_str(e[i].tensor, b, 64));
        }
    }
    return EM_OK;
}

/* The scaler's entries in the file (refs, n of them), checked by loading them into a scratch
 * scaler; *present is false when the file has none: the scaler is then left as it is. */
static em_status check_scaler(const char *path, const em_param_ref *refs, int n, bool *present)
{
    int found = 0;
    for (int i = 0; i < n; i++)
        found += refs[i].value != NULL;
    *present = found > 0;
    if (!found)
        return EM_OK;
    if (found < n)
        return em_set_error(EM_ERR_IO, "em_train_checkpoint_load: %s: the scaler's state is "
                            "incomplete", path);
    em_grad_scaler *scratch = em_grad_scaler_new((em_grad_scaler_opts){0});
    em_status st = scratch ? em_grad_scaler_load_state(scratch, refs, n) : em_error_status();
    em_grad_scaler_free(scratch);
    return st;
}

/* Where the file's loader stood; it must have had as many batches per epoch as this one. */
static em_status check_loader(const em_safetensors *f, const char *path, const em_loader *dl,
                              em_loader_pos *pos)
{
    uint64_t epoch, batch, batches;
    int64_t n = em_loader_num_batches(dl);
    if (!em_safetensors_meta(f, "ember.loader_epoch"))
        return em_set_error(EM_ERR_ARG, "em_train_checkpoint_load: %s holds no loader position "
                            "(it was saved without a loader)", path);
    em_status st = meta_int(f, path, "ember.loader_epoch", &epoch);
    if (st == EM_OK)
        st = meta_int(f, path, "ember.loader_batch", &batch);
    if (st == EM_OK && em_safetensors_meta(f, "ember.loader_batches"))
        st = meta_int(f, path, "ember.loader_batches", &batches);
    else
        batches = (uint64_t)n;
    if (st != EM_OK)
        return st;
    if ((int64_t)batches != n || (int64_t)batch > n || (int64_t)epoch < 0)
        return em_set_error(EM_ERR_ARG, "em_train_checkpoint_load: %s: the run's loader had %lld "
                            "batches per epoch and stood at batch %lld; this one has %lld (another "
                            "batch size or dataset?)", path, (long long)batches,
                            (long long)batch, (long long)n);
    *pos = (em_loader_pos){(int64_t)epoch, (int64_t)batch};
    return EM_OK;
}

/* The trainer's counters in the file into *c; *present is false when the file has none. */
static em_status read_counters(const em_safetensors *f, const char *path, em_train_counters *c,
                               bool *present)
{
    *present = em_safetensors_meta(f, "ember.step") != NULL;
    if (!*present)
        return EM_OK;
    uint64_t step, epoch_steps;
    em_status st = meta_int(f, path, "ember.step", &step);
    if (st == EM_OK)
        st = meta_int(f, path, "ember.epoch_steps", &epoch_steps);
    const char *sum = em_safetensors_meta(f, "ember.epoch_loss_sum");
    char *end = NULL;
    double loss_sum = sum ? strtod(sum, &end) : 0;
    if (st == EM_OK && (!sum || end == sum || *end))
        st = em_set_error(EM_ERR_IO, "em_train_checkpoint_load: %s: metadata "
                          "'ember.epoch_loss_sum' missing or not a number", path);
    if (st == EM_OK && (step > (uint64_t)INT64_MAX / 2 || epoch_steps > step))
        st = em_set_error(EM_ERR_IO, "em_train_checkpoint_load: %s: the step counts (%llu in "
                          "the run, %llu in the epoch) do not fit", path,
                          (unsigned long long)step, (unsigned long long)epoch_steps);
    if (st == EM_OK)
        *c = (em_train_counters){(int64_t)step, (int64_t)epoch_steps, loss_sum};
    return st;
}

/* The file's optimizer must be this run's: the same kind and settings, and its state entries
 * exactly the ones this optimizer keeps. */
static em_status check_optim(const em_safetensors *f, const char *path, const em_optim *o,
                             const char *prefix, const em_st_entry *e, const layout *l)
{
    const char *saved = em_safetensors_meta(f, "ember.optim");
    char *mine = em_optim_settings(o);
    if (!mine)
        return em_error_status();
    em_status st = EM_OK;
    if (saved && strcmp(saved, mine))
        st = em_set_error(EM_ERR_ARG, "em_train_checkpoint_load: %s was saved by the optimizer "
                          "%s; this run's is %s", path, saved, mine);
    free(mine);
    int in_file = 0;
    for (int i = 0; i < f->n_tensors; i++)
        in_file += !strncmp(f->names[i], prefix, strlen(prefix));
    if (st == EM_OK)
        st = check_part(f, path, e, l, PART_OPTIM);
    if (st == EM_OK && in_file != l->n[PART_OPTIM])
        st = em_set_error(EM_ERR_ARG, "em_train_checkpoint_load: %s holds %d optimizer state "
                          "tensors; this run's optimizer keeps %d (another optimizer?)", path,
                          in_file, l->n[PART_OPTIM]);
    return st;
}

/* The tensor name prefixes of f's version (1 when it says none), or NULL with an error when f
 * is no training checkpoint ember reads. */
static const char *const *file_prefixes(const em_safetensors *f, const char *path)
{
    const char *kind = em_safetensors_meta(f, "ember.kind");
    uint64_t version = 1;
    if (!kind || strcmp(kind, "train_checkpoint")) {
        em_set_error(EM_ERR_IO, "em_train_checkpoint_load: %s: not a training checkpoint", path);
        return NULL;
    }
    if (em_safetensors_meta(f, "ember.checkpoint_version") &&
        (meta_int(f, path, "ember.checkpoint_version", &version) != EM_OK || version < 1 ||
         version > VERSION)) {
        em_set_error(EM_ERR_IO, "em_train_checkpoint_load: %s: checkpoint version '%s' (this "
                     "ember reads 1 to %d)", path,
                     em_safetensors_meta(f, "ember.checkpoint_version"), VERSION);
        return NULL;
    }
    return version_prefixes[version - 1];
}

/* The averaged model's copy and count in the file; *present is false when the file holds none of
 * its tensors (a run that averaged nothing yet): it is then left as it is. */
static em_status check_average(const em_safetensors *f, const char *path, const em_st_entry *e,
                               const layout *l, uint64_t *count, bool *present)
{
    int found = 0;
    for (int i = l->first[PART_AVERAGE]; i < l->first[PART_AVERAGE] + l->n[PART_AVERAGE]; i++)
        found += em_safetensors_get(f, e[i].name) != NULL;
    *present = found > 0;
    if (!found)
        return EM_OK;
    em_status st = check_part(f, path, e, l, PART_AVERAGE);
    return st == EM_OK ? meta_int(f, path, "ember.average_count", count) : st;
}

/* Everything is checked before anything changes; the optimizer's load checks itself first. */
static em_status restore(em_safetensors *f, const char *path, em_train_state *s,
                         prefixes part_prefix, const em_st_entry *e, const layout *l,
                         em_param_ref *refs)
{
    uint64_t sched_step, seed, offset;
    em_status st = meta_int(f, path, "ember.scheduler_step", &sched_step);
    if (st == EM_OK)
        st = meta_int(f, path, "ember.rng_seed", &seed);
    if (st == EM_OK)
        st = meta_int(f, path, "ember.rng_offset", &offset);
    if (st == EM_OK && s->scheduler && (int64_t)sched_step > EM_MAX_STEP_COUNT)
        st = em_set_error(EM_ERR_IO, "em_train_checkpoint_load: %s: scheduler step %lld is past "
                          "2^53", path, (long long)sched_step);
    em_loader_pos pos = {0};
    if (st == EM_OK && s->loader)
        st = check_loader(f, path, s->loader, &pos);
    em_train_counters counters;
    bool counters_present = false;
    if (st == EM_OK && s->counters)
        st = read_counters(f, path, &counters, &counters_present);
    if (st == EM_OK)
        st = check_part(f, path, e, l, PART_MODEL);
    if (st == EM_OK)
        st = check_part(f, path, e, l, PART_SCHED);
    if (st == EM_OK && s->optim)
        st = check_optim(f, path, s->optim, part_prefix[PART_OPTIM], e, l);
    for (int p = PART_OPTIM; p < N_PARTS; p++)
        file_refs(f, e, l, p, part_prefix[p], refs + l->first[p]);
    bool scaler_present = false;
    if (st == EM_OK && s->scaler)
        st = check_scaler(path, refs + l->first[PART_SCALER], l->n[PART_SCALER],
                          &scaler_present);
    uint64_t average_count = 0;
    bool average_present = false;
    if (st == EM_OK && s->average)
        st = check_average(f, path, e, l, &average_count, &average_present);
    if (st == EM_OK && s->optim)
        st = em_optim_load_state(s->optim, refs + l->first[PART_OPTIM], l->n[PART_OPTIM]);
    if (st != EM_OK)
        return st;
    /* nothing below can fail: each was checked above */
    if (counters_present)
        *s->counters = counters;
    if (scaler_present)
        em_grad_scaler_load_state(s->scaler, refs + l->first[PART_SCALER], l->n[PART_SCALER]);
    if (s->scheduler)
        em_scheduler_load_state(s->scheduler, refs + l->first[PART_SCHED], l->n[PART_SCHED]);
    for (int i = 0; i < l->n[PART_MODEL]; i++)
        em_copy_(e[i].tensor, em_safetensors_get(f, e[i].name));
    for (int i = l->first[PART_AVERAGE]; average_present && i < l->total; i++)
        em_copy_(e[i].tensor, em_safetensors_get(f, e[i].name));
    if (average_present)
        em_averaged_model_set_count(s->average, (int64_t)average_count);
    if (s->scheduler && (int64_t)sched_step >= 0)
        em_scheduler_set_last_step(s->scheduler, (int64_t)sched_step);
    em_generator *rng = s->rng ? s->rng : em_default_generator();
    rng->seed = seed;
    rng->offset = offset;
    return s->loader ? em_loader_set_position(s->loader, pos) : EM_OK;
}

em_status em_train_checkpoint_load(const char *path, em_train_state *s)
{
    if (!path || !s || !s->model)
        return em_set_error(EM_ERR_ARG, "em_train_checkpoint_load: NULL path, state or model");
    em_safetensors *f = NULL;
    em_status st = em_safetensors_load(path, &f);
    if (st != EM_OK)
        return st;
    const char *const *part_prefix = file_prefixes(f, path);
    layout l;
    em_st_entry *e = part_prefix ? collect(s, part_prefix, &l) : NULL;
    em_param_ref *refs = e ? calloc((size_t)l.total + 1, sizeof *refs) : NULL;
    if (e && !refs)
        em_set_error(EM_ERR_MEMORY, "em_train_checkpoint_load: out of memory");
    st = refs ? restore(f, path, s, part_prefix, e, &l, refs) : em_error_status();
    free(refs);
    free_entries(e, e ? l.total : 0);
    em_safetensors_free(f);
    return st;
}
