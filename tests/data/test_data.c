/* Datasets and transforms: IDX (raw and gzipped), CSV, image folders of hand-written BMPs,
 * tensors, bilinear resize, and the per-sample transforms, all against hand-computed values. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "data/data.h"
#include "helpers/files.h"

static char tmpdir[64];

static void make_tmpdir(void)
{
    cr_assert(em_test_make_dir(tmpdir, sizeof tmpdir, "ember_data_"));
}

static void cleanup(void)
{
    em_test_remove_tree(tmpdir);
}

TestSuite(data, .init = make_tmpdir, .fini = cleanup);

static char *tmp_path(const char *name)
{
    static char buf[16][256];
    static int k;
    k = (k + 1) % 16;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

static void write_file(const char *path, const void *data, size_t n, bool gz)
{
    if (gz) {
        gzFile f = gzopen(path, "wb");
        cr_assert_not_null(f);
        cr_assert_eq(gzwrite(f, data, (unsigned)n), (int)n);
        gzclose(f);
    } else {
        FILE *f = fopen(path, "wb");
        cr_assert_not_null(f);
        cr_assert_eq(fwrite(data, 1, n, f), n);
        fclose(f);
    }
}

static void write_text(const char *path, const char *text)
{
    write_file(path, text, strlen(text), false);
}

/* ---- IDX ---- */

/* Three 2x3 images with pixels 10*i + k and labels {7, 0, 3}. */
static void write_idx_pair(const char *images, const char *labels, bool gz)
{
    uint8_t img[16 + 18] = {0, 0, 0x08, 3, 0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 3};
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 6; k++)
            img[16 + i * 6 + k] = (uint8_t)(10 * i + k + (i == 2 ? 200 : 0));
    uint8_t lab[8 + 3] = {0, 0, 0x08, 1, 0, 0, 0, 3, 7, 0, 3};
    write_file(images, img, sizeof img, gz);
    write_file(labels, lab, sizeof lab, gz);
}

/* One 16x16 image holding every level 0..255 reads back as level / 255 in f32, bit for bit. */
Test(data, idx_levels_are_the_f32_quotients_by_255)
{
    uint8_t img[16 + 256] = {0, 0, 0x08, 3, 0, 0, 0, 1, 0, 0, 0, 16, 0, 0, 0, 16};
    for (int v = 0; v < 256; v++)
        img[16 + v] = (uint8_t)v;
    uint8_t lab[8 + 1] = {0, 0, 0x08, 1, 0, 0, 0, 1, 4};
    const char *im = tmp_path("levels.idx"), *lb = tmp_path("levels_lb.idx");
    write_file(im, img, sizeof img, false);
    write_file(lb, lab, sizeof lab, false);
    em_dataset *ds = em_idx_dataset(im, lb, (em_idx_opts){.flat = true});
    cr_assert_not_null(ds, "%s", em_error());
    float x[256];
    int64_t y;
    cr_assert_eq(em_dataset_get(ds, 0, x, &y), EM_OK);
    for (int v = 0; v < 256; v++) {
        volatile float want = (float)v / 255.0f; /* one f32 division, as PyTorch's ToTensor */
        cr_assert_eq(x[v], want, "level %d: %.9g, want %.9g", v, x[v], want);
    }
    em_dataset_free(ds);
}

static void check_idx(bool gz, bool flat)
{
    const char *im = tmp_path(gz ? "im.idx.gz" : "im.idx");
    const char *lb = tmp_path(gz ? "lb.idx.gz" : "lb.idx");
    write_idx_pair(im, lb, gz);
    em_dataset *ds = em_idx_dataset(im, lb, (em_idx_opts){.flat = flat});
    cr_assert_not_null(ds, "%s", em_error());
    cr_assert_eq(em_dataset_len(ds), 3);
    cr_assert_eq(ds->n_classes, 8);
    cr_assert_eq(ds->y_dtype, EM_I64);
    cr_assert_eq(ds->y_shape.ndim, 0);
    if (flat) {
        cr_assert_eq(ds->x_shape.ndim, 1);
        cr_assert_eq(ds->x_shape.d[0], 6);
    } else {
        cr_assert_eq(ds->x_shape.ndim, 3);
        cr_assert(ds->x_shape.d[0] == 1 && ds->x_shape.d[1] == 2 && ds->x_shape.d[2] == 3);
    }
    float x[6];
    int64_t y;
    static const int64_t labels[3] = {7, 0, 3};
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(em_dataset_get(ds, i, x, &y), EM_OK);
        cr_assert_eq(y, labels[i]);
        for (int k = 0; k < 6; k++)
            cr_assert_eq(x[k], (float)(10 * i + k + (i == 2 ? 200 : 0)) / 255.0f);
    }
    cr_assert_eq(em_dataset_get(ds, 3, x, &y), EM_ERR_ARG);
    em_error_clear();
    em_dataset_free(ds);
}

