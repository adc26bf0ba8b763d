/* Data files written by an attacker: an IDX header whose dims overflow a size, one that claims far
 * more bytes than its file holds, a loader asked for batches too big to address; each is a clear
 * error naming the file, never a crash or a huge allocation. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "ember.h"
#include "helpers/files.h"

static char dir[64];

static void make_dir(void)
{
    cr_assert(em_test_make_dir(dir, sizeof dir, "ember_hostile_"));
    em_error_clear();
}

static char *path_in_dir(const char *name)
{
    static char buf[8][256];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

static void remove_dir(void)
{
    em_test_remove_tree(dir);
}

TestSuite(hostile, .init = make_dir, .fini = remove_dir);

static void write_bytes(const char *path, const void *data, size_t n, bool gz)
{
    if (gz) {
        gzFile f = gzopen(path, "wb");
        cr_assert_not_null(f);
        cr_assert_eq(gzwrite(f, data, (unsigned)n), (int)n);
        gzclose(f);
        return;
    }
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(data, 1, n, f), n);
    fclose(f);
}

static const uint8_t four_labels[12] = {0, 0, 0x08, 1, 0, 0, 0, 4, 1, 2, 3, 4};

/* The header 00000803 00000004 80000000 80000000: 4 images of 2^31 x 2^31 pixels, whose product
 * wrapped to 0 and let the loader write past its buffer. */
Test(hostile, idx_dims_that_overflow_a_size)
{
    const uint8_t images[16] = {0, 0, 0x08, 3, 0, 0, 0, 4, 0x80, 0, 0, 0, 0x80, 0, 0, 0};
    for (int gz = 0; gz < 2; gz++) {
        const char *im = path_in_dir(gz ? "im.gz" : "im"), *lb = path_in_dir(gz ? "lb.gz" : "lb");
        write_bytes(im, images, sizeof images, gz);
        write_bytes(lb, four_labels, sizeof four_labels, gz);
        em_error_clear();
        cr_assert_null(em_idx_dataset(im, lb, (em_idx_opts){0}));
        cr_assert_eq(em_error_status(), EM_ERR_IO);
        cr_assert_not_null(strstr(em_error(), im), "%s", em_error());
        cr_assert_not_null(strstr(em_error(), "overflow"), "%s", em_error());
    }
}

/* 16 bytes that claim 65535 x 65535 x 65535 bytes (2^48): refused from the file's length before
 * anything of that size is allocated, raw or gzipped. */
Test(hostile, idx_claim_larger_than_the_file)
{
    const uint8_t images[16] = {0, 0, 0x08, 3, 0, 0, 0xff, 0xff, 0, 0, 0xff, 0xff, 0, 0, 0xff,
                                0xff};
    char want[512];
    write_bytes(path_in_dir("im"), images, sizeof images, false);
    write_bytes(path_in_dir("lb"), four_labels, sizeof four_labels, false);
    cr_assert_null(em_idx_dataset(path_in_dir("im"), path_in_dir("lb"), (em_idx_opts){0}));
    snprintf(want, sizeof want, "em_idx_dataset: '%s' is truncated: its header claims "
             "281462092005375 data bytes, the file holds 0", path_in_dir("im"));
    cr_assert_str_eq(em_error(), want);
    em_error_clear();
    write_bytes(path_in_dir("im.gz"), images, sizeof images, true);
    cr_assert_null(em_idx_dataset(path_in_dir("im.gz"), path_in_dir("lb"), (em_idx_opts){0}));
    cr_assert_eq(em_error_status(), EM_ERR_IO);
    snprintf(want, sizeof want, "em_idx_dataset: '%s' is corrupt: its header claims "
             "281462092005375 data bytes, more than ", path_in_dir("im.gz"));
    cr_assert(strncmp(em_error(), want, strlen(want)) == 0, "%s", em_error());
}

/* A gzipped header claiming 4 x 50 x 50 bytes that a small stream could hold, with no data: read
 * as it arrives, so it ends as a truncated file. */
Test(hostile, idx_gz_claim_within_reach_but_truncated)
{
    const uint8_t images[16] = {0, 0, 0x08, 3, 0, 0, 0, 4, 0, 0, 0, 50, 0, 0, 0, 50};
    write_bytes(path_in_dir("im.gz"), images, sizeof images, true);
    write_bytes(path_in_dir("lb"), four_labels, sizeof four_labels, false);
    cr_assert_null(em_idx_dataset(path_in_dir("im.gz"), path_in_dir("lb"), (em_idx_opts){0}));
    char want[512];
    snprintf(want, sizeof want, "em_idx_dataset: '%s' is truncated or corrupt (expected 10000 "
             "data bytes)", path_in_dir("im.gz"));
    cr_assert_str_eq(em_error(), want);
}

/* A dataset that declares huge samples and never reads any. */
typedef struct {
    em_dataset base;
} huge_dataset;

static int64_t huge_len(const em_dataset *ds)
{
    (void)ds;
    return 4;
}

static em_status huge_get(const em_dataset *ds, int64_t i, int64_t epoch, void *x, void *y)
{
    (void)ds, (void)i, (void)epoch, (void)x, (void)y;
    return em_set_error(EM_ERR_STATE, "huge_get: never called");
}

static void huge_free(em_dataset *ds)
{
    (void)ds;
}

static const em_dataset_vtable huge_vt = {huge_len, huge_get, huge_free};

/* batch x sample bytes past what a size holds, and a sample shape whose own product overflows */
Test(hostile, loader_batch_arithmetic_that_overflows)
{
    huge_dataset ds = {{.vt = &huge_vt, .x_shape = EM_SHAPE((int64_t)1 << 40), .y_dtype = EM_I64}};
    cr_assert_null(em_loader_new(&ds.base, (em_loader_opts){.batch_size = (int64_t)1 << 30}));
    cr_assert_eq(em_error_status(), EM_ERR_ARG);
    cr_assert_not_null(strstr(em_error(), "overflows a size"), "%s", em_error());
    em_error_clear();
    ds.base.x_shape = EM_SHAPE((int64_t)1 << 32, (int64_t)1 << 32);
    cr_assert_null(em_loader_new(&ds.base, (em_loader_opts){.batch_size = 1}));
    cr_assert_str_eq(em_error(), "em_loader_new: the dataset's sample shape [4294967296,"
                                 "4294967296] overflows a size");
}

Test(hostile, size_mul_checks_every_product)
{
    int64_t r = -1;
    cr_assert(em_size_mul(3, 5, &r) && r == 15);
    cr_assert(em_size_mul(0, INT64_MAX, &r) && r == 0);
    cr_assert(em_size_mul(INT64_MAX, 1, &r) && r == INT64_MAX);
    cr_assert(!em_size_mul((int64_t)1 << 32, (int64_t)1 << 31, &r));
    cr_assert(!em_size_mul(-1, 2, &r));
    cr_assert(!em_size_mul(2, -1, &r));
    cr_assert_eq(em_shape_numel(&EM_SHAPE(0x80000000, 0x80000000, 4)), -1);
    cr_assert_eq(em_shape_numel(&EM_SHAPE(2, -3)), -1);
    cr_assert_eq(em_shape_numel(&EM_SHAPE(2, 3, 4)), 24);
}
