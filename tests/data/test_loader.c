/* The DataLoader: identical batches for any worker count, shuffles by seed and epoch, drop_last,
 * epoch rollover, positions, worker failures and timeouts as errors, and early frees. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/data.h"

/* Sample i is x = i * 100 + k over a (1, 2, 3) sample, y = i; get() can fail or be slow. */
typedef struct {
    em_dataset base;
    int64_t n;
    int64_t fail_at; /* -1: never */
    int sleep_us;
    int64_t skip_mod; /* 0: none; else samples with i % skip_mod == 1 are left out (EM_SKIP) */
} count_ds;

static int64_t count_len(const em_dataset *ds)
{
    return ((const count_ds *)ds)->n;
}

static em_status count_get(const em_dataset *ds, int64_t i, int64_t epoch, void *xv, void *y)
{
    (void)epoch;
    const count_ds *d = (const count_ds *)ds;
    float *x = xv;
    if (d->sleep_us)
        usleep((useconds_t)d->sleep_us);
    if (d->skip_mod && i % d->skip_mod == 1)
        return EM_SKIP;
    if (i == d->fail_at)
        return em_set_error(EM_ERR_IO, "count_ds: cannot read 'sample_%lld.bin'", (long long)i);
    for (int k = 0; k < 6; k++)
        x[k] = (float)(i * 100 + k);
    *(int64_t *)y = i;
    return EM_OK;
}

static void count_free(em_dataset *ds)
{
    free(ds);
}

static const em_dataset_vtable count_vt = {count_len, count_get, count_free};

static em_dataset *count_dataset(int64_t n, int64_t fail_at, int sleep_us)
{
    count_ds *d = calloc(1, sizeof *d);
    d->base = (em_dataset){.vt = &count_vt, .x_shape = EM_SHAPE(1, 2, 3),
                           .y_shape = EM_SCALAR_SHAPE, .y_dtype = EM_I64, .n_classes = n};
    d->n = n;
    d->fail_at = fail_at;
    d->sleep_us = sleep_us;
    return &d->base;
}

/* Every byte of one epoch's batches, in order. */
typedef struct {
    unsigned char *bytes;
    size_t len;
    int batches;
    int64_t rows;
} epoch_dump;

static epoch_dump dump_epoch(em_loader *dl)
{
    epoch_dump d = {0};
    em_batch b;
    em_status st;
    while ((st = em_loader_next(dl, &b)) == EM_OK) {
        size_t nx = (size_t)em_numel(b.x) * 4, ny = (size_t)em_numel(b.y) * 8;
        d.bytes = realloc(d.bytes, d.len + nx + ny);
        memcpy(d.bytes + d.len, em_data_ptr(b.x), nx);
        memcpy(d.bytes + d.len + nx, em_data_ptr(b.y), ny);
        d.len += nx + ny;
        d.batches++;
        d.rows += b.x->shape[0];
        em_release(b.x);
        em_release(b.y);
    }
    cr_assert_eq(st, EM_END, "%s", em_error());
    return d;
}

/* Without workers the batch is filled in place; a sample the dataset skips leaves its row out
 * there too, and a batch whose every sample is skipped is passed over. */
Test(loader, skipped_samples_leave_their_rows_out_for_any_worker_count)
{
    em_dataset *ds = count_dataset(11, -1, 0);
    ((count_ds *)ds)->skip_mod = 2; /* every odd sample */
    for (int workers = 0; workers <= 2; workers++) {
        em_loader *dl = em_loader_new(ds, (em_loader_opts){.batch_size = 3,
                                                           .num_workers = workers});
        /* samples 0..10 in batches of 3, the odd ones skipped: {0, 2}, {4}, {6, 8}, {10} */
        static const int64_t rows[] = {2, 1, 2, 1}, first[] = {0, 4, 6, 10};
        em_batch b;
        for (int i = 0; i < 4; i++) {
            cr_assert_eq(em_loader_next(dl, &b), EM_OK, "%s", em_error());
            cr_assert_eq(b.x->shape[0], rows[i], "workers %d, batch %d", workers, i);
            cr_assert_eq(b.y->shape[0], rows[i]);
            cr_assert(em_is_contiguous(b.x));
            const float *x = em_data_ptr(b.x);
            const int64_t *y = em_data_ptr(b.y);
            for (int64_t r = 0; r < rows[i]; r++) {
                cr_assert_eq(y[r], first[i] + 2 * r, "workers %d, batch %d", workers, i);
                cr_assert_float_eq(x[r * 6 + 5], (float)(y[r] * 100 + 5), 0);
            }
            em_release(b.x);
            em_release(b.y);
        }
        cr_assert_eq(em_loader_next(dl, &b), EM_END);
        em_loader_free(dl);
    }
    em_dataset_free(ds);
}