Test(data, idx_raw_and_gz)
{
    check_idx(false, false);
    check_idx(true, true);
}

Test(data, idx_errors_name_the_file)
{
    const char *im = tmp_path("im.idx"), *lb = tmp_path("lb.idx");
    write_idx_pair(im, lb, false);
    uint8_t shortimg[16 + 10] = {0, 0, 0x08, 3, 0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 3};
    const char *bad = tmp_path("short.idx");
    write_file(bad, shortimg, sizeof shortimg, false);
    cr_assert_null(em_idx_dataset(bad, lb, (em_idx_opts){0}));
    cr_assert_eq(em_error_status(), EM_ERR_IO);
    cr_assert_not_null(strstr(em_error(), bad), "%s", em_error());
    cr_assert_not_null(strstr(em_error(), "truncated"), "%s", em_error());
    em_error_clear();

    cr_assert_null(em_idx_dataset(tmp_path("nope.idx"), lb, (em_idx_opts){0}));
    cr_assert_not_null(strstr(em_error(), "nope.idx"), "%s", em_error());
    em_error_clear();

    cr_assert_null(em_idx_dataset(lb, lb, (em_idx_opts){0})); /* labels are not 3-d */
    cr_assert_not_null(strstr(em_error(), "not an IDX file with 3 dims"), "%s", em_error());
    em_error_clear();

    uint8_t lab2[8 + 2] = {0, 0, 0x08, 1, 0, 0, 0, 2, 1, 1};
    const char *lb2 = tmp_path("lb2.idx");
    write_file(lb2, lab2, sizeof lab2, false);
    cr_assert_null(em_idx_dataset(im, lb2, (em_idx_opts){0}));
    cr_assert_not_null(strstr(em_error(), "3 images"), "%s", em_error());
    em_error_clear();
}

Test(data, fashion_mnist_if_installed)
{
    const char *dir = "/usr/share/datasets/fashion-mnist";
    char im[256], lb[256];
    snprintf(im, sizeof im, "%s/train-images-idx3-ubyte.gz", dir);
    snprintf(lb, sizeof lb, "%s/train-labels-idx1-ubyte.gz", dir);
    if (access(im, R_OK) != 0 || access(lb, R_OK) != 0) {
        cr_skip_test("Fashion-MNIST is not installed at %s (Debian package dataset-fashion-mnist)",
                     dir);
    }
    em_dataset *ds = em_idx_dataset(im, lb, (em_idx_opts){0});
    cr_assert_not_null(ds, "%s", em_error());
    cr_assert_eq(em_dataset_len(ds), 60000);
    cr_assert_eq(ds->n_classes, 10);
    cr_assert(ds->x_shape.ndim == 3 && ds->x_shape.d[1] == 28 && ds->x_shape.d[2] == 28);
    float x[784];
    int64_t y;
    cr_assert_eq(em_dataset_get(ds, 0, x, &y), EM_OK);
    cr_assert_eq(y, 9); /* the first training image is an ankle boot */
    float lo = 1, hi = 0;
    for (int k = 0; k < 784; k++) {
        lo = fminf(lo, x[k]);
        hi = fmaxf(hi, x[k]);
    }
    cr_assert(lo == 0.0f && hi == 1.0f, "pixel range [%g, %g]", lo, hi);
    em_dataset_free(ds);
}

/* ---- CSV ---- */

Test(data, csv_header_auto_and_label_column)
{
    const char *p = tmp_path("iris.csv");
    write_text(p, "a,b,label\n1.5,2,1\r\n-3,4e1,0\n\n0.25, 7 ,2\n");
    em_dataset *ds = em_csv_dataset(p, (em_csv_opts){.label_col = -1});
    cr_assert_not_null(ds, "%s", em_error());
    cr_assert_eq(em_dataset_len(ds), 3);
    cr_assert_eq(ds->x_shape.ndim, 1);
    cr_assert_eq(ds->x_shape.d[0], 2);
    cr_assert_eq(ds->n_classes, 3);
    float x[2];
    int64_t y;
    cr_assert_eq(em_dataset_get(ds, 1, x, &y), EM_OK);
    cr_assert(x[0] == -3.0f && x[1] == 40.0f && y == 0);
    cr_assert_eq(em_dataset_get(ds, 2, x, &y), EM_OK);
    cr_assert(x[0] == 0.25f && x[1] == 7.0f && y == 2);
    em_dataset_free(ds);
}

