/* The data API a user builds on: subsets, random_split and ConcatDataset, samplers (sequential,
 * random, weighted) in the loader, a user collate function, user transforms, integer features
 * and the epoch handed to a dataset's get. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/data.h"

/* Sample i of epoch e: x = (i, 1000 e + i) as f32, y = i. */
typedef struct {
    em_dataset base;
    int64_t n;
} epoch_ds;

static int64_t epoch_len(const em_dataset *ds)
{
    return ((const epoch_ds *)ds)->n;
}

static em_status epoch_get(const em_dataset *ds, int64_t i, int64_t epoch, void *xv, void *y)
{
    (void)ds;
    float *x = xv;
    x[0] = (float)i;
    x[1] = (float)(1000 * epoch + i);
    *(int64_t *)y = i;
    return EM_OK;
}

static void epoch_free(em_dataset *ds)
{
    free(ds);
}

static const em_dataset_vtable epoch_vt = {epoch_len, epoch_get, epoch_free};

static em_dataset *epoch_dataset(int64_t n)
{
    epoch_ds *d = calloc(1, sizeof *d);
    d->base = (em_dataset){.vt = &epoch_vt, .x_shape = EM_SHAPE(2), .y_shape = EM_SCALAR_SHAPE,
                           .y_dtype = EM_I64, .n_classes = n};
    d->n = n;
    return &d->base;
}

/* The y (dataset index) of every row of one epoch, in order; returns the count. */
static int64_t epoch_rows(em_loader *dl, int64_t *rows, int64_t cap)
{
    int64_t n = 0;
    em_batch b;
    em_status st;
    while ((st = em_loader_next(dl, &b)) == EM_OK) {
        const int64_t *y = em_data_ptr(b.y);
        for (int64_t r = 0; r < b.y->shape[0]; r++) {
            cr_assert_lt(n, cap);
            rows[n++] = y[r];
        }
        em_release(b.x);
        em_release(b.y);
    }
    cr_assert_eq(st, EM_END, "%s", em_error());
    return n;
}

static bool is_permutation(const int64_t *v, int64_t n)
{
    bool *seen = calloc((size_t)n, 1);
    bool ok = true;
    for (int64_t i = 0; i < n && ok; i++) {
        ok = v[i] >= 0 && v[i] < n && !seen[v[i]];
        if (ok)
            seen[v[i]] = true;
    }
    free(seen);
    return ok;
}

/* ---- subsets ---- */

Test(data_api, subset_reads_the_parents_samples)
{
    em_dataset *ds = epoch_dataset(10);
    int64_t pick[3] = {7, 2, 7};
    em_dataset *sub = em_subset(ds, pick, 3);
    cr_assert_not_null(sub, "%s", em_error());
    cr_assert_eq(em_dataset_len(sub), 3);
    cr_assert_eq(sub->n_classes, 10);
    for (int k = 0; k < 3; k++) {
        float x[2];
        int64_t y;
        cr_assert_eq(em_dataset_get(sub, k, x, &y), EM_OK);
        cr_assert(y == pick[k] && x[0] == (float)pick[k]);
    }
    em_dataset_free(sub);
    int64_t bad[2] = {1, 10};
    cr_assert_null(em_subset(ds, bad, 2));
    cr_assert_not_null(strstr(em_error(), "index 10 (entry 1) out of range [0, 10)"), "%s",
                       em_error());
    em_error_clear();
    em_dataset_free(ds);
}

