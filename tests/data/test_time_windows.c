/* Time-series windows: window contents, counts and target columns against hand-computed
 * values, over a tensor and over CSV columns, through a loader, and the errors for a series too
 * short, bad sizes and columns out of range. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ember.h"

TestSuite(time_windows, .init = em_scope_begin, .fini = em_scope_end);

/* (6, 2): step t is [t, 10 t] */
static em_tensor *series_6x2(void)
{
    float v[12];
    for (int t = 0; t < 6; t++) {
        v[2 * t] = (float)t;
        v[2 * t + 1] = 10.0f * (float)t;
    }
    return em_from_data(EM_SHAPE(6, 2), EM_F32, v);
}

static void expect_floats(const float *got, const float *want, int n, const char *what)
{
    for (int k = 0; k < n; k++)
        cr_expect_eq(got[k], want[k], "%s[%d]: %g, expected %g", what, k, got[k], want[k]);
}

Test(time_windows, windows_of_a_tensor_with_a_target_column)
{
    int target = 1;
    em_dataset *ds = em_time_windows_dataset(series_6x2(), (em_time_windows_opts){
        .length = 2, .horizon = 2, .targets = &target, .n_targets = 1});
    cr_assert_not_null(ds, "%s", em_error());
    cr_expect_eq(em_dataset_len(ds), 3, "(6 - 2 - 2) / 1 + 1");
    cr_expect(ds->x_shape.ndim == 2 && ds->x_shape.d[0] == 2 && ds->x_shape.d[1] == 2);
    cr_expect(ds->y_shape.ndim == 2 && ds->y_shape.d[0] == 2 && ds->y_shape.d[1] == 1);
    cr_expect_eq(ds->y_dtype, EM_F32);
    float x[4], y[2];
    cr_assert_eq(em_dataset_get(ds, 1, x, y), EM_OK, "%s", em_error());
    expect_floats(x, (float[]){1, 10, 2, 20}, 4, "x");
    expect_floats(y, (float[]){30, 40}, 2, "y");
    cr_assert_eq(em_dataset_get(ds, 2, x, y), EM_OK, "%s", em_error());
    expect_floats(x, (float[]){2, 20, 3, 30}, 4, "last x");
    expect_floats(y, (float[]){40, 50}, 2, "last y");
    cr_expect_eq(em_dataset_get(ds, 3, x, y), EM_ERR_ARG, "one past the last window");
    em_error_clear();
    em_dataset_free(ds);
}

Test(time_windows, stride_every_column_and_a_negative_target)
{
    em_dataset *ds = em_time_windows_dataset(series_6x2(), (em_time_windows_opts){
        .length = 2, .horizon = 2, .stride = 2});
    cr_assert_not_null(ds, "%s", em_error());
    cr_expect_eq(em_dataset_len(ds), 2, "(6 - 4) / 2 + 1");
    float x[4], y[4];
    cr_assert_eq(em_dataset_get(ds, 1, x, y), EM_OK, "%s", em_error());
    expect_floats(x, (float[]){2, 20, 3, 30}, 4, "x");
    expect_floats(y, (float[]){4, 40, 5, 50}, 4, "y, every column");
    em_dataset_free(ds);

    int from_end[2] = {-1, -2}; /* columns 1 then 0 */
    ds = em_time_windows_dataset(series_6x2(), (em_time_windows_opts){
        .length = 3, .stride = 3, .targets = from_end, .n_targets = 2});
    cr_assert_not_null(ds, "%s", em_error());
    cr_expect_eq(em_dataset_len(ds), 1, "(6 - 3 - 1) / 3 + 1: a window at 3 would need step 6");
    float x3[6], y2[2];
    cr_assert_eq(em_dataset_get(ds, 0, x3, y2), EM_OK, "%s", em_error());
    expect_floats(y2, (float[]){30, 3}, 2, "y in the targets' order");
    em_dataset_free(ds);
}