Test(data, csv_without_header_regression)
{
    const char *p = tmp_path("reg.csv");
    write_text(p, "0.5;1;2\n1.5;3;4");
    em_dataset *ds = em_csv_dataset(p, (em_csv_opts){.header = EM_CSV_HEADER_NO, .label_col = 0,
                                                     .regression = true, .delimiter = ';'});
    cr_assert_not_null(ds, "%s", em_error());
    cr_assert_eq(em_dataset_len(ds), 2);
    cr_assert_eq(ds->y_dtype, EM_F32);
    cr_assert_eq(ds->n_classes, 0);
    float x[2], y;
    cr_assert_eq(em_dataset_get(ds, 1, x, &y), EM_OK);
    cr_assert(x[0] == 3.0f && x[1] == 4.0f && y == 1.5f);
    em_dataset_free(ds);

    /* a numeric first row is data unless the header is declared */
    write_text(p, "5,6,1\n7,8,0\n");
    ds = em_csv_dataset(p, (em_csv_opts){.label_col = 2});
    cr_assert_eq(em_dataset_len(ds), 2);
    em_dataset_free(ds);
    ds = em_csv_dataset(p, (em_csv_opts){.label_col = 2, .header = EM_CSV_HEADER_YES});
    cr_assert_eq(em_dataset_len(ds), 1);
    em_dataset_free(ds);
}

Test(data, csv_bad_rows_name_file_and_line)
{
    const char *p = tmp_path("bad.csv");
    write_text(p, "x,y,label\n1,2,0\n3,oops,1\n");
    cr_assert_null(em_csv_dataset(p, (em_csv_opts){.label_col = 2}));
    cr_assert_eq(em_error_status(), EM_ERR_IO);
    cr_assert_not_null(strstr(em_error(), p), "%s", em_error());
    cr_assert_not_null(strstr(em_error(), "line 3, column 2 ('y'): 'oops' is not a number"), "%s",
                       em_error());
    em_error_clear();

    write_text(p, "1,2,0\n3,4\n");
    cr_assert_null(em_csv_dataset(p, (em_csv_opts){.label_col = 2}));
    cr_assert_not_null(strstr(em_error(), "line 2: 2 fields, expected 3"), "%s", em_error());
    em_error_clear();

    write_text(p, "1,2,0.5\n");
    cr_assert_null(em_csv_dataset(p, (em_csv_opts){.label_col = 2}));
    cr_assert_not_null(strstr(em_error(), "line 1, column 3: '0.5' is not a class index"), "%s",
                       em_error());
    em_error_clear();

    cr_assert_null(em_csv_dataset(tmp_path("absent.csv"), (em_csv_opts){0}));
    cr_assert_not_null(strstr(em_error(), "absent.csv"), "%s", em_error());
    em_error_clear();
}

/* Features chosen by name and by number, in the order given; class names mapped to indices in
 * sorted order. */
Test(data, csv_chosen_columns_and_class_names)
{
    const char *p = tmp_path("species.csv");
    write_text(p, "id,petal,sepal,species\n1,1.5,2,setosa\n2,3,4.5,virginica\n"
                  "3,0.5,1,\"setosa\"\n4,2,2,versicolor\n");
    em_dataset *ds = em_csv_dataset(p, (em_csv_opts){
        .label = "species", .class_names = true,
        .features = (const char *const[]){"sepal", "1"}, .n_features = 2});
    cr_assert_not_null(ds, "%s", em_error());
    cr_assert_eq(em_dataset_len(ds), 4);
    cr_assert(ds->x_shape.ndim == 1 && ds->x_shape.d[0] == 2);
    cr_assert_eq(ds->n_classes, 3);
    const char *const *names = em_csv_classes(ds);
    cr_assert_not_null(names);
    cr_assert_str_eq(names[0], "setosa");
    cr_assert_str_eq(names[1], "versicolor");
    cr_assert_str_eq(names[2], "virginica");
    int64_t want[4] = {0, 2, 0, 1}, y;
    float x[2], want_x[4][2] = {{2, 1.5f}, {4.5f, 3}, {1, 0.5f}, {2, 2}};
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(em_dataset_get(ds, i, x, &y), EM_OK);
        cr_assert(y == want[i] && x[0] == want_x[i][0] && x[1] == want_x[i][1],
                  "row %d: %g %g class %lld", i, x[0], x[1], (long long)y);
    }
    cr_assert_null(em_csv_classes(NULL));
    em_dataset_free(ds);

    /* without class_names a name is no class index, and says how to read names */
    cr_assert_null(em_csv_dataset(p, (em_csv_opts){.label_col = -1}));
    cr_assert_not_null(strstr(em_error(), "line 2, column 4 ('species'): 'setosa' is not a "
                              "class index"), "%s", em_error());
    cr_assert_not_null(strstr(em_error(), "class_names"), "%s", em_error());
    em_error_clear();
    cr_assert_null(em_csv_dataset(p, (em_csv_opts){.label = "kind", .class_names = true}));
    cr_assert_not_null(strstr(em_error(), "has no label column 'kind'"), "%s", em_error());
    em_error_clear();
    cr_assert_null(em_csv_dataset(p, (em_csv_opts){
        .label = "species", .class_names = true,
        .features = (const char *const[]){"sepal", "2"}, .n_features = 2}));
    cr_assert_not_null(strstr(em_error(), "column 3 ('sepal') is chosen twice"), "%s",
                       em_error());
    em_error_clear();
    cr_assert_null(em_csv_dataset(p, (em_csv_opts){
        .label = "species", .class_names = true,
        .features = (const char *const[]){"width"}, .n_features = 1}));
    cr_assert_not_null(strstr(em_error(), "has no feature column 'width'"), "%s", em_error());
    em_error_clear();
}