Test(data_api, random_split_partitions_by_seed)
{
    em_dataset *ds = epoch_dataset(10);
    int64_t lengths[3] = {3, 5, 2};
    em_dataset *a[3], *b[3], *c[3];
    cr_assert_eq(em_random_split(ds, lengths, 3, 42, a), EM_OK, "%s", em_error());
    cr_assert_eq(em_random_split(ds, lengths, 3, 42, b), EM_OK);
    cr_assert_eq(em_random_split(ds, lengths, 3, 43, c), EM_OK);
    int64_t all_a[10], all_c[10], n = 0;
    for (int k = 0; k < 3; k++) {
        cr_assert_eq(em_dataset_len(a[k]), lengths[k]);
        for (int64_t i = 0; i < lengths[k]; i++, n++) {
            float x[2];
            int64_t ya, yb, yc;
            em_dataset_get(a[k], i, x, &ya);
            em_dataset_get(b[k], i, x, &yb);
            em_dataset_get(c[k], i, x, &yc);
            cr_assert_eq(ya, yb, "the same seed splits alike");
            all_a[n] = ya;
            all_c[n] = yc;
        }
    }
    cr_assert(is_permutation(all_a, 10), "the subsets cover every sample once");
    cr_assert(memcmp(all_a, all_c, sizeof all_a) != 0, "another seed, another split");
    for (int k = 0; k < 3; k++) {
        em_dataset_free(a[k]);
        em_dataset_free(b[k]);
        em_dataset_free(c[k]);
    }
    int64_t short_lengths[2] = {3, 5};
    cr_assert_eq(em_random_split(ds, short_lengths, 2, 1, a), EM_ERR_ARG);
    cr_assert_not_null(strstr(em_error(), "add up to 8, the dataset holds 10"), "%s", em_error());
    em_error_clear();
    em_dataset_free(ds);
}

/* PyTorch 1.13's random_split(range(total), fractions) gives these lengths (computed with
 * torch.utils.data.random_split and printed as [len(s) for s in ...]). */
Test(data_api, split_lengths_from_fractions_as_pytorch)
{
    int64_t l[3];
    cr_assert_eq(em_split_lengths(11, (double[]){0.5, 0.5}, 2, l), EM_OK);
    cr_assert(l[0] == 6 && l[1] == 5);
    cr_assert_eq(em_split_lengths(10, (double[]){0.34, 0.33, 0.33}, 3, l), EM_OK);
    cr_assert(l[0] == 4 && l[1] == 3 && l[2] == 3);
    cr_assert_eq(em_split_lengths(7, (double[]){0.1, 0.2, 0.7}, 3, l), EM_OK);
    cr_assert(l[0] == 1 && l[1] == 2 && l[2] == 4);
    cr_assert_eq(em_split_lengths(7, (double[]){0.5, 0.6}, 2, l), EM_ERR_ARG);
    cr_assert_not_null(strstr(em_error(), "add up to 1.1, not 1"), "%s", em_error());
    em_error_clear();
}

/* ---- samplers ---- */

Test(data_api, sequential_and_random_samplers)
{
    int64_t v[25], w[25];
    em_sampler *seq = em_sequential_sampler(10);
    cr_assert_eq(em_sampler_len(seq), 10);
    cr_assert_eq(em_sampler_indices(seq, 5, 3, v), EM_OK);
    for (int i = 0; i < 10; i++)
        cr_assert_eq(v[i], i);
    em_sampler_free(seq);

    em_sampler *rnd = em_random_sampler(10, (em_random_sampler_opts){0});
    cr_assert_eq(em_sampler_indices(rnd, 5, 0, v), EM_OK);
    cr_assert_eq(em_sampler_indices(rnd, 5, 0, w), EM_OK);
    cr_assert(is_permutation(v, 10));
    cr_assert_arr_eq(v, w, 10 * sizeof *v, "a pure function of (seed, epoch)");
    cr_assert_eq(em_sampler_indices(rnd, 5, 1, w), EM_OK);
    cr_assert(is_permutation(w, 10) && memcmp(v, w, 10 * sizeof *v) != 0, "a new epoch");
    em_sampler_free(rnd);

    /* 25 > 10 without replacement: two whole permutations, then the start of a third */
    em_sampler *more = em_random_sampler(10, (em_random_sampler_opts){.num_samples = 25});
    cr_assert_eq(em_sampler_len(more), 25);
    cr_assert_eq(em_sampler_indices(more, 5, 0, w), EM_OK);
    cr_assert_arr_eq(w, v, 10 * sizeof *v, "the first permutation is the plain shuffle");
    cr_assert(is_permutation(w + 10, 10));
    bool seen[10] = {0};
    for (int i = 20; i < 25; i++) {
        cr_assert(w[i] >= 0 && w[i] < 10 && !seen[w[i]]);
        seen[w[i]] = true;
    }
    em_sampler_free(more);

    /* with replacement: 20000 draws of 4 indices, each near 5000 (a fixed seed: no flake) */
    em_sampler *rep = em_random_sampler(4, (em_random_sampler_opts){.replacement = true,
                                                                    .num_samples = 20000});
    int64_t *d = malloc(20000 * sizeof *d);
    cr_assert_eq(em_sampler_indices(rep, 9, 0, d), EM_OK);
    int count[4] = {0};
    for (int i = 0; i < 20000; i++) {
        cr_assert(d[i] >= 0 && d[i] < 4);
        count[d[i]]++;
    }
    for (int k = 0; k < 4; k++)
        cr_assert(abs(count[k] - 5000) < 250, "index %d drawn %d times", k, count[k]);
    free(d);
    em_sampler_free(rep);
}

