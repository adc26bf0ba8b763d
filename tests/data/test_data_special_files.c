/* Dataset files that are not what they seem: a FIFO given as (or swapped in for) a CSV, IDX or
 * image file is refused at once, naming it, and an image file that yields fewer bytes than its
 * size (a link to a sysfs file, a file that shrank) is a clear error, never a crash. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ember.h"
#include "helpers/files.h"

/* a reader that blocked on a FIFO would hang here: the timeout fails it instead */
TestSuite(special_files, .init = em_test_dir_init, .fini = em_test_dir_fini, .timeout = 20);

static void expect_fifo_error(const char *fn, const char *path)
{
    char want[512];
    snprintf(want, sizeof want, "%s: cannot open '%s': it is a FIFO, not a regular file", fn,
             path);
    cr_expect_eq(em_error_status(), EM_ERR_IO);
    cr_expect_str_eq(em_error(), want);
    em_error_clear();
}

Test(special_files, csv_and_idx_readers_refuse_a_fifo)
{
    const char *fifo = em_test_path("fifo");
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    cr_expect_null(em_csv_dataset(fifo, (em_csv_opts){0}));
    expect_fifo_error("em_csv_dataset", fifo);
    cr_expect_null(em_idx_dataset(fifo, fifo, (em_idx_opts){0}));
    expect_fifo_error("em_idx_dataset", fifo);
}

/* the test folder's dataset of 2x2 gray images */
static em_dataset *gray_folder(em_bad_image_policy policy)
{
    em_image_folder_opts o = {.height = 2, .width = 2, .channels = 1, .on_bad_image = policy};
    em_dataset *ds = em_image_folder(em_test_dir, o);
    cr_assert_not_null(ds, "%s", em_error());
    return ds;
}

/* cat/<name> holding text, and the dataset of its one image */
static em_dataset *folder_with(const char *name, em_bad_image_policy policy)
{
    cr_assert_eq(mkdir(em_test_path("cat"), 0700), 0);
    char path[256];
    snprintf(path, sizeof path, "%s/cat/%s", em_test_dir, name);
    FILE *f = fopen(path, "wb");
    cr_assert(f);
    fputs("an image, once", f);
    fclose(f);
    em_dataset *ds = gray_folder(policy);
    cr_assert_eq(em_dataset_len(ds), 1);
    return ds;
}

Test(special_files, a_fifo_swapped_in_for_an_image_is_refused)
{
    em_dataset *ds = folder_with("a.png", EM_BAD_IMAGE_ERROR);
    const char *png = em_test_path("cat/a.png");
    cr_assert_eq(unlink(png), 0);
    cr_assert_eq(mkfifo(png, 0600), 0);
    float x[4];
    int64_t y;
    cr_expect_eq(em_dataset_get(ds, 0, x, &y), EM_ERR_IO);
    expect_fifo_error("em_image_folder", png);
    em_dataset_free(ds);
}

/* /sys files claim 4096 bytes and hold a line: the reader freed its buffer on the short read
 * and the caller freed it again (heap corruption, SIGABRT). */
Test(special_files, an_image_shorter_than_its_size_is_an_error)
{
    const char *sys = "/sys/kernel/mm/transparent_hugepage/hpage_pmd_size";
    struct stat sb;
    if (stat(sys, &sb) != 0 || sb.st_size != 4096)
        cr_skip_test("%s is not a 4096-byte sysfs file here", sys);
    em_dataset *ds = folder_with("real.png", EM_BAD_IMAGE_SKIP);
    em_dataset_free(ds);
    const char *png = em_test_path("cat/real.png");
    cr_assert_eq(unlink(png), 0);
    cr_assert_eq(symlink(sys, png), 0);
    ds = gray_folder(EM_BAD_IMAGE_ERROR);
    float x[4];
    int64_t y;
    for (int i = 0; i < 2; i++) { /* twice: nothing of the first failure is left behind */
        cr_expect_eq(em_dataset_get(ds, 0, x, &y), EM_ERR_IO);
        char want[512];
        snprintf(want, sizeof want, "em_image_folder: cannot read '%s': it ended after", png);
        cr_expect_eq(strncmp(em_error(), want, strlen(want)), 0, "%s", em_error());
        cr_expect(strstr(em_error(), " of its 4096 bytes"), "%s", em_error());
        em_error_clear();
    }
    em_dataset_free(ds);
}