/* Two regression targets: y (2) from the label column on; the features are the other columns,
 * through the loader as a batch (B, 2). */
Test(data, csv_multi_target_regression)
{
    const char *p = tmp_path("targets.csv");
    write_text(p, "a,t1,t2,b\n1,10,20,2\n3,30,40,4\n5,50,60,6\n");
    em_dataset *ds = em_csv_dataset(p, (em_csv_opts){.label = "t1", .n_targets = 2,
                                                     .regression = true});
    cr_assert_not_null(ds, "%s", em_error());
    cr_assert(ds->y_shape.ndim == 1 && ds->y_shape.d[0] == 2 && ds->y_dtype == EM_F32);
    cr_assert(ds->x_shape.ndim == 1 && ds->x_shape.d[0] == 2);
    float x[2], y[2];
    cr_assert_eq(em_dataset_get(ds, 1, x, y), EM_OK);
    cr_assert(x[0] == 3 && x[1] == 4 && y[0] == 30 && y[1] == 40);
    em_loader *dl = em_loader_new(ds, (em_loader_opts){.batch_size = 3});
    em_batch b;
    cr_assert_eq(em_loader_next(dl, &b), EM_OK, "%s", em_error());
    cr_assert(b.y->ndim == 2 && b.y->shape[0] == 3 && b.y->shape[1] == 2);
    const float *yb = em_data_ptr(b.y); // (3, 2)
    cr_assert(yb[4] == 50 && yb[5] == 60);
    em_release(b.x);
    em_release(b.y);
    em_loader_free(dl);
    em_dataset_free(ds);

    cr_assert_null(em_csv_dataset(p, (em_csv_opts){.label = "t1", .n_targets = 2}));
    cr_assert_not_null(strstr(em_error(), "2 target columns need regression"), "%s", em_error());
    em_error_clear();
    cr_assert_null(em_csv_dataset(p, (em_csv_opts){.label = "b", .n_targets = 2,
                                                   .regression = true}));
    cr_assert_not_null(strstr(em_error(), "no room for 2 target column(s)"), "%s", em_error());
    em_error_clear();
}

/* A missing feature (empty, NA, NaN, ?) is an error naming it, or the chosen fill; a missing
 * target is always an error; an infinite or f32-overflowing value is no number to train on. */
Test(data, csv_missing_values_error_or_fill)
{
    const char *p = tmp_path("missing.csv");
    write_text(p, "a,b,c\n1,,0\n2,NA,1\n nan ,3,1\n?,4,0\n");
    cr_assert_null(em_csv_dataset(p, (em_csv_opts){.label_col = -1}));
    cr_assert_eq(em_error_status(), EM_ERR_IO);
    cr_assert_not_null(strstr(em_error(), "line 2, column 2 ('b'): '' is a missing value "
                              "(em_csv_opts.missing = EM_CSV_MISSING_FILL fills it)"), "%s",
                       em_error());
    em_error_clear();
    em_dataset *ds = em_csv_dataset(p, (em_csv_opts){.label_col = -1,
                                                     .missing = EM_CSV_MISSING_FILL,
                                                     .missing_fill = -1.5});
    cr_assert_not_null(ds, "%s", em_error());
    float want[4][2] = {{1, -1.5f}, {2, -1.5f}, {-1.5f, 3}, {-1.5f, 4}}, x[2];
    int64_t y;
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(em_dataset_get(ds, i, x, &y), EM_OK);
        cr_assert(x[0] == want[i][0] && x[1] == want[i][1], "row %d: %g %g", i, x[0], x[1]);
    }
    em_dataset_free(ds);

    write_text(p, "a,b,c\n1,2,\n");
    cr_assert_null(em_csv_dataset(p, (em_csv_opts){.label_col = -1,
                                                   .missing = EM_CSV_MISSING_FILL}));
    cr_assert_not_null(strstr(em_error(), "line 2, column 3 ('c'): '' is a missing target"),
                       "%s", em_error());
    em_error_clear();
    write_text(p, "a,b,c\n1,inf,0\n");
    cr_assert_null(em_csv_dataset(p, (em_csv_opts){.label_col = -1}));
    cr_assert_not_null(strstr(em_error(), "'inf' is not a finite f32 number"), "%s", em_error());
    em_error_clear();
    write_text(p, "a,b,c\n1,1e39,0\n");
    cr_assert_null(em_csv_dataset(p, (em_csv_opts){.label_col = -1}));
    cr_assert_not_null(strstr(em_error(), "'1e39' is not a finite f32 number"), "%s", em_error());
    em_error_clear();
}