Test(data_api, weighted_sampler_frequencies)
{
    double weights[4] = {1, 0, 3, 4};
    em_sampler *s = em_weighted_random_sampler(weights, 4, 40000, true);
    cr_assert_not_null(s, "%s", em_error());
    int64_t *d = malloc(40000 * sizeof *d);
    cr_assert_eq(em_sampler_indices(s, 3, 0, d), EM_OK);
    int count[4] = {0};
    for (int i = 0; i < 40000; i++)
        count[d[i]]++;
    cr_assert_eq(count[1], 0, "a zero weight is never drawn");
    double want[4] = {5000, 0, 15000, 20000}; /* 40000 * w / 8 */
    for (int k = 0; k < 4; k++)
        cr_assert(fabs(count[k] - want[k]) < 400, "index %d drawn %d times, want ~%g", k,
                  count[k], want[k]);
    em_sampler_free(s);

    /* without replacement: each index once at most, the first pick has probability w / 8 */
    em_sampler *wo = em_weighted_random_sampler(weights, 4, 3, false);
    int first[4] = {0};
    for (int e = 0; e < 8000; e++) {
        int64_t v[3];
        cr_assert_eq(em_sampler_indices(wo, 3, e, v), EM_OK);
        cr_assert(v[0] != v[1] && v[0] != v[2] && v[1] != v[2]);
        cr_assert(v[0] != 1 && v[1] != 1 && v[2] != 1, "zero weight drawn");
        first[v[0]]++;
    }
    cr_assert(abs(first[0] - 1000) < 120 && abs(first[2] - 3000) < 150 &&
              abs(first[3] - 4000) < 150, "first picks %d %d %d", first[0], first[2], first[3]);
    em_sampler_free(wo);
    free(d);

    cr_assert_null(em_weighted_random_sampler(weights, 4, 4, false));
    cr_assert_not_null(strstr(em_error(), "4 samples without replacement from 3 positive"), "%s",
                       em_error());
    em_error_clear();
    cr_assert_null(em_weighted_random_sampler((double[]){1, -1}, 2, 1, true));
    cr_assert_not_null(strstr(em_error(), "weight 1 is -1"), "%s", em_error());
    em_error_clear();
    cr_assert_null(em_weighted_random_sampler((double[]){0, 0}, 2, 1, true));
    em_error_clear();
}

Test(data_api, loader_takes_a_sampler_for_any_worker_count)
{
    em_dataset *ds = epoch_dataset(23);
    double weights[23];
    for (int i = 0; i < 23; i++)
        weights[i] = i % 3 == 0 ? 0 : i;
    em_sampler *s = em_weighted_random_sampler(weights, 23, 40, true);
    int64_t want[40], got[40];
    for (int epoch = 0; epoch < 2; epoch++) {
        cr_assert_eq(em_sampler_indices(s, 11, epoch, want), EM_OK);
        for (int workers = 0; workers <= 3; workers += 3) {
            em_loader *dl = em_loader_new(ds, (em_loader_opts){.batch_size = 6, .sampler = s,
                                                              .seed = 11,
                                                              .num_workers = workers});
            cr_assert_not_null(dl, "%s", em_error());
            cr_assert_eq(em_loader_num_batches(dl), 7);
            for (int e = 0; e < epoch; e++)
                epoch_rows(dl, got, 40);
            cr_assert_eq(epoch_rows(dl, got, 40), 40);
            cr_assert_arr_eq(got, want, sizeof want, "epoch %d, %d workers", epoch, workers);
            em_loader_free(dl);
        }
    }
    /* shuffle is the random sampler */
    em_sampler *r = em_random_sampler(23, (em_random_sampler_opts){0});
    em_loader *a = em_loader_new(ds, (em_loader_opts){.batch_size = 5, .shuffle = true,
                                                     .seed = 4});
    em_loader *b = em_loader_new(ds, (em_loader_opts){.batch_size = 5, .sampler = r, .seed = 4});
    int64_t ra[23], rb[23];
    cr_assert_eq(epoch_rows(a, ra, 23), 23);
    cr_assert_eq(epoch_rows(b, rb, 23), 23);
    cr_assert_arr_eq(ra, rb, sizeof ra);
    cr_assert(is_permutation(ra, 23));
    em_loader_free(a);
    em_loader_free(b);
    cr_assert_null(em_loader_new(ds, (em_loader_opts){.sampler = r, .shuffle = true}));
    cr_assert_not_null(strstr(em_error(), "exclude each other"), "%s", em_error());
    em_error_clear();
    em_sampler_free(r);
    em_sampler_free(s);
    em_dataset_free(ds);
}

