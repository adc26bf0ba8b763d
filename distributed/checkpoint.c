/* Checkpoints of a distributed run: the model, optimizer, scheduler and scaler are the same on
 * every rank, so rank 0 writes them; what differs per rank (its generator and loader position)
 * is gathered into the file's metadata, and each rank restores its own on load. A run on
 * another number of ranks resumes at the same point of the epoch, its batches per epoch scaled
 * from the saved run's. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "distributed/dist.h"

#define PER_RANK 5 /* rng seed, rng offset, loader epoch, loader batch, loader batches */
#define KEY_MAX 48

enum { RNG_SEED, RNG_OFFSET, LOADER_EPOCH, LOADER_BATCH, LOADER_BATCHES };
static const char *const field_names[PER_RANK] = {"rng_seed", "rng_offset", "loader_epoch",
                                                  "loader_batch", "loader_batches"};

static em_generator *generator_of(const em_train_state *s)
{
    return s->rng ? s->rng : em_default_generator();
}

/* Every rank's (seed, offset, epoch, batch), rank r at row r: (world, PER_RANK) i64. */
static em_tensor *gather_rank_state(const em_train_state *s)
{
    const em_generator *g = generator_of(s);
    em_loader_pos pos = s->loader ? em_loader_position(s->loader) : (em_loader_pos){0};
    int64_t batches = s->loader ? em_loader_num_batches(s->loader) : 0;
    int64_t mine[PER_RANK] = {(int64_t)g->seed, (int64_t)g->offset, pos.epoch, pos.batch,
                              batches};
    if (!em_dist_initialized())
        return em_from_data(EM_SHAPE(1, PER_RANK), EM_I64, mine);
    em_tensor *row = em_from_data(EM_SHAPE(PER_RANK), EM_I64, mine);
    em_tensor *all = em_zeros(EM_SHAPE(em_dist_world_size(), PER_RANK), EM_I64);
    em_status st = row && all ? em_dist_allgather(row, all) : em_error_status();
    em_release(row);
    if (st != EM_OK) {
        em_release(all);
        return NULL;
    }
    return all;
}

/* Rank 0: the caller's metadata, the world size and every rank's state, written with s. */
static em_status write_file(const char *path, const em_train_state *s, const em_st_meta *meta,
                            int n_meta, const int64_t *ranks, int world)
{
    int n = n_meta + 1 + world * PER_RANK;
    em_st_meta *all = calloc((size_t)n, sizeof *all);
    char (*text)[2][KEY_MAX] = calloc((size_t)(1 + world * PER_RANK), sizeof *text);
    if (!all || !text) {
        free(all);
        free(text);
        return em_set_error(EM_ERR_MEMORY, "em_dist_checkpoint_save: out of memory");
    }
    for (int i = 0; i < n_meta; i++)
        all[i] = meta[i];
    snprintf(text[0][0], KEY_MAX, "dist.world_size");
    snprintf(text[0][1], KEY_MAX, "%d", world);
    for (int r = 0; r < world; r++)
        for (int f = 0; f < PER_RANK; f++) {
            int k = 1 + r * PER_RANK + f;
            snprintf(text[k][0], KEY_MAX, "dist.rank.%d.%s", r, field_names[f]);
            snprintf(text[k][1], KEY_MAX, "%" PRIu64, (uint64_t)ranks[r * PER_RANK + f]);
        }
    for (int k = 0; k < 1 + world * PER_RANK; k++)
        all[n_meta + k] = (em_st_meta){.key = text[k][0], .value = text[k][1]};
    em_status st = em_train_checkpoint_save(path, s, all, n);
    free(all);
    free(text);
    return st;
}

/* Every rank learns whether any failed: a failing rank (the highest), or -1. */
static int first_failed_rank(bool failed)
{
    if (!em_dist_initialized())
        return failed ? 0 : -1;
    em_tensor *flag = em_scalar(failed ? -em_dist_rank() : 1, EM_I64);
    if (!flag || em_dist_allreduce(flag, EM_DIST_MIN) != EM_OK) {
        em_release(flag);
        return em_dist_rank();
    }
    int64_t v = (int64_t)em_item(flag);
    em_release(flag);
    return v <= 0 ? (int)-v : -1;
}

em_status em_dist_checkpoint_save(const char *path, const em_train_state *s,
                                  const em_st_meta *meta, int n_meta)
{
    if (!path || !s || !s->model || n_meta < 0 || (n_meta > 0 && !meta))
        return em_set_error(EM_ERR_ARG, "em_dist_checkpoint_save: NULL path, state or model");
    em_tensor *ranks = gather_rank_state(s);
    if (!ranks)
        return em_error_status();
    em_status st = EM_OK;
    if (em_dist_rank() == 0)
        st = write_file(path, s, meta, n_meta, em_data_ptr(ranks), em_dist_world_size());
    em_release(ranks);
    int failed = first_failed_rank(st != EM_OK);
    if (st == EM_OK && failed >= 0)
        st = em_set_error(EM_ERR_IO, "em_dist_checkpoint_save: rank %d could not write %s",
                          failed, path);
    return st;
}