/* ---- images ---- */

/* A 24-bit BMP from rgb (h, w, 3), rows stored bottom-up in BGR, padded to 4 bytes. */
static void write_bmp(const char *path, int w, int h, const uint8_t *rgb)
{
    int row = (3 * w + 3) & ~3;
    uint32_t size = 54 + (uint32_t)(row * h);
    uint8_t *buf = calloc(1, size);
    uint32_t fields[] = {size, 0, 54, 40, (uint32_t)w, (uint32_t)h};
    buf[0] = 'B';
    buf[1] = 'M';
    memcpy(buf + 2, &fields[0], 4);
    memcpy(buf + 10, &fields[2], 4);
    memcpy(buf + 14, &fields[3], 4);
    memcpy(buf + 18, &fields[4], 4);
    memcpy(buf + 22, &fields[5], 4);
    buf[26] = 1;  /* planes */
    buf[28] = 24; /* bits per pixel */
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < 3; c++)
                buf[54 + (h - 1 - y) * row + 3 * x + c] = rgb[(y * w + x) * 3 + (2 - c)];
    write_file(path, buf, size, false);
    free(buf);
}

static void write_gray_bmp(const char *path, int w, int h, const uint8_t *gray)
{
    uint8_t *rgb = malloc((size_t)w * h * 3);
    for (int k = 0; k < w * h; k++)
        rgb[3 * k] = rgb[3 * k + 1] = rgb[3 * k + 2] = gray[k];
    write_bmp(path, w, h, rgb);
    free(rgb);
}

static void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static void png_chunk(FILE *f, const char *type, const uint8_t *data, uint32_t len)
{
    uint8_t be[4];
    put_be32(be, len);
    fwrite(be, 1, 4, f);
    fwrite(type, 1, 4, f);
    if (len)
        fwrite(data, 1, len, f);
    uLong crc = crc32(0, (const Bytef *)type, 4); /* crc32 of a NULL buffer would be 0 */
    if (len)
        crc = crc32(crc, data, len);
    put_be32(be, (uint32_t)crc);
    fwrite(be, 1, 4, f);
}

/* An 8-bit PNG, grayscale (channels 1) or RGB (3), rows unfiltered, zlib-compressed. */
static void write_png(const char *path, int w, int h, int channels, const uint8_t *pixels)
{
    size_t row = (size_t)w * channels, raw_len = (row + 1) * h;
    uint8_t *raw = malloc(raw_len);
    for (int y = 0; y < h; y++) {
        raw[y * (row + 1)] = 0;
        memcpy(raw + y * (row + 1) + 1, pixels + y * row, row);
    }
    uLongf z_len = compressBound(raw_len);
    uint8_t *z = malloc(z_len);
    cr_assert_eq(compress(z, &z_len, raw, raw_len), Z_OK);
    uint8_t ihdr[13] = {0};
    put_be32(ihdr, (uint32_t)w);
    put_be32(ihdr + 4, (uint32_t)h);
    ihdr[8] = 8;
    ihdr[9] = channels == 1 ? 0 : 2;
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    fwrite("\x89PNG\r\n\x1a\n", 1, 8, f);
    png_chunk(f, "IHDR", ihdr, 13);
    png_chunk(f, "IDAT", z, (uint32_t)z_len);
    png_chunk(f, "IEND", NULL, 0);
    fclose(f);
    free(raw);
    free(z);
}