Test(data_api, sampler_index_out_of_range_is_an_error)
{
    em_dataset *ds = epoch_dataset(5);
    em_sampler *s = em_sequential_sampler(8);
    em_loader *dl = em_loader_new(ds, (em_loader_opts){.batch_size = 4, .sampler = s});
    em_batch b;
    cr_assert_eq(em_loader_next(dl, &b), EM_ERR_ARG);
    cr_assert_not_null(strstr(em_error(), "the sampler gave index 5 (entry 5 of epoch 0) for a "
                                          "dataset of 5 samples"), "%s", em_error());
    em_error_clear();
    em_loader_free(dl);
    em_sampler_free(s);
    em_dataset_free(ds);
}

/* ---- the epoch in get, integer features, collate ---- */

Test(data_api, get_sees_the_loaders_epoch)
{
    em_dataset *ds = epoch_dataset(6);
    for (int workers = 0; workers <= 2; workers += 2) {
        em_loader *dl = em_loader_new(ds, (em_loader_opts){.batch_size = 4,
                                                          .num_workers = workers});
        for (int epoch = 0; epoch < 3; epoch++) {
            em_batch b;
            while (em_loader_next(dl, &b) == EM_OK) {
                const float *x = em_data_ptr(b.x);
                for (int64_t r = 0; r < b.x->shape[0]; r++)
                    cr_assert_eq(x[2 * r + 1], 1000.0f * epoch + x[2 * r]);
                em_release(b.x);
                em_release(b.y);
            }
        }
        em_loader_free(dl);
    }
    em_dataset_free(ds);
}

/* A char-level language model's collate: each sample is T + 1 token ids; the batch is the
 * first T as x and the last T as y. */
static em_status shift_collate(void *ctx, const em_collate_input *in, em_batch *out)
{
    int64_t *calls = ctx;
    ++*calls;
    int64_t t = in->x_shape.d[0] - 1;
    const int64_t *tok = in->x;
    em_tensor *x = em_empty(EM_SHAPE(in->rows, t), EM_I64);
    em_tensor *y = em_empty(EM_SHAPE(in->rows, t), EM_I64);
    int64_t *px = em_data_ptr(x), *py = em_data_ptr(y);
    for (int64_t r = 0; r < in->rows; r++)
        for (int64_t k = 0; k < t; k++) {
            px[r * t + k] = tok[r * (t + 1) + k];
            py[r * t + k] = tok[r * (t + 1) + k + 1];
        }
    out->x = x;
    out->y = y;
    return EM_OK;
}