static em_status meta_u64(const em_safetensors *f, const char *path, const char *key,
                          uint64_t *v)
{
    if (!em_safetensors_meta_u64(f, key, v))
        return em_set_error(EM_ERR_IO, "em_dist_checkpoint_load: %s: metadata '%s' missing or "
                            "not an integer (not a checkpoint of a distributed run?)", path, key);
    return EM_OK;
}

/* The state this rank resumes from into fields, and the saved run's world size: its own rank's
 * when it had one, else rank 0's. A file that predates the batches per epoch (loader_batches)
 * resumes on its own world size only. */
static em_status read_rank_state(const char *path, uint64_t *fields, uint64_t *world, bool *own)
{
    em_safetensors *f = NULL;
    em_status st = em_safetensors_load(path, &f);
    if (st == EM_OK)
        st = meta_u64(f, path, "dist.world_size", world);
    *own = st == EM_OK && (uint64_t)em_dist_rank() < *world;
    int from = *own ? em_dist_rank() : 0;
    for (int k = 0; st == EM_OK && k < PER_RANK; k++) {
        char key[KEY_MAX];
        snprintf(key, sizeof key, "dist.rank.%d.%s", from, field_names[k]);
        if (k == LOADER_BATCHES && !em_safetensors_meta(f, key)) {
            fields[k] = 0;
            if (*world != (uint64_t)em_dist_world_size())
                st = em_set_error(EM_ERR_ARG, "em_dist_checkpoint_load: %s was written by %llu "
                                  "ranks, this run has %d, and it does not record the ranks' "
                                  "batches per epoch: resume it with %llu ranks", path,
                                  (unsigned long long)*world, em_dist_world_size(),
                                  (unsigned long long)*world);
        } else {
            st = meta_u64(f, path, key, &fields[k]);
        }
    }
    if (st == EM_OK && fields[LOADER_BATCH] > fields[LOADER_BATCHES] && fields[LOADER_BATCHES])
        st = em_set_error(EM_ERR_IO, "em_dist_checkpoint_load: %s: rank %d stood at batch %llu "
                          "of an epoch of %llu", path, from,
                          (unsigned long long)fields[LOADER_BATCH],
                          (unsigned long long)fields[LOADER_BATCHES]);
    em_safetensors_free(f);
    return st;
}

/* The run's state from path when it was saved by another number of ranks: the trainer's as a
 * run without a loader (its batches per epoch are another world's), then this rank's generator
 * (its own where the saved run had this rank, else its own seed at rank 0's offset) and the
 * loader at the same fraction of the epoch, rounded down (at most one batch is seen again). */
static em_status load_resized(const char *path, em_train_state *s, const uint64_t *fields,
                              bool own)
{
    em_generator *g = generator_of(s);
    uint64_t own_seed = g->seed;
    em_train_state without_loader = *s;
    without_loader.loader = NULL;
    em_status st = em_train_checkpoint_load(path, &without_loader);
    if (st != EM_OK)
        return st;
    g->seed = own ? fields[RNG_SEED] : own_seed;
    g->offset = fields[RNG_OFFSET];
    if (!s->loader)
        return EM_OK;
    int64_t batches = em_loader_num_batches(s->loader);
    int64_t at = fields[LOADER_BATCHES]
                     ? (int64_t)((__int128)fields[LOADER_BATCH] * batches /
                                 (int64_t)fields[LOADER_BATCHES])
                     : 0;
    return em_loader_set_position(s->loader, (em_loader_pos){(int64_t)fields[LOADER_EPOCH], at});
}

em_status em_dist_checkpoint_load(const char *path, em_train_state *s)
{
    if (!path || !s || !s->model)
        return em_set_error(EM_ERR_ARG, "em_dist_checkpoint_load: NULL path, state or model");
    uint64_t fields[PER_RANK], world = 0;
    bool own = false;
    em_status st = read_rank_state(path, fields, &world, &own);
    if (st == EM_OK && world != (uint64_t)em_dist_world_size())
        st = load_resized(path, s, fields, own);
    else if (st == EM_OK)
        st = em_train_checkpoint_load(path, s);
    if (st == EM_OK && world == (uint64_t)em_dist_world_size()) {
        em_generator *g = generator_of(s);
        g->seed = fields[RNG_SEED];
        g->offset = fields[RNG_OFFSET];
        if (s->loader)
            st = em_loader_set_position(s->loader, (em_loader_pos){(int64_t)fields[LOADER_EPOCH],
                                                                   (int64_t)fields[LOADER_BATCH]});
    }
    int failed = first_failed_rank(st != EM_OK);
    if (st == EM_OK && failed >= 0)
        st = em_set_error(EM_ERR_PEER, "em_dist_checkpoint_load: rank %d could not load %s",
                          failed, path);
    return st;
}