/* root/cat/{a,b}.bmp and root/dog/c.bmp, plus things the folder reader must ignore. */
static const char *make_folder(void)
{
    static char root[256];
    snprintf(root, sizeof root, "%s/imgs", tmpdir);
    mkdir(root, 0755);
    mkdir(tmp_path("imgs/dog"), 0755);
    mkdir(tmp_path("imgs/cat"), 0755);
    mkdir(tmp_path("imgs/.hidden"), 0755);
    static const uint8_t rgb[2 * 2 * 3] = {255, 0, 0, 0, 255, 0, 0, 0, 255, 10, 20, 30};
    static const uint8_t gray[4] = {0, 100, 200, 255};
    write_bmp(tmp_path("imgs/cat/b.bmp"), 2, 2, rgb);
    write_gray_bmp(tmp_path("imgs/cat/a.BMP"), 2, 2, gray);
    write_gray_bmp(tmp_path("imgs/dog/c.bmp"), 2, 2, gray);
    write_text(tmp_path("imgs/cat/notes.txt"), "not an image");
    write_text(tmp_path("imgs/readme.md"), "top-level file");
    return root;
}

Test(data, image_folder_rgb_exact)
{
    const char *root = make_folder();
    em_dataset *ds = em_image_folder(root, (em_image_folder_opts){.height = 2, .width = 2});
    cr_assert_not_null(ds, "%s", em_error());
    cr_assert_eq(em_dataset_len(ds), 3);
    cr_assert_eq(ds->n_classes, 2);
    const char *const *classes = em_image_folder_classes(ds);
    cr_assert_str_eq(classes[0], "cat");
    cr_assert_str_eq(classes[1], "dog");
    cr_assert(ds->x_shape.ndim == 3 && ds->x_shape.d[0] == 3);
    float x[12];
    int64_t y;
    cr_assert_eq(em_dataset_get(ds, 1, x, &y), EM_OK, "%s", em_error()); /* cat/b.bmp */
    cr_assert_eq(y, 0);
    static const uint8_t planar[12] = {255, 0, 0, 10, 0, 255, 0, 20, 0, 0, 255, 30};
    for (int k = 0; k < 12; k++)
        cr_assert_eq(x[k], planar[k] / 255.0f, "element %d: %g", k, x[k]);
    cr_assert_eq(em_dataset_get(ds, 2, x, &y), EM_OK);
    cr_assert_eq(y, 1);
    em_dataset_free(ds);
}

Test(data, image_folder_png_gray_and_rgb)
{
    char root[256];
    snprintf(root, sizeof root, "%s/png", tmpdir);
    mkdir(root, 0755);
    mkdir(tmp_path("png/ant"), 0755);
    mkdir(tmp_path("png/bee"), 0755);
    static const uint8_t gray[3] = {0, 51, 255};                     /* 3x1 */
    static const uint8_t rgb[3 * 3] = {1, 2, 3, 4, 5, 6, 250, 251, 252}; /* 3x1 */
    write_png(tmp_path("png/ant/g.png"), 3, 1, 1, gray);
    write_png(tmp_path("png/bee/c.png"), 3, 1, 3, rgb);
    em_dataset *ds = em_image_folder(root, (em_image_folder_opts){.height = 1, .width = 3});
    cr_assert_not_null(ds, "%s", em_error());
    float x[9];
    int64_t y;
    cr_assert_eq(em_dataset_get(ds, 0, x, &y), EM_OK, "%s", em_error());
    cr_assert_eq(y, 0);
    for (int c = 0; c < 3; c++) /* gray expands to three equal planes */
        for (int j = 0; j < 3; j++)
            cr_assert_eq(x[c * 3 + j], gray[j] / 255.0f);
    cr_assert_eq(em_dataset_get(ds, 1, x, &y), EM_OK, "%s", em_error());
    cr_assert_eq(y, 1);
    for (int c = 0; c < 3; c++)
        for (int j = 0; j < 3; j++)
            cr_assert_eq(x[c * 3 + j], rgb[j * 3 + c] / 255.0f);
    em_dataset_free(ds);
}

Test(data, image_folder_gray_resized_bilinear)
{
    const char *root = make_folder();
    em_dataset *ds = em_image_folder(
        root, (em_image_folder_opts){.height = 4, .width = 4, .channels = 1});
    cr_assert_not_null(ds, "%s", em_error());
    float x[16];
    int64_t y;
    cr_assert_eq(em_dataset_get(ds, 0, x, &y), EM_OK, "%s", em_error()); /* cat/a.BMP */
    /* 2 -> 4 with half-pixel centres: source rows/cols weigh (1,0) (.75,.25) (.25,.75) (0,1) */
    static const float wt[4][2] = {{1, 0}, {0.75f, 0.25f}, {0.25f, 0.75f}, {0, 1}};
    static const float p[2][2] = {{0, 100}, {200, 255}};
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            float want = 0;
            for (int r = 0; r < 2; r++)
                for (int c = 0; c < 2; c++)
                    want += wt[i][r] * wt[j][c] * p[r][c] / 255.0f;
            cr_assert_float_eq(x[i * 4 + j], want, 1e-6f, "(%d,%d): %g vs %g", i, j,
                               x[i * 4 + j], want);
        }
    em_dataset_free(ds);
}