Test(loader, same_batches_for_any_worker_count)
{
    em_dataset *ds = count_dataset(53, -1, 0);
    em_transform tfs[2] = {em_transform_random_hflip(0.5f), em_transform_random_crop(2, 3, 1)};
    epoch_dump ref[2];
    static const int workers[] = {0, 1, 2, 4};
    for (int w = 0; w < 4; w++) {
        for (int persistent = 0; persistent < 2; persistent++) {
            em_loader *dl = em_loader_new(ds, (em_loader_opts){
                .batch_size = 8, .shuffle = true, .seed = 17, .num_workers = workers[w],
                .persistent_workers = persistent, .transforms = tfs, .n_transforms = 2});
            cr_assert_not_null(dl, "%s", em_error());
            for (int e = 0; e < 2; e++) {
                epoch_dump d = dump_epoch(dl);
                cr_assert_eq(d.batches, 7);
                cr_assert_eq(d.rows, 53);
                if (w == 0 && !persistent) {
                    ref[e] = d;
                    continue;
                }
                cr_assert_eq(d.len, ref[e].len);
                cr_assert_arr_eq(d.bytes, ref[e].bytes, d.len, "workers %d, epoch %d",
                                 workers[w], e);
                free(d.bytes);
            }
            em_loader_free(dl);
        }
    }
    cr_assert(ref[0].len == ref[1].len && memcmp(ref[0].bytes, ref[1].bytes, ref[0].len) != 0,
              "epochs 0 and 1 should be shuffled differently");
    free(ref[0].bytes);
    free(ref[1].bytes);
    em_dataset_free(ds);
}

/* The sample indices of one epoch, in order. */
static int64_t epoch_order(em_loader *dl, int64_t *order)
{
    int64_t n = 0;
    em_batch b;
    while (em_loader_next(dl, &b) == EM_OK) {
        const int64_t *y = em_data_ptr(b.y);
        for (int64_t r = 0; r < b.y->shape[0]; r++)
            order[n++] = y[r];
        em_release(b.x);
        em_release(b.y);
    }
    return n;
}

Test(loader, shuffle_is_a_permutation_fixed_by_seed_and_epoch)
{
    em_dataset *ds = count_dataset(40, -1, 0);
    int64_t a[40], b[40], c[40], plain[40];
    em_loader *l1 = em_loader_new(ds, (em_loader_opts){.batch_size = 6, .shuffle = true,
                                                       .seed = 5, .num_workers = 2});
    em_loader *l2 = em_loader_new(ds, (em_loader_opts){.batch_size = 6, .shuffle = true,
                                                       .seed = 5});
    em_loader *l3 = em_loader_new(ds, (em_loader_opts){.batch_size = 6, .shuffle = true,
                                                       .seed = 6});
    em_loader *l4 = em_loader_new(ds, (em_loader_opts){.batch_size = 6});
    cr_assert_eq(epoch_order(l1, a), 40);
    cr_assert_eq(epoch_order(l2, b), 40);
    cr_assert_eq(epoch_order(l3, c), 40);
    cr_assert_eq(epoch_order(l4, plain), 40);
    cr_assert_arr_eq(a, b, sizeof a);
    cr_assert(memcmp(a, c, sizeof a) != 0, "seeds 5 and 6 gave the same order");
    bool seen[40] = {0};
    for (int i = 0; i < 40; i++) {
        cr_assert(a[i] >= 0 && a[i] < 40 && !seen[a[i]]);
        seen[a[i]] = true;
        cr_assert_eq(plain[i], i);
    }
    cr_assert(memcmp(a, plain, sizeof a) != 0);
    cr_assert_eq(epoch_order(l1, c), 40); /* epoch 1 differs from epoch 0 */
    cr_assert(memcmp(a, c, sizeof a) != 0);
    em_loader_free(l1);
    em_loader_free(l2);
    em_loader_free(l3);
    em_loader_free(l4);
    em_dataset_free(ds);
}