Test(data_api, integer_features_and_a_collate_for_a_language_model)
{
    /* 5 windows of 4 token ids over "abcdefgh": window i starts at i */
    int64_t tokens[5][4];
    for (int i = 0; i < 5; i++)
        for (int k = 0; k < 4; k++)
            tokens[i][k] = 'a' + i + k;
    em_tensor *tx = em_from_data(EM_SHAPE(5, 4), EM_I64, tokens);
    em_tensor *ty = em_zeros(EM_SHAPE(5), EM_I64);
    em_dataset *ds = em_tensor_dataset(tx, ty);
    cr_assert_eq(ds->x_dtype, EM_I64, "token ids stay integers");

    em_loader *plain = em_loader_new(ds, (em_loader_opts){.batch_size = 5});
    em_batch b;
    cr_assert_eq(em_loader_next(plain, &b), EM_OK);
    cr_assert_eq(b.x->dtype, EM_I64);
    cr_assert_arr_eq(em_data_ptr(b.x), tokens, sizeof tokens);
    em_release(b.x);
    em_release(b.y);
    em_loader_free(plain);

    int64_t calls = 0;
    em_loader *dl = em_loader_new(ds, (em_loader_opts){.batch_size = 2, .num_workers = 2,
                                                      .collate = shift_collate,
                                                      .collate_ctx = &calls});
    int64_t first = 0;
    while (em_loader_next(dl, &b) == EM_OK) {
        cr_assert_eq(b.x->ndim, 2);
        cr_assert_eq(b.x->shape[1], 3);
        const int64_t *x = em_data_ptr(b.x), *y = em_data_ptr(b.y);
        for (int64_t r = 0; r < b.x->shape[0]; r++)
            for (int k = 0; k < 3; k++) {
                cr_assert_eq(x[r * 3 + k], 'a' + first + r + k);
                cr_assert_eq(y[r * 3 + k], 'a' + first + r + k + 1);
            }
        first += b.x->shape[0];
        em_release(b.x);
        em_release(b.y);
    }
    cr_assert_eq(first, 5);
    cr_assert_eq(calls, 3);
    em_loader_free(dl);

    em_transform flip = em_transform_random_hflip(0.5f);
    cr_assert_null(em_loader_new(ds, (em_loader_opts){.transforms = &flip, .n_transforms = 1}));
    cr_assert_not_null(strstr(em_error(), "transform 0 needs f32 samples; the dataset's are i64"),
                       "%s", em_error());
    em_error_clear();
    em_dataset_free(ds);
    em_release(tx);
    em_release(ty);
}

static em_status failing_collate(void *ctx, const em_collate_input *in, em_batch *out)
{
    (void)ctx;
    (void)out;
    return em_set_error(EM_ERR_ARG, "my_collate: batch %lld has %lld rows", (long long)in->batch,
                        (long long)in->rows);
}

Test(data_api, collate_failure_is_reported)
{
    em_dataset *ds = epoch_dataset(3);
    em_loader *dl = em_loader_new(ds, (em_loader_opts){.batch_size = 2,
                                                      .collate = failing_collate});
    em_batch b;
    cr_assert_eq(em_loader_next(dl, &b), EM_ERR_ARG);
    cr_assert_str_eq(em_error(), "my_collate: batch 0 has 2 rows");
    cr_assert_null(b.x);
    em_error_clear();
    em_loader_free(dl);
    em_dataset_free(ds);
}

/* ---- user transforms ---- */

/* (2) -> (1): x[0] + x[1] * scale + a random number of the call (so the result shows it). */
static em_status sum_transform(void *ctx, const em_transform_call *call, em_shape in,
                               const void *xv, void *outv)
{
    (void)in;
    const float *x = xv;
    float *out = outv;
    out[0] = x[0] + x[1] * *(const float *)ctx + (float)em_transform_uniform(call, 0);
    return EM_OK;
}

static em_status sum_shape(void *ctx, em_shape in, em_shape *out)
{
    (void)ctx;
    if (in.ndim != 1 || in.d[0] != 2)
        return em_set_error(EM_ERR_ARG, "sum_transform: needs (2) samples");
    *out = EM_SHAPE(1);
    return EM_OK;
}