Test(data, image_folder_bad_file_fails_that_sample)
{
    const char *root = make_folder();
    write_text(tmp_path("imgs/dog/d.png"), "this is not a png");
    em_dataset *ds = em_image_folder(root, (em_image_folder_opts){.height = 2, .width = 2});
    cr_assert_not_null(ds, "%s", em_error());
    cr_assert_eq(em_dataset_len(ds), 4);
    float x[12];
    int64_t y;
    cr_assert_eq(em_dataset_get(ds, 3, x, &y), EM_ERR_IO);
    cr_assert_not_null(strstr(em_error(), "dog/d.png"), "%s", em_error());
    em_error_clear();
    unlink(tmp_path("imgs/dog/c.bmp"));
    cr_assert_eq(em_dataset_get(ds, 2, x, &y), EM_ERR_IO);
    cr_assert_not_null(strstr(em_error(), "dog/c.bmp"), "%s", em_error());
    em_error_clear();
    em_dataset_free(ds);

    cr_assert_null(em_image_folder(tmp_path("none"), (em_image_folder_opts){
                                                         .height = 2, .width = 2,
                                                         .channels = 1}));
    cr_assert_not_null(strstr(em_error(), "none"), "%s", em_error());
    em_error_clear();
}

Test(data, resize_downscale_averages_pairs)
{
    float src[8] = {0, 2, 4, 6, 10, 20, 30, 40}; /* (1, 2, 4) */
    float dst[2];
    cr_assert_eq(em_resize_bilinear(src, 1, 2, 4, dst, 1, 2), EM_OK);
    /* row source 0.5 -> mean of both rows; cols 0.5 and 2.5 -> mean of col pairs */
    cr_assert_float_eq(dst[0], (0 + 2 + 10 + 20) / 4.0f, 1e-6f);
    cr_assert_float_eq(dst[1], (4 + 6 + 30 + 40) / 4.0f, 1e-6f);
}

/* ---- tensors ---- */

Test(data, tensor_dataset_rows)
{
    float xv[4 * 2] = {0, 1, 2, 3, 4, 5, 6, 7};
    int32_t yv[4] = {3, 1, 4, 1};
    em_tensor *x = em_from_data(EM_SHAPE(4, 2), EM_F32, xv);
    em_tensor *y = em_from_data(EM_SHAPE(4), EM_I32, yv);
    em_dataset *ds = em_tensor_dataset(x, y);
    em_release(x);
    em_release(y);
    cr_assert_not_null(ds, "%s", em_error());
    cr_assert_eq(em_dataset_len(ds), 4);
    cr_assert_eq(ds->y_dtype, EM_I64);
    cr_assert_eq(ds->n_classes, 5);
    float r[2];
    int64_t lab;
    cr_assert_eq(em_dataset_get(ds, 2, r, &lab), EM_OK);
    cr_assert(r[0] == 4 && r[1] == 5 && lab == 4);
    em_dataset_free(ds);

    em_tensor *a = em_zeros(EM_SHAPE(3, 2), EM_F32), *b = em_zeros(EM_SHAPE(2), EM_F32);
    cr_assert_null(em_tensor_dataset(a, b));
    cr_assert_not_null(strstr(em_error(), "[3,2] vs [2]"), "%s", em_error());
    em_error_clear();
    em_release(a);
    em_release(b);
}

/* ---- transforms ---- */

/* A transform call on an f32 sample: loader seed, epoch, sample index, position in the list. */
#define CALL(seed_, epoch_, index_, stage_)                                                \
    (em_transform_call){.seed = (seed_), .epoch = (epoch_), .index = (index_), .stage = (stage_), \
                        .dtype = EM_F32}

Test(data, transform_flip_exact)
{
    float x[2 * 2 * 3] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}; /* (2, 2, 3) */
    float out[12];
    em_transform tf = em_transform_random_hflip(1.0f);
    cr_assert_eq(em_transform_apply(&tf, &CALL(1, 0, 5, 0), EM_SHAPE(2, 2, 3), x, out), EM_OK);
    static const float want[12] = {3, 2, 1, 6, 5, 4, 9, 8, 7, 12, 11, 10};
    cr_assert_arr_eq(out, want, sizeof want);
    cr_assert_eq(em_transform_apply(&tf, &CALL(1, 0, 5, 0), EM_SHAPE(2, 2, 3), x, x), EM_OK);
    cr_assert_arr_eq(x, want, sizeof want); /* in place */

    /* p = 0.5: a mix of flipped and not, the same each time for the same key */
    em_transform half = em_transform_random_hflip(0.5f);
    int flipped = 0;
    for (int i = 0; i < 64; i++) {
        float a[3] = {1, 2, 3}, b[3], c[3];
        em_transform_apply(&half, &CALL(9, 2, i, 1), EM_SHAPE(1, 3), a, b);
        em_transform_apply(&half, &CALL(9, 2, i, 1), EM_SHAPE(1, 3), a, c);
        cr_assert_arr_eq(b, c, sizeof b);
        cr_assert(b[0] == 3 || b[0] == 1);
        flipped += b[0] == 3;
    }
    cr_assert(flipped > 16 && flipped < 48, "flipped %d of 64", flipped);
}