Test(time_windows, a_one_dimensional_series_through_a_loader)
{
    em_tensor *s = em_arange(0, 5, 1, EM_F32); // (5): 0 1 2 3 4
    em_dataset *ds = em_time_windows_dataset(s, (em_time_windows_opts){.length = 3});
    cr_assert_not_null(ds, "%s", em_error());
    cr_expect_eq(em_dataset_len(ds), 2);
    em_loader *dl = em_loader_new(ds, (em_loader_opts){.batch_size = 2});
    cr_assert_not_null(dl, "%s", em_error());
    em_batch b;
    cr_assert_eq(em_loader_next(dl, &b), EM_OK, "%s", em_error());
    cr_assert(b.x->ndim == 3 && b.x->shape[0] == 2 && b.x->shape[1] == 3 && b.x->shape[2] == 1);
    cr_assert(b.y->ndim == 3 && b.y->shape[0] == 2 && b.y->shape[1] == 1 && b.y->shape[2] == 1);
    float x[6], y[2];
    em_copy_to_host(b.x, EM_F32, x);
    em_copy_to_host(b.y, EM_F32, y);
    expect_floats(x, (float[]){0, 1, 2, 1, 2, 3}, 6, "x");
    expect_floats(y, (float[]){3, 4}, 2, "y");
    em_loader_free(dl);
    em_dataset_free(ds);
}

Test(time_windows, windows_over_csv_columns)
{
    char path[] = "/tmp/ember_windows_XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    const char text[] = "day,temp,hum\nmon,1,10\ntue,2,20\nwed,3,30\nthu,4,40\nfri,5,50\n";
    cr_assert_eq(write(fd, text, sizeof text - 1), (ssize_t)sizeof text - 1);
    close(fd);
    const char *features[] = {"hum"};
    em_dataset *ds = em_csv_time_windows_dataset(
        path, (em_csv_opts){.label = "temp", .features = features, .n_features = 1},
        (em_time_windows_opts){.length = 2});
    cr_assert_not_null(ds, "%s", em_error());
    cr_expect_eq(em_dataset_len(ds), 3, "(5 - 2 - 1) / 1 + 1");
    cr_expect(ds->x_shape.d[0] == 2 && ds->x_shape.d[1] == 2, "hum, then temp");
    cr_expect(ds->y_shape.d[0] == 1 && ds->y_shape.d[1] == 1);
    float x[4], y[1];
    cr_assert_eq(em_dataset_get(ds, 1, x, y), EM_OK, "%s", em_error());
    expect_floats(x, (float[]){20, 2, 30, 3}, 4, "x");
    expect_floats(y, (float[]){4}, 1, "y");
    em_dataset_free(ds);

    int col = 0;
    cr_expect_null(em_csv_time_windows_dataset(
        path, (em_csv_opts){.label = "temp", .features = features, .n_features = 1},
        (em_time_windows_opts){.length = 2, .targets = &col, .n_targets = 1}));
    cr_expect(strstr(em_error(), "the CSV options choose the target columns"), "%s", em_error());
    em_error_clear();
    cr_expect_null(em_csv_time_windows_dataset(
        path, (em_csv_opts){.label = "temp", .features = features, .n_features = 1},
        (em_time_windows_opts){.length = 4, .horizon = 2}));
    cr_expect_str_eq(em_error(), "em_csv_time_windows_dataset: a series of 5 steps holds no "
                     "window of 4 steps and a horizon of 2");
    em_error_clear();
    unlink(path);
}

Test(time_windows, bad_sizes_and_columns_are_errors)
{
    em_tensor *s = series_6x2();
    cr_expect_null(em_time_windows_dataset(s, (em_time_windows_opts){.length = 0}));
    cr_expect(strstr(em_error(), "em_time_windows_dataset: need length >= 1"), "%s", em_error());
    em_error_clear();
    cr_expect_null(em_time_windows_dataset(s, (em_time_windows_opts){.length = 2,
                                                                     .stride = -1}));
    cr_expect_eq(em_error_status(), EM_ERR_ARG);
    em_error_clear();
    cr_expect_null(em_time_windows_dataset(s, (em_time_windows_opts){.length = 6}));
    cr_expect_str_eq(em_error(), "em_time_windows_dataset: a series of 6 steps holds no window "
                     "of 6 steps and a horizon of 1");
    em_error_clear();
    int far = 2;
    cr_expect_null(em_time_windows_dataset(s, (em_time_windows_opts){
        .length = 2, .targets = &far, .n_targets = 1}));
    cr_expect_str_eq(em_error(), "em_time_windows_dataset: target column 2 is outside the "
                     "series' 2 columns");
    em_error_clear();
    cr_expect_null(em_time_windows_dataset(em_zeros(EM_SHAPE(4, 2, 2), EM_F32),
                                           (em_time_windows_opts){.length = 2}));
    cr_expect_str_eq(em_error(), "em_time_windows_dataset: the series must be (steps) or "
                     "(steps, columns), not [4,2,2]");
    em_error_clear();
    cr_expect_null(em_time_windows_dataset(NULL, (em_time_windows_opts){.length = 2}));
    em_error_clear();
}