Test(data_api, custom_transform_is_deterministic_for_any_worker_count)
{
    em_dataset *ds = epoch_dataset(9);
    float scale = 0.5f;
    em_transform tf = em_transform_custom(sum_transform, sum_shape, &scale);
    float got[2][2][9];
    for (int w = 0; w < 2; w++) {
        em_loader *dl = em_loader_new(ds, (em_loader_opts){.batch_size = 4, .seed = 7,
                                                          .num_workers = 2 * w,
                                                          .transforms = &tf, .n_transforms = 1});
        cr_assert_not_null(dl, "%s", em_error());
        for (int epoch = 0; epoch < 2; epoch++) {
            em_batch b;
            int64_t at = 0;
            while (em_loader_next(dl, &b) == EM_OK) {
                cr_assert(b.x->ndim == 2 && b.x->shape[1] == 1);
                memcpy(&got[w][epoch][at], em_data_ptr(b.x), (size_t)b.x->shape[0] * 4);
                at += b.x->shape[0];
                em_release(b.x);
                em_release(b.y);
            }
        }
        em_loader_free(dl);
    }
    cr_assert_arr_eq(got[0], got[1], sizeof got[0], "0 and 2 workers draw alike");
    for (int epoch = 0; epoch < 2; epoch++)
        for (int i = 0; i < 9; i++) {
            float base = i + 0.5f * (1000 * epoch + i), r = got[0][epoch][i] - base;
            cr_assert(r >= 0 && r < 1, "epoch %d sample %d: draw %g", epoch, i, r);
        }
    cr_assert_neq(got[0][0][0] - 0, got[0][1][0] - 500, "each epoch draws anew");
    em_transform_call call = {.seed = 7, .epoch = 1, .index = 3, .stage = 0};
    cr_assert_eq(em_transform_uniform(&call, 5), em_transform_uniform(&call, 5));
    cr_assert_neq(em_transform_uniform(&call, 5), em_transform_uniform(&call, 6));

    em_dataset *wide = epoch_dataset(2);
    wide->x_shape = EM_SHAPE(1, 2);
    cr_assert_null(em_loader_new(wide, (em_loader_opts){.transforms = &tf, .n_transforms = 1}));
    cr_assert_str_eq(em_error(), "sum_transform: needs (2) samples");
    em_error_clear();
    em_dataset_free(wide);
    em_dataset_free(ds);
}

/* ---- ConcatDataset ---- */

/* Parts of 3, 0 and 4 samples: the whole has 7, sample i of part k at its cumulative offset
 * (PyTorch's bisect over cumulative_sizes), n_classes the largest part's; a loader reads it
 * all; parts whose samples differ are refused naming the part. */
Test(data_api, concat_dataset_reads_its_parts_in_turn)
{
    em_dataset *a = epoch_dataset(3), *empty = epoch_dataset(0), *b = epoch_dataset(4);
    em_dataset *ds = em_concat_dataset((const em_dataset *[]){a, empty, b}, 3);
    cr_assert_not_null(ds, "%s", em_error());
    cr_assert_eq(em_dataset_len(ds), 7);
    cr_assert_eq(ds->n_classes, 4);
    const int64_t want[7] = {0, 1, 2, 0, 1, 2, 3};
    for (int i = 0; i < 7; i++) {
        float x[2];
        int64_t y;
        cr_assert_eq(em_dataset_get(ds, i, x, &y), EM_OK, "%s", em_error());
        cr_expect(y == want[i] && x[0] == (float)want[i], "sample %d: y %lld", i, (long long)y);
    }
    cr_expect_eq(em_dataset_get(ds, 7, (float[2]){0}, &(int64_t){0}), EM_ERR_ARG);
    em_error_clear();
    em_loader *dl = em_loader_new(ds, (em_loader_opts){.batch_size = 3, .shuffle = true,
                                                       .seed = 2, .num_workers = 2});
    cr_assert_not_null(dl, "%s", em_error());
    int64_t rows[8], sorted[7] = {0};
    cr_assert_eq(epoch_rows(dl, rows, 8), 7);
    for (int i = 0; i < 7; i++)
        sorted[rows[i]]++;
    cr_expect(sorted[0] == 2 && sorted[1] == 2 && sorted[2] == 2 && sorted[3] == 1,
              "every sample once: part a's 0..2 and part b's 0..3");
    em_loader_free(dl);
    em_dataset_free(ds);

    em_tensor *x = em_zeros(EM_SHAPE(2, 3), EM_F32), *y = em_zeros(EM_SHAPE(2), EM_I64);
    em_dataset *wide = em_tensor_dataset(x, y);
    cr_assert_null(em_concat_dataset((const em_dataset *[]){a, wide}, 2));
    cr_expect_str_eq(em_error(), "em_concat_dataset: part 1's samples are x f32 [3], y i64 []; "
                                 "part 0's x f32 [2], y i64 []");
    em_error_clear();
    cr_assert_null(em_concat_dataset(NULL, 0));
    cr_expect_str_eq(em_error(), "em_concat_dataset: needs at least one dataset");
    em_error_clear();
    em_release(x);
    em_release(y);
    em_dataset_free(wide);
    em_dataset_free(a);
    em_dataset_free(empty);
    em_dataset_free(b);
}