Test(data, transform_crop_pad_exact)
{
    float x[2 * 2 * 2] = {1, 2, 3, 4, 5, 6, 7, 8}; /* (2, 2, 2) */
    /* output = padded size: the only window is the whole padded image */
    em_transform full = em_transform_random_crop(4, 4, 1);
    float out[2 * 4 * 4];
    cr_assert_eq(em_transform_apply(&full, &CALL(3, 0, 0, 0), EM_SHAPE(2, 2, 2), x, out), EM_OK);
    static const float want[32] = {0, 0, 0, 0, 0, 1, 2, 0, 0, 3, 4, 0, 0, 0, 0, 0,
                                   0, 0, 0, 0, 0, 5, 6, 0, 0, 7, 8, 0, 0, 0, 0, 0};
    cr_assert_arr_eq(out, want, sizeof want);

    /* a 2x2 crop of the padded 4x4 is one of its 9 windows, in both channels alike */
    em_transform tf = em_transform_random_crop(2, 2, 1);
    em_shape os;
    cr_assert_eq(em_transform_out_shape(&tf, EM_SHAPE(2, 2, 2), &os), EM_OK);
    cr_assert(os.ndim == 3 && os.d[0] == 2 && os.d[1] == 2 && os.d[2] == 2);
    bool seen[9] = {0};
    for (int idx = 0; idx < 60; idx++) {
        float o[8], again[8];
        cr_assert_eq(em_transform_apply(&tf, &CALL(3, 1, idx, 0), EM_SHAPE(2, 2, 2), x, o), EM_OK);
        em_transform_apply(&tf, &CALL(3, 1, idx, 0), EM_SHAPE(2, 2, 2), x, again);
        cr_assert_arr_eq(o, again, sizeof o);
        int match = -1;
        for (int t = 0; t < 3 && match < 0; t++)
            for (int l = 0; l < 3 && match < 0; l++) {
                bool ok = true;
                for (int c = 0; c < 2; c++)
                    for (int i = 0; i < 2; i++)
                        for (int j = 0; j < 2; j++)
                            ok &= o[(c * 2 + i) * 2 + j] == want[(c * 4 + t + i) * 4 + l + j];
                if (ok)
                    match = t * 3 + l;
            }
        cr_assert_geq(match, 0, "sample %d is no window of the padded image", idx);
        seen[match] = true;
    }
    int distinct = 0;
    for (int k = 0; k < 9; k++)
        distinct += seen[k];
    cr_assert_geq(distinct, 7, "only %d of 9 windows over 60 samples", distinct);
}

Test(data, transform_normalize_and_errors)
{
    float x[2 * 1 * 2] = {1, 3, 5, 7};
    float mean[2] = {1, 5}, std[2] = {2, 0.5f};
    em_transform tf = em_transform_normalize(2, mean, std);
    cr_assert_eq(em_transform_apply(&tf, &CALL(0, 0, 0, 0), EM_SHAPE(2, 1, 2), x, x), EM_OK);
    cr_assert(x[0] == 0 && x[1] == 1 && x[2] == 0 && x[3] == 4);
    cr_assert_eq(em_transform_apply(&tf, &CALL(0, 0, 0, 0), EM_SHAPE(3, 1, 1), x, x), EM_ERR_ARG);
    cr_assert_not_null(strstr(em_error(), "[3,1,1]"), "%s", em_error());
    em_error_clear();
    em_transform crop = em_transform_random_crop(2, 2, 0);
    em_shape os;
    cr_assert_eq(em_transform_out_shape(&crop, EM_SHAPE(784), &os), EM_ERR_ARG);
    em_error_clear();
    cr_assert_eq(em_transform_out_shape(&crop, EM_SHAPE(1, 1, 5), &os), EM_ERR_ARG);
    em_error_clear();
    float zero_std[1] = {0};
    em_transform bad = em_transform_normalize(1, mean, zero_std);
    cr_assert_eq(em_transform_out_shape(&bad, EM_SHAPE(4), &os), EM_ERR_ARG);
    em_error_clear();
}