Test(loader, drop_last_and_epoch_rollover)
{
    em_dataset *ds = count_dataset(37, -1, 0);
    em_loader *keep = em_loader_new(ds, (em_loader_opts){.batch_size = 8, .num_workers = 2});
    em_loader *drop = em_loader_new(ds, (em_loader_opts){.batch_size = 8, .drop_last = true,
                                                         .num_workers = 2});
    cr_assert_eq(em_loader_num_batches(keep), 5);
    cr_assert_eq(em_loader_num_batches(drop), 4);
    for (int epoch = 0; epoch < 3; epoch++) {
        em_batch b;
        for (int i = 0; i < 5; i++) {
            cr_assert_eq(em_loader_next(keep, &b), EM_OK, "%s", em_error());
            cr_assert_eq(b.epoch, epoch);
            cr_assert_eq(b.index, i);
            cr_assert_eq(b.x->ndim, 4);
            cr_assert_eq(b.x->shape[0], i < 4 ? 8 : 5);
            cr_assert(b.x->shape[1] == 1 && b.x->shape[2] == 2 && b.x->shape[3] == 3);
            cr_assert_eq(b.y->ndim, 1);
            cr_assert_eq(b.y->dtype, EM_I64);
            cr_assert_eq(((int64_t *)em_data_ptr(b.y))[0], 8 * i);
            cr_assert_eq(((float *)em_data_ptr(b.x))[6 + 2], (float)((8 * i + 1) * 100 + 2));
            em_release(b.x);
            em_release(b.y);
        }
        cr_assert_eq(em_loader_next(keep, &b), EM_END);
        cr_assert_null(b.x);
        epoch_dump d = dump_epoch(drop);
        cr_assert_eq(d.batches, 4);
        cr_assert_eq(d.rows, 32);
        free(d.bytes);
    }
    em_loader_free(keep);
    em_loader_free(drop);
    em_dataset_free(ds);
}

Test(loader, worker_failure_is_an_error_not_a_hang, .timeout = 20)
{
    em_dataset *ds = count_dataset(40, 21, 0);
    for (int workers = 0; workers <= 2; workers += 2) {
        em_loader *dl = em_loader_new(ds, (em_loader_opts){.batch_size = 4,
                                                           .num_workers = workers});
        em_batch b;
        for (int i = 0; i < 5; i++) {
            cr_assert_eq(em_loader_next(dl, &b), EM_OK, "%s", em_error());
            em_release(b.x);
            em_release(b.y);
        }
        /* batch 5 holds samples 20..23 */
        cr_assert_eq(em_loader_next(dl, &b), EM_ERR_IO);
        cr_assert_null(b.x);
        cr_assert_not_null(strstr(em_error(), "sample_21.bin"), "%s", em_error());
        em_error_clear();
        cr_assert_eq(em_loader_next(dl, &b), EM_OK, "%s", em_error()); /* goes on after it */
        cr_assert_eq(b.index, 6);
        em_release(b.x);
        em_release(b.y);
        em_loader_free(dl);
    }
    em_dataset_free(ds);
}

Test(loader, timeout_then_free, .timeout = 20)
{
    em_dataset *ds = count_dataset(8, -1, 200000);
    em_loader *dl = em_loader_new(ds, (em_loader_opts){.batch_size = 2, .num_workers = 2,
                                                       .timeout_ms = 30});
    em_batch b;
    cr_assert_eq(em_loader_next(dl, &b), EM_ERR_TIMEOUT);
    cr_assert_not_null(strstr(em_error(), "30 ms"), "%s", em_error());
    em_error_clear();
    em_loader_free(dl);
    em_dataset_free(ds);
}

Test(loader, free_mid_epoch_and_before_start, .timeout = 20)
{
    em_dataset *ds = count_dataset(200, -1, 100);
    for (int persistent = 0; persistent < 2; persistent++) {
        em_loader *dl = em_loader_new(ds, (em_loader_opts){
            .batch_size = 4, .shuffle = true, .num_workers = 4, .persistent_workers = persistent});
        em_batch b;
        cr_assert_eq(em_loader_next(dl, &b), EM_OK);
        em_release(b.x);
        em_release(b.y);
        em_loader_free(dl);
    }
    em_loader_free(em_loader_new(ds, (em_loader_opts){.num_workers = 3}));
    em_loader_free(NULL);
    em_dataset_free(ds);
}

Test(loader, position_round_trip)
{
    em_dataset *ds = count_dataset(30, -1, 0);
    em_loader_opts o = {.batch_size = 4, .shuffle = true, .seed = 3, .num_workers = 2};
    em_loader *dl = em_loader_new(ds, o);
    em_batch b;
    for (int i = 0; i < 8 + 3; i++) { /* all of epoch 0 (8 batches), EM_END, then 2 more */
        em_status st = em_loader_next(dl, &b);
        if (st == EM_OK) {
            em_release(b.x);
            em_release(b.y);
        }
    }
    em_loader_pos pos = em_loader_position(dl);
    cr_assert_eq(pos.epoch, 1);
    cr_assert_eq(pos.batch, 2);
    cr_assert_eq(em_loader_next(dl, &b), EM_OK);
    int64_t want[4];
    memcpy(want, em_data_ptr(b.y), sizeof want);
    em_release(b.x);
    em_release(b.y);

    em_loader *other = em_loader_new(ds, o); /* a resumed run */
    cr_assert_eq(em_loader_set_position(other, pos), EM_OK);
    cr_assert_eq(em_loader_next(other, &b), EM_OK);
    cr_assert_eq(b.epoch, 1);
    cr_assert_eq(b.index, 2);
    cr_assert_arr_eq(em_data_ptr(b.y), want, sizeof want);
    em_release(b.x);
    em_release(b.y);

    cr_assert_eq(em_loader_set_position(dl, pos), EM_OK); /* rewinds mid-epoch, prefetch dropped */
    cr_assert_eq(em_loader_next(dl, &b), EM_OK);
    cr_assert_arr_eq(em_data_ptr(b.y), want, sizeof want);
    em_release(b.x);
    em_release(b.y);

    cr_assert_eq(em_loader_set_position(dl, (em_loader_pos){0, 99}), EM_ERR_ARG);
    em_error_clear();
    em_loader_free(dl);
    em_loader_free(other);
    em_dataset_free(ds);
}

Test(loader, batches_belong_to_the_callers_scope)
{
    em_dataset *ds = count_dataset(16, -1, 0);
    em_loader *dl = em_loader_new(ds, (em_loader_opts){.batch_size = 4, .num_workers = 2});
    size_t before = em_memory_get_stats(EM_CPU).live_bytes;
    em_batch b;
    for (int i = 0; i < 4; i++) {
        em_scope_begin();
        cr_assert_eq(em_loader_next(dl, &b), EM_OK, "%s", em_error());
        cr_assert_eq(em_numel(b.x), 4 * 6);
        em_scope_end();
    }
    cr_assert_eq(em_memory_get_stats(EM_CPU).live_bytes, before);
    em_loader_free(dl);
    em_dataset_free(ds);
}

Test(loader, tensor_dataset_with_normalize)
{
    float xv[6 * 2] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
    float yv[6] = {0.5f, 1.5f, 2.5f, 3.5f, 4.5f, 5.5f};
    em_tensor *x = em_from_data(EM_SHAPE(6, 2), EM_F32, xv);
    em_tensor *y = em_from_data(EM_SHAPE(6), EM_F32, yv);
    em_dataset *ds = em_tensor_dataset(x, y);
    em_release(x);
    em_release(y);
    float mean = 1, std = 2;
    em_transform tf = em_transform_normalize(1, &mean, &std);
    em_loader *dl = em_loader_new(ds, (em_loader_opts){.batch_size = 4, .num_workers = 1,
                                                       .transforms = &tf, .n_transforms = 1});
    em_batch b;
    cr_assert_eq(em_loader_next(dl, &b), EM_OK, "%s", em_error());
    cr_assert_eq(b.y->dtype, EM_F32);
    cr_assert_eq(((float *)em_data_ptr(b.x))[3], (3 - 1) / 2.0f);
    cr_assert_eq(((float *)em_data_ptr(b.y))[3], 3.5f);
    em_release(b.x);
    em_release(b.y);
    em_loader_free(dl);

    em_transform crop = em_transform_random_crop(2, 2, 0); /* needs an image sample */
    cr_assert_null(em_loader_new(ds, (em_loader_opts){.transforms = &crop, .n_transforms = 1}));
    em_error_clear();
    cr_assert_null(em_loader_new(ds, (em_loader_opts){.num_workers = -1}));
    em_error_clear();
    em_dataset_free(ds);
}
